/* How much KV cache a replica holds: what vLLM does at start-up. The engine may take
 * serving.gpu_memory_utilization of the GPU; the weights, a forward pass's activations at the
 * largest iteration (serving.max_tokens tokens, serving.max_batch sequences' logits), the CUDA
 * context and the communicators' buffers come off it, and the rest is cut into blocks of
 * serving.block_size tokens. TensorRT-LLM instead gives the KV cache
 * serving.kv_cache_free_fraction of what the rest leaves free. The most loaded pipeline stage
 * decides. */
#include "serving/serving_internal.h"

#include <math.h>

static bool srv_no_room(const cfg_workload *w, const srv_capacity *c, GError **err)
{
  g_autofree char *where = cfg_doc_where(w->doc, "serving");
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s: no room for the KV cache: of %.2f GiB usable per GPU (gpu.memory %.2f GiB x "
              "serving.gpu_memory_utilization %.2f), the weights take %.2f GiB, activations "
              "%.2f GiB and the rest %.2f GiB; use more GPUs (serving.tp, serving.pp, serving.ep), a "
              "smaller serving.dtype or a smaller serving.max_tokens",
              where, c->usable / 1073741824.0, c->memory / 1073741824.0,
              w->serving.gpu_memory_utilization, c->weights / 1073741824.0,
              c->activations / 1073741824.0, c->other / 1073741824.0);
  return false;
}

bool srv_capacity_of(const cfg_cluster *cl, const cfg_workload *w, const srv_cost *cost,
                     srv_capacity *out, GError **err)
{
  const cfg_serving *s = &w->serving;
  srv_capacity c = {.memory = cl->gpu.memory, .block_size = s->block_size};
  bool trt = s->kv_cache_free_fraction > 0;
  c.usable = trt ? c.memory : c.memory * s->gpu_memory_utilization;
  /* a speculative proposer lives on the same GPUs, and its KV in the same blocks */
  c.weights = srv_stage_weight_bytes(cost, &w->model) + srv_spec_weight_bytes(cost);
  c.activations = srv_activation_bytes(cost, s->max_tokens, s->max_batch);
  c.other = w->memory.cuda_context +
            (s->tp > 1 || s->pp > 1 || s->ep > 1 ? w->memory.nccl_buffers : 0);
  c.kv_per_token = srv_kv_bytes_per_token(cost) + srv_spec_kv_bytes_per_token(cost);
  c.kv_bytes = (c.usable - c.weights - c.activations - c.other) *
               (trt ? s->kv_cache_free_fraction : 1.0);
  if (s->kv_blocks > 0) {
    c.blocks = s->kv_blocks;
    c.measured = true;
  } else {
    c.blocks = c.kv_bytes > 0 ? (int)MIN(floor(c.kv_bytes / (c.kv_per_token * c.block_size)),
                                         (double)G_MAXINT / 2)
                              : 0;
  }
  c.tokens = (double)c.blocks * c.block_size;
  *out = c;
  if (c.blocks < 1)
    return srv_no_room(w, &c, err);
  return true;
}
