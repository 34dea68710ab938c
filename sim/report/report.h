/* report: what a run found, as text for people, JSON for scripts (keys of SCHEMA.md) and a
 * Chrome / Perfetto trace. */
#ifndef DLSIM_REPORT_H
#define DLSIM_REPORT_H

#include "config/config.h"
#include "engine/engine.h"
#include "memory/memory.h"
#include "program/program.h"

#include <cjson/cJSON.h>
#include <stdio.h>

typedef struct {
  const cfg_cluster *cluster;
  const cfg_workload *workload;
  const prog_program *program;
  const eng_result *result;
  const mem_report *memory;
  eng_kind engine;
  int gpus;
  double peak_flops; /* per GPU, in the training dtype */
} rep_run;

typedef struct {
  double step_time, mfu, hfu, model_tflops_per_gpu, samples_per_s, tokens_per_s;
  double peak_bytes, capacity_bytes;
  bool fits;
} rep_figures;

void rep_run_figures(const rep_run *r, rep_figures *f);
void rep_run_text(FILE *out, const rep_run *r);
cJSON *rep_run_json(const rep_run *r);
bool rep_trace_write(const char *path, const prog_program *p, const eng_result *res, GError **err);

typedef struct {
  const cfg_cluster *cluster;
  const cfg_workload *workload;
  const mem_report *memory;
} rep_memory;

void rep_memory_text(FILE *out, const rep_memory *r);
cJSON *rep_memory_json(const rep_memory *r);

/* Prints cJSON compactly or indented, followed by a newline. */
void rep_json_print(FILE *out, cJSON *json);

#endif
