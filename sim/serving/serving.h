/* serving: LLM inference serving on the cluster, request by request.
 *
 * A replica (tp x pp GPUs holding one copy of the model) runs engine iterations: each takes a
 * batch of sequences, some in prefill (prompt tokens, compute-bound, attention quadratic in the
 * prompt), most in decode (one token each, memory-bound: every weight and the batch's KV cache
 * are read once per iteration). The cost of an iteration comes from the same kernels as the
 * training model (GEMMs of the transformer layer, attention, elementwise) timed by the hardware
 * cost model, plus the tensor-parallel all-reduces of its size (latency-bound at decode sizes)
 * and the pipeline's sends. A scheduler (static, continuous, chunked prefill, temporal fusion)
 * picks each iteration's batch under a token budget, a batch limit and the paged KV cache;
 * requests (Poisson / gamma arrivals, closed-loop clients, or a replayed trace) reach replicas
 * through a router. The loop is dlsim's own event queue, not SimGrid: iteration-level
 * scheduling is a sequential decision per replica and replicas share no network traffic, so a
 * heap of arrivals and iteration ends is exact and simulates thousands of requests in well
 * under a second. */
#ifndef DLSIM_SERVING_H
#define DLSIM_SERVING_H

#include "budget/budget.h"
#include "config/config.h"
#include "hardware/hardware.h"
#include "uncertainty/uncertainty.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* ---- the cost of one iteration ------------------------------------------------------------ */

/* What an iteration computes, summed over its sequences: q new tokens of a sequence whose KV
 * cache already holds c tokens. */
typedef struct {
  int seqs;              /* sequences in the batch */
  double tokens;         /* sum of q: rows of every GEMM */
  double prefill_tokens; /* sum of q over sequences in prefill (q > 1, or a first chunk) */
  double prefill_attn;   /* sum over prefill of q (c + (q + 1) / 2): causal attention pairs */
  double prefill_kv;     /* sum over prefill of c + q: KV tokens the prefill attention reads */
  int decodes;           /* sequences decoding one token */
  double decode_kv;      /* sum over decodes of c + 1: KV tokens decode attention reads */
  int samples;           /* positions whose logits are computed this iteration */
  /* speculative decoding: decodes that verify k proposed tokens (k + 1 queries each, counted
   * in tokens and decodes) */
  int verifies;
  double verify_kv;      /* sum over them of c + 1: the KV the draft reads per proposal */
  double verify_pairs;   /* query-key pairs of their extra queries beyond decode_kv */
} srv_batch;

typedef struct srv_cost srv_cost;

typedef struct {
  double total;     /* seconds from the first stage's start to the last stage's end */
  double period;    /* seconds the first stage is busy (a new iteration may enter then) */
  double gemm, attention, other, comm, host; /* parts of `total` */
  double draft;     /* speculative decoding: the draft model's (or MTP head's) passes, a part too */
} srv_time;

/* The cost model of one replica of the workload's model on the cluster. */
bool srv_cost_new(const cfg_cluster *c, const cfg_workload *w, srv_cost **out, GError **err);
void srv_cost_free(srv_cost *cost);
void srv_iteration_time(srv_cost *cost, const srv_batch *b, srv_time *out);
/* FLOPs of the GEMMs of one dense layer on one GPU over `tokens` tokens (the same shapes as the
 * training model's layer: a test holds the two equal). */
double srv_layer_gemm_flops(const srv_cost *cost, double tokens);
/* Bytes of the KV cache of one token on one GPU (the most loaded pipeline stage). */
double srv_kv_bytes_per_token(const srv_cost *cost);
/* Weight bytes one GPU reads per decode iteration at batch 1 (the most loaded stage). */
double srv_weight_bytes(const srv_cost *cost);
/* One MoE layer of an iteration under wide expert parallelism (serving.ep > 1), per GPU. */
typedef struct {
  cfg_a2a kind;             /* serving.a2a_prefill with prefill tokens, else a2a_decode */
  int ep, nodes;
  double tokens;            /* each GPU dispatches: its DP rank's tokens / attention TP */
  double load;              /* the busiest GPU's token copies over the mean */
  double bytes[2], link[2]; /* dispatch, combine: bytes the all-to-all runs, over the
                             * bottleneck link (wl_moe_a2a) */
  double time[2];           /* dispatch, combine: seconds */
  double experts;           /* the routed experts' GEMMs on the busiest GPU */
  double compute;           /* the layer without its all-to-alls */
} srv_ep_layer;
/* The MoE layer of a batch (one DP rank's, every rank alike); false when ep is 1. */
bool srv_ep_layer_of(srv_cost *cost, const srv_batch *b, srv_ep_layer *out);
/* What wide EP does at full load: a decode iteration of serving.max_batch sequences at the
 * requests' mean context and a prefill iteration of serving.max_tokens prompt tokens, on one DP
 * rank (every rank alike; the set-ups of the published per-node throughputs). */
typedef struct {
  double batch;          /* sequences (decode) or tokens (prefill) per DP rank */
  double kv;             /* decode: KV tokens each sequence reads; prefill: the prompt */
  double iteration;      /* seconds */
  double comm;           /* seconds of communication left exposed */
  double tokens_per_s_node; /* tokens generated (decode) or prefilled (prefill) per node */
  srv_ep_layer layer;    /* one MoE layer over the whole batch, without the overlap */
} srv_ep_phase;
typedef struct {
  bool on;               /* serving.ep > 1 */
  srv_ep_phase decode, prefill;
} srv_ep_summary;
void srv_ep_summary_of(srv_cost *cost, const cfg_cluster *c, const cfg_workload *w,
                       double prompt, double output, srv_ep_summary *out);

/* Data-parallel attention ranks per replica (ep / tp; 1 without expert parallelism), each
 * scheduled as its own engine with its own batch and KV cache. */
int srv_attention_dp(const cfg_serving *s);
/* GPUs of one replica. */
int srv_replica_gpus(const cfg_serving *s);
/* Speculative decoding's share of one GPU's memory: the draft model's (or the MTP head's)
 * weights, and its KV per token, which the engines keep in the same blocks (0 without). */
double srv_spec_weight_bytes(const srv_cost *cost);
double srv_spec_kv_bytes_per_token(const srv_cost *cost);
/* Tokens a verify step yields on average: 1 + sum over positions i of a_1 ... a_i, which for
 * one rate a is (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023). */
double srv_spec_expected_tokens(const cfg_speculative *sp);

/* ---- memory: the KV cache a replica holds ------------------------------------------------- */

typedef struct {
  double memory;       /* GPU memory */
  double usable;       /* x serving.gpu_memory_utilization */
  double weights, activations, other; /* per GPU, the most loaded stage */
  double kv_bytes;     /* what is left for the KV cache */
  double kv_per_token; /* bytes per token */
  int blocks;          /* KV blocks of serving.block_size tokens */
  int block_size;
  double tokens;       /* blocks x block_size */
  bool measured;       /* serving.kv_blocks gave the number */
} srv_capacity;

bool srv_capacity_of(const cfg_cluster *c, const cfg_workload *w, const srv_cost *cost,
                     srv_capacity *out, GError **err);

/* ---- a simulation ------------------------------------------------------------------------- */

typedef struct {
  double mean, p50, p90, p99, max;
  int n;
} srv_dist;

typedef struct {
  double t, batch, kv_occupancy, waiting; /* a bucket of the timeline: means over it */
} srv_sample;

typedef struct {
  int lane, replica;
  double start, end;
  int seqs, prefill_seqs;
  double tokens, prefill_tokens, kv_occupancy;
} srv_iter_record;

typedef struct {
  int id, replica;
  double arrival, admitted, first_token, finish; /* engine times (no request_overhead) */
  int prompt, output, preemptions;
  /* disaggregated: the decode replica (-1: none), when the prompt's KV was computed, and when
   * its transfer to the decode replica started and ended (NAN: it did not move) */
  int decode_replica;
  double prefill_end, transfer_start, transfer_end;
} srv_request_record;

/* The prefix cache over a run, all replicas. */
typedef struct {
  bool on;
  int host_blocks;                /* the host tier's blocks per replica (0: none) */
  double prompt_tokens;           /* of first admissions */
  double gpu_hit_tokens, host_hit_tokens; /* of those, found cached in either tier */
  long evicted, offloaded;        /* blocks out of GPU memory; of those, kept in host memory */
  double host_load_s;             /* seconds of copies back from host memory */
} srv_prefix_stats;

/* Speculative decoding over a run. */
typedef struct {
  bool on, mtp;                   /* mtp: the model's head, else a draft model */
  int tokens;                     /* proposed per step */
  double expected;                /* tokens per verify step, srv_spec_expected_tokens */
  long steps;                     /* verify steps */
  double drawn;                   /* tokens they yielded (before requests' ends cut them) */
  double draft_s;                 /* seconds of proposer passes, summed over iterations */
  double busy_s;                  /* seconds of all iterations, for its share */
  double weights, kv_per_token;   /* the proposer's memory per GPU */
} srv_spec_stats;
/* One pool of a disaggregated deployment, as it ran. */
typedef struct {
  const char *name;          /* "prefill", "decode" */
  int replicas, tp, pp, gpus, first_gpu, max_batch, max_tokens;
  srv_capacity capacity;
  double utilization;        /* time its replicas ran iterations / (replicas x duration) */
  double batch_mean;         /* sequences per iteration, time-weighted */
  long iterations;
} srv_pool_result;

/* The KV transfers and the parts of TTFT of a disaggregated run. */
typedef struct {
  int transfers, network;    /* requests whose KV moved; of them, across nodes */
  double bytes_mean, bytes_total;
  srv_dist time;             /* start to arrival of the last byte, route latency included */
  /* means over every request, seconds: arrival to its first iteration, that iteration to the
   * prompt's last, waiting for room on the decode replica, the transfer, and the API server's
   * time (serving.request_overhead); they add up to the mean TTFT */
  double queue, prefill, decode_wait, transfer, overhead;
  int direct;                /* requests prefilled by a decode replica (direct_decode_below) */
} srv_disagg_result;

typedef struct {
  /* the setup */
  const cfg_cluster *cluster;
  const cfg_workload *workload;
  srv_capacity capacity;
  double offered_rate;       /* requests/s offered (0: closed loop or burst) */
  int requests;              /* simulated */
  /* latencies, seconds, as a client sees them (with serving.request_overhead) */
  srv_dist ttft, tbt, tpot, e2e;
  double duration;           /* first arrival to last completion */
  double output_tokens_per_s, total_tokens_per_s, requests_per_s;
  double slo_attainment;     /* fraction of requests with TTFT and TPOT within serving.slo */
  double goodput_rps;        /* requests/s that met the SLO */
  bool saturated;            /* served rate fell below 90 % of the offered rate */
  double batch_mean, batch_max, kv_mean, kv_max; /* time-weighted over busy iterations */
  long iterations, preemptions;
  double prompt_tokens_mean, output_tokens_mean;
  GArray *timeline;          /* srv_sample */
  GArray *iters;             /* srv_iter_record, with options.trace */
  GArray *reqs;              /* srv_request_record, with options.trace */
  double wall_time;          /* seconds the simulator took */
  srv_prefix_stats prefix;
  srv_spec_stats spec;
  /* the iterations' time by part, summed over every iteration of every replica (and pool):
   * which term of the cost model the run spends its time in (period unused) */
  srv_time parts;
  /* 80 % intervals (srv_result_bracket): mean TTFT, mean TBT, output tokens/s; cases 0: none */
  double ttft_interval[2], tbt_interval[2], throughput_interval[2];
  int interval_cases[3];
  srv_ep_summary ep;         /* wide expert parallelism at full load (ep.on: serving.ep > 1) */
  /* disaggregated deployments (serving.prefill and serving.decode); npools 0 otherwise */
  int npools;
  srv_pool_result pools[2];
  srv_disagg_result disagg;
} srv_result;

typedef struct {
  bool trace;    /* keep every iteration and request for a Chrome trace */
  double rate;   /* > 0: overrides serving.requests.rate */
  const bud_limits *budget; /* NULL: the defaults */
} srv_options;

/* Runs the serving workload (its `serving:` section) on the cluster. Bad input (a request
 * longer than the KV cache or max_model_len, a model that leaves no room for KV) is
 * CFG_ERROR_INPUT. */
bool srv_simulate(const cfg_cluster *c, const cfg_workload *w, const srv_options *o,
                  srv_result *out, GError **err);
void srv_result_clear(srv_result *r);

/* The highest Poisson rate at which serving.slo.attainment of the requests meet the SLO. */
typedef struct {
  double max_rate;  /* requests/s (0: not even the lowest rate tried) */
  srv_result at;    /* the run at max_rate */
  int runs;
} srv_max_rate;
bool srv_find_max_rate(const cfg_cluster *c, const cfg_workload *w, srv_max_rate *out,
                       GError **err);
void srv_max_rate_clear(srv_max_rate *m);

/* ---- report ------------------------------------------------------------------------------ */

void srv_result_text(FILE *out, const srv_result *r);
/* Brackets mean TTFT, mean TBT and output throughput with the serve.* bands of `t`. */
void srv_result_bracket(srv_result *r, const unc_table *t);
/* The keys of SCHEMA.md (ttft_s, tbt_s, e2e_s, output_tokens_per_s, total_tokens_per_s,
 * requests_per_s, slo_attainment) and more. */
cJSON *srv_result_json(const srv_result *r);
/* One process per replica (an iterations row per lane, batch and KV counters) and one row per
 * request (queued, prefill, decode). */
bool srv_trace_write(const char *path, const srv_result *r, GError **err);

#endif
