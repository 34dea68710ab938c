/* run: the whole path of one training-step simulation, from typed configs to the figures a
 * report prints (config -> hardware -> workload program -> memory -> engine -> figures).
 *
 * `sim_run` is the one entry point: the CLI, the planner, calibration, what-if, validation
 * and the benches call it with structs, so they all see the same numbers and nothing is
 * printed as `--set` text or re-parsed along the way. `sim_run_files` is the thin wrapper
 * for file names (or preset names) plus `--set` overrides, as users give them. */
#ifndef DLSIM_RUN_H
#define DLSIM_RUN_H

#include "budget/budget.h"
#include "chakra/chakra.h"
#include "config/config.h"
#include "engine/engine.h"
#include "hardware/hardware.h"
#include "memory/memory.h"
#include "program/program.h"
#include "trace/trace.h"
#include "uncertainty/uncertainty.h"
#include "workloads/workloads.h"

/* What analytic runs on one cluster with one workload's collectives settings may share (the
 * planner's sweep over layouts): the hardware and a collective planner that knows groups by
 * their ranks, so a group two layouts both have is planned once. Its owner makes it from the
 * cluster and workload the runs are given (their parallel layout and batch may differ) and
 * frees it after the last run. */
typedef struct sim_cache sim_cache;
sim_cache *sim_cache_new(const cfg_cluster *c, const cfg_workload *w, GError **err);
void sim_cache_free(sim_cache *k);

typedef struct {
  eng_kind engine;
  bool trace;        /* keep every op's interval and memory samples (for --trace) */
  bool fold;         /* simulate identical micro-batches at two small counts and extend the
                      * step along the line through them (exact in the steady state); a trace
                      * needs every op, so fold and trace exclude each other */
  bool unfold_colls; /* run collectives step by step instead of folded phases (for checking) */
  bool all_ranks;    /* DES: simulate every rank, none for its symmetric siblings (checking) */
  const bud_limits *budget; /* what the run may cost; NULL: the defaults */
  sim_cache *cache;  /* analytic runs share its hardware and, with collectives folded, its
                      * collective plans (NULL: their own) */
  /* Called now and then with the fraction of the whole run done, both folded runs together
   * (NULL: never); from the DES's child process (see eng_options.progress). */
  void (*progress)(double fraction, void *ctx);
  void *progress_ctx;
} sim_options;

/* What a user would ask for: the engine, micro-batch folding on, no trace. */
sim_options sim_options_for(eng_kind engine);

/* The 80 % interval of a step's figures: what the truth was within, around dlsim's prediction,
 * for 80 % of the real runs of the same kind (validation/intervals.tsv). */
typedef struct {
  bool set;
  const char *kind;   /* the band's: training, fsdp */
  int cases;
  double cv_coverage;
  double step_time[2], tokens_per_s[2], mfu[2];
} sim_interval;

/* What slow GPUs cost a synchronous step (cluster.stragglers): every step waits for its
 * slowest rank. The DES simulates `steps` steps, each rank's compute scaled by its draw (its
 * lasting factor times the step's jitter); the analytic engine takes the critical rank's compute
 * times the expected slowest factor, less one, in closed form. */
typedef struct {
  bool on;
  int slow;            /* GPUs lastingly `slowdown` times slower */
  int steps;           /* simulated (DES); 0: closed form */
  double expected_max; /* E[the slowest GPU's factor] over the draws */
  double step_time;    /* mean step with stragglers */
  double cost;         /* step_time less the step without them */
} sim_stragglers;

typedef struct {
  /* the job, as simulated (borrowed from the caller of sim_run; owned by the result when
   * sim_run_files loaded it) */
  const cfg_cluster *cluster;
  const cfg_workload *workload;
  hw_cluster *hw;
  prog_program *program; /* of the last run simulated (the larger count when folded) */
  eng_options options;
  coll_runtime *runtime; /* collectives.runtime, which options.runtime points at */
  eng_result eng;        /* the engine's step: time, breakdown of the critical rank, comm */
  mem_report memory;
  /* figures, computed once from the above */
  int gpus;
  double peak_flops;     /* per GPU, in the training dtype */
  double step_time, mfu, hfu, model_tflops_per_gpu, samples_per_s, tokens_per_s;
  double peak_bytes, capacity_bytes;
  bool fits;
  sim_interval interval; /* set by sim_result_bracket */
  cfg_cluster *mps_cluster; /* processes_per_gpu > 1 or a host_dispatch: see sim_mps_cluster */
  sim_stragglers stragglers;
  bool folded;           /* the step was extended from two micro-batch counts */
  /* private: the cache the run used (hw is then its), what sim_run_files loaded */
  sim_cache *cache;
  /* without one, the run's own model and groups: the memory estimate and both programs of
   * the fold take the model from it, which each built for itself before */
  wl_cache *own_programs;
  cfg_cluster *own_cluster;
  cfg_workload *own_workload;
} sim_result;

/* With MPS (parallel.processes_per_gpu = k > 1), the cluster as its processes see it: k times
 * the GPUs, each with 1/k of a GPU (see run.c for the rule), and the workload's
 * training.host_dispatch for the engines' launch queue; NULL when k is 1 and there is none. A
 * shallow copy
 * that borrows every pointer of `c`: free it with g_free. */
cfg_cluster *sim_mps_cluster(const cfg_cluster *c, const cfg_workload *w);

/* Simulates one training step of `w` on `c`. The result borrows both: they must outlive it.
 * Errors: CFG_ERROR_INPUT / UNSUPPORTED for what the input asks (exit 2), CFG_ERROR_RUNTIME
 * when the simulation itself fails (exit 1). On failure the result is still safe to clear. */
bool sim_run(const cfg_cluster *c, const cfg_workload *w, const sim_options *o, sim_result *out,
             GError **err);
/* Loads a cluster and a workload (paths or preset names) with `sets` ("key=value", NULL-
 * terminated, or NULL) and runs them; the result owns what it loaded. */
bool sim_run_files(const char *cluster, const char *workload, char *const *sets,
                   const sim_options *o, sim_result *out, GError **err);
void sim_result_clear(sim_result *r);
/* Brackets the figures with the band of their kind in `t` (nothing when it has none). */
void sim_result_bracket(sim_result *r, const unc_table *t);

/* How sim_run folds the micro-batches of `w` under `o`: the two counts per replica it simulates
 * (`m`) and where the step lies along the line through their steps a and b (the step is
 * sim_fold_step(a, b, k)); false when it simulates the step whole. Each count run on its own
 * (fold off, the global batch of m[i] micro-batches) gives the same a and b, so that a caller
 * may run the two at once. */
bool sim_fold_counts(const cfg_workload *w, const sim_options *o, int m[2], double *k);
double sim_fold_step(double a, double b, double k);

/* The step of `r`'s job simulated again with other engine options (as sim_run ran it: folded or
 * not); its time in `step`. */
bool sim_step_again(const sim_result *r, const eng_options *opt, double *step, GError **err);

/* ---- stragglers (run/stragglers.c) ---------------------------------------------------------- */

/* Errors (CFG_ERROR_INPUT, with the key's place): a slowdown below 1. */
bool sim_stragglers_check(const cfg_cluster *c, GError **err);
/* Whether the cluster has any (a lasting spread, slow GPUs, or jitter). */
bool sim_stragglers_wanted(const cfg_stragglers *s, int gpus);
/* GPUs lastingly slow: fraction x gpus, rounded. */
int sim_stragglers_slow(const cfg_stragglers *s, int gpus);
/* E[max over `gpus` GPUs of each one's factor]: every factor lognormal with sigma
 * sqrt(sigma^2 + jitter^2), `slow` of them scaled by `slowdown`; by quadrature of
 * 1 - P(max <= x). */
double sim_stragglers_expected_max(const cfg_stragglers *s, int gpus);
/* Each GPU's lasting factor for the run (`f` holds `gpus`), from the seed. */
void sim_stragglers_lasting(const cfg_stragglers *s, int gpus, GRand *g, double *f);
/* Fills r->stragglers: DES steps with the draws, or the closed form (analytic). */
bool sim_stragglers_run(sim_result *r, GError **err);

/* ---- helpers shared by the simulations below and the CLI ---------------------------------- */

/* `a` followed by `b` (either may be NULL), newly allocated. */
char **sim_strv_concat(char *const *a, char *const *b);
/* Loads a cluster with at least `gpus` GPUs: more nodes of the same kind when it has fewer
 * (a trace of a 128-rank job on a one-node preset). */
cfg_cluster *sim_cluster_for(const char *path, char *const *sets, int gpus, GError **err);
/* The preset a trace's GPU (deviceProperties name) runs on when no cluster is given: dgx-h100,
 * v100-edr, gh200, else dgx-a100. */
const char *sim_default_cluster(const char *gpu_name);

/* ---- a real trace, re-simulated (dlsim replay) --------------------------------------------- */

/* The trace becomes a program (trace/), the engine runs it on the cluster the trace ran on,
 * and each ProfilerStep's predicted duration is set next to the measured one. With what-if
 * overrides (or a target cluster) the same job is predicted on changed hardware; two
 * diagnostics run on the traced cluster: NCCL kernels at their measured durations (the
 * replay's own error) and every GPU op taking no time (what the host alone takes). */
typedef struct {
  int ntraces;
  trc_trace **traces;
  cfg_cluster *base_cfg, *target_cfg;
  hw_cluster *base, *target;
  trc_replay rep;
  double *predicted;      /* per step */
  double *measured_comm;  /* per step, NCCL kernels at their measured durations */
  double *baseline;       /* per step, on the unchanged cluster (what-if only) */
  double *host;           /* per step, every GPU op taking no time: the CPU side's bound */
  double measured_mean, predicted_mean, measured_comm_mean, baseline_mean, host_mean;
  eng_kind engine;
  char *cluster_name;
  bool default_cluster;
} sim_replay;

typedef struct {
  char **traces;
  char **machine; /* overrides that describe the traced machine (its calibration...): both sides */
  char **sets;    /* what-if overrides: the predicted side only */
  const char *cluster, *target, *steps, *engine, *comm;
  int ranks;
} sim_replay_args;

bool sim_replay_run(const sim_replay_args *a, sim_replay *out, GError **err);
void sim_replay_clear(sim_replay *r);

/* ---- a Chakra execution trace on a cluster (dlsim replay --chakra) -------------------------- */

typedef struct {
  const char *trace;   /* DIR_OR_PREFIX */
  const char *cluster; /* required: a Chakra trace does not say what it ran on */
  char **sets;
  const char *engine;
  bool recost;         /* compute nodes with num_ops timed by the cost model */
  const char *dtype;   /* of re-costed compute (default bf16) */
  const char *groups;  /* ASTRA-sim's communicator-group file (NULL: collectives span all) */
} sim_chakra_args;

typedef struct {
  chk_trace *trace;
  chk_counts counts;
  cfg_cluster *cfg;
  eng_kind engine;
  eng_result res;
} sim_chakra;

bool sim_chakra_run(const sim_chakra_args *a, sim_chakra *out, GError **err);
void sim_chakra_clear(sim_chakra *r);

/* ---- one mixture-of-experts layer alone (dlsim moe) ------------------------------------------ */

typedef enum { SIM_A2A_DISPATCH, SIM_A2A_COMBINE, SIM_A2A_COMBINE_BWD, SIM_A2A_DISPATCH_BWD } sim_a2a;
extern const char *const sim_a2a_names[4]; /* dispatch, combine, combine_bwd, dispatch_bwd */

typedef struct {
  wl_moe_info info;
  double time[4]; /* of each all-to-all (sim_a2a), on the first ep GPUs */
} sim_moe;

/* The routing, the four all-to-alls and the expert compute of the workload's MoE layer. */
bool sim_moe_layer(const cfg_cluster *c, const cfg_workload *w, sim_moe *out, GError **err);

#endif
