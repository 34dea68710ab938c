/* Rings (all-reduce, all-gather, reduce-scatter), pipelined chains (broadcast, reduce),
 * recursive halving-doubling and the hierarchical two-level all-reduce. */
#include "collectives/collectives_internal.h"

/* Ring orders as NCCL builds them across nodes: a node's members are consecutive, and the
 * channels enter every node at members spread evenly over it, so that they leave each node
 * through different GPUs (and NICs). rings[c * n + i]. */
static int coll_ring_orders(const hw_cluster *hw, const coll_layout *l, int n, int **out)
{
  int channels = coll_channels(hw, l);
  int *rings = g_new(int, (gsize)channels * n);
  for (int c = 0; c < channels; c++) {
    int pos = 0;
    for (int k = 0; k < l->nnodes; k++) {
      int a = l->node_start[k], g = l->node_start[k + 1] - a;
      for (int j = 0; j < g; j++)
        rings[c * n + pos++] = l->sorted[a + (coll_channel_entry(c, channels, g) + j) % g];
    }
  }
  *out = rings;
  return channels;
}

/* `nsteps` ring steps, each moving 1/n of the buffer (split over the channels) to the next. */
static void coll_ring_steps(coll_builder *b, const coll_layout *l, const int *rings, int channels,
                            int n, int nsteps)
{
  int phases = b->fold ? 1 : nsteps;
  for (int p = 0; p < phases; p++) {
    int steps = b->fold ? nsteps : 1;
    coll_add_phase(b, steps, coll_intra_if(l, steps), coll_net_if(l, steps), b->fold);
    for (int c = 0; c < channels; c++)
      for (int i = 0; i < n; i++)
        coll_add_xfer(b, rings[c * n + i], rings[c * n + (i + 1) % n], 1.0 / (n * channels));
  }
}

/* What one GPU loads and stores of its own buffers per byte of S over a whole ring, from
 * NCCL's primitives (src/device/all_reduce.h, all_gather.h, reduce_scatter.h), each chunk of S/n
 * in turn. All-reduce: every chunk of the input is loaded once (send or reduce) and every chunk
 * of the output stored once, 2 S. All-gather: copySend loads its chunk and stores it in the
 * output, every other step stores a received chunk: (n + 1)/n S. Reduce-scatter: every step
 * loads a chunk of the input, the last stores the result: (n + 1)/n S. */
static double coll_ring_own(prog_coll op, int n)
{
  return op == PROG_COLL_ALLREDUCE ? 2.0 : (n + 1.0) / n;
}

void coll_build_ring(coll_builder *b)
{
  coll_plan *p = b->p;
  coll_layout l;
  coll_layout_of(b->hw, p->ranks, p->n, &l);
  int *rings = NULL;
  p->channels = coll_ring_orders(b->hw, &l, p->n, &rings);
  int steps = p->op == PROG_COLL_ALLREDUCE ? 2 * (p->n - 1) : p->n - 1;
  coll_ring_steps(b, &l, rings, p->channels, p->n, steps);
  for (guint i = 0; i < b->phases->len; i++) {
    coll_phase *ph = &g_array_index(b->phases, coll_phase, i);
    ph->sent = (double)ph->steps / p->n;
    ph->own = coll_ring_own(p->op, p->n) * ph->steps / steps;
  }
  g_free(rings);
  coll_layout_clear(&l);
}

void coll_build_chain(coll_builder *b, bool towards_root)
{
  coll_plan *p = b->p;
  int n = p->n, root = p->ranks[0];
  coll_layout l;
  coll_layout_of(b->hw, p->ranks, n, &l);
  int *rings = NULL;
  p->channels = coll_ring_orders(b->hw, &l, n, &rings);
  /* the whole buffer crosses every hop once, cut into chunks that follow each other */
  coll_add_phase(b, 1, n - l.nnodes, l.nnodes - 1, true);
  for (int c = 0; c < p->channels; c++) {
    int at = 0;
    while (rings[c * n + at] != root)
      at++;
    for (int h = 0; h < n - 1; h++) {
      int a = rings[c * n + (at + h) % n], z = rings[c * n + (at + h + 1) % n];
      if (towards_root)
        coll_add_xfer(b, z, a, 1.0 / p->channels);
      else
        coll_add_xfer(b, a, z, 1.0 / p->channels);
    }
  }
  g_free(rings);
  coll_layout_clear(&l);
}

void coll_build_rhd(coll_builder *b)
{
  coll_plan *p = b->p;
  int n = p->n;
  coll_layout l;
  coll_layout_of(b->hw, p->ranks, n, &l);
  /* recursive halving: exchange half of what is left with the partner at distance n/2, n/4 ... */
  for (int d = n / 2; d >= 1; d /= 2) {
    bool net = hw_node_of(b->hw, l.sorted[0]) != hw_node_of(b->hw, l.sorted[d]);
    coll_add_phase(b, 1, !net, net, false);
    for (int i = 0; i < n; i++)
      coll_add_xfer(b, l.sorted[i], l.sorted[i ^ d], (double)d / n);
  }
  /* recursive doubling gathers it back in the reverse order */
  for (int d = 1; d < n; d *= 2) {
    bool net = hw_node_of(b->hw, l.sorted[0]) != hw_node_of(b->hw, l.sorted[d]);
    coll_add_phase(b, 1, !net, net, false);
    for (int i = 0; i < n; i++)
      coll_add_xfer(b, l.sorted[i], l.sorted[i ^ d], (double)d / n);
  }
  coll_layout_clear(&l);
}

/* One ring per node over its members (all nodes at once). */
static void coll_intra_rings(coll_builder *b, const coll_layout *l, int g)
{
  coll_add_phase(b, g - 1, g - 1, 0, false);
  for (int k = 0; k < l->nnodes; k++)
    for (int j = 0; j < g; j++)
      coll_add_xfer(b, l->sorted[l->node_start[k] + j], l->sorted[l->node_start[k] + (j + 1) % g],
                    1.0 / g);
}

void coll_build_hierarchical(coll_builder *b)
{
  coll_layout l;
  coll_layout_of(b->hw, b->p->ranks, b->p->n, &l);
  int g = l.per_node, N = l.nnodes;
  coll_intra_rings(b, &l, g); /* reduce-scatter inside nodes */
  coll_add_phase(b, 2 * (N - 1), 0, 2 * (N - 1), false);
  for (int j = 0; j < g; j++) /* all-reduce of each 1/g shard along its rail */
    for (int k = 0; k < N; k++)
      coll_add_xfer(b, l.sorted[l.node_start[k] + j], l.sorted[l.node_start[(k + 1) % N] + j],
                    1.0 / ((double)g * N));
  coll_intra_rings(b, &l, g); /* all-gather inside nodes */
  b->p->channels = g;
  coll_layout_clear(&l);
}
