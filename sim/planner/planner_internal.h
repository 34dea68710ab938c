/* Private to the planner. */
#ifndef DLSIM_PLANNER_INTERNAL_H
#define DLSIM_PLANNER_INTERNAL_H

#include "planner/planner.h"

#include "collectives/collectives.h"
#include "engine/engine.h"
#include "hardware/hardware.h"
#include "run/run.h"
#include "serving/serving.h"
#include "workloads/workloads.h"

/* The layer templates of one shard shape, and an evaluator of their times. */
typedef struct {
  wl_skeleton sk;
  eng_evaluator *eval;
} plan_skel;

struct plan_setup {
  cfg_cluster *c;
  cfg_workload *w;        /* the base workload */
  hw_cluster *hw;
  int gpus, batch;
  eng_options opt;
  coll_planner *pl;
  coll_runtime *runtime; /* collectives.runtime, which pl and opt use */
  GHashTable *models;     /* shard key -> wl_model */
  GHashTable *skels;      /* shard key (+ expert group stride) -> plan_skel */
  GHashTable *colls;      /* plan_coll_entry */
  GHashTable *groups;     /* group key -> collective planner id */
  GHashTable *crowds;     /* plan_crowd_key -> coll_crowd: a group's plan beside its siblings */
  sim_cache *runs;        /* what the refined layouts' analytic runs share, made on first use */
};

bool plan_valid(const plan_setup *s, const plan_layout *l);
const wl_model *plan_model(plan_setup *s, const cfg_workload *w, const plan_layout *l);
const plan_skel *plan_skeleton(plan_setup *s, const cfg_workload *w, const plan_layout *l,
                               const wl_model *m);
GHashTable *plan_coll_cache_new(void);
GHashTable *plan_crowd_cache_new(void);
/* A collective over the ranks {a s1 + b s2 : a < n1, b < n2}, beside the `nsib` - 1 groups
 * translated by k ssib (0 < k < nsib) that run it at the same moment (the tensor-parallel
 * siblings of a data-parallel group). */
double plan_coll(plan_setup *s, prog_coll op, int n1, int s1, int n2, int s2, int nsib, int ssib,
                 double bytes);

/* Runs the candidate's layout on an engine: the analytic one fills its step and breakdown (and
 * with `whole` its run estimate), the DES its des_step_time_s. */
bool plan_simulate(plan_setup *s, const plan_options *po, plan_candidate *c, eng_kind kind,
                   bool whole, GError **err);
/* Confirms the first o->top_k of `kept` with the DES, o->jobs at a time (confirm.c). */
bool plan_confirm(plan_setup *s, const plan_options *o, GArray *kept, GError **err);

/* Closed-form step time of a valid, fitting layout; fills the candidate's figures. */
void plan_estimate(plan_setup *s, const cfg_workload *w, const plan_layout *l, const wl_model *m,
                   plan_candidate *c);

/* ---- serving (serve_estimate.c): a deployment as the closed form sees it ---------------- */

typedef enum { PLAN_SRV_BOTH, PLAN_SRV_PREFILL, PLAN_SRV_DECODE } plan_srv_role;

typedef struct {
  srv_cost *cost;       /* one replica of the pool's shape */
  double kv_tokens;     /* KV cache of a replica */
  plan_srv_role role;
  cfg_scheduler scheduler;
  int lanes, replicas, max_batch, max_tokens;
} plan_srv_pool_model;

typedef struct {
  double prompt, computed, output; /* tokens per request, means (computed: not from a cache) */
  double ttft, tpot, overhead;     /* the SLA, and the time per request outside the engine */
  double transfer_s;               /* disaggregated: moving one request's KV between pools */
  int npools;
  plan_srv_pool_model pool[PLAN_SRV_MAX_POOLS];
} plan_srv_model;

/* The highest rate (requests/s) at which the deployment meets the SLA by the closed form, on a
 * geometric grid, searched from `start` (requests/s): the candidate's alone, never what was
 * screened before it, so that shards and MPI ranks find the same; 0 if none. `ttft` and `tpot`
 * get the estimate's p90 at that rate. */
double plan_srv_max_rate(const plan_srv_model *m, double start, double *ttft, double *tpot);

#endif
