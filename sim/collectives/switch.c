/* In-switch reductions. NVLS: the NVSwitch reads every GPU's buffer, reduces, and multicasts:
 * each GPU sends its buffer plus its reduced shard (S (1 + 1/g)) and receives as much. NVLink
 * SHARP runs below the link efficiency of rings (nccl.nvls_efficiency), so its bytes are scaled
 * to keep the platform's single bandwidth per link. SHARP: InfiniBand switches reduce what the
 * rails send them, so each NIC carries 1/g of the buffer each way whatever the node count;
 * inside the node NVLS, or without it NCCL's CollNet Direct (scatter to the heads, gather back),
 * timed with NCCL's own CollNet latency, chunk and GPU / NIC rule (ceiling.c). */
#include "collectives/collectives_internal.h"

#include <math.h>

static double coll_nvls_scale(const hw_cluster *hw)
{
  const cfg_nccl *nc = &hw_config(hw)->nccl;
  return nc->link_efficiency[CFG_LINK_INTRA] / nc->nvls_efficiency;
}

static void coll_nvls_flows(coll_builder *b, const coll_layout *l, int k, double frac)
{
  int a = l->node_start[k], g = l->node_start[k + 1] - a;
  int sw = hw_node_switch(b->hw, hw_node_of(b->hw, l->sorted[a]));
  double bytes = (1.0 + 1.0 / g) * coll_nvls_scale(b->hw) * frac;
  for (int j = 0; j < g; j++) {
    coll_add_xfer(b, l->sorted[a + j], sw, bytes);
    coll_add_xfer(b, sw, l->sorted[a + j], bytes);
  }
}

/* NCCL's NVLS chunk for a single-node all-reduce of `size` bytes over `ops` = channels x heads
 * concurrent chunks: NCCL_NVLS_CHUNKSIZE (128 KiB), halved to 64 KiB below 64 loops, 32 KiB
 * below 8 and 16 KiB below 2 (NVIDIA/nccl @ 5067397, src/enqueue.cc, NCCL_ALGO_NVLS; the same
 * rule in 2.18.5). */
static double coll_nvls_chunk(double ops, double size)
{
  double chunk = 128 * 1024;
  if (size < 64 * ops * chunk)
    chunk = 64 * 1024;
  if (size < 8 * ops * chunk)
    chunk = 32 * 1024;
  if (size < 2 * ops * chunk)
    chunk = 16 * 1024;
  return chunk;
}

/* The pipeline fill of a single-node NVLS all-reduce whose transfers take `transfer`. NCCL's
 * oneNode kernel (src/device/all_reduce.h, RunWorkColl NVLS) passes each chunk through three
 * warp groups in turn (scatter to the heads, the head's multimem reduce and multicast, gather),
 * one step each (ProtoSimple<1,1>), and a loop moves one chunk per head per channel: the
 * pipeline fills for two loops before it streams. Channels: NVLS_NCHANNELS_SM90 = 16 (Hopper,
 * src/transport/nvls.cc; Blackwell's 24 / 32 are not modelled). */
double coll_nvls_fill(int heads, double size, double transfer)
{
  const double channels = 16;
  double ops = channels * heads;
  if (size <= 0)
    return 0;
  double loop = ops * coll_nvls_chunk(ops, size);
  return 2 * transfer * MIN(1.0, loop / size);
}

void coll_build_nvls(coll_builder *b)
{
  coll_layout l;
  coll_layout_of(b->hw, b->p->ranks, b->p->n, &l);
  coll_add_phase(b, 1, 2, 0, true);
  coll_nvls_flows(b, &l, 0, 1.0);
  coll_layout_clear(&l);
}

void coll_build_nvls_tree(coll_builder *b)
{
  coll_layout l;
  coll_layout_of(b->hw, b->p->ranks, b->p->n, &l);
  int g = l.per_node, N = l.nnodes;
  /* NVLS inside the nodes, pipelined with each 1/g shard climbing NCCL's two trees along its
   * rail (half of the shard per tree) and coming back down */
  coll_add_phase(b, 1, 2, 2 * (int)ceil(log2((double)N)), true); /* up and down the tree */
  for (int k = 0; k < N; k++)
    coll_nvls_flows(b, &l, k, 1.0);
  for (int j = 0; j < g; j++) /* shard j enters every node at its GPU j */
    coll_add_tree_edges(b, &l, j, g);
  b->p->channels = g;
  coll_layout_clear(&l);
}

/* NCCL's CollNet Direct inside a node without NVLink SHARP (NVIDIA/nccl v2.12.12-1,
 * src/collectives/device/all_reduce.h, runCollNet; the same at 5067397): each GPU scatters its buffer's 1/g shards
 * straight to the g heads (directScatter), each head reduces its shard and sends it into the
 * network, and gathers the result back to every GPU (directGather): one NVLink hop each way,
 * 1/g of the buffer per ordered pair of GPUs in each direction. */
static void coll_direct_flows(coll_builder *b, const coll_layout *l, int k)
{
  int a = l->node_start[k], g = l->node_start[k + 1] - a;
  for (int j = 0; j < g; j++)
    for (int h = 0; h < g; h++)
      coll_add_xfer(b, l->sorted[a + j], l->sorted[a + h], 2.0 / g);
}

bool coll_is_collnet(const coll_plan *p, const hw_cluster *hw)
{
  return p->algo == COLL_ALGO_SHARP && !hw_config(hw)->node.intra.nvls;
}

/* NCCL's tuning model of a CollNet Direct all-reduce's latency (NVIDIA/nccl @ 5067397,
 * src/graph/tuning.cc: no base latency; hwLat 3.7 us over NVLink each way, 0.4 us of arity
 * serialisation per GPU of the node besides the head, 31 us for the network's part). */
double coll_collnet_latency(int per_node)
{
  return 2 * (3.7e-6 + (per_node - 1) * 0.4e-6) + 31e-6;
}

/* NCCL's CollNet chunk (v2.12.12-1, src/enqueue.cc, computeColl; the same at 5067397): one Simple step (a 4 MiB
 * buffer over NCCL_STEPS = 8: 512 KiB), halved to 128 KiB while a size gives fewer than
 * depth x 64 chunks to each channel's heads (the tree's depth is 2), to 64 KiB and then to
 * 32 KiB while fewer than depth x 8. `ops` is channels x heads. */
double coll_collnet_chunk(double ops, double size)
{
  const double depth = 2;
  double chunk = 512 * 1024;
  while (size / (ops * chunk) < depth * 64 && chunk > 128 * 1024)
    chunk /= 2;
  while (size / (ops * chunk) < depth * 8 && chunk > 32 * 1024)
    chunk /= 2;
  return chunk;
}

/* The lowest network tier whose switch spans every node of the group. */
static int coll_top_tier(const hw_cluster *hw, const coll_layout *l)
{
  int first = hw_node_of(hw, l->sorted[0]), last = hw_node_of(hw, l->sorted[l->node_start[l->nnodes - 1]]);
  int t = 0;
  while (hw_group_of_node(hw, first, t) != hw_group_of_node(hw, last, t))
    t++;
  return t;
}

void coll_build_sharp(coll_builder *b)
{
  const hw_cluster *hw = b->hw;
  coll_layout l;
  coll_layout_of(hw, b->p->ranks, b->p->n, &l);
  int g = l.per_node, N = l.nnodes, top = coll_top_tier(hw, &l);
  bool nvls = hw_config(hw)->node.intra.nvls;
  coll_add_phase(b, 1, 2, 2 * (top + 1), true);
  for (int k = 0; k < N; k++) {
    int a = l.node_start[k];
    if (nvls)
      coll_nvls_flows(b, &l, k, 1.0);
    else
      coll_direct_flows(b, &l, k);
    int leaf = hw_net_switch(hw, 0, hw_group_of_node(hw, hw_node_of(hw, l.sorted[a]), 0));
    for (int j = 0; j < g; j++) {
      coll_add_xfer(b, l.sorted[a + j], leaf, 1.0 / g);
      coll_add_xfer(b, leaf, l.sorted[a + j], 1.0 / g);
    }
  }
  /* switches below the top forward their partial sums up and the result down */
  for (int t = 0; t < top; t++) {
    GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (int k = 0; k < N; k++) {
      int node = hw_node_of(hw, l.sorted[l.node_start[k]]);
      int grp = hw_group_of_node(hw, node, t);
      if (g_hash_table_contains(seen, GINT_TO_POINTER(grp + 1)))
        continue;
      g_hash_table_add(seen, GINT_TO_POINTER(grp + 1));
      int lo = hw_net_switch(hw, t, grp);
      int hi = hw_net_switch(hw, t + 1, hw_group_of_node(hw, node, t + 1));
      coll_add_xfer(b, lo, hi, 1.0);
      coll_add_xfer(b, hi, lo, 1.0);
    }
    g_hash_table_destroy(seen);
  }
  b->p->channels = g;
  coll_layout_clear(&l);
}
