/* dlsim replay TRACE [TRACE...] [-c CLUSTER] [--set K=V]... [--target CLUSTER] [--steps A-B]
 *              [--ranks N] [--engine des|analytic] [--comm model|measured] [--json | --csv]
 *
 * A real trace re-simulated: the trace becomes a program (sim/trace/replay.c), the engine runs
 * it on the cluster the trace ran on, and each ProfilerStep's predicted duration is set next
 * to the measured one. With --set (or --target) the same job is predicted on changed hardware:
 * kernels are re-timed by the cost model, collectives by the collective model. */
#include "cli/cli.h"
#include "report/report.h"
#include "run/run.h"

#include <stdio.h>

int cli_replay(int argc, char **argv)
{
  sim_replay_args a = {0};
  g_autofree char *cluster = NULL, *target = NULL, *steps = NULL, *engine = NULL, *comm = NULL;
  g_autofree char *calibration = NULL;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE, csv = FALSE;
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &cluster, "The cluster the trace ran on (default: the preset for its GPU)"),
      {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &calibration,
       "Calibration file of the cluster (gpu.calibration), for both sides of a what-if", "FILE"},
      cli_opt(CLI_SET, &sets, "What-if: override a cluster key, repeatable"),
      {"target", 0, 0, G_OPTION_ARG_FILENAME, &target, "What-if: predict on this cluster instead", "CLUSTER"},
      {"steps", 0, 0, G_OPTION_ARG_STRING, &steps, "ProfilerSteps to replay (default all)", "A-B"},
      {"ranks", 0, 0, G_OPTION_ARG_INT, &a.ranks, "Ranks (default: the trace's world size)", "N"},
      cli_opt(CLI_ENGINE, &engine, NULL),
      {"comm", 0, 0, G_OPTION_ARG_STRING, &comm,
       "model (default): NCCL kernels as modelled collectives; measured: at their durations", "HOW"},
      cli_opt(CLI_JSON, &json, NULL),
      cli_opt(CLI_CSV, &csv, "Print CSV: one row per step, measured and predicted in seconds"),
      CLI_OPT_END};
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
  static const char *const comms[] = {"model", "measured"};
  GError *err = NULL;
  eng_kind kind;
  if (!cli_engine(engine, &kind, &err) ||
      (comm && cli_choice("--comm", comm, comms, G_N_ELEMENTS(comms), &err) < 0))
    return cli_fail(err);
  a.traces = argv + 1;
  a.cluster = cluster;
  a.target = target;
  a.steps = steps;
  a.engine = eng_kind_name(kind);
  a.comm = comm;
  a.sets = sets;
  g_autofree char *cal_set = calibration ? g_strdup_printf("gpu.calibration=%s", calibration) : NULL;
  char *machine[] = {cal_set, NULL};
  a.machine = cal_set ? machine : NULL;
  sim_replay r;
  bool ok = sim_replay_run(&a, &r, &err);
  if (ok && (json || csv)) {
    cJSON *j = rep_replay_json(&r);
    if (csv)
      cli_csv_print(stdout, cJSON_GetObjectItemCaseSensitive(j, "step_times"));
    else
      rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else if (ok) {
    rep_replay_text(stdout, &r);
  }
  sim_replay_clear(&r);
  return ok ? 0 : cli_fail(err);
}
