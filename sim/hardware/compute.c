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
  if (s->backward && s->deterministic)
    eff *= a->deterministic[i];
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

/* cuBLAS's output tiles, most efficient first (NVIDIA, Matrix Multiplication Background
 * User's Guide, DU-09799-001, Feb 2023, Sec. 2.3: 256x128 and 128x256, then 128x128, 256x64 and
 * 64x256, 128x64 and 64x128, 64x64); CUTLASS's Hopper and Ampere defaults are among them. */
static const double hw_gemm_tiles[][2] = {{256, 128}, {128, 256}, {128, 128}, {256, 64},
                                          {64, 256},  {128, 64},  {64, 128},  {64, 64}};
/* split-K leaves each split at least one K block of this depth */
#define HW_GEMM_MIN_SPLIT_K 128.0

/* SM-time of a GEMM in one tile and split, in multiply-adds at the largest tile's rate: every
 * SM of every wave is paid for (the last wave's idle ones too), each tile padded to whole rows
 * and columns and pays the pipeline fill of its K (the K ramp) and the loads of its operands. */
static double hw_gemm_tile_cost(const cfg_efficiency *e, int sms, double tiles, double tm,
                                double tn, double k, double split)
{
  double waves = ceil(tiles * split / sms);
  double l = e->gemm_tile_load;
  double load = (1 + l / tm + l / tn) / (1 + l / hw_gemm_tiles[0][0] + l / hw_gemm_tiles[0][1]);
  return waves * sms * tm * tn * (k / split + e->gemm_k_half) * load;
}

/* Output tiles of a GEMM run as pieces (hw_kernel split_rows, split_cols): each pads its own. */
static double hw_gemm_tiles_of(const hw_kernel *k, double batch, double tm, double tn)
{
  double pr = MAX(1, k->split_rows), pc = MAX(1, k->split_cols);
  return batch * pr * ceil(k->rows / pr / tm) * pc * ceil(k->cols / pc / tn);
}

/* Of each tile, the cheapest of no split and the largest split-K that still fits one wave. */
static double hw_gemm_best_cost(const cfg_efficiency *e, int sms, double batch, const hw_kernel *g)
{
  double best = INFINITY, k = g->inner;
  for (size_t i = 0; i < G_N_ELEMENTS(hw_gemm_tiles); i++) {
    double tm = hw_gemm_tiles[i][0], tn = hw_gemm_tiles[i][1];
    double tiles = hw_gemm_tiles_of(g, batch, tm, tn);
    best = MIN(best, hw_gemm_tile_cost(e, sms, tiles, tm, tn, k, 1));
    double split = MIN(floor(sms / tiles), floor(k / HW_GEMM_MIN_SPLIT_K));
    if (split > 1)
      best = MIN(best, hw_gemm_tile_cost(e, sms, tiles, tm, tn, k, split));
  }
  return best;
}

/* The SMs a GEMM runs on: those a communication kernel beside it leaves. */
static int hw_sms_left(const cfg_gpu *g, const hw_kernel *k)
{
  if (g->sms <= 0 || k->sms_held <= 0)
    return MAX(g->sms, 1);
  return MAX(1, g->sms - k->sms_held);
}

double hw_gemm_shape_efficiency(const cfg_gpu *g, const hw_kernel *k)
{
  /* a GEMM streams K in tiles through a software pipeline whose fill and drain do not
   * compute: short reductions (K = head dim in attention scores, h / t after a row-parallel
   * split) run below the large-GEMM rate */
  double ramp = k->inner / (k->inner + g->efficiency.gemm_k_half);
  if (!g->efficiency.gemm_waves || g->sms <= 0 || !(k->rows > 0 && k->cols > 0) ||
      !(k->flops > 0))
    /* without waves, the held SMs' share of the rate */
    return k->sms_held > 0 && g->sms > 0 ? ramp * hw_sms_left(g, k) / g->sms : ramp;
  double batch = MAX(1.0, round(k->flops / (2 * k->rows * k->cols * k->inner)));
  /* the tiles run in waves over the SMs a communication kernel beside it leaves; the rate is
   * still counted against the whole GPU's */
  int sms = hw_sms_left(g, k);
  double cost = hw_gemm_best_cost(&g->efficiency, sms, batch, k);
  if (sms < g->sms)
    cost *= (double)g->sms / sms;
  /* whole waves of the largest tile cost this: the ramp alone, exactly as without SMs */
  double even = batch * k->rows * k->cols * (k->inner + g->efficiency.gemm_k_half);
  return cost > even ? ramp * (even / cost) : ramp;
}

/* The SM clock under gpu.power_limit, as a fraction of the clock at power.gpu_tdp, for an
 * H100 running dense GEMMs (validation/kernels/h100_power_cap.csv): at its TDP it runs the
 * clock of its datasheet peak; the H100 NVL, the same 132-SM die, is rated 835 of the SXM's
 * 989 dense bf16 TFLOP/s at 400 W of 700. Linear between the two, and below 400 W the same
 * line extended (no tensor-core clock at a lower cap was found). */
double hw_power_clock(const cfg_cluster *c)
{
  static const double cap_at_tdp = 1.0, clock_at_tdp = 1.0;
  static const double cap_nvl = 400.0 / 700.0, clock_nvl = 835.0 / 989.0;
  double tdp = c->power.gpu_tdp;
  if (!(c->gpu.power_limit > 0) || !(tdp > 0) || c->gpu.power_limit >= tdp)
    return 1.0;
  double slope = (clock_at_tdp - clock_nvl) / (cap_at_tdp - cap_nvl);
  return MAX(0.1, clock_nvl + slope * (c->gpu.power_limit / tdp - cap_nvl));
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
  if (k->kclass == CFG_KCLASS_GEMM && k->inner > 0)
    eff *= hw_gemm_shape_efficiency(g, k);
  double unit_peak = hw_peak_flops(hw, k->dtype);
  /* a power cap slows the SMs, not HBM: memory-bound kernels keep their rate */
  double peak = unit_peak * hw_power_clock(hw_config(hw));
  /* 8- and 4-bit GEMMs reach a smaller fraction of their peak than 16-bit ones (FP8 measured
   * on H100, FP4 on B200) */
  cfg_dtype unit = cfg_dtype_unit(k->dtype);
  if ((unit == CFG_FP8 || unit == CFG_FP4) && unit_peak == g->flops[unit])
    eff *= unit == CFG_FP4 ? e->fp4_scale : e->fp8_scale;
  double t_flops = k->flops > 0 ? k->flops / (peak * eff * e->sustained) : 0.0;
  double t_bytes = k->bytes > 0 ? k->bytes / (g->memory_bandwidth * e->memory_efficiency) : 0.0;
  /* the host's launches (host_dispatch) are the engines' launch queue, not the kernel's time */
  if (hw_streams_weights(e, k))
    return MAX(t_flops + e->launch_overhead,
               k->bytes / (g->memory_bandwidth * e->gemm_stream) + e->gemm_stream_overhead);
  /* a deterministic attention backward costs more per call; no source says how that scales
   * with the shape, so it is one time a call, given by the user */
  double det = fused_attention && k->attn.backward && k->attn.deterministic
                   ? e->attention.deterministic_bwd : 0.0;
  return MAX(t_flops, t_bytes) + e->launch_overhead + det;
}
