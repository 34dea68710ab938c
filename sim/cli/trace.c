/* dlsim trace summary TRACE [--json | --csv] [--top N]: a real PyTorch profiler trace, summarised per
 * ProfilerStep: compute, communication, their overlap, exposed communication, idle time, time
 * by kernel class and the kernels that take the most time. */
#include "cli/cli.h"
#include "report/report.h"
#include "trace/trace.h"
#include "units/units.h"

#include <stdio.h>
#include <string.h>

static void tr_print_header(const trc_trace *t, const trc_summary *s)
{
  g_autofree char *base = g_path_get_basename(t->path);
  printf("dlsim trace summary: %s\n", base);
  if (t->gpu_name) {
    g_autofree char *mem = units_format_bytes(t->gpu_memory);
    printf("  GPU       %s (%d SMs, %s), device %d\n", t->gpu_name, t->num_sms, mem, t->device);
  } else {
    printf("  GPU       not stated in the trace (no deviceProperties), device %d\n", t->device);
  }
  if (t->world_size > 0)
    printf("  job       rank %d of %d, %s backend, NCCL %s\n", t->rank, t->world_size,
           t->backend ? t->backend : "?", t->nccl_version ? t->nccl_version : "version not stated");
  else
    printf("  job       single process (no world size in distributedInfo)\n");
  printf("  events    %" G_GUINT64_FORMAT " read: %u kernels, %u copies, %u memsets on %d stream%s; "
         "%u runtime calls, %u CPU ops\n",
         t->events, t->ops->len - s->counts[TRC_MEMCPY] - s->counts[TRC_MEMSET],
         s->counts[TRC_MEMCPY], s->counts[TRC_MEMSET], t->nstreams, t->nstreams == 1 ? "" : "s",
         t->calls->len, t->cpu_ops->len);
  if (s->counts[TRC_NCCL]) {
    printf("  NCCL      %u kernels:", s->counts[TRC_NCCL]);
    for (int c = 0; c <= TRC_NCCL_UNKNOWN; c++)
      if (s->nccl_counts[c])
        printf(" %s x%u", trc_nccl_coll_name((trc_nccl_coll)c), s->nccl_counts[c]);
    printf("\n");
    for (guint i = 0; i < s->nccl->len; i++) {
      const trc_nccl_stat *n = &g_array_index(s->nccl, trc_nccl_stat, i);
      g_autofree char *t = units_format_seconds(n->total);
      printf("            %-13s x%-5u %11s  kernel: %s %s %s\n", trc_nccl_coll_name(n->coll), n->count, t,
             trc_nccl_coll_name(n->name.coll), n->name.algo[0] ? n->name.algo : "-",
             n->name.proto[0] ? n->name.proto : "-");
    }
  }
}

static void tr_cell(double seconds)
{
  g_autofree char *t = units_format_seconds(seconds);
  printf(" %11s", t);
}

static void tr_print_steps(const trc_summary *s)
{
  printf("\n  %-20s %11s %11s %11s %11s %11s %11s %11s\n", s->profiler_steps ? "step" : "span",
         "duration", "compute", "comm", "exposed", "overlap", "idle", "memcpy");
  trc_step_summary total = {0};
  for (guint i = 0; i < s->steps->len; i++) {
    const trc_step_summary *w = &g_array_index(s->steps, trc_step_summary, i);
    printf("  %-20s", w->name);
    double v[] = {w->duration, w->compute, w->comm, w->exposed_comm, w->overlap, w->idle, w->memcpy};
    for (size_t k = 0; k < G_N_ELEMENTS(v); k++)
      tr_cell(v[k]);
    printf("\n");
    total.duration += w->duration;
    total.compute += w->compute;
    total.comm += w->comm;
    total.exposed_comm += w->exposed_comm;
    total.overlap += w->overlap;
    total.idle += w->idle;
    total.memcpy += w->memcpy;
  }
  if (s->steps->len > 1) {
    double n = s->steps->len;
    printf("  %-20s", "mean");
    double v[] = {total.duration / n, total.compute / n, total.comm / n, total.exposed_comm / n,
                  total.overlap / n, total.idle / n, total.memcpy / n};
    for (size_t k = 0; k < G_N_ELEMENTS(v); k++)
      tr_cell(v[k]);
    printf("\n");
  }
  printf("  compute + exposed + idle = duration; comm = exposed + overlap (GPU time, any stream)\n");
}

static void tr_print_classes(const trc_summary *s)
{
  double all = 0;
  for (int c = 0; c < TRC_NCLASSES; c++)
    all += s->by_class[c];
  printf("\n  time by kernel class (whole trace, summed over streams)\n");
  for (int c = 0; c < TRC_NCLASSES; c++) {
    if (!s->counts[c])
      continue;
    g_autofree char *t = units_format_seconds(s->by_class[c]);
    printf("    %-12s %11s %6.1f %%  (%u)\n", trc_class_name((trc_class)c), t,
           all > 0 ? 100 * s->by_class[c] / all : 0, s->counts[c]);
  }
}

static void tr_print_top(const trc_summary *s, int top)
{
  if (top <= 0 || s->kernels->len == 0)
    return;
  printf("\n  top %d kernels (whole trace)\n    %11s %7s %11s  %-11s  %s\n", top, "total", "count",
         "mean", "class", "kernel");
  for (guint i = 0; i < s->kernels->len && (int)i < top; i++) {
    const trc_kernel_stat *k = &g_array_index(s->kernels, trc_kernel_stat, i);
    g_autofree char *total = units_format_seconds(k->total);
    g_autofree char *mean = units_format_seconds(k->total / k->count);
    g_autofree char *name = trc_short_name(k->name);
    printf("    %11s %7u %11s  %-11s  %.90s\n", total, k->count, mean, trc_class_name(k->kclass), name);
  }
}

static cJSON *tr_classes_json(const double *by_class, const guint *counts)
{
  cJSON *o = cJSON_CreateObject();
  for (int c = 0; c < TRC_NCLASSES; c++)
    if (by_class[c] > 0 || (counts && counts[c]))
      cJSON_AddNumberToObject(o, trc_class_name((trc_class)c), by_class[c]);
  return o;
}

static cJSON *tr_step_json(const trc_step_summary *w)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", w->name);
  cJSON_AddNumberToObject(o, "start_s", w->start);
  cJSON_AddNumberToObject(o, "duration_s", w->duration);
  cJSON_AddNumberToObject(o, "compute_s", w->compute);
  cJSON_AddNumberToObject(o, "comm_s", w->comm);
  cJSON_AddNumberToObject(o, "exposed_comm_s", w->exposed_comm);
  cJSON_AddNumberToObject(o, "overlap_s", w->overlap);
  cJSON_AddNumberToObject(o, "idle_s", w->idle);
  cJSON_AddNumberToObject(o, "memcpy_s", w->memcpy);
  cJSON_AddItemToObject(o, "by_class_s", tr_classes_json(w->by_class, NULL));
  return o;
}

static cJSON *tr_json(const trc_trace *t, const trc_summary *s, int top)
{
  cJSON *j = cJSON_CreateObject();
  if (t->gpu_name)
    cJSON_AddStringToObject(j, "gpu", t->gpu_name);
  else
    cJSON_AddNullToObject(j, "gpu");
  cJSON_AddNumberToObject(j, "rank", t->rank);
  cJSON_AddNumberToObject(j, "world_size", t->world_size);
  if (t->nccl_version)
    cJSON_AddStringToObject(j, "nccl_version", t->nccl_version);
  cJSON_AddBoolToObject(j, "profiler_steps", s->profiler_steps);
  cJSON *steps = cJSON_AddArrayToObject(j, "steps");
  for (guint i = 0; i < s->steps->len; i++)
    cJSON_AddItemToArray(steps, tr_step_json(&g_array_index(s->steps, trc_step_summary, i)));
  cJSON_AddItemToObject(j, "kernels_by_class_s", tr_classes_json(s->by_class, s->counts));
  cJSON *counts = cJSON_AddObjectToObject(j, "kernels_by_class");
  for (int c = 0; c < TRC_NCLASSES; c++)
    if (s->counts[c])
      cJSON_AddNumberToObject(counts, trc_class_name((trc_class)c), s->counts[c]);
  cJSON *nccl = cJSON_AddObjectToObject(j, "nccl_kernels");
  for (int c = 0; c <= TRC_NCCL_UNKNOWN; c++)
    if (s->nccl_counts[c])
      cJSON_AddNumberToObject(nccl, trc_nccl_coll_name((trc_nccl_coll)c), s->nccl_counts[c]);
  cJSON *kinds = cJSON_AddArrayToObject(j, "nccl");
  for (guint i = 0; i < s->nccl->len; i++) {
    const trc_nccl_stat *n = &g_array_index(s->nccl, trc_nccl_stat, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "collective", trc_nccl_coll_name(n->coll));
    cJSON_AddStringToObject(o, "kernel_collective", trc_nccl_coll_name(n->name.coll));
    cJSON_AddStringToObject(o, "algorithm", n->name.algo);
    cJSON_AddStringToObject(o, "protocol", n->name.proto);
    cJSON_AddNumberToObject(o, "count", n->count);
    cJSON_AddNumberToObject(o, "total_s", n->total);
    cJSON_AddItemToArray(kinds, o);
  }
  cJSON_AddNumberToObject(j, "streams", t->nstreams);
  cJSON *tops = cJSON_AddArrayToObject(j, "top_kernels");
  for (guint i = 0; i < s->kernels->len && (int)i < top; i++) {
    const trc_kernel_stat *k = &g_array_index(s->kernels, trc_kernel_stat, i);
    cJSON *o = cJSON_CreateObject();
    g_autofree char *name = trc_short_name(k->name);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "class", trc_class_name(k->kclass));
    cJSON_AddNumberToObject(o, "count", k->count);
    cJSON_AddNumberToObject(o, "total_s", k->total);
    cJSON_AddItemToArray(tops, o);
  }
  return j;
}

#define TR_SUMMARY_HELP "TRACE - a PyTorch profiler trace, summarised per step"

typedef struct {
  gboolean json, csv;
  int top;
} tr_args;

enum { TR_NENTRIES = 4 };

/* The options of trace summary, for parsing and for dlsim trace --help. */
static void tr_entries(tr_args *a, GOptionEntry out[TR_NENTRIES])
{
  out[0] = cli_opt(CLI_JSON, &a->json, NULL);
  out[1] = cli_opt(CLI_CSV, &a->csv, "Print CSV: one row per step, times in seconds");
  out[2] = cli_opt(CLI_TOP, &a->top, "Kernels to list (default 10)");
  out[3] = (GOptionEntry)CLI_OPT_END;
}

static void tr_print_csv(const trc_summary *s)
{
  cJSON *rows = cJSON_CreateArray();
  for (guint i = 0; i < s->steps->len; i++)
    cJSON_AddItemToArray(rows, tr_step_json(&g_array_index(s->steps, trc_step_summary, i)));
  cli_csv_print(stdout, rows);
  cJSON_Delete(rows);
}

static int tr_summary(int argc, char **argv)
{
  tr_args a = {.top = 10};
  GOptionEntry entries[TR_NENTRIES];
  tr_entries(&a, entries);
  int code = 0;
  if (!cli_parse(entries, TR_SUMMARY_HELP, &argc, &argv, &code))
    return code;
  if (argc != 2) {
    fprintf(stderr, "dlsim: error: dlsim trace summary needs one TRACE (a Kineto .json or .json.gz)\n");
    return 2;
  }
  GError *err = NULL;
  trc_trace *t = trc_load(argv[1], &err);
  if (!t)
    return cli_fail(err);
  trc_summary s;
  trc_summarize(t, &s);
  if (a.csv) {
    tr_print_csv(&s);
  } else if (a.json) {
    cJSON *j = tr_json(t, &s, a.top);
    rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else {
    tr_print_header(t, &s);
    tr_print_steps(&s);
    tr_print_classes(&s);
    tr_print_top(&s, a.top);
  }
  trc_summary_clear(&s);
  trc_free(t);
  return 0;
}

/* The subcommands and, for each, its own options, as GOption prints them. */
static void tr_usage(FILE *out)
{
  tr_args a = {0};
  GOptionEntry entries[TR_NENTRIES];
  tr_entries(&a, entries);
  GOptionContext *ctx = g_option_context_new(TR_SUMMARY_HELP);
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_option_context_set_help_enabled(ctx, FALSE);
  g_set_prgname("dlsim trace summary"); /* the name its usage line shows */
  g_autofree char *help = g_option_context_get_help(ctx, TRUE, NULL);
  g_option_context_free(ctx);
  fprintf(out, "usage: dlsim trace SUBCOMMAND ...   (dlsim trace SUBCOMMAND --help for its options)\n\n"
               "subcommands:\n"
               "  summary    a PyTorch profiler (Kineto) trace per step: compute, communication,\n"
               "             overlap, idle, time by kernel class, top kernels\n\n%s", help);
}

int cli_trace(int argc, char **argv)
{
  static const char *const subcommands[] = {"summary"};
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                    strcmp(argv[1], "help") == 0)) {
    tr_usage(stdout);
    return 0;
  }
  if (argc < 2 || !cli_known("dlsim trace subcommand", argv[1], subcommands,
                              G_N_ELEMENTS(subcommands))) {
    tr_usage(stderr);
    return 2;
  }
  g_autofree char *prog = g_strdup_printf("%s summary", argv[0]);
  argv[1] = prog;
  return tr_summary(argc - 1, argv + 1);
}
