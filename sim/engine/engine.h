/* engine: runs a program on a cluster and measures one step.
 *
 * `analytic` follows one representative rank per class through the DAG with closed-form costs
 * (no contention between concurrent collectives); `des` runs every rank as SimGrid actors, one
 * per stream, so concurrent flows share links. Without contention both give the same times. */
#ifndef DLSIM_ENGINE_H
#define DLSIM_ENGINE_H

#include "collectives/collectives.h"
#include "hardware/hardware.h"
#include "program/program.h"

typedef enum { ENG_ANALYTIC, ENG_DES } eng_kind;

typedef struct {
  eng_kind kind;
  bool trace;      /* keep every op's interval and memory samples */
  bool unfold;     /* run collectives step by step instead of folded phases */
  coll_algo algo;  /* collectives.algorithm */
  int proto;       /* collectives.protocol: COLL_PROTO_AUTO or a cfg_proto */
  double sm_reserved; /* collectives.sm_reserved: compute beside a collective slows by
                       * 1 / (1 - sm_reserved) */
  cfg_layer_flows layer_flows; /* collectives.layer_flows: which in-layer collectives the DES
                                * runs as flows (eng_flow_families) */
  double layer_flow_budget;    /* collectives.layer_flow_budget (<= 0: no limit) */
  const coll_runtime *runtime; /* collectives.runtime's choices and costs (NULL: NCCL) */
  /* Per rank, the factor its compute time runs at (stragglers; NULL: 1 everywhere). The DES
   * then simulates every rank: a slow rank breaks the symmetry folding relies on. The analytic
   * engine ignores it (run/stragglers.c takes the slowest rank in closed form). */
  const double *slowdown;
  bool all_ranks;  /* DES: simulate every rank, none standing for its symmetric siblings */
  /* Called now and then by the DES with the fraction of its ops completed (NULL: never). It
   * runs in the simulating child process: it may print, but what it remembers is lost. */
  void (*progress)(double fraction, void *ctx);
  void *progress_ctx;
  /* A planner the analytic engine uses and keeps instead of making its own (NULL: its own):
   * runs of programs with the same groups (the fold's two) then plan each collective once.
   * Made with eng_planner_new from these options. */
  coll_planner *planner;
  /* Template times and crowded collectives the analytic engine keeps across runs (NULL: its
   * own), made with eng_costs_new_shared on `planner`: for runs of programs with the same
   * groups and templates (prog_groups_same, prog_templates_same: the fold's two). */
  struct eng_costs *costs;
} eng_options;

typedef struct {
  int rank;
  uint8_t stream, kind, dim;
  uint32_t op;      /* its index in the rank's class */
  const char *name; /* owned by the program */
  double start, end;
} eng_event;

typedef struct {
  int rank;
  double time, bytes;
} eng_mem_sample;

/* A network or NVLink link's load over the step (DES): link `link` of the hardware table, one
 * direction (`down` as hw_hop says), the bytes it carried and its mean use. */
typedef struct {
  int link;
  bool down;
  double bytes, utilisation;
} eng_link_load;

/* Its rate over one sampling interval ending at `time`, for a trace's counters. */
typedef struct {
  int link;
  bool down;
  double time, rate;
} eng_link_sample;

#define ENG_BUSIEST_LINKS 8

/* Why the DES simulated ranks that layer-pass groups could have folded away (see fold.c). */
typedef enum {
  ENG_FOLD_NONE,           /* it did not: every candidate folded, or there was none */
  ENG_FOLD_ASKED,          /* eng_options.all_ranks */
  ENG_FOLD_STRAGGLERS,
  ENG_FOLD_SHARED_NIC,
  ENG_FOLD_OVERSUBSCRIBED,
  ENG_FOLD_BACKGROUND,
  ENG_FOLD_JOINED,         /* a collective outside the layer passes joins siblings */
  ENG_FOLD_ASYMMETRIC,     /* siblings' classes, groups or routes differ */
  ENG_FOLD_CROSSED,        /* ... one that mirroring cannot stand for: its links carry other
                            * transfers of ranks not simulated */
  ENG_FOLD_UNEVEN,         /* ... one whose members' transfers differ (amounts or links):
                            * they do not leave it together */
} eng_fold_why;

typedef struct {
  int ranks;                  /* ranks the DES simulated (0: not the DES) */
  unsigned folded_dims;       /* 1 << prog_dim of the groups whose siblings were folded */
  unsigned unfolded_dims;     /* ... and of those that could have been but were not */
  eng_fold_why why;           /* why those were not */
  int joined_dim;             /* ENG_FOLD_JOINED: the joining collective's prog_dim */
} eng_fold_info;
const char *eng_fold_why_text(eng_fold_why why);

typedef struct {
  double step_time;
  int critical_rank;
  /* breakdown of the critical rank: these four add up to step_time */
  double compute, exposed_comm, bubble, other;
  double comm[PROG_NDIMS];    /* time with a collective of that dimension in flight */
  double exposed[PROG_NDIMS]; /* ... and no compute running */
  double peak_memory;         /* max over ranks, from the alloc/free timeline */
  double *class_peak;         /* per class */
  int nclasses;
  GArray *events;      /* eng_event, when tracing */
  GArray *mem_samples; /* eng_mem_sample, when tracing */
  double wall_time;    /* seconds the simulator itself took */
  long messages;       /* point-to-point transfers simulated (DES) */
  long activities;     /* executions and sleeps simulated besides them (DES) */
  GArray *link_loads;   /* eng_link_load: the busiest links, busiest first (DES) */
  GArray *link_samples; /* eng_link_sample of those links over time, when tracing (DES) */
  /* DES: the dimensions (bit 1 << prog_dim) whose collectives ran as flows, and those whose
   * in-layer collectives kept the closed form (their links carry nothing else) */
  unsigned flow_dims, closed_dims;
  /* DES, layer_flows auto: in-layer dimensions whose contended collectives were kept in closed
   * form because running them as flows would have taken `capped_messages` transfers, past the
   * budget (0: none capped) */
  unsigned capped_dims;
  double capped_messages;
  eng_fold_info fold;   /* which ranks the DES simulated (DES) */
} eng_result;

/* The DES runs in a forked child, and fork() copies only the calling thread: call it while this
 * process has no other thread, or a lock one of them holds stays held in the child. A child that
 * then makes no progress is killed after $DLSIM_DES_STALL seconds (120) and the run fails. */
bool eng_run(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
             eng_result *out, GError **err);
void eng_result_clear(eng_result *r);

/* How a second program is the first with ops inserted (the fold's, made in place): in class
 * c < nclasses, ops from at[c] on move by ins[c], and the streams of bit s in streams[c] get
 * some of the inserted ops. */
typedef struct {
  guint nclasses;
  const guint *at, *ins;
  const unsigned *streams;
} eng_splice;
/* An analytic walk as it stood just before it first met an op that `sp` moves or inserts on a
 * stream it inserts on: the second program's walk is the same up to there. */
typedef struct eng_fork eng_fork;
/* eng_run on the analytic engine that also keeps that walk in *fork (NULL when it could not:
 * the caller then runs the second program whole). The fork holds no pointer into `p`. */
bool eng_run_forking(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                     const eng_splice *sp, eng_result *out, eng_fork **fork, GError **err);
/* The second program's run (`p`: the first with the fork's splice applied) from the walk the
 * fork kept, to the same result as eng_run's, bit for bit. False with *resumed false when the
 * fork does not fit `p` (then run it whole). */
bool eng_run_from_fork(const eng_fork *fork, const prog_program *p, const hw_cluster *hw,
                       const eng_options *opt, eng_result *out, bool *resumed, GError **err);
void eng_fork_free(eng_fork *f);
/* The collective planner a run with these options makes (eng_options.planner shares one). */
coll_planner *eng_planner_new(const hw_cluster *hw, const eng_options *o);
typedef struct eng_costs eng_costs;
/* Costs to share as eng_options.costs (o->planner set). */
eng_costs *eng_costs_new_shared(const hw_cluster *hw, const eng_options *o);
void eng_costs_free(eng_costs *c);
/* Whether costs made for other runs serve one on `hw` with options `o` as its own would: the
 * same hardware and planner, folding and interference (their programs must also have the same
 * groups and templates: prog_groups_same, prog_templates_same). */
bool eng_costs_fit(const eng_costs *c, const hw_cluster *hw, const eng_options *o);
/* r = a + (b - a) k for every time, breakdown and memory peak of a step (the line through two
 * simulated micro-batch counts); the critical rank is b's and the simulator's own costs add. */
void eng_result_extrapolate(const eng_result *a, const eng_result *b, double k, eng_result *r);
const char *eng_kind_name(eng_kind k);
bool eng_kind_parse(const char *name, eng_kind *out, GError **err);

/* One collective alone, as nccl-tests times it (see engine/collective.c). */
typedef struct {
  double time;
  coll_algo algo; /* what the tuner picked */
  int proto;      /* cfg_proto, or -1 when nothing moved */
} eng_coll_result;
prog_program *eng_collective_program(prog_coll op, int gpus, int group, double bytes);
bool eng_collective_time(const hw_cluster *hw, const eng_options *opt, prog_coll op, int gpus,
                         int group, double bytes, eng_coll_result *out, GError **err);

/* Durations without running a program, for closed-form estimates (the planner): the time of
 * `count` runs of a template as `rank` runs them (what a macro op takes), and of one
 * collective of a family alone. Plans and template times are cached across calls. */
typedef struct eng_evaluator eng_evaluator;
eng_evaluator *eng_evaluator_new(const prog_program *p, const hw_cluster *hw, const eng_options *opt);
void eng_evaluator_free(eng_evaluator *e);
double eng_evaluate_macro(eng_evaluator *e, int tmpl, uint32_t count, int rank);
/* The same, and in `rate` (NULL: not wanted) the extra time per second of those runs that a
 * collective beside them (outside the template: a gradient reduction, a pipeline send) costs,
 * as the engines charge it. */
double eng_evaluate_macro_rate(eng_evaluator *e, int tmpl, uint32_t count, int rank, double *rate);
bool eng_evaluate_coll(eng_evaluator *e, prog_coll op, int family, double bytes, int rank,
                       double *time, GError **err);

/* One run of a template inside a macro op as `rank` runs it, for a trace to show what the
 * macro's one interval holds: each op's start and end from the run's start, as the list
 * schedule the engine timed it with gives them; run j of a macro starts j periods after the
 * first. Reading it changes no duration. */
typedef struct {
  double makespan, period;
  guint nops;
  double *start, *end; /* per op of the template */
} eng_template_schedule;
void eng_evaluate_template(eng_evaluator *e, int tmpl, int rank, eng_template_schedule *out);
void eng_template_schedule_clear(eng_template_schedule *s);
/* The schedule (algorithm, protocol, time alone) the planner picks for a comm op as `rank` runs
 * it, or NULL when none can run it. */
const coll_schedule *eng_evaluate_schedule(eng_evaluator *e, const prog_op *op, int rank);

/* Duration of a compute op by the hardware cost model (or its measured time), its launches
 * included when the host launches from an empty queue (engine_internal.h: eng_queue_end). */
double eng_compute_time(const hw_cluster *hw, const prog_op *op);

/* Writes all `len` bytes to `fd`, retrying after signals: a forked child's reply down its pipe
 * (the DES's, the planner's confirmations). False if the pipe closed. */
bool eng_write_all(int fd, const void *buf, size_t len);
/* Reads all `len` bytes from `fd`, retrying after signals; false if the pipe closed first. */
bool eng_read_all(int fd, void *buf, size_t len);
/* Forks a child that will reply down a pipe: 0 in the child, with `*fd` the pipe's write end;
 * the child's pid in the parent, with `*fd` its read end; -1 with `err` ("WHO: pipe: ...") if
 * the pipe or the fork failed. stdout and stderr are flushed first, so that the child does not
 * print the parent's buffered text again. */
int eng_fork_replying(const char *who, int *fd, GError **err);

#endif
