/* Private to the report module: the trace's events, for the writers that draw them. */
#ifndef DLSIM_REPORT_INTERNAL_H
#define DLSIM_REPORT_INTERNAL_H

#include "report/report.h"

/* Receives each trace event (a Chrome trace event as cJSON) and owns it from then on. */
typedef void (*rep_trace_sink)(void *ctx, cJSON *event);
/* Every event --trace writes of `run` under `o`, in the file's order: per GPU its metadata, its
 * events in time order, its memory counter; then the network's link counters. */
bool rep_trace_walk(const sim_result *run, const rep_trace_options *o, rep_trace_sink sink,
                    void *sink_ctx, GError **err);
/* The first `max` GPUs the engine simulated on its own, as rep_trace_options's rank pairs. */
GArray *rep_trace_simulated(const sim_result *run, int max);

#endif
