/* NCCL's tree all-reduce: in every node a chain of its GPUs, across nodes two complementary
 * binary trees (each carries half of the data, and a node that is inner in one is a leaf in the
 * other). Reduction climbs the chains and trees, the result comes back down, all pipelined in
 * chunks; each channel uses a different GPU (and NIC) as the node's head. */
#include "collectives/collectives_internal.h"

#include <math.h>

static int coll_tree_parent(int k, int nodes, bool mirrored)
{
  int m = mirrored ? nodes - 1 - k : k;
  if (m == 0)
    return -1;
  int parent = (m - 1) / 2;
  return mirrored ? nodes - 1 - parent : parent;
}

void coll_build_tree(coll_builder *b)
{
  coll_plan *p = b->p;
  coll_layout l;
  coll_layout_of(b->hw, p->ranks, p->n, &l);
  int N = l.nnodes, C = coll_channels(b->hw, &l);
  int longest = 0;
  for (int k = 0; k < N; k++)
    longest = MAX(longest, l.node_start[k + 1] - l.node_start[k]);
  int height = (int)ceil(log2((double)N + 1));
  coll_add_phase(b, 1, 2 * (longest - 1), 2 * height, true);
  for (int c = 0; c < C; c++) {
    for (int k = 0; k < N; k++) {
      int a = l.node_start[k], g = l.node_start[k + 1] - a;
      int e = coll_channel_entry(c, C, g);
      for (int j = 0; j + 1 < g; j++) {
        int up = l.sorted[a + (e + j + 1) % g], down = l.sorted[a + (e + j) % g];
        coll_add_xfer(b, up, down, 1.0 / C); /* reduce towards the head */
        coll_add_xfer(b, down, up, 1.0 / C); /* broadcast back */
      }
    }
    for (int t = 0; t < 2; t++)
      for (int k = 0; k < N; k++) {
        int parent = coll_tree_parent(k, N, t == 1);
        if (parent < 0)
          continue;
        int a = l.node_start[k], pa = l.node_start[parent];
        int ga = l.node_start[k + 1] - a, gp = l.node_start[parent + 1] - pa;
        int child_head = l.sorted[a + coll_channel_entry(c, C, ga)];
        int parent_head = l.sorted[pa + coll_channel_entry(c, C, gp)];
        coll_add_xfer(b, child_head, parent_head, 0.5 / C);
        coll_add_xfer(b, parent_head, child_head, 0.5 / C);
      }
  }
  p->channels = C;
  coll_layout_clear(&l);
}
