/* hardware: the cluster as a model. GPUs and their compute cost, the links of the NVLink /
 * NVSwitch domain, NICs and network tiers, the route between any two GPUs, and the SimGrid
 * platform generated from the same link table, so that the closed-form cost of a transfer and
 * the simulated one are computed over identical links. */
#ifndef DLSIM_HARDWARE_H
#define DLSIM_HARDWARE_H

#include "config/config.h"

#include <glib.h>

typedef enum { HW_LINK_SHARED, HW_LINK_FATPIPE } hw_link_policy;
typedef struct hw_cluster hw_cluster;

typedef struct {
  double bandwidth; /* bytes/s, per direction */
  double latency;   /* seconds */
  hw_link_policy policy;
  int tier;         /* -1 intra-node, 0.. network tier index (NICs are tier 0) */
} hw_link;

/* One direction of a link: 2*link + (1 if DOWN). */
typedef int hw_hop;
#define HW_HOP(link, down) ((link) * 2 + ((down) ? 1 : 0))
#define HW_HOP_LINK(hop) ((hop) / 2)

typedef struct {
  double latency;   /* sum of link latencies */
  double bandwidth; /* min of link bandwidths (INFINITY on an empty route) */
  int nhops;
  hw_hop hops[24];
  int tier;         /* -1 same GPU, 0 same node (intra), 1 + index of the top network tier crossed */
} hw_route;

/* Endpoints of transfers: GPUs 0..gpus-1, then each node's NVSwitch (in-switch reduction, NVLS),
 * then each network switch (in-network reduction, SHARP), tier by tier. */
int hw_endpoints(const hw_cluster *hw);
int hw_node_switch(const hw_cluster *hw, int node);
int hw_net_switch(const hw_cluster *hw, int tier, int group);
int hw_net_groups(const hw_cluster *hw, int tier);
int hw_group_of_node(const hw_cluster *hw, int node, int tier);
int hw_nodes(const hw_cluster *hw);
/* Host name of an endpoint in the platform ("gpu-3", "nvs-0", "swh1-0"). */
void hw_endpoint_name(const hw_cluster *hw, int endpoint, char *buf, size_t len);
/* The link class (intra-node or network) that bounds a route. */
cfg_link_class hw_route_class(const hw_route *r);

hw_cluster *hw_cluster_new(const cfg_cluster *cfg);
void hw_cluster_free(hw_cluster *hw);
const cfg_cluster *hw_config(const hw_cluster *hw);
int hw_gpus(const hw_cluster *hw);
int hw_gpus_per_node(const hw_cluster *hw);
int hw_node_of(const hw_cluster *hw, int gpu);

/* Links and routes: the same table the platform XML is generated from. */
int hw_nlinks(const hw_cluster *hw);
const hw_link *hw_link_get(const hw_cluster *hw, int id);
/* Route between two endpoints. Switch endpoints are reached from the GPUs below them and from
 * the switches directly above or below. */
void hw_route_get(const hw_cluster *hw, int src, int dst, hw_route *out);
/* The highest tier a group's traffic reaches, as hw_route's `tier` (-1 one GPU, 0 one node,
 * 1 + t network tier t): in a tree, the highest turn of any route from the first member. */
int hw_group_tier(const hw_cluster *hw, const int *ranks, int n);

/* SimGrid platform XML (DTD 4.1) for the first `ngpus` GPUs; hosts are named "gpu-<rank>"
 * and run at `host_speed` FLOP/s. Newly allocated. */
char *hw_platform_xml(const hw_cluster *hw, int ngpus, double host_speed);
/* The same platform, holding whole the route of each GPU pair of `pairs` (`npairs` src, dst
 * pairs, flattened; repeats allowed) that SimGrid would otherwise find by searching a rail
 * group's graph: the same links, found by a lookup when a transfer starts. */
char *hw_platform_xml_routes(const hw_cluster *hw, int ngpus, double host_speed, const int *pairs,
                             size_t npairs);
/* Whether the platform gives SimGrid the links that can never bind as one constraint per
 * direction (and per NIC in rail graphs): on by default; the same rates, a smaller solver
 * system. Off only to check that. */
void hw_split_free_links(hw_cluster *hw, bool on);
void hw_host_name(int gpu, char *buf, size_t len);
/* A link for a report: "NIC 3 of node 5, out", "leaf 2 uplink, rail 4, up" ... */
void hw_link_describe(const hw_cluster *hw, int link, bool down, char *buf, size_t len);
/* The flows of network.background, one per loaded link and direction: host "bg<i>a" sends to
 * "bg<i>b" over the link and a private one capped at `rate` (the platform holds them when it
 * spans more than one node). */
typedef struct {
  int link;
  bool down;
  double rate, start, duration; /* bytes/s; seconds (duration 0: to the end) */
} hw_bg_flow;
GArray *hw_background_flows(const hw_cluster *hw); /* of hw_bg_flow */

/* Compute cost model:
 *   time = max(flops / (peak(dtype) * eff(kind)), bytes / (hbm_bw * eff_mem)) + launch_overhead */
typedef struct {
  cfg_kernel_class kclass;
  cfg_dtype dtype;
  double flops; /* FLOPs (multiply-add = 2) */
  double bytes; /* HBM bytes read + written */
  double inner; /* a GEMM's reduction dimension K, or 0 when unknown */
  double rows, cols; /* a GEMM's output M x N (of each matrix of a batch: flops / 2MNK of
                      * them), or 0 when unknown */
  cfg_attn_shape attn; /* a fused attention kernel's shape (keys 0: none) */
  /* a GEMM run as split_rows x split_cols pieces of its output (0 or 1: whole), launched back
   * to back on streams of their own so that one piece's tiles fill the waves the previous
   * left (Transformer Engine's chunked tensor-parallel overlap); each pads its own tiles */
  int split_rows, split_cols;
  int sms_held; /* SMs a communication kernel beside it holds for its whole run (0: none) */
} hw_kernel;

double hw_kernel_time(const hw_cluster *hw, const hw_kernel *k);
/* What a GEMM of this shape reaches of the large-GEMM rate (flops.gemm): the K ramp and, with
 * gemm_waves on a GPU whose SMs are known and a GEMM whose M and N are, the waves of output
 * tiles of the best of cuBLAS's tile sizes and split-K. K / (K + gemm_k_half) where the tiles
 * fill whole waves. */
double hw_gemm_shape_efficiency(const cfg_gpu *g, const hw_kernel *k);
/* Peak FLOP/s for a dtype, falling back to the nearest unit the GPU has (fp8 -> bf16 ...). */
double hw_peak_flops(const hw_cluster *hw, cfg_dtype dtype);
const cfg_efficiency *hw_efficiency(const hw_cluster *hw);
/* The SM clock under gpu.power_limit as a fraction of its clock at power.gpu_tdp (1: no cap). */
double hw_power_clock(const cfg_cluster *c);
/* An optimizer step offloaded to the host CPUs (ZeRO-Offload) for one GPU's shard: its
 * gradients down and updated parameters up over PCIe (pcie_bytes), then the update at the
 * GPU's share of node.cpu's FLOP/s and DDR bandwidth. */
double hw_host_optimizer_time(const hw_cluster *hw, double flops, double bytes, double pcie_bytes);

#endif
