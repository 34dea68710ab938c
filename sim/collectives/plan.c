/* Plans: building phases of transfers, then the size-independent part of their cost (routes,
 * fair shares, distinct kinds of transfer) and the member index the DES looks transfers up by. */
#include "collectives/collectives_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int coll_cmp_int(const void *a, const void *b)
{
  return *(const int *)a - *(const int *)b;
}

void coll_layout_of(const hw_cluster *hw, const int *ranks, int n, coll_layout *l)
{
  l->sorted = g_memdup2(ranks, sizeof(int) * (gsize)n);
  qsort(l->sorted, (size_t)n, sizeof(int), coll_cmp_int);
  l->node_start = g_new(int, n + 1);
  l->nnodes = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || hw_node_of(hw, l->sorted[i]) != hw_node_of(hw, l->sorted[i - 1]))
      l->node_start[l->nnodes++] = i;
  l->node_start[l->nnodes] = n;
  l->per_node = n / l->nnodes;
  for (int k = 0; k < l->nnodes; k++)
    if (l->node_start[k + 1] - l->node_start[k] != l->per_node)
      l->per_node = 0;
}

void coll_layout_clear(coll_layout *l)
{
  g_free(l->sorted);
  g_free(l->node_start);
  memset(l, 0, sizeof *l);
}

int coll_channels(const hw_cluster *hw, const coll_layout *l)
{
  if (l->nnodes <= 1)
    return 1;
  int most = 0;
  for (int k = 0; k < l->nnodes; k++)
    most = MAX(most, l->node_start[k + 1] - l->node_start[k]);
  const cfg_cluster *c = hw_config(hw);
  int nics = MAX(c->node.nics_per_node, 1);
  return MAX(1, MIN(MIN(most, nics), c->nccl.max_channels));
}

int coll_net_if(const coll_layout *l, int n)
{
  return l->nnodes > 1 ? n : 0;
}

int coll_intra_if(const coll_layout *l, int n)
{
  return l->nnodes > 1 ? 0 : n;
}

int coll_channel_entry(int c, int channels, int members)
{
  return (int)((long)c * members / channels) % members;
}

coll_phase *coll_add_phase(coll_builder *b, int steps, int intra, int net, bool pipelined)
{
  coll_phase ph = {.steps = MAX(steps, 1), .stages = {MAX(intra, 0), MAX(net, 0)},
                   .pipelined = pipelined};
  if (ph.stages[0] + ph.stages[1] == 0)
    ph.stages[0] = 1;
  g_array_append_val(b->phases, ph);
  g_ptr_array_add(b->xfers, g_array_new(FALSE, FALSE, sizeof(coll_xfer)));
  return &g_array_index(b->phases, coll_phase, b->phases->len - 1);
}

void coll_add_xfer(coll_builder *b, int src, int dst, double frac)
{
  if (src == dst || frac <= 0)
    return;
  coll_xfer x = {.src = src, .dst = dst, .frac = frac};
  g_array_append_val(g_ptr_array_index(b->xfers, b->xfers->len - 1), x);
}

/* A member by its endpoint. The plan keeps them sorted by endpoint and searches them: a hash
 * table per plan (made, filled and freed for every group planned) was a fifth of planning. */
typedef struct coll_member_at {
  int endpoint, member;
} coll_member_at;

/* Where `endpoint` is, or would be inserted, among the sorted members. */
static int coll_member_pos(const coll_plan *p, int endpoint)
{
  int lo = 0, hi = p->nmembers;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (p->by_endpoint[mid].endpoint < endpoint)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int coll_member(const coll_plan *p, int endpoint)
{
  int i = coll_member_pos(p, endpoint);
  return i < p->nmembers && p->by_endpoint[i].endpoint == endpoint ? p->by_endpoint[i].member
                                                                   : -1;
}

static void coll_add_member(coll_plan *p, int endpoint)
{
  int i = coll_member_pos(p, endpoint);
  if (i < p->nmembers && p->by_endpoint[i].endpoint == endpoint)
    return;
  if (p->nmembers == p->members_room) {
    p->members_room = MAX(8, 2 * p->members_room);
    p->members = g_renew(int, p->members, p->members_room);
    p->by_endpoint = g_renew(coll_member_at, p->by_endpoint, p->members_room);
  }
  memmove(&p->by_endpoint[i + 1], &p->by_endpoint[i],
          sizeof(coll_member_at) * (gsize)(p->nmembers - i));
  p->by_endpoint[i] = (coll_member_at){endpoint, p->nmembers};
  p->members[p->nmembers++] = endpoint;
}

static int coll_member_cmp(const void *a, const void *b)
{
  const coll_member_at *x = a, *y = b;
  return (x->endpoint > y->endpoint) - (x->endpoint < y->endpoint);
}

/* The group's ranks as its first members, sorted once (a rank given twice counts once). */
static void coll_add_ranks(coll_plan *p, const int *ranks, int n)
{
  p->members_room = MAX(n, 1);
  p->members = g_new(int, p->members_room);
  p->by_endpoint = g_new(coll_member_at, p->members_room);
  for (int i = 0; i < n; i++)
    p->by_endpoint[i] = (coll_member_at){ranks[i], i};
  qsort(p->by_endpoint, (size_t)n, sizeof(coll_member_at), coll_member_cmp);
  bool distinct = true;
  for (int i = 1; i < n && distinct; i++)
    distinct = p->by_endpoint[i].endpoint != p->by_endpoint[i - 1].endpoint;
  if (distinct) {
    memcpy(p->members, ranks, sizeof(int) * (gsize)n);
    p->nmembers = n;
    return;
  }
  for (int i = 0; i < n; i++)
    coll_add_member(p, ranks[i]);
}

/* Nodes the group spans: its ranks in order (the members sorted by endpoint) change node. */
static int coll_node_count(const hw_cluster *hw, const coll_plan *p)
{
  int count = 0, last = -1;
  for (int i = 0; i < p->nmembers; i++) {
    int node = hw_node_of(hw, p->by_endpoint[i].endpoint);
    count += node != last;
    last = node;
  }
  return count;
}

/* Routes, per-link loads, fair shares and the distinct kinds of transfer of one phase. */
static void coll_phase_cost(const hw_cluster *hw, coll_phase *ph, int *load)
{
  hw_route *routes = g_new(hw_route, MAX(ph->nxfers, 1));
  for (int i = 0; i < ph->nxfers; i++) {
    hw_route_get(hw, ph->xfers[i].src, ph->xfers[i].dst, &routes[i]);
    for (int h = 0; h < routes[i].nhops; h++)
      load[routes[i].hops[h]]++;
  }
  GArray *kinds = g_array_new(FALSE, FALSE, sizeof(coll_kind));
  ph->max_alpha = 0;
  ph->min_rate = INFINITY;
  ph->max_frac = 0;
  for (int i = 0; i < ph->nxfers; i++) {
    const hw_route *r = &routes[i];
    double rate = INFINITY;
    for (int h = 0; h < r->nhops; h++) {
      const hw_link *l = hw_link_get(hw, HW_HOP_LINK(r->hops[h]));
      rate = MIN(rate, l->policy == HW_LINK_FATPIPE ? l->bandwidth : l->bandwidth / load[r->hops[h]]);
    }
    coll_kind k = {.alpha = r->latency, .frac = ph->xfers[i].frac, .rate = rate,
                   .cls = hw_route_class(r)};
    ph->max_alpha = MAX(ph->max_alpha, k.alpha);
    ph->class_alpha[k.cls] = MAX(ph->class_alpha[k.cls], k.alpha);
    ph->min_rate = MIN(ph->min_rate, rate);
    ph->max_frac = MAX(ph->max_frac, k.frac);
    bool seen = false;
    for (guint j = 0; j < kinds->len && !seen; j++) {
      const coll_kind *o = &g_array_index(kinds, coll_kind, j);
      seen = o->alpha == k.alpha && o->frac == k.frac && o->rate == k.rate && o->cls == k.cls;
    }
    if (!seen)
      g_array_append_val(kinds, k);
  }
  for (int i = 0; i < ph->nxfers; i++)
    for (int h = 0; h < routes[i].nhops; h++)
      load[routes[i].hops[h]] = 0;
  ph->nkinds = (int)kinds->len;
  ph->kinds = (coll_kind *)g_array_free(kinds, FALSE);
  g_free(routes);
}

static void coll_index_members(coll_plan *p, coll_phase *ph)
{
  ph->member_off = g_new0(int, p->nmembers + 1);
  for (int i = 0; i < ph->nxfers; i++) {
    ph->member_off[coll_member(p, ph->xfers[i].src) + 1]++;
    ph->member_off[coll_member(p, ph->xfers[i].dst) + 1]++;
  }
  for (int m = 0; m < p->nmembers; m++)
    ph->member_off[m + 1] += ph->member_off[m];
  ph->member_idx = g_new(int, MAX(ph->member_off[p->nmembers], 1));
  g_autofree int *fill = g_memdup2(ph->member_off, sizeof(int) * (gsize)p->nmembers);
  for (int i = 0; i < ph->nxfers; i++) {
    ph->member_idx[fill[coll_member(p, ph->xfers[i].src)]++] = i;
    ph->member_idx[fill[coll_member(p, ph->xfers[i].dst)]++] = i;
  }
}

static void coll_count_sends(const coll_plan *p, coll_phase *ph)
{
  g_autofree int *sends = g_new0(int, MAX(p->nmembers, 1));
  ph->max_sends = 0;
  for (int i = 0; i < ph->nxfers; i++) {
    int m = coll_member(p, ph->xfers[i].src);
    sends[m]++;
    ph->max_sends = MAX(ph->max_sends, sends[m]);
  }
}

static void coll_finish(coll_builder *b, int *load)
{
  coll_plan *p = b->p;
  p->nphases = (int)b->phases->len;
  p->phases = (coll_phase *)g_array_free(b->phases, FALSE);
  for (int i = 0; i < p->nphases; i++) {
    GArray *x = g_ptr_array_index(b->xfers, i);
    p->phases[i].nxfers = (int)x->len;
    p->phases[i].xfers = (coll_xfer *)g_array_free(x, FALSE);
    for (int k = 0; k < p->phases[i].nxfers; k++) {
      coll_add_member(p, p->phases[i].xfers[k].src);
      coll_add_member(p, p->phases[i].xfers[k].dst);
    }
  }
  g_ptr_array_free(b->xfers, TRUE);
  g_autofree int *own = load ? NULL : g_new0(int, 2 * (gsize)hw_nlinks(b->hw));
  if (!load)
    load = own;
  for (int i = 0; i < p->nphases; i++) {
    coll_phase_cost(b->hw, &p->phases[i], load);
    coll_index_members(p, &p->phases[i]);
    coll_count_sends(p, &p->phases[i]);
  }
}

coll_plan *coll_plan_new(const hw_cluster *hw, prog_coll op, const int *ranks, int n,
                         coll_algo algo, const double *vbytes, bool fold)
{
  return coll_plan_build(hw, op, ranks, n, algo, vbytes, fold, 1, NULL);
}

coll_plan *coll_plan_build(const hw_cluster *hw, prog_coll op, const int *ranks, int n,
                           coll_algo algo, const double *vbytes, bool fold, int leaders,
                           int *load)
{
  coll_plan *p = g_new0(coll_plan, 1);
  p->op = op;
  p->algo = algo;
  p->n = n;
  p->ranks = g_memdup2(ranks, sizeof(int) * (gsize)n);
  p->channels = 1;
  p->absolute = vbytes != NULL;
  coll_add_ranks(p, ranks, n);
  p->nnodes = coll_node_count(hw, p);
  coll_builder b = {.hw = hw, .p = p, .fold = fold, .leaders = leaders,
                    .phases = g_array_new(FALSE, FALSE, sizeof(coll_phase)),
                    .xfers = g_ptr_array_new()};
  if (n > 1) {
    switch (algo) {
    case COLL_ALGO_RING:
      if (op == PROG_COLL_BROADCAST || op == PROG_COLL_REDUCE)
        coll_build_chain(&b, op == PROG_COLL_REDUCE);
      else
        coll_build_ring(&b);
      break;
    case COLL_ALGO_TREE: coll_build_tree(&b); break;
    case COLL_ALGO_RHD: coll_build_rhd(&b); break;
    case COLL_ALGO_HIERARCHICAL: coll_build_hierarchical(&b); break;
    case COLL_ALGO_NVLS: coll_build_nvls(&b); break;
    case COLL_ALGO_NVLS_TREE: coll_build_nvls_tree(&b); break;
    case COLL_ALGO_SHARP: coll_build_sharp(&b); break;
    case COLL_ALGO_PAIRWISE: coll_build_alltoall(&b, true, vbytes); break;
    case COLL_ALGO_DIRECT:
      if (op == PROG_COLL_SENDRECV) {
        bool same = hw_node_of(hw, ranks[0]) == hw_node_of(hw, ranks[1]);
        coll_add_phase(&b, 1, same, !same, false);
        coll_add_xfer(&b, ranks[0], ranks[1], coll_p2p_scale(hw, ranks, 2));
      } else {
        coll_build_alltoall(&b, false, vbytes);
      }
      break;
    case COLL_ALGO_RD: coll_build_rd(&b); break;
    case COLL_ALGO_MULTI_LEADER: coll_build_multi_leader(&b); break;
    case COLL_ALGO_AUTO:
    case COLL_NALGOS:
      break;
    }
  }
  coll_finish(&b, load);
  return p;
}

coll_plan *coll_plan_moved(const coll_plan *from, const hw_cluster *hw, int shift, int *load)
{
  coll_plan *p = g_memdup2(from, sizeof *from);
  p->ranks = g_memdup2(from->ranks, sizeof(int) * (gsize)from->n);
  p->members = g_memdup2(from->members, sizeof(int) * (gsize)MAX(from->members_room, 1));
  p->by_endpoint = g_memdup2(from->by_endpoint,
                             sizeof(coll_member_at) * (gsize)MAX(from->members_room, 1));
  for (int i = 0; i < p->n; i++)
    p->ranks[i] += shift;
  for (int m = 0; m < p->nmembers; m++) {
    p->members[m] += shift;
    p->by_endpoint[m].endpoint += shift; /* the order stays */
  }
  p->phases = g_memdup2(from->phases, sizeof(coll_phase) * (gsize)MAX(from->nphases, 1));
  g_autofree int *own = load ? NULL : g_new0(int, 2 * (gsize)hw_nlinks(hw));
  for (int i = 0; i < p->nphases; i++) {
    coll_phase *ph = &p->phases[i];
    const coll_phase *f = &from->phases[i];
    ph->xfers = g_memdup2(f->xfers, sizeof(coll_xfer) * (gsize)MAX(f->nxfers, 1));
    for (int k = 0; k < ph->nxfers; k++) {
      ph->xfers[k].src += shift;
      ph->xfers[k].dst += shift;
    }
    ph->member_off = g_memdup2(f->member_off, sizeof(int) * (gsize)(p->nmembers + 1));
    ph->member_idx =
        g_memdup2(f->member_idx, sizeof(int) * (gsize)MAX(f->member_off[p->nmembers], 1));
    /* the routes are the moved group's own */
    memset(ph->class_alpha, 0, sizeof ph->class_alpha);
    coll_phase_cost(hw, ph, load ? load : own);
  }
  return p;
}

void coll_plan_free(coll_plan *p)
{
  if (!p)
    return;
  for (int i = 0; i < p->nphases; i++) {
    g_free(p->phases[i].xfers);
    g_free(p->phases[i].kinds);
    g_free(p->phases[i].member_off);
    g_free(p->phases[i].member_idx);
  }
  g_free(p->phases);
  g_free(p->ranks);
  g_free(p->members);
  g_free(p->by_endpoint);
  g_free(p);
}

/* ---- crowding ------------------------------------------------------------------------------ */

struct coll_crowd {
  const coll_plan *plan;
  double **alone, **crowded; /* per phase, per transfer: its fair share alone and beside the
                              * siblings */
};

/* Adds `delta` to the load of every hop of a phase's transfers; with `map`, as a group whose
 * member i is map[i] runs them (the plan's own endpoints are members 0..n-1, in group order). */
static void coll_phase_load(const hw_cluster *hw, const coll_plan *p, const coll_phase *ph,
                            const int *map, int *load, int delta)
{
  for (int i = 0; i < ph->nxfers; i++) {
    int src = ph->xfers[i].src, dst = ph->xfers[i].dst;
    if (map) {
      src = map[coll_member(p, src)];
      dst = map[coll_member(p, dst)];
    }
    hw_route r;
    hw_route_get(hw, src, dst, &r);
    for (int h = 0; h < r.nhops; h++)
      load[r.hops[h]] += delta;
  }
}

/* Each transfer's fair share of its route with the links loaded as `load` says. */
static void coll_phase_rates(const hw_cluster *hw, const coll_phase *ph, const int *load,
                             double *rates)
{
  for (int i = 0; i < ph->nxfers; i++) {
    hw_route r;
    hw_route_get(hw, ph->xfers[i].src, ph->xfers[i].dst, &r);
    double rate = INFINITY;
    for (int h = 0; h < r.nhops; h++) {
      const hw_link *l = hw_link_get(hw, HW_HOP_LINK(r.hops[h]));
      double share = l->policy == HW_LINK_FATPIPE ? l->bandwidth : l->bandwidth / load[r.hops[h]];
      rate = MIN(rate, share);
    }
    rates[i] = rate;
  }
}

/* Loads (or unloads, delta -1) phase i of every sibling. A plan that only moves data between
 * its ranks runs, on a sibling group of the same shape, as the same transfers between the
 * sibling's ranks; one with reducing switches is planned again for each sibling. */
static void coll_siblings_load(const hw_cluster *hw, const coll_plan *p, GPtrArray *plans,
                               const int *siblings, int nsiblings, int i, int *load, int delta)
{
  for (int k = 0; k < nsiblings; k++) {
    const coll_plan *o = plans ? g_ptr_array_index(plans, k) : p;
    if (i < o->nphases)
      coll_phase_load(hw, o, &o->phases[i], plans ? NULL : siblings + (gsize)k * p->n, load, delta);
  }
}

coll_crowd *coll_crowd_new(const coll_plan *p, const hw_cluster *hw, bool fold,
                           const int *siblings, int nsiblings)
{
  coll_crowd *c = g_new0(coll_crowd, 1);
  c->plan = p;
  c->alone = g_new0(double *, MAX(p->nphases, 1));
  c->crowded = g_new0(double *, MAX(p->nphases, 1));
  GPtrArray *plans = NULL;
  if (p->nmembers > p->n && nsiblings > 0) {
    plans = g_ptr_array_new_with_free_func((GDestroyNotify)coll_plan_free);
    for (int k = 0; k < nsiblings; k++)
      g_ptr_array_add(plans, coll_plan_new(hw, p->op, siblings + (gsize)k * p->n, p->n, p->algo,
                                           NULL, fold));
  }
  g_autofree int *load = g_new0(int, 2 * (gsize)hw_nlinks(hw));
  for (int i = 0; i < p->nphases; i++) {
    const coll_phase *ph = &p->phases[i];
    c->alone[i] = g_new(double, MAX(ph->nxfers, 1));
    c->crowded[i] = g_new(double, MAX(ph->nxfers, 1));
    coll_phase_load(hw, p, ph, NULL, load, 1);
    coll_phase_rates(hw, ph, load, c->alone[i]);
    coll_siblings_load(hw, p, plans, siblings, nsiblings, i, load, 1);
    coll_phase_rates(hw, ph, load, c->crowded[i]);
    coll_phase_load(hw, p, ph, NULL, load, -1);
    coll_siblings_load(hw, p, plans, siblings, nsiblings, i, load, -1);
  }
  if (plans)
    g_ptr_array_free(plans, TRUE);
  return c;
}

void coll_crowd_free(coll_crowd *c)
{
  if (!c)
    return;
  for (int i = 0; i < c->plan->nphases; i++) {
    g_free(c->alone[i]);
    g_free(c->crowded[i]);
  }
  g_free(c->alone);
  g_free(c->crowded);
  g_free(c);
}

double coll_crowd_time(const coll_crowd *c, const coll_schedule *s, const hw_cluster *hw)
{
  const coll_plan *p = c->plan;
  double eff = hw_config(hw)->nccl.protocol_efficiency[s->proto];
  double size = p->absolute ? 1.0 : s->bytes, extra = 0;
  for (int i = 0; i < p->nphases; i++) {
    const coll_phase *ph = &p->phases[i];
    double alone = 0, crowded = 0;
    for (int k = 0; k < ph->nxfers; k++) {
      double wire = floor(ph->steps * ph->xfers[k].frac * size / eff);
      if (wire > 0) {
        alone = MAX(alone, wire / c->alone[i][k]);
        crowded = MAX(crowded, wire / c->crowded[i][k]);
      }
    }
    extra += crowded - alone;
  }
  return s->time + MAX(extra, 0.0);
}

double coll_schedule_crowded(const coll_schedule *s, const hw_cluster *hw, bool fold,
                             const int *siblings, int nsiblings)
{
  if (!s->plan || s->plan->nphases == 0 || nsiblings == 0)
    return s->time;
  coll_crowd *c = coll_crowd_new(s->plan, hw, fold, siblings, nsiblings);
  double t = coll_crowd_time(c, s, hw);
  coll_crowd_free(c);
  return t;
}
