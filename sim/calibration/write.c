/* Calibration files: what the fits write and `gpu.calibration` reads back. A file holds the
 * GPU's kernel efficiencies and the NCCL parameters, all of them, so that it alone says how
 * the GPU was modelled. */
#include "calibration/calibration.h"

#include <string.h>

static void calib_write_by_proto(GString *o, const char *key, const double *v, bool seconds)
{
  g_string_append_printf(o, "  %s: {", key);
  for (int p = 0; p < CFG_NPROTOS; p++) {
    if (seconds)
      g_string_append_printf(o, "%s%s: %.4gus", p ? ", " : "", cfg_proto_name((cfg_proto)p), v[p] * 1e6);
    else
      g_string_append_printf(o, "%s%s: %.0fB", p ? ", " : "", cfg_proto_name((cfg_proto)p), v[p]);
  }
  g_string_append(o, "}\n");
}

/* A ceiling by node count, left out when it has none; an unset one (NaN) is written as 0, which
 * the loader reads back as "no ceiling" (printing it as nan made the file unreadable). */
static void calib_write_by_scale(GString *o, const char *key, const double *v)
{
  double two = v[CFG_SCALE_TWO_NODES] > 0 ? v[CFG_SCALE_TWO_NODES] : 0;
  double more = v[CFG_SCALE_MORE_NODES] > 0 ? v[CFG_SCALE_MORE_NODES] : 0;
  if (two > 0 || more > 0)
    g_string_append_printf(o, "  %s: {two_nodes: %.4gGB/s, more_nodes: %.4gGB/s}\n", key,
                           two / 1e9, more / 1e9);
}

static void calib_write_by_impl(GString *o, const char *key, const double *v, const char *fmt)
{
  g_string_append_printf(o, "    %s: {", key);
  for (int i = 0; i < CFG_NATTN; i++) {
    g_string_append_printf(o, "%s%s: ", i ? ", " : "", cfg_attn_impl_name((cfg_attn_impl)i));
    g_string_append_printf(o, fmt, v[i]);
  }
  g_string_append(o, "}\n");
}

static void calib_write_attention(GString *o, const cfg_attention_eff *a)
{
  g_string_append(o, "  attention:\n");
  calib_write_by_impl(o, "fwd", a->fwd, "%.4f");
  calib_write_by_impl(o, "bwd", a->bwd, "%.4f");
  calib_write_by_impl(o, "fwd_half", a->fwd_half, "%.0f");
  calib_write_by_impl(o, "bwd_half", a->bwd_half, "%.0f");
  calib_write_by_impl(o, "d64", a->d64, "%.4f");
  g_string_append_printf(o, "    causal: %.4f\n", a->causal);
}

static void calib_write_efficiency(GString *o, const cfg_efficiency *e, const char *source)
{
  g_string_append(o, "efficiency:\n  flops: {");
  for (int k = 0; k < CFG_NKCLASSES; k++)
    g_string_append_printf(o, "%s%s: %.4f", k ? ", " : "", cfg_kernel_class_name((cfg_kernel_class)k),
                           e->flops_efficiency[k]);
  g_string_append(o, "}\n");
  calib_write_attention(o, &e->attention);
  g_string_append_printf(o, "  memory: %.4f\n  gemm_k_half: %.1f\n  sustained: %.4f\n",
                         e->memory_efficiency, e->gemm_k_half, e->sustained);
  if (e->gemm_waves)
    g_string_append_printf(o, "  gemm_waves: true\n  gemm_tile_load: %.1f\n", e->gemm_tile_load);
  g_string_append_printf(o, "  fp8_scale: %.4f\n", e->fp8_scale);
  g_string_append_printf(o, "  launch_overhead: %.4gus\n", e->launch_overhead * 1e6);
  if (e->gemm_stream > 0)
    g_string_append_printf(o, "  gemm_stream: %.4f\n  gemm_stream_overhead: %.4gus\n",
                           e->gemm_stream, e->gemm_stream_overhead * 1e6);
  g_string_append_printf(o, "  source: \"%s\"\n", source);
}

static void calib_write_nccl_block(GString *o, const cfg_nccl *n, const char *source)
{
  g_string_append(o, "nccl:\n");
  g_string_append_printf(o, "  link_efficiency: {intra: %.4f, network: %.4f}\n",
                         n->link_efficiency[CFG_LINK_INTRA], n->link_efficiency[CFG_LINK_NETWORK]);
  g_string_append_printf(o, "  nvls_efficiency: %.4f\n", n->nvls_efficiency);
  g_string_append_printf(o, "  nvls_latency: %.4gus\n", n->nvls_latency * 1e6);
  g_string_append_printf(o, "  p2p_efficiency: %.4f\n", n->p2p_efficiency);
  g_string_append_printf(o, "  deepep_efficiency: %.4f\n", n->deepep_efficiency);
  g_string_append_printf(o, "  copy_bandwidth: %.4gGB/s\n", n->copy_bandwidth / 1e9);
  calib_write_by_proto(o, "base_latency", n->base_latency, true);
  g_string_append(o, "  hop_latency:\n  ");
  calib_write_by_proto(o, "intra", n->hop_latency[CFG_LINK_INTRA], true);
  g_string_append(o, "  ");
  calib_write_by_proto(o, "network", n->hop_latency[CFG_LINK_NETWORK], true);
  calib_write_by_proto(o, "chunk", n->chunk, false);
  calib_write_by_scale(o, "nvls_tree_channel", n->nvls_tree_channel);
  calib_write_by_scale(o, "ll_max_bandwidth", n->ll_max_bandwidth);
  calib_write_by_scale(o, "tree_channel", n->tree_channel);
  calib_write_by_scale(o, "tree_ll128_channel", n->tree_ll128_channel);
  g_string_append_printf(o, "  max_channels: %d\n", n->max_channels);
  g_string_append_printf(o, "  source: \"%s\"\n", source);
}

/* Whether the fit moved a key of this block ("efficiency.", "nccl."). */
static bool calib_any_fitted(char *const *fitted, const char *prefix)
{
  for (int i = 0; fitted && fitted[i]; i++)
    if (g_str_has_prefix(fitted[i], prefix))
      return true;
  return false;
}

bool calib_write(const char *path, const cfg_cluster *c, const char *notes, char *const *fitted,
                 GError **err)
{
  GString *o = g_string_new(NULL);
  g_string_append_printf(o, "# Written by dlsim calibrate. %s\n", notes);
  if (fitted && fitted[0]) {
    g_string_append(o, "# Fitted:");
    for (int i = 0; fitted[i]; i++)
      g_string_append_printf(o, " %s", fitted[i]);
    g_string_append(o, ". Every other value is what the cluster had before the fit.\n");
  }
  g_string_append_printf(o, "gpu: %s\nnotes: \"%s\"\n", c->gpu.name, notes);
  calib_write_efficiency(o, &c->gpu.efficiency,
                         calib_any_fitted(fitted, "efficiency.") ? notes : c->gpu.efficiency.source);
  calib_write_nccl_block(o, &c->nccl, calib_any_fitted(fitted, "nccl.") ? notes : c->nccl.source);
  bool ok = cfg_write_text("-o", path, o, err);
  g_string_free(o, TRUE);
  return ok;
}
