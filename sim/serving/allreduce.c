/* Serving engines' own all-reduce kernels for the small tensor-parallel all-reduces inside a
 * node (TensorRT-LLM's customAllReduceKernels.cu, vLLM's custom_all_reduce.cuh, which SGLang
 * reuses), timed from their mechanism instead of as an NCCL ring:
 *  - one-shot: each rank copies its input into its IPC buffer, waits on a flag barrier, then
 *    loads all n - 1 peers' buffers over NVLink and reduces locally: (n - 1) S bytes in;
 *  - two-shot: the same copy and barrier, a reduce-scatter of S / n slices by P2P loads, a
 *    second barrier, an all-gather of the reduced slices: 2 (n - 1) S / n bytes in.
 * A barrier is one flag store seen across the NVSwitch (the route's latency); the loads run at
 * the GPU's NVLink rate (the route's bandwidth), or at the SMs' copy rate if that binds; the
 * input is first copied into the IPC buffer at HBM speed. A communication kernel's launch and
 * set-up is NCCL's (nccl.base_latency of LL, its lightest protocol): the same launch of a kernel
 * that then polls flags. Nothing here is fitted: the constants are the cluster's. */
#include "serving/serving_internal.h"

#include <math.h>

/* Which kernel the engine's size policy picks for S bytes over n GPUs. */
srv_ar_kind srv_ar_choose(const cfg_custom_ar *a, int n, double bytes)
{
  if (a->kernel != CFG_AR_CUSTOM || n <= 1)
    return SRV_AR_NCCL;
  double oneshot = n <= 2 ? a->oneshot_tp2 : n <= 4 ? a->oneshot_tp4 : a->oneshot_tp8;
  if (n <= 8 && bytes <= oneshot)
    return SRV_AR_ONESHOT;
  if (n <= 8 && a->twoshot && bytes <= a->max_size)
    return SRV_AR_TWOSHOT;
  return SRV_AR_NCCL;
}

/* Bytes a rank's SMs load and store in the kernel, and bytes it loads from peers over
 * NVLink, for S = 1. One-shot: loads all n buffers, stores the sum. Two-shot: loads n slices of
 * S / n and stores its reduced slice, then loads the n - 1 others' slices and stores S. */
static void srv_ar_traffic(srv_ar_kind kind, int n, double *sm, double *nvlink)
{
  if (kind == SRV_AR_ONESHOT) {
    *sm = n + 1.0;
    *nvlink = n - 1.0;
  } else {
    *sm = 3.0;
    *nvlink = 2.0 * (n - 1) / n;
  }
}

double srv_ar_time(const hw_cluster *hw, srv_ar_kind kind, int n, double bytes)
{
  const cfg_cluster *cl = hw_config(hw);
  hw_route r;
  hw_route_get(hw, 0, 1, &r);
  double sm, nvlink;
  srv_ar_traffic(kind, n, &sm, &nvlink);
  /* the input copied into the IPC buffer (TensorRT-LLM's cudaMemcpyAsync; vLLM's eager path) */
  double copy = 2 * bytes / (cl->gpu.memory_bandwidth * cl->gpu.efficiency.memory_efficiency);
  double loads = nvlink * bytes / r.bandwidth;
  /* the SMs a communication kernel runs on move bytes no faster than NCCL's channels do */
  if (cl->nccl.copy_bandwidth > 0)
    loads = MAX(loads, sm * bytes / cl->nccl.copy_bandwidth);
  int barriers = kind == SRV_AR_ONESHOT ? 1 : 2;
  return cl->nccl.base_latency[CFG_PROTO_LL] + copy + barriers * r.latency + loads;
}
