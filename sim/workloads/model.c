/* wl_model: layers of kernels for one micro-batch, shared by every strategy. */
#include "workloads/workloads_internal.h"

#include <string.h>

wl_model *wl_model_new(cfg_dtype dtype)
{
  wl_model *m = g_new0(wl_model, 1);
  m->layers = g_ptr_array_new();
  m->strings = g_string_chunk_new(4096);
  m->dtype = dtype;
  return m;
}

void wl_model_free(wl_model *m)
{
  if (!m)
    return;
  for (guint i = 0; i < m->layers->len; i++) {
    wl_layer *l = g_ptr_array_index(m->layers, i);
    g_array_free(l->fwd, TRUE);
    g_array_free(l->bwd, TRUE);
    g_free(l);
  }
  g_ptr_array_free(m->layers, TRUE);
  g_string_chunk_free(m->strings);
  g_free(m);
}

wl_layer *wl_layer_add(wl_model *m, const char *name, double params)
{
  wl_layer *l = g_new0(wl_layer, 1);
  l->name = g_string_chunk_insert_const(m->strings, name);
  l->params = params;
  l->fwd = g_array_new(FALSE, FALSE, sizeof(wl_kernel));
  l->bwd = g_array_new(FALSE, FALSE, sizeof(wl_kernel));
  g_ptr_array_add(m->layers, l);
  m->params += params;
  return l;
}

static void wl_kernel_push(wl_model *m, GArray *to, const wl_layer *l, const char *what,
                           cfg_kernel_class k, double flops, double bytes)
{
  g_autofree char *name = g_strdup_printf("%s.%s", l->name, what);
  wl_kernel x = {.name = g_string_chunk_insert_const(m->strings, name), .kclass = k,
                 .flops = flops, .bytes = bytes};
  g_array_append_val(to, x);
}

void wl_fwd(wl_model *m, wl_layer *l, const char *what, cfg_kernel_class k, double flops,
            double bytes)
{
  wl_kernel_push(m, l->fwd, l, what, k, flops, bytes);
}

void wl_bwd(wl_model *m, wl_layer *l, const char *what, cfg_kernel_class k, double flops,
            double bytes)
{
  wl_kernel_push(m, l->bwd, l, what, k, flops, bytes);
}

double wl_model_fwd_flops(const wl_model *m)
{
  double f = 0;
  for (guint i = 0; i < m->layers->len; i++)
    f += ((const wl_layer *)g_ptr_array_index(m->layers, i))->model_flops;
  return f;
}

bool wl_model_build(const cfg_model *cm, const cfg_training *t, int micro_batch, wl_model **out,
                    GError **err)
{
  wl_model *m = wl_model_new(t->dtype);
  bool ok = false;
  switch (cm->kind) {
  case CFG_MODEL_TRANSFORMER:
  case CFG_MODEL_MOE_TRANSFORMER:
    ok = wl_transformer_build(m, cm, t, micro_batch, err);
    break;
  case CFG_MODEL_CNN:
    ok = wl_cnn_build(m, cm, t, micro_batch, err);
    break;
  }
  if (!ok) {
    wl_model_free(m);
    return false;
  }
  *out = m;
  return true;
}

wl_state_bytes wl_state_bytes_per_param(const cfg_training *t)
{
  bool full = t->dtype == CFG_FP32 || t->dtype == CFG_TF32;
  wl_state_bytes s;
  if (full) {
    s.weights = 4, s.grads = 4;
    s.optimizer = t->optimizer == CFG_OPT_ADAM ? 8 : 4; /* m, v | momentum */
  } else {
    /* low-precision weights and grads, fp32 master weights in the optimizer */
    s.weights = 2, s.grads = 2;
    s.optimizer = t->optimizer == CFG_OPT_ADAM ? 12 : 8;
  }
  return s;
}
