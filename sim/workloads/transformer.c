/* A GPT / Llama style decoder layer as kernels: FLOPs from the GEMM shapes, bytes from the
 * tensors each kernel reads and writes. Attention uses FlashAttention (one fused kernel, causal
 * mask halves its work) unless training.flash_attention is false. */
#include "workloads/workloads_internal.h"

typedef struct {
  double b, s, h, a, kv, d, f, V, t, dt;
  double T;     /* tokens in the micro-batch */
  double qkv;   /* width of the fused QKV projection */
  double gate;  /* 2 for gated MLPs (SwiGLU) */
  bool flash;
} wl_shape;

/* A GEMM of (m x k) by (k x n): 2mnk FLOPs, reads both inputs, writes the output. */
static void wl_gemm(wl_model *m, wl_layer *l, const char *what, double M, double N, double K,
                    double dt, bool backward)
{
  double flops = 2 * M * N * K, bytes = dt * (M * K + K * N + M * N);
  if (!backward) {
    wl_fwd(m, l, what, CFG_KCLASS_GEMM, flops, bytes);
    return;
  }
  g_autofree char *dg = g_strdup_printf("%s.dgrad", what);
  g_autofree char *wg = g_strdup_printf("%s.wgrad", what);
  wl_bwd(m, l, dg, CFG_KCLASS_GEMM, flops, bytes);
  wl_bwd(m, l, wg, CFG_KCLASS_GEMM, flops, bytes);
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

static void wl_attention(wl_model *m, wl_layer *l, const wl_shape *x, bool backward)
{
  double heads = x->a / x->t;
  if (x->flash) {
    /* FLOPs = 4 s^2 d per head, halved by the causal mask; backward does 2.5x the forward. */
    double flops = 4 * x->b * x->s * x->s * x->d * heads * 0.5;
    double bytes = x->dt * x->T * (x->qkv + x->h) / x->t;
    if (backward)
      wl_bwd(m, l, "attention.bwd", CFG_KCLASS_ATTENTION, 2.5 * flops, 2.5 * bytes);
    else
      wl_fwd(m, l, "attention", CFG_KCLASS_ATTENTION, flops, bytes);
    return;
  }
  double scores = x->b * heads * x->s * x->s;
  /* Q K^T and (softmax) V as batched GEMMs over all heads, plus softmax and dropout. */
  double gflops = 2 * x->b * heads * x->s * x->s * x->d;
  double gbytes = x->dt * (2 * x->T * x->h / x->t + scores);
  if (!backward) {
    wl_fwd(m, l, "scores", CFG_KCLASS_GEMM, gflops, gbytes);
    wl_fwd(m, l, "softmax_dropout", CFG_KCLASS_ELEMENTWISE, 8 * scores, scores * (3 * x->dt + 1));
    wl_fwd(m, l, "context", CFG_KCLASS_GEMM, gflops, gbytes);
  } else {
    wl_bwd(m, l, "context.dgrad", CFG_KCLASS_GEMM, gflops, gbytes);
    wl_bwd(m, l, "context.wgrad", CFG_KCLASS_GEMM, gflops, gbytes);
    wl_bwd(m, l, "softmax_dropout.bwd", CFG_KCLASS_ELEMENTWISE, 8 * scores, scores * (4 * x->dt + 1));
    wl_bwd(m, l, "scores.dgrad", CFG_KCLASS_GEMM, gflops, gbytes);
    wl_bwd(m, l, "scores.wgrad", CFG_KCLASS_GEMM, gflops, gbytes);
  }
}

/* One pass (forward or backward, which runs the kernels in reverse order). */
static void wl_layer_pass(wl_model *m, wl_layer *l, const wl_shape *x, bool bwd)
{
  double Te = x->T, ffn = x->f / x->t;
  if (!bwd) {
    wl_elementwise(m, l, "ln1", Te * x->h, 2 * x->dt, false);
    wl_gemm(m, l, "qkv", x->T, x->qkv / x->t, x->h, x->dt, false);
    wl_attention(m, l, x, false);
    wl_gemm(m, l, "proj", x->T, x->h, x->h / x->t, x->dt, false);
    wl_elementwise(m, l, "residual1", Te * x->h, 3 * x->dt + 1, false);
    wl_elementwise(m, l, "ln2", Te * x->h, 2 * x->dt, false);
    wl_gemm(m, l, "mlp_up", x->T, ffn * x->gate, x->h, x->dt, false);
    wl_elementwise(m, l, "act", x->T * ffn, (x->gate + 1) * x->dt, false);
    wl_gemm(m, l, "mlp_down", x->T, x->h, ffn, x->dt, false);
    wl_elementwise(m, l, "residual2", Te * x->h, 3 * x->dt + 1, false);
    return;
  }
  wl_elementwise(m, l, "residual2.bwd", Te * x->h, 3 * x->dt + 1, true);
  wl_gemm(m, l, "mlp_down", x->T, x->h, ffn, x->dt, true);
  wl_elementwise(m, l, "act.bwd", x->T * ffn, (x->gate + 1) * x->dt, true);
  wl_gemm(m, l, "mlp_up", x->T, ffn * x->gate, x->h, x->dt, true);
  wl_elementwise(m, l, "ln2.bwd", Te * x->h, 2 * x->dt, true);
  wl_elementwise(m, l, "residual1.bwd", Te * x->h, 3 * x->dt + 1, true);
  wl_gemm(m, l, "proj", x->T, x->h, x->h / x->t, x->dt, true);
  wl_attention(m, l, x, true);
  wl_gemm(m, l, "qkv", x->T, x->qkv / x->t, x->h, x->dt, true);
  wl_elementwise(m, l, "ln1.bwd", Te * x->h, 2 * x->dt, true);
}

/* Activations kept for backward, per Korthikanti et al. 2022 (Table 2), in bytes: 16-bit
 * activations sbh(34 + 5as/h), the s^2 term gone with FlashAttention. */
static double wl_layer_saved(const wl_shape *x)
{
  double sbh = x->s * x->b * x->h;
  double per = 10 + 24 / x->t;
  double quad = x->flash ? 0 : 5 * x->a * x->s / (x->h * x->t);
  return sbh * (per + quad) * x->dt / 2;
}

static double wl_layer_model_flops(const wl_shape *x)
{
  /* Megatron's convention: full (not causal-halved) attention, GEMMs only. */
  double gemm = 2 * x->T * x->h * (x->qkv + x->h + 2 * x->f * (x->gate + 1) / 2);
  double attn = 4 * x->b * x->s * x->s * x->h;
  return (gemm + attn) / x->t;
}

bool wl_transformer_build(wl_model *m, const cfg_model *cm, const cfg_training *t, int micro_batch,
                          GError **err)
{
  (void)err;
  wl_shape x = {.b = micro_batch, .s = cm->seq_len, .h = cm->hidden, .a = cm->heads,
                .kv = cm->kv_heads, .f = cm->ffn_hidden, .V = cm->vocab, .t = 1,
                .dt = cfg_dtype_bytes(t->dtype) < 2 ? 2 : cfg_dtype_bytes(t->dtype),
                .flash = t->flash_attention != 0};
  x.d = x.h / x.a;
  x.T = x.b * x.s;
  x.qkv = x.h + 2 * x.kv * x.d;
  x.gate = cm->activation == CFG_ACT_SWIGLU ? 2 : 1;
  m->samples = x.b;
  m->tokens = x.T;

  wl_layer *emb = wl_layer_add(m, "embedding", x.V * x.h / x.t);
  wl_fwd(m, emb, "lookup", CFG_KCLASS_ELEMENTWISE, 0, 2 * x.dt * x.T * x.h);
  wl_bwd(m, emb, "lookup.bwd", CFG_KCLASS_ELEMENTWISE, x.T * x.h, x.dt * (2 * x.T * x.h + x.V * x.h / x.t));

  double layer_params = (x.h * x.qkv + x.h * x.h + x.gate * x.h * x.f + x.f * x.h) / x.t + 4 * x.h;
  for (int i = 0; i < cm->layers; i++) {
    g_autofree char *name = g_strdup_printf("layer%d", i);
    wl_layer *l = wl_layer_add(m, name, layer_params);
    wl_layer_pass(m, l, &x, false);
    wl_layer_pass(m, l, &x, true);
    l->saved_bytes = wl_layer_saved(&x);
    l->model_flops = wl_layer_model_flops(&x);
  }

  wl_layer *head = wl_layer_add(m, "output", (cm->tied_embeddings ? 0 : x.V * x.h / x.t) + 2 * x.h);
  wl_elementwise(m, head, "final_ln", x.T * x.h, 2 * x.dt, false);
  wl_gemm(m, head, "logits", x.T, x.V / x.t, x.h, x.dt, false);
  /* Cross-entropy in fp32 over the vocabulary shard (Megatron). */
  wl_fwd(m, head, "cross_entropy", CFG_KCLASS_ELEMENTWISE, 5 * x.T * x.V / x.t,
         x.T * x.V / x.t * (x.dt + 12));
  wl_bwd(m, head, "cross_entropy.bwd", CFG_KCLASS_ELEMENTWISE, 2 * x.T * x.V / x.t,
         x.T * x.V / x.t * (4 + x.dt));
  wl_gemm(m, head, "logits", x.T, x.V / x.t, x.h, x.dt, true);
  wl_elementwise(m, head, "final_ln.bwd", x.T * x.h, 2 * x.dt, true);
  head->saved_bytes = x.T * x.V / x.t * 4 + x.T * x.h * x.dt;
  head->model_flops = 2 * x.T * x.h * x.V / x.t;
  return true;
}
