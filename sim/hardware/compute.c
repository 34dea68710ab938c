/* The compute cost model of one kernel on one GPU (a roofline with calibrated efficiencies). */
#include "hardware/hardware.h"

#include <math.h>

static bool hw_has(const cfg_gpu *g, cfg_dtype d)
{
  return !isnan(g->flops[d]) && g->flops[d] > 0;
}

double hw_peak_flops(const hw_cluster *hw, cfg_dtype dtype)
{
  /* Without a unit for a dtype the GPU runs it on the next wider one. */
  static const cfg_dtype fallback[CFG_NUNITS][4] = {
      [CFG_FP32] = {CFG_FP32, CFG_TF32, CFG_BF16, CFG_FP16},
      [CFG_TF32] = {CFG_TF32, CFG_FP32, CFG_BF16, CFG_FP16},
      [CFG_BF16] = {CFG_BF16, CFG_FP16, CFG_TF32, CFG_FP32},
      [CFG_FP16] = {CFG_FP16, CFG_BF16, CFG_TF32, CFG_FP32},
      [CFG_FP8] = {CFG_FP8, CFG_BF16, CFG_FP16, CFG_FP32},
      [CFG_INT8] = {CFG_INT8, CFG_FP8, CFG_BF16, CFG_FP16},
      [CFG_INT4] = {CFG_INT4, CFG_INT8, CFG_FP8, CFG_BF16},
      /* the loader refuses fp4 formats on a GPU without the unit; a trace may still name them */
      [CFG_FP4] = {CFG_FP4, CFG_FP8, CFG_BF16, CFG_FP16},
  };
  const cfg_gpu *g = &hw_config(hw)->gpu;
  dtype = cfg_dtype_unit(dtype);
  for (int i = 0; i < 4; i++)
    if (hw_has(g, fallback[dtype][i]))
      return g->flops[fallback[dtype][i]];
  for (int d = 0; d < CFG_NUNITS; d++)
    if (hw_has(g, (cfg_dtype)d))
      return g->flops[d];
  return 1.0;
}

const cfg_efficiency *hw_efficiency(const hw_cluster *hw)
{
  return &hw_config(hw)->gpu.efficiency;
}

/* Fraction of the 16-bit peak a fused attention kernel reaches (cfg_attention_eff). The
 * causal kernel's 128-wide diagonal tiles run in full though half of them is masked. */
static double hw_attention_efficiency(const cfg_attention_eff *a, const cfg_attn_shape *s)
{
  int i = s->impl < CFG_NATTN ? s->impl : CFG_ATTN_FA2;
  double rows = s->causal ? s->keys / 2 : s->keys;
  double half = s->backward ? a->bwd_half[i] : a->fwd_half[i];
  double eff = (s->backward ? a->bwd[i] : a->fwd[i]) * rows / (rows + half);
  if (s->head_dim <= 64)
    eff *= a->d64[i];
  if (s->causal)
    eff *= a->causal / (1 + 128.0 / s->keys);
  return eff;
}

/* A 16-bit GEMM whose time the weights' read may bound, when the GPU has its own figure for
 * that regime: decode GEMMs (a few rows against the whole matrix) stream HBM faster, and with
 * less fixed cost, than the compute-bound shapes the GEMM model is fitted on. */
static bool hw_streams_weights(const cfg_efficiency *e, const hw_kernel *k)
{
  return k->kclass == CFG_KCLASS_GEMM && e->gemm_stream > 0 &&
         (cfg_dtype_unit(k->dtype) == CFG_BF16 || cfg_dtype_unit(k->dtype) == CFG_FP16);
}

double hw_kernel_time(const hw_cluster *hw, const hw_kernel *k)
{
  const cfg_gpu *g = &hw_config(hw)->gpu;
  const cfg_efficiency *e = &g->efficiency;
  /* PyTorch eager on a CPU runs attention as batched matmuls and a softmax: no fused kernel */
  bool fused_attention = k->kclass == CFG_KCLASS_ATTENTION && k->attn.keys > 0 &&
                         g->kind != CFG_DEVICE_CPU;
  double eff = fused_attention ? hw_attention_efficiency(&e->attention, &k->attn)
                               : e->flops_efficiency[k->kclass];
  /* a GEMM streams K in tiles through a software pipeline whose fill and drain do not
   * compute: short reductions (K = head dim in attention scores, h / t after a row-parallel
   * split) run below the large-GEMM rate */
  if (k->kclass == CFG_KCLASS_GEMM && k->inner > 0)
    eff *= k->inner / (k->inner + e->gemm_k_half);
  double peak = hw_peak_flops(hw, k->dtype);
  /* 8- and 4-bit GEMMs reach a smaller fraction of their peak than 16-bit ones (FP8 measured
   * on H100, FP4 on B200) */
  cfg_dtype unit = cfg_dtype_unit(k->dtype);
  if ((unit == CFG_FP8 || unit == CFG_FP4) && peak == g->flops[unit])
    eff *= unit == CFG_FP4 ? e->fp4_scale : e->fp8_scale;
  double t_flops = k->flops > 0 ? k->flops / (peak * eff * e->sustained) : 0.0;
  double t_bytes = k->bytes > 0 ? k->bytes / (g->memory_bandwidth * e->memory_efficiency) : 0.0;
  /* the host's launches (host_dispatch) are the engines' launch queue, not the kernel's time */
  if (hw_streams_weights(e, k))
    return MAX(t_flops + e->launch_overhead,
               k->bytes / (g->memory_bandwidth * e->gemm_stream) + e->gemm_stream_overhead);
  return MAX(t_flops, t_bytes) + e->launch_overhead;
}
