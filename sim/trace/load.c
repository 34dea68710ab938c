/* Loading a trace: events to records. Only complete ("X") events of the categories that matter
 * are kept (GPU kernels, copies and memsets; CUDA runtime calls; CPU ops and annotations);
 * flows, Python frames and metadata rows are counted and dropped. */
#include "trace/trace_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  trc_trace *t;
  const char *origin;
  cJSON *devices;     /* deviceProperties */
  cJSON *distributed; /* distributedInfo */
  GHashTable *classes;/* interned kernel name -> class + 1: names repeat thousands of times */
} trc_loader;

typedef enum { TRC_CAT_NONE, TRC_CAT_KERNEL, TRC_CAT_MEMCPY, TRC_CAT_MEMSET, TRC_CAT_CALL, TRC_CAT_CPU } trc_cat;

static trc_cat trc_category(const char *cat)
{
  static const struct {
    const char *name;
    trc_cat cat;
  } cats[] = {{"kernel", TRC_CAT_KERNEL},     {"gpu_memcpy", TRC_CAT_MEMCPY},
              {"memcpy", TRC_CAT_MEMCPY},     {"gpu_memset", TRC_CAT_MEMSET},
              {"memset", TRC_CAT_MEMSET},     {"cuda_runtime", TRC_CAT_CALL},
              {"runtime", TRC_CAT_CALL},      {"cuda_driver", TRC_CAT_CALL},
              {"cpu_op", TRC_CAT_CPU},        {"operator", TRC_CAT_CPU},
              {"user_annotation", TRC_CAT_CPU}};
  for (size_t i = 0; cat && i < G_N_ELEMENTS(cats); i++)
    if (g_ascii_strcasecmp(cat, cats[i].name) == 0)
      return cats[i].cat;
  return TRC_CAT_NONE;
}

static double trc_jnum(const cJSON *o, const char *key, double dflt)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static const char *trc_jstr(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Thread ids are numbers, or names for the profiler's own rows. */
static int64_t trc_jid(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsNumber(v))
    return (int64_t)v->valuedouble;
  return cJSON_IsString(v) ? (int64_t)g_str_hash(v->valuestring) : 0;
}

static trc_copy trc_copy_kind(const char *name)
{
  if (strstr(name, "HtoD"))
    return TRC_COPY_HTOD;
  if (strstr(name, "DtoH"))
    return TRC_COPY_DTOH;
  if (strstr(name, "DtoD"))
    return TRC_COPY_DTOD;
  return TRC_COPY_OTHER;
}

static void trc_add_gpu_op(trc_loader *l, trc_cat cat, const char *name, double ts, double dur,
                           const cJSON *ev)
{
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
  trc_gpu_op op = {.name = g_string_chunk_insert_const(l->t->strings, name), .ts = ts, .dur = dur,
                   .call = -1, .shape_op = -1, .coll = TRC_NCCL_UNKNOWN, .dtype = CFG_FP32};
  op.correlation = (int64_t)trc_jnum(args, "correlation", -1);
  op.stream = (int)trc_jnum(args, "stream", (double)trc_jid(ev, "tid"));
  op.device = (int)trc_jnum(args, "device", (double)trc_jid(ev, "pid"));
  if (cat == TRC_CAT_KERNEL) {
    op.kind = TRC_OP_KERNEL;
    guint cls = GPOINTER_TO_UINT(g_hash_table_lookup(l->classes, op.name));
    if (!cls)
      g_hash_table_insert(l->classes, (gpointer)op.name, GUINT_TO_POINTER(cls = trc_classify(name) + 1));
    op.kclass = (uint8_t)(cls - 1);
  } else {
    op.kind = cat == TRC_CAT_MEMCPY ? TRC_OP_MEMCPY : TRC_OP_MEMSET;
    op.kclass = cat == TRC_CAT_MEMCPY ? TRC_MEMCPY : TRC_MEMSET;
    op.copy = cat == TRC_CAT_MEMCPY ? trc_copy_kind(name) : TRC_COPY_NONE;
    op.bytes = MAX(0.0, trc_jnum(args, "bytes", 0));
  }
  if (op.kclass == TRC_NCCL) {
    trc_nccl_name nn;
    trc_nccl_parse_name(name, &nn);
    op.coll = nn.coll;
    trc_nccl_coll coll;
    double in = 0, out = 0, elem = 0;
    int group = 0;
    if (trc_args_collective(args, &coll, &in, &out, &elem, &group)) {
      op.coll = coll;
      op.group_size = group;
      op.comm_bytes = (coll == TRC_NCCL_ALLGATHER ? out : in) * elem;
    }
  }
  g_array_append_val(l->t->ops, op);
}

static void trc_add_cpu(trc_loader *l, trc_cat cat, const char *name, double ts, double dur,
                        const cJSON *ev)
{
  trc_trace *t = l->t;
  int64_t tid = trc_jid(ev, "tid");
  if (cat == TRC_CAT_CALL) {
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
    trc_call c = {.name = g_string_chunk_insert_const(t->strings, name), .ts = ts, .dur = dur,
                  .tid = tid, .correlation = (int64_t)trc_jnum(args, "correlation", -1), .cpu_op = -1};
    g_array_append_val(t->calls, c);
    return;
  }
  if (g_str_has_prefix(name, "ProfilerStep#")) {
    trc_step s = {.number = atoi(name + 13), .ts = ts, .dur = dur};
    g_array_append_val(t->steps, s);
  }
  trc_cpu_op op = {.name = g_string_chunk_insert_const(t->strings, name), .ts = ts, .dur = dur,
                   .tid = tid, .parent = -1, .dtype = -1, .coll = TRC_NCCL_UNKNOWN};
  trc_cpu_op_shapes(&op, cJSON_GetObjectItemCaseSensitive(ev, "args"));
  g_array_append_val(t->cpu_ops, op);
}

static bool trc_on_event(void *ctx, const cJSON *ev, int line, int col, GError **err)
{
  trc_loader *l = ctx;
  l->t->events++;
  const char *ph = trc_jstr(ev, "ph");
  trc_cat cat = trc_category(trc_jstr(ev, "cat"));
  if (!ph || strcmp(ph, "X") != 0 || cat == TRC_CAT_NONE)
    return true;
  const char *name = trc_jstr(ev, "name");
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
  const cJSON *dur = cJSON_GetObjectItemCaseSensitive(ev, "dur");
  const char *bad = !name                                     ? "a \"name\" string"
                    : !cJSON_IsNumber(ts) || !isfinite(ts->valuedouble) ? "a numeric \"ts\""
                    : dur && (!cJSON_IsNumber(dur) || !(dur->valuedouble >= 0) || !isfinite(dur->valuedouble))
                        ? "a non-negative numeric \"dur\""
                        : NULL;
  if (bad) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: a complete (\"X\") %s event needs %s",
                l->origin, line, col, trc_jstr(ev, "cat"), bad);
    return false;
  }
  double d = dur ? dur->valuedouble : 0;
  if (cat == TRC_CAT_KERNEL || cat == TRC_CAT_MEMCPY || cat == TRC_CAT_MEMSET)
    trc_add_gpu_op(l, cat, name, ts->valuedouble, d, ev);
  else
    trc_add_cpu(l, cat, name, ts->valuedouble, d, ev);
  return true;
}

static bool trc_want(void *ctx, const char *key)
{
  (void)ctx;
  return strcmp(key, "deviceProperties") == 0 || strcmp(key, "distributedInfo") == 0;
}

static void trc_meta(void *ctx, const char *key, const cJSON *value)
{
  trc_loader *l = ctx;
  cJSON **slot = strcmp(key, "deviceProperties") == 0 ? &l->devices : &l->distributed;
  cJSON_Delete(*slot);
  *slot = cJSON_Duplicate(value, true);
}

/* ---- after reading -------------------------------------------------------------------------- */

static int trc_cmp_op(const void *a, const void *b)
{
  const trc_gpu_op *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts ? 1 : (x->stream > y->stream) - (x->stream < y->stream);
}

static int trc_cmp_call(const void *a, const void *b)
{
  const trc_call *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Parents before children: by start, the longer first. */
static int trc_cmp_cpu(const void *a, const void *b)
{
  const trc_cpu_op *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return x->dur > y->dur ? -1 : x->dur < y->dur;
}

static int trc_cmp_step(const void *a, const void *b)
{
  const trc_step *x = a, *y = b;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The device the GPU ops ran on: the most frequent one. */
static int trc_main_device(const trc_trace *t)
{
  g_autoptr(GHashTable) n = g_hash_table_new(g_direct_hash, g_direct_equal);
  int best = 0;
  guint best_n = 0;
  for (guint i = 0; i < t->ops->len; i++) {
    int d = g_array_index(t->ops, trc_gpu_op, i).device;
    guint c = GPOINTER_TO_UINT(g_hash_table_lookup(n, GINT_TO_POINTER(d))) + 1;
    g_hash_table_insert(n, GINT_TO_POINTER(d), GUINT_TO_POINTER(c));
    if (c > best_n) {
      best_n = c;
      best = d;
    }
  }
  return best;
}

static void trc_read_device(trc_trace *t, const cJSON *devices)
{
  t->device = trc_main_device(t);
  const cJSON *d, *found = NULL;
  cJSON_ArrayForEach(d, devices)
    if (!found || (int)trc_jnum(d, "id", -1) == t->device)
      found = d;
  if (!found || !trc_jstr(found, "name"))
    return;
  t->gpu_name = g_strdup(trc_jstr(found, "name"));
  t->num_sms = (int)trc_jnum(found, "numSms", 0);
  t->gpu_memory = trc_jnum(found, "totalGlobalMem", 0);
  t->cc_major = (int)trc_jnum(found, "computeMajor", 0);
  t->cc_minor = (int)trc_jnum(found, "computeMinor", 0);
}

static void trc_read_distributed(trc_trace *t, const cJSON *info)
{
  t->rank = (int)trc_jnum(info, "rank", -1);
  t->world_size = (int)trc_jnum(info, "world_size", 0);
  const char *backend = trc_jstr(info, "backend"), *nccl = trc_jstr(info, "nccl_version");
  t->backend = backend ? g_strdup(backend) : NULL;
  t->nccl_version = nccl ? g_strdup(nccl) : NULL;
  const cJSON *pg;
  cJSON_ArrayForEach(pg, cJSON_GetObjectItemCaseSensitive(info, "pg_config")) {
    const char *desc = trc_jstr(pg, "pg_desc"), *pname = trc_jstr(pg, "pg_name");
    if ((desc && strcmp(desc, "default_pg") == 0) || (pname && strcmp(pname, "0") == 0))
      t->pg_size = (int)trc_jnum(pg, "pg_size", 0);
  }
}

static void trc_count_streams(trc_trace *t)
{
  g_autoptr(GHashTable) s = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < t->ops->len; i++)
    g_hash_table_add(s, GINT_TO_POINTER(g_array_index(t->ops, trc_gpu_op, i).stream));
  t->nstreams = (int)g_hash_table_size(s);
}

static trc_trace *trc_new(const char *path)
{
  trc_trace *t = g_new0(trc_trace, 1);
  t->path = g_strdup(path);
  t->rank = -1;
  t->ops = g_array_new(FALSE, FALSE, sizeof(trc_gpu_op));
  t->calls = g_array_new(FALSE, FALSE, sizeof(trc_call));
  t->cpu_ops = g_array_new(FALSE, FALSE, sizeof(trc_cpu_op));
  t->steps = g_array_new(FALSE, FALSE, sizeof(trc_step));
  t->strings = g_string_chunk_new(1 << 16);
  return t;
}

static trc_trace *trc_read(GInputStream *in, const char *origin, GError **err)
{
  trc_loader l = {.t = trc_new(origin), .origin = origin,
                  .classes = g_hash_table_new(g_direct_hash, g_direct_equal)};
  trc_sink sink = {.event = trc_on_event, .want = trc_want, .meta = trc_meta, .ctx = &l};
  bool ok = trc_stream_read(in, origin, &sink, &l.t->bytes_read, err);
  if (ok && l.t->ops->len == 0 && l.t->cpu_ops->len == 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: no GPU kernels and no CPU ops: not a PyTorch profiler (Kineto) trace", origin);
    ok = false;
  }
  if (ok) {
    trc_trace *t = l.t;
    g_array_sort(t->ops, trc_cmp_op);
    g_array_sort(t->calls, trc_cmp_call);
    g_array_sort(t->cpu_ops, trc_cmp_cpu);
    g_array_sort(t->steps, trc_cmp_step);
    trc_read_device(t, l.devices);
    trc_read_distributed(t, l.distributed);
    trc_count_streams(t);
    trc_link(t);
  }
  cJSON_Delete(l.devices);
  cJSON_Delete(l.distributed);
  g_hash_table_destroy(l.classes);
  if (!ok)
    g_clear_pointer(&l.t, trc_free);
  return l.t;
}

trc_trace *trc_load(const char *path, GError **err)
{
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s", path,
                g_file_test(path, G_FILE_TEST_EXISTS) ? "not a regular file (expected a trace file)"
                                                      : "no such file");
    return NULL;
  }
  GFile *f = g_file_new_for_path(path);
  GError *io = NULL;
  GFileInputStream *in = g_file_read(f, NULL, &io);
  g_object_unref(f);
  if (!in) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s", path, io->message);
    g_error_free(io);
    return NULL;
  }
  trc_trace *t = trc_read(G_INPUT_STREAM(in), path, err);
  g_object_unref(in);
  return t;
}

trc_trace *trc_load_text(const char *text, gsize len, const char *origin, GError **err)
{
  GInputStream *in = g_memory_input_stream_new_from_data(text, (gssize)len, NULL);
  trc_trace *t = trc_read(in, origin, err);
  g_object_unref(in);
  return t;
}

void trc_free(trc_trace *t)
{
  if (!t)
    return;
  g_free(t->path);
  g_free(t->gpu_name);
  g_free(t->backend);
  g_free(t->nccl_version);
  g_array_free(t->ops, TRUE);
  g_array_free(t->calls, TRUE);
  g_array_free(t->cpu_ops, TRUE);
  g_array_free(t->steps, TRUE);
  g_string_chunk_free(t->strings);
  g_free(t);
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* Digits [s, s + n) as a step number; nothing is -1 (unbounded). */
static bool trc_step_number(const char *s, gsize n, int *out)
{
  *out = -1;
  if (n == 0)
    return true;
  if (n > 9)
    return false;
  for (gsize i = 0; i < n; i++)
    if (!g_ascii_isdigit(s[i]))
      return false;
  *out = atoi(s);
  return true;
}

bool trc_parse_steps(const char *text, int *first, int *last, GError **err)
{
  *first = *last = -1;
  if (!text)
    return true;
  const char *dash = strchr(text, '-');
  bool ok;
  if (!dash) {
    ok = trc_step_number(text, strlen(text), first) && *first >= 0;
    *last = *first;
  } else {
    ok = trc_step_number(text, (gsize)(dash - text), first) &&
         trc_step_number(dash + 1, strlen(dash + 1), last) && (*first >= 0 || *last >= 0) &&
         (*first < 0 || *last < 0 || *last >= *first);
  }
  if (!ok)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--steps %s: expected ProfilerStep numbers A-B, A-, -B or A", text);
  return ok;
}

bool trc_step_range(const trc_trace *t, int first, int last, guint *from, guint *count,
                    GError **err)
{
  *from = 0;
  *count = 0;
  for (guint i = 0; i < t->steps->len; i++) {
    int n = g_array_index(t->steps, trc_step, i).number;
    if ((first >= 0 && n < first) || (last >= 0 && n > last))
      continue;
    if (*count == 0)
      *from = i;
    (*count)++;
  }
  if (*count)
    return true;
  if (t->steps->len == 0)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: the trace has no ProfilerStep#N annotation (profile with "
                "torch.profiler.schedule and call prof.step())", t->path);
  else
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: no ProfilerStep in %d..%d (the trace has %d..%d)",
                t->path, first, last, g_array_index(t->steps, trc_step, 0).number,
                g_array_index(t->steps, trc_step, t->steps->len - 1).number);
  return false;
}
