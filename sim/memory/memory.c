#include "memory/memory.h"

#include <string.h>

bool mem_estimate(const cfg_workload *w, const cfg_cluster *c, mem_breakdown *out, GError **err)
{
  memset(out, 0, sizeof *out);
  wl_model *m = NULL;
  if (!wl_model_build(&w->model, &w->training, w->training.micro_batch, &m, err))
    return false;
  wl_state_bytes s = wl_state_bytes_per_param(&w->training);
  out->params = m->params * s.weights;
  out->grads = m->params * s.grads;
  out->optimizer = m->params * s.optimizer;
  for (guint i = 0; i < m->layers->len; i++)
    out->activations += ((const wl_layer *)g_ptr_array_index(m->layers, i))->saved_bytes;
  wl_model_free(m);
  out->model_states = out->params + out->grads + out->optimizer;
  out->total = out->model_states + out->activations + out->kv_cache + out->other;
  out->capacity = c->gpu.memory;
  out->fits = out->total <= out->capacity;
  return true;
}
