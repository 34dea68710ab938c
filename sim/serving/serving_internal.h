/* Private to the serving module. */
#ifndef DLSIM_SERVING_INTERNAL_H
#define DLSIM_SERVING_INTERNAL_H

#include "collectives/collectives.h"
#include "serving/serving.h"

/* ---- cost model internals used by the capacity ---------------------------------------------- */

/* Weights resident on one GPU of the most loaded pipeline stage. */
double srv_stage_weight_bytes(const srv_cost *c, const cfg_model *m);
/* The peak of a forward pass over `tokens` tokens on one GPU (the MLP's widest intermediate
 * with its input alive) plus the fp32 logits of `seqs` sequences. */
double srv_activation_bytes(const srv_cost *c, double tokens, double seqs);
/* Copying `bytes` within one GPU's memory (read and write). */
double srv_copy_time(const srv_cost *c, double bytes);

/* ---- the engines' own tensor-parallel all-reduce (serving.custom_allreduce) ------------------ */

typedef enum { SRV_AR_NCCL, SRV_AR_ONESHOT, SRV_AR_TWOSHOT } srv_ar_kind;

/* Which kernel the engine's size policy picks for an all-reduce of `bytes` over n GPUs. */
srv_ar_kind srv_ar_choose(const cfg_custom_ar *a, int n, double bytes);
/* A one-shot or two-shot all-reduce of `bytes` over the first n GPUs of a node. */
double srv_ar_time(const hw_cluster *hw, srv_ar_kind kind, int n, double bytes);

/* ---- wide expert parallelism (serving.ep > 1) ------------------------------------------------ */

/* The expert-parallel group of a replica: its ep GPUs hold experts / ep whole experts each and
 * are ep / tp attention data-parallel ranks of tp GPUs. Dispatch and combine are timed with
 * the models of dlsim moe (workloads: wl_moe_a2a's bytes, wl_moe_load's routing imbalance;
 * collectives: the all-to-all over the group's GPUs). */
typedef struct {
  int n;              /* ep (1: experts split by tensor parallelism, nothing here applies) */
  int nodes;          /* nodes the group spans */
  double experts;     /* experts per GPU */
  int *ranks;         /* GPUs 0..ep-1 */
  cfg_workload a2a;   /* the workload as wl_moe_a2a reads it: dispatch dtype, kernels */
  cfg_a2a prefill, decode;
  bool tbo;           /* serving.two_batch_overlap */
  double overlap;     /* serving.tbo_overlap */
  const cfg_moe *routing;
  hw_cluster *hw;
  coll_planner *planner;  /* NCCL's all-to-all (shared with the rest of the cost model) */
  coll_planner *kernels;  /* DeepEP's: no NCCL send/recv chunk pipeline to wait for */
  coll_runtime *kernels_rt;
  GHashTable *memo;   /* routing load by tokens, all-to-all time by kernels and bytes */
} srv_ep;

bool srv_ep_init(srv_ep *e, const cfg_workload *w, hw_cluster *hw, coll_planner *pl,
                 GError **err);
void srv_ep_clear(srv_ep *e);
/* The busiest GPU's token copies over the mean when every GPU dispatches `tokens`. */
double srv_ep_load(srv_ep *e, double tokens);
/* Dispatch and combine of one MoE layer when every GPU dispatches `tokens` (into `out`:
 * kernels, load, bytes and times). */
void srv_ep_a2a(srv_ep *e, bool prefill, double tokens, srv_ep_layer *out);
/* Two micro-batches through `layers` MoE layers, each layer `compute` seconds of one
 * micro-batch's compute and `a2a` of its all-to-alls on another stream: a two-machine flow
 * shop of 2 x layers identical jobs, in which only `overlap` of the shorter part hides under
 * the longer (1: an ideal flow shop). */
double srv_tbo_time(int layers, double compute, double a2a, double overlap);

/* The report's wide-EP lines and JSON object (nothing when serving.ep is 1). */
void srv_ep_text(FILE *out, const srv_result *r);
cJSON *srv_ep_json(const srv_result *r);

/* ---- requests ---------------------------------------------------------------------------- */

/* SRV_MOVING: prefilled by a prefill replica, its KV on the way to a decode replica */
typedef enum { SRV_PENDING, SRV_WAITING, SRV_RUNNING, SRV_DONE, SRV_MOVING } srv_state;

typedef struct srv_request {
  int id;
  double arrival;      /* at the engine; NAN until a closed-loop client sends it */
  int prompt, output;  /* tokens */
  int group;           /* shared-prefix group, or -1 */
  int conv;            /* conversation (its first request's id): turns share its tokens */
  int next_turn;       /* the request of the conversation's next turn, or -1 */
  /* progress */
  srv_state state;
  int replica, lane;
  int known;           /* prompt + tokens generated so far */
  int ctx;             /* tokens whose KV is in the cache */
  int generated;
  int blocks;          /* KV blocks this request holds (shared prefix blocks excluded) */
  int shared_blocks;   /* its first blocks, in the prefix cache (shared, not its own) */
  int host_blocks;     /* of those, what its admission brings back from host memory */
  int reserved;        /* blocks reserved at admission (preemption: none, static, fused) */
  int slot;            /* fused: position in the lane's buffer */
  int preemptions;
  double first_token, last_token, finish;
  double admitted;     /* first admission, for the trace */
} srv_request;

/* The request stream of a run, in arrival order (closed loop: in sending order). */
typedef struct {
  srv_request *reqs;
  int n;
  double offered_rate; /* requests/s, 0 when not open-loop */
  int concurrency;     /* closed loop: clients */
} srv_stream;

bool srv_stream_build(const cfg_workload *w, double rate, srv_stream *out, GError **err);
void srv_stream_clear(srv_stream *s);

/* ---- histogram of inter-token gaps ---------------------------------------------------------- */

/* Log-spaced bins (0.1 % wide) from 1 us to 1e4 s: percentiles of millions of gaps in 100 KB. */
typedef struct {
  guint32 *bins;
  int nbins;
  long n;
  double sum, max;
  double last_x; /* the sequences of one batch see the same gap: its bin is reused */
  int last_bin;
} srv_hist;

void srv_hist_init(srv_hist *h);
void srv_hist_add(srv_hist *h, double x);
double srv_hist_quantile(const srv_hist *h, double q);
void srv_hist_clear(srv_hist *h);
/* mean and percentiles of `n` values (sorted in place) */
void srv_dist_of(double *v, int n, srv_dist *out);

/* ---- the engine: replicas, lanes and their schedulers ---------------------------------------- */

typedef struct srv_sim srv_sim;

/* A lane runs one iteration at a time. A replica has one lane per pipeline stage (vLLM's
 * virtual engines): while one lane's iteration is in stage k, another's may be in stage 0. */
typedef struct {
  int id, replica;
  GQueue waiting;      /* srv_request* */
  GPtrArray *running;  /* srv_request*, in admission order */
  bool busy;
  double pending_cost; /* seconds owed to the next iteration (fused: buffer reordering) */
  /* the iteration in flight */
  GArray *batch;       /* srv_sched_item */
  srv_batch shape;     /* what it costs (static batches: padded) */
  double iter_start;
  /* static batching: the batch runs until its longest request is done */
  int static_steps;
  int static_ctx;      /* the padded context of every slot */
  GPtrArray *slots;    /* fused: requests by buffer slot */
} srv_lane;

typedef struct {
  srv_request *req;
  int q;               /* tokens computed for it this iteration */
  bool verify;         /* a speculative step: q - 1 proposals checked, some kept */
} srv_sched_item;

typedef struct {
  int id;
  srv_lane *lanes;
  int nlanes;
  int free_blocks, total_blocks;
  double stage0_free;  /* when the first pipeline stage can take the next iteration */
  struct srv_prefix_cache *cache; /* NULL: no prefix caching */
  int outstanding;     /* requests routed here and not done */
} srv_replica;

/* The scheduler plans iteration N + 1 while the GPUs run N (serving.async_scheduling). */
bool srv_schedules_ahead(const cfg_serving *s);
/* Plans the next iteration of a lane into lane->batch (empty: nothing to do). */
void srv_schedule(srv_sim *s, srv_lane *lane);
/* Frees the KV of a request (finished or preempted). */
void srv_release(srv_sim *s, srv_replica *rep, srv_request *r);
srv_replica *srv_replica_of(srv_sim *s, const srv_lane *lane);

/* ---- the prefix cache (prefix.c) ------------------------------------------------------------ */

/* Full KV blocks of prompts and answers, kept after their request in a prefix tree of blocks
 * (a block is named by its tokens' source and its position, so equal names mean equal
 * prefixes), shared by the requests that use them; idle ones are evicted least recently used
 * first, to host memory when serving.kv_offload has room. rep->free_blocks counts idle cached
 * blocks as free: they are taken back, evicted, when nothing else is. */
typedef struct srv_prefix_cache srv_prefix_cache;

srv_prefix_cache *srv_prefix_new(int host_blocks);
void srv_prefix_free(srv_prefix_cache *c);
/* Takes `n` free blocks of the replica, evicting idle cached ones if need be. */
void srv_take_blocks(srv_sim *s, srv_replica *rep, int n);
/* A request about to be admitted with nothing computed uses the cached blocks its prompt
 * starts with (all but its last token); _unuse undoes it when admission fails. */
void srv_prefix_use(srv_sim *s, srv_replica *rep, srv_request *r);
void srv_prefix_unuse(srv_sim *s, srv_replica *rep, srv_request *r);
/* Admitted: counts its hits, and charges the copy from host memory to `lane`. */
void srv_prefix_admitted(srv_sim *s, srv_lane *lane, srv_request *r, bool first);
/* Its blocks filled by this iteration join the cache. */
void srv_prefix_publish(srv_sim *s, srv_replica *rep, srv_request *r);
/* Lets go of its cached blocks (finished or preempted); _drop, of its first `n` only (a
 * disaggregated prompt's, once its KV has moved). */
void srv_prefix_release(srv_sim *s, srv_replica *rep, srv_request *r);
void srv_prefix_drop(srv_sim *s, srv_replica *rep, const srv_request *r, int n);
/* How many of the blocks its prompt starts with the replica holds in GPU memory. */
int srv_prefix_held(const srv_sim *s, const srv_replica *rep, const srv_request *r);
/* The replica's blocks in the cache, idle (evictable) ones only. */
int srv_prefix_idle(const srv_replica *rep);

/* ---- speculative decoding (speculative.c) ---------------------------------------------------- */

/* Tokens one verify step yields: 1 + the proposals accepted in a row, drawn from `g`. */
int srv_spec_draw(const cfg_speculative *sp, GRand *g);

struct srv_sim {
  const cfg_serving *cfg;
  srv_cost *cost;
  srv_capacity cap;
  srv_replica *replicas;
  int nreplicas;
  int next_rr;         /* round-robin router */
  double now;
  long preemptions;
  srv_prefix_stats prefix;
  GRand *spec_rng;     /* speculative decoding's acceptances (NULL: none) */
  srv_spec_stats spec;
  srv_time parts;      /* summed over its iterations */
};

/* Blocks a request of `tokens` tokens needs. */
int srv_blocks_for(const srv_sim *s, double tokens);

/* ---- KV transfers of disaggregated serving (flows.c) ------------------------------------------ */

/* Flows between GPUs over the hardware module's links, sharing each link max-min fairly. */
typedef struct srv_flows srv_flows;
srv_flows *srv_flows_new(const hw_cluster *hw);
void srv_flows_free(srv_flows *f);
/* Starts `bytes` from GPU src to GPU dst at `now`; returns the route's latency (the caller pays
 * it after the bytes). `owner` comes back from srv_flows_advance when the flow ends. */
double srv_flows_start(srv_flows *f, double now, int src, int dst, double bytes, int owner);
/* When the next flow ends at the current rates (INFINITY: none in flight). */
double srv_flows_next(const srv_flows *f);
/* Moves to `now`, appends the owners of the flows that ended to `ended` (int) and shares the
 * links again among the rest. */
void srv_flows_advance(srv_flows *f, double now, GArray *ended);
int srv_flows_active(const srv_flows *f);

#endif
