/* report: what a run found, as text for people, JSON for scripts (keys of SCHEMA.md) and a
 * Chrome / Perfetto trace. */
#ifndef DLSIM_REPORT_H
#define DLSIM_REPORT_H

#include "config/config.h"
#include "engine/engine.h"
#include "memory/memory.h"
#include "program/program.h"
#include "run/run.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* A simulated step (figures, breakdown, memory) for people and for scripts. */
void rep_run_text(FILE *out, const sim_result *r);
cJSON *rep_run_json(const sim_result *r);
/* When the workload names collectives.runtime: the algorithm each distinct collective of the
 * critical rank ran on it, its time alone, and why. */
void rep_runtime_text(FILE *out, const sim_result *r);
/* The same as a JSON array (all of them), or NULL when the workload names no runtime. */
cJSON *rep_runtime_json(const sim_result *r);
/* With MPS (parallel.processes_per_gpu > 1): how the processes share each GPU. */
void rep_mps_text(FILE *out, const sim_result *r);
/* What the layout asks for that changes nothing (wl_notes): "  note: ..." lines under a
 * report's header, or a JSON array of sentences. */
void rep_notes_text(FILE *out, const cfg_workload *w);
cJSON *rep_notes_json(const cfg_workload *w);
/* What --trace writes of a run: the GPUs of `ranks` (pairs of first and last rank, as
 * rep_trace_ranks_parse reads "0-7,64"; NULL: all) and their first `steps` micro-batches (0:
 * all). Every GPU gets a process, a GPU the engine did not simulate on its own the events of
 * the one it ran in step with (said in its name). */
typedef struct {
  const GArray *ranks;
  int steps;
} rep_trace_options;
bool rep_trace_ranks_parse(const char *text, GArray **out, GError **err);
bool rep_trace_write(const char *path, const sim_result *run, const rep_trace_options *o,
                     GError **err);
/* What --timeline draws: the events --trace writes under `o`, as an SVG, over `window` (NULL:
 * up to the last event, or the last layer pass with `o->steps`; else as
 * rep_timeline_window_parse reads it). A job of more than 16 GPUs shows the first 16 GPUs the
 * engine simulated on their own (a pipeline's stages) and their first two micro-batches unless
 * `o` picks others. */
bool rep_timeline_write(const char *path, const sim_result *run, const rep_trace_options *o,
                        const char *window, GError **err);
/* --timeline-window: "START:END" in ms from the step's start (into `window`), or a layer's
 * name ("layer47": from its first pass's start to its last's end; `window` then {0, 0}). */
bool rep_timeline_window_parse(const char *text, double window[2], GError **err);

typedef struct {
  const cfg_cluster *cluster;
  const cfg_workload *workload;
  const mem_report *memory;
} rep_memory;

void rep_memory_text(FILE *out, const rep_memory *r);
cJSON *rep_memory_json(const rep_memory *r);

/* One MoE layer alone (dlsim moe). */
void rep_moe_text(FILE *out, const cfg_cluster *c, const cfg_workload *w, const sim_moe *s);
cJSON *rep_moe_json(const sim_moe *s);

/* A replayed trace (dlsim replay). */
void rep_replay_text(FILE *out, const sim_replay *r);
cJSON *rep_replay_json(const sim_replay *r);
/* A replayed Chakra trace (dlsim replay --chakra). */
void rep_chakra_text(FILE *out, const sim_chakra *r);
cJSON *rep_chakra_json(const sim_chakra *r);

/* Prints cJSON compactly or indented, followed by a newline. */
void rep_json_print(FILE *out, cJSON *json);

#endif
