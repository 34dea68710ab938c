/* The key tables (the one definition of every key: `dlsim schema` prints them), the generic
 * initialisation and defaults they drive, and the decoder that applies them to a YAML tree. */
#include "config/config_internal.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

const char *const cfg_dtype_names[] = {"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4",
                                       "fp8-block", "mxfp8", "nvfp4", NULL};
/* the units a GPU states a peak for (gpu.flops): the scaled formats run on these */
static const char *const cfg_unit_names[] = {"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", NULL};

bool cfg_dtype_parse(const char *name, cfg_dtype *out, GError **err)
{
  for (int d = 0; cfg_dtype_names[d]; d++)
    if (strcmp(name, cfg_dtype_names[d]) == 0) {
      *out = (cfg_dtype)d;
      return true;
    }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "'%s' is not a data type (fp32, tf32, bf16, fp16, fp8, int8, int4, fp4, fp8-block, mxfp8, nvfp4)", name);
  return false;
}
static const char *const cfg_intra_names[] = {"nvswitch", "nvlink-ring", "pcie", NULL};
static const char *const cfg_topology_names[] = {"fat-tree", "rail-optimized", NULL};
static const char *const cfg_rails_names[] = {"spine", "only", NULL};
static const char *const cfg_cp_exchange_names[] = {"ring", "allgather", NULL};
static const char *const cfg_zero3_copies_names[] = {"none", "fsdp1", "fsdp2", "deepspeed",
                                                       NULL};
static const char *const cfg_model_kind_names[] = {"transformer", "moe-transformer", "cnn", "generic", NULL};
static const char *const cfg_activation_names[] = {"gelu", "swiglu", NULL};
static const char *const cfg_rotary_names[] = {"none", "fused", "unfused", NULL};
static const char *const cfg_optimizer_names[] = {"adam", "sgd", NULL};
static const char *const cfg_recompute_names[] = {"none", "selective", "full", NULL};
static const char *const cfg_selective_names[] = {"megatron", "torchtitan-op", NULL};
static const char *const cfg_fp8_recipe_names[] = {"delayed", "current", NULL};
static const char *const cfg_schedule_names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe", NULL};
static const char *const cfg_a2a_names[] = {"nccl", "deepep", "deepep-ll", NULL};
static const char *const cfg_moe_routing_names[] = {"fused", "expand", NULL};
static const char *const cfg_ar_kernel_names[] = {"nccl", "oneshot-twoshot", NULL};
static const char *const cfg_layer_flows_names[] = {"auto", "always", "never", NULL};
static const char *const cfg_transport_names[] = {"gpu-direct", "host-staged", NULL};
static const char *const cfg_progress_names[] = {"kernel", "cpu", NULL};
static const char *const cfg_ucc_tl_names[] = {"none", "ucp", "nccl", NULL};
static const char *const cfg_offload_names[] = {"none", "cpu", "nvme", NULL};
static const char *const cfg_pipe_engine_names[] = {"megatron", "deepspeed", "torch", NULL};
static const char *const cfg_device_names[] = {"gpu", "cpu", NULL};
static const char *const cfg_dim_names[] = {"tp", "cp", "pp", "dp", NULL};
static const char *const cfg_scheduler_names[] = {"continuous", "static", "chunked", "fused", NULL};
static const char *const cfg_arrival_names[] = {"poisson", "gamma", "uniform", "burst", NULL};
static const char *const cfg_lengths_names[] = {"fixed", "uniform", "file", NULL};
static const char *const cfg_preemption_names[] = {"recompute", "none", NULL};
static const char *const cfg_async_scheduling_names[] = {"off", "multiprocess", "on", NULL};
static const char *const cfg_spec_method_names[] = {"none", "draft", "mtp", NULL};
static const char *const cfg_router_names[] = {"round-robin", "least-loaded", "kv-aware", NULL};
static const char *const cfg_proto_names[] = {"ll", "ll128", "simple", NULL};
static const char *const cfg_link_class_names[] = {"intra", "network", NULL};
static const char *const cfg_node_scale_names[] = {"two_nodes", "more_nodes", NULL};
static const char *const cfg_routing_names[] = {"uniform", "zipf", "histogram", NULL};
static const char *const cfg_case_category_names[] = {"auto",        "training", "fsdp",
                                                      "memory",      "moe",      "collectives",
                                                      "kernels",     "serving",  "traces",
                                                      "megatron-ci", NULL};
static const char *const cfg_attn_names[] = {"fa2", "fa3", "cudnn", "triton", "fa1", NULL};
/* none, then cfg_dtype's names: training.grad_accum_dtype stores the dtype + 1 */
static const char *const cfg_grad_accum_names[] = {"none", "fp32", "tf32", "bf16", "fp16", NULL};
static const char *const cfg_grad_accum_pass_names[] = {"cast_add", "add", NULL};
static const char *const cfg_attention_choice_names[] = {"auto", "fa2",    "fa3",
                                                         "cudnn", "triton", "fa1", NULL};
static const char *const cfg_kclass_names[] = {"gemm",      "conv",      "attention",
                                               "elementwise", "optimizer", "other", NULL};

/* The one name table of each enum that reports and options print. */
static const char *cfg_enum_name(const char *const *names, size_t n, int v)
{
  return v >= 0 && (size_t)v < n ? names[v] : "?";
}

const char *cfg_case_category_name(int category)
{
  return cfg_enum_name(cfg_case_category_names, G_N_ELEMENTS(cfg_case_category_names) - 1, category);
}

const char *cfg_attn_impl_name(cfg_attn_impl a)
{
  return cfg_enum_name(cfg_attn_names, CFG_NATTN, (int)a);
}

const char *cfg_recompute_name(cfg_recompute r)
{
  return cfg_enum_name(cfg_recompute_names, G_N_ELEMENTS(cfg_recompute_names) - 1, (int)r);
}

bool cfg_recompute_parse(const char *name, cfg_recompute *out)
{
  for (int i = 0; cfg_recompute_names[i]; i++)
    if (strcmp(name, cfg_recompute_names[i]) == 0) {
      *out = (cfg_recompute)i;
      return true;
    }
  return false;
}

const char *cfg_scheduler_name(cfg_scheduler s)
{
  return cfg_enum_name(cfg_scheduler_names, G_N_ELEMENTS(cfg_scheduler_names) - 1, (int)s);
}

const char *cfg_a2a_name(cfg_a2a a)
{
  return cfg_enum_name(cfg_a2a_names, G_N_ELEMENTS(cfg_a2a_names) - 1, (int)a);
}

const char *cfg_dtype_name(cfg_dtype d)
{
  return d < CFG_NDTYPES ? cfg_dtype_names[d] : "?";
}

double cfg_dtype_scale_bytes(cfg_dtype d)
{
  switch (d) {
  case CFG_FP8_BLOCK: return 4.0 / 128; /* an fp32 per 1x128 tile (weights: per 128x128, less) */
  case CFG_MXFP8: return 1.0 / 32;      /* an E8M0 byte per 32 */
  case CFG_NVFP4: return 1.0 / 16;      /* an E4M3 byte per 16 (the fp32 per tensor is nothing) */
  default: return 0;
  }
}

double cfg_dtype_bytes(cfg_dtype d)
{
  static const double bytes[CFG_NDTYPES] = {4, 4, 2, 2, 1, 1, 0.5, 0.5, 1, 1, 0.5};
  return d < CFG_NDTYPES ? bytes[d] + cfg_dtype_scale_bytes(d) : 0;
}

cfg_dtype cfg_dtype_unit(cfg_dtype d)
{
  return d == CFG_FP8_BLOCK || d == CFG_MXFP8 ? CFG_FP8 : d == CFG_NVFP4 ? CFG_FP4 : d;
}

bool cfg_dtype_block_scaled(cfg_dtype d)
{
  return d == CFG_FP8_BLOCK || d == CFG_MXFP8 || d == CFG_NVFP4;
}

const char *cfg_proto_name(cfg_proto p)
{
  return p < CFG_NPROTOS ? cfg_proto_names[p] : "?";
}

const char *cfg_kernel_class_name(cfg_kernel_class k)
{
  return k < CFG_NKCLASSES ? cfg_kclass_names[k] : "?";
}

/* Each table row is the one definition of a key: where it decodes to, its type and unit, its
 * default (a constant the loader applies through cfg_defaults, or, `derived`, a rule load.c
 * computes from other keys), its allowed values or range, and a line for `dlsim schema`. */
#define ROW(s, k, t, m) .key = k, .type = t, .offset = offsetof(s, m)
/* The last arguments: the doc line, then optionally DEF(...) or DERIVED(...) and ranges. */
#define F_INT(s, k, m, lo, ...) {ROW(s, k, CFG_T_INT, m), .min = lo, .doc = __VA_ARGS__}
#define F_QTY(s, k, m, u, ...) {ROW(s, k, CFG_T_QTY, m), .unit = u, .doc = __VA_ARGS__}
#define F_FRAC(s, k, m, ...)                                                                    \
  {ROW(s, k, CFG_T_QTY, m), .unit = UNITS_FRACTION, .max = 1.0, .doc = __VA_ARGS__}
#define F_BOOL(s, k, m, ...) {ROW(s, k, CFG_T_BOOL, m), .doc = __VA_ARGS__}
#define F_STR(s, k, m, ...) {ROW(s, k, CFG_T_STRING, m), .doc = __VA_ARGS__}
#define F_PATH(s, k, m, ...) {ROW(s, k, CFG_T_PATH, m), .doc = __VA_ARGS__}
#define F_ENUM(s, k, m, n, ...) {ROW(s, k, CFG_T_ENUM, m), .names = n, .doc = __VA_ARGS__}
#define F_BY_ENUM(s, k, m, u, n, ...)                                                           \
  {ROW(s, k, CFG_T_QTY_BY_ENUM, m), .unit = u, .names = n, .doc = __VA_ARGS__}
#define F_MAP(s, k, m, sch, d) {ROW(s, k, CFG_T_MAP, m), .sub = &sch, .doc = d}
#define DEF(v) .has_def = true, .def = (v)
#define DEFS(a) .has_def = true, .defs = (a)
#define DEF_STR(v) .has_def = true, .def_str = (v)
#define DERIVED(text) .derived = (text)
#define UPTO(hi, reason) .max = (hi), .why = (reason)
#define SCHEMA(name, type, fields) {name, fields, G_N_ELEMENTS(fields), sizeof(type)}

/* ---- efficiency / calibration ------------------------------------------------------------ */

/* Used only where no calibration file says better (README: limits). GEMM: the median of the
 * measured best-shape BF16 efficiencies of A100 SXM / PCIe, H100, GH200 and B200 (81.1 %,
 * stas00/ml-engineering MAMF table, validation/kernels), with the K ramp fitted on the sm_90
 * table (validation/README.md); the other classes are guesses. */
static const double cfg_flops_efficiency_defaults[CFG_NKCLASSES] = {0.811, 0.60, 0.55,
                                                                    0.50,  0.50, 0.50};

/* Fused attention where no calibration says better: FlashAttention-2, its Triton version and
 * FlashAttention v1 as measured on A100 (the GPU they were written for), FlashAttention-3 and
 * cuDNN as on H100 (they need Hopper); fitted by validation/kernels/fit-attention.py on the
 * papers' non-causal figures (and the causal factor on A100's causal ones), checked on the
 * rest. */
/* Kernel time beside an NCCL kernel over its time alone, per class: the median over recurring
 * kernel shapes of at least 30 us in the two A100 fit traces (validation/interference/, README
 * there). Attention had no kernel in them: GEMM's value, an assumption; elementwise measured 0.92
 * and conv nothing: 1 (a kernel is not faster beside a collective). */
static const double cfg_interference_defaults[CFG_NKCLASSES] = {1.05, 1.0, 1.05, 1.0, 1.03, 1.0};

static const double cfg_attn_fwd_defaults[CFG_NATTN] = {0.724, 0.676, 0.626, 0.522, 0.230};
static const double cfg_attn_bwd_defaults[CFG_NATTN] = {0.634, 0.598, 0.548, 0.264, 0.272};
static const double cfg_attn_fwd_half_defaults[CFG_NATTN] = {30, 210, 110, 150, 30};
static const double cfg_attn_bwd_half_defaults[CFG_NATTN] = {240, 430, 380, 110, 70};
static const double cfg_attn_d64_defaults[CFG_NATTN] = {0.865, 0.793, 0.759, 1.052, 1.341};
/* The deterministic backward over the usual one, head dim 128, causal, 8K keys on H100: FA2
 * 166.0 TFLOP/s deterministic against its forward's 306.2 in one run (Dao-AILab/flash-attention
 * pull request #1893), over the 299 / 333 of its non-deterministic backward and forward (FA2
 * paper Fig. 7, FA3 paper Fig. 5; validation/kernels): 0.60; FA3 474.0 against 574.7 in the
 * same run: 0.825. cuDNN's, Triton's and FA1's are not measured anywhere: 1. */
static const double cfg_attn_det_defaults[CFG_NATTN] = {0.604, 0.825, 1.0, 1.0, 1.0};

static const cfg_field cfg_attention_eff_fields[] = {
    F_BY_ENUM(cfg_attention_eff, "fwd", fwd, UNITS_FRACTION, cfg_attn_names,
              "forward: fraction of the 16-bit peak at long sequences (head dim 128)", .max = 1.0,
              DEFS(cfg_attn_fwd_defaults)),
    F_BY_ENUM(cfg_attention_eff, "bwd", bwd, UNITS_FRACTION, cfg_attn_names,
              "backward: the same (FLOPs 2.5x the forward's)", .max = 1.0,
              DEFS(cfg_attn_bwd_defaults)),
    F_BY_ENUM(cfg_attention_eff, "fwd_half", fwd_half, UNITS_NUMBER, cfg_attn_names,
              "forward reaches L / (L + fwd_half) of its rate with L keys per query row",
              DEFS(cfg_attn_fwd_half_defaults)),
    F_BY_ENUM(cfg_attention_eff, "bwd_half", bwd_half, UNITS_NUMBER, cfg_attn_names,
              "the same for the backward", DEFS(cfg_attn_bwd_half_defaults)),
    F_BY_ENUM(cfg_attention_eff, "d64", d64, UNITS_FRACTION, cfg_attn_names,
              "what head dims of 64 or less reach relative to 128 (older kernels run them "
              "faster)", .max = 2.0,
              DEFS(cfg_attn_d64_defaults)),
    F_FRAC(cfg_attention_eff, "causal", causal,
           "what a causal kernel reaches of a full one at the same mean row length, beyond "
           "the masked half of its diagonal tiles",
           DEF(0.95)),
    F_BY_ENUM(cfg_attention_eff, "deterministic", deterministic, UNITS_FRACTION, cfg_attn_names,
              "under training.deterministic: what the backward reaches of its usual rate "
              "(FlashAttention serialises its dQ accumulation)", .max = 1.0,
              DEFS(cfg_attn_det_defaults)),
    F_QTY(cfg_attention_eff, "deterministic_bwd", deterministic_bwd, UNITS_SECONDS,
          "time a fused attention backward call takes on top of its model under "
          "training.deterministic; no preset sets it (a fit on Megatron-LM's CI did not hold on "
          "its other rows: validation/README.md, \"Deterministic mode\")",
          DEF(0.0), UPTO(0.1, "one attention backward call takes milliseconds, not seconds")),
};
static const cfg_schema cfg_schema_attention_eff =
    SCHEMA("attention", cfg_attention_eff, cfg_attention_eff_fields);

static const cfg_field cfg_efficiency_fields[] = {
    F_BY_ENUM(cfg_efficiency, "flops", flops_efficiency, UNITS_FRACTION, cfg_kclass_names,
              "fraction of peak FLOP/s each kernel class reaches (attention: kernels of no "
              "known implementation, e.g. in traces)", .max = 1.0,
              DEFS(cfg_flops_efficiency_defaults)),
    F_MAP(cfg_efficiency, "attention", attention, cfg_schema_attention_eff,
          "fused attention kernels by implementation (training.attention)"),
    F_FRAC(cfg_efficiency, "memory", memory_efficiency,
           "fraction of HBM bandwidth streaming kernels reach", DEF(0.80)),
    F_QTY(cfg_efficiency, "gemm_k_half", gemm_k_half, UNITS_NUMBER,
          "a GEMM with reduction dimension K reaches flops.gemm x K / (K + gemm_k_half) of peak",
          DEF(177)),
    F_BOOL(cfg_efficiency, "gemm_waves", gemm_waves,
           "a GEMM whose output shape is known runs in waves of output tiles over gpu.sms (the "
           "best of cuBLAS's tiles and split-K): padding and idle SMs cost. Off by default: the "
           "presets' GEMM parameters were fitted without it (validation/README.md gives a fit "
           "with it)",
           DEF(0)),
    F_QTY(cfg_efficiency, "gemm_tile_load", gemm_tile_load, UNITS_NUMBER,
          "with gemm_waves: a GEMM's output tile of tm x tn runs at 1 / (1 + L/tm + L/tn) of the "
          "tensor cores' rate, L this (its operands' loads), relative to cuBLAS's largest tile "
          "(256 x 128), which flops.gemm is (a fit on the sm_90 table, validation/README.md)",
          DEF(55.7)),
    F_QTY(cfg_efficiency, "sustained", sustained, UNITS_FRACTION,
           "fraction of the kernel benchmarks' FLOP/s a long training run sustains (clocks under "
           "power and thermal limits; fitted on A100, validation/fit-a100.sh)",
           DEF(0.818)),
    F_QTY(cfg_efficiency, "fp8_scale", fp8_scale, UNITS_FRACTION,
           "what fp8 kernels reach of their peak relative to 16-bit ones (H100 best-shape "
           "matmul: 70.9 % vs 80.3 %, stas00's MAMF table)",
           DEF(0.883)),
    F_QTY(cfg_efficiency, "fp4_scale", fp4_scale, UNITS_FRACTION,
           "what fp4 kernels (nvfp4, fp4) reach of their peak relative to 16-bit ones (B200, "
           "CUTLASS NVFP4 against torch bf16 at 2048-16384 rows: 38-43 % vs 60-63 %, vLLM PR 20646)",
           DEF(0.666)),
    F_QTY(cfg_efficiency, "launch_overhead", launch_overhead, UNITS_SECONDS,
          "fixed time added to every kernel", DEF(2e-6)),
    F_FRAC(cfg_efficiency, "gemm_stream", gemm_stream,
           "> 0: fraction of HBM bandwidth a 16-bit GEMM reaches where reading its weights bounds "
           "it (decode: a few rows against the whole matrix); 0: `memory`",
           DEF(0)),
    F_QTY(cfg_efficiency, "gemm_stream_overhead", gemm_stream_overhead, UNITS_SECONDS,
          "with gemm_stream: the fixed time of such a GEMM, in place of launch_overhead", DEF(0)),
    F_BY_ENUM(cfg_efficiency, "interference", interference, UNITS_NUMBER, cfg_kclass_names,
              "the factor each kernel class's time takes while a collective of its GPU is in "
              "flight, anywhere in the step (fitted on real A100 traces: "
              "validation/interference/; collectives.sm_reserved multiplies it by 1 / (1 - f))",
              .max = 3.0, DEFS(cfg_interference_defaults)),
    F_STR(cfg_efficiency, "source", source, "where the numbers come from",
          DEF_STR("dlsim defaults (not calibrated)")),
};
const cfg_schema cfg_schema_efficiency = SCHEMA("efficiency", cfg_efficiency, cfg_efficiency_fields);

/* Priors of the order of NCCL's own performance model: protocols LL < LL128 < Simple in
 * latency per step, network steps several times NVLink ones; link efficiencies as NVIDIA
 * states them (about 370 of 450 GB/s on NVLink4 for rings, 46-48 of 50 GB/s on NDR, about 480
 * GB/s bus bandwidth for NVLS all-reduce on 8 H100). Presets replace them with fits
 * (configs/calibration), which start from and are held near these values. */
static const double cfg_link_efficiency_defaults[CFG_NLINKCLASSES] = {0.82, 0.95};
static const double cfg_base_latency_defaults[CFG_NPROTOS] = {6e-6, 14e-6, 8e-6};
static const double cfg_hop_intra_defaults[CFG_NPROTOS] = {0.2e-6, 0.6e-6, 2.5e-6};
static const double cfg_hop_network_defaults[CFG_NPROTOS] = {2e-6, 3.5e-6, 12e-6};
static const double cfg_chunk_defaults[CFG_NPROTOS] = {16384, 131072, 524288};
static const double cfg_protocol_efficiency_defaults[CFG_NPROTOS] = {0.5, 120.0 / 128.0, 1.0};

static const cfg_field cfg_hop_fields[] = {
    {.key = "intra", .type = CFG_T_QTY_BY_ENUM,
     .offset = offsetof(cfg_nccl, hop_latency[CFG_LINK_INTRA]), .unit = UNITS_SECONDS,
     .names = cfg_proto_names, .doc = "per step over NVLink, by protocol",
     DEFS(cfg_hop_intra_defaults)},
    {.key = "network", .type = CFG_T_QTY_BY_ENUM,
     .offset = offsetof(cfg_nccl, hop_latency[CFG_LINK_NETWORK]), .unit = UNITS_SECONDS,
     .names = cfg_proto_names, .doc = "per step over the network, by protocol",
     DEFS(cfg_hop_network_defaults)},
};
/* hop_latency decodes straight into cfg_nccl (offsets are from the cfg_nccl start). */
static const cfg_schema cfg_schema_hop = {"nccl.hop_latency", cfg_hop_fields,
                                          G_N_ELEMENTS(cfg_hop_fields), sizeof(cfg_nccl)};

static const cfg_field cfg_nccl_fields[] = {
    F_BY_ENUM(cfg_nccl, "link_efficiency", link_efficiency, UNITS_FRACTION, cfg_link_class_names,
              "fraction of a link's bandwidth NCCL's rings and trees reach", .max = 1.0,
              DEFS(cfg_link_efficiency_defaults)),
    F_FRAC(cfg_nccl, "nvls_efficiency", nvls_efficiency,
           "the same for NVLink SHARP (in-switch) traffic", DEF(0.69)),
    F_QTY(cfg_nccl, "nvls_latency", nvls_latency, UNITS_SECONDS,
          "per NVLink SHARP collective (NVLS, NVLS-tree): set-up and synchronisation through the "
          "switch, in place of the base and per-NVLink-step latencies (NCCL's tuning model: 25 us)",
          DEF(25e-6)),
    F_FRAC(cfg_nccl, "p2p_efficiency", p2p_efficiency,
           "the same for send/recv and all-to-all (fewer channels per peer; fitted: "
           "nccl-a100-8gpu-sendrecv)",
           DEF(0.66)),
    F_FRAC(cfg_nccl, "deepep_efficiency", deepep_efficiency,
           "the same for DeepEP's MoE dispatch and combine over NVLink (fitted: "
           "deepep-h800-ep8-dispatch)",
           DEF(0.956)),
    F_QTY(cfg_nccl, "copy_bandwidth", copy_bandwidth, UNITS_BYTES_PER_S,
          "loads and stores per second of one GPU's NCCL channels (the SMs its kernels hold): a "
          "ring step reads what it receives and its own buffer and writes what it sends, so a "
          "ring of n GPUs moves (3n - 2)/(n - 1) bytes through them per byte on NVLink (all-reduce; "
          "(3n - 1)/(n - 1) all-gather and reduce-scatter); 0: no limit (fitted: "
          "vidur-h100-2gpu-allreduce)",
          DEF(0)),
    F_BY_ENUM(cfg_nccl, "base_latency", base_latency, UNITS_SECONDS, cfg_proto_names,
              "per collective: launch and set-up, by protocol", DEFS(cfg_base_latency_defaults)),
    {.key = "hop_latency", .type = CFG_T_MAP, .offset = 0, .sub = &cfg_schema_hop,
     .doc = "per algorithm step, by link class and protocol"},
    F_BY_ENUM(cfg_nccl, "chunk", chunk, UNITS_BYTES, cfg_proto_names,
              "pipeline chunk per channel (the fill of pipelined algorithms), by protocol",
              DEFS(cfg_chunk_defaults)),
    F_BY_ENUM(cfg_nccl, "protocol_efficiency", protocol_efficiency, UNITS_FRACTION,
              cfg_proto_names, "payload / wire bytes (LL 1/2, LL128 120/128)", .max = 1.0,
              DEFS(cfg_protocol_efficiency_defaults)),
    F_BY_ENUM(cfg_nccl, "nvls_tree_channel", nvls_tree_channel, UNITS_BYTES_PER_S,
              cfg_node_scale_names,
              "bus bandwidth one NVLS-tree channel reaches at most across two nodes and across "
              "more (NCCL's tuner, perChMaxNVLSTreeBw in src/graph/tuning.cc: lower past two "
              "nodes, where a tree's inner node serves its parent and two children at once); "
              "0: no ceiling"),
    F_BY_ENUM(cfg_nccl, "ll_max_bandwidth", ll_max_bandwidth, UNITS_BYTES_PER_S,
              cfg_node_scale_names,
              "bus bandwidth an LL ring or tree reaches at most, whatever its channels, across "
              "two nodes and across more (NCCL's tuner, llMaxBw in src/graph/tuning.cc: set by "
              "the host CPU's vendor across nodes); 0: no ceiling"),
    F_BY_ENUM(cfg_nccl, "tree_channel", tree_channel, UNITS_BYTES_PER_S, cfg_node_scale_names,
              "bus bandwidth one tree channel reaches at most across two nodes and across more "
              "(NCCL's tuner, perChMaxTreeBw); 0: no ceiling"),
    F_BY_ENUM(cfg_nccl, "tree_ll128_channel", tree_ll128_channel, UNITS_BYTES_PER_S,
              cfg_node_scale_names,
              "the same for a tree on LL128 (NCCL's tuner, perChMaxTreeLL128Bw); 0: no ceiling"),
    F_INT(cfg_nccl, "max_channels", max_channels, 1, "rings or trees used at once across nodes",
          DEF(16), UPTO(256, "NCCL runs at most 64 channels")),
    F_BOOL(cfg_nccl, "pxn", pxn,
           "on a rail-optimized fabric, a GPU reaches another node's GPU on another rail through "
           "the GPU of its own node on that rail (NVLink, then one rail), as NCCL does by default "
           "(NCCL_PXN_DISABLE=0); off, through the spine",
           DEF(1)),
    F_STR(cfg_nccl, "source", source, "where the numbers come from",
          DEF_STR("dlsim defaults (not calibrated)")),
};
const cfg_schema cfg_schema_nccl = SCHEMA("nccl", cfg_nccl, cfg_nccl_fields);

static const cfg_field cfg_calibration_fields[] = {
    F_STR(cfg_calibration, "gpu", gpu, "the GPU the file was fitted for"),
    F_STR(cfg_calibration, "notes", notes, "what it was fitted on"),
    F_MAP(cfg_calibration, "efficiency", efficiency, cfg_schema_efficiency,
          "the compute model's efficiencies (as gpu.efficiency)"),
    F_MAP(cfg_calibration, "nccl", nccl, cfg_schema_nccl, "NCCL's parameters (as nccl)"),
};
const cfg_schema cfg_schema_calibration =
    SCHEMA("calibration", cfg_calibration, cfg_calibration_fields);

/* ---- cluster ------------------------------------------------------------------------------ */

static const cfg_field cfg_gpu_fields[] = {
    F_STR(cfg_gpu, "name", name, "the GPU's name, for reports"),
    F_ENUM(cfg_gpu, "kind", kind, cfg_device_names,
           "the compute device: a GPU, or one CPU socket (memory and memory_bandwidth are its "
           "DDR, flops its AVX-512 / AMX peaks; unfused attention, CPU efficiency defaults)",
           DEF(CFG_DEVICE_GPU)),
    F_QTY(cfg_gpu, "memory", memory, UNITS_BYTES, "HBM capacity", DERIVED("required")),
    F_QTY(cfg_gpu, "memory_bandwidth", memory_bandwidth, UNITS_BYTES_PER_S, "HBM bandwidth",
          DERIVED("required")),
    F_BY_ENUM(cfg_gpu, "flops", flops, UNITS_FLOPS, cfg_unit_names,
              "dense peak FLOP/s by data type (a type the GPU lacks is left out)",
              DERIVED("required for the training dtype")),
    F_INT(cfg_gpu, "sms", sms, 0,
          "streaming multiprocessors (datasheet), over which GEMMs run in waves of output tiles "
          "with gpu.efficiency.gemm_waves; 0: unknown, GEMMs as if every wave were full",
          DEF(0), UPTO(1024, "GPUs have at most a few hundred SMs")),
    F_QTY(cfg_gpu, "power_limit", power_limit, UNITS_WATTS,
          "a power cap below power.gpu_tdp (nvidia-smi -pl): the SM clock, and with it the peak "
          "of compute-bound kernels, drops as the H100 curve of validation/kernels/"
          "h100_power_cap.csv says; memory-bound kernels keep HBM's rate; 0: power.gpu_tdp",
          DEF(0), UPTO(1200, "GB200's 1,200 W is the highest board power of NVIDIA's datasheets")),
    F_PATH(cfg_gpu, "calibration", calibration,
           "a calibration file (dlsim calibrate): its efficiencies and NCCL parameters apply "
           "where the cluster file does not set them; 'none' for none"),
    F_MAP(cfg_gpu, "efficiency", efficiency, cfg_schema_efficiency,
          "the compute model: defaults <- calibration file <- these"),
};
static const cfg_schema cfg_schema_gpu = SCHEMA("gpu", cfg_gpu, cfg_gpu_fields);

static const cfg_field cfg_intra_fields[] = {
    F_ENUM(cfg_intra, "kind", kind, cfg_intra_names, "how the GPUs of a node connect",
           DEF(CFG_INTRA_NVSWITCH)),
    F_QTY(cfg_intra, "bandwidth", bandwidth, UNITS_BYTES_PER_S, "per GPU, per direction",
          DERIVED("required with more than one GPU per node")),
    F_QTY(cfg_intra, "latency", latency, UNITS_SECONDS, "GPU to GPU", DEF(1e-6)),
    F_BOOL(cfg_intra, "nvls", nvls,
           "the NVSwitch reduces in the switch (NVLink SHARP, H100 and later)", DEF(0)),
};
static const cfg_schema cfg_schema_intra = SCHEMA("node.intra", cfg_intra, cfg_intra_fields);

static const cfg_field cfg_host_cpu_fields[] = {
    F_STR(cfg_host_cpu, "name", name, "the host CPUs, for reports"),
    F_QTY(cfg_host_cpu, "flops", flops, UNITS_FLOPS,
          "peak FP32 FLOP/s of all the node's sockets (cores x clock x FLOP per cycle)",
          DERIVED("required by parallel.offload: cpu")),
    F_QTY(cfg_host_cpu, "memory_bandwidth", memory_bandwidth, UNITS_BYTES_PER_S,
          "DDR bandwidth of all the node's sockets (channels x MT/s x 8 B)",
          DERIVED("required by parallel.offload: cpu")),
    F_FRAC(cfg_host_cpu, "memory_efficiency", memory_efficiency,
           "fraction of memory_bandwidth a streaming kernel reaches (STREAM triad on "
           "2-socket servers: about 0.8)", DEF(0.8)),
    F_QTY(cfg_host_cpu, "core_bandwidth", core_bandwidth, UNITS_BYTES_PER_S,
          "bytes one core reads plus writes per second: a host-staged collective's copies "
          "and CPU reduction run on one core per process (0: unknown, only the PCIe copies "
          "are charged)", DEF(0)),
    F_QTY(cfg_host_cpu, "dispatch_scale", dispatch_scale, UNITS_NUMBER,
          "the time these CPUs take to issue a framework's op (training.host_dispatch, which "
          "is timed on the x86 hosts of DGX H100 nodes) over that time: above 1 for slower "
          "single cores (0: the host keeps ahead of the GPUs)", DEF(1)),
    F_BOOL(cfg_host_cpu, "launch_blocking", launch_blocking,
           "CUDA_LAUNCH_BLOCKING=1: every kernel launch returns once the kernel has run, so the "
           "host's time per launch (training.host_dispatch) adds to the GPU's instead of "
           "running ahead of it",
           DEF(0)),
};
static const cfg_schema cfg_schema_host_cpu = SCHEMA("node.cpu", cfg_host_cpu, cfg_host_cpu_fields);

static const cfg_field cfg_node_fields[] = {
    F_INT(cfg_node_spec, "count", count, 1, "nodes", DEF(1), UPTO(1 << 20, "dlsim simulates clusters of at most 2^20 GPUs")),
    F_INT(cfg_node_spec, "gpus_per_node", gpus_per_node, 1, "GPUs per node", DERIVED("required"), UPTO(1024, "the largest NVLink domains hold a few hundred GPUs")),
    F_MAP(cfg_node_spec, "intra", intra, cfg_schema_intra,
          "the NVLink / NVSwitch domain of one node"),
    F_INT(cfg_node_spec, "nics_per_node", nics_per_node, 0,
          "network adapters per node (one per GPU on DGX nodes)",
          DERIVED("gpus_per_node with more than one node, else 0"), UPTO(64, "a node carries a few dozen network adapters at most")),
    F_INT(cfg_node_spec, "nvlink_domain", nvlink_domain, 1,
          "GPUs on one NVSwitch fabric, a multiple of gpus_per_node (72 on a GB200 NVL72 rack "
          "of 18 four-GPU trays): they talk over NVLink, and each tray keeps its own NICs, "
          "host memory and NVMe", DERIVED("gpus_per_node"), UPTO(1024, "the largest NVLink domains hold a few hundred GPUs")),
    F_QTY(cfg_node_spec, "host_memory", host_memory, UNITS_BYTES,
          "CPU memory per node (ZeRO-Offload)", DEF(0)),
    F_QTY(cfg_node_spec, "nvme", nvme, UNITS_BYTES, "NVMe per node (ZeRO-Infinity)", DEF(0)),
    F_MAP(cfg_node_spec, "cpu", cpu, cfg_schema_host_cpu,
          "the host CPUs, where an offloaded optimizer steps (parallel.offload: cpu)"),
};
static const cfg_schema cfg_schema_node = SCHEMA("node", cfg_node_spec, cfg_node_fields);

static const cfg_field cfg_tier_fields[] = {
    F_STR(cfg_tier, "name", name, "the tier's name, for reports", DERIVED("tierN")),
    F_QTY(cfg_tier, "latency", latency, UNITS_SECONDS, "per switch traversal", DEF(1e-6)),
    F_INT(cfg_tier, "nodes_per_switch", nodes_per_switch, 1,
          "nodes below one switch of this tier (a multiple of the tier below's)",
          DERIVED("the top tier spans all nodes; required below it"), UPTO(1 << 20, "dlsim simulates clusters of at most 2^20 GPUs")),
    F_QTY(cfg_tier, "oversubscription", oversubscription, UNITS_NUMBER,
          "downlink / uplink capacity of this tier's switches (1: full bisection)", DEF(1.0)),
};
const cfg_schema cfg_schema_tier = SCHEMA("network.tiers", cfg_tier, cfg_tier_fields);

static const cfg_field cfg_background_fields[] = {
    F_STR(cfg_background, "links", links,
          "which links: node N (its NICs), node N rail K, rail K (NIC K of every node), uplink G "
          "(leaf group G's uplinks) or spine (every leaf uplink)", DERIVED("required")),
    F_STR(cfg_background, "direction", direction, "up (out of the nodes), down or both",
          DEF_STR("both")),
    F_QTY(cfg_background, "fraction", fraction, UNITS_NUMBER,
          "the share of each link the flow may take, in (0, 1]", DERIVED("or bandwidth")),
    F_QTY(cfg_background, "bandwidth", bandwidth, UNITS_BYTES_PER_S,
          "the rate the flow may take on each link", DERIVED("or fraction")),
    F_QTY(cfg_background, "start", start, UNITS_SECONDS, "when the flow starts in the step",
          DEF(0.0)),
    F_QTY(cfg_background, "duration", duration, UNITS_SECONDS, "how long it lasts (0: to the end)",
          DEF(0.0)),
};
static const cfg_schema cfg_schema_background =
    SCHEMA("network.background", cfg_background, cfg_background_fields);

static const cfg_field cfg_network_fields[] = {
    F_ENUM(cfg_network, "topology", topology, cfg_topology_names,
           "how nodes connect (rail-optimized: NIC k of every node on rail switch k of its leaf "
           "group)",
           DEF(CFG_TOPO_FAT_TREE)),
    F_ENUM(cfg_network, "rails", rails, cfg_rails_names,
           "rail-optimized: traffic between rails crosses the spine (spine), or there is no spine "
           "between rails and it moves to the destination's rail over NVLink first (only, as "
           "NCCL's PXN does)",
           DEF(CFG_RAILS_SPINE)),
    F_BOOL(cfg_network, "sharp", sharp, "the switches reduce in the network (InfiniBand SHARP)",
           DEF(0)),
    F_QTY(cfg_network, "nic_bandwidth", nic_bandwidth, UNITS_BYTES_PER_S,
          "per NIC, per direction", DERIVED("required with more than one node")),
    {ROW(cfg_network, "tiers", CFG_T_SEQ_MAP, tiers), .count_offset = offsetof(cfg_network, ntiers),
     .sub = &cfg_schema_tier,
     .doc = "switch tiers, lowest first (default: one non-blocking switch over all nodes)"},
    {ROW(cfg_network, "background", CFG_T_SEQ_MAP, background),
     .count_offset = offsetof(cfg_network, nbackground), .sub = &cfg_schema_background,
     .doc = "other tenants' traffic (a noisy neighbour, a checkpoint write): flows the DES puts "
            "on chosen links (the analytic engine ignores them)"},
};
static const cfg_schema cfg_schema_network = SCHEMA("network", cfg_network, cfg_network_fields);

/* Per-component failure rates fitted on the 419 unexpected interruptions of Llama 3 405B's
 * 54-day pre-training snapshot on 16,384 H100 (2,048 nodes; arXiv:2407.21783, Table 5), with
 * the component counts dlsim derives for dgx-h100 at 2,048 nodes (16,384 NICs, 768 switches,
 * 32,768 links): a fit, checked elsewhere (validation/lifecycle/README.md). */
#define LC_MTBF_MAX 1e12 /* seconds: 30,000 years, beyond any part's rating */
#define F_MTBF(k, m, ...)                                                                       \
  {ROW(cfg_reliability, k, CFG_T_QTY, m), .unit = UNITS_SECONDS, .doc = __VA_ARGS__,            \
   UPTO(LC_MTBF_MAX, "no part is rated beyond 30,000 years between failures")}
static const cfg_field cfg_reliability_fields[] = {
    F_MTBF("gpu_mtbf", gpu_mtbf,
           "mean time between failures of one GPU (HBM, SRAM, GSP, NVLink, thermal, silent data "
           "corruption): 268 of Llama 3's 419 on 16,384 GPUs in 54 days; 0: never",
           DEF(16384.0 * 1296 / 268 * 3600)),
    F_MTBF("node_mtbf", node_mtbf,
           "... of one node's host hardware (unplanned host maintenance, SSD, power supply, "
           "chassis, IO board, CPU, DRAM): 46 of Llama 3's 419 on 2,048 nodes",
           DEF(2048.0 * 1296 / 46 * 3600)),
    F_MTBF("software_mtbf", software_mtbf,
           "... of the software of one node (software bugs, NCCL watchdog timeouts, dependencies): "
           "63 of Llama 3's 419 on 2,048 nodes",
           DEF(2048.0 * 1296 / 63 * 3600)),
    F_MTBF("nic_mtbf", nic_mtbf, "... of one network adapter: 7 of Llama 3's 419 on 16,384 NICs",
           DEF(16384.0 * 1296 / 7 * 3600)),
    F_MTBF("switch_mtbf", switch_mtbf,
           "... of one network switch: half of Llama 3's 35 switch-or-cable interruptions (the "
           "paper does not split them; an assumption) on 768 switches",
           DEF(768.0 * 1296 / 17.5 * 3600)),
    F_MTBF("link_mtbf", link_mtbf,
           "... of one cable (with its transceivers): the other half, on 32,768 links",
           DEF(32768.0 * 1296 / 17.5 * 3600)),
    F_INT(cfg_reliability, "switch_radix", switch_radix, 2,
          "ports per switch, to count switches: a non-top tier of a fat tree takes NICs / "
          "(radix / 2) switches, the top tier NICs / radix; links: NICs per tier (64: NVIDIA "
          "Quantum-2 NDR)",
          DEF(64), UPTO(4096, "the largest switches have a few hundred ports")),
};
static const cfg_schema cfg_schema_reliability =
    SCHEMA("reliability", cfg_reliability, cfg_reliability_fields);

static const cfg_field cfg_power_fields[] = {
    F_QTY(cfg_power, "gpu_tdp", gpu_tdp, UNITS_WATTS,
          "the GPU's board power limit (H100 SXM: 700 W, A100 SXM: 400 W, NVIDIA datasheets)",
          DEF(700)),
    F_FRAC(cfg_power, "compute", compute,
           "fraction of gpu_tdp while compute-bound kernels run (at the limit: an 8x H100 node "
           "training peaked at 8.4 kW, Latif et al. 2024, arXiv:2412.08602)",
           DEF(1.0)),
    F_FRAC(cfg_power, "memory_bound", memory_bound,
           "... while memory-bound kernels run (assumed: tensor cores idle, HBM busy)", DEF(0.7)),
    F_FRAC(cfg_power, "communication", communication,
           "... while the GPU only waits on a collective (assumed)", DEF(0.5)),
    F_FRAC(cfg_power, "idle", idle,
           "... in a pipeline bubble, a checkpoint stall or a restart (assumed: an idle H100 "
           "draws about 70 W)",
           DEF(0.1)),
    F_QTY(cfg_power, "node", node, UNITS_WATTS,
          "per node beside its GPUs (CPUs, DRAM, NICs, NVSwitches, fans)",
          DERIVED("350 W per GPU of the node: 8.4 kW measured on an 8x H100 node (Latif et al. "
                  "2024) less 8 x 700 W, over 8")),
    F_QTY(cfg_power, "switch", switch_power, UNITS_WATTS,
          "per network switch (assumed: the order of a 64-port NDR switch)", DEF(750)),
    {ROW(cfg_power, "pue", CFG_T_QTY, pue), .unit = UNITS_NUMBER, .min = 1,
     .doc = "facility power / IT power (assumed: hyperscale fleets report 1.08-1.10)", DEF(1.1),
     UPTO(5, "even old machine rooms stay under a PUE of 3")},
};
static const cfg_schema cfg_schema_power = SCHEMA("power", cfg_power, cfg_power_fields);

static const cfg_field cfg_storage_fields[] = {
    F_QTY(cfg_storage, "bandwidth", bandwidth, UNITS_BYTES_PER_S,
          "aggregate write (and read) bandwidth of the checkpoint store (Llama 3's Tectonic: 2 "
          "TB/s sustained, 7 TB/s peak, arXiv:2407.21783 Sec. 3.3.1)",
          DEF(2e12)),
    F_QTY(cfg_storage, "node_bandwidth", node_bandwidth, UNITS_BYTES_PER_S,
          "per node towards the store: caps the aggregate at nodes x this",
          DERIVED("nics_per_node x network.nic_bandwidth (the GPU network's)")),
    F_QTY(cfg_storage, "host_bandwidth", host_bandwidth, UNITS_BYTES_PER_S,
          "GPU to host memory, per GPU: an asynchronous checkpoint's snapshot (assumed: PCIe 5.0 "
          "x16's 64 GB/s at 80 %)",
          DEF(51.2e9)),
};
static const cfg_schema cfg_schema_storage = SCHEMA("storage", cfg_storage, cfg_storage_fields);

static const cfg_field cfg_cost_fields[] = {
    {ROW(cfg_cost, "gpu_hour", CFG_T_QTY, gpu_hour), .unit = UNITS_NUMBER,
     .doc = "dollars per GPU-hour (a rental price, which includes its power: then set kwh to 0); "
            "0: the GPUs are owned and not counted",
     DEF(0)},
    {ROW(cfg_cost, "kwh", CFG_T_QTY, kwh), .unit = UNITS_NUMBER,
     .doc = "dollars per kWh of facility energy (US industrial average 2023, EIA: about 8 "
            "cents)",
     DEF(0.08)},
};
static const cfg_schema cfg_schema_cost = SCHEMA("cost", cfg_cost, cfg_cost_fields);

/* Stragglers are off unless asked for: published fleets differ too much for one default
 * (validation/lifecycle/README.md: FALCON, ByteDance, Llama 3). */
static const cfg_field cfg_stragglers_fields[] = {
    {ROW(cfg_stragglers, "sigma", CFG_T_QTY, sigma), .unit = UNITS_NUMBER,
     .doc = "lognormal sigma of each GPU's lasting compute-time factor, drawn once per run (0.02: "
            "a 2 % spread between GPUs)",
     DEF(0), UPTO(2, "a sigma of 2 makes one GPU in 40 over 50x slower")},
    F_FRAC(cfg_stragglers, "fraction", fraction,
           "fraction of the GPUs (rounded to a count) that run `slowdown` times slower for the "
           "whole run (chosen by the seed)",
           DEF(0)),
    {ROW(cfg_stragglers, "slowdown", CFG_T_QTY, slowdown), .unit = UNITS_NUMBER,
     .doc = "compute-time factor of the slow GPUs (at least 1)", DEF(2),
     UPTO(100, "a GPU 100x slower has failed, not straggled")},
    {ROW(cfg_stragglers, "jitter", CFG_T_QTY, jitter), .unit = UNITS_NUMBER,
     .doc = "lognormal sigma of each GPU's compute-time factor drawn anew every step (transient "
            "slowdowns: thermal throttling, host interference)",
     DEF(0), UPTO(2, "a sigma of 2 makes one GPU in 40 over 50x slower")},
    F_INT(cfg_stragglers, "seed", seed, 0, "seed of the draws", DEF(1)),
    F_INT(cfg_stragglers, "steps", steps, 1,
          "steps the DES simulates with fresh draws (the analytic engine takes the expected "
          "slowest rank in closed form)",
          DEF(8), UPTO(1000, "each step is a whole DES run")),
};
static const cfg_schema cfg_schema_stragglers =
    SCHEMA("stragglers", cfg_stragglers, cfg_stragglers_fields);

static const cfg_field cfg_cluster_fields[] = {
    F_STR(cfg_cluster, "name", name, "the cluster's name, for reports"),
    F_MAP(cfg_cluster, "gpu", gpu, cfg_schema_gpu, "the GPU"),
    F_MAP(cfg_cluster, "node", node, cfg_schema_node, "the nodes"),
    F_MAP(cfg_cluster, "network", network, cfg_schema_network, "the network between nodes"),
    F_MAP(cfg_cluster, "nccl", nccl, cfg_schema_nccl,
          "NCCL's behaviour: defaults <- gpu.calibration's nccl <- these"),
    F_MAP(cfg_cluster, "reliability", reliability, cfg_schema_reliability,
          "how often parts fail, for a run estimate (training.tokens or training.steps)"),
    F_MAP(cfg_cluster, "power", power, cfg_schema_power, "what the machine draws"),
    F_MAP(cfg_cluster, "storage", storage, cfg_schema_storage, "where checkpoints go"),
    F_MAP(cfg_cluster, "cost", cost, cfg_schema_cost, "what the machine costs to run"),
    F_MAP(cfg_cluster, "stragglers", stragglers, cfg_schema_stragglers,
          "slow GPUs, and what a synchronous step pays for them"),
};
const cfg_schema cfg_schema_cluster = SCHEMA("cluster", cfg_cluster, cfg_cluster_fields);

/* ---- model -------------------------------------------------------------------------------- */

static const cfg_field cfg_moe_fields[] = {
    F_INT(cfg_moe, "experts", experts, 1, "routed experts per MoE layer", DERIVED("required"), UPTO(1 << 16, "MoE models have at most a few thousand experts")),
    F_INT(cfg_moe, "top_k", top_k, 1, "experts each token is routed to", DERIVED("required"), UPTO(1 << 16, "MoE models have at most a few thousand experts")),
    F_INT(cfg_moe, "expert_ffn_hidden", expert_ffn_hidden, 1, "an expert's MLP width",
          DERIVED("ffn_hidden"), UPTO(1 << 22, "the widest MLPs are near 2^17")),
    F_INT(cfg_moe, "shared_experts", shared_experts, 0, "experts every token goes through",
          DERIVED("0")),
    F_INT(cfg_moe, "every", every, 1, "one MoE layer every N layers", DERIVED("1")),
    F_INT(cfg_moe, "first_dense", first_dense, 0, "dense layers before the first MoE layer",
          DEF(0)),
    F_ENUM(cfg_moe, "routing", routing, cfg_routing_names, "how tokens spread over experts",
           DEF(CFG_ROUTING_UNIFORM)),
    F_QTY(cfg_moe, "zipf_s", zipf_s, UNITS_NUMBER,
          "routing zipf: P(expert of rank i) ~ 1 / i^s", DEF(1.0)),
    F_PATH(cfg_moe, "histogram", histogram, "routing histogram: a file of per-expert loads"),
    F_QTY(cfg_moe, "capacity_factor", capacity_factor, UNITS_NUMBER,
          "tokens an expert takes, in units of the mean (0: unbounded)", DEF(0.0)),
    F_BOOL(cfg_moe, "drop_tokens", drop_tokens,
           "tokens over capacity are dropped (else the expert runs them)", DEF(0)),
    F_INT(cfg_moe, "max_nodes", max_nodes, 0,
          "device-limited routing: a token goes to at most this many nodes (0: no limit)", DEF(0)),
};
static const cfg_schema cfg_schema_moe = SCHEMA("model.moe", cfg_moe, cfg_moe_fields);

static const cfg_field cfg_mla_fields[] = {
    F_INT(cfg_mla, "q_rank", q_rank, 1, "multi-head latent attention: query rank"),
    F_INT(cfg_mla, "kv_rank", kv_rank, 1, "key/value rank"),
    F_INT(cfg_mla, "rope_dim", rope_dim, 0, "decoupled rotary width per head", DERIVED("0")),
};
static const cfg_schema cfg_schema_mla = SCHEMA("model.mla", cfg_mla, cfg_mla_fields);

static const cfg_field cfg_model_fields[] = {
    F_ENUM(cfg_model, "kind", kind, cfg_model_kind_names, "the kind of model",
           DEF(CFG_MODEL_TRANSFORMER)),
    F_STR(cfg_model, "name", name, "the model's name, for reports",
          DERIVED("the cnn preset, else \"model\"")),
    F_INT(cfg_model, "layers", layers, 1, "transformer blocks", DERIVED("required (transformers)"), UPTO(10000, "the deepest published transformers have a few hundred layers")),
    F_INT(cfg_model, "hidden", hidden, 1, "model width", DERIVED("required (transformers)"), UPTO(1 << 20, "the widest dense models have hidden sizes near 2^15")),
    F_INT(cfg_model, "heads", heads, 1, "attention heads", DERIVED("required (transformers)"), UPTO(1 << 16, "models have at most a few hundred heads")),
    F_INT(cfg_model, "kv_heads", kv_heads, 1,
          "key/value heads (grouped-query attention when < heads)", DERIVED("heads"), UPTO(1 << 16, "models have at most a few hundred heads")),
    F_INT(cfg_model, "ffn_hidden", ffn_hidden, 1, "MLP width", DERIVED("4 x hidden"), UPTO(1 << 22, "the widest MLPs are near 2^17")),
    F_INT(cfg_model, "vocab", vocab, 1, "vocabulary size", DERIVED("required (transformers)"), UPTO(1 << 24, "vocabularies hold at most a few hundred thousand tokens")),
    F_INT(cfg_model, "seq_len", seq_len, 1, "sequence length in tokens",
          DERIVED("required (transformers); 2048 for generic models"), UPTO(1 << 24, "the longest trained contexts are a few million tokens")),
    F_ENUM(cfg_model, "activation", activation, cfg_activation_names,
           "MLP activation (swiglu: gated, three weight matrices)", DEF(CFG_ACT_GELU)),
    F_BOOL(cfg_model, "tied_embeddings", tied_embeddings,
           "the output layer shares the embedding's weights", DERIVED("true for gelu, else false")),
    F_ENUM(cfg_model, "rotary", rotary, cfg_rotary_names,
           "rotary position embedding of queries and keys, as kernels: fused (one per tensor, "
           "Transformer Engine's), unfused (PyTorch's elementwise ops, several passes), none",
           DEF(CFG_ROTARY_NONE)),
    F_BOOL(cfg_model, "qk_norm", qk_norm,
           "queries and keys normalised per head before attention (qk-layernorm): a norm "
           "kernel each", DEF(0)),
    F_MAP(cfg_model, "moe", moe, cfg_schema_moe, "mixture of experts (kind moe-transformer)"),
    F_INT(cfg_model, "head_dim", head_dim, 1, "width of one attention head",
          DERIVED("hidden / heads"), UPTO(1 << 16, "heads are at most a few hundred wide")),
    F_MAP(cfg_model, "mla", mla, cfg_schema_mla,
          "DeepSeek's multi-head latent attention (absent: none)"),
    F_STR(cfg_model, "preset", preset, "cnn: resnet18, resnet34, resnet50, resnet101, resnet152"),
    F_INT(cfg_model, "image_size", image_size, 1, "cnn: input resolution", DEF(224), UPTO(1 << 15, "images wider than 32K pixels are not CNN inputs")),
    F_INT(cfg_model, "num_classes", num_classes, 1, "cnn: classifier outputs", DEF(1000), UPTO(1 << 24, "classifiers have at most millions of classes")),
    F_QTY(cfg_model, "params", params, UNITS_NUMBER,
          "generic: total parameters (what memory estimators take)"),
    F_QTY(cfg_model, "largest_layer_params", largest_layer_params, UNITS_NUMBER,
          "generic: the largest layer, for ZeRO-3's gathered layer", DERIVED("0 (generic)")),
};
const cfg_schema cfg_schema_model = SCHEMA("model", cfg_model, cfg_model_fields);

/* ---- workloads ----------------------------------------------------------------------------- */

static const cfg_field cfg_training_fields[] = {
    F_INT(cfg_training, "global_batch", global_batch, 1, "sequences (or samples) per step",
          DERIVED("required"), UPTO(1 << 26, "the largest batches are a few tens of thousands of sequences")),
    F_INT(cfg_training, "micro_batch", micro_batch, 1, "sequences per micro-batch", DEF(1), UPTO(1 << 20, "a micro-batch of a million sequences fits no GPU")),
    F_ENUM(cfg_training, "dtype", dtype, cfg_dtype_names, "training data type", DEF(CFG_BF16)),
    F_ENUM(cfg_training, "optimizer", optimizer, cfg_optimizer_names, "the optimizer",
           DEF(CFG_OPT_ADAM)),
    F_ENUM(cfg_training, "recompute", recompute, cfg_recompute_names,
           "activation recomputation", DEF(CFG_RECOMPUTE_NONE)),
    F_BOOL(cfg_training, "flash_attention", flash_attention,
           "fused attention (FlashAttention): no attention scores kept", DEF(1)),
    F_BOOL(cfg_training, "distill", distill,
           "knowledge distillation: a frozen teacher of the student's shape (what Megatron-LM's "
           "ModelOpt distillation builds when the teacher checkpoint has no model config) runs "
           "its forward, logits and the KL loss against the student's every micro-batch",
           DEF(0)),
    F_BOOL(cfg_training, "deterministic", deterministic,
           "deterministic algorithms (Megatron-LM's --deterministic-mode, "
           "torch.use_deterministic_algorithms): every tensor allocated empty is first filled "
           "with NaN (a write of each layer's activations in forward and of their gradients in "
           "backward), and the fused attention's backward takes "
           "gpu.efficiency.attention.deterministic_bwd more per call",
           DEF(0)),
    F_STR(cfg_training, "framework", framework,
          "the training framework whose defaults the workload takes (configs/frameworks: "
          "megatron, nemo, deepspeed, fsdp, torchtitan, horovod; each file says where its "
          "numbers come from); none: dlsim's generic defaults",
          DEF_STR("none")),
    F_ENUM(cfg_training, "attention", attention, cfg_attention_choice_names,
           "the fused attention kernels: fa2 (FlashAttention-2, what PyTorch's SDPA runs), fa3 "
           "(FlashAttention-3, Hopper), cudnn (cuDNN fused attention, Transformer Engine's), "
           "triton (FlashAttention in Triton, MPT's until 2024), fa1 (FlashAttention v1); "
           "auto: fa2",
           DEF(0)),
    F_ENUM(cfg_training, "grad_dtype", grad_dtype, cfg_dtype_names,
           "gradients as accumulated and reduced (Megatron: fp32 main gradients; DeepSpeed and "
           "the ZeRO paper: fp16)",
           DEF(CFG_FP32)),
    F_ENUM(cfg_training, "grad_accum_dtype", grad_accum_dtype, cfg_grad_accum_names,
           "DeepSpeed's BF16 optimizer (bf16.enabled with ZeRO 0 or 1; its "
           "data_types.grad_accum_dtype): the backward writes gradients in the training dtype, "
           "kept beside a full buffer of this dtype that every micro-batch's are added into (a "
           "pass over the stage's parameters) and that is reduced, first cast whole to "
           "grad_dtype if that is narrower (its communication_data_type; memory: "
           "other.grad_cast); none: the backward accumulates in place, in grad_dtype",
           DEF(0)),
    F_ENUM(cfg_training, "grad_accum_pass", grad_accum_pass, cfg_grad_accum_pass_names,
           "with grad_accum_dtype, how each micro-batch's 16-bit gradients are added into its "
           "buffer: cast_add (DeepSpeed's BF16 optimizer, update_hp_grads: a cast, then an add, "
           "the 16-bit gradients kept: 18 bytes a parameter in fp32), add (a gradient hook of "
           "NeMo 1.x's O2 optimizers, MainParamsOptimizerWrapper or apex's DistributedFusedAdam: "
           "one mixed-dtype add_ per tensor, which is freed at once: 10 bytes a parameter)",
           DEF(CFG_GRAD_ACCUM_CAST_ADD)),
    F_BOOL(cfg_training, "grad_accum_fusion", grad_accum_fusion,
           "Megatron-LM's gradient-accumulation fusion (its default): the weight-gradient GEMM "
           "adds into the fp32 main gradient; false (--no-gradient-accumulation-fusion): it "
           "writes a fresh 16-bit gradient that the data-parallel hook adds into main_grad, one "
           "memory-bound pass per micro-batch over each layer's parameters (reads the gradient "
           "and main_grad, writes main_grad; under training.deterministic the fresh gradient is "
           "also NaN-filled first)",
           DEF(1)),
    {ROW(cfg_training, "tokens", CFG_T_QTY, tokens), .unit = UNITS_NUMBER,
     .doc = "a whole run: tokens to train on (steps = tokens / (global_batch x seq_len)); dlsim "
            "run then estimates the run; 0: one step",
     DEF(0), UPTO(1e16, "the largest runs train on a few tens of trillions of tokens")},
    F_INT(cfg_training, "steps", steps, 0, "a whole run given in steps instead of tokens; 0: one step",
          DEF(0), UPTO(1 << 30, "runs take at most a few million steps")),
    {ROW(cfg_training, "host_dispatch", CFG_T_QTY, host_dispatch), .unit = UNITS_SECONDS,
     .doc = "host (CPU) time the framework spends launching one kernel in eager "
            "mode: the host issues them in program order this far apart and runs ahead of the "
            "GPU, so a long kernel hides the next launches and only runs of short kernels are "
            "host-bound (fitted on Megatron-LM's CI, validation/megatron_ci); 0: the host always "
            "keeps ahead",
     DEF(0), UPTO(0.01, "launching a kernel takes microseconds, not tens of milliseconds")},
    F_ENUM(cfg_training, "selective", selective, cfg_selective_names,
           "what `recompute: selective` drops and recomputes in backward: megatron (the attention "
           "core, Korthikanti et al. 2022: nothing with fused attention); torchtitan-op "
           "(torchtitan's per-op policy for dense blocks: it saves the outputs of a block's first, "
           "third, ... matmul and of attention, and recomputes every other matmul and op)",
           DEF(CFG_SELECTIVE_MEGATRON)),
    F_BOOL(cfg_training, "eager_ops", eager_ops,
           "the block's RMSNorms, rotary embedding, SwiGLU and grouped-query key/value "
           "repetition as eager PyTorch runs them without torch.compile: one kernel per op, "
           "each a pass over the tensor, in fp32 where the model upcasts (torchtitan's Llama); "
           "the fp32 cross-entropy's gradients then count in backward's working set",
           DEF(0)),
    F_BOOL(cfg_training, "eager_loss", eager_loss,
           "the loss alone as eager PyTorch's cross_entropy(logits.float()) where the blocks are "
           "compiled (torchtitan compiles each TransformerBlock, not its loss_fn: train.py @ "
           "9dec370): its fp32 gradients count in backward's working set and its backward moves "
           "16 bytes a logit more; training.eager_ops implies it",
           DEF(0)),
    F_BOOL(cfg_training, "loss_fusion", loss_fusion,
           "the vocabulary-parallel cross-entropy as one fused pass over the fp32 logits (12 "
           "bytes a logit beyond reading them, and a 4-byte read in backward); false: Megatron-"
           "LM's unfused one (without --cross-entropy-loss-fusion, its default), a pass per op "
           "over the shard: the fp32 copy, max, in-place subtract, exp, sum and divide (36 bytes "
           "a logit), and in backward the in-place multiply and the cast back (12)",
           DEF(1)),
    F_BOOL(cfg_training, "te_cp_ring", te_cp_ring,
           "context parallelism runs Transformer Engine's ring attention "
           "(AttnFuncWithCPAndKVP2P, as Megatron-LM and NeMo do): besides its attention calls "
           "and merges, each later ring step's host work (the send/receive batch and its waits, "
           "stream switches and events, the load-balanced halves' views and copies, the output "
           "and softmax-statistics corrections) costs the host 2 modelled kernels forward and 3 "
           "backward, counted from its source (validation/megatron_ci/te_cp_ring_ops.csv)",
           DEF(0)),
    F_BOOL(cfg_training, "tp_coll_host", tp_coll_host,
           "each tensor-parallel collective that eager Python issues through torch.distributed "
           "(Transformer Engine's allreduce, gather_along_first_dim, reduce_scatter_along_first_dim) "
           "costs the host its calls in the unit of the te_cp_ring ops (14 a modelled kernel): "
           "an all-reduce 2, an all-gather 4, a reduce-scatter 5, one more when its handle is "
           "waited for later; userbuffers' overlapped all-gathers and reduce-scatters "
           "(parallel.tp_comm_overlap) are issued from C++ and cost none",
           DEF(0)),
    F_BOOL(cfg_training, "te_userbuffers", te_userbuffers,
           "with parallel.tp_comm_overlap, the overlap is Transformer Engine's userbuffers (as "
           "Megatron-LM and NeMo run it): QKV and FC1 forward and the projection's and FC2's "
           "input gradients run one GEMM piece per TP rank of the tokens, the row-parallel "
           "forward GEMMs 4 pieces of their outputs on the SMs the reduce-scatter's 16 leave, "
           "and the last piece's reduce-scatter is exposed; each piece pads its own tiles "
           "(initialize_ub's defaults); false: each GEMM runs whole beside its collective",
           DEF(0)),
    F_BOOL(cfg_training, "test_mode", test_mode,
           "Megatron-LM's --test-mode: with model.qk_norm, every layer's forward all-gathers "
           "the q/k norm weights over the data- and the tensor-parallel group and compares "
           "each rank's four tensors with its own, each compare a read of its result on the "
           "host (Attention.run_realtime_tests); costs the host its ops' time per layer "
           "forward, counted from its source in the unit of the te_cp_ring ops",
           DEF(0)),
    F_BOOL(cfg_training, "fp8_params", fp8_params,
           "with training.dtype fp8: the model's weights are kept in fp8 (Transformer Engine's "
           "quantized_model_init, NeMo's FP8_PARAMS / Megatron-LM's --fp8-param-gather), one "
           "byte a parameter, so the distributed optimizer all-gathers updated parameters in 8 "
           "bits; the fp32 master weights stay in the optimizer",
           DEF(0)),
    F_BOOL(cfg_training, "loss_parallel", loss_parallel,
           "with tensor parallelism, the cross-entropy runs on each rank's vocabulary shard as "
           "DTensor's loss_parallel (torchtitan's default): its backward holds three fp32 copies "
           "of the shard beside the saved log-probabilities and the output projection keeps its "
           "whole gathered input (counted in memory)",
           DEF(0)),
    F_ENUM(cfg_training, "fp8_recipe", fp8_recipe, cfg_fp8_recipe_names,
           "how training.dtype fp8 scales each tensor: delayed (Transformer Engine's "
           "DelayedScaling, from the amax history; its cast kernels record the amax) or current "
           "(Float8CurrentScaling, Megatron-LM's --fp8-recipe tensorwise: each GEMM input's "
           "amax in a pass of its own before the cast, and the norms write 16 bits)",
           DEF(CFG_FP8_DELAYED)),
};
static const cfg_schema cfg_schema_training = SCHEMA("training", cfg_training, cfg_training_fields);

static const cfg_field cfg_parallel_fields[] = {
    F_INT(cfg_parallel, "tp", tp, 1, "tensor parallelism", DEF(1)),
    F_INT(cfg_parallel, "pp", pp, 1, "pipeline stages", DEF(1)),
    F_INT(cfg_parallel, "dp", dp, 1, "data parallelism", DERIVED("GPUs / (tp x pp x cp)")),
    F_INT(cfg_parallel, "cp", cp, 1, "context parallelism (ring attention)", DEF(1)),
    F_ENUM(cfg_parallel, "cp_exchange", cp_exchange, cfg_cp_exchange_names,
           "how context-parallel attention gets the other ranks' K and V: ring passes one chunk "
           "beside each attention step, the gradients back the same way (Transformer Engine's "
           "AttnFuncWithCP); allgather gathers them all beside the first step, again in backward, "
           "and passes the fp32 dK, dV from rank to rank beside each step (PyTorch's "
           "context_parallel with rotate method allgather, torchtitan's default: K and V one "
           "head per query head, its fp32 merges and gradient sums on the compute stream)",
           DEF(CFG_CP_RING)),
    F_INT(cfg_parallel, "ep", ep, 1, "expert parallelism, carved out of data parallelism",
          DEF(1)),
    F_BOOL(cfg_parallel, "sequence_parallel", sequence_parallel,
           "Megatron's sequence parallelism inside tensor-parallel groups", DEF(0)),
    F_BOOL(cfg_parallel, "tp_comm_overlap", tp_comm_overlap,
           "with sequence parallelism, the tensor-parallel all-gather before a column-parallel "
           "GEMM and the reduce-scatter after a row-parallel one run beside it in chunks "
           "(Transformer Engine's userbuffers, Megatron's --tp-comm-overlap)",
           DEF(0)),
    F_BOOL(cfg_parallel, "tp_async_dgrad", tp_async_dgrad,
           "the tensor-parallel all-reduce (or reduce-scatter) of a column-parallel GEMM's "
           "input gradient runs while its weight gradient is computed (Megatron-LM's "
           "asynchronous all-reduce); false: after it, and the next kernel waits (Megatron-"
           "DeepSpeed's autograd all-reduce, the deepspeed profile)",
           DEF(1)),
    F_QTY(cfg_parallel, "tp_sync", tp_sync, UNITS_SECONDS,
          "before each blocking tensor-parallel collective the GPU waits this long per rank of "
          "the group beyond the first, counted as compute (a cost per collective, not per byte, "
          "that Megatron-DeepSpeed's A100 runs show; its cause is not identified, the "
          "deepspeed profile's value is fitted: validation/README.md, Megatron-DeepSpeed's "
          "wait per collective)",
          DEF(0)),
    F_BOOL(cfg_parallel, "zero3_backward_post", zero3_backward_post,
           "with ZeRO-3, a layer's backward all-gather is issued only once the layer after it "
           "has computed its gradients (PyTorch FSDP's BackwardPrefetch.BACKWARD_POST, "
           "Composer's and so llm-foundry's default), so the layer's backward waits for it; "
           "false: it is prefetched under that layer's backward (BACKWARD_PRE, PyTorch's "
           "default, and FSDP2's explicit prefetch)",
           DEF(0)),
    F_ENUM(cfg_parallel, "zero3_copies", zero3_copies, cfg_zero3_copies_names,
           "the copies a ZeRO-3 framework makes on the GPU around its collectives, each a "
           "memory-bound kernel on the compute stream of so many bytes per parameter of the "
           "layer: fsdp1 (PyTorch FSDP's flat parameter) assembles the flat gradient from the "
           "parameters' views (2 x the parameter bytes), casts it to the reduction dtype if it "
           "differs (parameter + reduction bytes) and pre-divides it (2 x the reduction bytes) "
           "before each reduce-scatter; fsdp2 (fully_shard) copies each all-gather's output out "
           "into the parameters (2 x the parameter bytes) and the gradients into the "
           "reduce-scatter's input, cast to the reduction dtype (parameter + reduction bytes); "
           "deepspeed (ZeRO stage 3) concatenates each gathered parameter out of the flat "
           "all-gather buffer (2 x the parameter bytes), copies each gradient into its reduce "
           "bucket (2 x the parameter bytes), casts the bucket if the reduction dtype differs, "
           "interleaves it into the reduce-scatter's input and pre-divides it (4 x the reduction "
           "bytes), plus the shard's copies (1/N); "
           "none: no copies (torch/distributed/fsdp/_runtime_utils.py, "
           "_fully_shard/_fsdp_collectives.py; deepspeed/runtime/zero/stage3.py, "
           "partition_parameters.py, runtime/comm/coalesced_collectives.py)",
           DEF(CFG_ZERO3_COPIES_NONE)),
    F_BOOL(cfg_parallel, "overlap_param_gather", overlap_param_gather,
           "ZeRO-1/2 (Megatron's distributed optimizer): the updated parameters are gathered "
           "while the next step's forward runs, not after the optimizer "
           "(Megatron's --overlap-param-gather); with the interleaved schedule one gather per "
           "model chunk, which that chunk's first forward waits for (Megatron's per-chunk "
           "param_sync_func); otherwise one gather per parallel.gradient_bucket, in forward "
           "order, each awaited by the first forward of its bucket's layers (Megatron's "
           "forward pre-hooks); DualPipe and ZB-V: hidden under the whole step, a lower bound",
           DEF(0)),
    F_ENUM(cfg_parallel, "schedule", schedule, cfg_schedule_names,
           "pipeline schedule; zb-h1 and zb-v (zero bubble at 1F1B's memory, Qi et al. 2024; zb-v: "
           "two chunks per rank in a V, virtual_stages: 2) and dualpipe (DeepSeek-V3: "
           "bidirectional, two copies of the parameters, an even pp) split each backward into "
           "its input- and weight-gradient passes",
           DEF(CFG_SCHED_1F1B)),
    F_ENUM(cfg_parallel, "pipeline_engine", pipeline_engine, cfg_pipe_engine_names,
           "who runs the pipeline: megatron (receives posted ahead, gradients reduced in buckets "
           "under the last backward) or deepspeed (DeepSpeed's 2021 PipelineEngine: TrainSchedule's "
           "1F1B as instructions, each transfer blocking the stage until its peer is there, "
           "gradients reduced after the last step; schedule 1f1b only) or torch "
           "(torch.distributed.pipelining before torch 2.8, torchtitan's: passes and transfers as "
           "megatron's, but every stage holds a receive buffer per micro-batch for its input and "
           "one for its output's gradient, and keeps every micro-batch's output until the next "
           "step; counted in memory)",
           DEF(CFG_PIPE_MEGATRON)),
    F_BOOL(cfg_parallel, "pp_reshard_after_forward", pp_reshard_after_forward,
           "ZeRO-3 with pipeline parallelism: each layer's parameters are gathered again for "
           "every micro-batch; false keeps a stage's parameters gathered and its gradients "
           "unsharded (in training.grad_dtype) across the step's micro-batches, reduce-scattered "
           "after the last (FSDP2's reshard_after_forward=False under torch.distributed."
           "pipelining, torchtitan's choice; counted in memory)",
           DEF(1)),
    F_INT(cfg_parallel, "virtual_stages", virtual_stages, 1,
          "model chunks per pipeline rank (interleaved; zb-v: 2)", DEF(1), UPTO(1024, "interleaving runs a few chunks per pipeline rank")),
    F_INT(cfg_parallel, "zero", zero, 0, "ZeRO stage (0 to 3)", .max = 3, DEF(0)),
    F_ENUM(cfg_parallel, "offload", offload, cfg_offload_names,
           "ZeRO-Offload / ZeRO-Infinity target of the optimizer states", DEF(CFG_OFFLOAD_NONE)),
    F_BOOL(cfg_parallel, "offload_params", offload_params,
           "ZeRO-3 also keeps parameters off the GPU", DEF(0)),
    {ROW(cfg_parallel, "placement", CFG_T_SEQ_ENUM, placement),
     .count_offset = offsetof(cfg_parallel, nplacement), .names = cfg_dim_names, .max = CFG_NDIMS,
     .doc = "how dimensions map onto ranks, innermost first", .derived = "[tp, cp, pp, dp]"},
    F_QTY(cfg_parallel, "gradient_bucket", gradient_bucket, UNITS_BYTES,
          "data-parallel gradient bucket (PyTorch DDP bucket_cap_mb = 25)", DEF(25.0 * 1048576)),
    F_BOOL(cfg_parallel, "uneven_stages", uneven_stages,
           "layers need not divide into pp x virtual_stages chunks", DEF(0)),
    F_BOOL(cfg_parallel, "moe_overlap", moe_overlap,
           "each MoE layer runs two half batches, one's all-to-all under the other's compute",
           DEF(0)),
    F_INT(cfg_parallel, "processes_per_gpu", processes_per_gpu, 1,
          "MPS: processes sharing each GPU's SMs and memory (AccDP), each its own rank: the "
          "degrees multiply to GPUs x this; needs an MPI runtime (NCCL refuses two ranks on "
          "one GPU)",
          DEF(1), UPTO(48, "MPS serves at most 48 clients per GPU (Volta and later)")),
};
static const cfg_schema cfg_schema_parallel = SCHEMA("parallel", cfg_parallel, cfg_parallel_fields);

static const cfg_field cfg_requests_fields[] = {
    F_QTY(cfg_requests, "rate", rate, UNITS_PER_SECOND, "requests per second (open loop)",
          DERIVED("required unless arrival is burst, concurrency is set or a trace is replayed")),
    F_ENUM(cfg_requests, "arrival", arrival, cfg_arrival_names,
           "arrival process (burst: all at time 0)", DEF(CFG_ARRIVAL_POISSON)),
    F_INT(cfg_requests, "count", count, 1, "requests simulated", DEF(1000)),
    F_INT(cfg_requests, "prompt_tokens", prompt_tokens, 1, "prompt length (mean)",
          DERIVED("required unless lengths come from a file or trace"), UPTO(1 << 24, "the longest contexts are a few million tokens")),
    F_INT(cfg_requests, "output_tokens", output_tokens, 1, "output length (mean)",
          DERIVED("required unless lengths come from a file or trace"), UPTO(1 << 24, "the longest contexts are a few million tokens")),
    F_INT(cfg_requests, "seed", seed, 0, "random seed", DEF(1)),
    F_QTY(cfg_requests, "burstiness", burstiness, UNITS_NUMBER,
          "gamma arrivals: shape (1 = Poisson, < 1 burstier)", DEF(1.0)),
    F_ENUM(cfg_requests, "distribution", distribution, cfg_lengths_names,
           "how prompt and output lengths vary", DERIVED("file with lengths_file, else fixed")),
    F_FRAC(cfg_requests, "spread", spread,
           "uniform: lengths in [mean (1 - spread), mean (1 + spread)]", DEF(0.5)),
    F_PATH(cfg_requests, "lengths_file", lengths_file,
           "CSV with prompt_tokens, output_tokens columns"),
    F_PATH(cfg_requests, "trace", trace,
           "CSV of arrival_s, prompt_tokens, output_tokens: replayed as is"),
    F_INT(cfg_requests, "concurrency", concurrency, 0,
          "> 0: closed loop, this many clients each waiting for its answer", DEF(0)),
    F_QTY(cfg_requests, "ramp", ramp, UNITS_SECONDS,
          "closed loop: client i of the concurrency sends its first request at i x ramp / "
          "concurrency, as a benchmark client's ramp-up (AIPerf --concurrency-ramp-duration); "
          "0: all at once",
          DEF(0.0)),
    F_INT(cfg_requests, "warmup", warmup, 0,
          "the first requests sent load the server but are left out of every figure, as a "
          "benchmark client's warm-up (AIPerf and genai-perf --warmup-request-count)",
          DEF(0)),
    F_INT(cfg_requests, "prefix_tokens", prefix_tokens, 0,
          "leading prompt tokens shared by the requests of a group", DERIVED("shared_prefix, else 0")),
    F_INT(cfg_requests, "prefix_groups", prefix_groups, 1, "distinct shared prefixes", DEF(1)),
    F_INT(cfg_requests, "shared_prefix", shared_prefix, 0,
          "the same as prefix_tokens (its newer name; give one, or both equal)",
          DERIVED("prefix_tokens")),
    F_INT(cfg_requests, "turns", turns, 1,
          "requests per conversation: turn j's prompt is the whole conversation so far (turn "
          "j-1's prompt and answer) and a new user message of a drawn prompt length less the "
          "shared prefix; the arrival process starts conversations",
          DEF(1), UPTO(1 << 16, "conversations run a few hundred turns")),
    F_QTY(cfg_requests, "think_time", think_time, UNITS_SECONDS,
          "turns: from an answer's last token to the next turn's arrival at the engine (assumed: "
          "a user reading and typing)",
          DEF(5.0)),
};
static const cfg_schema cfg_schema_requests =
    SCHEMA("serving.requests", cfg_requests, cfg_requests_fields);

static const cfg_field cfg_slo_fields[] = {
    F_QTY(cfg_slo, "ttft", ttft, UNITS_SECONDS, "time to first token (the HiDL tutorial's)",
          DEF(5.0)),
    F_QTY(cfg_slo, "tbt", tbt, UNITS_SECONDS, "mean time between tokens of a request",
          DEF(25e-3)),
    F_FRAC(cfg_slo, "attainment", attainment,
           "fraction of requests meeting both, for --find-max-rate", DEF(0.9)),
};
static const cfg_schema cfg_schema_slo = SCHEMA("serving.slo", cfg_slo, cfg_slo_fields);

static const cfg_field cfg_kv_offload_fields[] = {
    F_QTY(cfg_kv_offload, "size", size, UNITS_BYTES,
          "host memory per replica for KV blocks evicted from the GPUs (vLLM's "
          "kv_offloading_size, summed over the replica's GPUs); 0: no host tier",
          DEF(0)),
    F_QTY(cfg_kv_offload, "bandwidth", bandwidth, UNITS_BYTES_PER_S,
          "host link per GPU a hit in host memory comes back over (PCIe 5.0 x16, NVLink-C2C)",
          DERIVED("storage.host_bandwidth of the cluster")),
};
static const cfg_schema cfg_schema_kv_offload =
    SCHEMA("serving.kv_offload", cfg_kv_offload, cfg_kv_offload_fields);

static const cfg_field cfg_speculative_fields[] = {
    F_ENUM(cfg_speculative, "method", method, cfg_spec_method_names,
           "speculative decoding: a draft model proposes, or the model's multi-token-prediction "
           "head (one more layer, run once per proposed token)",
           DEF(CFG_SPEC_NONE)),
    F_INT(cfg_speculative, "tokens", tokens, 1, "k: tokens proposed per decode step",
          DERIVED("the entries of acceptance_profile, else 1"),
          UPTO(CFG_MAX_SPEC_TOKENS, "engines propose at most a few tokens per step")),
    F_FRAC(cfg_speculative, "acceptance", acceptance,
           "probability each proposed token is accepted (independent): (1 - a^(k+1)) / (1 - a) "
           "tokens per step",
           DERIVED("required unless acceptance_profile is given")),
    {ROW(cfg_speculative, "acceptance_profile", CFG_T_SEQ_QTY, profile),
     .unit = UNITS_FRACTION, .count_offset = offsetof(cfg_speculative, nprofile),
     .max = CFG_MAX_SPEC_TOKENS,
     .doc = "instead: the acceptance rate of each position (k entries; position i counts only "
            "if 1..i-1 were accepted)"},
    F_MAP(cfg_speculative, "draft", draft, cfg_schema_model,
          "method draft: the draft model, a preset name under configs/models or a mapping of "
          "the keys of model; it runs with serving.tp on the same GPUs"),
};
static const cfg_schema cfg_schema_speculative =
    SCHEMA("serving.speculative", cfg_speculative, cfg_speculative_fields);
/* A pool of a disaggregated deployment: the same keys for prefill and decode, so that a planner's
 * overlay (serving.prefill.tp=4) reads as the aggregated one does. */
static const cfg_field cfg_pool_fields[] = {
    F_INT(cfg_pool, "tp", tp, 1, "tensor parallelism per replica of the pool", DEF(1)),
    F_INT(cfg_pool, "pp", pp, 1, "pipeline stages per replica of the pool", DEF(1)),
    F_INT(cfg_pool, "ep", ep, 1, "expert parallelism (not yet simulated beyond 1)", DEF(1)),
    F_INT(cfg_pool, "replicas", replicas, 1, "replicas (workers) in the pool", DEF(1)),
    F_INT(cfg_pool, "max_batch", max_batch, 1, "sequences per iteration at most",
          DERIVED("serving.max_batch")),
    F_INT(cfg_pool, "max_tokens", max_tokens, 1, "tokens per iteration",
          DERIVED("serving.max_tokens")),
    F_ENUM(cfg_pool, "router", router, cfg_router_names, "how requests go to the pool's replicas",
           DERIVED("serving.router")),
};
static const cfg_schema cfg_schema_pool = SCHEMA("serving pool", cfg_pool, cfg_pool_fields);

static const cfg_field cfg_disagg_fields[] = {
    F_INT(cfg_disagg, "direct_decode_below", direct_decode_below, 0,
          "prompts shorter than this many tokens skip the prefill pool: a decode worker prefills "
          "them itself",
          DEF(0)),
};
static const cfg_schema cfg_schema_disagg = SCHEMA("serving.disagg", cfg_disagg, cfg_disagg_fields);

static const cfg_field cfg_custom_ar_fields[] = {
    F_ENUM(cfg_custom_ar, "kernel", kernel, cfg_ar_kernel_names,
           "tensor-parallel all-reduces inside a node: NCCL's, or the engine's own one-shot "
           "(every rank loads all peers' buffers over NVLink) and two-shot (reduce-scatter then "
           "all-gather by NVLink loads, a flag barrier each) by the size limits below",
           DEF(CFG_AR_NCCL)),
    F_QTY(cfg_custom_ar, "oneshot_tp2", oneshot_tp2, UNITS_BYTES,
          "largest message run one-shot with TP 2", DEF(0)),
    F_QTY(cfg_custom_ar, "oneshot_tp4", oneshot_tp4, UNITS_BYTES,
          "largest message run one-shot with TP 3-4", DEF(0)),
    F_QTY(cfg_custom_ar, "oneshot_tp8", oneshot_tp8, UNITS_BYTES,
          "largest message run one-shot with TP 5-8 (more GPUs: NCCL)", DEF(0)),
    F_BOOL(cfg_custom_ar, "twoshot", twoshot,
           "larger messages run two-shot up to max_size (false: NCCL)", DEF(0)),
    F_QTY(cfg_custom_ar, "max_size", max_size, UNITS_BYTES,
          "the engine's IPC buffer: larger messages go to NCCL", DEF(0)),
};
static const cfg_schema cfg_schema_custom_ar =
    SCHEMA("serving.custom_allreduce", cfg_custom_ar, cfg_custom_ar_fields);

static const cfg_field cfg_serving_fields[] = {
    F_ENUM(cfg_serving, "dtype", dtype, cfg_dtype_names, "weights' data type", DEF(CFG_BF16)),
    F_INT(cfg_serving, "tp", tp, 1, "tensor parallelism per replica", DEF(1)),
    F_INT(cfg_serving, "pp", pp, 1, "pipeline stages per replica", DEF(1)),
    F_INT(cfg_serving, "ep", ep, 1,
          "expert parallelism: GPUs a replica's routed experts spread over; > 1: attention "
          "data parallel over ep / tp ranks of TP tp, each with its own batch and KV cache",
          DEF(1), UPTO(1024, "the widest deployments spread experts over a few hundred GPUs")),
    F_STR(cfg_serving, "engine", engine,
          "the serving engine whose defaults the workload takes (configs/engines: vllm, trtllm, "
          "sglang; each file says where its numbers come from); none: dlsim's generic defaults",
          DEF_STR("none")),
    F_INT(cfg_serving, "max_batch", max_batch, 1, "sequences per iteration at most", DEF(256)),
    F_ENUM(cfg_serving, "scheduler", scheduler, cfg_scheduler_names,
           "batching: continuous (vLLM V0, Orca), static, chunked prefill (Sarathi-Serve, vLLM "
           "V1), fused (Flover)",
           DEF(CFG_SCHEDULER_CONTINUOUS)),
    F_MAP(cfg_serving, "requests", requests, cfg_schema_requests, "the request stream"),
    F_ENUM(cfg_serving, "kv_dtype", kv_dtype, cfg_dtype_names, "KV cache entries",
           DERIVED("dtype, or bf16 for int8 / int4 weights")),
    F_INT(cfg_serving, "replicas", replicas, 1, "data-parallel copies behind the router", DEF(1)),
    F_ENUM(cfg_serving, "router", router, cfg_router_names,
           "how requests go to replicas (kv-aware: to the most of the prompt cached, else the most "
           "free KV)",
           DEF(CFG_ROUTER_ROUND_ROBIN)),
    F_INT(cfg_serving, "max_tokens", max_tokens, 1,
          "tokens per iteration (vLLM max_num_batched_tokens)",
          DERIVED("2048 for chunked, else max(2048, max_model_len)")),
    F_INT(cfg_serving, "max_model_len", max_model_len, 1,
          "longest prompt + output a request may have", DERIVED("model.seq_len, else 4096"), UPTO(1 << 24, "the longest contexts are a few million tokens")),
    F_INT(cfg_serving, "block_size", block_size, 1, "tokens per KV block (paging)", DEF(16), UPTO(1 << 16, "KV blocks hold tens to hundreds of tokens")),
    F_INT(cfg_serving, "kv_blocks", kv_blocks, 1,
          "KV blocks per replica as measured, overriding the model",
          DERIVED("computed from the memory weights and activations leave")),
    F_FRAC(cfg_serving, "gpu_memory_utilization", gpu_memory_utilization,
           "fraction of GPU memory the engine may take (vLLM)", DEF(0.9)),
    F_FRAC(cfg_serving, "kv_cache_free_fraction", kv_cache_free_fraction,
           "> 0: TensorRT-LLM's rule instead: the KV cache takes this fraction of what weights "
           "and activations leave free",
           DEF(0)),
    F_ENUM(cfg_serving, "preemption", preemption, cfg_preemption_names,
           "a full KV cache preempts the newest request (recompute, vLLM) or nothing is admitted "
           "that could not finish (none, TensorRT-LLM)",
           DEF(CFG_PREEMPT_RECOMPUTE)),
    F_BOOL(cfg_serving, "prefix_caching", prefix_caching,
           "full KV blocks of prompts and answers stay cached after their request (a prefix "
           "tree of blocks per replica, least recently used evicted first): a request whose "
           "prompt starts with cached blocks skips their prefill",
           DERIVED("prefix_cache, else false")),
    F_BOOL(cfg_serving, "prefix_cache", prefix_cache,
           "the same as prefix_caching (its newer name), which it overrides",
           DERIVED("prefix_caching")),
    F_MAP(cfg_serving, "kv_offload", kv_offload, cfg_schema_kv_offload,
          "a host-memory tier of the prefix cache"),
    F_MAP(cfg_serving, "speculative", speculative, cfg_schema_speculative,
          "speculative decoding"),
    F_QTY(cfg_serving, "iteration_overhead", iteration_overhead, UNITS_SECONDS,
          "host work per iteration (scheduling, sampling)", DEF(0)),
    F_ENUM(cfg_serving, "async_scheduling", async_scheduling, cfg_async_scheduling_names,
           "the scheduler plans the next iteration while the GPUs run this one (on; multiprocess: "
           "only with more than one GPU per replica, vLLM's multiprocess executor): "
           "iteration_overhead hides under the GPU time, and a request arriving during an "
           "iteration first runs in the one after the next",
           DEF(CFG_ASYNC_OFF)),
    F_QTY(cfg_serving, "request_overhead", request_overhead, UNITS_SECONDS,
          "time per request outside the engine (API server, tokenizer)", DEF(0)),
    F_FRAC(cfg_serving, "decode_attention_bandwidth", decode_attention_bandwidth,
           "fraction of HBM bandwidth the engine's paged decode attention kernel reaches reading "
           "the KV cache with many (sequence, KV head) items in flight (0: the GPU's "
           "efficiency.memory; configs/engines say where theirs comes from)",
           DEF(0)),
    F_QTY(cfg_serving, "decode_attention_half", decode_attention_half, UNITS_NUMBER,
          "with decode_attention_bandwidth: (sequence, KV head) items of one decode attention "
          "kernel at which it reaches half that rate (each item streams its own KV; a kernel "
          "short of items splits the keys, flash-decoding, up to four times this)",
          DEF(0)),
    F_FRAC(cfg_serving, "decode_attention_mha_bandwidth", decode_attention_mha_bandwidth,
           "decode_attention_bandwidth for models with as many KV heads as query heads (MHA), "
           "whose decode kernel has no group of query heads to share a KV tile (0: "
           "decode_attention_bandwidth)",
           DEF(0)),
    F_QTY(cfg_serving, "decode_attention_mha_half", decode_attention_mha_half, UNITS_NUMBER,
          "decode_attention_half with decode_attention_mha_bandwidth", DEF(0)),
    F_BOOL(cfg_serving, "decode_attention_per_query_head", decode_attention_per_query_head,
           "the decode attention kernel reads a KV head's K and V once for every query head of "
           "its group (a thread block per sequence and query head: TensorRT-LLM's masked "
           "multi-head attention up to v0.6, before the XQA kernel of v0.7) instead of once "
           "for the group",
           DEF(0)),
    F_ENUM(cfg_serving, "moe_routing", moe_routing, cfg_moe_routing_names,
           "MoE layers: fused (the grouped GEMM gathers each expert's tokens itself: vLLM's and "
           "SGLang's fused_moe, one align launch, moe_sum combines) or expand (top-k, a sort in "
           "four launches, a gather of every copy by expert and a weighted combine, each a "
           "kernel of its own: TensorRT-LLM's runMoe)",
           DEF(CFG_MOE_ROUTING_FUSED)),
    F_INT(cfg_serving, "moe_tile", moe_tile, 1,
          "rows of the MoE grouped GEMM's tile: each expert's rows are padded to whole tiles "
          "(vLLM's fused_moe BLOCK_SIZE_M 64; TensorRT-LLM's CUTLASS tiles 128)",
          DEF(64)),
    F_MAP(cfg_serving, "slo", slo, cfg_schema_slo, "service-level objectives"),
    F_ENUM(cfg_serving, "a2a_prefill", a2a_prefill, cfg_a2a_names,
           "ep > 1: dispatch / combine kernels of iterations with prefill tokens (DeepEP normal)",
           DEF(CFG_A2A_DEEPEP)),
    F_ENUM(cfg_serving, "a2a_decode", a2a_decode, cfg_a2a_names,
           "ep > 1: dispatch / combine kernels of decode-only iterations (DeepEP low-latency)",
           DEF(CFG_A2A_DEEPEP_LL)),
    F_BOOL(cfg_serving, "two_batch_overlap", two_batch_overlap,
           "ep > 1: each iteration runs two micro-batches, one's all-to-all under the other's "
           "compute (SGLang --enable-two-batch-overlap, DeepSeek's dual micro-batch)",
           DEF(0)),
    F_FRAC(cfg_serving, "tbo_overlap", tbo_overlap,
           "ep > 1 with two_batch_overlap: fraction of the shorter of a micro-batch's compute "
           "and all-to-alls hidden under the longer (1: a perfect overlap; fitted on SGLang's "
           "two-batch-overlap gains, validation/README.md)",
           DEF(0.7)),
    F_MAP(cfg_serving, "prefill", prefill, cfg_schema_pool,
          "the prefill pool of a disaggregated deployment (with serving.decode; the two pools "
          "replace serving.tp, pp, ep and replicas)"),
    F_MAP(cfg_serving, "decode", decode, cfg_schema_pool,
          "the decode pool of a disaggregated deployment (with serving.prefill); the KV cache of "
          "each request moves to it over the cluster's links"),
    F_MAP(cfg_serving, "disagg", disagg, cfg_schema_disagg, "disaggregated deployments"),
    F_MAP(cfg_serving, "custom_allreduce", custom_allreduce, cfg_schema_custom_ar,
          "the engine's own all-reduce kernels (configs/engines)"),
};
static const cfg_schema cfg_schema_serving = SCHEMA("serving", cfg_serving, cfg_serving_fields);

static const cfg_field cfg_collectives_fields[] = {
    F_STR(cfg_collectives, "algorithm", algorithm,
          "auto (NCCL's tuner, or with cpu progress the runtime's size rules) or ring, tree, rhd, "
          "hierarchical, nvls, nvls-tree, sharp, pairwise, direct, rd, multi-leader",
          DEF_STR("auto")),
    F_STR(cfg_collectives, "protocol", protocol, "auto, ll, ll128 or simple", DEF_STR("auto")),
    F_ENUM(cfg_collectives, "a2a", a2a, cfg_a2a_names,
           "MoE dispatch / combine kernels: NCCL all-to-all, or DeepEP's (normal or low-latency)",
           DEF(CFG_A2A_NCCL)),
    F_QTY(cfg_collectives, "sm_reserved", sm_reserved, UNITS_FRACTION,
           "fraction of the SMs communication kernels hold: compute beside a collective slows "
           "by 1 / (1 - sm_reserved)",
           DEF(0.0)),
    F_ENUM(cfg_collectives, "layer_flows", layer_flows, cfg_layer_flows_names,
           "the DES's collectives inside layer passes: auto runs a family of groups (tp, cp, ep, "
           "ZeRO-3's dp) as flows when a link it crosses carries other traffic, else in closed "
           "form (then exact); always runs them all as flows; never keeps the closed form (fast, "
           "blind to contention with other traffic)",
           DEF(CFG_LAYER_FLOWS_AUTO)),
    F_INT(cfg_collectives, "layer_flow_budget", layer_flow_budget, 0,
          "with layer_flows auto, the most transfers the DES lets in-layer flows add to a step "
          "(SimGrid runs some 35,000 a second): past it they keep the closed form and the run "
          "report says so; 0: no limit", DEF(1000000)),
    F_STR(cfg_collectives, "runtime", runtime,
          "the communication runtime whose constants the workload takes (configs/runtimes: "
          "nccl, mpi-mvapich, mpi-ucx, mpi-cxi, gloo; each file says where its numbers come from)",
          DEF_STR("nccl")),
    F_ENUM(cfg_collectives, "transport", transport, cfg_transport_names,
           "GPU buffers go GPU-direct (GPUDirect RDMA, CUDA IPC) or through host memory (each "
           "collective copies its buffer down and back over storage.host_bandwidth)",
           DEF(CFG_TRANSPORT_GPU_DIRECT)),
    F_ENUM(cfg_collectives, "progress", progress, cfg_progress_names,
           "kernel: NCCL's kernels and tuner (they hold sm_reserved of the SMs); cpu: a host "
           "thread drives the runtime's point-to-point messages, holds no SMs and runs the "
           "size rules below",
           DEF(CFG_PROGRESS_KERNEL)),
    F_ENUM(cfg_collectives, "ucc_tl", ucc_tl, cfg_ucc_tl_names,
           "an MPI over UCC: its transport layer; nccl runs NCCL's kernels under MPI (kernel "
           "progress plus call_latency)",
           DEF(CFG_UCC_TL_NONE)),
    F_QTY(cfg_collectives, "call_latency", call_latency, UNITS_SECONDS,
          "per collective call: the runtime's software overhead (with kernel progress, added "
          "to NCCL's base latency)",
          DERIVED("0 with kernel progress; required with cpu progress")),
    F_QTY(cfg_collectives, "step_latency", step_latency, UNITS_SECONDS,
          "cpu progress: per algorithm step beyond the links' latency (posting and matching a "
          "message)",
          DEF(1e-6)),
    F_QTY(cfg_collectives, "eager_limit", eager_limit, UNITS_BYTES,
          "cpu progress: messages above this go by rendezvous (0: always eager)", DEF(0)),
    F_QTY(cfg_collectives, "rendezvous_latency", rendezvous_latency, UNITS_SECONDS,
          "cpu progress: the handshake (RTS/CTS) a rendezvous message waits for, per step",
          DEF(0)),
    F_INT(cfg_collectives, "leaders_per_node", leaders_per_node, 1,
          "multi-leader all-reduce: leaders per node (each reduces 1/k of the buffer and "
          "exchanges it across nodes on its own rail)",
          DEF(1), UPTO(64, "a node has at most a few dozen GPUs")),
    F_QTY(cfg_collectives, "cycle_time", cycle_time, UNITS_SECONDS,
          "the framework's negotiation cycle (Horovod's HOROVOD_CYCLE_TIME): a collective "
          "starts at the next cycle, half a cycle after it is ready on average",
          DEF(0)),
    F_BOOL(cfg_collectives, "reduce_pass", reduce_pass,
           "kernel progress: an all-reduce or reduce-scatter also pays one pass over each "
           "rank's result chunk (S/n) that the transfers do not hide: two chunks read and one "
           "written at gpu.memory_bandwidth x efficiency.memory (what XLA's tables show; see "
           "validation/README.md)",
           DEF(0)),
    F_STR(cfg_collectives, "allreduce", allreduce,
          "cpu progress: algorithm by size, \"ALGO < SIZE, ..., ALGO\" (rd, rhd, ring, "
          "multi-leader, ...); auto: NCCL's tuner",
          DEF_STR("auto")),
    F_STR(cfg_collectives, "allgather", allgather, "the same for all-gather (rd, ring)",
          DEF_STR("auto")),
    F_STR(cfg_collectives, "reducescatter", reducescatter, "the same for reduce-scatter (ring)",
          DEF_STR("auto")),
    F_STR(cfg_collectives, "alltoall", alltoall, "the same for all-to-all (direct, pairwise)",
          DEF_STR("auto")),
};
const cfg_schema cfg_schema_collectives =
    SCHEMA("collectives", cfg_collectives, cfg_collectives_fields);

static const cfg_field cfg_memory_fields[] = {
    F_QTY(cfg_memory, "cuda_context", cuda_context, UNITS_BYTES,
          "CUDA context and library workspaces per GPU", DEF(512.0 * 1048576)),
    F_QTY(cfg_memory, "nccl_buffers", nccl_buffers, UNITS_BYTES,
          "NCCL buffers per process group a GPU belongs to", DEF(256.0 * 1048576)),
    F_FRAC(cfg_memory, "fragmentation", fragmentation,
           "fraction of allocated memory the caching allocator loses", DEF(0.05)),
    F_QTY(cfg_memory, "zero3_prefetch", zero3_prefetch, UNITS_BYTES,
          "parameters ZeRO-3 gathers ahead of use (DeepSpeed: 5e7 parameters in 16 bit)",
          DEF(1e8)),
    F_QTY(cfg_memory, "comm_bucket", comm_bucket, UNITS_BYTES,
          "ZeRO reduce-scatter / all-gather buckets", DERIVED("parallel.gradient_bucket")),
    F_BOOL(cfg_memory, "unit_buckets", unit_buckets,
           "ZeRO-3 reduce-scatters each layer's gradients by itself, as FSDP2 does with "
           "fully_shard per block: instead of two comm_bucket, a layer's gradients as autograd "
           "makes them beside the previous layer's reduce-scatter input in training.grad_dtype "
           "(only the former when pipeline stages stay unsharded), and on the output stage the "
           "output projection's gradients, which its root unit reduces after the whole backward",
           DEF(0)),
    F_BOOL(cfg_memory, "root_gathered", root_gathered,
           "ZeRO-3 as FSDP2 runs it with fully_shard per block and on the model: the root unit "
           "(embedding, final norm, output projection) is not resharded after forward and stays "
           "gathered in 16 bits through forward and backward, and a block's backward holds its "
           "own unit and the next, which FSDP2 prefetches whole, instead of the largest layer "
           "and memory.zero3_prefetch (other.zero3_live_params)",
           DEF(0)),
    F_BOOL(cfg_memory, "zero_step_grads", zero_step_grads,
           "DeepSpeed's ZeRO 1/2 optimizer (DeepSpeedZeroOptimizer, not its BF16 optimizer): at "
           "the step it flattens its partition's gradients into one grad_dtype tensor and casts "
           "that to fp32, both alive at once, each larger than any block the activations free, "
           "so the allocator keeps both reserved: 2 + 4 bytes a parameter of the partition with "
           "16-bit gradients (other.zero_step_grads)",
           DEF(0)),
};
static const cfg_schema cfg_schema_memory = SCHEMA("memory", cfg_memory, cfg_memory_fields);

static const cfg_field cfg_checkpoint_fields[] = {
    {ROW(cfg_checkpoint, "interval", CFG_T_QTY, interval), .unit = UNITS_SECONDS,
     .doc = "training time between checkpoints",
     DERIVED("Young/Daly: sqrt(2 x checkpoint stall x the job's mean time between failures)"),
     UPTO(1e8, "a checkpoint every three years is none")},
    F_BOOL(cfg_checkpoint, "async", async,
           "asynchronous: training stalls only for a snapshot of the model states to host "
           "memory, written to storage while training goes on",
           DEF(0)),
    F_QTY(cfg_checkpoint, "restart", restart, UNITS_SECONDS,
          "from a failure to training again, before reading the checkpoint: detection, "
          "rescheduling on spare nodes, process and NCCL initialisation (assumed; Llama 3 gives "
          "no figure)",
          DEF(600)),
};
static const cfg_schema cfg_schema_checkpoint =
    SCHEMA("checkpoint", cfg_checkpoint, cfg_checkpoint_fields);

static const cfg_field cfg_workload_fields[] = {
    F_MAP(cfg_workload, "model", model, cfg_schema_model,
          "the model: a file or preset name under configs/models, or a mapping"),
    F_MAP(cfg_workload, "training", training, cfg_schema_training, "a training step (dlsim run)"),
    F_MAP(cfg_workload, "parallel", parallel, cfg_schema_parallel, "the parallel layout"),
    F_MAP(cfg_workload, "serving", serving, cfg_schema_serving, "LLM serving (dlsim serve)"),
    F_MAP(cfg_workload, "collectives", collectives, cfg_schema_collectives,
          "collective algorithms"),
    F_MAP(cfg_workload, "memory", memory, cfg_schema_memory,
          "what else takes GPU memory (uncalibrated, documented allowances)"),
    F_MAP(cfg_workload, "checkpoint", checkpoint, cfg_schema_checkpoint,
          "how a run checkpoints and restarts (with training.tokens or training.steps)"),
};
const cfg_schema cfg_schema_workload = SCHEMA("workload", cfg_workload, cfg_workload_fields);

/* ---- validation cases --------------------------------------------------------------------- */

static const char *const cfg_role_names[] = {"fit", "check", "reference", NULL};
static const char *const cfg_engine_names[] = {"analytic", "des", NULL};

static const cfg_field cfg_case_fields[] = {
    F_STR(cfg_case, "name", name, "the case's name (its file name)"),
    F_ENUM(cfg_case, "role", role, cfg_role_names,
           "fit: a model parameter was tuned on it; check: it was not; reference: a formula's "
           "output"),
    F_STR(cfg_case, "source", source, "where the measured number comes from"),
    F_STR(cfg_case, "command", command,
          "run, memory, memory-states, deepspeed, moe, serve, serve-max-rate or replay",
          DERIVED("run")),
    F_STR(cfg_case, "unit", unit, "the measured value's unit: GiB, GB, MiB, MB, s, ms, us",
          DERIVED("SI")),
    F_STR(cfg_case, "notes", notes, "anything a reader should know"),
    F_ENUM(cfg_case, "category", category, cfg_case_category_names,
           "the summary row it counts in (auto: by its command)", DEF(0)),
    F_PATH(cfg_case, "cluster", cluster, "the cluster file"),
    F_PATH(cfg_case, "workload", workload, "the workload file"),
    {ROW(cfg_case, "set", CFG_T_SEQ_STRING, set),
     .doc = "overrides, KEY=VALUE (a table case's collectives.KEY go to its runtime profile)"},
    {ROW(cfg_case, "unfit", CFG_T_SEQ_STRING, unfit),
     .doc = "a fit case: overrides that put back what was fitted on its source (dlsim validate --loso)"},
    {ROW(cfg_case, "ratio_to", CFG_T_SEQ_STRING, ratio_to),
     .doc = "the metric is this case / the same case with these overrides"},
    F_ENUM(cfg_case, "engine", engine, cfg_engine_names, "the engine",
           DERIVED("des, analytic for tables")),
    F_STR(cfg_case, "metric", metric, "a dotted key of the command's --json output"),
    {ROW(cfg_case, "measured", CFG_T_NUMBER, measured), .doc = "the measured value"},
    F_QTY(cfg_case, "tolerance", tolerance, UNITS_FRACTION, "a check passes when |error| <= tolerance",
           DERIVED("0.10")),
    F_PATH(cfg_case, "table", table, "nccl-tests or OMB output, or a CSV of collective or GEMM times"),
    F_STR(cfg_case, "op", op, "the table's collective, or gemm"),
    F_PATH(cfg_case, "runtime", runtime,
           "the runtime profile the table's collectives run on (configs/runtimes)"),
    F_STR(cfg_case, "algorithm", algorithm,
          "the NCCL algorithm the table forced (NCCL_ALGO: ring, tree, nvls, ...)", DERIVED("auto")),
    F_INT(cfg_case, "gpus", gpus, 1, "GPUs of the table"),
    F_INT(cfg_case, "group_size", group_size, 1, "GPUs per group", DERIVED("gpus")),
    F_STR(cfg_case, "size_column", size_column, "the table's size column"),
    F_STR(cfg_case, "time_column", time_column, "the table's time column"),
    F_STR(cfg_case, "time_unit", time_unit, "the time column's unit"),
    {ROW(cfg_case, "filter", CFG_T_SEQ_STRING, filter), .doc = "rows kept: COLUMN=VALUE"},
    F_QTY(cfg_case, "tolerance_small", tolerance_small, UNITS_FRACTION, "tolerance for sizes < 64 KiB",
           DERIVED("0.25")),
    F_ENUM(cfg_case, "dtype", dtype, cfg_dtype_names, "a GEMM table's data type"),
    F_PATH(cfg_case, "trace", trace, "a Kineto trace, replayed"),
    F_STR(cfg_case, "steps", steps, "ProfilerSteps replayed, A-B", DERIVED("all")),
};
const cfg_schema cfg_schema_case = SCHEMA("case", cfg_case, cfg_case_fields);

/* ---- initialisation and defaults, driven by the tables ------------------------------------ */

static size_t cfg_names_count(const char *const *names);

void cfg_schema_init(const cfg_schema *s, void *obj)
{
  for (size_t i = 0; i < s->nfields; i++) {
    const cfg_field *f = &s->fields[i];
    void *slot = (char *)obj + f->offset;
    switch (f->type) {
    case CFG_T_INT:
    case CFG_T_BOOL:
    case CFG_T_ENUM:
      *(int *)slot = CFG_UNSET_INT;
      break;
    case CFG_T_QTY:
    case CFG_T_NUMBER:
      *(double *)slot = NAN;
      break;
    case CFG_T_QTY_BY_ENUM:
      for (size_t k = 0; k < cfg_names_count(f->names); k++)
        ((double *)slot)[k] = NAN;
      break;
    case CFG_T_STRING:
    case CFG_T_PATH:
    case CFG_T_SEQ_STRING:
      *(void **)slot = NULL;
      break;
    case CFG_T_MAP:
      cfg_schema_init(f->sub, slot);
      break;
    case CFG_T_SEQ_MAP:
      *(void **)slot = NULL;
      *(int *)((char *)obj + f->count_offset) = 0;
      break;
    case CFG_T_SEQ_ENUM:
    case CFG_T_SEQ_QTY:
      *(int *)((char *)obj + f->count_offset) = 0;
      break;
    }
  }
}

static void cfg_default_field(const cfg_field *f, void *obj)
{
  void *slot = (char *)obj + f->offset;
  switch (f->type) {
  case CFG_T_INT:
  case CFG_T_BOOL:
  case CFG_T_ENUM:
    if (f->has_def && *(int *)slot == CFG_UNSET_INT)
      *(int *)slot = (int)f->def;
    break;
  case CFG_T_QTY:
  case CFG_T_NUMBER:
    if (f->has_def && isnan(*(double *)slot))
      *(double *)slot = f->def;
    break;
  case CFG_T_QTY_BY_ENUM:
    for (size_t k = 0; f->defs && k < cfg_names_count(f->names); k++)
      if (isnan(((double *)slot)[k]))
        ((double *)slot)[k] = f->defs[k];
    break;
  case CFG_T_STRING:
  case CFG_T_PATH:
    if (f->def_str && !*(char **)slot)
      *(char **)slot = g_strdup(f->def_str);
    break;
  case CFG_T_MAP:
    cfg_defaults(f->sub, slot);
    break;
  case CFG_T_SEQ_MAP:
    for (int k = 0; k < *(int *)((char *)obj + f->count_offset); k++)
      cfg_defaults(f->sub, *(char **)slot + (size_t)k * f->sub->size);
    break;
  case CFG_T_SEQ_ENUM:
  case CFG_T_SEQ_STRING:
  case CFG_T_SEQ_QTY:
    break;
  }
}

void cfg_defaults(const cfg_schema *s, void *obj)
{
  for (size_t i = 0; i < s->nfields; i++)
    cfg_default_field(&s->fields[i], obj);
}

static void cfg_merge_field(const cfg_field *f, void *dst, const void *src)
{
  void *d = (char *)dst + f->offset;
  const void *v = (const char *)src + f->offset;
  switch (f->type) {
  case CFG_T_INT:
  case CFG_T_BOOL:
  case CFG_T_ENUM:
    if (*(int *)d == CFG_UNSET_INT)
      *(int *)d = *(const int *)v;
    break;
  case CFG_T_QTY:
  case CFG_T_NUMBER:
    if (isnan(*(double *)d))
      *(double *)d = *(const double *)v;
    break;
  case CFG_T_QTY_BY_ENUM:
    for (size_t k = 0; k < cfg_names_count(f->names); k++)
      if (isnan(((double *)d)[k]))
        ((double *)d)[k] = ((const double *)v)[k];
    break;
  case CFG_T_STRING:
  case CFG_T_PATH:
    if (!*(char **)d && *(char *const *)v)
      *(char **)d = g_strdup(*(char *const *)v);
    break;
  case CFG_T_MAP:
    cfg_merge(f->sub, d, v);
    break;
  case CFG_T_SEQ_MAP:
  case CFG_T_SEQ_ENUM:
  case CFG_T_SEQ_STRING:
  case CFG_T_SEQ_QTY:
    break; /* lists are replaced whole, never merged */
  }
}

void cfg_merge(const cfg_schema *s, void *dst, const void *src)
{
  for (size_t i = 0; i < s->nfields; i++)
    cfg_merge_field(&s->fields[i], dst, src);
}

/* ---- decoder ------------------------------------------------------------------------------ */

static const cfg_field *cfg_schema_field(const cfg_schema *s, const char *key)
{
  for (size_t i = 0; i < s->nfields; i++)
    if (strcmp(s->fields[i].key, key) == 0)
      return &s->fields[i];
  return NULL;
}

bool cfg_schema_has_key(const cfg_schema *schema, const char *key)
{
  return cfg_schema_field(schema, key) != NULL;
}

static size_t cfg_names_count(const char *const *names)
{
  size_t n = 0;
  while (names[n])
    n++;
  return n;
}

static int cfg_names_index(const char *const *names, const char *word)
{
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], word) == 0)
      return i;
  return -1;
}

static char *cfg_names_join(const char *const *names)
{
  return g_strjoinv(" | ", (char **)names);
}

static char *cfg_schema_keys(const cfg_schema *s)
{
  GString *out = g_string_new(NULL);
  for (size_t i = 0; i < s->nfields; i++)
    g_string_append_printf(out, "%s%s", i ? ", " : "", s->fields[i].key);
  return g_string_free(out, FALSE);
}

static void cfg_unknown_key(GError **err, const char *file, int line, int col, const char *key,
                            const char *where, const cfg_schema *s)
{
  g_autofree const char **keys = g_new(const char *, s->nfields);
  for (size_t i = 0; i < s->nfields; i++)
    keys[i] = s->fields[i].key;
  const char *near = cfg_closest(key, keys, s->nfields);
  g_autofree char *all = cfg_schema_keys(s);
  if (near)
    cfg_set_error_at(err, file, line, col, "unknown key '%s' in %s (did you mean '%s'?)", key,
                     where, near);
  else
    cfg_set_error_at(err, file, line, col, "unknown key '%s' in %s (known keys: %s)", key, where,
                     all);
}

static const char *cfg_kind_name(const cfg_node *n)
{
  return n->kind == CFG_NODE_MAP ? "a mapping" : n->kind == CFG_NODE_SEQ ? "a list" : "a value";
}

static bool cfg_want_scalar(const cfg_node *n, const char *path, const char *what, GError **err)
{
  if (n->kind == CFG_NODE_SCALAR)
    return true;
  cfg_set_error_node(err, n, "%s: expected %s, found %s", path, what, cfg_kind_name(n));
  return false;
}

static bool cfg_decode_int(const cfg_node *n, const cfg_field *f, const char *path, int *out,
                           GError **err)
{
  if (!cfg_want_scalar(n, path, "an integer", err))
    return false;
  char *end = NULL;
  gint64 v = g_ascii_strtoll(n->scalar, &end, 10);
  if (end == n->scalar || *end != '\0' || v > G_MAXINT || v < G_MININT + 1) {
    /* accept 1e3-style integers that are exact */
    double d = g_ascii_strtod(n->scalar, &end);
    if (end == n->scalar || *end != '\0' || d != floor(d) || fabs(d) > G_MAXINT) {
      cfg_set_error_node(err, n, "%s: expected an integer, got '%s'", path, n->scalar);
      return false;
    }
    v = (gint64)d;
  }
  if (v < (gint64)f->min) {
    if (f->max > 0)
      cfg_set_error_node(err, n, "%s: expected an integer from %g to %g, got %" G_GINT64_FORMAT,
                         path, f->min, f->max, v);
    else
      cfg_set_error_node(err, n, "%s: expected an integer >= %g, got %" G_GINT64_FORMAT, path,
                         f->min, v);
    return false;
  }
  /* counts beyond 2^30 are no configuration: products of them would overflow long before */
  double hi = f->max > 0 ? f->max : (double)(1 << 30);
  if ((double)v > hi) {
    if (f->why || f->max == 0)
      cfg_set_error_node(err, n, "%s = %" G_GINT64_FORMAT " is out of range [%g, %g]: %s", path, v,
                         f->min, hi, f->why ? f->why : "a count beyond 2^30 is not a configuration");
    else
      cfg_set_error_node(err, n, "%s: expected an integer from %g to %g, got %" G_GINT64_FORMAT,
                         path, f->min, f->max, v);
    return false;
  }
  *out = (int)v;
  return true;
}

/* What no real machine or workload comes near, by kind of quantity: a value outside is a typo
 * or a unit slip, and it would otherwise come back as a step of inf s or a runaway. */
typedef struct {
  double lo, hi; /* inclusive; 0 is always allowed for the "none" of optional keys */
  const char *why;
} cfg_plausible;

static bool cfg_plausible_of(units_kind unit, cfg_plausible *p)
{
  static const struct {
    units_kind unit;
    cfg_plausible range;
  } ranges[] = {
      {UNITS_BYTES, {1, 1125899906842624.0, "no GPU, node or buffer holds more than a petabyte"}},
      {UNITS_BYTES_PER_S,
       {1e6, 1e14, "links and memories run between 1 MB/s and 100 TB/s (HBM3e: 8 TB/s)"}},
      {UNITS_FLOPS, {1e9, 1e17, "GPUs run between 1 GFLOP/s and 100 PFLOP/s (B200 fp4: 10 PFLOP/s)"}},
      {UNITS_SECONDS, {1e-9, 86400, "latencies and overheads lie between a nanosecond and a day"}},
      {UNITS_PER_SECOND, {1e-6, 1e9, "request rates lie between one in 11 days and 1e9 per second"}},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(ranges); i++)
    if (ranges[i].unit == unit) {
      *p = ranges[i].range;
      return true;
    }
  return false;
}

/* Quantities with a dimension take their unit: a bare "400" for a bandwidth was 400 bytes/s. */
static bool cfg_needs_unit(units_kind unit)
{
  return unit == UNITS_BYTES || unit == UNITS_BYTES_PER_S || unit == UNITS_FLOPS ||
         unit == UNITS_SECONDS || unit == UNITS_PER_SECOND || unit == UNITS_WATTS;
}

static bool cfg_bare_number(const char *text)
{
  char *end = NULL;
  g_ascii_strtod(text, &end);
  return end != text && *end == '\0';
}

bool cfg_plausible_range(units_kind unit, double *lo, double *hi, const char **why)
{
  cfg_plausible p;
  if (!cfg_plausible_of(unit, &p))
    return false;
  *lo = p.lo;
  *hi = p.hi;
  *why = p.why;
  return true;
}

static bool cfg_check_plausible(const cfg_node *n, units_kind unit, const char *path, double v,
                                GError **err)
{
  cfg_plausible p;
  if (v == 0 || !cfg_plausible_of(unit, &p) || (v >= p.lo && v <= p.hi))
    return true;
  cfg_set_error_node(err, n, "%s = %s is out of range [%g, %g] (SI units): %s", path, n->scalar,
                     p.lo, p.hi, p.why);
  return false;
}

static bool cfg_decode_qty(const cfg_node *n, units_kind unit, double max, const char *path,
                           double *out, GError **err)
{
  if (!cfg_want_scalar(n, path, units_describe(unit), err))
    return false;
  g_autofree char *why = NULL;
  double v = 0;
  if (!units_parse(n->scalar, unit, &v, &why)) {
    cfg_set_error_node(err, n, "%s: expected %s, got '%s' (%s)", path, units_describe(unit),
                       n->scalar, why);
    return false;
  }
  if (cfg_needs_unit(unit) && v != 0 && cfg_bare_number(n->scalar)) {
    cfg_set_error_node(err, n, "%s: '%s' needs a unit: expected %s", path, n->scalar,
                       units_describe(unit));
    return false;
  }
  if (v < 0 || (max > 0 && v > max)) {
    if (max > 0)
      cfg_set_error_node(err, n, "%s: expected a value from 0 to %g, got '%s'", path, max,
                         n->scalar);
    else
      cfg_set_error_node(err, n, "%s: expected a value >= 0, got '%s'", path, n->scalar);
    return false;
  }
  /* a key with its own bound (a part's mean time between failures) replaces the generic range
   * of its unit (latencies up to a day), as dlsim schema documents it */
  if (max == 0 && !cfg_check_plausible(n, unit, path, v, err))
    return false;
  *out = v;
  return true;
}

static bool cfg_decode_enum(const cfg_node *n, const char *const *names, const char *path,
                            int *out, GError **err)
{
  g_autofree char *all = cfg_names_join(names);
  if (!cfg_want_scalar(n, path, all, err))
    return false;
  int idx = cfg_names_index(names, n->scalar);
  if (idx >= 0) {
    *out = idx;
    return true;
  }
  const char *near = cfg_closest(n->scalar, names, cfg_names_count(names));
  if (near)
    cfg_set_error_node(err, n, "%s: expected one of %s, got '%s' (did you mean '%s'?)", path, all,
                       n->scalar, near);
  else
    cfg_set_error_node(err, n, "%s: expected one of %s, got '%s'", path, all, n->scalar);
  return false;
}

static bool cfg_decode_bool(const cfg_node *n, const char *path, int *out, GError **err)
{
  static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On", NULL};
  static const char *const no[] = {"false", "False", "FALSE", "no", "No", "off", "Off", NULL};
  if (!cfg_want_scalar(n, path, "true or false", err))
    return false;
  if (cfg_names_index(yes, n->scalar) >= 0 || cfg_names_index(no, n->scalar) >= 0) {
    *out = cfg_names_index(yes, n->scalar) >= 0;
    return true;
  }
  cfg_set_error_node(err, n, "%s: expected true or false, got '%s'", path, n->scalar);
  return false;
}

static bool cfg_decode_path(const cfg_node *n, const char *path, char **out, GError **err)
{
  if (!cfg_want_scalar(n, path, "a file path", err))
    return false;
  g_free(*out);
  if (g_path_is_absolute(n->scalar)) {
    *out = g_strdup(n->scalar);
  } else if (n->line == 0) { /* --set: relative to here, or to the data directory */
    *out = g_file_test(n->scalar, G_FILE_TEST_EXISTS)
               ? g_strdup(n->scalar)
               : cfg_data_path(n->scalar, NULL);
  } else {
    g_autofree char *dir = g_path_get_dirname(n->file);
    *out = g_build_filename(dir, n->scalar, NULL);
  }
  return true;
}

static bool cfg_decode_qty_by_enum(const cfg_node *n, const cfg_field *f, const char *path,
                                   double *out, GError **err)
{
  if (n->kind != CFG_NODE_MAP) {
    cfg_set_error_node(err, n, "%s: expected a mapping such as {%s: ...}, found %s", path,
                       f->names[0], cfg_kind_name(n));
    return false;
  }
  for (guint i = 0; i < n->items->len; i++) {
    cfg_pair *p = g_ptr_array_index(n->items, i);
    g_autofree char *sub = g_strdup_printf("%s.%s", path, p->key);
    int idx = cfg_names_index(f->names, p->key);
    if (idx < 0) {
      const char *near = cfg_closest(p->key, f->names, cfg_names_count(f->names));
      g_autofree char *all = cfg_names_join(f->names);
      if (near)
        cfg_set_error_at(err, p->value->file, p->line, p->col,
                         "unknown key '%s' in %s (did you mean '%s'?)", p->key, path, near);
      else
        cfg_set_error_at(err, p->value->file, p->line, p->col,
                         "unknown key '%s' in %s (expected one of %s)", p->key, path, all);
      return false;
    }
    if (cfg_node_is_null(p->value))
      continue;
    if (!cfg_decode_qty(p->value, f->unit, f->max, sub, &out[idx], err))
      return false;
  }
  return true;
}

static bool cfg_decode_seq_map(const cfg_node *n, const cfg_field *f, const char *path, void *base,
                               GError **err)
{
  if (n->kind != CFG_NODE_SEQ) {
    cfg_set_error_node(err, n, "%s: expected a list, found %s", path, cfg_kind_name(n));
    return false;
  }
  void **slot = (void **)((char *)base + f->offset);
  int *count = (int *)((char *)base + f->count_offset);
  const cfg_schema *s = f->sub;
  char *items = g_malloc0(s->size * MAX(n->items->len, 1u));
  *slot = items;
  *count = 0;
  for (guint i = 0; i < n->items->len; i++) {
    void *elem = items + i * s->size;
    cfg_schema_init(s, elem);
    *count = (int)i + 1;
    g_autofree char *sub = g_strdup_printf("%s[%u]", path, i);
    if (!cfg_decode(g_ptr_array_index(n->items, i), s, elem, sub, err))
      return false;
  }
  return true;
}

static bool cfg_decode_seq_enum(const cfg_node *n, const cfg_field *f, const char *path,
                                void *base, GError **err)
{
  if (n->kind != CFG_NODE_SEQ) {
    cfg_set_error_node(err, n, "%s: expected a list such as [%s, ...], found %s", path,
                       f->names[0], cfg_kind_name(n));
    return false;
  }
  int *vals = (int *)((char *)base + f->offset);
  int *count = (int *)((char *)base + f->count_offset);
  if (n->items->len > (guint)f->max) {
    cfg_set_error_node(err, n, "%s: at most %g entries", path, f->max);
    return false;
  }
  for (guint i = 0; i < n->items->len; i++) {
    g_autofree char *sub = g_strdup_printf("%s[%u]", path, i);
    if (!cfg_decode_enum(g_ptr_array_index(n->items, i), f->names, sub, &vals[i], err))
      return false;
  }
  *count = (int)n->items->len;
  return true;
}

static bool cfg_decode_seq_qty(const cfg_node *n, const cfg_field *f, const char *path,
                               void *base, GError **err)
{
  if (n->kind != CFG_NODE_SEQ) {
    cfg_set_error_node(err, n, "%s: expected a list such as [0.9, 0.8], found %s", path,
                       cfg_kind_name(n));
    return false;
  }
  if (n->items->len < 1 || n->items->len > (guint)f->max) {
    cfg_set_error_node(err, n, "%s: expected 1 to %g entries, found %u", path, f->max,
                       n->items->len);
    return false;
  }
  double *vals = (double *)((char *)base + f->offset);
  double top = f->unit == UNITS_FRACTION ? 1.0 : 0.0;
  for (guint i = 0; i < n->items->len; i++) {
    g_autofree char *sub = g_strdup_printf("%s[%u]", path, i);
    if (!cfg_decode_qty(g_ptr_array_index(n->items, i), f->unit, top, sub, &vals[i], err))
      return false;
  }
  *(int *)((char *)base + f->count_offset) = (int)n->items->len;
  return true;
}

static bool cfg_decode_seq_string(const cfg_node *n, const char *path, char ***out, GError **err)
{
  if (n->kind != CFG_NODE_SEQ) {
    cfg_set_error_node(err, n, "%s: expected a list of strings, found %s", path, cfg_kind_name(n));
    return false;
  }
  g_strfreev(*out);
  *out = g_new0(char *, n->items->len + 1);
  for (guint i = 0; i < n->items->len; i++) {
    const cfg_node *item = g_ptr_array_index(n->items, i);
    g_autofree char *sub = g_strdup_printf("%s[%u]", path, i);
    if (!cfg_want_scalar(item, sub, "a string", err))
      return false;
    (*out)[i] = g_strdup(item->scalar);
  }
  return true;
}

static bool cfg_decode_number(const cfg_node *n, const char *path, double *out, GError **err)
{
  if (!cfg_want_scalar(n, path, "a number", err))
    return false;
  char *end = NULL;
  double v = g_ascii_strtod(n->scalar, &end);
  if (end == n->scalar || *end != '\0' || !isfinite(v)) {
    cfg_set_error_node(err, n, "%s: expected a number, got '%s'", path, n->scalar);
    return false;
  }
  *out = v;
  return true;
}

static bool cfg_decode_field(const cfg_node *v, const cfg_field *f, const char *path, void *base,
                             GError **err)
{
  void *slot = (char *)base + f->offset;
  switch (f->type) {
  case CFG_T_INT:
    return cfg_decode_int(v, f, path, slot, err);
  case CFG_T_QTY:
    return cfg_decode_qty(v, f->unit, f->max, path, slot, err);
  case CFG_T_BOOL:
    return cfg_decode_bool(v, path, slot, err);
  case CFG_T_STRING:
    if (!cfg_want_scalar(v, path, "a string", err))
      return false;
    g_free(*(char **)slot);
    *(char **)slot = g_strdup(v->scalar);
    return true;
  case CFG_T_PATH:
    return cfg_decode_path(v, path, slot, err);
  case CFG_T_ENUM:
    return cfg_decode_enum(v, f->names, path, slot, err);
  case CFG_T_MAP:
    return cfg_decode(v, f->sub, slot, path, err);
  case CFG_T_SEQ_MAP:
    return cfg_decode_seq_map(v, f, path, base, err);
  case CFG_T_SEQ_ENUM:
    return cfg_decode_seq_enum(v, f, path, base, err);
  case CFG_T_QTY_BY_ENUM:
    return cfg_decode_qty_by_enum(v, f, path, slot, err);
  case CFG_T_SEQ_STRING:
    return cfg_decode_seq_string(v, path, slot, err);
  case CFG_T_NUMBER:
    return cfg_decode_number(v, path, slot, err);
  case CFG_T_SEQ_QTY:
    return cfg_decode_seq_qty(v, f, path, base, err);
  }
  return false;
}

bool cfg_decode(const cfg_node *node, const cfg_schema *schema, void *out, const char *path,
                GError **err)
{
  const char *where = path && *path ? path : schema->what;
  if (node->kind != CFG_NODE_MAP) {
    cfg_set_error_node(err, node, "%s: expected a mapping, found %s", where, cfg_kind_name(node));
    return false;
  }
  for (guint i = 0; i < node->items->len; i++) {
    cfg_pair *p = g_ptr_array_index(node->items, i);
    const cfg_field *f = cfg_schema_field(schema, p->key);
    if (!f) {
      cfg_unknown_key(err, p->value->file, p->line, p->col, p->key, where, schema);
      return false;
    }
    if (cfg_node_is_null(p->value))
      continue;
    g_autofree char *sub = path && *path ? g_strdup_printf("%s.%s", path, p->key) : g_strdup(p->key);
    if (!cfg_decode_field(p->value, f, sub, out, err))
      return false;
  }
  return true;
}

/* The unit of a quantity key under `s` ("network.nic_bandwidth", "gpu.flops.bf16"). */
static bool cfg_unit_under(const cfg_schema *s, char **parts, units_kind *unit)
{
  const cfg_field *f = *parts ? cfg_schema_field(s, *parts) : NULL;
  if (!f)
    return false;
  if (f->type == CFG_T_MAP)
    return cfg_unit_under(f->sub, parts + 1, unit);
  bool leaf = f->type == CFG_T_QTY ? !parts[1] : f->type == CFG_T_QTY_BY_ENUM && parts[1] && !parts[2];
  if (leaf)
    *unit = f->unit;
  return leaf;
}

bool cfg_key_unit(const char *path, units_kind *unit)
{
  g_auto(GStrv) parts = g_strsplit(path, ".", -1);
  return cfg_unit_under(&cfg_schema_cluster, parts, unit) ||
         cfg_unit_under(&cfg_schema_workload, parts, unit);
}

bool cfg_schema_check_path(const cfg_schema *schema, const char *path, GError **err)
{
  g_autofree char *norm = g_strdup(path);
  for (char *c = norm; *c; c++)
    if (*c == '[' || *c == ']')
      *c = '.';
  g_auto(GStrv) parts = g_strsplit(norm, ".", -1);
  const cfg_schema *s = schema;
  GString *sofar = g_string_new(NULL);
  bool ok = false;
  for (char **p = parts; *p; p++) {
    if (**p == '\0')
      continue;
    if (!s) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: '%s' has no sub-keys", path,
                  sofar->str);
      goto done;
    }
    const cfg_field *f = cfg_schema_field(s, *p);
    if (!f) {
      g_autofree const char **keys = g_new(const char *, s->nfields);
      for (size_t i = 0; i < s->nfields; i++)
        keys[i] = s->fields[i].key;
      const char *near = cfg_closest(*p, keys, s->nfields);
      g_autofree char *all = cfg_schema_keys(s);
      if (near)
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                    "--set %s: unknown key '%s' in %s (did you mean '%s'?)", path, *p,
                    sofar->len ? sofar->str : s->what, near);
      else
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: unknown key '%s' in %s (known keys: %s)",
                    path, *p, sofar->len ? sofar->str : s->what, all);
      goto done;
    }
    g_string_append_printf(sofar, "%s%s", sofar->len ? "." : "", *p);
    if (f->type == CFG_T_MAP) {
      s = f->sub;
    } else if (f->type == CFG_T_SEQ_MAP) {
      if (!p[1]) { /* the whole list, as a flow sequence */
        ok = true;
        goto done;
      }
      if (!g_ascii_isdigit(p[1][0])) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                    "--set %s: '%s' is a list; give an index, as in %s.0.KEY", path, sofar->str,
                    sofar->str);
        goto done;
      }
      p++;
      s = f->sub;
    } else if (f->type == CFG_T_QTY_BY_ENUM) {
      if (!p[1] || cfg_names_index(f->names, p[1]) < 0 || p[2]) {
        g_autofree char *all = cfg_names_join(f->names);
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: expected %s.(%s)", path,
                    sofar->str, all);
        goto done;
      }
      ok = true;
      goto done;
    } else {
      s = NULL;
    }
  }
  if (s) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--set %s: '%s' is a mapping; set one of its keys instead", path, sofar->str);
    goto done;
  }
  ok = true;
done:
  g_string_free(sofar, TRUE);
  return ok;
}
