/* Shared helpers for the Criterion suites. */
#ifndef DLSIM_TEST_HELPERS_H
#define DLSIM_TEST_HELPERS_H

#include "config/config.h"
#include "program/program.h"

#include <glib.h>

/* Writes `text` to a fresh file named `name` in a per-process temp dir; returns its path. */
char *th_write(const char *name, const char *text);
/* Writes the cluster's calibration as `dlsim calibrate` would to a fresh file `name`; returns
 * its path and its text in `*yaml`, or NULL (and the reason on stderr). */
char *th_write_calibration(const cfg_cluster *c, const char *name, char **yaml);
/* Loads cluster/workload with NULL-terminated overrides; returns the error message or NULL. */
char *th_load_error(const char *cluster, const char *workload, const char *const *sets);
/* `--set`s of Llama 3 405B (the llama3-405b preset) at TP 8 x CP 2 on two nodes, one sequence
 * of 8192: 4096 tokens of 16 query heads a GPU, for the context-parallel tests. */
#define TH_405B_TP8_CP2                                                                       \
  "node.count=2", "parallel.tp=8", "parallel.cp=2", "parallel.pp=1", "parallel.dp=1",           \
      "training.global_batch=1", "model.seq_len=8192"

bool th_load(const char *cluster, const char *workload, const char *const *sets, cfg_cluster **c,
             cfg_workload **w);
/* Loads cluster/workload with overrides and builds the workload's program; NULL (and the reason
 * on stderr) if either fails. */
prog_program *th_program(const char *cluster, const char *workload, const char *const *sets);

typedef struct {
  int status;
  char *out; /* stdout + stderr (th_dlsim_ranks: stdout alone) */
  char *err; /* th_dlsim_ranks: stderr */
} th_proc;
/* Runs the dlsim binary with a shell-style argument string, in the source directory. */
th_proc th_dlsim(const char *args);
/* The same with stdout and stderr apart, under `mpirun -np RANKS` when RANKS > 0. */
th_proc th_dlsim_ranks(const char *args, int ranks);
/* Whether dlsim was built with MPI and mpirun is on PATH. */
bool th_have_mpirun(void);
void th_proc_clear(th_proc *p);

#endif
