/* Which collectives the DES must run as flows: the rule that lets a family of in-layer
 * collectives keep its closed form.
 *
 * The closed form of a collective is exact when nothing else crosses its links. Every family's
 * groups are planned as the DES would run them, and every link direction their transfers cross
 * is claimed by (family, group); a link claimed by two different claimants, or loaded by
 * network.background, makes every family that claimed it contended. A FATPIPE link (a switch's
 * backplane) gives each flow its whole bandwidth: sharing it slows nobody, so it is not
 * claimed. Two groups of one family on one link are contention too (two EP groups crossing one
 * spine); one group's own transfers sharing a link is already in its closed form. */
#include "engine/engine_internal.h"

typedef struct {
  int family, group;
} fl_claim;

enum { FL_FREE = -1, FL_BACKGROUND = -2 };

typedef struct {
  prog_coll coll;
  double bytes;
} fl_size;

typedef struct {
  const prog_program *p;
  const hw_cluster *hw;
  coll_planner *pl;
  fl_claim *owner;        /* per link direction (HW_HOP) */
  bool *contended;        /* per family */
  GHashTable *walked;     /* plans whose links the current family claimed */
} fl_state;

static void fl_claim_hop(fl_state *st, int hop, int family, int group)
{
  if (hw_link_get(st->hw, HW_HOP_LINK(hop))->policy == HW_LINK_FATPIPE)
    return;
  fl_claim *o = &st->owner[hop];
  if (o->family == FL_FREE) {
    *o = (fl_claim){family, group};
    return;
  }
  if (o->family == family && o->group == group)
    return;
  st->contended[family] = true;
  if (o->family >= 0)
    st->contended[o->family] = true;
}

static void fl_claim_plan(fl_state *st, const coll_plan *plan, int family, int group)
{
  /* plans are cached per group: sizes that pick the same algorithm share one */
  if (g_hash_table_contains(st->walked, plan))
    return;
  g_hash_table_add(st->walked, (gpointer)plan);
  for (int i = 0; i < plan->nphases; i++) {
    const coll_phase *ph = &plan->phases[i];
    for (int j = 0; j < ph->nxfers; j++) {
      hw_route r;
      hw_route_get(st->hw, ph->xfers[j].src, ph->xfers[j].dst, &r);
      for (int h = 0; h < r.nhops; h++)
        fl_claim_hop(st, r.hops[h], family, group);
    }
  }
}

/* The distinct (collective, size) pairs each family's ops run, over every class and template. */
static GArray **fl_sizes(const prog_program *p)
{
  GArray **sizes = g_new0(GArray *, MAX(p->families->len, 1u));
  for (guint f = 0; f < p->families->len; f++)
    sizes[f] = g_array_new(FALSE, FALSE, sizeof(fl_size));
  for (guint k = 0; k < p->classes->len; k++) {
    const prog_class *cl = prog_class_at(p, (int)k);
    for (guint i = 0; i < cl->ops->len; i++) {
      const prog_op *op = &g_array_index(cl->ops, prog_op, i);
      if (op->kind != PROG_COMM)
        continue;
      GArray *a = sizes[op->family];
      guint j = 0;
      while (j < a->len && !(g_array_index(a, fl_size, j).coll == op->coll &&
                             g_array_index(a, fl_size, j).bytes == op->comm_bytes))
        j++;
      if (j == a->len)
        g_array_append_val(a, ((fl_size){op->coll, op->comm_bytes}));
    }
  }
  return sizes;
}

static bool fl_claim_family(fl_state *st, int f, const GArray *sizes, GError **err)
{
  const prog_program *p = st->p;
  const prog_family *fam = g_ptr_array_index(p->families, f);
  g_autofree bool *seen = g_new0(bool, MAX(p->groups->len, 1u));
  g_hash_table_remove_all(st->walked); /* two families may share a group, hence its plans */
  for (int r = 0; r < p->nranks && sizes->len; r++) {
    int gi = fam->group_of[r];
    if (gi < 0 || seen[gi])
      continue;
    seen[gi] = true;
    const prog_group *g = g_ptr_array_index(p->groups, gi);
    for (guint j = 0; j < sizes->len; j++) {
      const fl_size *sz = &g_array_index(sizes, fl_size, j);
      const coll_schedule *s =
          coll_planner_get(st->pl, sz->coll, g->ranks, g->n, gi, sz->bytes, NULL, err);
      if (!s)
        return false;
      fl_claim_plan(st, s->plan, f, gi);
    }
  }
  return true;
}

static void fl_claim_background(fl_state *st)
{
  g_autoptr(GArray) bg = hw_background_flows(st->hw);
  for (guint i = 0; i < bg->len; i++) {
    const hw_bg_flow *b = &g_array_index(bg, hw_bg_flow, i);
    st->owner[HW_HOP(b->link, b->down)] = (fl_claim){FL_BACKGROUND, -1};
  }
}

/* Which families appear in a template (a layer pass): only those can keep the closed form. */
bool *eng_in_template_families(const prog_program *p)
{
  bool *in = g_new0(bool, MAX(p->families->len, 1u));
  for (guint k = 0; k < p->classes->len; k++) {
    const prog_class *cl = prog_class_at(p, (int)k);
    for (guint i = 0; cl->is_template && i < cl->ops->len; i++) {
      const prog_op *op = &g_array_index(cl->ops, prog_op, i);
      if (op->kind == PROG_COMM)
        in[op->family] = true;
    }
  }
  return in;
}

bool *eng_flow_families(const prog_program *p, const hw_cluster *hw, coll_planner *pl,
                        cfg_layer_flows mode, GError **err)
{
  guint nf = p->families->len;
  if (mode != CFG_LAYER_FLOWS_AUTO) { /* no links to look at */
    bool *all = g_new(bool, MAX(nf, 1u));
    for (guint f = 0; f < MAX(nf, 1u); f++)
      all[f] = mode == CFG_LAYER_FLOWS_ALWAYS;
    return all;
  }
  fl_state st = {.p = p, .hw = hw, .pl = pl};
  st.owner = g_new(fl_claim, 2 * (gsize)MAX(hw_nlinks(hw), 1));
  for (int k = 0; k < 2 * hw_nlinks(hw); k++)
    st.owner[k] = (fl_claim){FL_FREE, -1};
  st.contended = g_new0(bool, MAX(nf, 1u));
  st.walked = g_hash_table_new(g_direct_hash, g_direct_equal);
  fl_claim_background(&st);
  GArray **sizes = fl_sizes(p);
  bool ok = true;
  for (guint f = 0; f < nf && ok; f++)
    ok = fl_claim_family(&st, (int)f, sizes[f], err);
  for (guint f = 0; f < nf; f++)
    g_array_free(sizes[f], TRUE);
  g_free(sizes);
  g_hash_table_destroy(st.walked);
  g_free(st.owner);
  if (!ok) {
    g_free(st.contended);
    return NULL;
  }
  /* collectives outside the layer passes always run as flows */
  g_autofree bool *in = eng_in_template_families(p);
  for (guint f = 0; f < nf; f++)
    st.contended[f] |= !in[f];
  return st.contended;
}
