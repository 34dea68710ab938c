/* The host CPUs of a GPU node as a compute device for offloaded optimizer steps. */
#include "hardware/hardware.h"

/* What a vectorised CPU Adam (DeepSpeed's CPU-Adam: AVX-512, several threads per GPU) reaches
 * of the FP32 peak when it is not bound by DDR bandwidth (assumed; at 12 FLOP per 30 bytes an
 * Adam step is DDR-bound on every server CPU, so this rarely decides). */
#define HW_HOST_OPTIMIZER_EFFICIENCY 0.5

double hw_host_optimizer_time(const hw_cluster *hw, double flops, double bytes, double pcie_bytes)
{
  const cfg_cluster *c = hw_config(hw);
  const cfg_host_cpu *cpu = &c->node.cpu;
  /* every GPU of the node offloads at once: each gets its share of the sockets */
  double share = c->node.gpus_per_node;
  double t_flops = flops / (cpu->flops / share * HW_HOST_OPTIMIZER_EFFICIENCY);
  double t_bytes = bytes / (cpu->memory_bandwidth / share * cpu->memory_efficiency);
  /* DeepSpeed copies the gradients down before the step and the parameters up after it */
  double t_pcie = pcie_bytes / c->storage.host_bandwidth;
  return t_pcie + MAX(t_flops, t_bytes);
}
