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
 * link that can bind belongs to one GPU), which the topology check asks for. */
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
 * positions, *joined_dim is its family's dimension. */
static bool fold_symmetric(const prog_program *p, const hw_cluster *hw, const uint8_t *use,
                           const int *rep, const int *idx, int *joined_dim)
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
      if (!fold_group_maps(p, hw, g, g2, rep, idx, &joined)) {
        *joined_dim = joined ? (int)fam->dim : -1;
        return false;
      }
    }
  }
  return true;
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
static bool *fold_search(const prog_program *p, const hw_cluster *hw, const uint8_t *use,
                         unsigned cand, eng_fold_info *info)
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
    if (fold_symmetric(p, hw, use, rep, idx, &joined)) {
      best = leads;
      best_mask = sub;
    } else if (sub == cand) {
      info->why = joined >= 0 ? ENG_FOLD_JOINED : ENG_FOLD_ASYMMETRIC;
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
                     const bool *flows, eng_fold_info *info)
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
  return fold_search(p, hw, use, cand, info);
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
  case ENG_FOLD_ASYMMETRIC:
    return "ranks' programs, groups or routes differ";
  default:
    return "";
  }
}
