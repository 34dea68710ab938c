/* Predicting a table and fitting the NCCL parameters to it.
 *
 * The fit minimises the mean absolute log error of time over the rows (robust to the odd
 * warm-up row that nccl-tests tables carry) with Nelder-Mead, in a
 * space where every parameter is free (logit of efficiencies, log of latencies and chunks), and
 * only over the parameters the table constrains: a one-node table says nothing about the
 * network, a table without NVLS nothing about NVLS. One table cannot pin a dozen parameters
 * down, so each is held near its starting value (the documented prior) by a penalty on its log
 * ratio: the fit moves a parameter only as far as the data asks, which keeps the values
 * physical and lets them carry over to other tables. */
#include "calibration/calibration_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool calib_predict(const cfg_cluster *c, const calib_target *t, const calib_table *tab,
                   double *out, GError **err)
{
  hw_cluster *hw = hw_cluster_new(c);
  eng_options opt = {.kind = t->engine, .algo = t->algo, .proto = t->proto,
                     .runtime = t->runtime};
  bool ok = true;
  /* a streamed table (osu_bw) needs the schedule's parts; one pair of GPUs contends with
   * nothing, so the closed form is the DES's answer */
  bool closed = t->engine == ENG_ANALYTIC || tab->window > 1;
  coll_planner *pl = closed ? coll_planner_new(hw, t->algo, t->proto, true) : NULL;
  if (pl)
    coll_planner_set_runtime(pl, t->runtime);
  g_autofree int *ranks = g_new(int, MAX(t->group, 2));
  int n = t->op == PROG_COLL_SENDRECV ? 2 : t->group;
  for (int i = 0; i < n; i++)
    ranks[i] = i;
  for (guint i = 0; ok && i < tab->points->len; i++) {
    double size = g_array_index(tab->points, calib_point, i).size;
    if (pl) {
      const coll_schedule *s = coll_planner_get(pl, t->op, ranks, n, 0, size, NULL, err);
      ok = s != NULL;
      out[i] = s ? coll_schedule_streamed(s, t->runtime, tab->window) : 0;
    } else {
      eng_coll_result r;
      ok = eng_collective_time(hw, &opt, t->op, t->gpus, t->group, size, &r, err);
      out[i] = r.time;
    }
  }
  coll_planner_free(pl);
  hw_cluster_free(hw);
  return ok;
}

void calib_errors_of(const calib_table *tab, const double *predicted, calib_errors *e)
{
  int n = (int)tab->points->len;
  g_autofree double *all = g_new(double, n), *large = g_new(double, n), *small = g_new(double, n);
  g_autofree double *signed_large = g_new(double, n);
  memset(e, 0, sizeof *e);
  for (int i = 0; i < n; i++) {
    const calib_point *p = &g_array_index(tab->points, calib_point, i);
    double err = fabs(p->time / predicted[i] - 1.0); /* busbw error */
    all[e->n++] = err;
    if (p->size >= 1048576) {
      signed_large[e->n_large] = p->time / predicted[i] - 1.0;
      large[e->n_large++] = err;
      e->worst_large = MAX(e->worst_large, err);
    } else if (p->size < 65536) {
      small[e->n_small++] = err;
      e->worst_small = MAX(e->worst_small, err);
    }
  }
  e->median_all = calib_median(all, e->n);
  e->median_large = calib_median(large, e->n_large);
  e->signed_large = calib_median(signed_large, e->n_large);
  e->median_small = calib_median(small, e->n_small);
}

/* ---- the fit ------------------------------------------------------------------------------ */

/* Weight of the prior: moving one parameter by a factor 2 costs as much as 5 % more error on
 * every row. */
#define CALIB_PRIOR_WEIGHT 0.02

typedef struct {
  cfg_cluster *c;
  const calib_target *t;
  const calib_table *tab;
  double *pred;
} calib_nccl_fit;

/* Mean |log| error of time over the rows, with the parameters in their slots. */
static double calib_nccl_loss(void *ctx)
{
  calib_nccl_fit *f = ctx;
  if (!calib_predict(f->c, f->t, f->tab, f->pred, NULL))
    return INFINITY;
  double sum = 0;
  for (guint i = 0; i < f->tab->points->len; i++)
    sum += fabs(log(f->pred[i] / g_array_index(f->tab->points, calib_point, i).time));
  return sum / f->tab->points->len;
}

static bool calib_wanted(char *const *fit, const char *name)
{
  static const char *const latencies[] = {"base_latency", "hop_latency", NULL};
  char *const *list = fit ? fit : (char *const *)latencies;
  for (int i = 0; list[i]; i++)
    if (g_str_has_prefix(name, list[i]))
      return true;
  return false;
}

static void calib_add(calib_search *s, char *const *fit, double *slot, bool fraction, double lo,
                      double hi, const char *name)
{
  if (calib_wanted(fit, name))
    calib_search_add(s, slot, fraction, lo, hi, name);
}

void calib_nccl_candidates(calib_search *s, cfg_nccl *n, char *const *fit, double eff_lo)
{
  char name[48];
  calib_add(s, fit, &n->link_efficiency[CFG_LINK_INTRA], true, eff_lo, 0.99, "link_efficiency.intra");
  calib_add(s, fit, &n->link_efficiency[CFG_LINK_NETWORK], true, eff_lo, 0.99, "link_efficiency.network");
  calib_add(s, fit, &n->nvls_efficiency, true, eff_lo, 0.99, "nvls_efficiency");
  calib_add(s, fit, &n->p2p_efficiency, true, eff_lo, 0.99, "p2p_efficiency");
  calib_add(s, fit, &n->nvls_latency, false, 1e-6, 200e-6, "nvls_latency");
  /* no limit (0) is no point to scale from: the search starts at 1 TB/s */
  if (n->copy_bandwidth <= 0 && calib_wanted(fit, "copy_bandwidth"))
    n->copy_bandwidth = 1e12;
  calib_add(s, fit, &n->copy_bandwidth, false, 100e9, 10e12, "copy_bandwidth");
  for (int p = 0; p < CFG_NPROTOS; p++) {
    g_snprintf(name, sizeof name, "base_latency.%s", cfg_proto_name((cfg_proto)p));
    calib_add(s, fit, &n->base_latency[p], false, 1e-6, 100e-6, name);
  }
  for (int cl = 0; cl < CFG_NLINKCLASSES; cl++)
    for (int p = 0; p < CFG_NPROTOS; p++) {
      g_snprintf(name, sizeof name, "hop_latency.%s.%s", cl ? "network" : "intra", cfg_proto_name((cfg_proto)p));
      calib_add(s, fit, &n->hop_latency[cl][p], false, 0.05e-6, 30e-6, name);
    }
  for (int p = 0; p < CFG_NPROTOS; p++) {
    g_snprintf(name, sizeof name, "chunk.%s", cfg_proto_name((cfg_proto)p));
    calib_add(s, fit, &n->chunk[p], false, 4096, 8 << 20, name);
  }
}

bool calib_fit_nccl(cfg_cluster *c, const calib_target *t, const calib_table *tab,
                    char *const *fit, calib_fit_report *rep, GError **err)
{
  calib_target analytic = *t;
  analytic.engine = ENG_ANALYTIC; /* the fit runs thousands of predictions */
  calib_nccl_fit f = {.c = c, .t = &analytic, .tab = tab};
  f.pred = g_new(double, tab->points->len);
  memset(rep, 0, sizeof *rep);
  bool ok = calib_predict(c, &analytic, tab, f.pred, err);
  if (ok) {
    calib_errors_of(tab, f.pred, &rep->before);
    calib_search s = {.prior_weight = CALIB_PRIOR_WEIGHT, .loss = calib_nccl_loss, .ctx = &f};
    calib_nccl_candidates(&s, &c->nccl, fit, 0.3);
    calib_search_keep_sensitive(&s);
    calib_search_run(&s, 12, 600, 1000);
    calib_nccl_loss(&f); /* the predictions of the values left in place */
    calib_errors_of(tab, f.pred, &rep->after);
    rep->nparams = s.nparams;
    for (int i = 0; i < s.nparams; i++)
      g_strlcpy(rep->names[i], s.params[i].name, sizeof rep->names[i]);
    rep->evaluations = s.evals;
  }
  g_free(f.pred);
  return ok;
}
