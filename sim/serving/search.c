/* --find-max-rate: the highest offered rate at which serving.slo.attainment of the requests meet
 * the TTFT and TPOT limits and the queue does not grow. The same seed draws the same requests at
 * every rate (only the gaps scale), so attainment falls with the rate almost monotonically and a
 * doubling search followed by bisection (to 1 %) finds the edge. */
#include "serving/serving_internal.h"

#include <string.h>

/* Runs at `rate`; `meets`: the SLO holds. The result is kept in `keep` when it does. */
static bool srv_try(const cfg_cluster *c, const cfg_workload *w, double rate, srv_max_rate *out,
                    bool *meets, GError **err)
{
  srv_options o = {.rate = rate};
  srv_result r;
  out->runs++;
  if (!srv_simulate(c, w, &o, &r, err)) {
    srv_result_clear(&r);
    return false;
  }
  *meets = r.slo_attainment >= w->serving.slo.attainment && !r.saturated;
  if (*meets) {
    srv_result_clear(&out->at);
    out->at = r;
    out->max_rate = rate;
  } else {
    srv_result_clear(&r);
  }
  return true;
}

bool srv_find_max_rate(const cfg_cluster *c, const cfg_workload *w, srv_max_rate *out,
                       GError **err)
{
  memset(out, 0, sizeof *out);
  const cfg_requests *q = &w->serving.requests;
  if (q->trace || q->concurrency > 0 || q->arrival == CFG_ARRIVAL_BURST) {
    g_autofree char *where = cfg_doc_where(w->doc, "serving.requests");
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: --find-max-rate varies the arrival rate: it needs serving.requests.arrival "
                "poisson, gamma or uniform (not a trace, a closed loop or a burst)",
                where);
    return false;
  }
  double lo = 0, hi = q->rate > 0 ? q->rate : 1, floor = hi / 1024;
  bool meets = true;
  for (int i = 0; i < 24 && meets; i++) {
    if (!srv_try(c, w, hi, out, &meets, err))
      return false;
    if (meets) {
      lo = hi;
      hi *= 2;
    }
  }
  while (hi - lo > 0.01 * hi && hi > floor) {
    double mid = (lo + hi) / 2;
    if (!srv_try(c, w, mid, out, &meets, err))
      return false;
    if (meets)
      lo = mid;
    else
      hi = mid;
  }
  return true;
}

void srv_max_rate_clear(srv_max_rate *m)
{
  srv_result_clear(&m->at);
  memset(m, 0, sizeof *m);
}
