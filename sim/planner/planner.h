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
  int refine;           /* distinct layouts re-simulated with the analytic engine */
  bool tokens_per_gpu;  /* objective: throughput per GPU (else step time) */
  plan_run_objective by_run; /* rank the refined layouts by their run estimate instead */
  int shard, nshards;   /* this process screens candidates with index % nshards == shard */
  void (*progress)(double fraction, void *ctx);
  void *progress_ctx;
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
