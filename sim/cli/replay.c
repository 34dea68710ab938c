/* dlsim replay TRACE [TRACE...] [-c CLUSTER] [--set K=V]... [--target CLUSTER] [--steps A-B]
 *              [--ranks N] [--engine des|analytic] [--comm model|measured] [--json | --csv]
 * dlsim replay --chakra DIR_OR_PREFIX -c CLUSTER [--recost [--dtype D]] [--set K=V]...
 *
 * A real trace re-simulated: the trace becomes a program (sim/trace/replay.c), the engine runs
 * it on the cluster the trace ran on, and each ProfilerStep's predicted duration is set next
 * to the measured one. With --set (or --target) the same job is predicted on changed hardware:
 * kernels are re-timed by the cost model, collectives by the collective model. */
#include "cli/cli.h"
#include "report/report.h"
#include "run/run.h"

#include <stdio.h>

/* A Chakra trace: no steps to compare, the simulated time of the whole trace. */
static int cli_replay_chakra(const sim_chakra_args *a, bool json)
{
  sim_chakra r;
  GError *err = NULL;
  bool ok = sim_chakra_run(a, &r, &err);
  if (ok && json) {
    cJSON *j = rep_chakra_json(&r);
    rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else if (ok) {
    rep_chakra_text(stdout, &r);
  }
  sim_chakra_clear(&r);
  return ok ? 0 : cli_fail(err);
}

int cli_replay(int argc, char **argv)
{
  sim_replay_args a = {0};
  g_autofree char *cluster = NULL, *target = NULL, *steps = NULL, *engine = NULL, *comm = NULL;
  g_autofree char *calibration = NULL, *chakra = NULL, *dtype = NULL, *groups = NULL;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE, csv = FALSE, recost = FALSE;
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &cluster, "The cluster the trace ran on (default: the preset for its GPU)"),
      {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &calibration,
       "Calibration file of the cluster (gpu.calibration), for both sides of a what-if", "FILE"},
      cli_opt(CLI_SET, &sets, "What-if: override a cluster key, repeatable"),
      {"target", 0, 0, G_OPTION_ARG_FILENAME, &target, "What-if: predict on this cluster instead", "CLUSTER"},
      {"steps", 0, 0, G_OPTION_ARG_STRING, &steps, "ProfilerSteps to replay (default all)", "A-B"},
      {"ranks", 0, 0, G_OPTION_ARG_INT, &a.ranks, "Ranks (default: the trace's world size)", "N"},
      {"chakra", 0, 0, G_OPTION_ARG_FILENAME, &chakra,
       "Replay a Chakra execution trace (NAME.RANK.et files: a directory, a prefix or one file; "
       "needs -c)", "DIR_OR_PREFIX"},
      {"recost", 0, 0, G_OPTION_ARG_NONE, &recost,
       "Chakra: time compute nodes that carry num_ops by the cost model, not their duration", NULL},
      {"dtype", 0, 0, G_OPTION_ARG_STRING, &dtype, "Chakra: dtype of re-costed compute (default bf16)", "D"},
      {"comm-groups", 0, 0, G_OPTION_ARG_FILENAME, &groups,
       "Chakra: ASTRA-sim's communicator-group JSON ({\"1\": [0, 1], ...}): collectives run over the "
       "group their pg_name names (default: all ranks)", "FILE"},
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
  if (!chakra && argc == 2 && chk_is_trace(argv[1]))
    chakra = g_strdup(argv[1]);
  GError *err = NULL;
  eng_kind kind;
  if (chakra) {
    if (!cli_engine(engine, &kind, &err))
      return cli_fail(err);
    sim_chakra_args ca = {.trace = chakra, .cluster = cluster, .sets = sets,
                          .engine = eng_kind_name(kind), .recost = recost, .dtype = dtype,
                          .groups = groups};
    return cli_replay_chakra(&ca, json);
  }
  if (argc < 2) {
    fprintf(stderr, "dlsim: error: dlsim replay needs a TRACE (a Kineto .json or .json.gz, one per rank; or --chakra DIR_OR_PREFIX)\n");
    return 2;
  }
  if (a.ranks < 0) {
    fprintf(stderr, "dlsim: error: --ranks %d: expected a number of ranks >= 1 (default: the trace's world size)\n",
            a.ranks);
    return 2;
  }
  static const char *const comms[] = {"model", "measured"};
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
