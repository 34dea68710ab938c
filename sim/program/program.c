#include "program/program.h"

#include <string.h>

_Static_assert(sizeof(prog_op) <= 112, "prog_op grew: it is copied and walked per op");

const char *prog_coll_name(prog_coll op)
{
  static const char *const names[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                      "broadcast", "reduce",    "sendrecv"};
  return op < PROG_NCOLLS ? names[op] : "?";
}

bool prog_coll_parse(const char *name, prog_coll *out, GError **err)
{
  for (int o = 0; o < PROG_NCOLLS; o++)
    if (name && strcmp(name, prog_coll_name((prog_coll)o)) == 0) {
      *out = (prog_coll)o;
      return true;
    }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "op: expected allreduce, allgather, reducescatter, alltoall, broadcast, reduce or "
              "sendrecv, got '%s'",
              name ? name : "nothing");
  return false;
}

const char *prog_dim_name(prog_dim d)
{
  static const char *const names[] = {"tp", "cp", "pp", "dp", "ep"};
  return d < PROG_NDIMS ? names[d] : "?";
}

const char *prog_mem_tag_name(prog_mem_tag t)
{
  static const char *const names[] = {"params",  "grads",   "optimizer", "activations",
                                      "kv_cache", "buffers", "other"};
  return t < PROG_NMEMTAGS ? names[t] : "?";
}

/* The group index is keyed by the groups themselves (their rank lists). */
static guint prog_group_hash(gconstpointer key)
{
  const prog_group *g = key;
  guint h = 5381;
  for (int i = 0; i < g->n; i++)
    h = h * 33 + (guint)g->ranks[i];
  return h;
}

static gboolean prog_group_equal(gconstpointer x, gconstpointer y)
{
  const prog_group *a = x, *b = y;
  return a->n == b->n && memcmp(a->ranks, b->ranks, (size_t)a->n * sizeof(int)) == 0;
}

struct prog_group_store {
  GPtrArray *groups, *families;
  GPtrArray *blocks;   /* the groups' memory, PROG_GROUP_BLOCK bytes at a time */
  gsize block_used;
  GHashTable *group_index;
  int *small_head;
  /* the small groups' chain links, `nsmall` of room for `small_room` (GLib's append per link
   * was a fifth of registering a pipeline pair) */
  prog_small_link *small;
  int nsmall, small_room;
  guint groups_room; /* what `groups` was last grown to (GLib keeps it) */
  bool shared; /* fixed from then on */
};

static void prog_group_store_clear(gpointer data)
{
  struct prog_group_store *s = data;
  g_ptr_array_free(s->blocks, TRUE);
  for (guint i = 0; i < s->families->len; i++) {
    prog_family *f = g_ptr_array_index(s->families, i);
    g_free(f->name);
    g_free(f->group_of);
    g_free(f);
  }
  g_ptr_array_free(s->groups, TRUE);
  g_ptr_array_free(s->families, TRUE);
  g_hash_table_destroy(s->group_index);
  g_free(s->small_head);
  g_free(s->small);
}

/* The names a program's ops point to; a derived program shares them with the one it came from
 * (the first may be freed first). */
struct prog_string_store {
  GStringChunk *chunk;
};

static void prog_string_store_clear(gpointer data)
{
  g_string_chunk_free(((struct prog_string_store *)data)->chunk);
}

static prog_program *prog_alloc(int nranks)
{
  prog_program *p = g_new0(prog_program, 1);
  p->nranks = nranks;
  p->class_of = g_new0(int, nranks);
  p->classes = g_ptr_array_new();
  p->meta.dtype = CFG_BF16;
  return p;
}

static void prog_strings_new(prog_program *p)
{
  p->string_store = g_rc_box_new0(struct prog_string_store);
  p->string_store->chunk = g_string_chunk_new(4096);
  p->strings = p->string_store->chunk;
}

static void prog_store_use(prog_program *p, struct prog_group_store *s)
{
  p->store = s;
  p->groups = s->groups;
  p->families = s->families;
  p->group_index = s->group_index;
  p->small_head = s->small_head;
}

prog_program *prog_new(int nranks)
{
  prog_program *p = prog_alloc(nranks);
  struct prog_group_store *s = g_rc_box_new0(struct prog_group_store);
  s->groups = g_ptr_array_new();
  /* a rank is in a few small groups (its pipeline pairs, size-1 dimensions): room for their
   * links and ids at once rather than copied as they grow */
  s->small_room = 4 * MAX(nranks, 16);
  s->small = g_new(prog_small_link, s->small_room);
  s->groups_room = (guint)s->small_room;
  g_ptr_array_set_size(s->groups, (gint)s->groups_room);
  g_ptr_array_set_size(s->groups, 0);
  s->blocks = g_ptr_array_new_with_free_func(g_free);
  s->families = g_ptr_array_new();
  s->group_index = g_hash_table_new(prog_group_hash, prog_group_equal);
  s->small_head = g_new(int, MAX(nranks, 1));
  for (int r = 0; r < nranks; r++)
    s->small_head[r] = -1;
  prog_store_use(p, s);
  prog_strings_new(p);
  return p;
}

static prog_program *prog_new_sharing(const prog_program *like)
{
  prog_program *p = prog_alloc(like->nranks);
  memcpy(p->class_of, like->class_of, sizeof(int) * (gsize)like->nranks);
  like->store->shared = true;
  prog_store_use(p, g_rc_box_acquire(like->store));
  return p;
}

prog_program *prog_new_sharing_groups(const prog_program *like)
{
  prog_program *p = prog_new_sharing(like);
  prog_strings_new(p);
  return p;
}

prog_program *prog_new_deriving(const prog_program *like)
{
  prog_program *p = prog_new_sharing(like);
  p->string_store = g_rc_box_acquire(like->string_store);
  p->strings = p->string_store->chunk;
  return p;
}

void prog_free(prog_program *p)
{
  if (!p)
    return;
  for (guint i = 0; i < p->classes->len; i++) {
    prog_class *c = g_ptr_array_index(p->classes, i);
    g_array_free(c->ops, TRUE);
    g_array_free(c->deps, TRUE);
    g_free(c);
  }
  g_ptr_array_free(p->classes, TRUE);
  g_rc_box_release_full(p->store, prog_group_store_clear);
  g_rc_box_release_full(p->string_store, prog_string_store_clear);
  g_free(p->class_of);
  g_free(p->meta.description);
  g_free(p);
}

int prog_class_add(prog_program *p, const char *name)
{
  prog_class *c = g_new0(prog_class, 1);
  c->name = g_string_chunk_insert_const(p->strings, name);
  c->ops = g_array_new(FALSE, FALSE, sizeof(prog_op));
  c->deps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  c->rep = -1;
  g_ptr_array_add(p->classes, c);
  return (int)p->classes->len - 1;
}

/* Grows `a` to at least `n` elements of room, its length unchanged: a GArray keeps what it has
 * grown to. */
static void prog_array_room(GArray *a, guint *room, guint n)
{
  guint len = a->len;
  if (n <= *room)
    return;
  g_array_set_size(a, n);
  g_array_set_size(a, len);
  *room = n;
}

void prog_class_reserve(prog_program *p, int cls, guint nops, guint ndeps)
{
  prog_class *c = prog_class_at(p, cls);
  prog_array_room(c->ops, &c->ops_room, nops);
  prog_array_room(c->deps, &c->deps_room, ndeps);
}

/* `n` more elements at the end of `a`, within its room (doubled when short); returns where
 * they begin. The length is set directly: within the room GLib has allocated, that is all
 * g_array_set_size does for an array that neither clears nor terminates, and the call per op
 * was a fifth of building one. */
static guint prog_array_extend(GArray *a, guint *room, guint n)
{
  guint at = a->len;
  if (at + n > *room)
    prog_array_room(a, room, MAX(at + n, MAX(2 * *room, 64u)));
  a->len = at + n;
  return at;
}

void prog_ops_append(prog_program *p, int cls, const prog_program *from, int from_cls,
                     guint first, guint n)
{
  g_assert(p->string_store == from->string_store);
  if (n == 0)
    return;
  prog_class *c = prog_class_at(p, cls);
  const prog_class *f = prog_class_at(from, from_cls);
  const prog_op *ops = &g_array_index(f->ops, prog_op, first);
  /* an op's dependencies follow the earlier ops' (prog_push appends them in op order) */
  guint dep_first = ops[0].dep_start, dep_end = ops[n - 1].dep_start + ops[n - 1].ndeps;
  guint at = c->ops->len, dep_at = c->deps->len;
  uint32_t shift = at - first; /* modulo 2^32: the dependencies may move back as well */
  g_array_append_vals(c->ops, ops, n);
  g_array_append_vals(c->deps, &g_array_index(f->deps, uint32_t, dep_first), dep_end - dep_first);
  /* a copy to where its ops and dependencies were (a class's start, templates) moves nothing */
  for (guint i = at; dep_at != dep_first && i < at + n; i++)
    g_array_index(c->ops, prog_op, i).dep_start += dep_at - dep_first;
  for (guint d = dep_at; shift && d < c->deps->len; d++)
    g_array_index(c->deps, uint32_t, d) += shift;
}

int prog_class_copy(prog_program *p, const prog_program *from, int cls)
{
  g_assert(p->string_store == from->string_store); /* the name is shared too */
  const prog_class *f = prog_class_at(from, cls);
  prog_class *c = g_memdup2(f, sizeof *f);
  c->ops = g_array_sized_new(FALSE, FALSE, sizeof(prog_op), f->ops->len);
  c->deps = g_array_sized_new(FALSE, FALSE, sizeof(uint32_t), f->deps->len);
  c->ops_room = c->deps_room = 0; /* f's room, not these arrays' */
  g_ptr_array_add(p->classes, c);
  int k = (int)p->classes->len - 1;
  prog_ops_append(p, k, from, cls, 0, f->ops->len);
  return k;
}

prog_program *prog_templates_of(const prog_program *p)
{
  prog_program *t = prog_new_deriving(p);
  for (guint c = 0; c < p->classes->len; c++) {
    const prog_class *k = prog_class_at(p, (int)c);
    if (k->is_template)
      prog_class_copy(t, p, (int)c);
    else
      prog_class_add(t, k->name);
  }
  return t;
}

int prog_template_add(prog_program *p, const char *name)
{
  int t = prog_class_add(p, name);
  prog_class_at(p, t)->is_template = true;
  return t;
}

void prog_rank_set_class(prog_program *p, int rank, int cls)
{
  p->class_of[rank] = cls;
}

void prog_finalize(prog_program *p)
{
  for (guint c = 0; c < p->classes->len; c++) {
    prog_class *k = prog_class_at(p, (int)c);
    k->nranks = 0;
    k->rep = -1;
  }
  for (int r = 0; r < p->nranks; r++) {
    prog_class *k = prog_class_at(p, p->class_of[r]);
    if (k->rep < 0)
      k->rep = r;
    k->nranks++;
  }
}


int prog_family_add(prog_program *p, const char *name, prog_dim dim)
{
  g_assert(!p->store->shared);
  g_assert(p->families->len < INT16_MAX); /* prog_op.family is 16 bits */
  prog_family *f = g_new0(prog_family, 1);
  f->name = g_strdup(name); /* the store's: it may outlive p's strings */
  f->dim = dim;
  f->group_of = g_new(int, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    f->group_of[r] = -1;
  g_ptr_array_add(p->families, f);
  return (int)p->families->len - 1;
}

int prog_family_find(const prog_program *p, const char *name)
{
  for (guint i = 0; i < p->families->len; i++)
    if (strcmp(((const prog_family *)g_ptr_array_index(p->families, i))->name, name) == 0)
      return (int)i;
  return -1;
}

#define PROG_GROUP_BLOCK 65536

/* Room for `size` bytes that live as long as the store: a program has thousands of groups and
 * a planner builds and frees programs by the thousand, so groups are carved from large blocks
 * rather than allocated one by one. */
static void *prog_store_alloc(struct prog_group_store *s, gsize size)
{
  size = (size + 7) & ~(gsize)7;
  if (s->blocks->len == 0 || s->block_used + size > PROG_GROUP_BLOCK) {
    g_ptr_array_add(s->blocks, g_malloc(MAX(size, (gsize)PROG_GROUP_BLOCK)));
    s->block_used = 0;
  }
  void *at = (char *)g_ptr_array_index(s->blocks, s->blocks->len - 1) + s->block_used;
  s->block_used += size;
  return at;
}

/* A group with its ranks right after it. */
static int prog_group_new(prog_program *p, const int *ranks, int n)
{
  g_assert(!p->store->shared);
  prog_group *g = prog_store_alloc(p->store, sizeof *g + sizeof(int) * (gsize)n);
  g->n = n;
  g->ranks = (int *)(g + 1);
  for (int i = 0; i < n; i++) /* most have one or two: a loop, not memcpy */
    g->ranks[i] = ranks[i];
  /* within the room GLib has allocated, as prog_array_extend does: an append through GLib
   * per group was a tenth of making the groups */
  GPtrArray *a = p->groups;
  guint at = a->len;
  if (at == p->store->groups_room) {
    p->store->groups_room = MAX(64u, 2 * at);
    g_ptr_array_set_size(a, (gint)p->store->groups_room);
  }
  a->len = at + 1;
  a->pdata[at] = g;
  return (int)at;
}

/* A new group of one or two ranks, chained to the others that start with the same rank. */
static int prog_small_group_new(prog_program *p, const int *ranks, int n)
{
  int *head = &p->small_head[ranks[0]];
  struct prog_group_store *s = p->store;
  if (s->nsmall == s->small_room) {
    s->small_room = MAX(64, 2 * s->small_room);
    s->small = g_renew(prog_small_link, s->small, s->small_room);
  }
  prog_small_link l = {.group = prog_group_new(p, ranks, n), .next = *head};
  *head = s->nsmall;
  s->small[s->nsmall++] = l;
  return l.group;
}

/* Groups of one or two ranks (pipeline pairs, size-1 dimensions) are most of a program's groups
 * and are registered once per rank: found by walking the few that start with the same rank,
 * which costs far less than hashing them. */
static int prog_small_group_add(prog_program *p, const int *ranks, int n)
{
  for (int i = p->small_head[ranks[0]]; i >= 0;) {
    const prog_small_link *l = &p->store->small[i];
    const prog_group *g = g_ptr_array_index(p->groups, l->group);
    if (g->n == n && (n == 1 || g->ranks[1] == ranks[1]))
      return l->group;
    i = l->next;
  }
  return prog_small_group_new(p, ranks, n);
}

int prog_pair_add_new(prog_program *p, const int pair[2])
{
  g_assert(pair[0] >= 0 && pair[0] < p->nranks);
  return prog_small_group_new(p, pair, 2);
}

int prog_group_add(prog_program *p, const int *ranks, int n)
{
  if (n >= 1 && n <= 2 && ranks[0] >= 0 && ranks[0] < p->nranks)
    return prog_small_group_add(p, ranks, n);
  prog_group probe = {.n = n, .ranks = (int *)ranks};
  gpointer found = NULL;
  if (g_hash_table_lookup_extended(p->group_index, &probe, NULL, &found))
    return GPOINTER_TO_INT(found);
  int id = prog_group_new(p, ranks, n);
  g_hash_table_insert(p->group_index, g_ptr_array_index(p->groups, id), GINT_TO_POINTER(id));
  return id;
}

int prog_group_add_private(prog_program *p, const int *ranks, int n)
{
  return prog_group_new(p, ranks, n);
}

void prog_family_set(prog_program *p, int family, int rank, int group)
{
  g_assert(!p->store->shared);
  prog_family *f = g_ptr_array_index(p->families, family);
  f->group_of[rank] = group;
}

int *prog_family_groups(prog_program *p, int family)
{
  g_assert(!p->store->shared);
  return ((prog_family *)g_ptr_array_index(p->families, family))->group_of;
}

bool prog_groups_same(const prog_program *a, const prog_program *b)
{
  if (a->store == b->store)
    return true;
  if (a->groups->len != b->groups->len)
    return false;
  for (guint i = 0; i < a->groups->len; i++)
    if (!prog_group_equal(g_ptr_array_index(a->groups, i), g_ptr_array_index(b->groups, i)))
      return false;
  return true;
}

/* Everything that costs an op (not its name). */
static bool prog_op_same(const prog_op *x, const prog_op *y)
{
  return x->kind == y->kind && x->stream == y->stream && x->recompute == y->recompute &&
         x->hostless == y->hostless && x->attn.deterministic == y->attn.deterministic &&
         x->count == y->count && x->kclass == y->kclass && x->dtype == y->dtype &&
         x->flops == y->flops && x->bytes == y->bytes && x->inner == y->inner &&
         x->rows == y->rows && x->cols == y->cols && x->split_rows == y->split_rows &&
         x->split_cols == y->split_cols && x->sms_held == y->sms_held &&
         x->host_ops == y->host_ops &&
         x->attn.keys == y->attn.keys && x->attn.head_dim == y->attn.head_dim &&
         x->attn.impl == y->attn.impl && x->attn.backward == y->attn.backward &&
         x->attn.causal == y->attn.causal && x->fixed_time == y->fixed_time &&
         x->tmpl == y->tmpl && x->coll == y->coll && x->dim == y->dim &&
         x->family == y->family && x->comm_bytes == y->comm_bytes && x->tag == y->tag &&
         x->mem_delta == y->mem_delta && x->ndeps == y->ndeps;
}

static bool prog_class_same(const prog_class *a, const prog_class *b)
{
  /* deps->data may be NULL when a class has no dependencies */
  if (a->ops->len != b->ops->len || a->deps->len != b->deps->len ||
      (a->deps->len > 0 &&
       memcmp(a->deps->data, b->deps->data, sizeof(uint32_t) * a->deps->len) != 0))
    return false;
  for (guint i = 0; i < a->ops->len; i++) {
    const prog_op *x = &g_array_index(a->ops, prog_op, i), *y = &g_array_index(b->ops, prog_op, i);
    if (!prog_op_same(x, y) || x->dep_start != y->dep_start)
      return false;
  }
  return true;
}

bool prog_templates_same(const prog_program *a, const prog_program *b)
{
  if (a->classes->len != b->classes->len)
    return false;
  for (guint c = 0; c < a->classes->len; c++) {
    const prog_class *x = prog_class_at(a, (int)c), *y = prog_class_at(b, (int)c);
    if (x->is_template != y->is_template || (x->is_template && !prog_class_same(x, y)))
      return false;
  }
  return true;
}

const prog_group *prog_group_of(const prog_program *p, int family, int rank)
{
  const prog_family *f = g_ptr_array_index(p->families, family);
  int g = f->group_of[rank];
  return g >= 0 ? g_ptr_array_index(p->groups, g) : NULL;
}

/* `name` in the program's strings. The memo is checked by content (a freed buffer's address
 * may come back with another name), which an interned name skips: it is the memo's own. */
static bool prog_recent_is(const prog_program *p, guint slot, const char *name)
{
  const char *from = p->recent_names[slot].from, *known = p->recent_names[slot].name;
  return from == name && (known == name || strcmp(known, name) == 0);
}

/* The memo is two-way (a name goes to the pair of slots its address picks, the newer first):
 * with one way, two names a builder alternates ("activations", "send activations") could
 * pick the same slot and evict each other at every op, a third of a program's interning. */
static const char *prog_intern(prog_program *p, const char *name)
{
  guint32 h = (guint32)((guintptr)name >> 3) * 2654435761u;
  guint slot = (h >> 16) % (PROG_RECENT_NAMES / 2) * 2;
  if (prog_recent_is(p, slot, name))
    return p->recent_names[slot].name;
  if (prog_recent_is(p, slot + 1, name))
    return p->recent_names[slot + 1].name;
  const char *known = g_string_chunk_insert_const(p->strings, name);
  p->recent_names[slot + 1] = p->recent_names[slot];
  p->recent_names[slot].from = name;
  p->recent_names[slot].name = known;
  return known;
}

static uint32_t prog_push(prog_program *p, int cls, prog_op *op, const uint32_t *deps,
                          uint32_t ndeps)
{
  prog_class *c = prog_class_at(p, cls);
  op->dep_start = prog_array_extend(c->deps, &c->deps_room, ndeps);
  op->ndeps = ndeps;
  uint32_t *to = &g_array_index(c->deps, uint32_t, op->dep_start);
  for (uint32_t d = 0; d < ndeps; d++) /* one or two: a loop, not memcpy */
    to[d] = deps[d];
  if (op->count == 0)
    op->count = 1;
  /* grown by one and assigned: an append copies through memcpy, a tenth of building an op */
  guint at = prog_array_extend(c->ops, &c->ops_room, 1);
  g_array_index(c->ops, prog_op, at) = *op;
  return at;
}

uint32_t prog_compute(prog_program *p, int cls, const char *name, cfg_kernel_class kclass,
                      cfg_dtype dtype, double flops, double bytes, const uint32_t *deps,
                      uint32_t ndeps)
{
  prog_op op = {.kind = PROG_COMPUTE,
                .stream = PROG_STREAM_COMPUTE,
                .name = prog_intern(p, name),
                .kclass = kclass,
                .dtype = dtype,
                .flops = flops,
                .bytes = bytes,
                .fixed_time = -1,
                .tmpl = -1};
  return prog_push(p, cls, &op, deps, ndeps);
}

uint32_t prog_comm(prog_program *p, int cls, prog_stream stream, const char *name, prog_coll coll,
                   int family, double bytes, const uint32_t *deps, uint32_t ndeps)
{
  const prog_family *f = g_ptr_array_index(p->families, family);
  prog_op op = {.kind = PROG_COMM,
                .stream = (uint8_t)stream,
                .name = prog_intern(p, name),
                .coll = coll,
                .dim = f->dim,
                .family = family,
                .comm_bytes = bytes,
                .fixed_time = -1,
                .tmpl = -1};
  return prog_push(p, cls, &op, deps, ndeps);
}

uint32_t prog_mem(prog_program *p, int cls, const char *name, prog_mem_tag tag, double delta,
                  const uint32_t *deps, uint32_t ndeps)
{
  prog_op op = {.kind = PROG_MEM,
                .stream = PROG_STREAM_COMPUTE,
                .name = prog_intern(p, name),
                .tag = tag,
                .mem_delta = delta,
                .fixed_time = -1,
                .tmpl = -1};
  return prog_push(p, cls, &op, deps, ndeps);
}

uint32_t prog_macro(prog_program *p, int cls, const char *name, int tmpl, uint32_t count,
                    const uint32_t *deps, uint32_t ndeps)
{
  prog_class *t = prog_class_at(p, tmpl);
  for (; t->flops_ops < t->ops->len; t->flops_ops++) /* templates only grow */
    t->flops += g_array_index(t->ops, prog_op, t->flops_ops).flops;
  double flops = t->flops;
  prog_op op = {.kind = PROG_COMPUTE,
                .stream = PROG_STREAM_COMPUTE,
                .name = prog_intern(p, name),
                .kclass = CFG_KCLASS_OTHER,
                .flops = flops * count,
                .count = count,
                .fixed_time = -1,
                .tmpl = tmpl};
  return prog_push(p, cls, &op, deps, ndeps);
}

