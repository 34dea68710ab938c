/* CNN presets (torchvision ResNet v1.5 family): per-layer FLOPs, parameters and activation
 * sizes derived from the layer shapes, one wl_layer per convolution (with its batch-norm and
 * ReLU), so that data-parallel gradient buckets fill in the real backward order. */
#include "workloads/workloads_internal.h"

#include <string.h>

typedef struct {
  wl_model *m;
  double b, dt;
  int c, hw; /* current channels and spatial size */
  int index;
} wl_cnn;

/* conv (k x k, stride) + batch-norm (+ ReLU); returns the layer. */
static wl_layer *wl_conv(wl_cnn *n, const char *name, int cin, int cout, int k, int stride,
                         int hw_in, bool relu, bool first)
{
  int hw_out = (hw_in + stride - 1) / stride;
  double in = n->b * cin * (double)hw_in * hw_in, out = n->b * cout * (double)hw_out * hw_out;
  double w = (double)cin * cout * k * k;
  double flops = 2.0 * w * hw_out * hw_out * n->b;
  double dt = n->dt;
  wl_layer *l = wl_layer_add(n->m, name, w + 2.0 * cout);
  wl_fwd(n->m, l, WL_ROLE_CONV, "conv", CFG_KCLASS_CONV, flops, dt * (in + w + out));
  /* batch-norm reads its input twice (statistics, normalisation) and writes once */
  wl_fwd(n->m, l, WL_ROLE_NORM, "bn", CFG_KCLASS_ELEMENTWISE, 8 * out, 3 * dt * out);
  if (relu)
    wl_fwd(n->m, l, WL_ROLE_ACT, "relu", CFG_KCLASS_ELEMENTWISE, out, 2 * dt * out);
  if (relu)
    wl_bwd(n->m, l, WL_ROLE_ACT, WL_PHASE_BACKWARD, "relu.bwd", CFG_KCLASS_ELEMENTWISE, out, 3 * dt * out);
  wl_bwd(n->m, l, WL_ROLE_NORM, WL_PHASE_BACKWARD, "bn.bwd", CFG_KCLASS_ELEMENTWISE, 12 * out, 5 * dt * out);
  if (!first) /* the image needs no gradient */
    wl_bwd(n->m, l, WL_ROLE_CONV, WL_PHASE_DGRAD, "conv.dgrad", CFG_KCLASS_CONV, flops, dt * (out + w + in));
  wl_bwd(n->m, l, WL_ROLE_CONV, WL_PHASE_WGRAD, "conv.wgrad", CFG_KCLASS_CONV, flops, dt * (in + out + w));
  l->saved_bytes = dt * out * (relu ? 2 : 1);
  l->model_flops = flops;
  return l;
}

static void wl_block(wl_cnn *n, int mid, int out, int stride, bool bottleneck, const char *stage,
                     int idx)
{
  int cin = n->c, hw = n->hw, hw_out = (hw + stride - 1) / stride;
  char name[64];
  if (bottleneck) {
    g_snprintf(name, sizeof name, "%s.%d.conv1", stage, idx);
    wl_conv(n, name, cin, mid, 1, 1, hw, true, false);
    g_snprintf(name, sizeof name, "%s.%d.conv2", stage, idx);
    wl_conv(n, name, mid, mid, 3, stride, hw, true, false);
    g_snprintf(name, sizeof name, "%s.%d.conv3", stage, idx);
    wl_conv(n, name, mid, out, 1, 1, hw_out, false, false);
  } else {
    g_snprintf(name, sizeof name, "%s.%d.conv1", stage, idx);
    wl_conv(n, name, cin, out, 3, stride, hw, true, false);
    g_snprintf(name, sizeof name, "%s.%d.conv2", stage, idx);
    wl_conv(n, name, out, out, 3, 1, hw_out, false, false);
  }
  if (stride != 1 || cin != out) {
    g_snprintf(name, sizeof name, "%s.%d.downsample", stage, idx);
    wl_conv(n, name, cin, out, 1, stride, hw, false, false);
  }
  /* residual add + ReLU closes the block */
  double elems = n->b * out * (double)hw_out * hw_out;
  wl_layer *last = g_ptr_array_index(n->m->layers, n->m->layers->len - 1);
  wl_fwd(n->m, last, WL_ROLE_RESIDUAL, "add_relu", CFG_KCLASS_ELEMENTWISE, 2 * elems, 3 * n->dt * elems);
  wl_bwd(n->m, last, WL_ROLE_RESIDUAL, WL_PHASE_BACKWARD, "add_relu.bwd", CFG_KCLASS_ELEMENTWISE, 2 * elems, 4 * n->dt * elems);
  last->saved_bytes += n->dt * elems;
  n->c = out;
  n->hw = hw_out;
}

typedef struct {
  const char *name;
  int blocks[4];
  bool bottleneck;
} wl_resnet_spec;

static const wl_resnet_spec wl_resnets[] = {
    {"resnet18", {2, 2, 2, 2}, false},  {"resnet34", {3, 4, 6, 3}, false},
    {"resnet50", {3, 4, 6, 3}, true},   {"resnet101", {3, 4, 23, 3}, true},
    {"resnet152", {3, 8, 36, 3}, true},
};

bool wl_cnn_build(wl_model *m, const cfg_model *cm, const cfg_training *t, int micro_batch,
                  GError **err)
{
  const wl_resnet_spec *spec = NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(wl_resnets); i++)
    if (strcmp(cm->preset, wl_resnets[i].name) == 0)
      spec = &wl_resnets[i];
  if (!spec) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "model.preset: unknown cnn '%s' (presets: resnet18, resnet34, resnet50, "
                "resnet101, resnet152)",
                cm->preset);
    return false;
  }
  wl_cnn n = {.m = m, .b = micro_batch, .dt = cfg_dtype_bytes(t->dtype) < 2 ? 2 : cfg_dtype_bytes(t->dtype),
              .c = 64};
  m->samples = micro_batch;
  m->tokens = 0;
  int img = cm->image_size;
  wl_conv(&n, "conv1", 3, 64, 7, 2, img, true, true);
  n.hw = (img + 1) / 2;
  /* 3x3 max-pool, stride 2 */
  wl_layer *pool = g_ptr_array_index(m->layers, 0);
  double pin = n.b * 64.0 * n.hw * n.hw;
  n.hw = (n.hw + 1) / 2;
  double pout = n.b * 64.0 * n.hw * n.hw;
  wl_fwd(m, pool, WL_ROLE_POOL, "maxpool", CFG_KCLASS_ELEMENTWISE, 9 * pout, n.dt * (pin + pout));
  wl_bwd(m, pool, WL_ROLE_POOL, WL_PHASE_BACKWARD, "maxpool.bwd", CFG_KCLASS_ELEMENTWISE, pout, n.dt * (2 * pout + pin));
  const int widths[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; s++) {
    char stage[16];
    g_snprintf(stage, sizeof stage, "layer%d", s + 1);
    int out = spec->bottleneck ? 4 * widths[s] : widths[s];
    for (int i = 0; i < spec->blocks[s]; i++)
      wl_block(&n, widths[s], out, i == 0 && s > 0 ? 2 : 1, spec->bottleneck, stage, i);
  }
  /* global average pool + fully connected classifier */
  int feat = n.c;
  wl_layer *fc = wl_layer_add(m, "fc", (double)feat * cm->num_classes + cm->num_classes);
  double pooled = n.b * feat * (double)n.hw * n.hw;
  wl_fwd(m, fc, WL_ROLE_POOL, "avgpool", CFG_KCLASS_ELEMENTWISE, pooled, n.dt * (pooled + n.b * feat));
  double ff = 2.0 * n.b * feat * cm->num_classes;
  wl_fwd(m, fc, WL_ROLE_LINEAR, "linear", CFG_KCLASS_GEMM, ff,
         n.dt * (n.b * feat + (double)feat * cm->num_classes + n.b * cm->num_classes));
  wl_bwd(m, fc, WL_ROLE_LINEAR, WL_PHASE_DGRAD, "linear.dgrad", CFG_KCLASS_GEMM, ff,
         n.dt * (n.b * feat + (double)feat * cm->num_classes + n.b * cm->num_classes));
  wl_bwd(m, fc, WL_ROLE_LINEAR, WL_PHASE_WGRAD, "linear.wgrad", CFG_KCLASS_GEMM, ff,
         n.dt * (n.b * feat + (double)feat * cm->num_classes + n.b * cm->num_classes));
  wl_bwd(m, fc, WL_ROLE_POOL, WL_PHASE_BACKWARD, "avgpool.bwd", CFG_KCLASS_ELEMENTWISE, pooled, n.dt * (pooled + n.b * feat));
  fc->saved_bytes = n.dt * n.b * feat;
  fc->model_flops = ff;
  return true;
}
