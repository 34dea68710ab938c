/* KV cache transfers of disaggregated serving as flows over the cluster's links.
 *
 * The links and routes are the hardware module's (the table the DES's SimGrid platform is built
 * from, bandwidths as NCCL reaches them), so a transfer here crosses the same NVLink, NIC, port
 * and switch uplinks as a collective of `dlsim run`. Flows that share a link direction share
 * its bandwidth max-min fairly (progressive filling), recomputed whenever a flow starts or ends;
 * a FATPIPE link (a non-blocking switch) only caps each flow. The serving loop is not SimGrid
 * (see serving.h), and a transfer is a single bulk copy with no protocol of its own (NIXL and
 * Mooncake's transfer engine write the blocks with RDMA), so a small fluid model here is exact
 * for what it models and costs microseconds; the route's latency is paid once per transfer, by
 * the caller, after its bytes. */
#include "serving/serving_internal.h"

#include <math.h>
#include <string.h>

typedef struct {
  double remaining, rate, cap; /* bytes; bytes/s; FATPIPE bound of the route */
  int owner, nres;
  int res[G_N_ELEMENTS(((hw_route *)0)->hops)]; /* SHARED hops of the route */
} srv_flow;

struct srv_flows {
  const hw_cluster *hw;
  GArray *flows;   /* srv_flow */
  double now;      /* when `remaining` was last brought up to date */
  double *left;    /* per hop: capacity not yet given out (progressive filling) */
  int *users;      /* per hop: flows on it not yet fixed */
  GArray *touched; /* hops of the current flows */
};

srv_flows *srv_flows_new(const hw_cluster *hw)
{
  srv_flows *f = g_new0(srv_flows, 1);
  int hops = 2 * hw_nlinks(hw);
  f->hw = hw;
  f->flows = g_array_new(FALSE, FALSE, sizeof(srv_flow));
  f->left = g_new0(double, hops);
  f->users = g_new0(int, hops);
  f->touched = g_array_new(FALSE, FALSE, sizeof(int));
  return f;
}

void srv_flows_free(srv_flows *f)
{
  if (!f)
    return;
  g_array_free(f->flows, TRUE);
  g_array_free(f->touched, TRUE);
  g_free(f->left);
  g_free(f->users);
  g_free(f);
}

int srv_flows_active(const srv_flows *f)
{
  return (int)f->flows->len;
}

static srv_flow *srv_flow_at(const srv_flows *f, guint i)
{
  return &g_array_index(f->flows, srv_flow, i);
}

/* Gives `rate` to flow `fl`: its hops have that much less to share, and one user less. */
static void srv_flow_fix(srv_flows *f, srv_flow *fl, double rate)
{
  fl->rate = rate;
  for (int k = 0; k < fl->nres; k++) {
    f->left[fl->res[k]] -= rate;
    f->users[fl->res[k]]--;
  }
}

/* Progressive filling: the most constrained hop (or a flow's own cap) fixes its flows at its
 * fair share, and the rest share what is left, until every flow has a rate. */
static void srv_flows_share(srv_flows *f)
{
  g_array_set_size(f->touched, 0);
  for (guint i = 0; i < f->flows->len; i++) {
    srv_flow *fl = srv_flow_at(f, i);
    fl->rate = -1;
    for (int k = 0; k < fl->nres; k++) {
      int h = fl->res[k];
      if (f->users[h]++ == 0) {
        f->left[h] = hw_link_get(f->hw, HW_HOP_LINK(h))->bandwidth;
        g_array_append_val(f->touched, h);
      }
    }
  }
  for (guint unfixed = f->flows->len; unfixed > 0;) {
    double share = INFINITY;
    int hop = -1;
    for (guint t = 0; t < f->touched->len; t++) {
      int h = g_array_index(f->touched, int, t);
      if (f->users[h] > 0 && f->left[h] / f->users[h] < share) {
        share = f->left[h] / f->users[h];
        hop = h;
      }
    }
    srv_flow *capped = NULL;
    for (guint i = 0; i < f->flows->len; i++) {
      srv_flow *fl = srv_flow_at(f, i);
      if (fl->rate < 0 && fl->cap < share) {
        share = fl->cap;
        capped = fl;
      }
    }
    bool unbounded = hop < 0 && !capped; /* routes of non-blocking links only */
    for (guint i = 0; i < f->flows->len; i++) {
      srv_flow *fl = srv_flow_at(f, i);
      bool on_hop = unbounded;
      for (int k = 0; k < fl->nres && !capped; k++)
        on_hop = on_hop || fl->res[k] == hop;
      if (fl->rate < 0 && (fl == capped || on_hop)) {
        srv_flow_fix(f, fl, MAX(share, 0.0));
        unfixed--;
      }
    }
  }
}

/* Brings every flow's remaining bytes to `now` at the current rates. */
static void srv_flows_progress(srv_flows *f, double now)
{
  double dt = now - f->now;
  for (guint i = 0; i < f->flows->len && dt > 0; i++) {
    srv_flow *fl = srv_flow_at(f, i);
    fl->remaining -= fl->rate * dt;
  }
  f->now = MAX(f->now, now);
}

double srv_flows_start(srv_flows *f, double now, int src, int dst, double bytes, int owner)
{
  hw_route r;
  hw_route_get(f->hw, src, dst, &r);
  srv_flows_progress(f, now);
  srv_flow fl = {.remaining = bytes, .cap = INFINITY, .owner = owner};
  for (int k = 0; k < r.nhops; k++) {
    const hw_link *l = hw_link_get(f->hw, HW_HOP_LINK(r.hops[k]));
    if (l->policy == HW_LINK_FATPIPE)
      fl.cap = MIN(fl.cap, l->bandwidth);
    else
      fl.res[fl.nres++] = r.hops[k];
  }
  g_array_append_val(f->flows, fl);
  srv_flows_share(f);
  return r.latency;
}

double srv_flows_next(const srv_flows *f)
{
  double t = INFINITY;
  for (guint i = 0; i < f->flows->len; i++) {
    const srv_flow *fl = srv_flow_at(f, i);
    if (fl->rate > 0)
      t = MIN(t, f->now + MAX(fl->remaining, 0.0) / fl->rate);
  }
  return t;
}

void srv_flows_advance(srv_flows *f, double now, GArray *ended)
{
  srv_flows_progress(f, now);
  guint k = 0;
  for (guint i = 0; i < f->flows->len; i++) {
    srv_flow *fl = srv_flow_at(f, i);
    /* what rounding leaves of a flow due now: under a nanosecond at its rate */
    if (fl->remaining <= fl->rate * 1e-9)
      g_array_append_val(ended, fl->owner);
    else
      g_array_index(f->flows, srv_flow, k++) = *fl;
  }
  g_array_set_size(f->flows, k);
  srv_flows_share(f);
}
