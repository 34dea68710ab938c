/* A GPT / Llama style decoder layer as kernels on one GPU of a tensor-parallel group: FLOPs
 * from the GEMM shapes, bytes from the tensors each kernel reads and writes. Attention uses
 * FlashAttention (one fused kernel, causal mask halves its work) unless training.flash_attention
 * is false. With sequence parallelism the layer norms and dropouts work on s/t tokens. */
#include "workloads/workloads_internal.h"

typedef struct {
  double b, s, h, a, kv, d, f, V, t, dt;
  double sq;    /* queries (tokens) of the sequence on this GPU: s / cp */
  double T;     /* tokens of the micro-batch on this GPU */
  double Te;    /* tokens the elementwise ops see (T / t with sequence parallelism) */
  double qkv;   /* width of the fused QKV projection */
  double gate;  /* 2 for gated MLPs (SwiGLU) */
  bool flash;
  cfg_recompute recompute;
} wl_shape;

/* A GEMM of (m x k) by (k x n): 2mnk FLOPs, reads both inputs, writes the output. */
static void wl_gemm(wl_model *m, wl_layer *l, const char *what, double M, double N, double K,
                    double dt, bool backward)
{
  double flops = 2 * M * N * K, bytes = dt * (M * K + K * N + M * N);
  if (!backward) {
    wl_fwd(m, l, what, CFG_KCLASS_GEMM, flops, bytes);
    wl_set_inner(l->fwd, K);
    return;
  }
  /* dX = dY W^T reduces over N, dW = X^T dY over the M tokens */
  g_autofree char *dg = g_strdup_printf("%s.dgrad", what);
  g_autofree char *wg = g_strdup_printf("%s.wgrad", what);
  wl_bwd(m, l, dg, CFG_KCLASS_GEMM, flops, bytes);
  wl_set_inner(l->bwd, N);
  wl_bwd(m, l, wg, CFG_KCLASS_GEMM, flops, bytes);
  wl_set_inner(l->bwd, M);
}

static void wl_elementwise(wl_model *m, wl_layer *l, const char *what, double elems, double rw_bytes,
                           bool backward)
{
  /* Backward of an elementwise op reads the saved input and the incoming gradient. */
  double bytes = elems * rw_bytes * (backward ? 1.5 : 1.0);
  if (backward)
    wl_bwd(m, l, what, CFG_KCLASS_ELEMENTWISE, 4 * elems, bytes);
  else
    wl_fwd(m, l, what, CFG_KCLASS_ELEMENTWISE, 4 * elems, bytes);
}

/* The attention core: FlashAttention, or scores / softmax / context as separate kernels. With
 * `replay` the forward kernels go to the backward list, marked as recomputation. */
static void wl_attention_fwd(wl_model *m, wl_layer *l, const wl_shape *x, bool replay)
{
  double heads = x->a / x->t;
  GArray *to = replay ? l->bwd : l->fwd;
  guint first = to->len;
  if (x->flash) {
    /* FLOPs = 4 s^2 d per head, halved by the causal mask (s_q s with context parallelism) */
    double flops = 4 * x->b * x->sq * x->s * x->d * heads * 0.5;
    double bytes = x->dt * x->T * (x->qkv + x->h) / x->t;
    (replay ? wl_bwd : wl_fwd)(m, l, "attention", CFG_KCLASS_ATTENTION, flops, bytes);
  } else {
    double scores = x->b * heads * x->sq * x->s;
    double gflops = 2 * x->b * heads * x->sq * x->s * x->d;
    double gbytes = x->dt * (2 * x->T * x->h / x->t + scores);
    /* Q K^T reduces over the head dimension, P V over the keys */
    (replay ? wl_bwd : wl_fwd)(m, l, "scores", CFG_KCLASS_GEMM, gflops, gbytes);
    wl_set_inner(to, x->d);
    (replay ? wl_bwd : wl_fwd)(m, l, "softmax_dropout", CFG_KCLASS_ELEMENTWISE, 8 * scores,
                               scores * (3 * x->dt + 1));
    (replay ? wl_bwd : wl_fwd)(m, l, "context", CFG_KCLASS_GEMM, gflops, gbytes);
    wl_set_inner(to, x->s);
  }
  for (guint i = first; replay && i < to->len; i++)
    g_array_index(to, wl_kernel, i).recompute = true;
}

static void wl_attention_bwd(wl_model *m, wl_layer *l, const wl_shape *x)
{
  double heads = x->a / x->t;
  if (x->flash) {
    /* backward does 2.5x the forward's work (FlashAttention-2 paper) */
    double flops = 2.5 * 4 * x->b * x->sq * x->s * x->d * heads * 0.5;
    double bytes = 2.5 * x->dt * x->T * (x->qkv + x->h) / x->t;
    wl_bwd(m, l, "attention.bwd", CFG_KCLASS_ATTENTION, flops, bytes);
    return;
  }
  double scores = x->b * heads * x->sq * x->s;
  double gflops = 2 * x->b * heads * x->sq * x->s * x->d;
  double gbytes = x->dt * (2 * x->T * x->h / x->t + scores);
  /* dP = dO V^T and dQ... reduce over the head dimension or the keys, dV and dK over the
   * queries */
  wl_bwd(m, l, "context.dgrad", CFG_KCLASS_GEMM, gflops, gbytes);
  wl_set_inner(l->bwd, x->d);
  wl_bwd(m, l, "context.wgrad", CFG_KCLASS_GEMM, gflops, gbytes);
  wl_set_inner(l->bwd, x->sq);
  wl_bwd(m, l, "softmax_dropout.bwd", CFG_KCLASS_ELEMENTWISE, 8 * scores, scores * (4 * x->dt + 1));
  wl_bwd(m, l, "scores.dgrad", CFG_KCLASS_GEMM, gflops, gbytes);
  wl_set_inner(l->bwd, x->s);
  wl_bwd(m, l, "scores.wgrad", CFG_KCLASS_GEMM, gflops, gbytes);
  wl_set_inner(l->bwd, x->sq);
}

/* The forward kernels of a block, into the forward list (or replayed into backward). */
static void wl_block_fwd(wl_model *m, wl_layer *l, const wl_shape *x, bool replay)
{
  GArray *to = replay ? l->bwd : l->fwd;
  guint first = to->len;
  void (*k)(wl_model *, wl_layer *, const char *, cfg_kernel_class, double, double) =
      replay ? wl_bwd : wl_fwd;
  double ffn = x->f / x->t;
  k(m, l, "ln1", CFG_KCLASS_ELEMENTWISE, 4 * x->Te * x->h, x->Te * x->h * 2 * x->dt);
  k(m, l, "qkv", CFG_KCLASS_GEMM, 2 * x->T * x->qkv / x->t * x->h,
    x->dt * (x->T * x->h + x->h * x->qkv / x->t + x->T * x->qkv / x->t));
  wl_set_inner(to, x->h);
  for (guint i = first; replay && i < to->len; i++)
    g_array_index(to, wl_kernel, i).recompute = true;
  wl_attention_fwd(m, l, x, replay);
  first = to->len;
  k(m, l, "proj", CFG_KCLASS_GEMM, 2 * x->T * x->h * x->h / x->t,
    x->dt * (x->T * x->h / x->t + x->h * x->h / x->t + x->T * x->h));
  wl_set_inner(to, x->h / x->t);
  k(m, l, "residual1", CFG_KCLASS_ELEMENTWISE, 4 * x->Te * x->h, x->Te * x->h * (3 * x->dt + 1));
  k(m, l, "ln2", CFG_KCLASS_ELEMENTWISE, 4 * x->Te * x->h, x->Te * x->h * 2 * x->dt);
  k(m, l, "mlp_up", CFG_KCLASS_GEMM, 2 * x->T * ffn * x->gate * x->h,
    x->dt * (x->T * x->h + x->h * ffn * x->gate + x->T * ffn * x->gate));
  wl_set_inner(to, x->h);
  k(m, l, "act", CFG_KCLASS_ELEMENTWISE, 4 * x->T * ffn, x->T * ffn * (x->gate + 1) * x->dt);
  k(m, l, "mlp_down", CFG_KCLASS_GEMM, 2 * x->T * x->h * ffn,
    x->dt * (x->T * ffn + ffn * x->h + x->T * x->h));
  wl_set_inner(to, ffn);
  k(m, l, "residual2", CFG_KCLASS_ELEMENTWISE, 4 * x->Te * x->h, x->Te * x->h * (3 * x->dt + 1));
  for (guint i = first; replay && i < to->len; i++)
    g_array_index(to, wl_kernel, i).recompute = true;
}

/* Backward of a block: recomputation first (full: the whole forward; selective: the attention
 * core that was dropped, unless FlashAttention already recomputes it), then the gradients. */
static void wl_block_bwd(wl_model *m, wl_layer *l, const wl_shape *x)
{
  if (x->recompute == CFG_RECOMPUTE_FULL)
    wl_block_fwd(m, l, x, true);
  else if (x->recompute == CFG_RECOMPUTE_SELECTIVE && !x->flash)
    wl_attention_fwd(m, l, x, true);
  double ffn = x->f / x->t;
  wl_elementwise(m, l, "residual2.bwd", x->Te * x->h, 3 * x->dt + 1, true);
  wl_gemm(m, l, "mlp_down", x->T, x->h, ffn, x->dt, true);
  wl_elementwise(m, l, "act.bwd", x->T * ffn, (x->gate + 1) * x->dt, true);
  wl_gemm(m, l, "mlp_up", x->T, ffn * x->gate, x->h, x->dt, true);
  wl_elementwise(m, l, "ln2.bwd", x->Te * x->h, 2 * x->dt, true);
  wl_elementwise(m, l, "residual1.bwd", x->Te * x->h, 3 * x->dt + 1, true);
  wl_gemm(m, l, "proj", x->T, x->h, x->h / x->t, x->dt, true);
  wl_attention_bwd(m, l, x);
  wl_gemm(m, l, "qkv", x->T, x->qkv / x->t, x->h, x->dt, true);
  wl_elementwise(m, l, "ln1.bwd", x->Te * x->h, 2 * x->dt, true);
}

/* Activations a block keeps for backward (Korthikanti et al. 2022, Table 2, generalised to
 * grouped-query attention and gated MLPs), in bytes. For GPT (kv = a, f = 4h, 16-bit):
 *   tensor parallel: sbh (10 + 24/t + 5as/(ht)), + sequence parallel: sbh (34/t + 5as/(ht)).
 * The 10 are layer-norm and block inputs and dropout masks (split by sequence parallelism);
 * the 24 are Q, K, V, the projection input and the MLP's two wide tensors (split by t); the
 * 5as/h are the attention scores, gone with FlashAttention or selective recomputation. Full
 * recomputation keeps only the block input. Activations are 16-bit unless training in fp32. */
static double wl_block_saved(const wl_shape *x)
{
  double sbh = x->sq * x->b * x->h, scale = x->dt / 2;
  double split = x->Te < x->T ? x->t : 1; /* sequence parallel */
  if (x->recompute == CFG_RECOMPUTE_FULL)
    return 2 * sbh / split * scale;
  double r = x->kv / x->a;
  double tp_part = (4 + 4 * r + 2 * (x->gate + 1) * x->f / x->h) / x->t;
  double rest = 10 / split;
  bool scores = !x->flash && x->recompute == CFG_RECOMPUTE_NONE;
  double quad = scores ? 5 * x->a * x->s / (x->h * x->t) : 0;
  return sbh * (rest + tp_part + quad) * scale;
}

static double wl_block_attention_flops(const wl_shape *x)
{
  return 4 * x->b * x->sq * x->s * x->h / x->t; /* full, not causal-halved (Megatron) */
}

static double wl_block_model_flops(const wl_shape *x)
{
  /* Megatron's convention: full (not causal-halved) attention, GEMMs only. */
  double gemm = 2 * x->T * x->h * (x->qkv + x->h + x->f * (x->gate + 1));
  return gemm / x->t + wl_block_attention_flops(x);
}

/* What recomputation runs again: the whole forward, or the attention core (selective; none
 * with FlashAttention, which recomputes inside its own backward anyway). */
static double wl_block_recompute_flops(const wl_shape *x)
{
  if (x->recompute == CFG_RECOMPUTE_FULL)
    return wl_block_model_flops(x);
  if (x->recompute == CFG_RECOMPUTE_SELECTIVE && !x->flash)
    return wl_block_attention_flops(x);
  return 0;
}

static wl_shape wl_shape_of(const cfg_model *cm, const cfg_training *t, const wl_shard *sh)
{
  wl_shape x = {.b = sh->micro_batch, .s = cm->seq_len, .h = cm->hidden, .a = cm->heads,
                .kv = cm->kv_heads, .f = cm->ffn_hidden, .V = cm->vocab, .t = sh->tp,
                .dt = cfg_dtype_bytes(t->dtype) < 2 ? 2 : cfg_dtype_bytes(t->dtype),
                .flash = t->flash_attention != 0, .recompute = sh->recompute};
  x.d = x.h / x.a;
  x.sq = x.s / MAX(sh->cp, 1);
  x.T = x.b * x.sq;
  x.Te = sh->sp && sh->tp > 1 ? x.T / x.t : x.T;
  x.qkv = x.h + 2 * x.kv * x.d;
  x.gate = cm->activation == CFG_ACT_SWIGLU ? 2 : 1;
  return x;
}

static void wl_embedding(wl_model *m, const wl_shape *x)
{
  wl_layer *emb = wl_layer_add(m, "embedding", x->V * x->h / x->t);
  wl_fwd(m, emb, "lookup", CFG_KCLASS_ELEMENTWISE, 0, 2 * x->dt * x->Te * x->h);
  wl_bwd(m, emb, "lookup.bwd", CFG_KCLASS_ELEMENTWISE, x->T * x->h,
         x->dt * (2 * x->Te * x->h + x->V * x->h / x->t));
  /* its dropout mask */
  emb->saved_bytes = x->Te * x->h;
}

static void wl_output(wl_model *m, const cfg_model *cm, const wl_shape *x)
{
  wl_layer *head = wl_layer_add(m, "output", (cm->tied_embeddings ? 0 : x->V * x->h / x->t) + 2 * x->h);
  wl_elementwise(m, head, "final_ln", x->Te * x->h, 2 * x->dt, false);
  wl_gemm(m, head, "logits", x->T, x->V / x->t, x->h, x->dt, false);
  /* Cross-entropy in fp32 over the vocabulary shard (Megatron). */
  wl_fwd(m, head, "cross_entropy", CFG_KCLASS_ELEMENTWISE, 5 * x->T * x->V / x->t,
         x->T * x->V / x->t * (x->dt + 12));
  wl_bwd(m, head, "cross_entropy.bwd", CFG_KCLASS_ELEMENTWISE, 2 * x->T * x->V / x->t,
         x->T * x->V / x->t * (4 + x->dt));
  wl_gemm(m, head, "logits", x->T, x->V / x->t, x->h, x->dt, true);
  wl_elementwise(m, head, "final_ln.bwd", x->Te * x->h, 2 * x->dt, true);
  /* fp32 logits (softmax kept for the loss gradient) and the final norm's input */
  head->saved_bytes = x->T * x->V / x->t * 4 + x->Te * x->h * x->dt;
  head->model_flops = 2 * x->T * x->h * x->V / x->t;
}

bool wl_transformer_build(wl_model *m, const cfg_model *cm, const cfg_training *t,
                          const wl_shard *sh, GError **err)
{
  (void)err;
  wl_shape x = wl_shape_of(cm, t, sh);
  m->samples = x.b;
  m->tokens = x.T;
  m->blocks = cm->layers;
  wl_embedding(m, &x);
  double block_params = (x.h * x.qkv + x.h * x.h + x.gate * x.h * x.f + x.f * x.h) / x.t + 4 * x.h;
  const wl_layer *first = NULL;
  for (int i = 0; i < cm->layers; i++) {
    g_autofree char *name = g_strdup_printf("layer%d", i);
    wl_layer *l = wl_layer_add(m, name, block_params);
    if (first) { /* every block runs the first one's kernels (named after it) */
      wl_layer_share_kernels(l, first);
    } else {
      wl_block_fwd(m, l, &x, false);
      wl_block_bwd(m, l, &x);
      first = l;
    }
    l->saved_bytes = wl_block_saved(&x);
    l->model_flops = wl_block_model_flops(&x);
    l->recompute_flops = wl_block_recompute_flops(&x);
  }
  if (sh->recompute != CFG_RECOMPUTE_NONE) {
    /* while one block is recomputed, what recomputation dropped is alive again */
    wl_shape full = x;
    full.recompute = CFG_RECOMPUTE_NONE;
    m->recompute_peak = wl_block_saved(&full) - wl_block_saved(&x);
  }
  wl_output(m, cm, &x);
  return true;
}
