/* A Chakra trace as a program: one class per rank, nodes in an order that respects their
 * dependencies. Chakra lets independent nodes run at once; here compute nodes share the
 * compute stream, collectives the data-parallel stream, sends and receives the pipeline
 * streams, each in dependency order (what a GPU with one compute queue and one NCCL
 * communicator does), so only communication overlaps compute. */
#include "chakra/chakra.h"

#include <string.h>

typedef struct {
  prog_program *p;
  const chk_trace *t;
  const chk_options *o;
  chk_counts *counts;
  int world;          /* family of collectives: all ranks */
  GHashTable *p2p;    /* (src << 32 | dst) -> family */
  GHashTable *pgs;    /* pg_name -> family, of the communicator groups */
} chk_build;

/* The family of sends from `src` to `dst`: a group of the two, the sender first. */
static int chk_p2p_family(chk_build *b, int src, int dst)
{
  gint64 key = (gint64)src << 32 | (gint64)dst;
  gpointer f;
  if (g_hash_table_lookup_extended(b->p2p, &key, NULL, &f))
    return GPOINTER_TO_INT(f);
  char name[48];
  g_snprintf(name, sizeof name, "p2p %d->%d", src, dst);
  int fam = prog_family_add(b->p, name, PROG_DIM_PP);
  int ranks[2] = {src, dst};
  int g = prog_group_add(b->p, ranks, 2);
  prog_family_set(b->p, fam, src, g);
  prog_family_set(b->p, fam, dst, g);
  g_hash_table_insert(b->p2p, g_memdup2(&key, sizeof key), GINT_TO_POINTER(fam));
  return fam;
}

/* The family of communicator group `pg`: its ranks, in the file's order. */
static int chk_pg_family(chk_build *b, const char *pg, const GArray *ranks, GError **err)
{
  gpointer f;
  if (g_hash_table_lookup_extended(b->pgs, pg, NULL, &f))
    return GPOINTER_TO_INT(f);
  for (guint i = 0; i < ranks->len; i++)
    if (g_array_index(ranks, int, i) >= b->t->nranks) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "communicator group \"%s\": rank %d, but the "
                  "trace has ranks 0-%d", pg, g_array_index(ranks, int, i), b->t->nranks - 1);
      return -1;
    }
  g_autofree char *name = g_strdup_printf("pg %s", pg);
  int fam = prog_family_add(b->p, name, PROG_DIM_DP);
  int g = prog_group_add(b->p, (const int *)(const void *)ranks->data, (int)ranks->len);
  for (guint i = 0; i < ranks->len; i++)
    prog_family_set(b->p, fam, g_array_index(ranks, int, i), g);
  g_hash_table_insert(b->pgs, g_strdup(pg), GINT_TO_POINTER(fam));
  return fam;
}

/* The family a collective runs over: its pg_name's group when the options hold one. */
static int chk_coll_family(chk_build *b, int rank, const chk_node *x, GError **err)
{
  const chk_rank *r = &b->t->ranks[rank];
  if (!x->pg || !b->o->groups)
    return b->world;
  const GArray *ranks = g_hash_table_lookup(b->o->groups, x->pg);
  int fam = ranks ? chk_pg_family(b, x->pg, ranks, err) : -1;
  if (fam >= 0 && prog_group_of(b->p, fam, rank) == NULL) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: byte %" G_GSIZE_FORMAT ": node %" G_GUINT64_FORMAT
                " (%s): rank %d is not in its communicator group \"%s\"", r->path, x->offset, x->id,
                x->name, rank, x->pg);
    return -1;
  }
  if (!ranks)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: byte %" G_GSIZE_FORMAT ": node %" G_GUINT64_FORMAT
                " (%s): pg_name \"%s\" is not a group of the communicator group file", r->path,
                x->offset, x->id, x->name, x->pg);
  b->counts->grouped += fam >= 0 && fam != b->world;
  return fam;
}

/* Node indices of a rank in an order where every node follows what it depends on (Kahn's
 * algorithm, ties in file order). `index` maps node ids to file positions. */
static bool chk_topo_order(const chk_rank *r, GHashTable *index, guint *order, chk_counts *c,
                           GError **err)
{
  guint n = r->nodes->len;
  g_autofree guint *indeg = g_new0(guint, MAX(n, 1u));
  g_autoptr(GPtrArray) users = g_ptr_array_new_full(n, (GDestroyNotify)g_array_unref);
  for (guint i = 0; i < n; i++)
    g_ptr_array_add(users, g_array_new(FALSE, FALSE, sizeof(guint)));
  for (guint i = 0; i < n; i++) {
    const chk_node *x = &g_array_index(r->nodes, chk_node, i);
    for (guint d = 0; d < x->ndeps; d++) {
      gpointer at;
      if (!g_hash_table_lookup_extended(index, &x->deps[d], NULL, &at)) {
        c->absent_deps++;
        continue;
      }
      g_array_append_val(g_ptr_array_index(users, GPOINTER_TO_UINT(at)), i);
      indeg[i]++;
    }
  }
  guint head = 0, tail = 0;
  for (guint i = 0; i < n; i++)
    if (!indeg[i])
      order[tail++] = i;
  while (head < tail) {
    GArray *u = g_ptr_array_index(users, order[head++]);
    for (guint k = 0; k < u->len; k++)
      if (--indeg[g_array_index(u, guint, k)] == 0)
        order[tail++] = g_array_index(u, guint, k);
  }
  for (guint i = 0; tail < n && i < n; i++)
    if (indeg[i]) {
      const chk_node *x = &g_array_index(r->nodes, chk_node, i);
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: byte %" G_GSIZE_FORMAT ": node %" G_GUINT64_FORMAT
                  " (%s) is on a dependency cycle", r->path, x->offset, x->id, x->name);
      return false;
    }
  return true;
}

static bool chk_index(const chk_rank *r, GHashTable *index, GError **err)
{
  for (guint i = 0; i < r->nodes->len; i++) {
    const chk_node *x = &g_array_index(r->nodes, chk_node, i);
    if (g_hash_table_contains(index, &x->id)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: byte %" G_GSIZE_FORMAT ": node id %" G_GUINT64_FORMAT
                  " appears twice", r->path, x->offset, x->id);
      return false;
    }
    g_hash_table_insert(index, (gpointer)&x->id, GUINT_TO_POINTER(i));
  }
  return true;
}

static uint32_t chk_compute_op(chk_build *b, int cls, const chk_node *x, const uint32_t *deps,
                               uint32_t nd)
{
  bool model = b->o->recost && x->kind == CHK_COMPUTE && x->flops > 0;
  uint32_t i = prog_compute(b->p, cls, x->name, model ? CFG_KCLASS_GEMM : CFG_KCLASS_OTHER,
                            b->o->dtype, model ? x->flops : 0, model ? x->bytes : 0, deps, nd);
  prog_op *op = prog_op_at(b->p, cls, i);
  op->fixed_time = model ? -1 : (x->kind == CHK_COMPUTE ? x->duration : 0);
  /* the host runs its ops one at a time beside the GPU's, as ASTRA-sim's CPU resource does: a
   * lane of their own (the expert-parallel stream, which a Chakra trace does not otherwise use) */
  if (x->cpu && !model)
    op->stream = PROG_STREAM_EP;
  b->counts->recosted += model;
  b->counts->cpu += x->cpu && !model;
  return i;
}

static bool chk_peer_ok(const chk_build *b, const chk_rank *r, const chk_node *x, int rank,
                        GError **err)
{
  if (x->peer < b->t->nranks && x->peer != rank)
    return true;
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: byte %" G_GSIZE_FORMAT ": node %" G_GUINT64_FORMAT
              " (%s): %s rank %d, expected another of the trace's ranks 0-%d", r->path, x->offset,
              x->id, x->name, x->kind == CHK_SEND ? "sends to" : "receives from", x->peer,
              b->t->nranks - 1);
  return false;
}

/* A receive is posted ahead, without its dependencies: NCCL's receive buffers are ready before
 * the receive is issued, so a send completes without waiting for it; posted in dependency
 * order, a ring of send-then-receive chains would wait on itself. What depends on the receive
 * waits for a zero-time join of the receive and its own dependencies, on a lane of its own
 * (the context-parallel stream, which a Chakra trace does not otherwise use). */
static uint32_t chk_recv(chk_build *b, int rank, const chk_node *x, const uint32_t *deps,
                         uint32_t nd)
{
  uint32_t recv = prog_comm(b->p, rank, PROG_STREAM_PP_RECV, x->name, PROG_COLL_SENDRECV,
                            chk_p2p_family(b, x->peer, rank), x->bytes, NULL, 0);
  if (!nd)
    return recv;
  g_autofree uint32_t *all = g_new(uint32_t, nd + 1);
  memcpy(all, deps, nd * sizeof *all);
  all[nd] = recv;
  uint32_t join = prog_compute(b->p, rank, "recv join", CFG_KCLASS_OTHER, b->o->dtype, 0, 0, all, nd + 1);
  prog_op *op = prog_op_at(b->p, rank, join);
  op->fixed_time = 0;
  op->stream = PROG_STREAM_CP;
  return join;
}

/* One node as an op of class `cls`; returns its index, or -1 on error. */
static int64_t chk_op(chk_build *b, int rank, const chk_node *x, const uint32_t *deps,
                      uint32_t nd, GError **err)
{
  const chk_rank *r = &b->t->ranks[rank];
  chk_counts *c = b->counts;
  switch (x->kind) {
  case CHK_COLL: {
    int fam = chk_coll_family(b, rank, x, err);
    if (fam < 0)
      return -1;
    c->collectives++;
    return prog_comm(b->p, rank, PROG_STREAM_DP, x->name, x->coll, fam, x->bytes, deps, nd);
  }
  case CHK_SEND:
  case CHK_RECV: {
    if (!chk_peer_ok(b, r, x, rank, err))
      return -1;
    c->p2p++;
    if (x->kind == CHK_SEND)
      return prog_comm(b->p, rank, PROG_STREAM_PP, x->name, PROG_COLL_SENDRECV,
                       chk_p2p_family(b, rank, x->peer), x->bytes, deps, nd);
    return chk_recv(b, rank, x, deps, nd);
  }
  case CHK_COMPUTE:
    c->compute++;
    return chk_compute_op(b, rank, x, deps, nd);
  default:
    c->other++;
    return chk_compute_op(b, rank, x, deps, nd);
  }
}

static bool chk_build_rank(chk_build *b, int rank, GError **err)
{
  const chk_rank *r = &b->t->ranks[rank];
  guint n = r->nodes->len;
  g_autoptr(GHashTable) index = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autofree guint *order = g_new(guint, MAX(n, 1u));
  g_autofree uint32_t *op_of = g_new(uint32_t, MAX(n, 1u)); /* file position -> op index */
  g_autofree uint32_t *deps = NULL;
  if (!chk_index(r, index, err) || !chk_topo_order(r, index, order, b->counts, err))
    return false;
  /* the topological pass counted absent dependencies once; the op pass must not again */
  for (guint k = 0; k < n; k++) {
    const chk_node *x = &g_array_index(r->nodes, chk_node, order[k]);
    deps = g_renew(uint32_t, deps, MAX(x->ndeps, 1u));
    uint32_t nd = 0;
    for (guint d = 0; d < x->ndeps; d++) {
      gpointer at;
      if (g_hash_table_lookup_extended(index, &x->deps[d], NULL, &at))
        deps[nd++] = op_of[GPOINTER_TO_UINT(at)];
    }
    int64_t op = chk_op(b, rank, x, deps, nd, err);
    if (op < 0)
      return false;
    op_of[order[k]] = (uint32_t)op;
  }
  return true;
}

prog_program *chk_program(const chk_trace *t, const chk_options *o, chk_counts *counts,
                          GError **err)
{
  memset(counts, 0, sizeof *counts);
  prog_program *p = prog_new(t->nranks);
  chk_build b = {.p = p, .t = t, .o = o, .counts = counts,
                 .p2p = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL),
                 .pgs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL)};
  b.world = prog_family_add(p, "world", PROG_DIM_DP);
  g_autofree int *all = g_new(int, t->nranks);
  for (int r = 0; r < t->nranks; r++)
    all[r] = r;
  int g = prog_group_add(p, all, t->nranks);
  for (int r = 0; r < t->nranks; r++) {
    prog_family_set(p, b.world, r, g);
    g_autofree char *name = g_strdup_printf("rank %d", r);
    prog_rank_set_class(p, r, prog_class_add(p, name));
  }
  bool ok = true;
  for (int r = 0; ok && r < t->nranks; r++)
    ok = chk_build_rank(&b, r, err);
  g_hash_table_destroy(b.p2p);
  g_hash_table_destroy(b.pgs);
  if (!ok) {
    prog_free(p);
    return NULL;
  }
  prog_finalize(p);
  p->meta.dtype = o->dtype;
  p->meta.description = g_strdup_printf("chakra %s, %d ranks", t->name, t->nranks);
  return p;
}
