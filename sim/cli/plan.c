/* dlsim plan -c CLUSTER (-m MODEL | -w WORKLOAD) --gpus N --global-batch B [--seq S]
 *            [--dtype D] [--top K] [--refine R] [--threads J]
 *            [--objective time|tokens-per-gpu|cost|energy|time-to-train]
 *            [--json | --csv] [--quiet] [--set K=V]...
 * dlsim plan -c CLUSTER -w SERVING --gpus N [--ttft S] [--tpot S] [--top K] ...: a workload
 * with a `serving:` section is planned as a deployment (cli/plan_serve.c).
 * Which layout to run: every TP x CP x PP x DP (x EP) x micro-batch x interleaving x ZeRO x
 * recomputation x sequence parallelism x placement, invalid and non-fitting ones dropped, the
 * rest ranked by a closed-form estimate, the best re-simulated with the analytic engine (what
 * `dlsim run` says) and the top K confirmed with the DES; cost, energy and time-to-train rank
 * the refined layouts by their whole run instead (lifecycle/). With MPI (mpirun -np R), the
 * candidates are shared out over the ranks and rank 0 merges. */
#include "cli/cli.h"
#include "cli/cli_internal.h"
#include "lifecycle/lifecycle.h"
#include "planner/planner.h"
#include "report/report.h"
#include "units/units.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char *cluster, *model, *workload, *dtype, *objective, *gpus_text, *ttft, *tpot;
  char **sets, **fix;
  GArray *counts; /* int: the GPU counts of --gpus */
  int gpus, batch, seq, top, refine; /* gpus: the count being planned */
  int jobs;        /* DES confirmations at once (-1: the CPUs online) */
  gboolean json, csv, quiet;
  bool serving;    /* the workload has a serving section: plan a deployment */
  double slo[2];   /* --ttft, --tpot in seconds (0: not given) */
} plan_args;

static void plan_args_clear(plan_args *a)
{
  g_free(a->cluster);
  g_free(a->model);
  g_free(a->workload);
  g_free(a->dtype);
  g_free(a->objective);
  g_free(a->ttft);
  g_free(a->tpot);
  g_free(a->gpus_text);
  if (a->counts)
    g_array_free(a->counts, TRUE);
  g_strfreev(a->sets);
  g_strfreev(a->fix);
}

static void plan_progress(double fraction, void *ctx)
{
  (void)ctx;
  fprintf(stderr, "\rdlsim plan: %3.0f %% of the layouts screened", 100 * fraction);
  if (fraction >= 1)
    fprintf(stderr, "\r%60s\r", "");
  fflush(stderr);
}

/* A line per DES run done, rewritten in place: each takes minutes on thousands of GPUs, and
 * the screening's line has ended by then. */
static void plan_confirmed(int done, int total, void *ctx)
{
  (void)ctx;
  fprintf(stderr, "\rdlsim plan: %d of %d DES runs done", done, total);
  if (done >= total)
    fprintf(stderr, "\r%60s\r", "");
  fflush(stderr);
}

/* The overrides that size the cluster and the workload to the request. */
static char **plan_base_sets(const plan_args *a, int gpus_per_node)
{
  GPtrArray *s = g_ptr_array_new();
  g_ptr_array_add(s, g_strdup_printf("node.count=%d", a->gpus / gpus_per_node));
  /* a base that loads whatever the batch (each layout sets its own) */
  g_ptr_array_add(s, g_strdup_printf("training.global_batch=%d", a->gpus));
  g_ptr_array_add(s, g_strdup_printf("parallel.dp=%d", a->gpus));
  g_ptr_array_add(s, g_strdup("parallel.tp=1"));
  g_ptr_array_add(s, g_strdup("parallel.pp=1"));
  g_ptr_array_add(s, g_strdup("parallel.cp=1"));
  g_ptr_array_add(s, g_strdup("parallel.ep=1"));
  g_ptr_array_add(s, g_strdup("parallel.virtual_stages=1"));
  g_ptr_array_add(s, g_strdup("training.micro_batch=1"));
  if (a->seq > 0)
    g_ptr_array_add(s, g_strdup_printf("model.seq_len=%d", a->seq));
  for (int i = 0; a->sets && a->sets[i]; i++)
    g_ptr_array_add(s, g_strdup(a->sets[i]));
  g_ptr_array_add(s, NULL);
  return (char **)g_ptr_array_free(s, FALSE);
}

static cJSON *plan_json(const plan_screen_result *r, int shown)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "candidates", (double)r->candidates);
  cJSON_AddNumberToObject(j, "valid", (double)r->valid);
  cJSON_AddNumberToObject(j, "fits", (double)r->fits);
  cJSON_AddNumberToObject(j, "elapsed_s", r->elapsed_s);
  cJSON *top = cJSON_AddArrayToObject(j, "top");
  for (guint i = 0; i < r->best->len && (int)i < shown; i++) {
    const plan_candidate *c = &g_array_index(r->best, plan_candidate, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "gpus", c->l.tp * c->l.cp * c->l.pp * c->l.dp);
    cJSON_AddNumberToObject(o, "tp", c->l.tp);
    cJSON_AddNumberToObject(o, "cp", c->l.cp);
    cJSON_AddNumberToObject(o, "pp", c->l.pp);
    cJSON_AddNumberToObject(o, "dp", c->l.dp);
    cJSON_AddNumberToObject(o, "ep", c->l.ep);
    cJSON_AddNumberToObject(o, "micro_batch", c->l.micro_batch);
    cJSON_AddNumberToObject(o, "virtual_stages", c->l.virtual_stages);
    cJSON_AddNumberToObject(o, "zero", c->l.zero);
    cJSON_AddStringToObject(o, "recompute", cfg_recompute_name(c->l.recompute));
    cJSON_AddBoolToObject(o, "sequence_parallel", c->l.sequence_parallel);
    cJSON_AddStringToObject(o, "placement", c->l.pipeline_outer ? "tp,cp,dp,pp" : "tp,cp,pp,dp");
    cJSON_AddNumberToObject(o, "estimate_s", c->estimate_s);
    cJSON_AddNumberToObject(o, "step_time_s", c->step_time_s);
    if (!isnan(c->des_step_time_s))
      cJSON_AddNumberToObject(o, "des_step_time_s", c->des_step_time_s);
    cJSON_AddNumberToObject(o, "mfu", c->mfu);
    cJSON_AddNumberToObject(o, "tokens_per_s", c->tokens_per_s);
    cJSON_AddNumberToObject(o, "peak_bytes", c->peak_bytes);
    if (!isnan(c->cost_usd)) {
      cJSON_AddNumberToObject(o, "time_to_train_s", c->time_to_train_s);
      cJSON_AddNumberToObject(o, "energy_kwh", c->energy_kwh);
      cJSON_AddNumberToObject(o, "cost_usd", c->cost_usd);
    }
    if (i > 0)
      cJSON_AddStringToObject(o, "loses_on", c->why);
    if (c->same[0])
      cJSON_AddStringToObject(o, "same_with", c->same);
    cJSON_AddItemToArray(top, o);
  }
  return j;
}

static void plan_print_csv(const plan_screen_result *r, int shown, bool whole)
{
  printf("rank,tp,cp,pp,dp,ep,micro_batch,virtual_stages,zero,recompute,sequence_parallel,"
         "placement,estimate_s,step_time_s,des_step_time_s,mfu,tokens_per_s,peak_GiB,same_with%s\n",
         whole ? ",time_to_train_s,energy_kwh,cost_usd" : "");
  for (guint i = 0; i < r->best->len && (int)i < shown; i++) {
    const plan_candidate *c = &g_array_index(r->best, plan_candidate, i);
    printf("%u,%d,%d,%d,%d,%d,%d,%d,%d,%s,%d,%s,%.6g,%.6g,%.6g,%.4f,%.6g,%.4f,\"%s\"", i + 1,
           c->l.tp, c->l.cp, c->l.pp, c->l.dp, c->l.ep, c->l.micro_batch, c->l.virtual_stages,
           c->l.zero, cfg_recompute_name(c->l.recompute), c->l.sequence_parallel,
           c->l.pipeline_outer ? "tp cp dp pp" : "tp cp pp dp", c->estimate_s, c->step_time_s,
           c->des_step_time_s, c->mfu, c->tokens_per_s, c->peak_bytes / (1024.0 * 1024 * 1024),
           c->same);
    if (whole)
      printf(",%.6g,%.6g,%.6g", c->time_to_train_s, c->energy_kwh, c->cost_usd);
    printf("\n");
  }
}

/* The run column of a layout ranked by its run: days, MWh or dollars. */
static char *plan_run_cell(const plan_candidate *c, plan_run_objective by)
{
  switch (by) {
  case PLAN_BY_COST:
    return c->cost_usd >= 1e6 ? g_strdup_printf("$%.3fM", c->cost_usd / 1e6)
                              : g_strdup_printf("$%.0f", c->cost_usd);
  case PLAN_BY_ENERGY:
    return g_strdup_printf("%.3f", c->energy_kwh / 1e3);
  default:
    return g_strdup_printf("%.2f", c->time_to_train_s / 86400);
  }
}

static const char *plan_run_header(plan_run_objective by)
{
  static const char *const names[] = {"", "cost", "MWh", "days"};
  return names[by];
}

static void plan_print_text(const plan_args *a, const plan_screen_result *r, int shown,
                            plan_run_objective by)
{
  g_autofree char *model = a->model ? g_strdup(a->model) : g_path_get_basename(a->workload);
  GString *gpus = g_string_new(NULL);
  for (guint i = 0; i < a->counts->len; i++)
    g_string_append_printf(gpus, "%s%d", i ? (i + 1 == a->counts->len ? " or " : ", ") : "",
                           g_array_index(a->counts, int, i));
  printf("dlsim plan: %s on %s, %s GPUs, global batch %d", model, a->cluster, gpus->str,
         a->batch);
  g_string_free(gpus, TRUE);
  if (by != PLAN_BY_STEP)
    printf(", ranked by the whole run's %s", a->objective);
  printf("\n");
  printf("  %ld layouts, %ld valid, %ld fit in memory\n", r->candidates, r->valid, r->fits);
  if (r->best->len == 0) {
    printf("  no layout fits\n");
    return;
  }
  /* the layout column is as wide as the longest layout shown (CP and EP lengthen them) */
  int width = (int)strlen("layout");
  for (guint i = 0; i < r->best->len && (int)i < shown; i++) {
    g_autofree char *d = plan_layout_describe(&g_array_index(r->best, plan_candidate, i).l);
    width = MAX(width, (int)strlen(d));
  }
  printf("  %2s  %-*s %9s %9s %6s %11s %10s", "#", width, "layout", "step (s)", "DES (s)", "MFU",
         "tokens/s", "memory");
  if (by != PLAN_BY_STEP)
    printf(" %10s", plan_run_header(by));
  printf("\n");
  for (guint i = 0; i < r->best->len && (int)i < shown; i++) {
    const plan_candidate *c = &g_array_index(r->best, plan_candidate, i);
    g_autofree char *d = plan_layout_describe(&c->l);
    g_autofree char *mem = units_format_bytes(c->peak_bytes);
    char des[32] = "-";
    if (!isnan(c->des_step_time_s))
      g_snprintf(des, sizeof des, "%9.3f", c->des_step_time_s);
    printf("  %2u  %-*s %9.3f %9s %5.1f%% %11.0f %10s", i + 1, width, d, c->step_time_s, des,
           100 * c->mfu, c->tokens_per_s, mem);
    if (by != PLAN_BY_STEP) {
      g_autofree char *cell = plan_run_cell(c, by);
      printf(" %10s", cell);
    }
    printf("\n");
    if (c->same[0])
      printf("      the same with: %s\n", c->same);
    if (i > 0)
      printf("      loses on: %s\n", c->why);
  }
}

static const char *const plan_objectives[] = {"time", "tokens-per-gpu", "cost", "energy",
                                               "time-to-train"};

/* What --objective ranks the refined layouts by. */
static plan_run_objective plan_by_run(const char *objective)
{
  static const plan_run_objective by[] = {PLAN_BY_STEP, PLAN_BY_STEP, PLAN_BY_COST,
                                          PLAN_BY_ENERGY, PLAN_BY_TIME_TO_TRAIN};
  for (size_t i = 0; objective && i < G_N_ELEMENTS(plan_objectives); i++)
    if (strcmp(objective, plan_objectives[i]) == 0)
      return by[i];
  return PLAN_BY_STEP;
}

/* A run objective needs the run's length. */
static bool plan_check_run(const plan_args *a, const plan_setup *s, GError **err)
{
  if (plan_by_run(a->objective) == PLAN_BY_STEP || lc_wanted(plan_setup_workload(s)))
    return true;
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "--objective %s: needs the run's length, training.tokens or training.steps (e.g. "
              "--set training.tokens=1e12)", a->objective);
  return false;
}

/* --gpus: one count, or several (a->gpus: the largest). */
static bool plan_parse_counts(plan_args *a, GError **err)
{
  g_auto(GStrv) parts = g_strsplit(a->gpus_text, ",", -1);
  a->counts = g_array_new(FALSE, FALSE, sizeof(int));
  for (int i = 0; parts[i]; i++) {
    char *end = NULL;
    gint64 n = g_ascii_strtoll(g_strstrip(parts[i]), &end, 10);
    if (end == parts[i] || *end || n < 1) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "--gpus %s: expected a GPU count or a list of them (8,16,32)", a->gpus_text);
      return false;
    }
    if (n > CFG_MAX_GPUS) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "--gpus %s: dlsim simulates clusters of at most %d GPUs", a->gpus_text,
                  CFG_MAX_GPUS);
      return false;
    }
    int count = (int)n;
    g_array_append_val(a->counts, count);
    a->gpus = MAX(a->gpus, count);
  }
  return true;
}

/* Step times of different GPU counts do not say which run is better: their runs do. */
static bool plan_check_counts(const plan_args *a, GError **err)
{
  if (a->counts->len <= 1 || plan_by_run(a->objective) != PLAN_BY_STEP)
    return true;
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "--gpus %s: several GPU counts are ranked by their whole run: add --objective "
              "cost, energy or time-to-train", a->gpus_text);
  return false;
}

/* Whether -w names a workload with a serving section (a file that does not load is left to
 * the training path, which reports why). */
static bool plan_is_serving(const plan_args *a)
{
  cfg_workload *w = NULL;
  GError *err = NULL;
  if (!a->workload || a->model || !cfg_load_with(NULL, a->workload, NULL, NULL, &w, &err)) {
    g_clear_error(&err);
    return false;
  }
  bool serving = w->has_serving;
  cfg_workload_free(w);
  return serving;
}

static bool plan_usage_error(int *code, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static bool plan_usage_error(int *code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "dlsim: error: %s\n", msg);
  *code = 2;
  return false;
}

/* --ttft / --tpot: a time ("200ms", or seconds as a plain number), > 0. */
static bool plan_parse_sla(const char *option, const char *text, double *out, int *code)
{
  g_autofree char *why = NULL;
  if (!text)
    return true;
  if (!units_parse(text, UNITS_NUMBER, out, NULL) && !units_parse(text, UNITS_SECONDS, out, &why))
    return plan_usage_error(code, "%s '%s': %s", option, text, why ? why : "expected a time");
  if (!(*out > 0))
    return plan_usage_error(code, "%s %s: the SLA must be > 0 (a time such as 200ms)", option,
                            text);
  return true;
}

/* A serving plan: -c, -w and --gpus; the training plan's options have no meaning here. */
static bool plan_check_serving(plan_args *a, int *code)
{
  const char *training = a->batch ? "--global-batch" : a->seq ? "--seq" : a->dtype ? "--dtype"
                         : a->objective ? "--objective" : a->fix ? "--fix"
                         : a->refine != 16 ? "--refine" : NULL;
  if (training)
    return plan_usage_error(code, "%s is for training plans: %s has a 'serving' section, so "
                            "dlsim plan searches deployments (--gpus, --ttft, --tpot, --top)",
                            training, a->workload);
  if (!a->cluster || !a->gpus_text)
    return plan_usage_error(code, "dlsim plan for serving needs -c CLUSTER, -w WORKLOAD and "
                            "--gpus N (see --help)");
  GError *err = NULL;
  if (!plan_parse_counts(a, &err)) {
    *code = cli_fail(err);
    return false;
  }
  if (a->counts->len > 1)
    return plan_usage_error(code, "--gpus %s: a serving plan takes one GPU budget", a->gpus_text);
  if (a->top == -1)
    a->top = 3;
  if (a->top < 0)
    return plan_usage_error(code, "--top must be >= 0");
  return plan_parse_sla("--ttft", a->ttft, &a->slo[0], code) &&
         plan_parse_sla("--tpot", a->tpot, &a->slo[1], code);
}

static bool plan_parse(int argc, char **argv, plan_args *a, int *code)
{
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &a->cluster, NULL),
      cli_opt(CLI_MODEL, &a->model, NULL),
      cli_opt(CLI_WORKLOAD, &a->workload, "Or a workload to start from"),
      {"gpus", 'n', 0, G_OPTION_ARG_STRING, &a->gpus_text,
       "GPUs to lay the job out on; with a run objective, a list (8,16,32) ranks the counts "
       "together", "N[,N...]"},
      cli_opt(CLI_GLOBAL_BATCH, &a->batch, NULL),
      {"seq", 0, 0, G_OPTION_ARG_INT, &a->seq, "Sequence length (default: the model's)", "S"},
      {"dtype", 0, 0, G_OPTION_ARG_STRING, &a->dtype, "Training dtype with -m (default bf16)", "D"},
      cli_opt(CLI_TOP, &a->top,
              "Layouts to confirm with the DES (default 3 up to 2048 GPUs, else 0: minutes each)"),
      {"refine", 0, 0, G_OPTION_ARG_INT, &a->refine, "Layouts to re-simulate with the analytic engine (default 16)", "R"},
      cli_opt(CLI_THREADS, &a->jobs,
              "DES confirmations run at once, each in a process of its own (default: the CPUs "
              "online); the figures are the same"),
      {"objective", 0, 0, G_OPTION_ARG_STRING, &a->objective,
       "time (default: the step), tokens-per-gpu, or with training.tokens or training.steps "
       "the whole run's cost, energy or time-to-train", "O"},
      cli_opt(CLI_JSON, &a->json, NULL),
      cli_opt(CLI_CSV, &a->csv, "Print CSV: one row per layout (step times in seconds, memory in bytes)"),
      cli_opt(CLI_QUIET, &a->quiet, NULL),
      cli_opt(CLI_SET, &a->sets, NULL),
      {"fix", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a->fix,
       "Pin a dimension: tp, cp, pp, ep, micro_batch, virtual_stages, zero, recompute, "
       "sequence_parallel, placement (pp-inner, pp-outer)", "KEY=VALUE"},
      {"ttft", 0, 0, G_OPTION_ARG_STRING, &a->ttft,
       "Serving: time to first token of the SLA (default: serving.slo.ttft)", "S"},
      {"tpot", 0, 0, G_OPTION_ARG_STRING, &a->tpot,
       "Serving: time per output token of the SLA (default: serving.slo.tbt)", "S"},
      CLI_OPT_END};
  if (!cli_parse(entries, "- the best parallel layout (or serving deployment) for N GPUs", &argc,
                 &argv, code))
    return false;
  a->serving = plan_is_serving(a);
  if (a->serving)
    return plan_check_serving(a, code);
  if (a->ttft || a->tpot)
    return plan_usage_error(code, "%s is for serving plans: give -w a workload with a 'serving' "
                            "section", a->ttft ? "--ttft" : "--tpot");
  if (!a->cluster || (!a->model == !a->workload) || !a->gpus_text || a->batch < 1) {
    fprintf(stderr, "dlsim: error: dlsim plan needs -c CLUSTER, one of -m MODEL or -w WORKLOAD, "
                    "--gpus N and --global-batch B (see --help)\n");
    *code = 2;
    return false;
  }
  GError *err = NULL;
  cfg_dtype dtype;
  if (!plan_parse_counts(a, &err) ||
      (a->objective && cli_choice("--objective", a->objective, plan_objectives,
                                  G_N_ELEMENTS(plan_objectives), &err) < 0) ||
      !plan_check_counts(a, &err) || (a->dtype && !cli_dtype(a->dtype, &dtype, &err))) {
    *code = cli_fail(err);
    return false;
  }
  if (a->top == -1) /* the DES of a few thousand GPUs takes minutes: only on request */
    a->top = a->gpus <= 2048 ? 3 : 0;
  if (a->jobs == -1)
    a->jobs = (int)MAX(sysconf(_SC_NPROCESSORS_ONLN), 1);
  if (a->jobs < 1)
    return plan_usage_error(code, "--threads: expected N >= 1 (got %d)", a->jobs);
  if (a->top < 0 || a->refine < 0 || MAX(a->refine, a->top) < 1) {
    /* the plan ranks what it refined: refining nothing would leave nothing to print */
    fprintf(stderr, "dlsim: error: --top must be >= 0 and --refine >= 1 (got --top %d --refine %d)\n",
            a->top, a->refine);
    *code = 2;
    return false;
  }
  return true;
}

/* A rank's screening as bytes: its counters, then its best candidates. */
typedef struct {
  long candidates, valid, fits;
  double elapsed_s;
  int nbest;
} plan_share_head;

static GBytes *plan_share_pack(const plan_screen_result *r)
{
  plan_share_head h = {r->candidates, r->valid, r->fits, r->elapsed_s, (int)r->best->len};
  GByteArray *b = g_byte_array_new();
  g_byte_array_append(b, (const guint8 *)&h, sizeof h);
  g_byte_array_append(b, (const guint8 *)r->best->data, r->best->len * (guint)sizeof(plan_candidate));
  return g_byte_array_free_to_bytes(b);
}

/* Gathers every rank's screening into rank 0's (the others keep theirs); the merge keeps the
 * same best set, in the same order, as one process would. */
static void plan_share_merge(const cli_mpi *m, plan_screen_result *r, int pool)
{
  if (m->size == 1)
    return;
  GBytes *mine = plan_share_pack(r);
  GPtrArray *all = cli_mpi_gather(m, mine);
  g_bytes_unref(mine);
  for (int i = 1; all && i < m->size; i++) {
    gsize n = 0;
    const char *p = g_bytes_get_data(all->pdata[i], &n);
    plan_share_head o;
    memcpy(&o, p, sizeof o);
    plan_screen_result other = {.candidates = o.candidates, .valid = o.valid, .fits = o.fits,
                                .elapsed_s = o.elapsed_s,
                                .best = g_array_new(FALSE, FALSE, sizeof(plan_candidate))};
    g_array_append_vals(other.best, p + sizeof o, (guint)o.nbest);
    plan_merge(r, &other, pool);
    plan_screen_clear(&other);
  }
  if (all)
    g_ptr_array_free(all, TRUE);
}

/* Loads the cluster alone, to size the request in nodes. */
static bool plan_gpus_per_node(const plan_args *a, int *gpn, GError **err)
{
  cfg_cluster *c = NULL;
  if (!cfg_load_with(a->cluster, NULL, NULL, &c, NULL, err))
    return false;
  *gpn = c->node.gpus_per_node;
  cfg_cluster_free(c);
  if (a->gpus % *gpn) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--gpus %d: not a whole number of %d-GPU nodes",
                a->gpus, *gpn);
    return false;
  }
  return true;
}

/* The search's base: the workload file, or for -m MODEL a minimal workload built in memory,
 * both sized to the request. */
static plan_setup *plan_base(const plan_args *a, int gpn, GError **err)
{
  g_auto(GStrv) sets = plan_base_sets(a, gpn);
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  bool ok;
  if (a->workload) {
    ok = cfg_load_with(a->cluster, a->workload, sets, &c, &w, err);
  } else {
    g_autofree char *text = g_strdup_printf(
        "model: %s\ntraining: {global_batch: %d, micro_batch: 1, dtype: %s}\nparallel: {dp: %d}\n",
        a->model, a->batch, a->dtype ? a->dtype : "bf16", a->gpus);
    ok = cfg_load_text(a->cluster, text, sets, &c, &w, err);
  }
  return ok ? plan_setup_new(c, w, a->batch, err) : NULL;
}

/* Plans one GPU count (a->gpus) and adds its refined layouts and counters to `all` (rank 0). */
static bool plan_count(plan_args *a, const plan_options *o, const cli_mpi *mpi,
                       plan_screen_result *all, GError **err)
{
  int gpn = 0;
  plan_setup *s = NULL;
  plan_screen_result r = {0};
  bool ok = plan_gpus_per_node(a, &gpn, err) && (s = plan_base(a, gpn, err)) &&
            plan_check_run(a, s, err) && plan_screen(s, o, &r, err);
  if (ok)
    plan_share_merge(mpi, &r, plan_pool(o->refine));
  if (ok && mpi->rank == 0 && (ok = plan_refine(s, o, &r, err))) {
    all->candidates += r.candidates;
    all->valid += r.valid;
    all->fits += r.fits;
    all->elapsed_s += r.elapsed_s;
    g_array_append_vals(all->best, r.best->data, r.best->len);
  }
  plan_screen_clear(&r);
  plan_setup_free(s);
  return ok;
}

static void plan_print(const plan_args *a, const plan_screen_result *r, plan_run_objective by)
{
  int shown = MAX(a->top, MIN((int)r->best->len, 10));
  if (a->json) {
    cJSON *j = plan_json(r, shown);
    rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else if (a->csv) {
    plan_print_csv(r, shown, by != PLAN_BY_STEP);
  } else {
    plan_print_text(a, r, shown, by);
  }
}

int cli_plan(int argc, char **argv)
{
  plan_args a = {.top = -1, .refine = 16, .jobs = -1};
  int code = 0;
  if (!plan_parse(argc, argv, &a, &code)) {
    plan_args_clear(&a);
    return code;
  }
  if (a.serving) {
    cli_plan_serve_args sa = {.cluster = a.cluster, .workload = a.workload, .sets = a.sets,
                              .gpus = a.gpus, .top = a.top, .ttft = a.slo[0], .tpot = a.slo[1],
                              .json = a.json, .csv = a.csv};
    code = cli_plan_serve(&sa);
    plan_args_clear(&a);
    return code;
  }
  GError *err = NULL;
  cli_mpi mpi;
  cli_mpi_init(&mpi);
  plan_options o = {.top_k = a.top, .refine = MAX(a.refine, a.top), .jobs = a.jobs,
                    .tokens_per_gpu = a.objective && strcmp(a.objective, "tokens-per-gpu") == 0,
                    .by_run = plan_by_run(a.objective),
                    .shard = mpi.rank, .nshards = mpi.size};
  plan_pins_init(&o.pins);
  bool ok = true;
  for (int i = 0; ok && a.fix && a.fix[i]; i++)
    ok = plan_pins_parse(&o.pins, a.fix[i], &err);
  if (!a.quiet && mpi.rank == 0 && isatty(STDERR_FILENO)) {
    o.progress = plan_progress;
    o.confirmed = plan_confirmed;
  }
  plan_screen_result all = {.best = g_array_new(FALSE, FALSE, sizeof(plan_candidate))};
  for (guint i = 0; ok && i < a.counts->len; i++) {
    a.gpus = g_array_index(a.counts, int, i);
    ok = plan_count(&a, &o, &mpi, &all, &err);
  }
  if (ok && mpi.rank == 0) {
    if (a.counts->len > 1)
      plan_rank(all.best, o.by_run);
    plan_print(&a, &all, o.by_run);
  }
  plan_screen_clear(&all);
  plan_args_clear(&a);
  return cli_mpi_finish(&mpi, 0, ok ? NULL : err);
}
