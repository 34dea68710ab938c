/* MPI's collective designs beside NCCL's: recursive doubling and the two-level multi-leader
 * all-reduce (MVAPICH2-GDR's design for large GPU messages: Bayatpour et al., "SALaR",
 * CLUSTER 2018; Kandalla et al., multi-leader collectives, IPDPS 2009). */
#include "collectives/collectives_internal.h"

/* Recursive doubling: in round d every member exchanges with the member d apart. An all-reduce
 * sends the whole buffer each round (log2 n rounds of S); an all-gather what it has gathered so
 * far (d/n of the result), as the second half of rhd. */
void coll_build_rd(coll_builder *b)
{
  coll_plan *p = b->p;
  int n = p->n;
  coll_layout l;
  coll_layout_of(b->hw, p->ranks, n, &l);
  for (int d = 1; d < n; d *= 2) {
    bool net = hw_node_of(b->hw, l.sorted[0]) != hw_node_of(b->hw, l.sorted[d]);
    coll_add_phase(b, 1, !net, net, false);
    double frac = p->op == PROG_COLL_ALLREDUCE ? 1.0 : (double)d / n;
    for (int i = 0; i < n; i++)
      coll_add_xfer(b, l.sorted[i], l.sorted[i ^ d], frac);
  }
  coll_layout_clear(&l);
}

/* The member of node k that leads shard i of `leaders`: spread over the node, so that with
 * one NIC per GPU each leader sends on its own rail. */
static int coll_leader(const coll_layout *l, int k, int i, int leaders)
{
  return l->sorted[l->node_start[k] + coll_channel_entry(i, leaders, l->per_node)];
}

/* Inside every node, each member sends shard i (1/k of the buffer) to leader i (`up`), or
 * leader i sends the reduced shard back to every member (broadcast). */
static void coll_leader_exchange(coll_builder *b, const coll_layout *l, int k, bool up)
{
  int g = l->per_node;
  if (g < 2)
    return;
  coll_add_phase(b, 1, 1, 0, false);
  for (int node = 0; node < l->nnodes; node++)
    for (int i = 0; i < k; i++) {
      int leader = coll_leader(l, node, i, k);
      for (int m = 0; m < g; m++) {
        int member = l->sorted[l->node_start[node] + m];
        coll_add_xfer(b, up ? member : leader, up ? leader : member, 1.0 / k);
      }
    }
}

/* Across nodes, the k leaders of shard i form k rings at once, each all-reducing its shard:
 * 2 (N - 1) steps of 1/(k N) of the buffer, like a ring but on k rails. */
static void coll_leader_rings(coll_builder *b, const coll_layout *l, int k)
{
  int N = l->nnodes, nsteps = 2 * (N - 1);
  if (N < 2)
    return;
  int phases = b->fold ? 1 : nsteps, steps = b->fold ? nsteps : 1;
  for (int ph = 0; ph < phases; ph++) {
    coll_add_phase(b, steps, 0, steps, false);
    for (int i = 0; i < k; i++)
      for (int node = 0; node < N; node++)
        coll_add_xfer(b, coll_leader(l, node, i, k), coll_leader(l, (node + 1) % N, i, k),
                      1.0 / ((double)k * N));
  }
}

void coll_build_multi_leader(coll_builder *b)
{
  coll_layout l;
  coll_layout_of(b->hw, b->p->ranks, b->p->n, &l);
  int k = MAX(1, MIN(b->leaders, l.per_node));
  coll_leader_exchange(b, &l, k, true);
  coll_leader_rings(b, &l, k);
  coll_leader_exchange(b, &l, k, false);
  b->p->channels = k;
  coll_layout_clear(&l);
}
