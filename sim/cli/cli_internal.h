/* Private to the cli module: validation cases, shared by validate and calibrate. */
#ifndef DLSIM_CLI_INTERNAL_H
#define DLSIM_CLI_INTERNAL_H

#include "cli/cli.h"
#include "config/config.h"
#include "planner/planner.h"

#include <cjson/cJSON.h>

/* The case files named on the command line (names or paths), or every case of
 * validation/cases/ when none is named. */
GPtrArray *cli_case_files(int argc, char **argv, GError **err);
/* The case's metric as dlsim predicts it, with `extra` overrides after the case's own (a
 * ratio_to case: the ratio). Not for table cases. */
bool cli_case_predict(const cfg_case *c, char *const *extra, double *out, GError **err);

/* What `dlsim moe --json` reports of a case's MoE layer (times, bottleneck bandwidths). */
cJSON *cli_moe_json(const char *cluster, const char *workload, char *const *sets, GError **err);

/* MPI for dlsim plan: without DLSIM_MPI a single process (rank 0 of 1). */
typedef struct {
  int rank, size;
  bool active;
} plan_mpi;
void plan_mpi_init(plan_mpi *m, int *argc, char ***argv);
/* Gathers every rank's screening into rank 0's (others keep theirs). */
bool plan_mpi_merge(plan_mpi *m, plan_screen_result *r, int refine, GError **err);
void plan_mpi_finalize(plan_mpi *m);

/* `a` followed by `b` (either may be NULL), newly allocated. */
char **cli_strv_concat(char *const *a, char *const *b);

/* Loads a cluster with at least `gpus` GPUs: more nodes of the same kind when it has fewer
 * (a trace of a 128-rank job on a one-node preset). */
cfg_cluster *cli_cluster_for(const char *path, char *const *sets, int gpus, GError **err);

/* The preset a trace's GPU (deviceProperties name) runs on when no cluster is given: dgx-h100,
 * v100-edr, gh200, else dgx-a100. */
const char *cli_default_cluster(const char *gpu_name);

/* `dlsim replay TRACE -c CLUSTER --steps STEPS --json` as JSON (engine: 0 analytic, 1 des),
 * for validation cases; `sets` describe the traced machine (its calibration...), not a
 * what-if. */
cJSON *cli_replay_json(const char *trace, const char *cluster, char *const *sets,
                       const char *steps, int engine, GError **err);

#endif
