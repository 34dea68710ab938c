/* NCCL's tuner caps the bus bandwidth of some algorithm / protocol pairs across nodes
 * (src/graph/tuning.cc, ncclTopoTuneModel): NVIDIA's measurements of what one channel's proxy,
 * queue pairs and SMs sustain, lower past two nodes, and of what LL's flag-per-word stores
 * reach at all (llMaxBw, set by the host CPU across nodes). NVLS-tree per channel
 * (perChMaxNVLSTreeBw): on two nodes a NIC exchanges its shard with one peer; on more, a
 * tree's inner node serves its parent and two children at once. A tree per channel
 * (perChMaxTreeBw, and perChMaxTreeLL128Bw on LL128); LL rings and trees as a whole. The
 * ceilings are in bus bandwidth, so that past two nodes the bus bandwidth stays flat as nodes
 * are added, where the links alone would let it creep up. A collective lasts at least bytes /
 * (ceiling x NCCL's ratio of algorithm to bus bandwidth); the rest is slept after its
 * transfers, as the copy bound is. */
#include "collectives/collectives_internal.h"

/* The lower of two ceilings, either of which may be absent (0, or unset). */
static double coll_lower_cap(double a, double b)
{
  if (!(b > 0))
    return a > 0 ? a : 0;
  return a > 0 && a < b ? a : b;
}

/* NCCL's algorithm bandwidth per unit of its bus bandwidth: a ring moves n/nsteps of the buffer
 * per step, a tree half of it each way (tuning.cc, "Convert bus BW to algorithm BW"). */
static double coll_algbw_ratio(const coll_plan *p)
{
  int n = p->n;
  if (p->algo == COLL_ALGO_TREE)
    return 0.5;
  if (p->op == PROG_COLL_ALLREDUCE)
    return n / (2.0 * (n - 1));
  if (p->op == PROG_COLL_ALLGATHER || p->op == PROG_COLL_REDUCESCATTER)
    return n / (n - 1.0);
  return 1.0;
}

static double coll_ceiling_busbw(const coll_plan *p, const cfg_nccl *nc, int scale, int proto)
{
  double ll = proto == CFG_PROTO_LL ? nc->ll_max_bandwidth[scale] : 0;
  switch (p->algo) {
  case COLL_ALGO_NVLS_TREE:
    return p->op == PROG_COLL_ALLREDUCE ? nc->nvls_tree_channel[scale] * p->channels : 0;
  case COLL_ALGO_TREE: {
    double channel = nc->tree_channel[scale];
    if (proto == CFG_PROTO_LL128)
      channel = coll_lower_cap(channel, nc->tree_ll128_channel[scale]);
    return coll_lower_cap(channel * p->channels, ll);
  }
  case COLL_ALGO_RING:
    return ll > 0 ? ll : 0;
  default:
    return 0;
  }
}

/* CollNet Direct's algorithm bandwidth when a node has more GPUs than NICs: NCCL's tuner
 * divides it by the GPU / NIC ratio r less (r - 1) / 2 ("Collnet+Direct requires all GPUs to
 * have a local NIC to work at full speed", src/graph/tuning.cc @ 5067397): 1.5 for 8 GPUs on
 * 4 NICs. The heads' NICs alone would carry it at their full rate. */
static double coll_collnet_ceiling_time(const coll_plan *p, const hw_cluster *hw, double bytes)
{
  const cfg_cluster *c = hw_config(hw);
  int g = p->n / p->nnodes, nics = MIN(g, c->node.nics_per_node);
  if (nics < 1)
    return 0;
  double ratio = (double)g / nics;
  double algbw = nics * c->network.nic_bandwidth * c->nccl.link_efficiency[CFG_LINK_NETWORK] /
                 (ratio - (ratio - 1) / 2);
  return bytes / algbw;
}

double coll_ceiling_time(const coll_plan *p, const hw_cluster *hw, int proto, double bytes)
{
  if (p->nnodes < 2 || p->n < 2)
    return 0;
  if (coll_is_collnet(p, hw))
    return coll_collnet_ceiling_time(p, hw, bytes);
  const cfg_nccl *nc = &hw_config(hw)->nccl;
  int scale = p->nnodes == 2 ? CFG_SCALE_TWO_NODES : CFG_SCALE_MORE_NODES;
  double busbw = coll_ceiling_busbw(p, nc, scale, proto);
  return busbw > 0 ? bytes / (busbw * coll_algbw_ratio(p)) : 0;
}
