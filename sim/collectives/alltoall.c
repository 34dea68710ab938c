/* All-to-all: every member sends a block to every other. `direct` posts them all at once (as
 * NCCL's grouped send/recv does); `pairwise` runs n-1 rounds in which member i sends to i+k.
 * With per-pair sizes (all-to-allv) the fractions are bytes. NCCL runs send/recv on fewer
 * channels than rings, so these transfers reach nccl.p2p_efficiency of the link, not
 * link_efficiency: their bytes are scaled by the ratio. */
#include "collectives/collectives_internal.h"

#include <math.h>

double coll_p2p_scale(const hw_cluster *hw, const int *ranks, int n)
{
  const cfg_nccl *nc = &hw_config(hw)->nccl;
  bool across = false;
  for (int i = 1; i < n && !across; i++)
    across = hw_node_of(hw, ranks[i]) != hw_node_of(hw, ranks[0]);
  /* across nodes the network, not NVLink, bounds the transfers */
  return across ? 1.0 : nc->link_efficiency[CFG_LINK_INTRA] / nc->p2p_efficiency;
}

/* NCCL's send/recv inside an NVSwitch node (NVIDIA/nccl @ 5067397). A communicator has
 * p2pnChannels = pow2Up(its ring channels) p2p channels (src/graph/paths.cc,
 * ncclTopoComputeP2pChannels): 32 on an 8-GPU H100 or A100 node, whose rings run on more than
 * 16 channels (NVIDIA/nccl#1259's log counts channel 22 on 8 H100). A peer may take as many
 * (2 per NVLink, 36 on H100, min'ed with p2pnChannels; ncclTopoGetNchannels), but
 * scheduleP2pTasksToPlan halves nChannelsMin until nChannelsMin x nRanks fits the 32, and
 * addP2pToPlan gives a peer's message min(nChannelsMin, bytes / 64 KiB) channels, doubled while
 * a channel's part is over 32 chunks. The chunk is NCCL_P2P_NVL_CHUNKSIZE, 512 KiB
 * (src/init.cc, computeBuffSizes); a part under 64 KiB is p2pChunkSize / 8. */
#define COLL_P2P_CHANNELS 32
#define COLL_P2P_NVL_CHUNK (512.0 * 1024)

/* The channels NCCL gives a peer's message of `bytes` in a communicator of `nranks`. */
int coll_p2p_channels(int nranks, double bytes)
{
  int per_peer = COLL_P2P_CHANNELS, least = per_peer;
  while (least * nranks > COLL_P2P_CHANNELS && least > 1)
    least /= 2;
  double min_part = COLL_P2P_NVL_CHUNK / 8, max_part = COLL_P2P_NVL_CHUNK * 32;
  int channels = (int)MIN((double)least, MAX(1.0, ceil(bytes / min_part)));
  double part = MAX(min_part, bytes / channels);
  while (part > max_part && channels <= per_peer / 2) {
    channels *= 2;
    part = bytes / channels;
  }
  return channels;
}

/* On the Simple protocol each channel's part goes through a FIFO of chunk-sized steps: the
 * sender's SMs copy a chunk in, the receiver's copy it out once it is whole (prims_simple.h).
 * The receiver starts a chunk after the sender: a peer's transfer of `bytes` (taking
 * `transfer` seconds) waits for one chunk per channel first, the whole message when its
 * parts are no bigger than a chunk. */
double coll_p2p_fill(int nranks, double bytes, double transfer)
{
  if (bytes <= 0)
    return 0;
  double first = coll_p2p_channels(nranks, bytes) * COLL_P2P_NVL_CHUNK;
  return transfer * MIN(1.0, first / bytes);
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
