/* Private to the engine: pieces the two engines share. */
#ifndef DLSIM_ENGINE_INTERNAL_H
#define DLSIM_ENGINE_INTERNAL_H

#include "engine/engine.h"

/* An interval of activity of one rank, for the breakdown. */
typedef struct {
  double start, end;
  int what; /* -1 compute, else prog_dim of a collective */
} eng_span;

typedef struct {
  double time, delta;
  uint32_t seq;
} eng_mem_event;

/* Breakdown of one rank from its spans; `step` is the step time. */
void eng_breakdown(GArray *spans, double step, eng_result *out);
/* Peak of a memory timeline that starts at `base` bytes (events in any order; sorted by time
 * then seq). */
double eng_mem_peak(GArray *events, double base, GArray *samples_out, int rank);

/* The schedule of a comm op as `rank` runs it (shared by every rank of the group). */
const coll_schedule *eng_schedule_for(coll_planner *pl, const prog_program *p, const prog_op *op,
                                      int rank, GError **err);
coll_planner *eng_planner_new(const hw_cluster *hw, const eng_options *o);

/* Per class and stream, the indices of its ops in order: lists[cls * PROG_NSTREAMS + stream]. */
GArray **eng_stream_lists(const prog_program *p);
void eng_stream_lists_free(const prog_program *p, GArray **lists);

bool eng_run_analytic(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                      eng_result *out, GError **err);
bool eng_run_des(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                 eng_result *out, GError **err);

#endif
