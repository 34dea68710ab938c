/* What the CPU side tells about GPU ops. With record_shapes the profiler writes each op's input
 * shapes and types: a matrix product's M, N, K give its FLOPs, an elementwise op's tensors its
 * bytes, a collective's buffer its message size. A GPU op is launched by a runtime call
 * (matched by correlation id), which runs inside CPU ops nested on its thread: the innermost
 * op that carries the information is the one that describes the kernel. */
#include "trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

double trc_type_size(const char *type)
{
  static const struct {
    const char *name;
    double size;
  } sizes[] = {{"complex", 8},  {"double", 8},   {"long", 8},      {"int64", 8},    {"bfloat16", 2}, {"half", 2},
               {"float16", 2},  {"short", 2},     {"int16", 2},    {"float8", 1},   {"char", 1},
               {"bool", 1},     {"byte", 1},      {"int8", 1},     {"uint8", 1},    {"float", 4},
               {"int", 4}};
  char low[64];
  if (!type || strlen(type) >= sizeof low)
    return 0;
  for (size_t i = 0; i <= strlen(type); i++)
    low[i] = g_ascii_tolower(type[i]);
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
    if (strstr(low, sizes[i].name))
      return sizes[i].size;
  return 0;
}

static int trc_type_dtype(const char *type)
{
  double size = trc_type_size(type);
  if (!type || size == 0)
    return -1;
  g_autofree char *low = g_ascii_strdown(type, -1);
  if (strstr(low, "bfloat16"))
    return CFG_BF16;
  if (strstr(low, "half") || strstr(low, "float16"))
    return CFG_FP16;
  if (strcmp(low, "float") == 0)
    return CFG_FP32;
  return -1;
}

trc_nccl_coll trc_coll_of_op_name(const char *name)
{
  static const struct {
    const char *word;
    trc_nccl_coll coll;
  } words[] = {{"allreduce", TRC_NCCL_ALLREDUCE},         {"reducescatter", TRC_NCCL_REDUCESCATTER},
               {"allgather", TRC_NCCL_ALLGATHER},         {"alltoall", TRC_NCCL_ALLTOALL},
               {"broadcast", TRC_NCCL_BROADCAST},         {"reduce", TRC_NCCL_REDUCE},
               {"sendrecv", TRC_NCCL_SENDRECV},           {"send", TRC_NCCL_SEND},
               {"recv", TRC_NCCL_RECV}};
  if (!name)
    return TRC_NCCL_UNKNOWN;
  GString *w = g_string_new(NULL);
  for (const char *p = name; *p; p++)
    if (*p != '_')
      g_string_append_c(w, g_ascii_tolower(*p));
  trc_nccl_coll c = TRC_NCCL_UNKNOWN;
  for (size_t i = 0; c == TRC_NCCL_UNKNOWN && i < G_N_ELEMENTS(words); i++)
    if (strstr(w->str, words[i].word))
      c = words[i].coll;
  g_string_free(w, TRUE);
  return c;
}

static double trc_arg_num(const cJSON *args, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

bool trc_args_collective(const cJSON *args, trc_nccl_coll *coll, double *in, double *out,
                         double *elem, int *group)
{
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(args, "Collective name");
  if (!cJSON_IsString(name))
    return false;
  *coll = trc_coll_of_op_name(name->valuestring);
  *in = trc_arg_num(args, "In msg nelems");
  *out = trc_arg_num(args, "Out msg nelems");
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(args, "dtype");
  *elem = cJSON_IsString(dt) ? trc_type_size(dt->valuestring) : 0;
  *group = (int)trc_arg_num(args, "Group size");
  return true;
}

/* Elements of one "Input Dims" entry: a tensor's shape, a list of shapes (tensor lists), or
 * [] for a scalar or a non-tensor argument (0). */
static double trc_numel(const cJSON *dims)
{
  if (!cJSON_IsArray(dims) || cJSON_GetArraySize(dims) == 0)
    return 0;
  double n = 1, sub = 0;
  bool nested = false;
  const cJSON *d;
  cJSON_ArrayForEach(d, dims) {
    if (cJSON_IsArray(d)) {
      nested = true;
      sub += trc_numel(d);
    } else if (cJSON_IsNumber(d)) {
      n *= MAX(0.0, d->valuedouble);
    }
  }
  return nested ? sub : n;
}

static double trc_dim(const cJSON *dims, int i)
{
  int n = cJSON_GetArraySize(dims);
  const cJSON *d = cJSON_GetArrayItem(dims, i < 0 ? n + i : i);
  return cJSON_IsNumber(d) ? d->valuedouble : 0;
}

/* batch, M, N, K of a matrix product from its operands' shapes (a: M x K, b: K x N). */
static void trc_gemm_of(trc_cpu_op *op, const cJSON *a, const cJSON *b, bool linear)
{
  int na = cJSON_GetArraySize(a), nb = cJSON_GetArraySize(b);
  if (na < 2 || nb < 2 || nb > 3)
    return;
  double k = trc_dim(a, -1), m = trc_numel(a) / MAX(k, 1.0);
  double n = linear ? trc_dim(b, 0) : trc_dim(b, -1), batch = 1;
  if (nb == 3) { /* batched: a is batch x M x K */
    batch = trc_dim(b, 0);
    m /= MAX(batch, 1.0);
  }
  if (m > 0 && n > 0 && k > 0) {
    op->gemm[0] = batch;
    op->gemm[1] = m;
    op->gemm[2] = n;
    op->gemm[3] = k;
  }
}

static void trc_matrix_shapes(trc_cpu_op *op, const cJSON *dims)
{
  static const struct {
    const char *name;
    int a;     /* index of the first operand */
    bool linear; /* weight stored N x K */
  } ops[] = {{"aten::mm", 0, false},    {"aten::bmm", 0, false},   {"aten::matmul", 0, false},
             {"aten::addmm", 1, false}, {"aten::baddbmm", 1, false}, {"aten::linear", 0, true}};
  for (size_t i = 0; i < G_N_ELEMENTS(ops); i++)
    if (strcmp(op->name, ops[i].name) == 0)
      trc_gemm_of(op, cJSON_GetArrayItem(dims, ops[i].a), cJSON_GetArrayItem(dims, ops[i].a + 1),
                  ops[i].linear);
}

/* nccl:OP (the collective and its input buffer), c10d::OP (output then input tensors: their
 * ratio is the group size of a gather or a scatter), record_param_comms (explicit args). */
static void trc_collective_shapes(trc_cpu_op *op, const cJSON *args, const cJSON *dims,
                                  const cJSON *types)
{
  bool nccl = g_str_has_prefix(op->name, "nccl:"), c10d = g_str_has_prefix(op->name, "c10d::");
  trc_nccl_coll coll;
  double in = 0, out = 0, elem = 0;
  int group = 0;
  if (trc_args_collective(args, &coll, &in, &out, &elem, &group)) {
    op->coll = coll;
    op->coll_in = in;
    op->coll_out = out;
    op->elem_size = elem;
    op->group_size = group;
    return;
  }
  if (!nccl && !c10d)
    return;
  op->coll = trc_coll_of_op_name(strchr(op->name, ':') + 1 + c10d);
  const cJSON *t0 = cJSON_GetArrayItem(types, 0);
  op->elem_size = cJSON_IsString(t0) ? trc_type_size(t0->valuestring) : 0;
  if (nccl) {
    op->coll_in = trc_numel(cJSON_GetArrayItem(dims, 0));
    return;
  }
  double o = trc_numel(cJSON_GetArrayItem(dims, 0)), i = trc_numel(cJSON_GetArrayItem(dims, 1));
  if (op->coll == TRC_NCCL_ALLGATHER && o > 0 && i > 0 && o > i) {
    op->coll_in = i;
    op->coll_out = o;
    op->group_size = (int)(o / i + 0.5);
  } else if (op->coll == TRC_NCCL_REDUCESCATTER && o > 0 && i > 0 && i > o) {
    op->coll_in = i;
    op->coll_out = o;
    op->group_size = (int)(i / o + 0.5);
  }
}

void trc_cpu_op_shapes(trc_cpu_op *op, const cJSON *args)
{
  const cJSON *dims = cJSON_GetObjectItemCaseSensitive(args, "Input Dims");
  const cJSON *types = cJSON_GetObjectItemCaseSensitive(args, "Input type");
  trc_collective_shapes(op, args, dims, types);
  if (!cJSON_IsArray(dims))
    return;
  int n = cJSON_GetArraySize(dims);
  for (int i = 0; i < n; i++) {
    const cJSON *ty = cJSON_GetArrayItem(types, i);
    double size = cJSON_IsString(ty) ? trc_type_size(ty->valuestring) : 0;
    double bytes = trc_numel(cJSON_GetArrayItem(dims, i)) * size;
    op->in_bytes += bytes;
    op->out_bytes = MAX(op->out_bytes, bytes);
    if (op->dtype < 0 && bytes > 0)
      op->dtype = (int8_t)trc_type_dtype(ty->valuestring);
  }
  trc_matrix_shapes(op, dims);
}

/* ---- linking -------------------------------------------------------------------------------- */

/* Per thread, in time order, CPU ops (parents before children) and calls: an op's parent and a
 * call's innermost op are the top of the stack of ops still open. */
typedef struct {
  double ts;
  int idx;
  bool call;
} trc_item;

static int trc_cmp_item(const void *a, const void *b)
{
  const trc_item *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->call != y->call)
    return x->call ? 1 : -1; /* an op starting with a call contains it */
  return x->idx - y->idx;     /* ops: the longer (sorted first) is the parent */
}

static void trc_nest_thread(trc_trace *t, GArray *items)
{
  g_array_sort(items, trc_cmp_item);
  GArray *stack = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < items->len; i++) {
    const trc_item *it = &g_array_index(items, trc_item, i);
    while (stack->len) {
      const trc_cpu_op *top = &g_array_index(t->cpu_ops, trc_cpu_op, g_array_index(stack, int, stack->len - 1));
      if (it->ts < top->ts + top->dur)
        break;
      g_array_set_size(stack, stack->len - 1);
    }
    int top = stack->len ? g_array_index(stack, int, stack->len - 1) : -1;
    if (it->call) {
      g_array_index(t->calls, trc_call, it->idx).cpu_op = top;
    } else {
      g_array_index(t->cpu_ops, trc_cpu_op, it->idx).parent = top;
      g_array_append_val(stack, it->idx);
    }
  }
  g_array_free(stack, TRUE);
}

static void trc_nest(trc_trace *t)
{
  GHashTable *threads = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                              (GDestroyNotify)g_array_unref);
  for (int pass = 0; pass < 2; pass++) {
    GArray *src = pass ? t->calls : t->cpu_ops;
    for (guint i = 0; i < src->len; i++) {
      int64_t tid = pass ? g_array_index(src, trc_call, i).tid : g_array_index(src, trc_cpu_op, i).tid;
      double ts = pass ? g_array_index(src, trc_call, i).ts : g_array_index(src, trc_cpu_op, i).ts;
      GArray *items = g_hash_table_lookup(threads, &tid);
      if (!items) {
        items = g_array_new(FALSE, FALSE, sizeof(trc_item));
        g_hash_table_insert(threads, g_memdup2(&tid, sizeof tid), items);
      }
      trc_item it = {.ts = ts, .idx = (int)i, .call = pass == 1};
      g_array_append_val(items, it);
    }
  }
  GHashTableIter iter;
  gpointer key, value;
  g_hash_table_iter_init(&iter, threads);
  while (g_hash_table_iter_next(&iter, &key, &value))
    trc_nest_thread(t, value);
  g_hash_table_destroy(threads);
}

/* The first CPU op from `idx` outwards (at most `depth` levels) that `want` accepts. */
static int trc_find_up(const trc_trace *t, int idx, int depth, bool (*want)(const trc_cpu_op *))
{
  for (int d = 0; idx >= 0 && d < depth; d++) {
    const trc_cpu_op *op = &g_array_index(t->cpu_ops, trc_cpu_op, idx);
    if (want(op))
      return idx;
    idx = op->parent;
  }
  return -1;
}

static bool trc_has_gemm(const trc_cpu_op *op)
{
  return op->gemm[3] > 0;
}

static bool trc_has_bytes(const trc_cpu_op *op)
{
  return op->in_bytes > 0;
}

static bool trc_has_message(const trc_cpu_op *op)
{
  return op->coll != TRC_NCCL_UNKNOWN && (op->coll_in > 0 || op->coll_out > 0);
}

static bool trc_has_group(const trc_cpu_op *op)
{
  return op->coll != TRC_NCCL_UNKNOWN && op->group_size > 0;
}

/* A collective's size and group from the CPU ops around its launch, where the kernel's own
 * args lack them. nccl-tests sizes: the output buffer of an all-gather, the input otherwise. */
static void trc_link_nccl(const trc_trace *t, trc_gpu_op *op, int cpu)
{
  int m = trc_find_up(t, cpu, 8, trc_has_message);
  int g = trc_find_up(t, cpu, 8, trc_has_group);
  if (m >= 0 && op->comm_bytes <= 0) {
    const trc_cpu_op *c = &g_array_index(t->cpu_ops, trc_cpu_op, m);
    op->coll = c->coll;
    double elem = c->elem_size > 0 ? c->elem_size : 4;
    op->comm_bytes = elem * (c->coll_in > 0 ? c->coll_in : c->coll_out);
    if (c->coll == TRC_NCCL_ALLGATHER)
      op->comm_bytes = c->coll_out > 0 ? elem * c->coll_out : 0; /* needs the group: below */
  }
  if (op->group_size <= 0 && g >= 0)
    op->group_size = g_array_index(t->cpu_ops, trc_cpu_op, g).group_size;
  if (op->group_size <= 0)
    op->group_size = t->pg_size > 0 ? t->pg_size : MAX(t->world_size, 1);
  if (op->coll == TRC_NCCL_ALLGATHER && op->comm_bytes <= 0 && m >= 0) {
    const trc_cpu_op *c = &g_array_index(t->cpu_ops, trc_cpu_op, m);
    op->comm_bytes = (c->elem_size > 0 ? c->elem_size : 4) * c->coll_in * op->group_size;
  }
}

/* The data type a kernel's name states, or CFG_NDTYPES; cached per interned name. */
static int trc_name_dtype(GHashTable *cache, const char *name)
{
  gpointer v;
  if (g_hash_table_lookup_extended(cache, name, NULL, &v))
    return GPOINTER_TO_INT(v);
  int d = (int)trc_kernel_dtype(name, CFG_NDTYPES);
  g_hash_table_insert(cache, (gpointer)name, GINT_TO_POINTER(d));
  return d;
}

static void trc_link_shapes(const trc_trace *t, trc_gpu_op *op, int cpu, GHashTable *dtypes)
{
  int dtype = -1;
  if (op->kclass == TRC_GEMM) {
    int g = trc_find_up(t, cpu, 4, trc_has_gemm);
    if (g >= 0) {
      const trc_cpu_op *c = &g_array_index(t->cpu_ops, trc_cpu_op, g);
      memcpy(op->gemm, c->gemm, sizeof op->gemm);
      op->flops = 2 * c->gemm[0] * c->gemm[1] * c->gemm[2] * c->gemm[3];
      op->shape_op = g;
      dtype = c->dtype;
    }
  } else if (op->kind == TRC_OP_KERNEL && op->kclass != TRC_NCCL) {
    int b = trc_find_up(t, cpu, 1, trc_has_bytes);
    if (b >= 0) {
      const trc_cpu_op *c = &g_array_index(t->cpu_ops, trc_cpu_op, b);
      op->bytes = c->in_bytes + c->out_bytes;
      op->shape_op = b;
      dtype = c->dtype;
    }
  }
  int named = trc_name_dtype(dtypes, op->name);
  op->dtype = (uint8_t)(named < CFG_NDTYPES ? named : dtype >= 0 ? dtype : CFG_FP32);
}

void trc_link(trc_trace *t)
{
  trc_nest(t);
  GHashTable *by_corr = g_hash_table_new(g_int64_hash, g_int64_equal);
  GHashTable *dtypes = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < t->calls->len; i++) {
    trc_call *c = &g_array_index(t->calls, trc_call, i);
    if (c->correlation >= 0 && !g_hash_table_contains(by_corr, &c->correlation))
      g_hash_table_insert(by_corr, &c->correlation, GUINT_TO_POINTER(i + 1));
  }
  for (guint i = 0; i < t->ops->len; i++) {
    trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
    op->call = (int)GPOINTER_TO_UINT(g_hash_table_lookup(by_corr, &op->correlation)) - 1;
    int cpu = op->call >= 0 ? g_array_index(t->calls, trc_call, op->call).cpu_op : -1;
    if (op->kclass == TRC_NCCL)
      trc_link_nccl(t, op, cpu);
    else
      trc_link_shapes(t, op, cpu, dtypes);
  }
  g_hash_table_destroy(by_corr);
  g_hash_table_destroy(dtypes);
}
