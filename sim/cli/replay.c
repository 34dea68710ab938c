/* dlsim replay TRACE [TRACE...] [-c CLUSTER] [--set K=V]... [--target CLUSTER] [--steps A-B]
 *              [--ranks N] [--engine analytic|des] [--comm model|measured] [--json]
 *
 * A real trace re-simulated: the trace becomes a program (sim/trace/replay.c), the engine runs
 * it on the cluster the trace ran on, and each ProfilerStep's predicted duration is set next
 * to the measured one. With --set (or --target) the same job is predicted on changed hardware:
 * kernels are re-timed by the cost model, collectives by the collective model. */
#include "cli/cli_internal.h"
#include "engine/engine.h"
#include "report/report.h"
#include "trace/trace.h"
#include "units/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  int ntraces;
  trc_trace **traces;
  cfg_cluster *base_cfg, *target_cfg;
  hw_cluster *base, *target;
  trc_replay rep;
  double *predicted;      /* per step */
  double *measured_comm;  /* per step, NCCL kernels at their measured durations */
  double *baseline;       /* per step, on the unchanged cluster (what-if only) */
  double *host;           /* per step, every GPU op taking no time: the CPU side's bound */
  double measured_mean, predicted_mean, measured_comm_mean, baseline_mean, host_mean;
  eng_kind engine;
  char *cluster_name;
  bool default_cluster;
} rpl_result;

static double rpl_mean(const double *v, int n)
{
  double s = 0;
  for (int i = 0; i < n; i++)
    s += v[i];
  return n ? s / n : 0;
}

/* Builds and runs one replay; fills `times` per step. */
static bool rpl_simulate(rpl_result *r, const trc_replay_options *o, const hw_cluster *on,
                         bool keep, double *times, GError **err)
{
  trc_replay rep;
  if (!trc_replay_build(r->traces, r->ntraces, o, &rep, err))
    return false;
  eng_options eo = {.kind = r->engine, .trace = true, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_result res;
  bool ok = eng_run(rep.program, on, &eo, &res, err) && trc_replay_step_times(&rep, &res, times, err);
  eng_result_clear(&res);
  if (keep && ok)
    r->rep = rep;
  else
    trc_replay_clear(&rep);
  return ok;
}

typedef struct {
  char **traces;
  char **machine; /* overrides that describe the traced machine (its calibration...): both sides */
  char **sets;    /* what-if overrides: the predicted side only */
  const char *cluster, *target, *steps, *engine, *comm;
  int ranks;
} rpl_args;

static bool rpl_load(const rpl_args *a, rpl_result *r, GError **err)
{
  r->ntraces = (int)g_strv_length(a->traces);
  r->traces = g_new0(trc_trace *, r->ntraces);
  for (int i = 0; i < r->ntraces; i++)
    if (!(r->traces[i] = trc_load(a->traces[i], err)))
      return false;
  r->engine = ENG_ANALYTIC;
  if (a->engine && !eng_kind_parse(a->engine, &r->engine, err))
    return false;
  if (a->comm && strcmp(a->comm, "model") != 0 && strcmp(a->comm, "measured") != 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--comm: expected model or measured, got '%s'", a->comm);
    return false;
  }
  int ranks = a->ranks > 0 ? a->ranks : MAX(r->traces[0]->world_size, 1);
  r->default_cluster = !a->cluster;
  r->cluster_name = g_strdup(a->cluster ? a->cluster : cli_default_cluster(r->traces[0]->gpu_name));
  if (!(r->base_cfg = cli_cluster_for(r->cluster_name, a->machine, ranks, err)))
    return false;
  r->base = hw_cluster_new(r->base_cfg);
  if (!a->sets && !a->target)
    return true;
  g_auto(GStrv) sets = cli_strv_concat(a->target ? NULL : a->machine, a->sets);
  r->target_cfg = cli_cluster_for(a->target ? a->target : r->cluster_name, sets, ranks, err);
  if (r->target_cfg)
    r->target = hw_cluster_new(r->target_cfg);
  return r->target_cfg != NULL;
}

static bool rpl_run(const rpl_args *a, rpl_result *r, GError **err)
{
  memset(r, 0, sizeof *r);
  trc_replay_options o = {.first_step = -1, .last_step = -1, .nranks = a->ranks};
  if (!trc_parse_steps(a->steps, &o.first_step, &o.last_step, err) || !rpl_load(a, r, err))
    return false;
  o.base = r->base;
  o.target = r->target;
  o.comm_measured = a->comm && strcmp(a->comm, "measured") == 0;
  guint from, n;
  if (!trc_step_range(r->traces[0], o.first_step, o.last_step, &from, &n, err))
    return false;
  r->predicted = g_new(double, n);
  r->measured_comm = g_new(double, n);
  r->host = g_new(double, n);
  const hw_cluster *on = r->target ? r->target : r->base;
  if (!rpl_simulate(r, &o, on, true, r->predicted, err))
    return false;
  /* diagnostics of the replay itself, on the cluster the trace ran on */
  trc_replay_options mc = o, ho = o;
  mc.target = ho.target = NULL;
  mc.comm_measured = true;
  ho.host_only = true;
  if (!rpl_simulate(r, &mc, r->base, false, r->measured_comm, err) ||
      !rpl_simulate(r, &ho, r->base, false, r->host, err))
    return false;
  r->host_mean = rpl_mean(r->host, (int)n);
  r->measured_mean = rpl_mean(r->rep.measured, r->rep.nsteps);
  r->predicted_mean = rpl_mean(r->predicted, r->rep.nsteps);
  r->measured_comm_mean = rpl_mean(r->measured_comm, r->rep.nsteps);
  if (r->target) {
    trc_replay_options bo = o;
    bo.target = NULL;
    r->baseline = g_new(double, n);
    if (!rpl_simulate(r, &bo, r->base, false, r->baseline, err))
      return false;
    r->baseline_mean = rpl_mean(r->baseline, r->rep.nsteps);
  }
  return true;
}

static void rpl_clear(rpl_result *r)
{
  for (int i = 0; r->traces && i < r->ntraces; i++)
    trc_free(r->traces[i]);
  g_free(r->traces);
  hw_cluster_free(r->base);
  hw_cluster_free(r->target);
  cfg_cluster_free(r->base_cfg);
  cfg_cluster_free(r->target_cfg);
  trc_replay_clear(&r->rep);
  g_free(r->predicted);
  g_free(r->measured_comm);
  g_free(r->baseline);
  g_free(r->host);
  g_free(r->cluster_name);
}

static cJSON *rpl_json(const rpl_result *r)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "measured_step_s", r->measured_mean);
  cJSON_AddNumberToObject(j, "predicted_step_s", r->predicted_mean);
  cJSON_AddNumberToObject(j, "error", r->predicted_mean / r->measured_mean - 1);
  cJSON_AddNumberToObject(j, "steps", r->rep.nsteps);
  cJSON_AddNumberToObject(j, "measured_comm_step_s", r->measured_comm_mean);
  cJSON_AddNumberToObject(j, "host_bound_step_s", r->host_mean);
  if (r->baseline)
    cJSON_AddNumberToObject(j, "baseline_step_s", r->baseline_mean);
  cJSON_AddStringToObject(j, "cluster", r->base_cfg->name);
  if (r->target_cfg)
    cJSON_AddStringToObject(j, "target", r->target_cfg->name);
  cJSON_AddStringToObject(j, "engine", eng_kind_name(r->engine));
  cJSON_AddNumberToObject(j, "ranks", r->rep.program->nranks);
  cJSON_AddNumberToObject(j, "collectives", r->rep.collectives);
  cJSON *steps = cJSON_AddArrayToObject(j, "step_times");
  for (int k = 0; k < r->rep.nsteps; k++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->rep.markers[2 * k]);
    cJSON_AddNumberToObject(o, "measured_s", r->rep.measured[k]);
    cJSON_AddNumberToObject(o, "predicted_s", r->predicted[k]);
    cJSON_AddNumberToObject(o, "error", r->predicted[k] / r->rep.measured[k] - 1);
    cJSON_AddItemToArray(steps, o);
  }
  return j;
}

cJSON *cli_replay_json(const char *trace, const char *cluster, char *const *sets,
                       const char *steps, int engine, GError **err)
{
  char *traces[] = {(char *)trace, NULL};
  rpl_args a = {.traces = traces, .machine = (char **)sets, .cluster = cluster, .steps = steps,
                .engine = engine ? "des" : "analytic"};
  rpl_result r;
  cJSON *j = rpl_run(&a, &r, err) ? rpl_json(&r) : NULL;
  rpl_clear(&r);
  return j;
}

static void rpl_print(const rpl_result *r)
{
  const trc_trace *t = r->traces[0];
  const trc_replay *rep = &r->rep;
  g_autofree char *base = g_path_get_basename(t->path);
  printf("dlsim replay: %s (%s, rank %d of %d) on %s%s, %d rank%s, engine %s\n", base,
         t->gpu_name ? t->gpu_name : "GPU not stated", t->rank, t->world_size, r->base_cfg->name,
         r->default_cluster ? " (preset for the trace's GPU; -c to change)" : "",
         rep->program->nranks, rep->program->nranks == 1 ? "" : "s", eng_kind_name(r->engine));
  if (r->target_cfg)
    printf("  what-if: predicted on %s (kernels re-timed: %u)\n", r->target_cfg->name, rep->retimed);
  printf("  program: %u CPU intervals, %u GPU ops, %u collectives (%u NCCL kernels at measured "
         "times), %u cross-stream waits, %u host syncs, %u delays kept",
         rep->cpu_ops, rep->gpu_ops, rep->collectives, rep->fixed_comm, rep->cross_deps,
         rep->sync_deps, rep->delays);
  if (rep->streams_merged)
    printf(", %d trace streams merged", rep->streams_merged);
  if (r->baseline)
    printf("\n\n  %-20s %12s %12s %8s %12s %8s\n", "step", "measured", "replayed", "error", "what-if",
           "change");
  else
    printf("\n\n  %-20s %12s %12s %8s\n", "step", "measured", "predicted", "error");
  for (int k = 0; k <= rep->nsteps; k++) {
    bool mean = k == rep->nsteps;
    double m = mean ? r->measured_mean : rep->measured[k];
    double p = mean ? r->predicted_mean : r->predicted[k];
    double b = r->baseline ? (mean ? r->baseline_mean : r->baseline[k]) : p;
    g_autofree char *ms = units_format_seconds(m), *ps = units_format_seconds(p);
    g_autofree char *bs = units_format_seconds(b);
    printf("  %-20s %12s %12s %+7.1f%%", mean ? "mean" : rep->markers[2 * k], ms, bs, 100 * (b / m - 1));
    if (r->baseline)
      printf(" %12s %+7.1f%%", ps, 100 * (p / b - 1));
    printf("\n");
  }
  g_autofree char *mc = units_format_seconds(r->measured_comm_mean);
  g_autofree char *hb = units_format_seconds(r->host_mean);
  printf("\n  with every NCCL kernel at its measured duration: %s per step (%+.1f %%): the replay's "
         "own error; the rest is the collective model's\n",
         mc, 100 * (r->measured_comm_mean / r->measured_mean - 1));
  printf("  with every GPU op taking no time: %s per step (%.0f %% of measured): what the host "
         "alone takes; the GPU and network models act on the rest\n",
         hb, 100 * r->host_mean / r->measured_mean);
}

int cli_replay(int argc, char **argv)
{
  rpl_args a = {0};
  g_autofree char *cluster = NULL, *target = NULL, *steps = NULL, *engine = NULL, *comm = NULL;
  g_autofree char *calibration = NULL;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
      {"cluster", 'c', 0, G_OPTION_ARG_FILENAME, &cluster,
       "The cluster the trace ran on (default: the preset for its GPU)", "CLUSTER"},
      {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &calibration,
       "Calibration file of the cluster (gpu.calibration), for both sides of a what-if", "FILE"},
      {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &sets, "What-if: change a cluster key", "KEY=VALUE"},
      {"target", 0, 0, G_OPTION_ARG_FILENAME, &target, "What-if: predict on this cluster instead", "CLUSTER"},
      {"steps", 0, 0, G_OPTION_ARG_STRING, &steps, "ProfilerSteps to replay (default all)", "A-B"},
      {"ranks", 'n', 0, G_OPTION_ARG_INT, &a.ranks, "Ranks (default: the trace's world size)", "N"},
      {"engine", 'e', 0, G_OPTION_ARG_STRING, &engine, "analytic (default) or des", "ENGINE"},
      {"comm", 0, 0, G_OPTION_ARG_STRING, &comm,
       "model (default): NCCL kernels as modelled collectives; measured: at their durations", "HOW"},
      {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON (keys of SCHEMA.md)", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  int code = 0;
  if (!cli_parse(entries, "TRACE [TRACE...] - re-simulate a real trace: predicted vs measured",
                 &argc, &argv, &code))
    return code;
  if (argc < 2) {
    fprintf(stderr, "dlsim: error: dlsim replay needs a TRACE (a Kineto .json or .json.gz; one per rank)\n");
    return 2;
  }
  if (a.ranks < 0) {
    fprintf(stderr, "dlsim: error: --ranks %d: expected a number of ranks >= 1 (default: the trace's world size)\n",
            a.ranks);
    return 2;
  }
  a.traces = argv + 1;
  a.cluster = cluster;
  a.target = target;
  a.steps = steps;
  a.engine = engine;
  a.comm = comm;
  a.sets = sets;
  g_autofree char *cal_set = calibration ? g_strdup_printf("gpu.calibration=%s", calibration) : NULL;
  char *machine[] = {cal_set, NULL};
  a.machine = cal_set ? machine : NULL;
  GError *err = NULL;
  rpl_result r;
  bool ok = rpl_run(&a, &r, &err);
  if (ok && json) {
    cJSON *j = rpl_json(&r);
    rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else if (ok) {
    rpl_print(&r);
  }
  rpl_clear(&r);
  return ok ? 0 : cli_fail(err);
}
