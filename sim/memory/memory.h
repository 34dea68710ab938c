/* memory: how many bytes each GPU needs, in closed form (model states, activations, buffers),
 * next to the peak that the engines read off the program's alloc/free timeline. */
#ifndef DLSIM_MEMORY_H
#define DLSIM_MEMORY_H

#include "config/config.h"
#include "workloads/workloads.h"

typedef struct {
  double params, grads, optimizer, activations, kv_cache, other;
  double model_states; /* params + grads + optimizer */
  double total;
  double capacity;
  bool fits;
} mem_breakdown;

/* Closed-form per-GPU memory of a training workload (data parallel, ZeRO stage 0). */
bool mem_estimate(const cfg_workload *w, const cfg_cluster *c, mem_breakdown *out, GError **err);

#endif
