/* Schedules: building phases, their analytic cost, and the member index for the DES. */
#include "collectives/collectives.h"
#include "collectives/collectives_internal.h"

#include <math.h>
#include <string.h>

double coll_wire_bytes(const coll_xfer *x, int steps)
{
  /* SimGrid message sizes are integers: the closed form uses the same truncated size. */
  return floor(x->bytes * steps);
}

coll_phase *coll_add_phase(coll_builder *b, int steps)
{
  coll_phase ph = {.steps = steps};
  g_array_append_val(b->phases, ph);
  GArray *x = g_array_new(FALSE, FALSE, sizeof(coll_xfer));
  g_ptr_array_add(b->xfers, x);
  return &g_array_index(b->phases, coll_phase, b->phases->len - 1);
}

void coll_add_xfer(coll_builder *b, int src, int dst, double bytes)
{
  coll_xfer x = {.src = src, .dst = dst, .bytes = bytes};
  g_array_append_val(g_ptr_array_index(b->xfers, b->xfers->len - 1), x);
}

/* Uncontended phase time with the phase's own flows sharing links fairly:
 * max over transfers of (latency + bytes / fair share) + (steps - 1) x max latency. */
static double coll_phase_time(const hw_cluster *hw, coll_phase *ph, int *load)
{
  hw_route r;
  double worst = 0, max_lat = 0;
  for (int i = 0; i < ph->nxfers; i++) {
    hw_route_get(hw, ph->xfers[i].src, ph->xfers[i].dst, &r);
    for (int h = 0; h < r.nhops; h++)
      load[r.hops[h]]++;
  }
  for (int i = 0; i < ph->nxfers; i++) {
    const coll_xfer *x = &ph->xfers[i];
    hw_route_get(hw, x->src, x->dst, &r);
    double rate = INFINITY;
    for (int h = 0; h < r.nhops; h++) {
      const hw_link *l = hw_link_get(hw, HW_HOP_LINK(r.hops[h]));
      double share = l->policy == HW_LINK_FATPIPE ? l->bandwidth : l->bandwidth / load[r.hops[h]];
      rate = MIN(rate, share);
    }
    double wire = coll_wire_bytes(x, ph->steps);
    double t = r.latency + (wire > 0 && isfinite(rate) ? wire / rate : 0);
    worst = MAX(worst, t);
    max_lat = MAX(max_lat, r.latency);
  }
  for (int i = 0; i < ph->nxfers; i++) {
    hw_route_get(hw, ph->xfers[i].src, ph->xfers[i].dst, &r);
    for (int h = 0; h < r.nhops; h++)
      load[r.hops[h]] = 0;
  }
  ph->extra_latency = (ph->steps - 1) * max_lat;
  return worst + ph->extra_latency;
}

static void coll_index_members(coll_schedule *s, coll_phase *ph)
{
  ph->member_off = g_new0(int, s->n + 1);
  for (int i = 0; i < ph->nxfers; i++) {
    ph->member_off[coll_member(s, ph->xfers[i].src) + 1]++;
    if (ph->xfers[i].dst != ph->xfers[i].src)
      ph->member_off[coll_member(s, ph->xfers[i].dst) + 1]++;
  }
  for (int m = 0; m < s->n; m++)
    ph->member_off[m + 1] += ph->member_off[m];
  ph->member_idx = g_new(int, MAX(ph->member_off[s->n], 1));
  g_autofree int *fill = g_memdup2(ph->member_off, sizeof(int) * (gsize)s->n);
  for (int i = 0; i < ph->nxfers; i++) {
    ph->member_idx[fill[coll_member(s, ph->xfers[i].src)]++] = i;
    if (ph->xfers[i].dst != ph->xfers[i].src)
      ph->member_idx[fill[coll_member(s, ph->xfers[i].dst)]++] = i;
  }
}

int coll_member(const coll_schedule *s, int rank)
{
  return GPOINTER_TO_INT(g_hash_table_lookup(s->member_of, GINT_TO_POINTER(rank))) - 1;
}

coll_schedule *coll_schedule_new(const hw_cluster *hw, prog_coll op, const int *ranks, int n,
                                 double bytes, coll_algo algo, bool fold)
{
  coll_schedule *s = g_new0(coll_schedule, 1);
  s->op = op;
  s->n = n;
  s->ranks = g_memdup2(ranks, sizeof(int) * (gsize)n);
  s->bytes = bytes;
  s->member_of = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int i = 0; i < n; i++)
    g_hash_table_insert(s->member_of, GINT_TO_POINTER(ranks[i]), GINT_TO_POINTER(i + 1));
  s->channels = 1;
  if (n <= 1 || (op != PROG_COLL_SENDRECV && bytes <= 0)) {
    s->algo = algo == COLL_ALGO_AUTO ? COLL_ALGO_RING : algo;
    return s; /* nothing moves: zero time */
  }
  coll_builder b = {.hw = hw, .s = s, .fold = fold,
                    .phases = g_array_new(FALSE, FALSE, sizeof(coll_phase)),
                    .xfers = g_ptr_array_new()};
  coll_plan(&b, algo);
  s->nphases = (int)b.phases->len;
  s->phases = (coll_phase *)g_array_free(b.phases, FALSE);
  g_autofree int *load = g_new0(int, 2 * (gsize)hw_nlinks(hw));
  s->overhead = hw_efficiency(hw)->comm_overhead;
  s->time = s->overhead;
  for (int i = 0; i < s->nphases; i++) {
    GArray *x = g_ptr_array_index(b.xfers, i);
    s->phases[i].nxfers = (int)x->len;
    s->phases[i].xfers = (coll_xfer *)g_array_free(x, FALSE);
    s->time += coll_phase_time(hw, &s->phases[i], load);
    coll_index_members(s, &s->phases[i]);
  }
  g_ptr_array_free(b.xfers, TRUE);
  return s;
}

void coll_schedule_free(coll_schedule *s)
{
  if (!s)
    return;
  for (int i = 0; i < s->nphases; i++) {
    g_free(s->phases[i].xfers);
    g_free(s->phases[i].member_off);
    g_free(s->phases[i].member_idx);
  }
  g_free(s->phases);
  g_free(s->ranks);
  g_hash_table_destroy(s->member_of);
  g_free(s);
}

double coll_busbw_factor(prog_coll op, int n)
{
  if (n <= 1)
    return 1.0;
  switch (op) {
  case PROG_COLL_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case PROG_COLL_ALLGATHER:
  case PROG_COLL_REDUCESCATTER:
  case PROG_COLL_ALLTOALL:
    return (double)(n - 1) / n;
  default:
    return 1.0;
  }
}

bool coll_group_check(const hw_cluster *hw, const int *ranks, int n, GError **err)
{
  g_autofree char *seen = g_new0(char, hw_gpus(hw));
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= hw_gpus(hw)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "process group: rank %d is not a GPU of the cluster (it has %d GPUs, 0..%d)",
                  ranks[i], hw_gpus(hw), hw_gpus(hw) - 1);
      return false;
    }
    if (seen[ranks[i]]++) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "process group: rank %d appears twice",
                  ranks[i]);
      return false;
    }
  }
  return true;
}
