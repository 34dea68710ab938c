/* Private to the cli module: MPI for dlsim plan. */
#ifndef DLSIM_CLI_INTERNAL_H
#define DLSIM_CLI_INTERNAL_H

#include "cli/cli.h"
#include "planner/planner.h"

/* MPI for dlsim plan: without DLSIM_MPI a single process (rank 0 of 1). */
typedef struct {
  int rank, size;
  bool active;
} plan_mpi;
void plan_mpi_init(plan_mpi *m, int *argc, char ***argv);
/* Gathers every rank's screening into rank 0's (others keep theirs). */
bool plan_mpi_merge(plan_mpi *m, plan_screen_result *r, int refine, GError **err);
void plan_mpi_finalize(plan_mpi *m);

#endif
