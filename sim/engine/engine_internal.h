/* Private to the engine: pieces the two engines share. */
#ifndef DLSIM_ENGINE_INTERNAL_H
#define DLSIM_ENGINE_INTERNAL_H

#include "engine/engine.h"

#include <sys/types.h>

/* An interval of activity of one rank, for the breakdown. */
typedef struct {
  double start, end;
  int what;   /* -1 compute, else prog_dim of a collective */
  int stream; /* of the op (0 where not known): a stream's spans come in time order */
} eng_span;

typedef struct {
  double start, end;
} eng_interval;

typedef struct {
  double time, delta;
  uint32_t seq;
} eng_mem_event;

/* Breakdown of one rank from its spans; `hidden`: collective time in flight that the spans do
 * not show (run under compute inside macros); `pipelined`: idle time is pipeline bubble (the
 * rank waits for other stages) rather than "other"; `step` is the step time. */
void eng_breakdown(GArray *spans, const double hidden[PROG_NDIMS], bool pipelined, double step,
                   eng_result *out);
/* The same from `n` spans in an array. */
void eng_breakdown_of(const eng_span *spans, guint n, const double hidden[PROG_NDIMS],
                      bool pipelined, double step, eng_result *out);
/* Symmetry the DES may exploit (fold.c): one rank per class of ranks that the program and the
 * topology make equivalent, derived from the groups of layer-pass collectives and checked.
 * `flows` (per family, NULL: none) marks families whose in-layer collectives the DES runs as
 * flows: their groups must map onto each other like those outside layer passes. With a
 * planner `pl`, groups that join positions may fold by mirroring (see fold.c; NULL: they keep
 * their ranks). Returns the mask of ranks to simulate, or NULL when all must be; `info` says
 * which. */
bool *eng_fold_ranks(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                     const bool *flows, coll_planner *pl, eng_fold_info *info);
/* The first of each set of class `cls`'s collectives that the planner cannot tell apart (one
 * family, collective and size: the same groups and schedules), as op indices in order. */
GArray *eng_distinct_comms(const prog_program *p, int cls);
/* Whether the program has more than one pipeline stage. */
bool eng_pipelined(const prog_program *p);
/* Peak of a memory timeline that starts at `base` bytes (events in any order; sorted by time
 * then seq). */
double eng_mem_peak(GArray *events, double base, GArray *samples_out, int rank);

/* Durations of compute and macro ops. A macro runs a template `count` times: the first run
 * takes the template's makespan, each next one its period, the larger of its synchronous chain
 * (compute and the tensor / context-parallel collectives it waits on) and the busy time of its
 * asynchronous streams (data / expert parallel), which overlap the next run as prefetching
 * and bucketed reduction do. Templates are evaluated once per class, with its representative's
 * groups (the ranks of a class have symmetric groups). */
eng_costs *eng_costs_new(const prog_program *p, const hw_cluster *hw, coll_planner *pl,
                         const eng_options *opt);
/* The host's launch queue (gpu.efficiency.host_dispatch, hd): an eager host issues a rank's
 * kernels in program order, hd apart, without waiting for the GPU; a kernel
 * starts at the later of its issue and its stream's free time. n kernels of t each whose stream
 * is free at `ready`, issued from `first` to `last`, end at max(max(ready, first) + n t,
 * last + t): a long kernel hides the launches of the short ones behind it, and kernels shorter
 * than hd leave the GPU waiting for the host. */
double eng_queue_end(double ready, double first, double last, double n, double t);
/* How many launches an op costs the host: its kernels (none for a collective, a measured
 * duration or a memory event). */
double eng_launches(const prog_op *op);
/* How many launches (in host_dispatch units) before its issue the op's first launch is: n - 1
 * for compute, 0 for a collective (it starts once its calls are issued), -1 without launches. */
double eng_issue_lead(const prog_op *op);
/* A compute op's kernels alone, as the GPU runs them; under CUDA_LAUNCH_BLOCKING=1
 * (node.cpu.launch_blocking) each also waits for its launch, hd before it. */
double eng_kernel_time(const hw_cluster *hw, const prog_op *op);
/* The hd the launch queue runs ahead of the GPU with: 0 when launches block, since then the
 * host never gets ahead (eng_kernel_time carries their time). */
double eng_queue_dispatch(const hw_cluster *hw);
/* When the host issues the last launch of each op of a template's run, from the run's start;
 * `per_run`: the host's time for a whole run. */
double *eng_template_issues(const prog_program *p, int tmpl, double hd, double *per_run);
/* Costs shared across runs (eng_options.costs) follow the program being run. */
void eng_costs_bind(eng_costs *c, const prog_program *p);
double eng_op_duration(eng_costs *c, const prog_op *op, int rank);
/* The time of a collective as `rank` runs it while every other rank of its class runs the same
 * op in step (the ranks of a pipeline stage do, in a layer pass and in the analytic engine):
 * the family's other groups in the class share the network with it, which is what makes the
 * data-parallel traffic of tensor-parallel siblings meet on an oversubscribed spine. */
double eng_coll_crowded(eng_costs *c, const prog_op *op, int rank, const coll_schedule *s);
/* The spans of a compute or macro op that starts at `start` (a macro: its compute, then its
 * exposed collective waits per dimension); adds the collective time its compute hid to
 * `hidden`. Returns its duration. */
double eng_op_spans(eng_costs *c, const prog_op *op, int rank, double start, GArray *spans,
                    double hidden[PROG_NDIMS]);
/* The most spans one op has: a macro's compute and a wait per dimension. */
#define ENG_OP_SPANS_MAX (1 + PROG_NDIMS)
/* The same into `out`: returns how many spans it wrote, *dur the op's duration. */
guint eng_op_place(eng_costs *c, const prog_op *op, int rank, double start,
                   eng_span out[ENG_OP_SPANS_MAX], double hidden[PROG_NDIMS], double *dur);

/* Interference (gpu.efficiency.interference, collectives.sm_reserved): the extra time per
 * second that compute op `op` (not a macro) runs beside a collective of its GPU. */
double eng_interference_rate(const eng_costs *c, const prog_op *op);
/* A rank's collectives outside layer passes (eng_interval, in any order) slow the compute op or
 * macro `op` that ran from `start` for `dur`: the extra time it takes for the part of them
 * that overlaps it, up to `now` (INFINITY: all of them). For an op of the compute stream,
 * collectives that ended before `start` are dropped from `comms` (its later ops start later). */
double eng_interference_charge(eng_costs *c, const prog_op *op, int rank, double start, double dur,
                               GArray *comms, double now);
/* The same on the `*ncomms` intervals at `comms`, which it prunes in place (*ncomms updated). */
double eng_interference_charge_v(eng_costs *c, const prog_op *op, int rank, double start,
                                 double dur, eng_interval *comms, guint *ncomms, double now);
/* How long [start, end) meets the union of the `n` (> 0) intervals `clipped`, each inside it
 * and not empty, in any order (reordered). */
double eng_union_overlap(eng_interval *clipped, guint n, double start, double end);

/* Ops off the synchronous chain of template `tmpl` (per op, newly allocated): data-parallel
 * collectives (prefetched ZeRO-3 gathers and reductions that overlap the next run) and
 * expert-parallel ones that nothing in the template waits for (MoE all-to-alls hidden by the
 * other half batch). The next run's synchronous chain waits for this run's; these do not. */
bool *eng_async_ops(const prog_program *p, int tmpl);

/* Per family, whether the DES runs its collectives as flows (engine/flows.c): always outside
 * layer passes; inside them (a template's ops), as `mode` says: ALWAYS, NEVER, or (AUTO) unless no link direction its groups' transfers
 * cross is crossed by another group (of it or of another family) or loaded by
 * network.background, so that the closed form is exact. Plans every group of every family
 * with `pl`; NULL (and `err`) when one cannot be planned. */
bool *eng_flow_families(const prog_program *p, const hw_cluster *hw, coll_planner *pl,
                        cfg_layer_flows mode, GError **err);

/* Which families appear in a template (a layer pass): only those can keep the closed form. */
bool *eng_in_template_families(const prog_program *p);

/* The schedule of a comm op as `rank` runs it (shared by every rank of the group). */
const coll_schedule *eng_schedule_for(coll_planner *pl, const prog_program *p, const prog_op *op,
                                      int rank, GError **err);

/* Per class and stream, the indices of its ops in order: lists[cls * PROG_NSTREAMS + stream]. */
GArray **eng_stream_lists(const prog_program *p);
void eng_stream_lists_free(const prog_program *p, GArray **lists);

bool eng_run_analytic(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                      eng_result *out, GError **err);
bool eng_run_des(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                 eng_result *out, GError **err);

/* The DES parent's watch over its child (des_watch.c): reads wait with it, and a child that
 * neither sends a byte nor uses CPU time for `stall` seconds is killed, `error` saying so. */
typedef struct {
  pid_t pid;
  double stall;   /* seconds */
  long long cpu;  /* the child's CPU time at the last look, in clock ticks */
  gint64 last;    /* when the child was last seen doing something (monotonic, us) */
  bool killed;    /* the watch gave up and killed the child */
  int pidfd;      /* readable once the child has exited (-1: none, waitpid alone) */
  GError *error;  /* why the watch gave up; NULL otherwise */
} des_watch;

/* The stall limit: $DLSIM_DES_STALL seconds, 120 by default; a bad value is an input error. */
bool des_watch_stall(double *stall, GError **err);
void des_watch_start(des_watch *w, pid_t pid, double stall);
/* Waits until `fd` can be read (or is closed) while the child makes progress; false once the
 * watch gave up (w->error). */
bool des_watch_readable(des_watch *w, int fd);
/* Reaps the child into `status`, killing it first if it stops making progress (false then,
 * w->error saying why). */
bool des_watch_exit(des_watch *w, int *status);
/* Closes what the watch holds. */
void des_watch_end(des_watch *w);

#endif
