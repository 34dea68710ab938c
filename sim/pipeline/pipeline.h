/* pipeline: the whole path of one simulation, from file names to a report-ready result
 * (config -> hardware -> workload program -> memory -> engine). Used by every command that
 * simulates a training step, so they all see the same numbers. */
#ifndef DLSIM_PIPELINE_H
#define DLSIM_PIPELINE_H

#include "config/config.h"
#include "engine/engine.h"
#include "hardware/hardware.h"
#include "memory/memory.h"
#include "program/program.h"
#include "report/report.h"

typedef struct {
  cfg_cluster *cluster;
  cfg_workload *workload;
  hw_cluster *hw;
  prog_program *program;
  mem_report memory;
  eng_result result;
  eng_options options;
} pipe_run;

/* `sets` is a NULL-terminated list of "key=value" overrides (or NULL). */
bool pipe_simulate(const char *cluster, const char *workload, char *const *sets, eng_kind engine,
                   bool trace, pipe_run *out, GError **err);
void pipe_report_of(const pipe_run *run, rep_run *rep);
void pipe_clear(pipe_run *run);

#endif
