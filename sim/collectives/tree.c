/* NCCL's tree all-reduce: in every node a chain of its GPUs, across nodes two complementary
 * binary trees, each carrying half of the data. The trees are NCCL's (graph/trees.cc): the
 * first puts the even nodes inside and the odd ones at the leaves; the second is the first
 * shifted by one node (an even node count) or mirrored (an odd one), so a node that is inner in
 * one tree is a leaf in the other. Past two nodes an inner node sends its half to a parent and
 * to two children, which is why NCCL's tuning halves NVLS-tree's network bandwidth beyond two
 * nodes. Reduction climbs the chains and trees, the result comes back down, all pipelined in
 * chunks; each channel uses a different GPU (and NIC) as the node's head. */
#include "collectives/collectives_internal.h"

#include <math.h>

/* The first tree: node 0 is the root; a node's lowest set bit says its level. A node xx01[0]
 * hangs under xx10[0] (or xx00[0] when that is past the end), a node xx11[0] under xx10[0]. */
static int coll_btree_parent(int k, int nodes)
{
  if (k == 0)
    return -1;
  int bit = k & -k;
  if (k & (bit << 1))
    return k - bit;
  return k + bit < nodes ? k + bit : k - bit;
}

static int coll_tree_parent(int k, int nodes, int tree)
{
  if (tree == 0)
    return coll_btree_parent(k, nodes);
  if (nodes % 2) {
    int parent = coll_btree_parent(nodes - 1 - k, nodes);
    return parent < 0 ? -1 : nodes - 1 - parent;
  }
  int parent = coll_btree_parent((k - 1 + nodes) % nodes, nodes);
  return parent < 0 ? -1 : (parent + 1) % nodes;
}

void coll_add_tree_edges(coll_builder *b, const coll_layout *l, int c, int channels)
{
  int N = l->nnodes;
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < N; k++) {
      int parent = coll_tree_parent(k, N, t);
      if (parent < 0)
        continue;
      int a = l->node_start[k], pa = l->node_start[parent];
      int ga = l->node_start[k + 1] - a, gp = l->node_start[parent + 1] - pa;
      int child_head = l->sorted[a + coll_channel_entry(c, channels, ga)];
      int parent_head = l->sorted[pa + coll_channel_entry(c, channels, gp)];
      coll_add_xfer(b, child_head, parent_head, 0.5 / channels);
      coll_add_xfer(b, parent_head, child_head, 0.5 / channels);
    }
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
    coll_add_tree_edges(b, &l, c, C);
  }
  p->channels = C;
  coll_layout_clear(&l);
}
