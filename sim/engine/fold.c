/* Which ranks the DES simulates: one per class of ranks that the program and the topology make
 * equivalent, derived and checked here rather than assumed.
 *
 * Candidates: the groups of families whose collectives all run inside layer passes (tensor,
 * context, expert parallel: their time is the closed form's, whoever runs it). The union of
 * such groups is a block; a block's ranks are siblings, its smallest rank their representative,
 * and sibling i of every block stands for the i-th rank of the others. Simulating only the
 * representatives is exact when the map taking each representative to its i-th sibling is a
 * symmetry of what the DES simulates: same program class, every collective outside the layer
 * passes joins ranks of one position only and maps group onto group member by member, and the
 * routes between members have the same tier, latency and bandwidth. The traffic of siblings
 * then never meets on a link when every GPU has its own NIC and no tier is oversubscribed (each
 * link that can bind belongs to one GPU), which the topology check asks for.
 *
 * A collective outside the layer passes that joins ranks of several positions (context-parallel
 * siblings whose gradients are reduced together with the data-parallel ones) can still fold by
 * mirroring (des.c): a transfer between a simulated rank and one that is not runs as a flow on
 * its real route, the absent end played by a ghost that posts when the simulated end does, as
 * the absent rank would (it runs in step with its representative). That is exact when every
 * member of such a group sees the same transfers in every phase (so they leave it together:
 * the same amounts, over links that can bind of the same bandwidths; a route's tier and
 * latency do not enter the DES, see fold_end),
 * no in-switch reduction needs an absent member, and every GPU link a mirrored transfer
 * crosses carries only transfers that touch a simulated rank: then each link the simulation
 * loads carries what it carries with every rank simulated. */
#include "engine/engine_internal.h"

#include <string.h>

/* Per family: 1 its collectives run inside layer passes only, 2 also or only outside them (or
 * as flows: then the DES simulates them like those outside). */
enum { FOLD_UNUSED, FOLD_INSIDE, FOLD_OUTSIDE };

static uint8_t *fold_family_use(const prog_program *p, const bool *flows)
{
  uint8_t *use = g_new0(uint8_t, MAX(p->families->len, 1u));
  for (guint k = 0; k < p->classes->len; k++) {
    const prog_class *cl = prog_class_at(p, (int)k);
    for (guint i = 0; i < cl->ops->len; i++) {
      const prog_op *op = &g_array_index(cl->ops, prog_op, i);
      if (op->kind == PROG_COMM)
        use[op->family] = MAX(use[op->family], cl->is_template && !(flows && flows[op->family])
                                                   ? FOLD_INSIDE : FOLD_OUTSIDE);
    }
  }
  return use;
}

/* A mask bit per candidate family: past the first 16 families, none is a candidate (a shift
 * past the width of the mask would be undefined). */
#define FOLD_MAX_FAMILIES 16

static bool fold_in(unsigned mask, guint family)
{
  return family < FOLD_MAX_FAMILIES && (mask >> family & 1);
}

static int fold_find(int *parent, int r)
{
  while (parent[r] != r)
    r = parent[r] = parent[parent[r]];
  return r;
}

/* Per rank: its block's representative (smallest rank) and its index among the block's ranks,
 * for the families of `mask`. Returns the number of representatives. */
static int fold_blocks(const prog_program *p, unsigned mask, int *rep, int *idx)
{
  int n = p->nranks;
  for (int r = 0; r < n; r++)
    rep[r] = r;
  for (guint f = 0; f < p->families->len; f++)
    for (int r = 0; fold_in(mask, f) && r < n; r++) {
      const prog_group *g = prog_group_of(p, (int)f, r);
      if (g && g->n > 1)
        rep[fold_find(rep, r)] = fold_find(rep, g->ranks[0]);
    }
  int leads = 0;
  for (int r = 0; r < n; r++)
    rep[r] = fold_find(rep, r);
  /* unions point at any member: make the smallest the representative */
  g_autofree int *low = g_new(int, n);
  for (int r = 0; r < n; r++)
    low[r] = n;
  for (int r = 0; r < n; r++)
    low[rep[r]] = MIN(low[rep[r]], r);
  g_autofree int *next = g_new0(int, n);
  for (int r = 0; r < n; r++) {
    int root = rep[r];
    idx[r] = next[root]++;
    leads += idx[r] == 0;
  }
  for (int r = 0; r < n; r++)
    rep[r] = low[rep[r]];
  return leads;
}

static bool fold_same_route(const hw_cluster *hw, int a, int b, int a2, int b2)
{
  hw_route x, y;
  hw_route_get(hw, a, b, &x);
  hw_route_get(hw, a2, b2, &y);
  return x.tier == y.tier && x.latency == y.latency && x.bandwidth == y.bandwidth;
}

/* Whether group `g2` is the image of the representatives' group `g` under sibling position
 * `i`, member by member, with routes of the same shape. Sets *joined when it mixes positions. */
static bool fold_group_maps(const prog_program *p, const hw_cluster *hw, const prog_group *g,
                            const prog_group *g2, const int *rep, const int *idx, bool *joined)
{
  int i = idx[g2->ranks[0]];
  for (int m = 0; m < g2->n; m++)
    if (idx[g2->ranks[m]] != i) {
      *joined = true;
      return false;
    }
  if (g == g2)
    return true; /* the representatives' own */
  if (!g || g->n != g2->n)
    return false;
  for (int m = 0; m < g->n; m++) {
    int x = g->ranks[m], y = g2->ranks[m];
    if (rep[y] != x || p->class_of[x] != p->class_of[y])
      return false;
    if (m > 0 && !(fold_same_route(hw, g->ranks[m - 1], x, g2->ranks[m - 1], y) &&
                   fold_same_route(hw, g->ranks[0], x, g2->ranks[0], y)))
      return false;
  }
  return true;
}

/* Checks every group of the families simulated outside layer passes; on a group that joins
 * positions, *joined_dim is its family's dimension. With `mirror`, such a group is left to the
 * mirroring check (*mirrored) instead of failing this one. */
static bool fold_symmetric(const prog_program *p, const hw_cluster *hw, const uint8_t *use,
                           const int *rep, const int *idx, bool mirror, bool *mirrored,
                           int *joined_dim)
{
  for (int r = 0; r < p->nranks; r++)
    if (p->class_of[r] != p->class_of[rep[r]])
      return false;
  g_autofree bool *seen = g_new0(bool, MAX(p->groups->len, 1u));
  for (guint f = 0; f < p->families->len; f++) {
    if (use[f] != FOLD_OUTSIDE)
      continue;
    const prog_family *fam = g_ptr_array_index(p->families, f);
    for (int r = 0; r < p->nranks; r++) {
      int gi = fam->group_of[r];
      if (gi < 0 || seen[gi])
        continue;
      seen[gi] = true;
      const prog_group *g2 = g_ptr_array_index(p->groups, gi);
      const prog_group *g = prog_group_of(p, (int)f, rep[g2->ranks[0]]);
      bool joined = false;
      if (fold_group_maps(p, hw, g, g2, rep, idx, &joined))
        continue;
      if (joined && *joined_dim < 0)
        *joined_dim = (int)fam->dim;
      if (!joined || !mirror)
        return false;
      *mirrored = true;
    }
  }
  return true;
}

/* ---- mirroring: collectives that join positions -------------------------------------------- */

/* Whether a link can bind a flow of the DES: a GPU's NVLink or NIC port. Tiers above are not
 * oversubscribed when mirroring is tried (fold_topology_why), so their links carry at most what
 * the NICs below them can send and never bind. */
static bool fold_link_binds(const hw_link *l)
{
  return l->tier <= 0 && l->policy != HW_LINK_FATPIPE;
}

/* One transfer as a member sees it in the DES: which way, how much, and the links along its
 * route that can bind (bandwidth and direction, in order). Not the route's tier or latency: the
 * platform's links carry no latency (the schedule sleeps the plan's, the same for every member),
 * and a tier's links above the NICs cannot bind; so a hop under a leaf and one across the spine
 * are the same to the DES. */
#define FOLD_END_HOPS 8
typedef struct {
  int receives, nbind;
  double frac;
  double bind[FOLD_END_HOPS]; /* bandwidth, negative going down */
} fold_end;

static int fold_cmp_double(double x, double y)
{
  return (x > y) - (x < y);
}

static int fold_end_cmp(const void *a, const void *b)
{
  const fold_end *x = a, *y = b;
  if (x->receives != y->receives)
    return x->receives - y->receives;
  if (x->nbind != y->nbind)
    return x->nbind - y->nbind;
  for (int h = 0; h < x->nbind; h++)
    if (x->bind[h] != y->bind[h])
      return fold_cmp_double(x->bind[h], y->bind[h]);
  return fold_cmp_double(x->frac, y->frac);
}

/* The links of route `r` that can bind; false when there are more than a fold_end holds. */
static bool fold_end_links(const hw_cluster *hw, const hw_route *r, fold_end *e)
{
  for (int h = 0; h < r->nhops; h++) {
    const hw_link *l = hw_link_get(hw, HW_HOP_LINK(r->hops[h]));
    if (!fold_link_binds(l))
      continue;
    if (e->nbind == FOLD_END_HOPS)
      return false;
    e->bind[e->nbind++] = r->hops[h] % 2 ? -l->bandwidth : l->bandwidth;
  }
  return true;
}

/* Member m's transfers in a phase, sorted; NULL when a route has more links that can bind than
 * a fold_end holds (then the members are not compared: not mirrored). */
static GArray *fold_member_ends(const hw_cluster *hw, const coll_plan *plan, const coll_phase *ph,
                                int m)
{
  int self = plan->members[m];
  GArray *a = g_array_new(FALSE, FALSE, sizeof(fold_end));
  for (int j = ph->member_off[m]; j < ph->member_off[m + 1]; j++) {
    const coll_xfer *x = &ph->xfers[ph->member_idx[j]];
    hw_route r;
    hw_route_get(hw, x->src, x->dst, &r);
    fold_end e = {.receives = x->dst == self, .frac = x->frac};
    if (!fold_end_links(hw, &r, &e)) {
      g_array_free(a, TRUE);
      return NULL;
    }
    g_array_append_val(a, e);
  }
  g_array_sort(a, fold_end_cmp);
  return a;
}

static bool fold_same_ends(const GArray *a, const GArray *b)
{
  if (!a || !b || a->len != b->len)
    return false;
  for (guint i = 0; i < a->len; i++)
    if (fold_end_cmp(&g_array_index(a, fold_end, i), &g_array_index(b, fold_end, i)) != 0)
      return false;
  return true;
}

/* Whether every member does the same in every phase: members that enter a phase together then
 * leave it together, whichever of them the DES simulates. */
static bool fold_plan_homogeneous(const hw_cluster *hw, const coll_plan *plan)
{
  for (int i = 0; i < plan->nphases; i++) {
    g_autoptr(GArray) first = fold_member_ends(hw, plan, &plan->phases[i], 0);
    for (int m = 1; m < plan->n; m++) {
      g_autoptr(GArray) other = fold_member_ends(hw, plan, &plan->phases[i], m);
      if (!fold_same_ends(first, other))
        return false;
    }
  }
  return true;
}

/* Per direction of a GPU link (intra-node links and NICs; higher tiers are not oversubscribed
 * and cannot bind): crossed by a transfer the DES runs, by one it does not, or both. */
enum { FOLD_LINK_RUN = 1, FOLD_LINK_ABSENT = 2 };

static void fold_mark_links(const hw_cluster *hw, const coll_plan *plan, const bool *active,
                            bool group_active, uint8_t *links)
{
  int ngpus = hw_gpus(hw);
  for (int i = 0; i < plan->nphases; i++) {
    const coll_phase *ph = &plan->phases[i];
    for (int t = 0; t < ph->nxfers; t++) {
      const coll_xfer *x = &ph->xfers[t];
      bool run = (x->src < ngpus ? active[x->src] : group_active) ||
                 (x->dst < ngpus ? active[x->dst] : group_active);
      hw_route r;
      hw_route_get(hw, x->src, x->dst, &r);
      for (int h = 0; h < r.nhops; h++) {
        if (fold_link_binds(hw_link_get(hw, HW_HOP_LINK(r.hops[h]))))
          links[r.hops[h]] |= run ? FOLD_LINK_RUN : FOLD_LINK_ABSENT;
      }
    }
  }
}

/* One group's plan: members that are simulated and members that are not may share it when
 * every member does the same (ENG_FOLD_UNEVEN if not) and the reducing switches, if any, have
 * a simulated first member to bring them (des.c: they play against ghosts like any simulated
 * end). */
static eng_fold_why fold_mirror_plan(const hw_cluster *hw, const coll_plan *plan,
                                     const bool *active, const int *idx, uint8_t *links)
{
  bool some = false, all = true, joined = false;
  for (int m = 0; m < plan->n; m++) {
    some |= active[plan->ranks[m]];
    all &= active[plan->ranks[m]];
    joined |= idx[plan->ranks[m]] != idx[plan->ranks[0]];
  }
  if (some && !all && plan->nmembers > plan->n && !active[plan->ranks[0]])
    return ENG_FOLD_ASYMMETRIC;
  if (joined && !fold_plan_homogeneous(hw, plan))
    return ENG_FOLD_UNEVEN;
  fold_mark_links(hw, plan, active, some, links);
  return ENG_FOLD_NONE;
}

typedef struct {
  const prog_program *p;
  const hw_cluster *hw;
  coll_planner *pl;
  const bool *active;
  const int *idx;
  uint8_t *links;
  GHashTable *plans; /* checked already */
  int *stamp;        /* per group: the last op it was planned for */
} fold_mirror;

/* Every group op `op` (number `opno`) of class k runs in. */
static eng_fold_why fold_mirror_op(fold_mirror *m, const prog_op *op, int k, bool is_template,
                                   int opno)
{
  const prog_family *fam = g_ptr_array_index(m->p->families, op->family);
  for (int r = 0; r < m->p->nranks; r++) {
    int gi = fam->group_of[r];
    if (gi < 0 || m->stamp[gi] == opno || (!is_template && m->p->class_of[r] != k))
      continue;
    m->stamp[gi] = opno;
    const coll_schedule *s = eng_schedule_for(m->pl, m->p, op, r, NULL);
    if (!s)
      return ENG_FOLD_ASYMMETRIC;
    if (g_hash_table_contains(m->plans, s->plan))
      continue;
    g_hash_table_add(m->plans, (gpointer)s->plan);
    eng_fold_why why = fold_mirror_plan(m->hw, s->plan, m->active, m->idx, m->links);
    if (why != ENG_FOLD_NONE)
      return why;
  }
  return ENG_FOLD_NONE;
}

/* A collective as the planner knows it: ops of one class alike in these run on the same groups
 * with the same schedules. */
typedef struct {
  int family;
  prog_coll coll;
  double bytes;
} fold_op_key;

static guint fold_op_hash(gconstpointer k)
{
  const fold_op_key *x = k;
  return g_double_hash(&x->bytes) ^ ((guint)x->family * 19349663u) ^ ((guint)x->coll * 83492791u);
}

static gboolean fold_op_equal(gconstpointer a, gconstpointer b)
{
  const fold_op_key *x = a, *y = b;
  return x->family == y->family && x->coll == y->coll && x->bytes == y->bytes;
}

GArray *eng_distinct_comms(const prog_program *p, int cls)
{
  const prog_class *cl = prog_class_at(p, cls);
  GArray *first = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_autoptr(GHashTable) seen = g_hash_table_new_full(fold_op_hash, fold_op_equal, g_free, NULL);
  for (guint i = 0; i < cl->ops->len; i++) {
    const prog_op *op = &g_array_index(cl->ops, prog_op, i);
    fold_op_key key = {op->family, op->coll, op->comm_bytes};
    if (op->kind != PROG_COMM || g_hash_table_contains(seen, &key))
      continue;
    g_hash_table_add(seen, g_memdup2(&key, sizeof key));
    uint32_t at = i;
    g_array_append_val(first, at);
  }
  return first;
}

/* Why mirroring would not be exact for the representatives (idx 0), or ENG_FOLD_NONE: every
 * group of the families simulated outside layer passes is checked once per plan, and no GPU
 * link may be crossed both by a transfer the DES runs and by one it does not
 * (ENG_FOLD_CROSSED). */
static eng_fold_why fold_mirror_why(const prog_program *p, const hw_cluster *hw,
                                    coll_planner *pl, const uint8_t *use, const int *idx)
{
  g_autofree bool *active = g_new(bool, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    active[r] = idx[r] == 0;
  gsize nkeys = 2 * (gsize)hw_nlinks(hw);
  g_autofree uint8_t *links = g_new0(uint8_t, MAX(nkeys, 1u));
  g_autofree int *stamp = g_new(int, MAX(p->groups->len, 1u));
  for (guint g = 0; g < p->groups->len; g++)
    stamp[g] = -1;
  g_autoptr(GHashTable) plans = g_hash_table_new(NULL, NULL);
  fold_mirror m = {p, hw, pl, active, idx, links, plans, stamp};
  int opno = 0;
  for (guint k = 0; k < p->classes->len; k++) {
    const prog_class *cl = prog_class_at(p, (int)k);
    g_autoptr(GArray) ops = eng_distinct_comms(p, (int)k);
    for (guint i = 0; i < ops->len; i++) {
      const prog_op *op = prog_op_at(p, (int)k, g_array_index(ops, uint32_t, i));
      if (use[op->family] != FOLD_OUTSIDE)
        continue;
      eng_fold_why why = fold_mirror_op(&m, op, (int)k, cl->is_template, opno++);
      if (why != ENG_FOLD_NONE)
        return why;
    }
  }
  for (gsize key = 0; key < nkeys; key++)
    if (links[key] == (FOLD_LINK_RUN | FOLD_LINK_ABSENT))
      return ENG_FOLD_CROSSED;
  return ENG_FOLD_NONE;
}

static eng_fold_why fold_topology_why(const hw_cluster *hw)
{
  const cfg_cluster *c = hw_config(hw);
  if (c->node.count > 1 && c->node.nics_per_node < c->node.gpus_per_node)
    return ENG_FOLD_SHARED_NIC;
  for (int t = 0; t < c->network.ntiers; t++)
    if (c->network.tiers[t].oversubscription > 1)
      return ENG_FOLD_OVERSUBSCRIBED;
  if (c->network.nbackground > 0)
    return ENG_FOLD_BACKGROUND;
  return ENG_FOLD_NONE;
}

static unsigned fold_dims(const prog_program *p, unsigned mask)
{
  unsigned dims = 0;
  for (guint f = 0; f < p->families->len; f++)
    if (fold_in(mask, f))
      dims |= 1u << ((const prog_family *)g_ptr_array_index(p->families, f))->dim;
  return dims;
}

/* The families whose groups could fold: inside layer passes only, with groups of two or more. */
static unsigned fold_candidates(const prog_program *p, const uint8_t *use)
{
  unsigned mask = 0;
  for (guint f = 0; f < p->families->len && f < FOLD_MAX_FAMILIES; f++) {
    const prog_family *fam = g_ptr_array_index(p->families, f);
    for (int r = 0; use[f] == FOLD_INSIDE && r < p->nranks; r++) {
      const prog_group *g = fam->group_of[r] >= 0 ? g_ptr_array_index(p->groups, fam->group_of[r]) : NULL;
      if (g && g->n > 1) {
        mask |= 1u << f;
        break;
      }
    }
  }
  return mask;
}

/* Tries the subsets of the candidates, largest first; keeps the one that simulates fewest
 * ranks. Returns its mask of representatives, or NULL. */
static bool *fold_search(const prog_program *p, const hw_cluster *hw, coll_planner *pl,
                         const uint8_t *use, unsigned cand, eng_fold_info *info)
{
  g_autofree int *rep = g_new(int, p->nranks);
  g_autofree int *idx = g_new(int, p->nranks);
  int best = p->nranks;
  unsigned best_mask = 0;
  for (unsigned sub = cand; sub; sub = (sub - 1) & cand) {
    int leads = fold_blocks(p, sub, rep, idx);
    if (leads >= best)
      continue;
    int joined = -1;
    bool mirrored = false, symmetric = fold_symmetric(p, hw, use, rep, idx, pl != NULL,
                                                      &mirrored, &joined);
    eng_fold_why mirror = symmetric && mirrored ? fold_mirror_why(p, hw, pl, use, idx)
                                                : ENG_FOLD_NONE;
    if (symmetric && mirror == ENG_FOLD_NONE) {
      best = leads;
      best_mask = sub;
    } else if (sub == cand) {
      info->why = symmetric ? mirror : joined >= 0 ? ENG_FOLD_JOINED : ENG_FOLD_ASYMMETRIC;
      info->joined_dim = joined;
    }
  }
  info->folded_dims = fold_dims(p, best_mask);
  info->unfolded_dims = fold_dims(p, cand) & ~info->folded_dims;
  info->ranks = best;
  if (!best_mask)
    return NULL;
  fold_blocks(p, best_mask, rep, idx);
  bool *lead = g_new(bool, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    lead[r] = idx[r] == 0;
  return lead;
}

bool *eng_fold_ranks(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                     const bool *flows, coll_planner *pl, eng_fold_info *info)
{
  g_autofree uint8_t *use = fold_family_use(p, flows);
  unsigned cand = fold_candidates(p, use);
  *info = (eng_fold_info){.ranks = p->nranks, .unfolded_dims = fold_dims(p, cand), .joined_dim = -1};
  if (!cand)
    return NULL; /* nothing could stand for anything else */
  if (opt->all_ranks)
    info->why = ENG_FOLD_ASKED;
  else if (opt->slowdown)
    info->why = ENG_FOLD_STRAGGLERS; /* a slow rank runs apart from its siblings */
  else
    info->why = fold_topology_why(hw);
  if (info->why != ENG_FOLD_NONE)
    return NULL;
  return fold_search(p, hw, pl, use, cand, info);
}

const char *eng_fold_why_text(eng_fold_why why)
{
  switch (why) {
  case ENG_FOLD_ASKED:
    return "asked to simulate every rank";
  case ENG_FOLD_STRAGGLERS:
    return "stragglers make ranks differ";
  case ENG_FOLD_SHARED_NIC:
    return "GPUs share NICs, so siblings' flows meet";
  case ENG_FOLD_OVERSUBSCRIBED:
    return "an oversubscribed tier, where siblings' flows meet";
  case ENG_FOLD_BACKGROUND:
    return "network.background loads some links and not others";
  case ENG_FOLD_JOINED:
    return "a collective outside the layer passes joins their ranks";
  case ENG_FOLD_CROSSED:
    return "a collective outside the layer passes joins them over links that ranks not "
           "simulated also use";
  case ENG_FOLD_UNEVEN:
    return "a collective outside the layer passes joins them, and its members' transfers "
           "differ";
  case ENG_FOLD_ASYMMETRIC:
    return "ranks' programs, groups or routes differ";
  default:
    return "";
  }
}
