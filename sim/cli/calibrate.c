/* dlsim calibrate: fits model parameters to real measurements and writes them as a calibration
 * file that `gpu.calibration` can point at. Three kinds of measurement:
 *
 *   --nccl TABLE -c CLUSTER --op OP --gpus N [--group-size G] [--fit NAME]...
 *       nccl-tests output or a CSV of it: the NCCL parameters (latencies, efficiencies, chunks)
 *   --omb TABLE -c CLUSTER --op OP --gpus N [--group-size G] [--fit NAME]...
 *       OSU Micro-Benchmarks output: the same NCCL parameters (dlsim has no model of MPI's own
 *       collective algorithms yet)
 *   --gemm TABLE.csv -c CLUSTER --dtype D [--filter COL=V]...
 *       a table of GEMM times by shape (batch, m, n, k): the GEMM efficiency model
 *   --case NAME... --param KEY=START... [--set K=V]...
 *       validation cases (any metric of run / memory): the cluster keys named by --param, with
 *       the --set overrides applied to every case (and written to the file)
 *   --trace TRACE... [-c CLUSTER] [--steps A-B] [--kernels CSV]
 *       real PyTorch profiler traces: kernel fixed cost, HBM efficiency, the GEMM model where
 *       shapes were recorded, NCCL parameters from the lower envelope of the collectives (the
 *       cluster defaults to the preset for the trace's GPU, as dlsim replay's does)
 *
 * Common: [--time-column C] [--time-unit U] [--filter COL=V]... -o OUT.yaml [--set K=V]... */
#include "calibration/calibration.h"
#include "cli/cli.h"
#include "run/run.h"
#include "validation/validation.h"
#include "units/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *nccl, *omb, *gemm, *cluster, *op, *algo, *output, *size_col, *time_col, *unit, *dtype;
  char **sets, **filters, **fit, **cases, **params;
  int gpus, group;
  char **traces, *steps, *kernels;
} cal_args;

static void cal_args_clear(cal_args *a)
{
  g_free(a->nccl);
  g_free(a->omb);
  g_free(a->gemm);
  g_free(a->cluster);
  g_free(a->op);
  g_free(a->algo);
  g_free(a->output);
  g_free(a->size_col);
  g_free(a->time_col);
  g_free(a->unit);
  g_free(a->dtype);
  g_strfreev(a->sets);
  g_strfreev(a->filters);
  g_strfreev(a->fit);
  g_strfreev(a->cases);
  g_strfreev(a->params);
  g_strfreev(a->traces);
  g_free(a->steps);
  g_free(a->kernels);
}

static int cal_usage(void)
{
  fprintf(stderr, "dlsim: error: dlsim calibrate needs one of --nccl TABLE or --omb TABLE (with "
                  "-c CLUSTER, --op OP, --gpus N), --gemm TABLE (with -c CLUSTER, --dtype D), --case NAME (with "
                  "--param KEY=START) or --trace TRACE, and -o FILE (see --help)\n");
  return 2;
}

/* ---- nccl-tests tables ---------------------------------------------------------------------- */

static void cal_print_errors(const char *when, const calib_errors *e)
{
  printf("  %-7s busbw |error|: median %5.1f %%", when, 100 * e->median_all);
  if (e->n_large)
    printf(" (sizes >= 1 MiB: median %.1f %%, worst %.1f %%)", 100 * e->median_large,
           100 * e->worst_large);
  if (e->n_small)
    printf(" (< 64 KiB: median %.1f %%, worst %.1f %%)", 100 * e->median_small, 100 * e->worst_small);
  printf("\n");
}

static int cal_nccl(const cal_args *a)
{
  if (!a->cluster || !a->op || a->gpus < 2)
    return cal_usage();
  GError *err = NULL;
  const char *table = a->nccl ? a->nccl : a->omb;
  calib_target t = {.gpus = a->gpus, .group = a->group > 0 ? a->group : a->gpus,
                    .engine = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  calib_columns cols = {.size_column = a->size_col,
                        .time_column = a->time_col ? a->time_col
                                       : a->omb    ? "time_us"
                                                   : "oop_time_us|ip_time_us",
                        .filters = a->filters};
  cfg_cluster *c = NULL;
  calib_table tab = {0};
  calib_fit_report rep;
  bool ok = cli_coll_op(a->op, &t.op, &err) &&
            (!a->algo || coll_algo_parse(a->algo, &t.algo, &err)) &&
            (!a->unit || calib_time_unit(a->unit, &cols.time_scale, &err)) &&
            calib_table_load(table, &cols, &tab, &err) &&
            cfg_load_with(a->cluster, NULL, a->sets, &c, NULL, &err);
  if (ok)
    calib_table_model_sizes(&tab, t.op, t.group);
  if (ok && (a->gpus > cfg_cluster_gpus(c) || a->gpus % t.group)) {
    g_set_error(&err, CFG_ERROR, CFG_ERROR_INPUT, "--gpus %d / --group-size %d do not fit the cluster's %d GPUs",
                a->gpus, t.group, cfg_cluster_gpus(c));
    ok = false;
  }
  ok = ok && calib_fit_nccl(c, &t, &tab, a->fit, &rep, &err);
  if (ok) {
    g_autofree char *base = g_path_get_basename(table);
    g_autofree char *notes = g_strdup_printf("fitted on %s (%s, %d GPUs, groups of %d, %u rows)",
                                             base, a->op, a->gpus, t.group, tab.points->len);
    char *fitted[CALIB_MAX_PARAMS + 1] = {NULL};
    g_autofree char *names = NULL;
    for (int i = 0; i < rep.nparams; i++)
      fitted[i] = g_strdup_printf("nccl.%s", rep.names[i]);
    ok = calib_write(a->output, c, notes, fitted, &err);
    for (int i = 0; i < rep.nparams; i++)
      g_free(fitted[i]);
    printf("dlsim calibrate: %s on %s, %u rows, %d parameters, %d evaluations\n", base, c->name,
           tab.points->len, rep.nparams, rep.evaluations);
    for (int i = 0; i < rep.nparams; i++)
      printf("  fitted %s\n", rep.names[i]);
    cal_print_errors("before", &rep.before);
    cal_print_errors("after", &rep.after);
    if (ok)
      printf("  wrote %s (point gpu.calibration at it)\n", a->output);
  }
  calib_table_clear(&tab);
  cfg_cluster_free(c);
  return ok ? 0 : cli_fail(err);
}

/* ---- GEMM tables ---------------------------------------------------------------------------- */

static void cal_print_time_errors(const char *when, const calib_time_errors_t *e)
{
  printf("  %-7s time |error|: median %5.1f %%, 90th percentile %5.1f %%, worst %5.1f %%\n", when,
         100 * e->median, 100 * e->p90, 100 * e->worst);
}

static int cal_gemm(const cal_args *a)
{
  if (!a->cluster || !a->dtype)
    return cal_usage();
  GError *err = NULL;
  calib_columns cols = {.time_column = a->time_col, .filters = a->filters, .gemm = true};
  cfg_cluster *c = NULL;
  calib_table tab = {0};
  cfg_dtype dtype = CFG_BF16;
  bool ok = cli_dtype(a->dtype, &dtype, &err) &&
            (!a->unit || calib_time_unit(a->unit, &cols.time_scale, &err)) &&
            calib_table_load(a->gemm, &cols, &tab, &err) &&
            cfg_load_with(a->cluster, NULL, a->sets, &c, NULL, &err);
  if (ok) {
    calib_gemm_report rep;
    calib_fit_gemm(c, dtype, &tab, &rep);
    g_autofree char *base = g_path_get_basename(a->gemm);
    g_autofree char *filter = a->filters ? g_strjoinv(", ", a->filters) : g_strdup("all rows");
    g_autofree char *notes = g_strdup_printf("GEMM model fitted on %s (%s, %s, %u shapes)", base,
                                             a->dtype, filter, tab.points->len);
    bool waves = c->gpu.efficiency.gemm_waves && c->gpu.sms > 0;
    char *fitted[] = {"efficiency.flops.gemm", "efficiency.gemm_k_half",
                      "efficiency.launch_overhead", waves ? "efficiency.gemm_tile_load" : NULL,
                      NULL};
    ok = calib_write(a->output, c, notes, fitted, &err);
    const cfg_efficiency *e = &c->gpu.efficiency;
    printf("dlsim calibrate: %s on %s, %u shapes, %d evaluations\n", base, c->name,
           tab.points->len, rep.evaluations);
    printf("  fitted flops.gemm %.4f, gemm_k_half %.1f, launch_overhead %.3g us",
           e->flops_efficiency[CFG_KCLASS_GEMM], e->gemm_k_half, e->launch_overhead * 1e6);
    if (waves)
      printf(", gemm_tile_load %.1f (%d SMs)", e->gemm_tile_load, c->gpu.sms);
    printf("\n");
    cal_print_time_errors("before", &rep.before);
    cal_print_time_errors("after", &rep.after);
    if (ok)
      printf("  wrote %s (point gpu.calibration at it)\n", a->output);
  }
  calib_table_clear(&tab);
  cfg_cluster_free(c);
  return ok ? 0 : cli_fail(err);
}

/* ---- validation cases ----------------------------------------------------------------------- */

static void cal_print_cases(val_fit *f, const char *when)
{
  printf("  %s:\n", when);
  for (guint i = 0; i < f->cases->len; i++) {
    const cfg_case *c = g_ptr_array_index(f->cases, i);
    double p = val_fit_predict(f, i);
    printf("    %-38s measured %10.4g  predicted %10.4g  %+6.1f %%\n", c->name, c->measured, p,
           100 * (p / c->measured - 1));
  }
  g_clear_error(&f->error);
}

static int cal_cases_fit(const cal_args *a)
{
  if (!a->params)
    return cal_usage();
  GError *err = NULL;
  val_fit f;
  bool ok = val_fit_init(&f, a->cases, a->params, a->sets, &err);
  if (ok) {
    printf("dlsim calibrate: %u cases, %d parameters\n", f.cases->len, f.nkeys);
    cal_print_cases(&f, "before");
    ok = val_fit_run(&f, &err);
  }
  if (ok) {
    for (int i = 0; i < f.nkeys; i++)
      printf("  fitted %s = %.4g\n", f.keys[i], f.values[i]);
    cal_print_cases(&f, "after");
    ok = val_fit_write(&f, a->output, &err);
    if (ok)
      printf("  wrote %s (point gpu.calibration at it)\n", a->output);
  }
  val_fit_clear(&f);
  return ok ? 0 : cli_fail(err);
}

/* ---- real traces ---------------------------------------------------------------------------- */

static void cal_print_trace(const calib_trace_report *r, const cfg_cluster *c)
{
  const cfg_efficiency *e = &c->gpu.efficiency;
  if (r->kernels >= CALIB_TRACE_MIN_KERNELS)
    printf("  kernels: %d in the window; fixed cost %.2f us (10th percentile of durations) + %.2f us "
           "(median gap behind a queued kernel) -> launch_overhead %.3g us\n", r->kernels,
           r->kernel_floor * 1e6, r->launch_gap * 1e6, e->launch_overhead * 1e6);
  else
    printf("  kernels: %d in the window (fewer than %d): launch_overhead kept at %.3g us\n",
           r->kernels, CALIB_TRACE_MIN_KERNELS, e->launch_overhead * 1e6);
  g_autofree char *bw = units_format_rate(c->gpu.memory_bandwidth);
  if (r->memory_efficiency > 0)
    printf("  HBM: %d streaming kernels of 1 MiB or more reach %.3f of %s (median by time) -> efficiency.memory\n",
           r->memory_points, r->memory_efficiency, bw);
  else
    printf("  HBM: %d streaming kernels of known bytes >= 1 MiB: too few, efficiency.memory kept at %.3f\n",
           r->memory_points, e->memory_efficiency);
  if (r->gemm_points >= CALIB_TRACE_MIN_GEMMS)
    printf("  GEMMs: %d ops of known shape (%s): mean |log(model / measured)| weighted by time %.3f "
           "before, %.3f after; flops.gemm %.4f, gemm_k_half %.1f\n", r->gemm_points,
           cfg_dtype_name(r->gemm_dtype), r->gemm_before, r->gemm_after,
           e->flops_efficiency[CFG_KCLASS_GEMM], e->gemm_k_half);
  else
    printf("  GEMMs: %d ops of known shape (fewer than %d; no record_shapes, or inside CUDA graphs): "
           "GEMM model kept\n", r->gemm_points, CALIB_TRACE_MIN_GEMMS);
  if (r->skipped_kinds)
    printf("  collectives: %d kind%s (op, group) seen fewer than %d times: no envelope\n",
           r->skipped_kinds, r->skipped_kinds == 1 ? "" : "s", CALIB_TRACE_MIN_COLLECTIVES);
  if (!r->nenvelopes) {
    printf("  collectives: none with a known size and enough kernels: NCCL parameters kept\n");
    return;
  }
  printf("  collectives: lower envelope of (size, duration) per collective and group\n");
  printf("    %-13s %5s %7s %5s %21s %10s %10s %8s  %s\n", "op", "group", "kernels", "sizes", "sizes (B)",
         "latency", "algbw", "waiting", "model vs envelope: before -> after");
  for (int i = 0; i < r->nenvelopes; i++) {
    const calib_envelope *v = &r->env[i];
    g_autofree char *lat = units_format_seconds(v->latency);
    g_autofree char *alg = v->bandwidth > 0 ? units_format_rate(v->bandwidth) : g_strdup("-");
    printf("    %-13s %5d %7d %5d %10.4g-%-10.4g %10s %10s %+7.0f%%  %.1f %% -> %.1f %%%s\n",
           prog_coll_name(v->op), v->group, v->points, v->sizes, v->min_size, v->max_size, lat, alg,
           100 * v->waiting, 100 * v->before, 100 * v->after,
           v->after > 0.5 ? "  (no transfer the model can reach: every kernel waited?)" : "");
  }
  const cfg_nccl *n = &c->nccl;
  printf("  NCCL: fitted %d parameters (%d evaluations): link_efficiency intra %.3f network %.3f, "
         "p2p %.3f, base_latency ll %.1f ll128 %.1f simple %.1f us\n", r->nccl_params, r->evaluations,
         n->link_efficiency[CFG_LINK_INTRA], n->link_efficiency[CFG_LINK_NETWORK], n->p2p_efficiency,
         n->base_latency[CFG_PROTO_LL] * 1e6, n->base_latency[CFG_PROTO_LL128] * 1e6,
         n->base_latency[CFG_PROTO_SIMPLE] * 1e6);
}

static char *cal_trace_notes(const cal_args *a, const calib_trace_report *r)
{
  GString *g = g_string_new("fitted on trace");
  for (int i = 0; a->traces[i]; i++) {
    g_autofree char *base = g_path_get_basename(a->traces[i]);
    g_string_append_printf(g, "%s %s", i ? "," : "", base);
  }
  g_string_append_printf(g, " (%s%s): %d kernels, %d collective envelopes",
                         a->steps ? "ProfilerSteps " : "all steps", a->steps ? a->steps : "",
                         r->kernels, r->nenvelopes);
  return g_string_free(g, FALSE);
}

static int cal_trace(const cal_args *a)
{
  GError *err = NULL;
  int n = (int)g_strv_length(a->traces), first = -1, last = -1, world = 1;
  trc_trace **traces = g_new0(trc_trace *, n);
  bool ok = trc_parse_steps(a->steps, &first, &last, &err);
  for (int i = 0; ok && i < n; i++) {
    ok = (traces[i] = trc_load(a->traces[i], &err)) != NULL;
    world = ok ? MAX(world, traces[i]->world_size) : world;
  }
  const char *cluster = a->cluster ? a->cluster : ok ? sim_default_cluster(traces[0]->gpu_name) : NULL;
  cfg_cluster *c = ok ? sim_cluster_for(cluster, a->sets, world, &err) : NULL;
  calib_trace_report rep = {0};
  ok = c && calib_fit_trace(c, traces, n, first, last, &rep, &err);
  if (ok) {
    g_autofree char *notes = cal_trace_notes(a, &rep);
    printf("dlsim calibrate: %s on %s (%d GPUs)\n", notes, c->name, cfg_cluster_gpus(c));
    cal_print_trace(&rep, c);
    ok = calib_write(a->output, c, notes, rep.fitted, &err) &&
         (!a->kernels || calib_trace_kernels_csv(a->kernels, traces, n, c, &err));
    if (ok)
      printf("  wrote %s (point gpu.calibration at it)%s%s\n", a->output, a->kernels ? " and " : "",
             a->kernels ? a->kernels : "");
  }
  calib_trace_report_clear(&rep);
  cfg_cluster_free(c);
  for (int i = 0; i < n; i++)
    trc_free(traces[i]);
  g_free(traces);
  return ok ? 0 : cli_fail(err);
}

int cli_calibrate(int argc, char **argv)
{
  cal_args a = {0};
  GOptionEntry entries[] = {
      {"nccl", 0, 0, G_OPTION_ARG_FILENAME, &a.nccl, "nccl-tests output (as all_reduce_perf prints it) or CSV to fit", "TABLE"},
      {"omb", 0, 0, G_OPTION_ARG_FILENAME, &a.omb,
       "OSU Micro-Benchmarks output to fit dlsim's collective model to (NCCL-style parameters; a "
       "model of MPI's own algorithms is issue 20 item 1)", "TABLE"},
      {"gemm", 0, 0, G_OPTION_ARG_FILENAME, &a.gemm, "GEMM table (CSV: batch, m, n, k, time) to fit", "TABLE"},
      {"case", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.cases, "Validation case to fit, repeatable", "NAME"},
      {"trace", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &a.traces,
       "PyTorch profiler (Kineto) trace to fit, repeatable (one per rank)", "TRACE"},
      {"steps", 0, 0, G_OPTION_ARG_STRING, &a.steps, "With --trace: the ProfilerSteps to fit on", "A-B"},
      {"kernels", 0, 0, G_OPTION_ARG_FILENAME, &a.kernels,
       "With --trace: also write per-kernel times and achieved rates (CSV)", "CSV"},
      {"param", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.params,
       "With --case: a cluster key to fit and its starting value, repeatable", "KEY=START"},
      cli_opt(CLI_CLUSTER, &a.cluster, "Cluster the table was measured on"),
      {"op", 0, 0, G_OPTION_ARG_STRING, &a.op, "Collective of the table", "OP"},
      cli_opt(CLI_ALGO, &a.algo, "With --nccl: the algorithm the table forced (NCCL_ALGO), default auto"),
      {"dtype", 0, 0, G_OPTION_ARG_STRING, &a.dtype, "Data type of the GEMM table", "D"},
      cli_opt(CLI_GPUS, &a.gpus, "GPUs of the run"),
      cli_opt(CLI_GROUP_SIZE, &a.group, NULL),
      {"size-column", 0, 0, G_OPTION_ARG_STRING, &a.size_col, "Size column (default size_bytes)", "C"},
      {"time-column", 0, 0, G_OPTION_ARG_STRING, &a.time_col, "Time column; a|b takes the smaller (default oop_time_us|ip_time_us, with --omb time_us)", "C"},
      {"time-unit", 0, 0, G_OPTION_ARG_STRING, &a.unit, "Unit of the time column (default us)", "U"},
      {"filter", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.filters, "Keep rows where COL=VALUE", "COL=VALUE"},
      {"fit", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.fit,
       "With --nccl or --omb: a parameter (or prefix) to fit, repeatable (default: base_latency, hop_latency)", "NAME"},
      cli_opt(CLI_OUTPUT, &a.output, "Calibration file to write"),
      cli_opt(CLI_SET, &a.sets, "Override a cluster key, repeatable"),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- fit model parameters to real measurements", &argc, &argv, &code)) {
    cal_args_clear(&a);
    return code;
  }
  int modes = (a.nccl != NULL) + (a.omb != NULL) + (a.gemm != NULL) + (a.cases != NULL) + (a.traces != NULL);
  if (modes != 1 || !a.output)
    code = cal_usage();
  else if (a.nccl || a.omb)
    code = cal_nccl(&a);
  else if (a.gemm)
    code = cal_gemm(&a);
  else if (a.traces)
    code = cal_trace(&a);
  else
    code = cal_cases_fit(&a);
  cal_args_clear(&a);
  return code;
}
