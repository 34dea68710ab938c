/* planner: which parallel layout to run. Enumerates tensor x context x pipeline x data (x
 * expert) parallelism, micro-batch, interleaving, ZeRO stage, recomputation, sequence
 * parallelism and placement; drops what is invalid or does not fit in memory; ranks the rest
 * with a closed-form estimate built from the engine's own layer-pass templates (microseconds a
 * layout); re-simulates the best with the analytic engine (what `dlsim run` says) and confirms
 * the top few with the DES. */
#ifndef DLSIM_PLANNER_H
#define DLSIM_PLANNER_H

#include "config/config.h"
#include "program/program.h"

#include <glib.h>

typedef struct {
  int tp, cp, pp, dp, ep, micro_batch, virtual_stages, zero;
  cfg_recompute recompute;
  int sequence_parallel;  /* 0/1 */
  int pipeline_outer;     /* 0/1: placement [tp, cp, dp, pp] instead of [tp, cp, pp, dp] */
} plan_layout;

/* What a whole run of each layout costs (lifecycle/: the workload's training.tokens or
 * training.steps): the refined layouts are ranked by it, the step decides ties. */
typedef enum { PLAN_BY_STEP, PLAN_BY_COST, PLAN_BY_ENERGY, PLAN_BY_TIME_TO_TRAIN } plan_run_objective;

typedef struct {
  plan_layout l;
  long index;               /* enumeration order: ties go to the lower */
  double estimate_s;        /* closed form */
  double step_time_s;       /* analytic engine, NAN until refined */
  double des_step_time_s;   /* DES, NAN unless confirmed */
  double mfu, tokens_per_s, peak_bytes;
  double compute_s, exposed_comm_s, bubble_s, other_s;
  double exposed[PROG_NDIMS];
  double time_to_train_s, energy_kwh, cost_usd; /* the run's, when ranked by it (else NAN) */
  char why[200];            /* for runners-up: what they lose against the best, parts that add up */
  char same[96];            /* layouts one knob away that run the same (collapsed into this one) */
} plan_candidate;

/* Dimensions the user pins (-1: free). */
typedef struct {
  int tp, cp, pp, ep, micro_batch, virtual_stages, zero, recompute, sequence_parallel,
      pipeline_outer;
} plan_pins;
void plan_pins_init(plan_pins *p); /* nothing pinned: all -1 */
/* "zero=1", "recompute=selective", "placement=pp-outer"... */
bool plan_pins_parse(plan_pins *p, const char *text, GError **err);

typedef struct {
  plan_pins pins;
  int top_k;            /* confirmed with the DES (0: none) */
  int jobs;             /* DES confirmations run at once, each in a process of its own
                         * (<= 1: one after another in this process); the same figures */
  int refine;           /* distinct layouts re-simulated with the analytic engine */
  bool tokens_per_gpu;  /* objective: throughput per GPU (else step time) */
  plan_run_objective by_run; /* rank the refined layouts by their run estimate instead */
  int shard, nshards;   /* this process screens candidates with index % nshards == shard */
  bool fresh_runs;      /* each refined layout simulated alone, sharing no hardware or
                         * collective plans with the others (checking: the same figures) */
  void (*progress)(double fraction, void *ctx);
  void *progress_ctx;
  /* after each DES run: how many are done of how many (a folded step is two runs, which
   * run at once with jobs > 1; NULL: nothing) */
  void (*confirmed)(int done, int total, void *ctx);
} plan_options;

/* The search's base: a cluster and a workload already sized to the GPU count; the setup takes
 * both (and frees them, also on failure). Every candidate is this workload with its layout
 * applied to the structs, simulated with sim_run: nothing is re-read or re-parsed. */
typedef struct plan_setup plan_setup;
plan_setup *plan_setup_new(cfg_cluster *c, cfg_workload *w, int global_batch, GError **err);
void plan_setup_free(plan_setup *s);
int plan_setup_gpus(const plan_setup *s);
const cfg_workload *plan_setup_workload(const plan_setup *s); /* the base */

typedef struct {
  long candidates, valid, fits; /* enumerated; valid layouts; of those, fitting */
  GArray *best;                 /* plan_candidate: the `refine` best estimates, best first */
  double elapsed_s;
  int simulated;                /* layouts plan_refine ran on the analytic engine */
} plan_screen_result;

/* How many estimates the screen keeps for `refine` distinct layouts: layouts one knob away
 * from another that run the same are collapsed into it, and the next estimate takes the slot. */
int plan_pool(int refine);
/* Enumerates and estimates this shard's candidates; keeps the plan_pool(o->refine) best. */
bool plan_screen(plan_setup *s, const plan_options *o, plan_screen_result *out, GError **err);
/* Merges other shards' results into `into` (keeping the `pool` best). */
void plan_merge(plan_screen_result *into, const plan_screen_result *other, int pool);
void plan_screen_clear(plan_screen_result *r);
/* Re-simulates the screened best with the analytic engine in the estimate's order until
 * `refine` distinct layouts are known (collapsing the ones that run the same as one already
 * simulated, one knob away), ranks them by the engine, confirms the top k with the DES, and
 * explains what the runners-up lose. */
bool plan_refine(plan_setup *s, const plan_options *o, plan_screen_result *r, GError **err);

/* A candidate's figure for the objective: its run's dollars, kWh or seconds; else its step. */
double plan_run_value(const plan_candidate *c, plan_run_objective by);
/* Orders candidates by the objective, then by step time, then enumeration order. */
int plan_cmp_objective(const plan_candidate *a, const plan_candidate *b, plan_run_objective by);
/* Sorts refined candidates (of one GPU count or several) by the objective and says what each
 * runner-up loses against the first. */
void plan_rank(GArray *kept, plan_run_objective by);

/* The base workload with this layout: a shallow copy that shares the base's strings and
 * document, so it lives no longer than the setup. */
void plan_apply(const plan_setup *s, const plan_layout *l, cfg_workload *w);
/* "TP 8 x PP 16 x DP 8, mb 1, ZeRO-1, selective, SP" */
char *plan_layout_describe(const plan_layout *l);

#endif

/* ---- serving: which deployment to run (planner/serve.c) -----------------------------------
 *
 * Every candidate deployment is a list of --set overlays on the serving workload (serving.tp,
 * serving.pp, serving.replicas, serving.max_batch, serving.max_tokens; with prefill/decode pools,
 * serving.prefill.* and serving.decode.*), loaded through the config module as `dlsim serve
 * --set` would. A closed form (the iteration cost of srv_iteration_time at the batch the rate
 * implies, and queueing) estimates each one's highest rate under the SLA; the best are confirmed
 * with srv_find_max_rate and ranked by goodput per GPU. */

#define PLAN_SRV_MAX_POOLS 2

typedef struct {
  int tp, pp, ep, replicas;
  int max_batch;             /* 0: the workload's */
} plan_srv_pool;

typedef struct {
  int npools;                /* 1: aggregated replicas; 2: prefill and decode pools */
  plan_srv_pool pool[PLAN_SRV_MAX_POOLS];
  int max_tokens;            /* tokens per iteration: the chunk size under chunked prefill */
  int gpus;
  long index;                /* enumeration order: ties go to the lower */
  double est_rate;           /* closed form: requests/s of the whole deployment under the SLA */
  double est_ttft, est_tpot; /* the estimate's p90 TTFT and TPOT at est_rate */
  double rate;               /* confirmed: srv_find_max_rate's, rounded down (NAN: not run) */
  double ttft_p90, tpot_p90, attainment; /* of the simulation at `rate` */
  int same;                  /* deployments collapsed into this one (same shape, same estimate) */
} plan_srv_candidate;

/* What the enumeration varies, from the budget and the workload's scheduler. */
typedef struct {
  int gpus;
  int gpus_per_node;  /* prefill and decode pools keep their tensor parallelism in a node */
  bool chunked;       /* chunked prefill: max_tokens is the chunk size (512-16384) */
  bool fixed_tokens;  /* static batches: max_tokens plays no part */
  int min_tokens;     /* without chunking a prompt fits one iteration: max_tokens from here */
  bool pools;         /* prefill/decode pools too (plan_srv_pools_known) */
} plan_srv_space;

/* Whether the config knows the keys of disaggregated pools (serving.prefill.tp, ...). */
bool plan_srv_pools_known(void);
/* Every candidate of the space (GArray of plan_srv_candidate), in a fixed order. Aggregated:
 * TP and PP powers of two, every replica count that fits, max_batch 16-512, max_tokens as the
 * space says. Pools: TP of each within a node, PP 1, every prefill pool size with the decode
 * pool taking the rest, decode max_batch 16-512. */
void plan_srv_enumerate(const plan_srv_space *sp, GArray *out);
/* The candidate as --set overlays ("serving.tp=4", ...), NULL-terminated. */
char **plan_srv_overlay(const plan_srv_candidate *c);
/* "TP 4 x PP 1 x 16 replicas, batch 128, 8192 tokens" */
char *plan_srv_describe(const plan_srv_candidate *c);

typedef enum { PLAN_SRV_VLLM, PLAN_SRV_SGLANG, PLAN_SRV_TRTLLM, PLAN_SRV_NENGINES } plan_srv_engine;
/* The command line that starts the deployment with an engine: `vllm serve MODEL
 * --tensor-parallel-size 4 ...`, `python -m sglang.launch_server ...`, `trtllm-serve ...`. */
char *plan_srv_flags(const plan_srv_candidate *c, plan_srv_engine e, const char *model);
const char *plan_srv_engine_name(plan_srv_engine e);

typedef struct plan_srv_setup plan_srv_setup;
/* The search's base: the cluster sized to `gpus` (whole nodes, the last one maybe partly
 * used), the workload with `sets` and the SLA (ttft, tpot > 0 override serving.slo). Bad
 * input (no serving section, a request stream --find-max-rate cannot vary, a model no budget
 * of `gpus` holds) is CFG_ERROR_INPUT. */
plan_srv_setup *plan_srv_setup_new(const char *cluster, const char *workload, char *const *sets,
                                   int gpus, double ttft, double tpot, GError **err);
void plan_srv_setup_free(plan_srv_setup *s);
const plan_srv_space *plan_srv_setup_space(const plan_srv_setup *s);
const cfg_workload *plan_srv_setup_workload(const plan_srv_setup *s);
/* What `dlsim serve --set` needs to run the candidate at its confirmed rate: node.count, the
 * user's overlays, the SLA, the candidate's, serving.requests.rate. NULL-terminated. */
char **plan_srv_rerun_sets(const plan_srv_setup *s, const plan_srv_candidate *c);

typedef struct {
  long candidates, valid, fits;
  GArray *kept;          /* plan_srv_candidate that fit and meet the SLA at some rate */
  double elapsed_s;
} plan_srv_result;

/* Enumerates, loads and estimates this shard's candidates (index % nshards == shard). */
bool plan_srv_screen(plan_srv_setup *s, int shard, int nshards, plan_srv_result *out,
                     GError **err);
/* Appends another shard's counts and candidates. */
void plan_srv_merge(plan_srv_result *into, const plan_srv_result *other);
/* Sorts by estimated goodput per GPU, collapses the same shape with the same estimate into one
 * row, keeps `rows`, confirms the first `top_k` with srv_find_max_rate and ranks those by the
 * confirmed figure. */
bool plan_srv_rank(plan_srv_setup *s, plan_srv_result *r, int rows, int top_k, GError **err);
void plan_srv_result_clear(plan_srv_result *r);
/* The closed-form estimate alone (tests): the highest rate meeting the SLA, 0 if none. */
bool plan_srv_estimate(plan_srv_setup *s, plan_srv_candidate *c, GError **err);
/* srv_find_max_rate on the candidate, rounded down to 3 digits and re-checked at that rate. */
bool plan_srv_confirm(plan_srv_setup *s, plan_srv_candidate *c, GError **err);
