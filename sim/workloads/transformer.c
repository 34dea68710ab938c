/* A GPT / Llama / DeepSeek style decoder layer as kernels on one GPU of a tensor-parallel group:
 * FLOPs from the GEMM shapes, bytes from the tensors each kernel reads and writes. Attention is
 * multi-head (grouped-query when kv_heads < heads) or DeepSeek's multi-head latent attention,
 * with FlashAttention (one fused kernel, causal mask halves its work) unless
 * training.flash_attention is false. The feed-forward part is a dense MLP or a mixture of
 * experts (router, shared experts, routed experts on this GPU's share of the tokens); the
 * all-to-alls around the experts are laid out by the parallel strategy. With sequence
 * parallelism the layer norms and dropouts work on s/t tokens. */
#include "workloads/workloads_internal.h"

#include <math.h>
#include <string.h>

typedef struct {
  double b, s, h, a, kv, d, f, V, t, dt;
  double q;     /* a saved GEMM input's bytes over 16 bits': < 1 when training in 8 or 4 bits */
  double sq;    /* queries (tokens) of the sequence on this GPU: s / cp */
  double cp;    /* context-parallel ranks: the ring attention's steps */
  double T;     /* tokens of the micro-batch on this GPU */
  double Te;    /* tokens the elementwise ops see (T / t with sequence parallelism) */
  double qkv;   /* width of the fused QKV projection */
  double gate;  /* 2 for gated MLPs (SwiGLU) */
  double dqk;   /* query/key width per head (head_dim, + the rope part with MLA) */
  double qr, kvr, rd; /* MLA: query and key/value ranks, decoupled rope width (0: no MLA) */
  bool flash;
  bool qk_norm;
  bool distill; /* a frozen teacher's forward beside the student's */
  bool deterministic; /* torch.use_deterministic_algorithms: NaN fills, deterministic attention */
  double main_grad; /* bytes a main gradient takes, where a hook adds each backward's into it */
  cfg_rotary rotary;
  cfg_attn_impl impl;   /* the fused attention kernels' implementation */
  cfg_recompute recompute;
  bool op_sac;  /* selective recomputation by torchtitan's per-op policy */
  bool eager;   /* eager PyTorch's unfused ops (eager.c) */
  bool torch_cp; /* context parallelism by PyTorch's context_parallel (torchcp.c) */
  bool eager_loss; /* eager PyTorch's fp32 cross_entropy */
  bool loss_unfused; /* Megatron's vocabulary-parallel cross-entropy, op by op */
  bool te_ring; /* context parallelism as Transformer Engine's ring, with its host work */
  bool ub;      /* TP collectives overlapped by Transformer Engine's userbuffers */
  double checks; /* modelled kernels of host time Megatron-LM's --test-mode adds per layer forward */
  /* mixture of experts (moe false: a dense MLP) */
  bool moe;
  double E, k, fe, S; /* experts, top-k, expert ffn width, shared experts */
  double n;           /* tokens this GPU routes: T / t */
  double recv;        /* token copies the busiest rank's experts run: n k x load factor */
  double ep;
} wl_shape;

static GArray *wl_list(wl_layer *l, bool replay)
{
  return replay ? l->bwd : l->fwd;
}

/* A kernel into the forward list, or replayed into the backward one (recomputation). */
static void wl_k(wl_model *m, wl_layer *l, bool replay, wl_role role, const char *what,
                 cfg_kernel_class kc, double flops, double bytes)
{
  if (replay)
    wl_bwd(m, l, role, WL_PHASE_RECOMPUTE, what, kc, flops, bytes);
  else
    wl_fwd(m, l, role, what, kc, flops, bytes);
}

/* Block-scaled formats (fp8-block, mxfp8, nvfp4) quantize a GEMM's 16-bit operands in kernels
 * of their own, which compute each tile's scale from its maximum: memory-bound, reading 2
 * bytes and writing the element and its share of the scales per element. Forward: the
 * activation (M x K) and, every micro-batch, the weight (K x N); backward: the output gradient
 * row- and column-wise (dgrad and wgrad reduce over different dimensions) and the activation
 * column-wise for wgrad. */
static void wl_quantize_blocks(wl_model *m, wl_layer *l, wl_role role, const char *name, double M,
                               double N, double K, bool backward, bool replay)
{
  double per = 2 + cfg_dtype_bytes(m->dtype);
  if (backward)
    wl_bwd(m, l, role, WL_PHASE_BACKWARD, name, CFG_KCLASS_ELEMENTWISE, 0, per * (2 * M * N + M * K));
  else
    wl_k(m, l, replay, role, name, CFG_KCLASS_ELEMENTWISE, 0, per * (M * K + K * N));
}

/* Current scaling (Transformer Engine's Float8CurrentScalingQuantizer::quantize_impl, csrc/
 * quantizer.cpp): each tensor's amax in a kernel of its own (nvte_compute_amax: reads its 2
 * bytes an element), then the cast-transpose (2 + 1 + 1), in forward for the GEMM input and
 * in backward for the output gradient. A LayerNormLinear's norm cannot write fp8 before the
 * amax is known (normalization.cpp: FUSED_NORM_AMAX_FP8): it writes 16 bits, one byte more an
 * element, and records the amax itself, so its input takes the cast without the amax pass, and
 * in forward, which leaves backward no transpose to make. */
static void wl_cast_fp8_current(wl_model *m, wl_layer *l, wl_role role, const char *name,
                                double elems, bool backward, bool replay, bool norm_fused)
{
  if (backward)
    wl_bwd(m, l, role, WL_PHASE_BACKWARD, name, CFG_KCLASS_ELEMENTWISE, 0, 6 * elems);
  else
    wl_k(m, l, replay, role, name, CFG_KCLASS_ELEMENTWISE, 0, (norm_fused ? 5 : 6) * elems);
}

/* Per-tensor fp8 as Transformer Engine's Linear runs it (transformer_engine/pytorch/module/
 * linear.py, layernorm_linear.py, 1.x): the 16-bit input of a GEMM is cast in one kernel that
 * writes it in fp8 and transposed in fp8 for wgrad and records its amax (cast-transpose: reads
 * 2 bytes, writes 1 + 1 per element); in backward the output gradient likewise. A LayerNorm-
 * Linear (qkv, mlp_up) has its norm write fp8 itself, and only transposes that (1 + 1 bytes)
 * for wgrad in backward. The weights are cast on the first micro-batch of a step only
 * (is_first_microbatch: model.c's wl_emit_fp8_weight_casts); the delayed-scaling recipe's
 * amax reduction and scale updates (a few bytes) are left out. */
static void wl_cast_fp8(wl_model *m, wl_layer *l, wl_role role, const char *name, double M,
                        double N, double K, bool backward, bool replay)
{
  bool norm_fused = role == WL_ROLE_QKV || role == WL_ROLE_MLP_UP;
  if (m->fp8_current) {
    wl_cast_fp8_current(m, l, role, name, M * (backward ? N : K), backward, replay, norm_fused);
    return;
  }
  if (backward)
    wl_bwd(m, l, role, WL_PHASE_BACKWARD, name, CFG_KCLASS_ELEMENTWISE, 0,
           4 * M * N + (norm_fused ? 2 * M * K : 0));
  else if (!norm_fused)
    wl_k(m, l, replay, role, name, CFG_KCLASS_ELEMENTWISE, 0, 4 * M * K);
}

/* The kernels that put a GEMM's operands into its 8- or 4-bit format, before it. */
static void wl_quantize(wl_model *m, wl_layer *l, wl_role role, const char *what, double M,
                        double N, double K, bool backward, bool replay)
{
  if (wl_kernel_dtype(m->dtype, role, CFG_KCLASS_GEMM) != m->dtype)
    return; /* a GEMM left in 16 bits (router, output layer) */
  g_autofree char *name = g_strconcat(what, ".quant", NULL);
  if (cfg_dtype_block_scaled(m->dtype))
    wl_quantize_blocks(m, l, role, name, M, N, K, backward, replay);
  else if (m->dtype == CFG_FP8)
    wl_cast_fp8(m, l, role, name, M, N, K, backward, replay);
}

/* A GEMM of (m x k) by (k x n): 2mnk FLOPs, reads both inputs, writes the output. Forward (into
 * the forward list, or replayed), or its backward: dX = dY W^T reduces over N, dW = X^T dY
 * over the M tokens. */
static void wl_gemm_as(wl_model *m, wl_layer *l, wl_role role, const char *what, double M,
                       double N, double K, double dt, bool backward, bool replay)
{
  double flops = 2 * M * N * K, bytes = dt * (M * K + K * N + M * N);
  wl_quantize(m, l, role, what, M, N, K, backward, replay);
  if (!backward) {
    wl_k(m, l, replay, role, what, CFG_KCLASS_GEMM, flops, bytes);
    wl_set_gemm(wl_list(l, replay), M, N, K);
    return;
  }
  g_autofree char *dg = g_strconcat(what, ".dgrad", NULL);
  g_autofree char *wg = g_strconcat(what, ".wgrad", NULL);
  wl_bwd(m, l, role, WL_PHASE_DGRAD, dg, CFG_KCLASS_GEMM, flops, bytes);
  wl_set_gemm(l->bwd, M, K, N);
  wl_bwd(m, l, role, WL_PHASE_WGRAD, wg, CFG_KCLASS_GEMM, flops, bytes);
  wl_set_gemm(l->bwd, K, N, M);
}

static void wl_gemm(wl_model *m, wl_layer *l, wl_role role, const char *what, double M, double N,
                    double K, double dt, bool backward)
{
  wl_gemm_as(m, l, role, what, M, N, K, dt, backward, false);
}

static void wl_eltwise_as(wl_model *m, wl_layer *l, wl_role role, const char *what, double elems,
                          double rw_bytes, bool backward, bool replay)
{
  /* Backward of an elementwise op reads the saved input and the incoming gradient. */
  double bytes = elems * rw_bytes * (backward ? 1.5 : 1.0);
  if (backward)
    wl_bwd(m, l, role, WL_PHASE_BACKWARD, what, CFG_KCLASS_ELEMENTWISE, 4 * elems, bytes);
  else
    wl_k(m, l, replay, role, what, CFG_KCLASS_ELEMENTWISE, 4 * elems, bytes);
}

static void wl_elementwise(wl_model *m, wl_layer *l, wl_role role, const char *what, double elems,
                           double rw_bytes, bool backward)
{
  wl_eltwise_as(m, l, role, what, elems, rw_bytes, backward, false);
}

/* ---- attention -------------------------------------------------------------------------- */

/* Bytes of Q, K, V and the output of this GPU's heads, for one micro-batch. */
static double wl_attention_io(const wl_shape *x)
{
  if (x->qr > 0)
    return x->dt * x->T * x->a / x->t * (2 * x->dqk + 2 * x->d);
  return x->dt * x->T * (x->qkv + x->a * x->d) / x->t;
}

/* The fused kernel's shape: with context parallelism each call sees one chunk of s / cp keys
 * (ring attention runs cp of them), so long contexts split finely run short, slow kernels.
 * Only the ring's diagonal step is causal: Transformer Engine's load-balanced split (two
 * chunks of s / 2cp per rank, AttnFuncWithCP @ v1.4, the release of NeMo 24.03) runs every
 * other step unmasked, the same work as the diagonal's causal half without its masked tiles:
 * on half the queries against all s / cp keys, or (the last rank at every step, which the
 * others wait for) all the queries against half of them. */
static void wl_set_attention_shape(GArray *kernels, const wl_shape *x, bool backward, bool causal)
{
  cfg_attn_shape *a = &g_array_index(kernels, wl_kernel, kernels->len - 1).attn;
  *a = (cfg_attn_shape){.keys = (float)(causal ? x->sq : x->sq / 2), .head_dim = (float)((x->dqk + x->d) / 2),
                        .impl = (uint8_t)x->impl, .backward = backward, .causal = causal,
                .deterministic = backward && x->deterministic};
}

/* Transformer Engine's ring (AttnFuncWithCPAndKVP2P, the same code for this path in v2.10 to
 * v2.13, the releases of Megatron-LM's CI containers) issues more host ops than its calls and
 * merges: per later step the send/receive batch and its waits, stream switches and events, the
 * views and copies of the load-balanced halves, the output and softmax-statistics corrections,
 * and the gradients' copies and adds by half in backward. Counted for CP 2 (causal, load
 * balanced, flash-attn backend; validation/megatron_ci/te_cp_ring_ops.csv): 67 ops forward and
 * 104 backward where one attention call without CP takes 14 and 18, so the ring is 4.8 and 5.8
 * modelled kernels of the host's, of which the two calls and the merge (or dK/dV add) are 3:
 * these are the rest, rounded, in the unit host_dispatch is fitted in. */
#define WL_TE_RING_HOST_FWD 2
#define WL_TE_RING_HOST_BWD 3

/* The unit the ring's host ops were counted in: one attention call without context parallelism
 * is 14 ops (validation/megatron_ci/te_cp_ring_ops.csv) and one modelled kernel. */
#define WL_OPS_PER_KERNEL 14.0

/* Megatron-LM's --test-mode with qk-layernorm runs Attention.run_realtime_tests in every
 * layer's forward (megatron/core/transformer/attention.py @ d98e8a64): it stacks the q/k norms'
 * weights and biases (four .data reads and a stack), then per group, data- and then tensor-
 * parallel, of g ranks: g empty_like, an all_gather, g unbinds and, per rank and tensor, the
 * target's .data, src == tgt, torch.all and the assert's bool(), which reads the result back
 * (a host sync): 5 + 2 (18 g + 1) ops, in the ring's unit. */
static double wl_checks_kernels(double dp, double tp)
{
  return (5 + (18 * dp + 1) + (18 * tp + 1)) / WL_OPS_PER_KERNEL;
}

/* PyTorch's ring (torchcp.c) works on K and V with one head per query head: its tensors are
 * all the size of this GPU's queries. */
static wl_tcp wl_tcp_of(const wl_shape *x)
{
  return (wl_tcp){.elems = x->T * x->a * x->d / x->t, .dt = x->dt, .cp = (int)x->cp, .eager = x->eager};
}

/* PyTorch's ring in a block's backward holds, beside what recomputation brought back, all the
 * ranks' K and V gathered, dQ, dK and dV in fp32, the fp32 dK, dV it sends and the ones it
 * receives, the step's 16-bit gradients, and the flash kernel's fp32 dQ accumulator
 * (_templated_ring_attention_backward; FlashAttention-2's dq_accum): per element of the GPU's
 * queries, 2 cp dt + 12 + 16 + 3 dt + 4 bytes. */
static double wl_torch_cp_peak(const wl_shape *x)
{
  return wl_tcp_of(x).elems * (2 * x->cp * x->dt + 12 + 16 + 3 * x->dt + 4);
}

/* The fused attention's forward. With context parallelism it is a ring (Transformer Engine's
 * AttnFuncWithCPAndKVP2P, which Megatron-LM runs for --context-parallel-size with its default
 * p2p communication): one fused-attention call per step, on the key/value chunk the ring
 * brings (1/cp of the work each), and each later step's partial output merged into the
 * running one by its softmax statistics. Every call is a launch of its own for the host, which
 * a small model's step waits for. The merges run on a second stream beside the next step's
 * attention (Transformer Engine alternates two), so they cost the GPU only their launch. */
static void wl_ring_fwd(wl_model *m, wl_layer *l, const wl_shape *x, bool replay, double flops)
{
  GArray *to = wl_list(l, replay);
  wl_tcp tcp = wl_tcp_of(x);
  for (int i = 0; i < (int)x->cp; i++) {
    if (x->torch_cp)
      wl_torch_cp_before(m, l, &tcp, i, false, replay);
    wl_k(m, l, replay, i ? WL_ROLE_RING_STEP : WL_ROLE_ATTENTION, "attention",
         CFG_KCLASS_ATTENTION, flops / x->cp, wl_attention_io(x));
    wl_set_attention_shape(to, x, false, i == 0);
    if (x->torch_cp)
      wl_torch_cp_after(m, l, &tcp, i, false, replay);
    else if (i)
      wl_k(m, l, replay, WL_ROLE_RING_STEP, "attention.merge", CFG_KCLASS_ELEMENTWISE, 0, 0);
    for (int j = 0; i && x->te_ring && j < WL_TE_RING_HOST_FWD; j++)
      wl_k(m, l, replay, WL_ROLE_RING_STEP, "attention.ring_host", CFG_KCLASS_ELEMENTWISE, 0, 0);
  }
}

/* Its backward: one call per step, and before each later step the key/value gradients of the
 * one before added to those the ring brings (like the merges, beside a step); the last step
 * comes last (role attention: the gradients go back after it). */
static void wl_ring_bwd(wl_model *m, wl_layer *l, const wl_shape *x, double flops)
{
  wl_tcp tcp = wl_tcp_of(x);
  for (int i = 0; i < (int)x->cp; i++) {
    for (int j = 0; i && x->te_ring && j < WL_TE_RING_HOST_BWD; j++)
      wl_bwd(m, l, WL_ROLE_RING_STEP, WL_PHASE_BACKWARD, "attention.ring_host.bwd",
             CFG_KCLASS_ELEMENTWISE, 0, 0);
    if (x->torch_cp)
      wl_torch_cp_before(m, l, &tcp, i, true, false);
    else if (i)
      wl_bwd(m, l, WL_ROLE_RING_STEP, WL_PHASE_BACKWARD, "attention.dkv_add",
             CFG_KCLASS_ELEMENTWISE, 0, 0);
    bool last = i == (int)x->cp - 1;
    wl_bwd(m, l, last ? WL_ROLE_ATTENTION : WL_ROLE_RING_STEP, WL_PHASE_BACKWARD,
           "attention.bwd", CFG_KCLASS_ATTENTION, flops / x->cp, 2.5 * wl_attention_io(x));
    wl_set_attention_shape(l->bwd, x, true, last); /* backward runs the ring in reverse */
    if (x->torch_cp)
      wl_torch_cp_after(m, l, &tcp, i, true, false);
  }
}

/* The attention core: FlashAttention, or scores / softmax / context as separate kernels. With
 * `replay` the forward kernels go to the backward list, marked as recomputation. */
static void wl_attention_fwd(wl_model *m, wl_layer *l, const wl_shape *x, bool replay)
{
  double heads = x->a / x->t;
  GArray *to = wl_list(l, replay);
  if (x->flash) {
    /* FLOPs = 2 s^2 (d_qk + d_v) per head, halved by the causal mask (s_q s with context
     * parallelism) */
    double flops = 2 * x->b * x->sq * x->s * (x->dqk + x->d) * heads * 0.5;
    wl_ring_fwd(m, l, x, replay, flops);
    return;
  }
  double scores = x->b * heads * x->sq * x->s;
  double base = x->b * heads * x->sq * x->s;
  double gbytes = x->dt * (2 * x->T * x->a * x->d / x->t + scores);
  /* Q K^T reduces over the head dimension, P V over the keys */
  wl_k(m, l, replay, WL_ROLE_SCORES, "scores", CFG_KCLASS_GEMM, 2 * base * x->dqk, gbytes);
  wl_set_gemm(to, x->sq, x->s, x->dqk);
  wl_k(m, l, replay, WL_ROLE_SOFTMAX, "softmax_dropout", CFG_KCLASS_ELEMENTWISE, 8 * scores, scores * (3 * x->dt + 1));
  wl_k(m, l, replay, WL_ROLE_CONTEXT, "context", CFG_KCLASS_GEMM, 2 * base * x->d, gbytes);
  wl_set_gemm(to, x->sq, x->d, x->s);
}

static void wl_attention_bwd(wl_model *m, wl_layer *l, const wl_shape *x)
{
  double heads = x->a / x->t;
  if (x->flash) {
    /* backward does 2.5x the forward's work (FlashAttention-2 paper) */
    double flops = 2.5 * 2 * x->b * x->sq * x->s * (x->dqk + x->d) * heads * 0.5;
    wl_ring_bwd(m, l, x, flops);
    return;
  }
  double scores = x->b * heads * x->sq * x->s;
  double base = x->b * heads * x->sq * x->s;
  double gbytes = x->dt * (2 * x->T * x->a * x->d / x->t + scores);
  /* dP = dO V^T and dQ... reduce over the head dimension or the keys, dV and dK over the
   * queries */
  wl_bwd(m, l, WL_ROLE_CONTEXT, WL_PHASE_DGRAD, "context.dgrad", CFG_KCLASS_GEMM, 2 * base * x->d, gbytes);
  wl_set_gemm(l->bwd, x->sq, x->s, x->d);
  wl_bwd(m, l, WL_ROLE_CONTEXT, WL_PHASE_WGRAD, "context.wgrad", CFG_KCLASS_GEMM, 2 * base * x->d, gbytes);
  wl_set_gemm(l->bwd, x->s, x->d, x->sq);
  wl_bwd(m, l, WL_ROLE_SOFTMAX, WL_PHASE_BACKWARD, "softmax_dropout.bwd", CFG_KCLASS_ELEMENTWISE, 8 * scores, scores * (4 * x->dt + 1));
  wl_bwd(m, l, WL_ROLE_SCORES, WL_PHASE_DGRAD, "scores.dgrad", CFG_KCLASS_GEMM, 2 * base * x->dqk, gbytes);
  wl_set_gemm(l->bwd, x->sq, x->dqk, x->s);
  wl_bwd(m, l, WL_ROLE_SCORES, WL_PHASE_WGRAD, "scores.wgrad", CFG_KCLASS_GEMM, 2 * base * x->dqk, gbytes);
  wl_set_gemm(l->bwd, x->s, x->dqk, x->sq);
}

/* The input projections: one fused QKV GEMM, or MLA's down-projections (whole on every GPU)
 * and up-projections (split by heads). Backward runs them in reverse. */
static void wl_qkv(wl_model *m, wl_layer *l, const wl_shape *x, bool backward, bool replay)
{
  if (x->qr == 0) {
    wl_gemm_as(m, l, WL_ROLE_QKV, "qkv", x->T, x->qkv / x->t, x->h, x->dt, backward, replay);
    return;
  }
  double heads = x->a / x->t;
  if (backward) {
    wl_gemm_as(m, l, WL_ROLE_MLA_UP, "kv_up", x->T, heads * (x->dqk - x->rd + x->d), x->kvr, x->dt, true, false);
    wl_gemm_as(m, l, WL_ROLE_MLA_UP, "q_up", x->T, heads * x->dqk, x->qr, x->dt, true, false);
    wl_gemm_as(m, l, WL_ROLE_MLA_DOWN, "kv_down", x->T, x->kvr + x->rd, x->h, x->dt, true, false);
    wl_gemm_as(m, l, WL_ROLE_QKV, "qkv", x->T, x->qr, x->h, x->dt, true, false); /* q_down */
    return;
  }
  wl_gemm_as(m, l, WL_ROLE_QKV, "qkv", x->T, x->qr, x->h, x->dt, false, replay); /* q_down */
  wl_gemm_as(m, l, WL_ROLE_MLA_DOWN, "kv_down", x->T, x->kvr + x->rd, x->h, x->dt, false, replay);
  wl_gemm_as(m, l, WL_ROLE_MLA_UP, "q_up", x->T, heads * x->dqk, x->qr, x->dt, false, replay);
  wl_gemm_as(m, l, WL_ROLE_MLA_UP, "kv_up", x->T, heads * (x->dqk - x->rd + x->d), x->kvr, x->dt, false, replay);
}

/* Eager grouped-query attention copies the keys and values once per query head before
 * attention (torchtitan's repeat_kv; fused attention kernels read the shared heads instead). */
static void wl_qk_repeat(wl_model *m, wl_layer *l, const wl_shape *x, bool backward, bool replay)
{
  if (x->eager && x->kv < x->a && x->qr == 0)
    wl_eager_repeat_kv(m, l, x->T * x->kv * x->d / x->t, x->T * x->a * x->d / x->t, x->dt, backward, replay);
}

/* What runs on this GPU's queries and keys between the projection and attention: the per-head
 * norms of qk-layernorm (Megatron-LM's q_layernorm and k_layernorm, a module each) and the
 * rotary embedding, which Megatron-LM applies to the queries and to the keys apart
 * (megatron/core/models/common/embeddings/rope_utils.py): Transformer Engine's fused kernel
 * reads and writes each tensor once; unfused, PyTorch's ops (t cos + rotate_half(t) sin: the
 * products, the negation and concatenations of rotate_half, the sum, the final concatenation)
 * pass over it about 7.5 times as often. Each is one framework call, a launch for the host. */
static void wl_qk_prep(wl_model *m, wl_layer *l, const wl_shape *x, bool backward, bool replay)
{
  const double widths[2] = {x->a * x->dqk / x->t, x->kv * x->dqk / x->t};
  const char *const norms[2][2] = {{"q_norm", "k_norm"}, {"q_norm.bwd", "k_norm.bwd"}};
  const char *const ropes[2][2] = {{"rope_q", "rope_k"}, {"rope_q.bwd", "rope_k.bwd"}};
  double passes = x->rotary == CFG_ROTARY_UNFUSED ? 7.5 : 1;
  if (backward)
    wl_qk_repeat(m, l, x, true, false);
  for (int i = 0; i < 2; i++) {
    double elems = x->T * widths[i];
    if (x->qk_norm)
      wl_eltwise_as(m, l, WL_ROLE_NORM, norms[backward][i], elems, 2 * x->dt, backward, replay);
    if (x->rotary != CFG_ROTARY_NONE && x->eager)
      wl_eager(m, l, WL_EAGER_ROPE, ropes[0][i], elems, x->dt, backward, replay);
    else if (x->rotary != CFG_ROTARY_NONE)
      wl_eltwise_as(m, l, WL_ROLE_OTHER, ropes[backward][i], elems, 2 * x->dt * passes, backward, replay);
  }
  for (int i = 0; !backward && i < (int)lround(x->checks); i++)
    wl_k(m, l, replay, WL_ROLE_OTHER, "qk_norm.checks", CFG_KCLASS_ELEMENTWISE, 0, 0);
  if (!backward)
    wl_qk_repeat(m, l, x, false, replay);
}

/* ---- feed-forward: dense MLP or mixture of experts --------------------------------------- */

/* The dense MLP's activation: one kernel, or eager SwiGLU's silu and product. */
static void wl_act(wl_model *m, wl_layer *l, const wl_shape *x, bool backward, bool replay)
{
  double elems = x->T * x->f / x->t;
  if (x->eager && x->gate == 2)
    wl_eager(m, l, WL_EAGER_SWIGLU, "act", elems, x->dt, backward, replay);
  else if (backward)
    wl_elementwise(m, l, WL_ROLE_ACT, "act.bwd", elems, (x->gate + 1) * x->dt, true);
  else
    wl_k(m, l, replay, WL_ROLE_ACT, "act", CFG_KCLASS_ELEMENTWISE, 4 * elems, elems * (x->gate + 1) * x->dt);
}

/* A block's norm over `elems` elements: one kernel, or eager RMSNorm's ops. */
static void wl_norm(wl_model *m, wl_layer *l, const wl_shape *x, const char *what, double elems,
                    bool backward, bool replay)
{
  if (x->eager) {
    wl_eager(m, l, WL_EAGER_RMSNORM, what, elems, x->dt, backward, replay);
  } else if (backward) {
    g_autofree char *bwd = g_strconcat(what, ".bwd", NULL);
    wl_elementwise(m, l, WL_ROLE_NORM, bwd, elems, 2 * x->dt, true);
  } else {
    wl_k(m, l, replay, WL_ROLE_NORM, what, CFG_KCLASS_ELEMENTWISE, 4 * elems, elems * 2 * x->dt);
  }
}

static void wl_mlp_fwd(wl_model *m, wl_layer *l, const wl_shape *x, bool replay)
{
  double ffn = x->f / x->t;
  wl_gemm_as(m, l, WL_ROLE_MLP_UP, "mlp_up", x->T, ffn * x->gate, x->h, x->dt, false, replay);
  wl_act(m, l, x, false, replay);
  wl_gemm_as(m, l, WL_ROLE_MLP_DOWN, "mlp_down", x->T, x->h, ffn, x->dt, false, replay);
}

static void wl_mlp_bwd(wl_model *m, wl_layer *l, const wl_shape *x)
{
  double ffn = x->f / x->t;
  wl_gemm(m, l, WL_ROLE_MLP_DOWN, "mlp_down", x->T, x->h, ffn, x->dt, true);
  wl_act(m, l, x, true, false);
  wl_gemm(m, l, WL_ROLE_MLP_UP, "mlp_up", x->T, ffn * x->gate, x->h, x->dt, true);
}

/* A mixture of experts on this GPU: route its n tokens, gather their k copies by expert
 * ("permute"), [dispatch all-to-all], the shared experts on the local tokens (they need no
 * all-to-all, so they run while the dispatch is in flight), this GPU's experts on the copies
 * routed to it, [combine all-to-all], and the weighted sum back in token order ("unpermute").
 * The kernel names are what the parallel strategy lays the all-to-alls around. */
static void wl_moe_fwd(wl_model *m, wl_layer *l, const wl_shape *x, bool replay)
{
  double copies = x->n * x->k;
  wl_gemm_as(m, l, WL_ROLE_ROUTER, "router", x->n, x->E, x->h, x->dt, false, replay);
  wl_k(m, l, replay, WL_ROLE_ROUTER_TOPK, "router_topk", CFG_KCLASS_ELEMENTWISE, 8 * x->n * x->E, x->n * x->E * 8);
  wl_k(m, l, replay, WL_ROLE_PERMUTE, "permute", CFG_KCLASS_ELEMENTWISE, 0, 2 * copies * x->h * x->dt);
  if (x->S > 0) {
    wl_gemm_as(m, l, WL_ROLE_SHARED_UP, "shared_up", x->n, x->S * x->fe * x->gate, x->h, x->dt, false, replay);
    wl_k(m, l, replay, WL_ROLE_ACT, "shared_act", CFG_KCLASS_ELEMENTWISE, 4 * x->n * x->S * x->fe,
         x->n * x->S * x->fe * (x->gate + 1) * x->dt);
    wl_gemm_as(m, l, WL_ROLE_SHARED_DOWN, "shared_down", x->n, x->h, x->S * x->fe, x->dt, false, replay);
  }
  wl_gemm_as(m, l, WL_ROLE_EXPERT_UP, "experts_up", x->recv, x->fe * x->gate, x->h, x->dt, false, replay);
  wl_k(m, l, replay, WL_ROLE_EXPERT_ACT, "experts_act", CFG_KCLASS_ELEMENTWISE, 4 * x->recv * x->fe,
       x->recv * x->fe * (x->gate + 1) * x->dt);
  wl_gemm_as(m, l, WL_ROLE_EXPERT_DOWN, "experts_down", x->recv, x->h, x->fe, x->dt, false, replay);
  wl_k(m, l, replay, WL_ROLE_UNPERMUTE, "unpermute", CFG_KCLASS_ELEMENTWISE, 2 * copies * x->h, 2 * copies * x->h * x->dt);
}

/* Backward: [combine's backward all-to-all brings the output gradients to the experts], the
 * experts, [dispatch's backward all-to-all returns the input gradients], the shared experts
 * and the router. */
static void wl_moe_bwd(wl_model *m, wl_layer *l, const wl_shape *x)
{
  double copies = x->n * x->k;
  wl_elementwise(m, l, WL_ROLE_UNPERMUTE, "unpermute.bwd", 2 * copies * x->h, x->dt * 1.0, true);
  wl_gemm(m, l, WL_ROLE_EXPERT_DOWN, "experts_down", x->recv, x->h, x->fe, x->dt, true);
  wl_elementwise(m, l, WL_ROLE_EXPERT_ACT, "experts_act.bwd", x->recv * x->fe, (x->gate + 1) * x->dt, true);
  wl_gemm(m, l, WL_ROLE_EXPERT_UP, "experts_up", x->recv, x->fe * x->gate, x->h, x->dt, true);
  wl_elementwise(m, l, WL_ROLE_PERMUTE, "permute.bwd", copies * x->h, 2 * x->dt / 1.5, true);
  if (x->S > 0) {
    wl_gemm(m, l, WL_ROLE_SHARED_DOWN, "shared_down", x->n, x->h, x->S * x->fe, x->dt, true);
    wl_elementwise(m, l, WL_ROLE_ACT, "shared_act.bwd", x->n * x->S * x->fe, (x->gate + 1) * x->dt, true);
    wl_gemm(m, l, WL_ROLE_SHARED_UP, "shared_up", x->n, x->S * x->fe * x->gate, x->h, x->dt, true);
  }
  wl_gemm(m, l, WL_ROLE_ROUTER, "router", x->n, x->E, x->h, x->dt, true);
}

/* ---- the block ---------------------------------------------------------------------------- */

/* The forward kernels of a block, into the forward list (or replayed into backward). */
/* Under torch.use_deterministic_algorithms PyTorch fills every tensor made by torch.empty
 * (at::empty, which Transformer Engine's and Megatron's outputs and gradient buffers go
 * through) with NaN first (torch.utils.deterministic.fill_uninitialized_memory, on by
 * default): one more write of each fresh tensor, a kernel the allocation launches from C++,
 * not an op of the host's Python. A pass's fills are laid out as one kernel after it: what
 * it allocates is taken as the activations its forward writes (the block without
 * recomputation; its gradients in backward, of the same size). */
static void wl_fill(wl_model *m, wl_layer *l, double bytes, bool backward, bool replay)
{
  if (backward)
    wl_bwd(m, l, WL_ROLE_OTHER, WL_PHASE_BACKWARD, "nan_fill", CFG_KCLASS_ELEMENTWISE, 0, bytes);
  else
    wl_k(m, l, replay, WL_ROLE_OTHER, "nan_fill", CFG_KCLASS_ELEMENTWISE, 0, bytes);
  GArray *to = wl_list(l, replay || backward);
  g_array_index(to, wl_kernel, to->len - 1).hostless = true;
}

static double wl_block_saved(const wl_shape *x);

/* Without Megatron-LM's gradient-accumulation fusion (--no-gradient-accumulation-fusion),
 * Transformer Engine's weight-gradient GEMM writes a fresh gradient in the activations' dtype
 * (pytorch/module/linear.py, fuse_wgrad_accumulation off) and Megatron's data-parallel hook
 * adds it into the fp32 main gradient, param.main_grad.add_(param.grad.data)
 * (megatron/core/distributed/distributed_data_parallel.py, _make_backward_post_hook): per
 * parameter and micro-batch one read of the gradient and a read and write of main_grad, and
 * under determinism the NaN fill of the fresh gradient (torch.empty) before the GEMM writes
 * it. One memory-bound kernel per layer backward, a weight-gradient one (zero-bubble
 * schedules run it in the W pass), with no host time of its own: the hooks' Python is part of
 * what training.host_dispatch was fitted on (Megatron-LM's CI runs without the fusion). */
static void wl_main_grad_add(wl_model *m, wl_layer *l, const wl_shape *x, double params)
{
  if (!(x->main_grad > 0) || !(params > 0))
    return;
  double per_param = x->dt + 2 * x->main_grad + (x->deterministic ? x->dt : 0);
  wl_bwd(m, l, WL_ROLE_OTHER, WL_PHASE_WGRAD, "main_grad_add", CFG_KCLASS_ELEMENTWISE, params,
         params * per_param);
  g_array_index(l->bwd, wl_kernel, l->bwd->len - 1).hostless = true;
}

/* The activations a block's forward writes, all kept or not. */
static double wl_block_written(const wl_shape *x)
{
  wl_shape full = *x;
  full.recompute = CFG_RECOMPUTE_NONE;
  full.op_sac = false;
  return wl_block_saved(&full);
}

static void wl_block_fwd(wl_model *m, wl_layer *l, const wl_shape *x, bool replay)
{
  double proj_in = x->a * x->d / x->t;
  wl_norm(m, l, x, "ln1", x->Te * x->h, false, replay);
  wl_qkv(m, l, x, false, replay);
  wl_qk_prep(m, l, x, false, replay);
  wl_attention_fwd(m, l, x, replay);
  wl_gemm_as(m, l, WL_ROLE_ATTN_OUT, "proj", x->T, x->h, proj_in, x->dt, false, replay);
  wl_k(m, l, replay, WL_ROLE_RESIDUAL, "residual1", CFG_KCLASS_ELEMENTWISE, 4 * x->Te * x->h, x->Te * x->h * (3 * x->dt + 1));
  wl_norm(m, l, x, "ln2", x->Te * x->h, false, replay);
  if (x->moe)
    wl_moe_fwd(m, l, x, replay);
  else
    wl_mlp_fwd(m, l, x, replay);
  wl_k(m, l, replay, WL_ROLE_RESIDUAL, "residual2", CFG_KCLASS_ELEMENTWISE, 4 * x->Te * x->h, x->Te * x->h * (3 * x->dt + 1));
  if (x->deterministic)
    wl_fill(m, l, wl_block_written(x), false, replay);
}

/* Renames the kernels of `list` from `from` on as the teacher's ("layer3.teacher.qkv"). */
static void wl_mark_teacher(wl_model *m, GArray *list, guint from, const char *layer)
{
  for (guint i = from; i < list->len; i++) {
    wl_kernel *k = &g_array_index(list, wl_kernel, i);
    g_autofree char *name = g_strdup_printf("%s.teacher%s", layer, k->name + strlen(layer));
    k->name = g_string_chunk_insert_const(m->strings, name);
  }
}

/* Knowledge distillation (ModelOpt's DistillationModel in Megatron-LM): the frozen teacher's
 * forward runs before the student's on the same micro-batch, with the same tensor-parallel
 * collectives; nothing of it is kept for backward, nor recomputed. */
static void wl_block_teacher(wl_model *m, wl_layer *l, const wl_shape *x)
{
  guint from = l->fwd->len;
  wl_block_fwd(m, l, x, false);
  wl_mark_teacher(m, l->fwd, from, l->name);
}

/* Whether torchtitan's per-op policy applies: a dense block with plain (not latent)
 * attention, whose matmuls it counts (wq, wk, wv, wo, w1, [w3,] w2). */
static bool wl_op_sac(const wl_shape *x)
{
  return x->recompute == CFG_RECOMPUTE_SELECTIVE && x->op_sac && !x->moe && x->qr == 0 && x->flash;
}

/* torchtitan's per-op selective checkpointing (torchtitan/parallelisms/parallelize_llama.py
 * @ 9dec370, _apply_ac_to_transformer_block with selective_ac_option "op"): the policy saves
 * the outputs of the ops in _save_list (aten.mm, the SDPA kernels) except every second mm of
 * the block, and marks every other op PREFER_RECOMPUTE. The mms run wq, wk, wv, wo, w1, w3, w2,
 * so wq, wv, w1 and w2 are saved and wk, wo and w3 recomputed, with the norms, the rotary
 * embedding, the key/value repetition, the first residual add and the activation. Backward
 * replays the block's forward up to the last tensor it needs (non-reentrant checkpointing
 * stops early: the final residual add is not rerun); a saved op returns its output. */
static void wl_block_recompute_op(wl_model *m, wl_layer *l, const wl_shape *x)
{
  wl_norm(m, l, x, "ln1", x->Te * x->h, false, true);
  wl_gemm_as(m, l, WL_ROLE_QKV, "wk", x->T, x->kv * x->d / x->t, x->h, x->dt, false, true);
  wl_qk_prep(m, l, x, false, true);
  wl_gemm_as(m, l, WL_ROLE_ATTN_OUT, "proj", x->T, x->h, x->a * x->d / x->t, x->dt, false, true);
  wl_k(m, l, true, WL_ROLE_RESIDUAL, "residual1", CFG_KCLASS_ELEMENTWISE, 4 * x->Te * x->h, x->Te * x->h * (3 * x->dt + 1));
  wl_norm(m, l, x, "ln2", x->Te * x->h, false, true);
  if (x->gate == 2)
    wl_gemm_as(m, l, WL_ROLE_MLP_UP, "w3", x->T, x->f / x->t, x->h, x->dt, false, true);
  wl_act(m, l, x, false, true);
}

/* Backward of a block: recomputation first (full: the whole forward; selective: the attention
 * core that was dropped, unless FlashAttention already recomputes it, or torchtitan's per-op
 * choice), then the gradients. */
static void wl_block_bwd(wl_model *m, wl_layer *l, const wl_shape *x)
{
  if (x->recompute == CFG_RECOMPUTE_FULL)
    wl_block_fwd(m, l, x, true);
  else if (wl_op_sac(x))
    wl_block_recompute_op(m, l, x);
  else if (x->recompute == CFG_RECOMPUTE_SELECTIVE && !x->flash)
    wl_attention_fwd(m, l, x, true);
  wl_elementwise(m, l, WL_ROLE_RESIDUAL, "residual2.bwd", x->Te * x->h, 3 * x->dt + 1, true);
  if (x->moe)
    wl_moe_bwd(m, l, x);
  else
    wl_mlp_bwd(m, l, x);
  wl_norm(m, l, x, "ln2", x->Te * x->h, true, false);
  wl_elementwise(m, l, WL_ROLE_RESIDUAL, "residual1.bwd", x->Te * x->h, 3 * x->dt + 1, true);
  wl_gemm(m, l, WL_ROLE_ATTN_OUT, "proj", x->T, x->h, x->a * x->d / x->t, x->dt, true);
  wl_attention_bwd(m, l, x);
  wl_qk_prep(m, l, x, true, false);
  wl_qkv(m, l, x, true, false);
  wl_norm(m, l, x, "ln1", x->Te * x->h, true, false);
  if (x->deterministic)
    wl_fill(m, l, wl_block_written(x), true, false);
}

/* What torchtitan's per-op policy keeps of a block: its input (checkpointing saves the
 * wrapped function's inputs), the saved mms' outputs (wq, wv, w1, and w2 when gated: it is the
 * seventh), and attention's output with its softmax statistics (fp32, one per head and
 * query). */
static double wl_block_saved_op(const wl_shape *x)
{
  double heads = x->a / x->t;
  double mms = (heads * x->d + x->kv * x->d / x->t + x->f / x->t) + (x->gate == 2 ? x->h : 0);
  return x->Te * x->h * x->dt + x->T * (x->dt * (mms + heads * x->d) + 4 * heads);
}

/* Activations a block keeps for backward (Korthikanti et al. 2022, Table 2, generalised to
 * grouped-query attention and gated MLPs), in bytes. For GPT (kv = a, f = 4h, 16-bit):
 *   tensor parallel: sbh (10 + 24/t + 5as/(ht)), + sequence parallel: sbh (34/t + 5as/(ht)).
 * The 10 are layer-norm and block inputs and dropout masks (split by sequence parallelism);
 * the 24 are Q, K, V, the projection input and the MLP's two wide tensors (split by t); the
 * 5as/h are the attention scores, gone with FlashAttention or selective recomputation. Full
 * recomputation keeps only the block input. Activations are 16-bit unless training in fp32.
 * Training in 8 or 4 bits, the linear layers keep their inputs quantized for wgrad (Transformer
 * Engine's Linear and LayerNormLinear save the fp8 copy, not the bf16 one): the two norms'
 * outputs and the MLP's second GEMM input shrink to q of their size, and the attention output
 * is kept twice, in bf16 for the attention's backward and quantized for the projection's.
 * A mixture of experts keeps, instead of the MLP's wide tensors, its routed copies (input,
 * both expert activations, output) and the shared experts' (an estimate: no measurement of MoE
 * activations was at hand). */
static double wl_block_saved(const wl_shape *x)
{
  double sbh = x->sq * x->b * x->h, scale = x->dt / 2;
  double split = x->Te < x->T ? x->t : 1; /* sequence parallel */
  if (x->recompute == CFG_RECOMPUTE_FULL)
    return 2 * sbh / split * scale;
  if (wl_op_sac(x))
    return wl_block_saved_op(x);
  double r = x->kv / x->a;
  double mlp = x->moe ? 2 * (x->recv * (2 * x->h + (x->gate + 1) * x->fe) +
                             x->n * (x->gate + 1) * x->S * x->fe) / (x->T * x->h) * x->t
                      : 2 * (x->gate + x->q) * x->f / x->h;
  double tp_part = (4 + 2 * (x->q < 1 ? x->q : 0) + 4 * r + mlp) / x->t;
  double rest = (6 + 4 * x->q) / split;
  bool scores = !x->flash && x->recompute == CFG_RECOMPUTE_NONE;
  double quad = scores ? 5 * x->a * x->s / (x->h * x->t) : 0;
  return sbh * (rest + tp_part + quad) * scale;
}

static double wl_block_attention_flops(const wl_shape *x)
{
  /* full, not causal-halved (Megatron) */
  return 2 * x->b * x->sq * x->s * (x->dqk + x->d) * x->a / x->t;
}

/* Weights of the attention part of a block held by one GPU. */
static double wl_attention_params(const wl_shape *x)
{
  double heads = x->a / x->t, proj = heads * x->d * x->h;
  if (x->qr == 0)
    return x->h * x->qkv / x->t + proj;
  return x->h * (x->qr + x->kvr + x->rd) + x->qr * heads * x->dqk +
         x->kvr * heads * (x->dqk - x->rd + x->d) + proj;
}

/* Weights of the feed-forward part held by one GPU, and of those the routed experts' (this
 * GPU's E / ep experts). */
static double wl_ffn_params(const wl_shape *x, double *experts)
{
  if (!x->moe) {
    *experts = 0;
    return (x->gate + 1) * x->h * x->f / x->t;
  }
  double one = (x->gate + 1) * x->h * x->fe;
  *experts = one * x->E / x->ep;
  return *experts + one * x->S + x->h * x->E;
}

static double wl_block_model_flops(const wl_shape *x)
{
  /* Megatron's convention: full (not causal-halved) attention, GEMMs only; a mixture of
   * experts counts the experts a token activates, at the mean load */
  double gemm = 2 * x->T * (wl_attention_params(x) * x->t);
  if (x->moe)
    gemm += 2 * x->n * x->t * ((x->gate + 1) * x->h * x->fe * (x->k + x->S) + x->h * x->E);
  else
    gemm += 2 * x->T * (x->gate + 1) * x->h * x->f;
  return gemm / x->t + wl_block_attention_flops(x);
}

/* What recomputation runs again: the whole forward, or the attention core (selective; none
 * with FlashAttention, which recomputes inside its own backward anyway). */
static double wl_block_recompute_flops(const wl_shape *x)
{
  if (x->recompute == CFG_RECOMPUTE_FULL)
    return wl_block_model_flops(x);
  if (wl_op_sac(x)) /* wk, wo and w3 */
    return 2 * x->T * x->h * (x->kv * x->d + x->a * x->d + (x->gate == 2 ? x->f : 0)) / x->t;
  if (x->recompute == CFG_RECOMPUTE_SELECTIVE && !x->flash)
    return wl_block_attention_flops(x);
  return 0;
}

static wl_shape wl_shape_of(const cfg_model *cm, const cfg_training *t, const wl_shard *sh)
{
  wl_shape x = {.b = sh->micro_batch, .s = cm->seq_len, .h = cm->hidden, .a = cm->heads,
                .kv = cm->kv_heads, .f = cm->ffn_hidden, .V = cm->vocab, .t = sh->tp,
                .dt = cfg_dtype_bytes(t->dtype) < 2 ? 2 : cfg_dtype_bytes(t->dtype),
                .q = MIN(cfg_dtype_bytes(t->dtype) / 2, 1.0),
                .flash = t->flash_attention != 0, .recompute = sh->recompute,
                .qk_norm = cm->qk_norm != 0, .rotary = cm->rotary, .distill = t->distill != 0,
                .deterministic = t->deterministic != 0,
                .main_grad = t->grad_accum_fusion ? 0 : cfg_dtype_bytes(t->grad_dtype),
                .impl = t->attention > 0 ? (cfg_attn_impl)(t->attention - 1) : CFG_ATTN_FA2,
                .op_sac = t->selective == CFG_SELECTIVE_TORCHTITAN_OP, .eager = t->eager_ops != 0,
                .eager_loss = t->eager_ops != 0 || t->eager_loss != 0,
                .loss_unfused = !t->loss_fusion,
                .te_ring = t->te_cp_ring != 0};
  x.d = cm->head_dim;
  x.cp = MAX(sh->cp, 1);
  x.torch_cp = x.cp > 1 && sh->cp_exchange == CFG_CP_ALLGATHER;
  x.te_ring = x.te_ring && !x.torch_cp; /* PyTorch's ring is not Transformer Engine's */
  x.checks = t->test_mode && x.qk_norm ? wl_checks_kernels(MAX(sh->checks_dp, 1), MAX(sh->tp, 1)) : 0;
  x.sq = x.s / x.cp;
  x.T = x.b * x.sq;
  x.Te = sh->sp && sh->tp > 1 ? x.T / x.t : x.T;
  x.ub = sh->tp_overlap && t->te_userbuffers;
  x.qkv = (x.a + 2 * x.kv) * x.d;
  x.gate = cm->activation == CFG_ACT_SWIGLU ? 2 : 1;
  x.qr = cm->mla.q_rank;
  x.kvr = cm->mla.kv_rank;
  x.rd = x.qr > 0 ? cm->mla.rope_dim : 0;
  x.dqk = x.d + x.rd;
  x.ep = MAX(sh->ep, 1);
  return x;
}

/* The same block as a mixture of experts. */
static wl_shape wl_moe_shape(const wl_shape *dense, const cfg_model *cm, const wl_shard *sh)
{
  wl_shape x = *dense;
  x.moe = true;
  x.E = cm->moe.experts;
  x.k = cm->moe.top_k;
  x.fe = cm->moe.expert_ffn_hidden;
  x.S = cm->moe.shared_experts;
  x.n = x.T / x.t;
  x.recv = x.n * x.k * sh->moe_load;
  return x;
}

static void wl_embedding(wl_model *m, const wl_shape *x)
{
  wl_layer *emb = wl_layer_add(m, "embedding", x->V * x->h / x->t);
  if (x->distill) {
    wl_fwd(m, emb, WL_ROLE_LOOKUP, "lookup", CFG_KCLASS_ELEMENTWISE, 0, 2 * x->dt * x->Te * x->h);
    wl_mark_teacher(m, emb->fwd, 0, emb->name);
  }
  wl_fwd(m, emb, WL_ROLE_LOOKUP, "lookup", CFG_KCLASS_ELEMENTWISE, 0, 2 * x->dt * x->Te * x->h);
  wl_bwd(m, emb, WL_ROLE_LOOKUP, WL_PHASE_BACKWARD, "lookup.bwd", CFG_KCLASS_ELEMENTWISE, x->T * x->h,
         x->dt * (2 * x->Te * x->h + x->V * x->h / x->t));
  wl_main_grad_add(m, emb, x, emb->params);
  /* its dropout mask */
  emb->saved_bytes = x->Te * x->h;
}

/* The teacher's final norm and logits, and the KL divergence of the student's softmax from the
 * teacher's over the vocabulary shard (fp32, both read; reduced over the shards like the
 * cross-entropy), with the gradient it sends back into the student's logits. */
static void wl_teacher_logits(wl_model *m, wl_layer *head, const wl_shape *x)
{
  guint from = head->fwd->len;
  double shard = x->T * x->V / x->t;
  wl_elementwise(m, head, WL_ROLE_NORM, "final_ln", x->Te * x->h, 2 * x->dt, false);
  wl_gemm(m, head, WL_ROLE_LOGITS, "logits", x->T, x->V / x->t, x->h, x->dt, false);
  wl_mark_teacher(m, head->fwd, from, head->name);
  wl_fwd(m, head, WL_ROLE_LOSS, "kd_loss", CFG_KCLASS_ELEMENTWISE, 10 * shard, shard * (2 * x->dt + 8));
  wl_bwd(m, head, WL_ROLE_LOSS, WL_PHASE_BACKWARD, "kd_loss.bwd", CFG_KCLASS_ELEMENTWISE, 2 * shard,
         shard * (4 + x->dt));
}

static void wl_output(wl_model *m, const cfg_model *cm, const wl_shape *x)
{
  wl_layer *head = wl_layer_add(m, "output", (cm->tied_embeddings ? 0 : x->V * x->h / x->t) + 2 * x->h);
  wl_norm(m, head, x, "final_ln", x->Te * x->h, false, false);
  wl_gemm(m, head, WL_ROLE_LOGITS, "logits", x->T, x->V / x->t, x->h, x->dt, false);
  if (x->distill)
    wl_teacher_logits(m, head, x);
  /* Cross-entropy in fp32 over the vocabulary shard (Megatron). Unfused
   * (megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy @ d98e8a64),
   * each op is a pass over the fp32 logits: .float() (reads dt, writes 4), max (4), the
   * in-place subtraction of the max (4 + 4), exp into itself (4 + 4), sum (4) and div_ (4 + 4):
   * 24 bytes a logit more than one fused pass; backward's mul_ by the loss gradient (4 + 4)
   * before the cast back to dt adds 8. Still one modelled kernel each way: the host's time per
   * kernel was fitted on runs of this path. */
  double fwd_bytes = x->dt + 12 + (x->loss_unfused ? 24 : 0);
  double bwd_bytes = 4 + x->dt + (x->loss_unfused ? 8 : 0);
  wl_fwd(m, head, WL_ROLE_LOSS, "cross_entropy", CFG_KCLASS_ELEMENTWISE, 5 * x->T * x->V / x->t,
         x->T * x->V / x->t * fwd_bytes);
  /* eager: nll_loss's backward writes an fp32 gradient, log_softmax's reads it and the saved
   * output and writes another (16 bytes a logit more than one fused pass) */
  wl_bwd(m, head, WL_ROLE_LOSS, WL_PHASE_BACKWARD, "cross_entropy.bwd", CFG_KCLASS_ELEMENTWISE, 2 * x->T * x->V / x->t,
         x->T * x->V / x->t * (bwd_bytes + (x->eager_loss ? 16 : 0)));
  wl_gemm(m, head, WL_ROLE_LOGITS, "logits", x->T, x->V / x->t, x->h, x->dt, true);
  wl_norm(m, head, x, "final_ln", x->Te * x->h, true, false);
  wl_main_grad_add(m, head, x, head->params);
  /* fp32 logits (softmax kept for the loss gradient) and the final norm's input */
  head->saved_bytes = x->T * x->V / x->t * 4 + x->Te * x->h * x->dt;
  if (x->deterministic) {
    wl_fill(m, head, head->saved_bytes, false, false);
    wl_fill(m, head, head->saved_bytes, true, false);
  }
  head->model_flops = 2 * x->T * x->h * x->V / x->t;
  /* Eager PyTorch's cross_entropy(pred.float(), labels) (torchtitan's loss_fn) is log_softmax
   * then nll_loss: at the start of backward the saved fp32 log-probabilities, nll_loss's fp32
   * gradient and log_softmax's fp32 input gradient are alive at once, while every block's
   * activations still are. */
  if (x->eager_loss)
    m->loss_peak = 2 * 4 * x->T * x->V / x->t;
}

/* Whether block i (0-based) is a mixture of experts. */
static bool wl_is_moe_block(const cfg_model *cm, int i)
{
  if (cm->kind != CFG_MODEL_MOE_TRANSFORMER || i < cm->moe.first_dense)
    return false;
  return (i - cm->moe.first_dense) % cm->moe.every == cm->moe.every - 1;
}

/* Transformer Engine's userbuffers overlap (initialize_ub's default methods, the same in v1.8
 * and v2.x, transformer_engine/pytorch/module/base.py): the GEMMs that take an all-gathered input
 * (QKV and FC1 forward, the projection's and FC2's input gradients) run "ring_exchange", one
 * piece per TP rank of the tokens as their chunk arrives over the copy engines (num_sm 1, no
 * SM margin); the row-parallel forward GEMMs run "pipeline", 4 pieces of their output features
 * (num_splits 4), each reduce-scattered by a kernel on 16 SMs (num_sm 16) that the GEMM leaves
 * free (set_sm_margin: the default since TE 2.1, and in NeMo's tuned H100 configs, e.g. NeMo-
 * Framework-Launcher 24.07 tp_overlap/ub_cfg_h100_h6144_tp2_mbs2_seqlen2048.yaml, 16 and 24
 * SMs). The "bulk" overlaps (QKV's and FC1's gradients) run the GEMM whole, without margin. */
#define WL_UB_PIPELINE_SPLITS 4
#define WL_UB_PIPELINE_SMS 16

static void wl_ub_mark(wl_kernel *k, double tp)
{
  if (k->kclass != CFG_KCLASS_GEMM)
    return;
  bool column = k->role == WL_ROLE_QKV || k->role == WL_ROLE_MLP_UP;
  bool row = k->role == WL_ROLE_ATTN_OUT || k->role == WL_ROLE_MLP_DOWN;
  if ((wl_is_forward(k) && column) || (k->phase == WL_PHASE_DGRAD && row))
    k->split_rows = (uint8_t)MIN(tp, 255);
  if (wl_is_forward(k) && row) {
    k->split_cols = WL_UB_PIPELINE_SPLITS;
    k->sms_held = WL_UB_PIPELINE_SMS;
  }
}

static void wl_ub_mark_layer(wl_layer *l, const wl_shape *x)
{
  if (!x->ub)
    return;
  GArray *lists[] = {l->fwd, l->bwd};
  for (size_t i = 0; i < G_N_ELEMENTS(lists); i++)
    for (guint j = 0; j < lists[i]->len; j++)
      wl_ub_mark(&g_array_index(lists[i], wl_kernel, j), x->t);
}

/* Adds block i; blocks of one kind run the same kernels (the first of the kind's list). */
static void wl_block_add(wl_model *m, const wl_shape *x, int i, const wl_layer **first)
{
  double experts = 0;
  double params = wl_attention_params(x) + wl_ffn_params(x, &experts) + 4 * x->h;
  char num[16], name[32] = "layer";
  g_strlcat(name, wl_number(num, (guint)i), sizeof name); /* no allocation per block */
  wl_layer *l = wl_layer_add(m, name, params);
  l->expert_params = experts;
  l->moe = x->moe;
  if (*first) {
    wl_layer_share_kernels(l, *first);
  } else {
    if (x->distill)
      wl_block_teacher(m, l, x);
    wl_block_fwd(m, l, x, false);
    wl_block_bwd(m, l, x);
    wl_main_grad_add(m, l, x, params);
    wl_ub_mark_layer(l, x);
    *first = l;
  }
  l->saved_bytes = wl_block_saved(x);
  l->model_flops = wl_block_model_flops(x);
  l->recompute_flops = wl_block_recompute_flops(x);
}

bool wl_transformer_build(wl_model *m, const cfg_model *cm, const cfg_training *t,
                          const wl_shard *sh, GError **err)
{
  (void)err;
  wl_shape x = wl_shape_of(cm, t, sh), mx = wl_moe_shape(&x, cm, sh);
  m->fp8_current = t->fp8_recipe == CFG_FP8_CURRENT;
  m->samples = x.b;
  m->tokens = x.T;
  m->blocks = cm->layers;
  wl_embedding(m, &x);
  const wl_layer *first_dense = NULL, *first_moe = NULL;
  for (int i = 0; i < cm->layers; i++) {
    bool moe = wl_is_moe_block(cm, i);
    wl_block_add(m, moe ? &mx : &x, i, moe ? &first_moe : &first_dense);
  }
  if (sh->recompute != CFG_RECOMPUTE_NONE) {
    /* while one block is recomputed, what recomputation dropped is alive again */
    wl_shape full = first_moe ? mx : x;
    full.recompute = CFG_RECOMPUTE_NONE;
    m->recompute_peak = wl_block_saved(&full) - wl_block_saved(first_moe ? &mx : &x);
  }
  if (x.torch_cp)
    m->ring_peak = wl_torch_cp_peak(&x);
  if (first_moe) {
    m->moe_tokens = mx.n;
    m->moe_copies = mx.n * mx.k;
    m->moe_load = sh->moe_load;
    m->moe_dropped = sh->moe_dropped;
  }
  wl_output(m, cm, &x);
  return true;
}
