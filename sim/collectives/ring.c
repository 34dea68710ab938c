/* Ring-family algorithms (ring all-reduce / all-gather / reduce-scatter, chain broadcast and
 * reduce), pairwise all-to-all and direct send/recv, and the algorithm dispatcher. */
#include "collectives/collectives_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const coll_algo_names[] = {"auto", "ring", "pairwise", "direct"};

const char *coll_algo_name(coll_algo a)
{
  return a < COLL_NALGOS ? coll_algo_names[a] : "?";
}

bool coll_algo_parse(const char *name, coll_algo *out, GError **err)
{
  for (int a = 0; a < COLL_NALGOS; a++)
    if (strcmp(name, coll_algo_names[a]) == 0) {
      *out = (coll_algo)a;
      return true;
    }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "collectives.algorithm: unknown algorithm '%s' (expected one of auto, ring, "
              "pairwise, direct)",
              name);
  return false;
}

static int coll_cmp_int(const void *a, const void *b)
{
  return *(const int *)a - *(const int *)b;
}

/* Rings as NCCL builds them across nodes: members of a node are consecutive, and channel c
 * enters every node at its c-th member, so that different channels leave each node through
 * different GPUs (and NICs). Returns the number of channels; rings[c*n + i]. */
static int coll_rings(const hw_cluster *hw, const int *ranks, int n, int **rings_out)
{
  g_autofree int *sorted = g_memdup2(ranks, sizeof(int) * (gsize)n);
  qsort(sorted, (size_t)n, sizeof(int), coll_cmp_int);
  /* node boundaries */
  GArray *starts = g_array_new(FALSE, FALSE, sizeof(int));
  int maxper = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || hw_node_of(hw, sorted[i]) != hw_node_of(hw, sorted[i - 1]))
      g_array_append_val(starts, i);
  int nnodes = (int)starts->len;
  g_array_append_val(starts, n);
  for (int k = 0; k < nnodes; k++)
    maxper = MAX(maxper, g_array_index(starts, int, k + 1) - g_array_index(starts, int, k));
  int nics = MAX(hw_config(hw)->node.nics_per_node, 1);
  int channels = nnodes > 1 ? MAX(1, MIN(maxper, nics)) : 1;
  int *rings = g_new(int, (gsize)channels * n);
  for (int c = 0; c < channels; c++) {
    int pos = 0;
    for (int k = 0; k < nnodes; k++) {
      int a = g_array_index(starts, int, k), g = g_array_index(starts, int, k + 1) - a;
      for (int j = 0; j < g; j++)
        rings[c * n + pos++] = sorted[a + (c + j) % g];
    }
  }
  g_array_free(starts, TRUE);
  *rings_out = rings;
  return channels;
}

/* `nsteps` ring steps, each moving `chunk` bytes per channel from every member to the next. */
static void coll_ring_steps(coll_builder *b, int nsteps, double chunk_total)
{
  int n = b->s->n;
  g_autofree int *rings = NULL;
  int channels = coll_rings(b->hw, b->s->ranks, n, &rings);
  b->s->channels = channels;
  double chunk = chunk_total / channels;
  int phases = b->fold ? 1 : nsteps;
  for (int p = 0; p < phases; p++) {
    coll_add_phase(b, b->fold ? nsteps : 1);
    for (int c = 0; c < channels; c++)
      for (int i = 0; i < n; i++)
        coll_add_xfer(b, rings[c * n + i], rings[c * n + (i + 1) % n], chunk);
  }
}

/* A pipelined chain from the group's first member (broadcast) or towards it (reduce). The
 * message crosses every hop once, and each extra hop adds one latency. */
static void coll_chain(coll_builder *b, bool towards_root)
{
  int n = b->s->n;
  int hops = n - 1;
  coll_add_phase(b, hops);
  for (int i = 0; i < hops; i++) {
    int a = b->s->ranks[i], z = b->s->ranks[i + 1];
    if (towards_root)
      coll_add_xfer(b, z, a, b->s->bytes / hops);
    else
      coll_add_xfer(b, a, z, b->s->bytes / hops);
  }
}

/* Pairwise exchange: in step k every member sends its block to member (i + k) mod n. */
static void coll_pairwise(coll_builder *b)
{
  int n = b->s->n;
  double block = b->s->bytes / n;
  for (int k = 1; k < n; k++) {
    coll_add_phase(b, 1);
    for (int i = 0; i < n; i++)
      coll_add_xfer(b, b->s->ranks[i], b->s->ranks[(i + k) % n], block);
  }
}

void coll_plan(coll_builder *b, coll_algo algo)
{
  coll_schedule *s = b->s;
  int n = s->n;
  switch (s->op) {
  case PROG_COLL_ALLREDUCE:
    s->algo = COLL_ALGO_RING;
    coll_ring_steps(b, 2 * (n - 1), s->bytes / n);
    break;
  case PROG_COLL_ALLGATHER:
  case PROG_COLL_REDUCESCATTER:
    s->algo = COLL_ALGO_RING;
    coll_ring_steps(b, n - 1, s->bytes / n);
    break;
  case PROG_COLL_BROADCAST:
  case PROG_COLL_REDUCE:
    s->algo = COLL_ALGO_RING;
    coll_chain(b, s->op == PROG_COLL_REDUCE);
    break;
  case PROG_COLL_ALLTOALL:
    s->algo = COLL_ALGO_PAIRWISE;
    coll_pairwise(b);
    break;
  case PROG_COLL_SENDRECV:
    s->algo = COLL_ALGO_DIRECT;
    coll_add_phase(b, 1);
    coll_add_xfer(b, s->ranks[0], s->ranks[1], s->bytes);
    break;
  case PROG_NCOLLS:
    break;
  }
  (void)algo;
}
