/* workloads: models (dense transformer, CNN) and parallel strategies, expanded into a program.
 *
 * A model is first expanded into layers of kernels for one micro-batch on one GPU (wl_model);
 * a strategy then lays those kernels, the communication and the memory events out per rank. */
#ifndef DLSIM_WORKLOADS_H
#define DLSIM_WORKLOADS_H

#include "config/config.h"
#include "hardware/hardware.h"
#include "program/program.h"

/* What a kernel does in its layer. The parallel strategies place their collectives by it
 * (a column-parallel GEMM is gathered before and reduced after in backward, a row-parallel
 * one reduced after, ...), never by the kernel's name, which is only for people. */
typedef enum {
  WL_ROLE_OTHER,
  WL_ROLE_NORM,        /* layer or batch norm */
  WL_ROLE_RESIDUAL,    /* residual add (with dropout) */
  WL_ROLE_ACT,         /* activation of a dense MLP or of the shared experts, a CNN's ReLU */
  WL_ROLE_LOOKUP,      /* vocabulary-parallel embedding lookup: its output is reduced */
  WL_ROLE_QKV,         /* column-parallel input projection of attention (MLA: q_down) */
  WL_ROLE_MLA_DOWN,    /* MLA's key/value down-projection (whole on every GPU) */
  WL_ROLE_MLA_UP,      /* MLA's up-projections (split by heads) */
  WL_ROLE_ATTENTION,   /* the fused attention core (FlashAttention); with context parallelism
                        * the ring's first step (forward) or last (backward) */
  WL_ROLE_RING_STEP,   /* the ring attention's other steps and the merges of their results */
  WL_ROLE_SCORES,      /* unfused attention: Q K^T, softmax and dropout, P V */
  WL_ROLE_SOFTMAX,
  WL_ROLE_CONTEXT,
  WL_ROLE_ATTN_OUT,    /* row-parallel output projection of attention */
  WL_ROLE_MLP_UP,      /* column-parallel */
  WL_ROLE_MLP_DOWN,    /* row-parallel */
  WL_ROLE_ROUTER,      /* MoE gate GEMM and its top-k */
  WL_ROLE_ROUTER_TOPK,
  WL_ROLE_PERMUTE,     /* token copies gathered by expert: the dispatch all-to-all follows */
  WL_ROLE_SHARED_UP,   /* shared experts: run on local tokens beside the dispatch */
  WL_ROLE_SHARED_DOWN,
  WL_ROLE_EXPERT_UP,   /* routed experts on the copies this GPU received */
  WL_ROLE_EXPERT_ACT,
  WL_ROLE_EXPERT_DOWN, /* the combine all-to-all follows */
  WL_ROLE_UNPERMUTE,   /* weighted sum of the copies, back in token order */
  WL_ROLE_LOGITS,      /* column-parallel output layer over the vocabulary */
  WL_ROLE_LOSS,        /* cross entropy over the vocabulary shards */
  WL_ROLE_CONV,
  WL_ROLE_POOL,
  WL_ROLE_LINEAR,      /* a classifier head that no strategy splits */
} wl_role;

/* Which pass a kernel belongs to: forward, forward run again in backward by activation
 * recomputation, a GEMM's input gradient or weight gradient, or another backward kernel. */
typedef enum {
  WL_PHASE_FORWARD,
  WL_PHASE_RECOMPUTE,
  WL_PHASE_DGRAD,
  WL_PHASE_WGRAD,
  WL_PHASE_BACKWARD,
} wl_phase;

typedef struct {
  const char *name; /* for traces and reports only */
  wl_role role;
  wl_phase phase;
  cfg_kernel_class kclass;
  cfg_dtype dtype; /* what it computes in: under 8-bit training only the linear layers' GEMMs */
  double flops, bytes;
  double inner;   /* a GEMM's reduction dimension K (its efficiency depends on it), or 0 */
  double rows, cols; /* a GEMM's output M x N (its tiles and waves), or 0 */
  cfg_attn_shape attn; /* a fused attention kernel's shape (keys 0: none) */
  bool hostless;  /* launched from inside another op's C++ (a deterministic fill) */
  uint8_t split_rows, split_cols; /* a GEMM run in pieces beside its TP communication */
  uint8_t sms_held; /* SMs that communication holds meanwhile (hw_kernel's) */
} wl_kernel;

/* The forward work of a kernel: its forward pass, or that pass recomputed in backward. */
static inline bool wl_is_forward(const wl_kernel *k)
{
  return k->phase == WL_PHASE_FORWARD || k->phase == WL_PHASE_RECOMPUTE;
}

typedef struct {
  const char *name;
  double params;      /* parameters held by one GPU */
  GArray *fwd, *bwd;  /* wl_kernel */
  double saved_bytes; /* activations kept from forward to backward, one micro-batch */
  double model_flops; /* forward FLOPs by the model-FLOPs convention (MFU) */
  double expert_params; /* of `params`, the routed experts' (sharded by ZeRO over the
                         * expert-data-parallel group, not the data-parallel one) */
  bool moe;           /* a mixture-of-experts block */
  double recompute_flops; /* forward FLOPs run again by recomputation (same convention, HFU) */
} wl_layer;

typedef struct {
  GPtrArray *layers; /* wl_layer*, forward order: embedding, blocks..., output */
  double params;     /* sum over layers */
  double samples;    /* per micro-batch */
  double tokens;     /* per micro-batch */
  int blocks;        /* repeated layers between the first and the last (transformer blocks) */
  double recompute_peak; /* activations alive at once while one block is recomputed */
  double ring_peak;      /* PyTorch's CP ring's buffers while a block's attention runs backward */
  double loss_peak;      /* the loss's gradients alive at once at the start of backward */
  double moe_tokens;     /* tokens one GPU routes through a MoE block (0: no MoE) */
  double moe_copies;     /* ... and the copies it dispatches (tokens x top_k) */
  double moe_load;       /* the busiest expert-parallel rank's copies over the mean */
  double moe_dropped;    /* fraction of copies dropped at expert capacity */
  cfg_dtype dtype;
  bool fp8_current;  /* per-tensor fp8 with current scaling (training.fp8_recipe) */
  GStringChunk *strings;
} wl_model;

/* How one GPU holds the model: its tensor-parallel share and what it keeps for backward. */
typedef struct {
  int micro_batch;
  int tp;
  int cp;                  /* context parallelism: this GPU's 1/cp of the sequence */
  cfg_cp_exchange cp_exchange; /* allgather: PyTorch's context_parallel (its fp32 merges) */
  bool sp;                 /* sequence parallelism */
  bool tp_overlap;         /* its collectives pipelined with the GEMMs (parallel.tp_comm_overlap) */
  cfg_recompute recompute;
  int ep;                  /* expert parallelism: this GPU holds experts / ep experts */
  double moe_load;         /* token copies the busiest expert-parallel rank runs, over the mean
                            * (1: perfectly balanced routing) */
  double moe_dropped;      /* fraction of token copies dropped at expert capacity */
  int checks_dp;           /* data-parallel ranks Megatron-LM's --test-mode checks gather over;
                            * 1 without them, so that models at other dp stay one cached model */
} wl_shard;

wl_shard wl_shard_of(const cfg_workload *w);

/* Routing of a MoE layer over `ep` ranks that route `tokens` tokens each: the load of the
 * busiest rank over the mean (the slowest rank sets the layer's time), and the fraction of
 * token copies dropped at expert capacity. Uniform, Zipf or a measured per-expert histogram;
 * experts are placed round-robin over the ranks; a sampling term (routing is random per
 * token) adds the expected maximum of ep binomial loads. */
bool wl_moe_load(const cfg_moe *m, int ep, double tokens, double *load, double *dropped,
                 GError **err);

/* The all-to-alls of one MoE layer on one GPU that routes `tokens` tokens, in an expert-parallel
 * group of `ep` ranks over `nodes` nodes: `model[i]` is the byte count the all-to-all model
 * runs, `link[i]` the bytes that cross the bottleneck link (InfiniBand across nodes, NVLink
 * inside one), for i = dispatch, combine, combine backward, dispatch backward. The busiest
 * receiver's share: times the routing load factor. Dispatch in the training dtype (fp8 when
 * training in fp8), the others in at least 16 bits.
 *   nccl: every copy of a token to a remote expert is sent, NVLink at nccl.p2p_efficiency.
 *   deepep (normal kernels): each token goes once to each node it is routed to (at most
 *     moe.max_nodes) over InfiniBand and is forwarded over NVLink; one node: once to each GPU,
 *     at nccl.deepep_efficiency of NVLink.
 *   deepep-ll (low-latency kernels): every copy over RDMA, even inside a node. */
void wl_moe_a2a(const cfg_workload *w, double tokens, double load, int ep, int nodes,
                const cfg_nccl *nc, double model[4], double link[4]);

/* A program that holds only rank 0's process groups (tensor, context, data, expert, expert-data,
 * pipeline) and the layer-pass templates of the strategy, for closed-form estimates (the
 * planner): fwd[i] / bwd[i] is the template of model layer i. ZeRO-3's per-layer collectives
 * are left out of the templates (the estimate adds them). */
typedef struct {
  prog_program *p;
  int *fwd, *bwd;
  int fam_dp, fam_edp, fam_pp;
  double act_bytes;  /* sent between pipeline stages per micro-batch */
  double a2a_bytes;  /* MoE all-to-alls per GPU per micro-batch (the busiest stage) */
} wl_skeleton;
bool wl_skeleton_build(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                       wl_skeleton *out);
void wl_skeleton_free(wl_skeleton *s);

/* Model and hardware FLOPs of a training step (Megatron's MFU / HFU conventions). */
void wl_step_flops(const cfg_workload *w, const wl_model *m, double *model_flops,
                   double *hardware_flops);

/* One MoE layer of a training workload on one GPU, in isolation (dlsim moe). */
typedef struct {
  int ep, nodes;            /* expert-parallel group and the nodes it spans */
  double tokens, copies;    /* per GPU and micro-batch: routed tokens, token copies */
  double load, dropped;     /* busiest rank / mean; fraction dropped at capacity */
  double model_bytes[4], link_bytes[4]; /* see wl_moe_a2a */
  double experts_time[2];   /* routed experts' kernels on the busiest rank: forward, backward */
  double layer_time[2];     /* the whole layer's kernels (attention included) */
} wl_moe_info;
bool wl_moe_layer(const cfg_workload *w, const hw_cluster *hw, wl_moe_info *out, GError **err);

/* One micro-batch on one GPU of the tensor-parallel group. */
bool wl_model_build(const cfg_model *m, const cfg_training *t, const wl_shard *shard,
                    wl_model **out, GError **err);
void wl_model_free(wl_model *m);
double wl_model_fwd_flops(const wl_model *m);     /* model FLOPs of one forward pass */

/* Bytes per parameter of each model state: weights in the training dtype, gradients in
 * training.grad_dtype, optimizer states in fp32 (Adam: master copy + m + v, or m + v when the
 * weights already are fp32; SGD: momentum, plus the master copy in mixed precision). */
typedef struct {
  double weights, grads, optimizer;
  double lp_grads; /* DeepSpeed's BF16 optimizer: the backward's own gradients, kept whole beside
                    * the accumulation buffer (`grads`); 0 without it */
  double reduced;  /* a gradient as the data-parallel reduction sends it */
} wl_state_bytes;
wl_state_bytes wl_state_bytes_per_param(const cfg_training *t);
/* Bytes moved per parameter when a micro-batch's gradients are added into DeepSpeed's BF16
 * optimizer's buffer (0 without it). */
double wl_grad_accum_bytes(const cfg_training *t);

/* Model states of one GPU holding `params` parameters, sharded by ZeRO over the data-parallel
 * group and offloaded as the workload says: bytes on the GPU, in host memory and on NVMe. */
typedef struct {
  double weights, grads, optimizer; /* on the GPU */
  double host, nvme;                /* moved off it */
} wl_states;
wl_states wl_states_of(const cfg_workload *w, double params);
/* The same when `experts` of the parameters are routed experts (sharded over dp / ep ranks). */
wl_states wl_states_of_split(const cfg_workload *w, double params, double experts);

/* Pipeline stages: which layers of a wl_model stage `s` of `pp` holds (blocks split evenly,
 * the embedding on the first, the output layer on the last). */
typedef struct {
  guint first, count; /* range in wl_model.layers */
  bool embedding, output;
} wl_stage;
wl_stage wl_stage_of(const wl_model *m, int pp, int s);
/* The same for chunk g when the blocks are split into `chunks` (the embedding with chunk 0, the
 * output layer with the last). */
wl_stage wl_chunk_of(const wl_model *m, int chunks, int g);
/* Blocks [first, first + count) of chunk g when `blocks` are split into `chunks` pipeline
 * chunks as evenly as possible (the remainder to the middle chunks). */
void wl_chunk_blocks(int blocks, int chunks, int g, int *first, int *count);
/* Of a layer's backward compute time, the share of its weight-gradient GEMMs: the W pass that
 * zero-bubble schedules split off (the rest, B, computes the input gradient). */
double wl_layer_wgrad_share(const wl_layer *l, const hw_cluster *hw);
/* Micro-batches whose activations a stage holds at once under a pipeline schedule. */
double wl_inflight(const cfg_parallel *p, int stage, int micro_batches);

/* Builds the program of one training step. */
bool wl_build(const cfg_workload *w, const hw_cluster *hw, prog_program **out, GError **err);
/* Builds the step of two workloads that differ only in their global batch (the fold's two
 * micro-batch counts) from one model, the second program sharing the first's process groups
 * (prog_new_sharing_groups): what building each with wl_build gives, for less. Where the
 * schedules allow, the second is derived from the first's ops (its passes copied, not built
 * again); `derived` (or NULL) says whether it was. */
bool wl_build_two(const cfg_workload *const w[2], const hw_cluster *hw, prog_program *out[2],
                  bool *derived, GError **err);
/* What the builds of many configurations of one job share (wl_build_cached, wl_build_two_cached):
 * the process groups of each rank layout they met, so a layout met again does not build its
 * groups again. The programs are the same, op for op and group for group, as without it. */
typedef struct wl_cache wl_cache;
wl_cache *wl_cache_new(void);
void wl_cache_free(wl_cache *c);
/* The model of `w`'s shard (wl_shard_of) that the cache's builds use, built now if it has none:
 * the cache owns it. NULL (and `err`) if it cannot be built. */
const wl_model *wl_cache_shard_model(wl_cache *c, const cfg_workload *w, GError **err);
/* wl_build and wl_build_two with a cache (NULL: none). */
bool wl_build_cached(const cfg_workload *w, const hw_cluster *hw, wl_cache *cache,
                     prog_program **out, GError **err);
bool wl_build_two_cached(const cfg_workload *const w[2], const hw_cluster *hw, wl_cache *cache,
                         prog_program *out[2], bool *derived, GError **err);
/* The same, but where the second program is the first's ops with copies of the first's own
 * passes inserted, it is not made yet: out[1] is NULL and `*later` turns the first into it
 * (wl_later_make) once the first is no longer needed, its ops before the inserts left where
 * they are rather than copied into a new program; w[1], `hw` and the cache must outlive it. */
typedef struct wl_later wl_later;
bool wl_build_two_later(const cfg_workload *const w[2], const hw_cluster *hw, wl_cache *cache,
                        prog_program *out[2], wl_later **later, GError **err);
/* Turns `first` (out[0]) into the second program, what wl_build_two_cached's out[1] is op for
 * op, and frees `later`; returns `first`. */
prog_program *wl_later_make(wl_later *later, prog_program *first);
void wl_later_free(wl_later *later);
/* How wl_later_make will change `first`: per stage class s < the count returned, the op its
 * inserts go before, how many ops it inserts and a bit per stream they use (arrays to g_free). */
int wl_later_splice(const wl_later *later, const prog_program *first, guint **at, guint **n,
                    unsigned **streams);
/* Checks that a layout can run: divisibility of heads, layers, sequence, micro-batches. */
bool wl_check_layout(const cfg_workload *w, GError **err);
/* What the layout asks for that changes nothing, for the reports to say (sentences appended
 * to `out`, which frees them): ZeRO with no data- or context-parallel rank to shard over. */
void wl_notes(const cfg_workload *w, GPtrArray *out);
/* The foundation's data-parallel builder, kept as the reference that TP = PP = 1 must match. */
bool wl_build_reference_dp(const cfg_workload *w, const hw_cluster *hw, prog_program **out,
                           GError **err);

#endif
