/* All-to-all: every member sends a block to every other. `direct` posts them all at once (as
 * NCCL's grouped send/recv does); `pairwise` runs n-1 rounds in which member i sends to i+k.
 * With per-pair sizes (all-to-allv) the fractions are bytes. NCCL runs send/recv on fewer
 * channels than rings, so these transfers reach nccl.p2p_efficiency of the link, not
 * link_efficiency: their bytes are scaled by the ratio. */
#include "collectives/collectives_internal.h"

double coll_p2p_scale(const hw_cluster *hw, const int *ranks, int n)
{
  const cfg_nccl *nc = &hw_config(hw)->nccl;
  bool across = false;
  for (int i = 1; i < n && !across; i++)
    across = hw_node_of(hw, ranks[i]) != hw_node_of(hw, ranks[0]);
  /* across nodes the network, not NVLink, bounds the transfers */
  return across ? 1.0 : nc->link_efficiency[CFG_LINK_INTRA] / nc->p2p_efficiency;
}

static double coll_block(const coll_plan *p, const double *vbytes, int i, int j)
{
  return vbytes ? vbytes[(gsize)i * p->n + j] : 1.0 / p->n;
}

void coll_build_alltoall(coll_builder *b, bool pairwise, const double *vbytes)
{
  coll_plan *p = b->p;
  int n = p->n;
  coll_layout l;
  coll_layout_of(b->hw, p->ranks, n, &l);
  int intra = coll_intra_if(&l, 1), net = coll_net_if(&l, 1);
  coll_layout_clear(&l);
  double scale = coll_p2p_scale(b->hw, p->ranks, n);
  if (!pairwise)
    coll_add_phase(b, 1, intra, net, false);
  for (int k = 1; k < n; k++) {
    if (pairwise)
      coll_add_phase(b, 1, intra, net, false);
    for (int i = 0; i < n; i++) {
      int j = (i + k) % n;
      coll_add_xfer(b, p->ranks[i], p->ranks[j], scale * coll_block(p, vbytes, i, j));
    }
  }
}
