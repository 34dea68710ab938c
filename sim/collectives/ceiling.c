/* NCCL's tuner caps NVLS-tree's bus bandwidth per channel (src/graph/tuning.cc,
 * ncclTopoTuneModel, perChMaxNVLSTreeBw): NVIDIA's measurement of what one channel's proxy,
 * queue pairs and SMs sustain, lower past two nodes. On two nodes a NIC exchanges its shard
 * with one peer; on more, a tree's inner node serves its parent and two children at once. The
 * ceiling is in bus bandwidth, so that past two nodes the bus bandwidth stays flat as nodes
 * are added (algorithm bandwidth = bus bandwidth x n / (2 (n - 1))), where the links alone
 * would let it creep up. A collective lasts at least bytes / (ceiling x that ratio); the rest
 * is slept after its transfers, as the copy bound is. */
#include "collectives/collectives_internal.h"

double coll_ceiling_time(const coll_plan *p, const hw_cluster *hw, double bytes)
{
  if (p->algo != COLL_ALGO_NVLS_TREE || p->op != PROG_COLL_ALLREDUCE || p->nnodes < 2)
    return 0;
  const cfg_nccl *nc = &hw_config(hw)->nccl;
  int scale = p->nnodes == 2 ? CFG_SCALE_TWO_NODES : CFG_SCALE_MORE_NODES;
  double busbw = nc->nvls_tree_channel[scale] * p->channels;
  int n = p->n;
  return busbw > 0 ? bytes / (busbw * n / (2.0 * (n - 1))) : 0;
}
