/* Chrome trace (Perfetto-loadable) of a simulated step: one process per GPU, one thread per
 * stream, a memory counter per GPU. A macro op (a stack of identical layers the engine times as
 * one interval) is opened up: one event per layer pass, named with its layer, direction and
 * micro-batch, holding the template's kernels and collectives at the times of the list
 * schedule the engine timed it with. The trace only explains the step: nothing here changes a
 * number the engine computed. */
#include "report/report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *rep_stream_name(int s)
{
  static const char *const names[] = {"compute", "dp comm", "tp comm", "pp send", "ep comm", "pp recv", "cp comm",
                                       "pp send (reverse)", "pp recv (reverse)"};
  return s >= 0 && s < PROG_NSTREAMS ? names[s] : "stream";
}

/* ---- rank lists ("0-7,64") ------------------------------------------------------------------ */

static int rep_int_cmp(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* "0-7,64": runs of consecutive ranks as ranges. */
static void rep_ranks_text(GString *o, const int *ranks, int n)
{
  g_autofree int *s = g_memdup2(ranks, sizeof(int) * (gsize)MAX(n, 1));
  qsort(s, (size_t)n, sizeof(int), rep_int_cmp);
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && s[j + 1] == s[j] + 1)
      j++;
    g_string_append_printf(o, "%s%d", i ? "," : "", s[i]);
    if (j > i)
      g_string_append_printf(o, "-%d", s[j]);
    i = j + 1;
  }
}

static bool rep_rank_bound(const char *text, const char *from, const char *to, long *out, GError **err)
{
  char *end = NULL;
  errno = 0;
  *out = strtol(from, &end, 10);
  if (end == from || end != to || errno || *out < 0 || *out > 1 << 30 ||
      !g_ascii_isdigit(*from)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--trace-ranks: expected ranks like 0-7,64, got '%s'", text);
    return false;
  }
  return true;
}

bool rep_trace_ranks_parse(const char *text, GArray **out, GError **err)
{
  *out = g_array_new(FALSE, FALSE, sizeof(int));
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (int i = 0; parts[i]; i++) {
    const char *dash = strchr(parts[i], '-');
    const char *end = parts[i] + strlen(parts[i]);
    long lo = 0, hi = 0;
    bool ok = rep_rank_bound(text, parts[i], dash ? dash : end, &lo, err) &&
              rep_rank_bound(text, dash ? dash + 1 : parts[i], end, &hi, err);
    if (ok && hi < lo) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--trace-ranks: range %s runs backwards", parts[i]);
      ok = false;
    }
    if (!ok) {
      g_clear_pointer(out, g_array_unref);
      return false;
    }
    int pair[2] = {(int)lo, (int)hi};
    g_array_append_vals(*out, pair, 2);
  }
  return true;
}

/* ---- who stands for whom -------------------------------------------------------------------- */

/* The root of `r`'s block, halving the path on the way (roots are their block's smallest rank). */
static int rep_root(int *lead, int r)
{
  while (lead[r] != r)
    r = lead[r] = lead[lead[r]];
  return r;
}

/* Per rank, the smallest rank of its block: the union of its groups in the families of the
 * dimensions `dims` (1 << prog_dim), as the DES folds them (engine/fold.c). */
static int *rep_block_leads(const prog_program *p, unsigned dims)
{
  int *lead = g_new(int, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    lead[r] = r;
  for (guint f = 0; f < p->families->len; f++) {
    const prog_family *fam = g_ptr_array_index(p->families, f);
    for (int r = 0; (dims >> fam->dim & 1) && r < p->nranks; r++) {
      const prog_group *g = prog_group_of(p, (int)f, r);
      for (int m = 0; g && m < g->n; m++) {
        int a = rep_root(lead, r), b = rep_root(lead, g->ranks[m]);
        lead[MAX(a, b)] = MIN(a, b); /* the smaller root stays: roots remain the smallest */
      }
    }
  }
  for (int r = 0; r < p->nranks; r++)
    lead[r] = rep_root(lead, r);
  return lead;
}

/* Per rank, the rank whose events it shows: itself when the engine simulated it, else its
 * block's lead (the DES runs one rank per block of the dimensions it folded, or per
 * tensor-parallel group when it folded none: those run in step) or its class's representative
 * (the analytic engine follows one rank per class); -1 when none has events. */
static int *rep_stand_ins(const prog_program *p, const eng_result *res)
{
  g_autofree bool *has = g_new0(bool, p->nranks);
  for (guint i = 0; res->events && i < res->events->len; i++)
    has[g_array_index(res->events, eng_event, i).rank] = true;
  unsigned dims = res->fold.folded_dims ? res->fold.folded_dims : 1u << PROG_DIM_TP;
  g_autofree int *lead = rep_block_leads(p, dims);
  int *src = g_new(int, p->nranks);
  for (int r = 0; r < p->nranks; r++) {
    int rep = prog_class_at(p, p->class_of[r])->rep;
    src[r] = has[r] ? r : has[lead[r]] ? lead[r] : rep >= 0 && has[rep] ? rep : -1;
  }
  return src;
}

GArray *rep_trace_simulated(const sim_result *run, int max)
{
  const prog_program *p = run->program;
  g_autofree int *src = rep_stand_ins(p, &run->eng);
  GArray *ranges = g_array_new(FALSE, FALSE, sizeof(int));
  for (int r = 0, n = 0; r < p->nranks && n < max; r++)
    if (src[r] == r) {
      int pair[2] = {r, r};
      g_array_append_vals(ranges, pair, 2);
      n++;
    }
  return ranges;
}

/* ---- the writer ----------------------------------------------------------------------------- */

typedef struct {
  rep_trace_sink sink;   /* takes every event */
  void *sink_ctx;
  const sim_result *run;
  const prog_program *p;
  eng_evaluator *ev;
  GHashTable *schedules; /* tmpl * 65536 + class + 1 -> eng_template_schedule */
  GHashTable *seen;      /* per process: event name -> occurrences so far (its micro-batch) */
  int steps;             /* micro-batches per GPU to show, 0: all */
  int rank, src;         /* the process being written and the rank whose events it shows */
} rep_tr;

static void rep_emit(rep_tr *t, cJSON *e)
{
  cJSON *args = cJSON_GetObjectItem(e, "args");
  if (args && !args->child)
    cJSON_DeleteItemFromObject(e, "args");
  t->sink(t->sink_ctx, e);
}

static void rep_meta(rep_tr *t, int tid, const char *what, const char *key, cJSON *value)
{
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", t->rank);
  cJSON_AddNumberToObject(e, "tid", tid);
  cJSON_AddStringToObject(e, "name", what);
  cJSON *args = cJSON_AddObjectToObject(e, "args");
  cJSON_AddItemToObject(args, key, value);
  rep_emit(t, e);
}

/* A complete event on this process (args empty: the caller may fill them, then emits it). */
static cJSON *rep_slice(rep_tr *t, int tid, double start, double end, const char *name,
                        const char *cat)
{
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "ph", "X");
  cJSON_AddNumberToObject(e, "pid", t->rank);
  cJSON_AddNumberToObject(e, "tid", tid);
  /* microseconds to the nanosecond, both ends rounded before the duration is taken: a kernel
   * that ends with its layer pass does not overrun it by a rounding */
  long long from = llround(start * 1e9), to = llround(end * 1e9);
  char num[48];
  g_snprintf(num, sizeof num, "%lld.%03lld", from / 1000, from % 1000);
  cJSON_AddRawToObject(e, "ts", num);
  g_snprintf(num, sizeof num, "%lld.%03lld", (to - from) / 1000, (to - from) % 1000);
  cJSON_AddRawToObject(e, "dur", num);
  cJSON_AddStringToObject(e, "name", name);
  cJSON_AddStringToObject(e, "cat", cat);
  cJSON_AddObjectToObject(e, "args");
  return e;
}

static cJSON *rep_args(cJSON *e)
{
  return cJSON_GetObjectItem(e, "args");
}

/* What a collective is: its group (this process's own), size, the algorithm and protocol the
 * planner chose, its dimension. */
static void rep_coll_args(rep_tr *t, cJSON *args, const prog_op *op)
{
  const prog_group *g = prog_group_of(t->p, op->family, t->rank);
  g_autoptr(GString) ranks = g_string_new(NULL);
  rep_ranks_text(ranks, g->ranks, g->n);
  cJSON_AddStringToObject(args, "collective", prog_coll_name(op->coll));
  cJSON_AddStringToObject(args, "group", ranks->str);
  cJSON_AddNumberToObject(args, "bytes", op->comm_bytes);
  cJSON_AddStringToObject(args, "dimension", prog_dim_name(op->dim));
  if (op->count > 1)
    cJSON_AddNumberToObject(args, "count", op->count);
  const coll_schedule *s = eng_evaluate_schedule(t->ev, op, t->src);
  if (!s)
    return;
  cJSON_AddStringToObject(args, "algorithm", coll_algo_name(s->plan->algo));
  cJSON_AddStringToObject(args, "protocol", s->proto >= 0 ? cfg_proto_name((cfg_proto)s->proto) : "none");
  char num[48];
  g_snprintf(num, sizeof num, "%.3f", s->time * 1e6);
  cJSON_AddRawToObject(args, "time_alone_us", num);
}

/* The occurrence of `name` on this process so far: the k-th time a GPU runs a pass (or any op
 * of its micro-batch loop) is micro-batch k. Returns -1 past --trace-steps. */
static int rep_micro_batch(rep_tr *t, const char *name)
{
  gpointer hit = NULL;
  int k = g_hash_table_lookup_extended(t->seen, name, NULL, &hit) ? GPOINTER_TO_INT(hit) : 0;
  g_hash_table_insert(t->seen, g_strdup(name), GINT_TO_POINTER(k + 1));
  return t->steps > 0 && k >= t->steps ? -1 : k;
}

/* An op the engine ran as it is (a kernel, a collective outside the layer stacks). */
static void rep_plain(rep_tr *t, const eng_event *e, const prog_op *op)
{
  if (rep_micro_batch(t, e->name) < 0)
    return;
  const char *cat = e->kind == PROG_COMM ? prog_dim_name((prog_dim)e->dim) : "compute";
  cJSON *x = rep_slice(t, e->stream, e->start, e->end, e->name, cat);
  if (e->kind == PROG_COMM)
    rep_coll_args(t, rep_args(x), op);
  rep_emit(t, x);
}

static const eng_template_schedule *rep_schedule(rep_tr *t, int tmpl)
{
  gpointer key = GINT_TO_POINTER(tmpl * 65536 + t->p->class_of[t->src] + 1);
  eng_template_schedule *s = g_hash_table_lookup(t->schedules, key);
  if (!s) {
    s = g_new0(eng_template_schedule, 1);
    eng_evaluate_template(t->ev, tmpl, t->src, s);
    g_hash_table_insert(t->schedules, key, s);
  }
  return s;
}

static void rep_schedule_free(gpointer s)
{
  eng_template_schedule_clear(s);
  g_free(s);
}

/* A layer pass of a macro: "layer0 x48 fwd" runs layer0 to layer47 (a backward stack counts
 * down from its first layer) and "layer5 fwd" is one pass, as parallel.c names its macros;
 * any other name gets "[j/n]". `dir` is what follows the layer ("fwd", "bwd"). */
static void rep_pass_name(const char *macro, uint32_t j, uint32_t count, char *layer, gsize n,
                          const char **dir)
{
  const char *sp = strrchr(macro, ' ');
  if (count == 1 && sp) {
    g_snprintf(layer, n, "%.*s", (int)(sp - macro), macro);
    *dir = sp + 1;
    return;
  }
  sp = strchr(macro, ' ');
  const char *digits = sp;
  while (digits && digits > macro && g_ascii_isdigit(digits[-1]))
    digits--;
  unsigned stack = 0;
  int used = 0;
  bool named = sp && digits < sp && sscanf(sp, " x%u %n", &stack, &used) == 1 && used > 0 &&
               stack == count;
  unsigned first = named ? (unsigned)strtoul(digits, NULL, 10) : 0;
  bool down = named && g_str_has_prefix(sp + used, "bwd");
  if (!named || (down && j > first)) {
    g_snprintf(layer, n, "%s [%u/%u]", macro, j + 1, count);
    *dir = "";
    return;
  }
  *dir = sp + used;
  g_snprintf(layer, n, "%.*s%u", (int)(digits - macro), macro, down ? first - j : first + j);
}

/* The extent of a run's kernels on the compute stream, or of its recomputation alone
 * (nothing: end <= start). */
static void rep_extent(const rep_tr *t, int tmpl, const eng_template_schedule *s, bool recompute,
                       double *lo, double *hi)
{
  const prog_class *k = prog_class_at(t->p, tmpl);
  *lo = s->makespan;
  *hi = 0;
  for (guint i = 0; i < k->ops->len; i++) {
    const prog_op *op = &g_array_index(k->ops, prog_op, i);
    if (op->kind != PROG_COMPUTE || op->stream != PROG_STREAM_COMPUTE || (recompute && !op->recompute))
      continue;
    *lo = MIN(*lo, s->start[i]);
    *hi = MAX(*hi, s->end[i]);
  }
}

/* A template's kernels are named after the layer it was built from ("layer0.qkv" in the
 * template "layer0.fwd"): in layer5's pass that is "layer5.qkv". */
static void rep_kernel_name(const char *tmpl, const char *layer, const char *kernel, char *out,
                            gsize n)
{
  const char *dot = strrchr(tmpl, '.');
  gsize stem = dot ? (gsize)(dot - tmpl) : 0;
  if (stem && strncmp(kernel, tmpl, stem) == 0 && kernel[stem] == '.')
    g_snprintf(out, n, "%s%s", layer, kernel + stem);
  else
    g_strlcpy(out, kernel, n);
}

/* The template's ops of one run, from `base`, their times scaled by `k`. */
static void rep_run_ops(rep_tr *t, int tmpl, const char *layer, const eng_template_schedule *s,
                        double base, double k)
{
  const prog_class *cls = prog_class_at(t->p, tmpl);
  for (guint i = 0; i < cls->ops->len; i++) {
    const prog_op *op = &g_array_index(cls->ops, prog_op, i);
    if (op->kind == PROG_MEM || s->end[i] <= s->start[i])
      continue;
    const char *cat = op->kind == PROG_COMM ? prog_dim_name(op->dim) : op->recompute ? "recompute" : "kernel";
    char name[240];
    rep_kernel_name(cls->name, layer, op->name, name, sizeof name);
    cJSON *x = rep_slice(t, op->stream, base + k * s->start[i], base + k * s->end[i], name, cat);
    if (op->kind == PROG_COMM)
      rep_coll_args(t, rep_args(x), op);
    rep_emit(t, x);
  }
}

/* One run of a macro: the pass, its recomputation, then its ops nested inside. */
static void rep_pass(rep_tr *t, const eng_event *e, const prog_op *op, uint32_t j, double base,
                     double k)
{
  char layer[160], name[200];
  const char *dir = "";
  rep_pass_name(e->name, j, op->count, layer, sizeof layer, &dir);
  g_snprintf(name, sizeof name, "%s%s%s", layer, *dir ? " " : "", dir);
  int mb = rep_micro_batch(t, name);
  if (mb < 0)
    return;
  const eng_template_schedule *s = rep_schedule(t, op->tmpl);
  double lo, hi;
  rep_extent(t, op->tmpl, s, false, &lo, &hi);
  if (hi <= lo)
    lo = 0, hi = s->makespan;
  char label[240];
  g_snprintf(label, sizeof label, "%s mb%d", name, mb);
  cJSON *x = rep_slice(t, PROG_STREAM_COMPUTE, base + k * lo, base + k * hi, label, "layer");
  cJSON *args = rep_args(x);
  cJSON_AddStringToObject(args, "layer", layer);
  cJSON_AddStringToObject(args, "pass", dir);
  cJSON_AddNumberToObject(args, "micro_batch", mb);
  cJSON_AddStringToObject(args, "stack", e->name);
  rep_emit(t, x);
  rep_extent(t, op->tmpl, s, true, &lo, &hi);
  if (hi > lo) {
    g_snprintf(label, sizeof label, "%s recompute mb%d", layer, mb);
    rep_emit(t, rep_slice(t, PROG_STREAM_COMPUTE, base + k * lo, base + k * hi, label, "recompute"));
  }
  rep_run_ops(t, op->tmpl, layer, s, base, k);
}

/* A macro: run j starts j periods after the first; a run the DES stretched (other streams'
 * kernels shared the GPU) stretches all its parts alike. */
static void rep_macro(rep_tr *t, const eng_event *e, const prog_op *op)
{
  const eng_template_schedule *s = rep_schedule(t, op->tmpl);
  double model = s->makespan + (op->count - 1) * s->period;
  double k = model > 0 ? (e->end - e->start) / model : 1;
  for (uint32_t j = 0; j < op->count; j++)
    rep_pass(t, e, op, j, e->start + k * j * s->period, k);
}

static int rep_event_cmp(const void *a, const void *b)
{
  const eng_event *x = *(const eng_event *const *)a, *y = *(const eng_event *const *)b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return (x->op > y->op) - (x->op < y->op);
}

/* The streams a class's ops run on, its macros' templates included: the rows it needs. */
static void rep_streams_used(const prog_program *p, int cls, bool used[PROG_NSTREAMS])
{
  const prog_class *k = prog_class_at(p, cls);
  for (guint i = 0; i < k->ops->len; i++) {
    const prog_op *op = &g_array_index(k->ops, prog_op, i);
    if (op->kind != PROG_MEM)
      used[op->stream] = true;
    if (op->tmpl >= 0 && op->tmpl != cls)
      rep_streams_used(p, op->tmpl, used);
  }
}

static void rep_process_name(rep_tr *t, const int *src)
{
  g_autoptr(GString) name = g_string_new(NULL);
  g_string_printf(name, "GPU %d", t->rank);
  GArray *stands = g_array_new(FALSE, FALSE, sizeof(int));
  for (int r = 0; r < t->p->nranks; r++)
    if (src[r] == t->rank && r != t->rank)
      g_array_append_val(stands, r);
  if (t->src != t->rank) {
    g_string_append_printf(name, " (as GPU %d: not simulated on its own, it runs in step with it)", t->src);
  } else if (stands->len) {
    g_string_append(name, " (simulated; stands for GPUs ");
    rep_ranks_text(name, (const int *)stands->data, (int)stands->len);
    g_string_append(name, ")");
  }
  g_array_free(stands, TRUE);
  rep_meta(t, 0, "process_name", "name", cJSON_CreateString(name->str));
  rep_meta(t, 0, "process_sort_index", "sort_index", cJSON_CreateNumber(t->rank));
  bool used[PROG_NSTREAMS] = {0};
  rep_streams_used(t->p, t->p->class_of[t->src], used);
  for (int s = 0; s < PROG_NSTREAMS; s++)
    if (used[s])
      rep_meta(t, s, "thread_name", "name", cJSON_CreateString(rep_stream_name(s)));
}

static void rep_memory_counter(rep_tr *t, const eng_result *res)
{
  for (guint i = 0; res->mem_samples && i < res->mem_samples->len; i++) {
    const eng_mem_sample *m = &g_array_index(res->mem_samples, eng_mem_sample, i);
    if (m->rank != t->src)
      continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "ph", "C");
    cJSON_AddNumberToObject(e, "pid", t->rank);
    char num[48];
    g_snprintf(num, sizeof num, "%.3f", m->time * 1e6);
    cJSON_AddRawToObject(e, "ts", num);
    cJSON_AddStringToObject(e, "name", "memory");
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(e, "args"), "GiB", m->bytes / 1073741824.0);
    rep_emit(t, e);
  }
}

/* One GPU: its name, its stand-in's events in time order, its memory. */
static void rep_process(rep_tr *t, const int *src, GPtrArray *events)
{
  rep_process_name(t, src);
  g_hash_table_remove_all(t->seen);
  for (guint i = 0; i < events->len; i++) {
    const eng_event *e = g_ptr_array_index(events, i);
    const prog_op *op = prog_op_at(t->p, t->p->class_of[t->src], e->op);
    if (e->kind == PROG_MEM)
      continue;
    if (op->tmpl >= 0 && op->count > 0)
      rep_macro(t, e, op);
    else
      rep_plain(t, e, op);
  }
  rep_memory_counter(t, &t->run->eng);
}

/* The DES's busiest links as counters of one more process: bytes/s over the step. */
static void rep_link_counters(rep_tr *t)
{
  const GArray *smp = t->run->eng.link_samples;
  if (!smp || !smp->len)
    return;
  t->rank = t->p->nranks; /* the process after the GPUs' */
  rep_meta(t, 0, "process_name", "name",
           cJSON_CreateString("network: the busiest links (GB/s per direction)"));
  rep_meta(t, 0, "process_sort_index", "sort_index", cJSON_CreateNumber(t->rank));
  for (guint i = 0; i < smp->len; i++) {
    const eng_link_sample *m = &g_array_index(smp, eng_link_sample, i);
    char name[96], num[48];
    hw_link_describe(t->run->hw, m->link, m->down, name, sizeof name);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "ph", "C");
    cJSON_AddNumberToObject(e, "pid", t->rank);
    g_snprintf(num, sizeof num, "%.3f", m->time * 1e6);
    cJSON_AddRawToObject(e, "ts", num);
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(e, "args"), "GB/s", m->rate / 1e9);
    rep_emit(t, e);
  }
}

/* Per rank, its events in time order (pointers into the result). */
static GPtrArray **rep_events_by_rank(const prog_program *p, const eng_result *res)
{
  GPtrArray **by = g_new0(GPtrArray *, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    by[r] = g_ptr_array_new();
  for (guint i = 0; res->events && i < res->events->len; i++) {
    eng_event *e = &g_array_index(res->events, eng_event, i);
    g_ptr_array_add(by[e->rank], e);
  }
  for (int r = 0; r < p->nranks; r++)
    if (by[r]->len > 1) /* an empty array has no data to pass qsort */
      qsort(by[r]->pdata, by[r]->len, sizeof(gpointer), rep_event_cmp);
  return by;
}

/* The ranks to write: every one, or those of --trace-ranks (each must be in the job). */
static bool *rep_selected(const prog_program *p, const GArray *ranges, GError **err)
{
  bool *sel = g_new(bool, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    sel[r] = !ranges;
  for (guint i = 0; ranges && i < ranges->len; i += 2) {
    int lo = g_array_index(ranges, int, i), hi = g_array_index(ranges, int, i + 1);
    if (hi >= p->nranks) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "--trace-ranks: rank %d is not in this job (ranks 0-%d)", hi, p->nranks - 1);
      g_free(sel);
      return NULL;
    }
    for (int r = lo; r <= hi; r++)
      sel[r] = true;
  }
  return sel;
}

bool rep_trace_walk(const sim_result *run, const rep_trace_options *o, rep_trace_sink sink,
                    void *sink_ctx, GError **err)
{
  const prog_program *p = run->program;
  g_autofree bool *sel = rep_selected(p, o ? o->ranks : NULL, err);
  if (!sel)
    return false;
  rep_tr t = {.sink = sink, .sink_ctx = sink_ctx, .run = run, .p = p, .steps = o ? o->steps : 0};
  t.ev = eng_evaluator_new(p, run->hw, &run->options);
  t.schedules = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, rep_schedule_free);
  t.seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autofree int *src = rep_stand_ins(p, &run->eng);
  GPtrArray **by = rep_events_by_rank(p, &run->eng);
  for (int r = 0; r < p->nranks; r++) {
    if (!sel[r] || src[r] < 0)
      continue;
    t.rank = r;
    t.src = src[r];
    rep_process(&t, src, by[src[r]]);
  }
  rep_link_counters(&t);
  for (int r = 0; r < p->nranks; r++)
    g_ptr_array_free(by[r], TRUE);
  g_free(by);
  g_hash_table_destroy(t.schedules);
  g_hash_table_destroy(t.seen);
  eng_evaluator_free(t.ev);
  return true;
}

/* The JSON writer's sink: one event a line, comma first after the first. */
typedef struct {
  GString *o;
  bool first;
} rep_json_out;

static void rep_json_sink(void *ctx, cJSON *e)
{
  rep_json_out *j = ctx;
  char *s = cJSON_PrintUnformatted(e);
  g_string_append_printf(j->o, "%s\n%s", j->first ? "" : ",", s);
  cJSON_free(s);
  cJSON_Delete(e);
  j->first = false;
}

bool rep_trace_write(const char *path, const sim_result *run, const rep_trace_options *o,
                     GError **err)
{
  rep_json_out j = {.o = g_string_new("{\"displayTimeUnit\":\"ms\",\"traceEvents\":["), .first = true};
  bool ok = rep_trace_walk(run, o, rep_json_sink, &j, err);
  g_string_append(j.o, "\n]}\n");
  ok = ok && cfg_write_text("--trace", path, j.o, err);
  g_string_free(j.o, TRUE);
  return ok;
}
