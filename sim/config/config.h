/* config: YAML cluster / model / workload files -> typed structs in SI units.
 *
 * Files are read with libyaml into a tree that keeps every node's file:line:column, `--set`
 * overrides are applied to that tree, and the tree is then decoded against a schema, so that
 * every error (unknown key, wrong type, missing key, inconsistent sizes) can name where it is.
 * All errors are reported through GError in the CFG_ERROR domain; the CLI exits 2 on them. */
#ifndef DLSIM_CONFIG_H
#define DLSIM_CONFIG_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define CFG_ERROR (cfg_error_quark())
GQuark cfg_error_quark(void);
typedef enum {
  CFG_ERROR_INPUT,       /* bad file, key, value or combination: exit 2 */
  CFG_ERROR_UNSUPPORTED, /* well-formed but not simulated by this version: exit 2 */
  CFG_ERROR_RUNTIME,     /* the simulation itself failed: exit 1 */
} cfg_error_code;

/* ---- document trees ---------------------------------------------------------------------- */

typedef struct cfg_doc cfg_doc;

/* Loads one YAML document. The file must hold a mapping. */
cfg_doc *cfg_doc_load(const char *path, GError **err);
/* Parses YAML text; `origin` names it in error messages. */
cfg_doc *cfg_doc_parse(const char *text, const char *origin, GError **err);
void cfg_doc_free(cfg_doc *doc);
/* "file:line:col" of the value at a dotted path (or of its closest existing parent). */
char *cfg_doc_where(const cfg_doc *doc, const char *path);
const char *cfg_doc_file(const cfg_doc *doc);
/* Whether the document (after --set and profiles) holds the key at a dotted path. */
bool cfg_doc_has(const cfg_doc *doc, const char *path);

/* The closest candidate to `word` (Levenshtein, case-insensitive), or NULL if nothing is
 * close: the one "did you mean" of dlsim, for keys, enum values, options and commands. */
const char *cfg_closest(const char *word, const char *const *candidates, size_t n);

/* ---- enums --------------------------------------------------------------------------------- */

/* fp8 is per-tensor scaled FP8 (Transformer Engine's delayed scaling); fp8-block is FP8 with
 * DeepSeek-V3's fine-grained scales (1x128 tiles of activations, 128x128 blocks of weights,
 * fp32), mxfp8 OCP's MX format (an E8M0 scale per 32 elements), nvfp4 NVIDIA's FP4 (E2M1, an
 * E4M3 scale per 16 elements and one fp32 per tensor); fp4 the bare 4-bit unit. The first
 * CFG_NUNITS are tensor-core units a GPU states a peak for (gpu.flops). */
typedef enum {
  CFG_FP32, CFG_TF32, CFG_BF16, CFG_FP16, CFG_FP8, CFG_INT8, CFG_INT4, CFG_FP4,
  CFG_FP8_BLOCK, CFG_MXFP8, CFG_NVFP4, CFG_NDTYPES
} cfg_dtype;
#define CFG_NUNITS (CFG_FP4 + 1)
const char *cfg_dtype_name(cfg_dtype dtype);
bool cfg_dtype_parse(const char *name, cfg_dtype *out, GError **err);
/* Bytes per element, its share of block scale factors included (nvfp4: 0.5 + 1/16). */
double cfg_dtype_bytes(cfg_dtype dtype);
/* Scale-factor bytes per element alone (0 for unscaled and per-tensor formats). */
double cfg_dtype_scale_bytes(cfg_dtype dtype);
/* The tensor-core unit a format runs on (fp8-block and mxfp8: fp8, nvfp4: fp4). */
cfg_dtype cfg_dtype_unit(cfg_dtype dtype);
/* Formats whose GEMM inputs are quantized by kernels of their own (block scales computed
 * from each tile's maximum): fp8-block, mxfp8, nvfp4. */
bool cfg_dtype_block_scaled(cfg_dtype dtype);

typedef enum { CFG_INTRA_NVSWITCH, CFG_INTRA_NVLINK_RING, CFG_INTRA_PCIE } cfg_intra_kind;
typedef enum { CFG_TOPO_FAT_TREE, CFG_TOPO_RAIL_OPTIMIZED } cfg_topology;
typedef enum { CFG_RAILS_SPINE, CFG_RAILS_ONLY } cfg_rails;
/* how context parallelism's attention gets the other ranks' K and V */
typedef enum { CFG_CP_RING, CFG_CP_ALLGATHER } cfg_cp_exchange;
/* The copies a ZeRO-3 framework makes of a layer's gathered parameters and unsharded gradients
 * on the GPU: none, PyTorch FSDP1's flat parameter, FSDP2's per-parameter tensors. */
typedef enum {
  CFG_ZERO3_COPIES_NONE,
  CFG_ZERO3_COPIES_FSDP1,
  CFG_ZERO3_COPIES_FSDP2,
  CFG_ZERO3_COPIES_DEEPSPEED
} cfg_zero3_copies;
typedef enum { CFG_MODEL_TRANSFORMER, CFG_MODEL_MOE_TRANSFORMER, CFG_MODEL_CNN, CFG_MODEL_GENERIC } cfg_model_kind;
typedef enum { CFG_ACT_GELU, CFG_ACT_SWIGLU } cfg_activation;
/* rotary position embedding of queries and keys: none (learned or absolute positions), one
 * fused kernel per tensor (Transformer Engine's), or PyTorch's elementwise ops */
typedef enum { CFG_ROTARY_NONE, CFG_ROTARY_FUSED, CFG_ROTARY_UNFUSED } cfg_rotary;
typedef enum { CFG_OPT_ADAM, CFG_OPT_SGD } cfg_optimizer;
typedef enum { CFG_RECOMPUTE_NONE, CFG_RECOMPUTE_SELECTIVE, CFG_RECOMPUTE_FULL } cfg_recompute;

/* How a backward's 16-bit gradients are added into training.grad_accum_dtype's buffer: DeepSpeed's
 * BF16 optimizer casts then adds and keeps them; a hook of apex / NeMo's O2 optimizers adds each
 * tensor in one mixed-dtype add_ and frees it at once. */
typedef enum { CFG_GRAD_ACCUM_CAST_ADD, CFG_GRAD_ACCUM_ADD } cfg_grad_accum_pass;

/* What `selective` recomputation drops: Megatron's attention core, or torchtitan's per-op
 * policy (every other matmul and every op that is no matmul or attention). */
typedef enum { CFG_SELECTIVE_MEGATRON, CFG_SELECTIVE_TORCHTITAN_OP } cfg_selective;
/* How per-tensor fp8 scales: from the amax history (delayed) or each tensor's own (current). */
typedef enum { CFG_FP8_DELAYED, CFG_FP8_CURRENT } cfg_fp8_recipe;
/* parallel.schedule; the last three split each backward into its input-gradient (B) and
 * weight-gradient (W) passes (Qi et al., ICLR 2024; DeepSeek-V3 report, Sec. 3.2.1) */
typedef enum {
  CFG_SCHED_GPIPE,
  CFG_SCHED_1F1B,
  CFG_SCHED_INTERLEAVED,
  CFG_SCHED_ZB_H1,
  CFG_SCHED_ZB_V,
  CFG_SCHED_DUALPIPE
} cfg_schedule;
typedef enum { CFG_OFFLOAD_NONE, CFG_OFFLOAD_CPU, CFG_OFFLOAD_NVME } cfg_offload;
/* Who runs the pipeline's passes and transfers (see parallel.pipeline_engine). */
typedef enum { CFG_PIPE_MEGATRON, CFG_PIPE_DEEPSPEED, CFG_PIPE_TORCH } cfg_pipe_engine;
typedef enum { CFG_DIM_TP, CFG_DIM_CP, CFG_DIM_PP, CFG_DIM_DP, CFG_NDIMS } cfg_dim;
/* serving.scheduler: iteration-level batching with whole prompts (vLLM V0, Orca), static
 * batches, chunked prefill mixed with decodes (Sarathi-Serve, vLLM V1), or Flover's temporal
 * fusion (fixed KV slots of max_model_len, buffers compacted when a request leaves) */
typedef enum {
  CFG_SCHEDULER_CONTINUOUS,
  CFG_SCHEDULER_STATIC,
  CFG_SCHEDULER_CHUNKED,
  CFG_SCHEDULER_FUSED
} cfg_scheduler;
/* burst: every request at time 0 (an offline, infinite-rate benchmark) */
typedef enum { CFG_ARRIVAL_POISSON, CFG_ARRIVAL_GAMMA, CFG_ARRIVAL_UNIFORM, CFG_ARRIVAL_BURST } cfg_arrival;
typedef enum { CFG_LENGTHS_FIXED, CFG_LENGTHS_UNIFORM, CFG_LENGTHS_FILE } cfg_lengths;
/* What a full KV cache does: preempt the newest request and recompute it later (vLLM), or
 * reserve a request's whole KV at admission so that nothing is ever preempted (TensorRT-LLM's
 * guaranteed-no-evict) */
typedef enum { CFG_PREEMPT_RECOMPUTE, CFG_PREEMPT_NONE } cfg_preemption;
/* When the engine's scheduler plans the next iteration while the GPUs run the current one:
 * never, only when a replica's GPUs are driven by worker processes of their own (vLLM's
 * multiprocess executor: more than one GPU), or always. */
typedef enum { CFG_ASYNC_OFF, CFG_ASYNC_MULTIPROCESS, CFG_ASYNC_ON } cfg_async_scheduling;
/* kv-aware: the replica whose prefix cache holds the most of the request's prompt (decode
 * pools cache none), else the one with the most free KV blocks */
typedef enum { CFG_ROUTER_ROUND_ROBIN, CFG_ROUTER_LEAST_LOADED, CFG_ROUTER_KV_AWARE } cfg_router;
typedef enum { CFG_A2A_NCCL, CFG_A2A_DEEPEP, CFG_A2A_DEEPEP_LL } cfg_a2a;
/* How a serving engine routes tokens to experts around its grouped GEMM: gathering them inside
 * the GEMM (vLLM's and SGLang's fused_moe), or in a kernel of its own after a sort
 * (TensorRT-LLM's runMoe). */
typedef enum { CFG_MOE_ROUTING_FUSED, CFG_MOE_ROUTING_EXPAND } cfg_moe_routing;
/* Which collectives inside layer passes the DES runs as flows (collectives.layer_flows). */
typedef enum { CFG_LAYER_FLOWS_AUTO, CFG_LAYER_FLOWS_ALWAYS, CFG_LAYER_FLOWS_NEVER } cfg_layer_flows;
/* serving.speculative.method: a separate draft model, or the model's own multi-token
 * prediction head (DeepSeek-V3's MTP module) */
typedef enum { CFG_SPEC_NONE, CFG_SPEC_DRAFT, CFG_SPEC_MTP } cfg_spec_method;
/* collectives.transport: GPU buffers straight to the NIC or peer GPU (GPUDirect RDMA, CUDA IPC),
 * or copied through host memory first (Gloo, MPI without GPUDirect) */
typedef enum { CFG_TRANSPORT_GPU_DIRECT, CFG_TRANSPORT_HOST_STAGED } cfg_transport;
/* collectives.progress: NCCL's kernels drive the collective on the GPU, or a host thread drives
 * MPI's (or Gloo's) point-to-point messages */
typedef enum { CFG_PROGRESS_KERNEL, CFG_PROGRESS_CPU } cfg_progress;
/* collectives.ucc_tl: UCC's transport layer for an MPI built on UCC (none: MPI's own) */
typedef enum { CFG_UCC_TL_NONE, CFG_UCC_TL_UCP, CFG_UCC_TL_NCCL } cfg_ucc_tl;

/* Names as the YAML spells them, from the schema's tables ("?" out of range). */
const char *cfg_recompute_name(cfg_recompute r);
bool cfg_recompute_parse(const char *name, cfg_recompute *out);
const char *cfg_scheduler_name(cfg_scheduler s);
const char *cfg_a2a_name(cfg_a2a a);

/* ---- calibration (fitted efficiency tables; gpu.calibration points at a file of these) ------ */

typedef enum {
  CFG_KCLASS_GEMM,
  CFG_KCLASS_CONV,
  CFG_KCLASS_ATTENTION,
  CFG_KCLASS_ELEMENTWISE,
  CFG_KCLASS_OPTIMIZER,
  CFG_KCLASS_OTHER,
  CFG_NKCLASSES
} cfg_kernel_class;
const char *cfg_kernel_class_name(cfg_kernel_class k);

/* Fused attention kernels by implementation (training.attention). */
typedef enum {
  CFG_ATTN_FA2,
  CFG_ATTN_FA3,
  CFG_ATTN_CUDNN,
  CFG_ATTN_TRITON, /* FlashAttention in Triton (MPT / llm-foundry through 2023) */
  CFG_ATTN_FA1,
  CFG_NATTN
} cfg_attn_impl;
const char *cfg_attn_impl_name(cfg_attn_impl a);
/* The name of a validation case's summary row; "auto" for 0. */
const char *cfg_case_category_name(int category);

/* What a fused attention kernel reaches, per implementation: a fraction of the 16-bit peak at
 * long sequences (head dim 128), ramping with the keys each query row sees as L / (L +
 * fwd_half or bwd_half); head dims of 64 or less reach d64 of it; a causal kernel sees L = keys / 2 on
 * average, wastes the masked half of its diagonal 128-wide tiles and reaches `causal` of the
 * rest (fitted on the FlashAttention papers' figures: validation/kernels/fit-attention.py). */
typedef struct {
  double fwd[CFG_NATTN], bwd[CFG_NATTN];           /* fraction of peak at long sequences */
  double fwd_half[CFG_NATTN], bwd_half[CFG_NATTN]; /* keys_half of the ramp */
  double d64[CFG_NATTN];
  double causal;
  double deterministic_bwd; /* s a backward call costs more in deterministic mode */
  double deterministic[CFG_NATTN]; /* the deterministic backward's rate over the usual one */
} cfg_attention_eff;

/* A fused attention kernel's shape, for its efficiency (keys 0: not such a kernel). */
typedef struct {
  float keys;     /* keys of the sequence (or context-parallel chunk) each call sees */
  float head_dim;
  uint8_t impl;   /* cfg_attn_impl */
  uint8_t backward;
  uint8_t causal;
  uint8_t deterministic; /* a backward under training.deterministic */
} cfg_attn_shape;

typedef struct {
  double flops_efficiency[CFG_NKCLASSES]; /* fraction of peak FLOP/s reached, per kernel class */
  cfg_attention_eff attention;            /* fused attention kernels, by implementation */
  double memory_efficiency;               /* fraction of HBM bandwidth reached by streaming kernels */
  double gemm_k_half;                     /* a GEMM with reduction dimension K reaches
                                           * flops.gemm * K / (K + gemm_k_half) of peak */
  int gemm_waves;                         /* 0/1: GEMMs in waves of output tiles over gpu.sms */
  double gemm_tile_load;                  /* with gemm_waves: a tile of tm x tn outputs runs at
                                           * 1 / (1 + L/tm + L/tn) of the MMA rate, L this */
  double fp8_scale;                       /* what fp8 kernels reach of their peak, relative to
                                           * what 16-bit ones reach of theirs */
  double fp4_scale;                       /* the same for fp4 kernels (Blackwell's block-scaled
                                           * MMA reaches less of its peak than fp8's) */
  double sustained;                       /* fraction of the kernel benchmarks' FLOP/s that a long
                                           * training run sustains (clocks under power and
                                           * thermal limits); scales compute-bound time */
  double launch_overhead;                 /* seconds added to every kernel */
  double gemm_stream;                     /* > 0: fraction of HBM bandwidth a 16-bit GEMM reaches
                                           * when streaming its weights bounds it (decode) */
  double gemm_stream_overhead;            /* seconds such a GEMM adds instead of launch_overhead */
  double host_dispatch; /* host time per kernel launch, the engines' launch queue: the workload's training.host_dispatch */
  double interference[CFG_NKCLASSES];     /* the factor a kernel's time takes, per class, while
                                           * a collective of its GPU is in flight (NCCL's SMs and
                                           * HBM traffic); 1: none */
  char *source;                           /* where the numbers come from */
} cfg_efficiency;

/* ---- NCCL behaviour (fitted from nccl-tests tables; `dlsim calibrate --nccl`) --------------- */

typedef enum { CFG_PROTO_LL, CFG_PROTO_LL128, CFG_PROTO_SIMPLE, CFG_NPROTOS } cfg_proto;
typedef enum { CFG_LINK_INTRA, CFG_LINK_NETWORK, CFG_NLINKCLASSES } cfg_link_class;
/* Node counts NCCL's tuner tells apart across nodes: two, and more (three counts as four). */
typedef enum { CFG_SCALE_TWO_NODES, CFG_SCALE_MORE_NODES, CFG_NSCALES } cfg_node_scale;
const char *cfg_proto_name(cfg_proto p);

typedef struct {
  double link_efficiency[CFG_NLINKCLASSES];  /* fraction of a link's bandwidth NCCL reaches */
  double nvls_efficiency;                    /* the same for NVLink SHARP (in-switch) traffic */
  double nvls_latency;                       /* seconds: NVLink SHARP's set-up and sync, per collective */
  double p2p_efficiency;                     /* ... for send/recv (and all-to-all), which NCCL
                                                runs on fewer channels per peer than rings */
  double deepep_efficiency;                  /* ... for DeepEP's MoE dispatch / combine
                                                kernels over NVLink */
  double copy_bandwidth;                     /* bytes/s a GPU's NCCL channels (SMs) load and
                                                store; 0: no limit */
  double base_latency[CFG_NPROTOS];          /* per collective: launch and set-up */
  double hop_latency[CFG_NLINKCLASSES][CFG_NPROTOS]; /* per step over a link class */
  double chunk[CFG_NPROTOS];                 /* pipeline chunk per channel (fill of pipelines) */
  double protocol_efficiency[CFG_NPROTOS];   /* payload / wire bytes (LL 1/2, LL128 120/128) */
  double nvls_tree_channel[CFG_NSCALES];     /* bus bandwidth one NVLS-tree channel reaches at
                                                most (NCCL's perChMaxNVLSTreeBw); 0: no ceiling */
  double ll_max_bandwidth[CFG_NSCALES];      /* bus bandwidth an LL ring or tree reaches at most
                                                across nodes (NCCL's llMaxBw); 0: no ceiling */
  double tree_channel[CFG_NSCALES];          /* ... one tree channel (perChMaxTreeBw) */
  double tree_ll128_channel[CFG_NSCALES];    /* ... one LL128 tree channel (perChMaxTreeLL128Bw) */
  int max_channels;                          /* rings / trees used at once across nodes */
  int pxn;                                   /* 0/1: change rail over NVLink (NCCL's PXN) */
  char *source;
} cfg_nccl;

/* ---- cluster ------------------------------------------------------------------------------ */

/* gpu.kind: what a compute device is. A CPU device (one socket, one MPI rank) runs PyTorch eager
 * ops on its cores: no fused attention, a per-op dispatch cost, memory-bound kernels at DDR
 * bandwidth (hw_kernel_time); the cluster file keeps the `gpu:` section for it. */
typedef enum { CFG_DEVICE_GPU, CFG_DEVICE_CPU } cfg_device_kind;

typedef struct {
  char *name;
  cfg_device_kind kind;
  double memory;            /* bytes */
  double memory_bandwidth;  /* bytes/s */
  double flops[CFG_NDTYPES];/* peak FLOP/s, NAN when the GPU has no such unit */
  int sms;                  /* streaming multiprocessors (0: unknown, no wave quantisation) */
  double power_limit;       /* watts the board is capped at; 0: power.gpu_tdp (no cap) */
  char *calibration;        /* resolved path or NULL */
  cfg_efficiency efficiency;/* defaults <- calibration file <- inline gpu.efficiency */
} cfg_gpu;

typedef struct {
  cfg_intra_kind kind;
  double bandwidth; /* per GPU, per direction, bytes/s */
  double latency;   /* seconds, GPU to GPU */
  int nvls;         /* 0/1: the NVSwitch reduces in the switch (NVLink SHARP, H100 and later) */
} cfg_intra;

/* The host CPUs of a node, where an offloaded optimizer steps (parallel.offload: cpu). */
typedef struct {
  char *name;
  double flops;             /* peak FP32 FLOP/s of all sockets */
  double memory_bandwidth;  /* DDR bytes/s of all sockets */
  double memory_efficiency; /* fraction of it a streaming kernel reaches (STREAM) */
  double core_bandwidth;    /* bytes/s one core reads plus writes (0: unknown) */
  double dispatch_scale;    /* the framework's host time per op over an x86 DGX host's */
  int launch_blocking;      /* 0/1: CUDA_LAUNCH_BLOCKING=1, every launch waits for its kernel */
} cfg_host_cpu;

typedef struct {
  int count;
  int gpus_per_node;
  cfg_intra intra;
  int nics_per_node;
  int nvlink_domain; /* GPUs on one NVSwitch fabric: gpus_per_node, or several nodes (NVL72) */
  double host_memory;
  double nvme;
  cfg_host_cpu cpu;
} cfg_node_spec;

typedef struct {
  char *name;
  double latency;          /* per switch traversal, seconds */
  int nodes_per_switch;    /* nodes below one switch of this tier; the top tier spans all */
  double oversubscription; /* downlink / uplink capacity of this tier's switches */
} cfg_tier;

/* Another tenant's traffic on chosen links (network.background): a flow per link and direction
 * capped at `bandwidth` bytes/s (or `fraction` of the link), from `start` for `duration`
 * seconds (0: until the step ends). `links`: "node N", "node N rail K", "rail K", "uplink G"
 * (leaf group G's uplinks) or "spine" (every leaf uplink); `direction` up, down or both. */
typedef struct {
  char *links, *direction;
  double fraction, bandwidth, start, duration;
} cfg_background;

/* A background selector parsed: NICs of a node and/or a rail (-1: any), a leaf group's uplinks,
 * or every leaf uplink. */
typedef struct {
  int node, rail, uplink;
  bool spine;
} cfg_bg_select;
/* Parses network.background's `links`; false if it is none of the forms. */
bool cfg_background_select(const char *links, cfg_bg_select *out);

typedef struct {
  cfg_topology topology;
  cfg_rails rails;      /* rail-optimized: how traffic changes rail (spine, or NVLink first) */
  double nic_bandwidth; /* per NIC, per direction, bytes/s */
  cfg_tier *tiers;
  int ntiers;
  int sharp;            /* 0/1: the switches reduce in the network (InfiniBand SHARP) */
  cfg_background *background;
  int nbackground;
} cfg_network;

/* What a long run needs beyond one step (lifecycle/): how often parts fail, what the machine
 * draws, where checkpoints go, what an hour costs. Each mean time between failures is per
 * component, in seconds; 0: that kind never interrupts the job. */
typedef struct {
  double gpu_mtbf, node_mtbf, software_mtbf, nic_mtbf, switch_mtbf, link_mtbf;
  int switch_radix; /* ports per switch, to count the switches of the fabric */
} cfg_reliability;

typedef struct {
  double gpu_tdp;               /* watts */
  double compute, memory_bound, communication, idle; /* fractions of gpu_tdp */
  double node;                  /* watts per node beside its GPUs: CPUs, NICs, fans, NVSwitches */
  double switch_power;          /* watts per network switch */
  double pue;                   /* facility power / IT power */
} cfg_power;

typedef struct {
  double bandwidth;      /* aggregate write bandwidth of the checkpoint store, bytes/s */
  double node_bandwidth; /* per node towards it, bytes/s */
  double host_bandwidth; /* GPU to host memory per GPU (asynchronous checkpoints' snapshot) */
} cfg_storage;

typedef struct {
  double gpu_hour; /* dollars per GPU-hour */
  double kwh;      /* dollars per kWh of facility energy */
} cfg_cost;

/* Slow GPUs (run/stragglers.c): each GPU's compute runs its lasting factor (lognormal, and
 * for a `fraction` of them `slowdown` more) times a per-step one (lognormal `jitter`); a
 * synchronous step waits for its slowest rank. All 0: none. */
typedef struct {
  double sigma, fraction, slowdown, jitter;
  int seed, steps; /* the draws' seed; steps the DES samples */
} cfg_stragglers;

typedef struct {
  char *name;
  cfg_gpu gpu;
  cfg_node_spec node;
  cfg_network network;
  cfg_nccl nccl;  /* defaults <- gpu.calibration file's nccl <- inline nccl */
  cfg_reliability reliability;
  cfg_power power;
  cfg_storage storage;
  cfg_cost cost;
  cfg_stragglers stragglers;
  cfg_doc *doc; /* for error positions in later cross-checks */
  bool sized_to_job; /* a preset whose node count was set to the workload's GPUs */
} cfg_cluster;

/* ---- model --------------------------------------------------------------------------------- */

typedef enum { CFG_ROUTING_UNIFORM, CFG_ROUTING_ZIPF, CFG_ROUTING_HISTOGRAM } cfg_routing;

typedef struct {
  int experts, top_k, expert_ffn_hidden, shared_experts, every;
  int first_dense;        /* dense (non-MoE) layers before the first MoE layer */
  cfg_routing routing;    /* how tokens spread over experts */
  double zipf_s;          /* routing: zipf, P(expert of rank i) ~ 1 / i^s */
  char *histogram;        /* routing: histogram, a file of per-expert loads (resolved path) */
  double capacity_factor; /* tokens an expert takes, in units of the mean; 0: unbounded */
  int drop_tokens;        /* 0/1: tokens over capacity are dropped (else the expert runs them) */
  int max_nodes;          /* device-limited routing: a token goes to at most this many nodes
                           * (0: no limit) */
} cfg_moe;

/* Multi-head latent attention (DeepSeek-V2/V3): low-rank compressed queries and keys/values. */
typedef struct {
  int q_rank, kv_rank, rope_dim; /* 0 when the model has no MLA */
} cfg_mla;

typedef struct {
  cfg_model_kind kind;
  char *name;
  int layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len;
  int head_dim;        /* per attention head (default hidden / heads) */
  cfg_mla mla;
  cfg_activation activation;
  int tied_embeddings; /* 0/1 */
  cfg_rotary rotary;
  int qk_norm;         /* 0/1: queries and keys normalised per head before attention */
  cfg_moe moe;
  char *preset;        /* cnn: resnet50, ... */
  int image_size;      /* cnn input resolution */
  int num_classes;
  double params;       /* generic: total parameters (what memory estimators take) */
  double largest_layer_params; /* generic: the largest layer, for ZeRO-3's gathered layer */
} cfg_model;

/* ---- workloads ----------------------------------------------------------------------------- */

typedef struct {
  int global_batch, micro_batch;
  cfg_dtype dtype;
  cfg_optimizer optimizer;
  cfg_recompute recompute;
  int flash_attention; /* 0/1 */
  int distill;         /* 0/1: a frozen teacher of the student's shape runs forward too */
  int deterministic;   /* 0/1: deterministic algorithms (Megatron's --deterministic-mode) */
  int attention;       /* cfg_attn_impl + 1, 0: auto (FlashAttention-2) */
  char *framework;     /* the profile (configs/frameworks) whose defaults the workload took */
  cfg_dtype grad_dtype;/* gradients as accumulated and reduced (Megatron: fp32 main grads) */
  int grad_accum_dtype;/* cfg_dtype + 1 of DeepSpeed's BF16 optimizer's accumulation buffer, 0: none */
  cfg_grad_accum_pass grad_accum_pass; /* how each micro-batch's gradients reach that buffer */
  int grad_accum_fusion; /* 0/1: Megatron's weight-gradient GEMM accumulates into main_grad */
  double tokens;       /* a whole run: tokens to train on (0: one step only) */
  int steps;           /* ... or steps (0: not given) */
  double host_dispatch;/* host time to launch one kernel (s); 0: the host keeps ahead */
  cfg_selective selective; /* which ops selective recomputation drops */
  int eager_ops;       /* 0/1: norms, rotary, SwiGLU as eager PyTorch's unfused ops */
  int eager_loss;      /* 0/1: the loss as eager fp32 cross_entropy (eager_ops implies it) */
  int loss_fusion;     /* 0/1: Megatron's vocabulary-parallel loss fused (1) or its separate passes */
  int te_cp_ring;      /* 0/1: context parallelism runs Transformer Engine's ring and its host work */
  int tp_coll_host;    /* 0/1: each tensor-parallel collective costs the host its torch.distributed calls */
  int te_userbuffers;  /* 0/1: parallel.tp_comm_overlap is Transformer Engine's userbuffers */
  int test_mode;       /* 0/1: Megatron-LM's --test-mode, qk-layernorm's consistency checks per layer */
  int fp8_params;      /* 0/1: fp8 training keeps the model's weights in fp8 (FP8_PARAMS) */
  int loss_parallel;   /* 0/1: with TP, the loss as DTensor's loss_parallel (torchtitan) */
  cfg_fp8_recipe fp8_recipe;
} cfg_training;

/* How a run checkpoints and restarts (lifecycle/). */
typedef struct {
  double interval;     /* seconds of training between checkpoints; NAN: Young/Daly's */
  int async;           /* 0/1: a snapshot to host memory, written while training goes on */
  double restart;      /* seconds from a failure to training again, before reading the checkpoint */
} cfg_checkpoint;

typedef struct {
  int tp, pp, dp, cp, ep;
  cfg_cp_exchange cp_exchange;
  int sequence_parallel; /* 0/1 */
  int tp_comm_overlap;   /* 0/1: sequence-parallel all-gathers and reduce-scatters pipelined with
                          * their GEMMs (Transformer Engine's userbuffers) */
  int tp_async_dgrad;    /* 0/1: a column-parallel GEMM's input gradient reduced while its
                          * weight gradient runs (else after it, blocking) */
  double tp_sync;        /* seconds a blocking TP collective waits per rank beyond the first */
  int zero3_backward_post; /* 0/1: ZeRO-3's backward all-gather issued after the previous
                            * layer's gradients (FSDP's BACKWARD_POST), not prefetched */
  cfg_zero3_copies zero3_copies;
  int overlap_param_gather; /* 0/1: ZeRO-1/2's parameter all-gather under the next forward */
  cfg_schedule schedule;
  cfg_pipe_engine pipeline_engine;
  int pp_reshard_after_forward; /* 0/1: ZeRO-3 pipeline stages reshard between micro-batches */
  int virtual_stages;
  int zero;
  cfg_offload offload;
  int offload_params;   /* 0/1: ZeRO-3 also keeps parameters off the GPU */
  cfg_dim placement[CFG_NDIMS];
  int nplacement;
  double gradient_bucket; /* bytes */
  int uneven_stages;      /* 0/1: layers need not divide into pp x virtual_stages chunks */
  int moe_overlap;        /* 0/1: each MoE layer runs two half batches, one's all-to-all under
                           * the other's compute (DeepSeek's dual micro-batch overlap) */
  int processes_per_gpu;  /* MPS: processes sharing each GPU, each its own rank */
} cfg_parallel;

typedef struct {
  double rate; /* requests/s */
  cfg_arrival arrival;
  int count, prompt_tokens, output_tokens, seed;
  double burstiness;    /* gamma arrivals: shape (1 = Poisson, < 1 burstier) */
  cfg_lengths distribution; /* of prompt and output lengths */
  double spread;        /* uniform: lengths in [mean (1 - spread), mean (1 + spread)] */
  char *lengths_file;   /* distribution file: CSV with prompt_tokens, output_tokens columns */
  char *trace;          /* CSV of arrival_s, prompt_tokens, output_tokens: replayed as is */
  int concurrency;      /* > 0: closed loop, this many clients each waiting for its answer */
  double ramp;          /* closed loop: seconds over which its clients start, one by one */
  int warmup;           /* the first requests sent, left out of every figure */
  int prefix_tokens;    /* leading prompt tokens shared by the requests of a group */
  int prefix_groups;    /* distinct shared prefixes (system prompts) */
  int shared_prefix;    /* the same as prefix_tokens (its newer name); load.c merges them */
  int turns;            /* requests per conversation: each turn's prompt holds the previous */
  double think_time;    /* seconds from a turn's answer to the next turn */
} cfg_requests;

typedef struct {
  double ttft, tbt; /* seconds: time to first token, mean time between tokens of a request */
  double attainment;/* fraction of requests meeting both, for --find-max-rate */
} cfg_slo;

/* A host-memory tier under the GPU's KV cache: evicted prefix blocks go there, a hit comes back
 * over the host link. */
typedef struct {
  double size;      /* bytes of host memory per replica (0: no tier) */
  double bandwidth; /* host link per GPU, bytes/s (PCIe or NVLink-C2C) */
} cfg_kv_offload;

#define CFG_MAX_SPEC_TOKENS 16
typedef struct {
  cfg_spec_method method;
  int tokens;             /* k: draft tokens proposed per step */
  double acceptance;      /* per-token acceptance rate, i.i.d. */
  double profile[CFG_MAX_SPEC_TOKENS]; /* or per position (acceptance_profile) */
  int nprofile;
  cfg_model draft;        /* method draft: the draft model */
} cfg_speculative;
/* serving.prefill / serving.decode: one pool of a disaggregated deployment (both given). */
typedef struct {
  int tp, pp, ep, replicas, max_batch;
  int max_tokens;              /* tokens per iteration (default: serving.max_tokens) */
  cfg_router router;           /* default: serving.router */
} cfg_pool;

typedef struct {
  int direct_decode_below;     /* prompts shorter than this go to a decode worker whole (0: none) */
} cfg_disagg;

typedef enum { CFG_AR_NCCL, CFG_AR_CUSTOM } cfg_ar_kernel;

/* A serving engine's own all-reduce kernels and the message sizes it gives them (bytes). */
typedef struct {
  cfg_ar_kernel kernel;
  double oneshot_tp2, oneshot_tp4, oneshot_tp8; /* largest one-shot message at TP <= 2, 4, 8 */
  int twoshot;                 /* 0/1: above those, two-shot up to max_size (else NCCL) */
  double max_size;             /* the IPC buffer: larger messages go to NCCL */
} cfg_custom_ar;

typedef struct {
  cfg_dtype dtype;
  char *engine;                /* the profile (configs/engines) whose defaults it took */
  int tp, pp, ep, max_batch;   /* ep > 1: wide expert parallelism, attention DP ep / tp x TP tp */
  cfg_scheduler scheduler;
  cfg_requests requests;
  cfg_dtype kv_dtype;          /* KV cache entries (default: the weights' dtype, or bf16) */
  int replicas;                /* data-parallel copies of the model behind the router */
  cfg_router router;
  int max_tokens;              /* tokens per iteration (vLLM max_num_batched_tokens) */
  int max_model_len;           /* longest prompt + output a request may have */
  int block_size;              /* tokens per KV block (paging) */
  int kv_blocks;               /* > 0: KV blocks per replica as measured, overriding the model */
  double gpu_memory_utilization; /* fraction of GPU memory the engine may take */
  double kv_cache_free_fraction; /* > 0: TensorRT-LLM's rule instead: the KV cache takes this
                                    fraction of what weights and activations leave free */
  cfg_preemption preemption;
  int prefix_caching;          /* 0/1: prompt blocks are cached (LRU) and reused */
  int prefix_cache;            /* the same as prefix_caching; load.c merges them */
  cfg_kv_offload kv_offload;
  cfg_speculative speculative;
  double iteration_overhead;   /* seconds of host work per iteration (scheduling, sampling) */
  cfg_async_scheduling async_scheduling;
  double request_overhead;     /* seconds per request outside the engine (API server, tokenizer) */
  /* the engine's paged decode attention kernel: the fraction of HBM bandwidth its KV read
   * reaches with many (sequence, KV head) items in flight, and the item count at which it
   * reaches half that (0: the GPU's efficiency.memory at any count) */
  double decode_attention_bandwidth, decode_attention_half;
  /* the same for models whose every query head has a KV head of its own (MHA): no group of
   * query heads shares a KV tile (0: the figures above) */
  double decode_attention_mha_bandwidth, decode_attention_mha_half;
  /* the decode attention kernel runs a thread block per (sequence, query head), each reading
   * its KV head's K and V (TensorRT-LLM's masked multi-head attention before XQA) */
  bool decode_attention_per_query_head;
  cfg_moe_routing moe_routing; /* the MoE layer's routing kernels (see cfg_moe_routing) */
  int moe_tile;                /* rows of the grouped GEMM's tile each expert's rows fill */
  cfg_slo slo;
  /* wide expert parallelism (ep > 1): the dispatch / combine kernels of iterations with
   * prefill tokens and of decode-only ones, and the two-micro-batch overlap */
  cfg_a2a a2a_prefill, a2a_decode;
  int two_batch_overlap;       /* 0/1 */
  double tbo_overlap;          /* fraction of the shorter stream two-batch overlap hides */
  cfg_pool prefill, decode;    /* with `disaggregated`: the two pools, which replace tp, pp, ep,
                                * replicas, max_batch and max_tokens above */
  cfg_disagg disagg;
  cfg_custom_ar custom_allreduce;
  int disaggregated;           /* 0/1: serving.prefill and serving.decode were both given */
} cfg_serving;

typedef struct {
  char *algorithm; /* "auto" or an algorithm name understood by the collectives module */
  char *protocol;  /* "auto", "ll", "ll128" or "simple" */
  cfg_a2a a2a;     /* MoE dispatch / combine kernels: NCCL all-to-all, or DeepEP's */
  double sm_reserved; /* fraction of the SMs communication kernels hold: compute that runs
                       * beside a collective slows by 1 / (1 - sm_reserved) */
  cfg_layer_flows layer_flows;
  int layer_flow_budget; /* transfers in-layer flows may add to a DES step under auto */
  /* the communication runtime (configs/runtimes): NCCL, a CUDA-aware MPI, Gloo */
  char *runtime;
  cfg_transport transport;
  cfg_progress progress;
  cfg_ucc_tl ucc_tl;
  double call_latency;       /* seconds per collective call beyond the fabric's (NAN: NCCL's) */
  double step_latency;       /* seconds per algorithm step beyond the links' (NAN: NCCL's) */
  double eager_limit;        /* bytes: larger messages go by rendezvous (0: never) */
  double rendezvous_latency; /* seconds: the handshake a rendezvous message waits for */
  int leaders_per_node;      /* multi-leader all-reduce: leaders per node */
  double cycle_time;         /* seconds: the framework's negotiation cycle (Horovod) */
  int reduce_pass;  /* 0/1: a reduction ends with a pass of its own over each rank's S/n result */
  /* size rules "ALGO < SIZE, ALGO < SIZE, ALGO" per op ("auto": NCCL's tuner) */
  char *allreduce, *allgather, *reducescatter, *alltoall;
} cfg_collectives;

/* The `collectives` section of the runtime profile NAME (configs/runtimes/NAME.yaml, or a
 * file), its unset keys given their defaults: what `dlsim coll --runtime` runs. */
bool cfg_runtime_load(const char *name, cfg_collectives *out, GError **err);
/* The same with `sets` (NULL-terminated "collectives.KEY=VALUE") applied first. */
bool cfg_runtime_load_with(const char *name, char *const *sets, cfg_collectives *out,
                           GError **err);
void cfg_collectives_clear(cfg_collectives *c);

/* What else takes GPU memory, each line with a documented default (see memory.h). */
typedef struct {
  double cuda_context;   /* bytes: CUDA context, cuBLAS/cuDNN workspaces */
  double nccl_buffers;   /* bytes per process group a GPU belongs to */
  double fragmentation;  /* fraction of allocated memory lost to the caching allocator */
  double zero3_prefetch; /* bytes of parameters ZeRO-3 gathers ahead of use */
  double comm_bucket;    /* bytes of ZeRO reduce-scatter / all-gather buckets */
  int unit_buckets;      /* 0/1: ZeRO-3 reduce-scatters each layer's gradients by itself (FSDP2) */
  int root_gathered;     /* 0/1: FSDP2's root unit stays gathered through the step, and a
                          * block's backward holds its unit and the next one gathered */
  int zero_step_grads;   /* 0/1: DeepSpeed's ZeRO 1/2 optimizer copies its gradient partition at the
                          * step, flat in grad_dtype and again in fp32 */
} cfg_memory;

typedef struct {
  cfg_model model;
  int has_training, has_serving;
  cfg_training training;
  cfg_parallel parallel;
  cfg_serving serving;
  cfg_collectives collectives;
  cfg_memory memory;
  cfg_checkpoint checkpoint;
  cfg_doc *doc;
} cfg_workload;

/* ---- loading ------------------------------------------------------------------------------ */

/* A `--set PATH=VALUE` override. */
typedef struct {
  char *path;
  char *value;
} cfg_override;

/* Resolves a name to a file: an existing path, or a preset under configs/<kind>/NAME.yaml. */
char *cfg_resolve(const char *name, const char *kind, const char *relative_to);

/* Writes text to path atomically; on failure the error names the option that gave the path
 * ("-o", "--trace", ...) and what the system said. */
bool cfg_write_text(const char *option, const char *path, const GString *text, GError **err);
/* A path under the data directory (configs/, validation/, traces/), newly allocated: the
 * elements after it up to NULL are joined as g_build_filename joins them (none: the directory
 * itself). The directory is $DLSIM_DATA_DIR if set, else share/dlsim of the prefix dlsim is
 * installed in (found from the executable), else the source tree dlsim was built from. */
char *cfg_data_path(const char *first, ...) G_GNUC_NULL_TERMINATED;

/* Loads a cluster and a workload (either may be NULL), applying overrides to whichever file
 * owns each path, then decodes and validates both. */
bool cfg_load(const char *cluster_path, const char *workload_path, const cfg_override *sets,
              size_t nsets, cfg_cluster **cluster, cfg_workload **workload, GError **err);
/* cfg_load with overrides given as "key=value" strings (NULL-terminated, or NULL). */
bool cfg_load_with(const char *cluster_path, const char *workload_path, char *const *sets,
                   cfg_cluster **cluster, cfg_workload **workload, GError **err);
/* cfg_load_with, the workload given as YAML text (messages name it "workload") rather than a
 * file: for workloads a command builds from its options (dlsim plan -m MODEL). */
bool cfg_load_text(const char *cluster_path, const char *workload_yaml, char *const *sets,
                   cfg_cluster **cluster, cfg_workload **workload, GError **err);
/* Parses "a.b.c=value" into an override. */
bool cfg_override_parse(const char *text, cfg_override *out, GError **err);
void cfg_override_clear(cfg_override *o);

/* The unit of a quantity key of a cluster or workload (false for counts, names, unknown keys). */
#include "units/units.h"
bool cfg_key_unit(const char *path, units_kind *unit);

/* The reference of every key (path, type, default, allowed values, what it is), as plain
 * text or Markdown: what `dlsim schema` prints and docs/schema.md holds. */
void cfg_schema_reference(GString *out, bool markdown);
/* Every cluster and workload key `--set` takes, one a line (for shell completion). */
void cfg_schema_set_keys(GString *out);

/* ---- validation cases (validation/cases/NAME.yaml) --------------------------------------- */

typedef enum { CFG_CASE_FIT, CFG_CASE_CHECK, CFG_CASE_REFERENCE } cfg_case_role;

typedef struct {
  char *name;
  cfg_case_role role;   /* fit: the model was tuned on it; check: it was not; reference: an
                           analytic figure (a formula's output), checks accounting, not hardware */
  char *command;        /* run (default), memory, memory-states (model states only), deepspeed,
                           replay (a real trace: `trace`, `steps`) */
  char *unit;           /* the measured value's unit: GiB, GB, MiB, MB, s, ms (default: SI) */
  char *source;         /* where the measured number comes from */
  char *notes;
  int category;         /* a summary row (cfg_case_category_name), 0: by command */
  char *cluster, *workload; /* resolved paths */
  char **set;           /* overrides, "key=value" */
  char **ratio_to;      /* when set: the metric is this case / the same case with these overrides */
  char **unfit;         /* a fit case: the overrides that put back what was fitted on its source
                           (the prior), for leave-one-source-out checks */
  int engine;           /* 0 analytic, 1 des */
  char *metric;         /* a key of the command's --json output, dotted: memory.peak_bytes,
                           ranks.0.total_bytes, samples_per_s */
  double measured;
  double tolerance;     /* a check passes when |error| <= tolerance */
  /* a table of collective times (nccl-tests) instead of one number */
  char *table;          /* resolved path of a CSV */
  char *op;
  char *runtime;        /* the collectives' runtime profile (resolved path), or NULL: NCCL */
  char *algorithm;      /* the table's NCCL algorithm when it was forced (NCCL_ALGO), else NULL */
  int gpus, group_size;
  char *size_column, *time_column, *time_unit;
  char **filter;        /* "column=value" */
  double tolerance_small; /* for sizes < 64 KiB */
  int dtype;            /* cfg_dtype of a GEMM table (op: gemm) */
  /* a real trace replayed (command: replay) */
  char *trace;          /* resolved path of a Kineto trace */
  char *steps;          /* ProfilerSteps replayed ("A-B"), or NULL for all */
} cfg_case;

bool cfg_case_load(const char *path, cfg_case *out, GError **err);
void cfg_case_clear(cfg_case *c);

void cfg_cluster_free(cfg_cluster *c);
void cfg_workload_free(cfg_workload *w);

/* The largest cluster dlsim simulates (today's largest training clusters have about 100,000),
 * and the widest model dimension it takes (the largest dense models have hidden 16-25K): both
 * keep the sizes formed from them far from overflowing. */
#define CFG_MAX_GPUS (1 << 20)
#define CFG_MAX_HIDDEN (1 << 20)

int cfg_cluster_gpus(const cfg_cluster *c);
/* The host's time per op of the workload's framework on this cluster's CPUs (seconds):
 * training.host_dispatch times node.cpu.dispatch_scale. */
double cfg_host_dispatch(const cfg_cluster *c, const cfg_workload *w);
/* The number at a dotted key of a loaded cluster (gpu.efficiency.flops.gemm, nccl.chunk.ll...),
 * to change it in place; NULL and an input error when the key names no number. */
double *cfg_cluster_param(cfg_cluster *c, const char *key, GError **err);

#endif
