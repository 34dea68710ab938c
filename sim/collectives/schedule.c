/* Evaluating a plan at a size and protocol, and choosing the fastest like NCCL's tuner. */
#include "collectives/collectives_internal.h"

#include <math.h>
#include <string.h>

static const char *const coll_algo_names[] = {"auto", "ring", "tree", "rhd", "hierarchical",
                                              "nvls", "nvls-tree", "sharp", "pairwise", "direct",
                                              "rd", "multi-leader"};

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
              "collectives.algorithm: unknown algorithm '%s' (expected auto, ring, tree, rhd, "
              "hierarchical, nvls, nvls-tree, sharp, pairwise, direct, rd or multi-leader)",
              name);
  return false;
}

bool coll_proto_parse(const char *name, int *out, GError **err)
{
  if (strcmp(name, "auto") == 0) {
    *out = COLL_PROTO_AUTO;
    return true;
  }
  for (int p = 0; p < CFG_NPROTOS; p++)
    if (strcmp(name, cfg_proto_name((cfg_proto)p)) == 0) {
      *out = p;
      return true;
    }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "collectives.protocol: unknown protocol '%s' (expected auto, ll, ll128 or simple)", name);
  return false;
}

static bool coll_is_pow2(int n)
{
  return n > 0 && (n & (n - 1)) == 0;
}

/* Whether `algo` can run `op` on a group of n ranks laid out as `l`. */
static bool coll_algo_applies_to(const hw_cluster *hw, prog_coll op, int n, const coll_layout *l,
                                 coll_algo algo)
{
  const cfg_cluster *c = hw_config(hw);
  int nodes = l->nnodes, per = l->per_node;
  bool nvswitch = c->node.intra.kind == CFG_INTRA_NVSWITCH && c->node.intra.nvls;
  bool reduce = op == PROG_COLL_ALLREDUCE;
  switch (algo) {
  case COLL_ALGO_RING:
    return op != PROG_COLL_ALLTOALL && op != PROG_COLL_SENDRECV;
  case COLL_ALGO_TREE:
    return reduce && nodes > 1;
  case COLL_ALGO_RHD:
    return reduce && coll_is_pow2(n);
  case COLL_ALGO_HIERARCHICAL:
    return reduce && nodes > 1 && per > 1;
  /* NCCL turns NVLink SHARP off for communicators of two GPUs or fewer per node (nvls.cc) */
  case COLL_ALGO_NVLS:
    return reduce && nodes == 1 && per > 2 && nvswitch;
  case COLL_ALGO_NVLS_TREE:
    return reduce && nodes > 1 && per > 2 && nvswitch;
  case COLL_ALGO_SHARP:
    return reduce && nodes > 1 && per > 0 && c->network.sharp;
  case COLL_ALGO_PAIRWISE:
    return op == PROG_COLL_ALLTOALL;
  case COLL_ALGO_DIRECT:
    return op == PROG_COLL_ALLTOALL || op == PROG_COLL_SENDRECV;
  case COLL_ALGO_RD:
    return (reduce || op == PROG_COLL_ALLGATHER) && coll_is_pow2(n);
  case COLL_ALGO_MULTI_LEADER:
    return reduce && per > 0;
  case COLL_ALGO_AUTO:
    return true;
  case COLL_NALGOS:
    break;
  }
  return false;
}

bool coll_algo_applies(const hw_cluster *hw, prog_coll op, const int *ranks, int n, coll_algo algo)
{
  coll_layout l;
  coll_layout_of(hw, ranks, n, &l);
  bool ok = coll_algo_applies_to(hw, op, n, &l, algo);
  coll_layout_clear(&l);
  return ok;
}

bool coll_proto_applies(coll_algo algo, int proto)
{
  /* In-switch reductions (NVLS, SHARP) run on the Simple protocol only, as in NCCL. */
  bool in_switch = algo == COLL_ALGO_NVLS || algo == COLL_ALGO_NVLS_TREE || algo == COLL_ALGO_SHARP;
  return !in_switch || proto == CFG_PROTO_SIMPLE;
}

double coll_wire_bytes(const coll_plan *p, const coll_phase *ph, const coll_xfer *x, double bytes,
                       double proto_eff)
{
  double size = p->absolute ? 1.0 : bytes;
  /* SimGrid message sizes are integers: the closed form uses the same truncated size. */
  return floor(ph->steps * x->frac * size / proto_eff);
}

void coll_schedule_eval(const coll_plan *p, const hw_cluster *hw, int proto, double bytes,
                        coll_schedule *out)
{
  coll_schedule_eval_rt(p, hw, NULL, proto, bytes, out);
}

/* With host staging, the rate at which one core per process copies (it reads and writes each
 * byte: half of node.cpu.core_bandwidth); 0 when the node does not say, or when the buffers
 * already are in host memory (a CPU device). */
static double coll_core_copy_rate(const coll_runtime *rt, const hw_cluster *hw)
{
  const cfg_cluster *c = hw_config(hw);
  if (!rt || !rt->host_staged || c->gpu.kind == CFG_DEVICE_CPU)
    return 0;
  return c->node.cpu.core_bandwidth / 2;
}

/* The bytes each process reduces on its CPU: what a reduce-scatter half leaves it ((n - 1)/n of
 * the buffer), or the whole buffer every round of recursive doubling. */
static double coll_reduced_bytes(const coll_plan *p, double bytes)
{
  bool reduces = p->op == PROG_COLL_ALLREDUCE || p->op == PROG_COLL_REDUCESCATTER ||
                 p->op == PROG_COLL_REDUCE;
  if (!reduces)
    return 0;
  return p->algo == COLL_ALGO_RD ? log2(p->n) * bytes : (p->n - 1.0) / p->n * bytes;
}

/* What a runtime adds before the transfers: its call, and with host staging the copies of the
 * buffer to host memory and back (PCIe at storage.host_bandwidth, or the core that copies a
 * pageable buffer through the driver's pinned one when it is slower) and the CPU's reduction
 * (two buffers read, one written: 1.5 times a copy's traffic). */
static double coll_runtime_base(const coll_runtime *rt, const hw_cluster *hw, const coll_plan *p,
                                double nccl_base, double bytes)
{
  if (!rt)
    return nccl_base;
  double base = (rt->cpu ? rt->call_latency : nccl_base + rt->call_latency) + rt->cycle_wait;
  /* a CPU device's buffers already are in host memory: nothing to stage */
  if (!rt->host_staged || hw_config(hw)->gpu.kind == CFG_DEVICE_CPU)
    return base;
  double pcie = bytes / hw_config(hw)->storage.host_bandwidth;
  double core = coll_core_copy_rate(rt, hw);
  if (core <= 0)
    return base + 2.0 * pcie;
  return base + 2.0 * MAX(pcie, bytes / core) + 1.5 * coll_reduced_bytes(p, bytes) / core;
}

/* Host-staged messages between processes of a node are copied through shared memory by a core:
 * what that copy takes beyond the phase's time on the links. */
static double coll_shared_memory_copy(const coll_runtime *rt, const hw_cluster *hw,
                                      const coll_phase *ph, double size, double bulk)
{
  double core = coll_core_copy_rate(rt, hw), copy = 0;
  for (int k = 0; k < ph->nkinds && core > 0; k++)
    if (ph->kinds[k].cls == CFG_LINK_INTRA)
      copy = MAX(copy, ph->steps * ph->kinds[k].frac * size / core);
  return MAX(copy - bulk, 0.0);
}

/* The latency of one step over link class c: NCCL's per protocol, or the runtime's own
 * software cost, and a rendezvous handshake for a message above the eager limit. */
static double coll_step_latency(const coll_runtime *rt, const cfg_nccl *nc, int c, int proto,
                                double message)
{
  if (!rt || !rt->cpu)
    return nc->hop_latency[c][proto];
  bool rendezvous = rt->eager_limit > 0 && message > rt->eager_limit;
  return rt->step_latency + (rendezvous ? rt->rendezvous_latency : 0);
}

/* An MPI posts the messages of a step one after the other (a linear all-to-all's n - 1 sends,
 * a member's shards to its leaders): each after the first waits for the sender's cost of
 * posting one, step_latency. NCCL's kernels and a ring's one send per step pay none. */
static double coll_posting_latency(const coll_runtime *rt, const coll_phase *ph)
{
  if (!rt || !rt->cpu || ph->pipelined || ph->steps > 1 || ph->max_sends < 2)
    return 0;
  return (ph->max_sends - 1) * rt->step_latency;
}

/* How much longer than its transfers (`bulk`) a phase of an NCCL kernel lasts because its
 * channels' SMs load and store at nccl.copy_bandwidth: every byte it sends is stored and loaded
 * once each (by the two GPUs' SMs), and its own buffers are touched besides. */
static double coll_copy_wait(const coll_phase *ph, const cfg_nccl *nc, double size, double eff,
                             double bulk)
{
  if (nc->copy_bandwidth <= 0 || ph->sent + ph->own <= 0)
    return 0;
  double bytes = (2 * ph->sent / eff + ph->own) * size;
  return MAX(0.0, bytes / nc->copy_bandwidth - bulk);
}

/* The chunk a pipelined phase fills with: SHARP without NVLink SHARP is NCCL's CollNet Direct,
 * whose chunk shrinks with the size per channel and head (a channel per head assumed); the
 * other algorithms take the protocol's. */
static double coll_chunk(const coll_plan *p, const hw_cluster *hw, int proto, double size)
{
  if (coll_is_collnet(p, hw))
    return coll_collnet_chunk((double)p->channels * p->channels, size);
  return hw_config(hw)->nccl.chunk[proto];
}

static bool coll_is_p2p(const coll_plan *p)
{
  return p->algo == COLL_ALGO_DIRECT || p->algo == COLL_ALGO_PAIRWISE;
}

/* The message NCCL sends one peer in a point-to-point plan at `bytes`: a send/recv's whole
 * buffer, an all-to-all's block, an all-to-allv's largest block (as sent, before the
 * p2p_efficiency scaling). */
static double coll_p2p_message(const coll_plan *p, const hw_cluster *hw, double bytes)
{
  if (p->op == PROG_COLL_SENDRECV)
    return bytes;
  if (p->absolute)
    return p->nphases > 0 ? p->phases[0].max_frac / coll_p2p_scale(hw, p->ranks, p->n) : 0;
  return bytes / MAX(p->n, 1);
}

/* Whether a phase waits for NCCL's send/recv chunk pipeline (coll_p2p_fill): NCCL's kernels on
 * the Simple protocol inside one NVSwitch node, where its chunk and channel rules are known.
 * DeepEP's dispatch and combine, timed as all-to-alls, are kernels of their own. */
static bool coll_p2p_fills(const coll_plan *p, const coll_runtime *rt, const hw_cluster *hw,
                           int proto)
{
  bool nccl = p->op == PROG_COLL_SENDRECV || !rt || rt->nccl_a2a;
  return nccl && coll_is_p2p(p) && !coll_runtime_cpu(rt) && proto == CFG_PROTO_SIMPLE &&
         p->nnodes == 1 && hw_config(hw)->node.intra.kind == CFG_INTRA_NVSWITCH;
}

/* How long a phase's chunk pipeline takes to fill. A single-node NVLS all-reduce fills NCCL's
 * own (coll_nvls_fill): two loops of chunks across all heads and channels, not one chunk. An
 * MPI ring sends each step's block whole, one step after the other: the folded steps have no
 * chunk pipeline to fill (a chain's broadcast, one step, still has). */
static double coll_fill_time(const coll_plan *p, const coll_phase *ph, const coll_runtime *rt,
                             const hw_cluster *hw, int proto, int stages, double size, double bulk)
{
  const cfg_nccl *nc = &hw_config(hw)->nccl;
  if (p->algo == COLL_ALGO_NVLS && !coll_runtime_cpu(rt))
    return coll_nvls_fill(p->n, size, bulk);
  if (coll_p2p_fills(p, rt, hw, proto))
    return coll_p2p_fill(p->n, coll_p2p_message(p, hw, size), bulk);
  bool pipelined = ph->pipelined && !(rt && rt->cpu && ph->steps > 1);
  if (!pipelined)
    return 0;
  double eff = nc->protocol_efficiency[proto];
  return (stages - 1) * MIN(coll_chunk(p, hw, proto, size), ph->max_frac * size / eff) /
         ph->min_rate;
}

/* XLA's reduce-scatters run slower than its all-gathers of the same bytes by one pass over a
 * rank's result chunk S/n at the GPU's memory rate, at 2, 4 and 8 GPUs alike, and NCCL's rings
 * under PyTorch do not pay it (validation/nccl/xla-groups.py): a runtime with reduce_pass pays
 * it after the transfers, two chunks read and one written. */
static double coll_reduce_pass(const coll_plan *p, const coll_runtime *rt, const hw_cluster *hw,
                               double bytes)
{
  bool reduces = p->op == PROG_COLL_ALLREDUCE || p->op == PROG_COLL_REDUCESCATTER;
  if (!rt || rt->cpu || !rt->reduce_pass || !reduces || p->absolute)
    return 0;
  const cfg_gpu *g = &hw_config(hw)->gpu;
  return 3.0 * bytes / p->n / (g->memory_bandwidth * g->efficiency.memory_efficiency);
}

void coll_schedule_eval_rt(const coll_plan *p, const hw_cluster *hw, const coll_runtime *rt,
                           int proto, double bytes, coll_schedule *out)
{
  const cfg_nccl *nc = &hw_config(hw)->nccl;
  double eff = nc->protocol_efficiency[proto];
  double size = p->absolute ? 1.0 : bytes;
  memset(out, 0, sizeof *out);
  out->plan = p;
  out->proto = proto;
  out->bytes = bytes;
  out->pre = g_new0(double, MAX(p->nphases, 1));
  out->post = g_new0(double, MAX(p->nphases, 1));
  if (p->nphases == 0)
    return; /* one GPU, or nothing to move: no time at all */
  /* NVLink SHARP has its own set-up and synchronisation cost, which NCCL's tuning model counts
   * as one latency for the whole in-switch part (hwLat[NVLINK][NVLS] = 25 us) in place of the
   * base latency and the ring's per-step NVLink latencies; the wires' own latency stays. */
  bool nvls = p->algo == COLL_ALGO_NVLS || p->algo == COLL_ALGO_NVLS_TREE;
  /* CollNet Direct's latency is NCCL's model of the whole: no per-step latency besides (an MPI
   * driving the same plan pays its own steps) */
  bool collnet = coll_is_collnet(p, hw) && !coll_runtime_cpu(rt);
  double nccl_base = nvls      ? nc->nvls_latency
                     : collnet ? coll_collnet_latency(p->n / MAX(p->nnodes, 1))
                               : nc->base_latency[proto];
  out->base = coll_runtime_base(rt, hw, p, nccl_base, bytes);
  double t = out->base, moved = 0;
  for (int i = 0; i < p->nphases; i++) {
    const coll_phase *ph = &p->phases[i];
    double bulk = 0, lat = 0;
    int stages = 0;
    for (int k = 0; k < ph->nkinds; k++) {
      const coll_kind *kd = &ph->kinds[k];
      double wire = floor(ph->steps * kd->frac * size / eff);
      bulk = MAX(bulk, wire > 0 ? wire / kd->rate : 0);
    }
    for (int c = 0; c < CFG_NLINKCLASSES; c++) {
      double step = (nvls && c == CFG_LINK_INTRA) || collnet
                        ? 0
                        : coll_step_latency(rt, nc, c, proto, ph->max_frac * size);
      lat += ph->stages[c] * (ph->class_alpha[c] + step);
      stages += ph->stages[c];
    }
    lat += coll_posting_latency(rt, ph);
    out->pre[i] = lat; /* the platform's links carry no latency: it is paid here */
    out->post[i] = coll_fill_time(p, ph, rt, hw, proto, stages, size, bulk);
    out->post[i] += coll_shared_memory_copy(rt, hw, ph, size, bulk);
    if (!coll_runtime_cpu(rt))
      out->post[i] += coll_copy_wait(ph, nc, size, eff, bulk);
    t += out->pre[i] + bulk + out->post[i];
    moved += bulk + out->post[i];
  }
  if (!coll_runtime_cpu(rt)) {
    double wait = MAX(0.0, coll_ceiling_time(p, hw, proto, bytes) - moved);
    wait += coll_reduce_pass(p, rt, hw, bytes);
    out->post[p->nphases - 1] += wait;
    t += wait;
  }
  out->time = t;
}

void coll_schedule_clear(coll_schedule *s)
{
  g_free(s->pre);
  g_free(s->post);
  s->pre = s->post = NULL;
}

/* ---- the planner -------------------------------------------------------------------------- */

struct coll_planner {
  const hw_cluster *hw;
  const coll_runtime *rt; /* NULL: NCCL */
  coll_algo algo;
  int proto;
  bool fold;
  GHashTable *plans;     /* (key, op) -> GPtrArray of candidate plans */
  GHashTable *schedules; /* (key, op, bytes) -> coll_schedule */
  int *load;             /* coll_plan_build's link loads, made on first use */
  GHashTable *ids;       /* keyed by ranks: rank list (coll_ranks) -> its key, else NULL */
  /* (op, rule, group shape: coll_shape) -> the candidate plans of the first group of that
   * shape (pl->plans' own), which groups whole nodes apart move rather than plan again */
  GHashTable *shapes;
  struct coll_ranks *probe; /* ... and the lookups' scratch, room for `probe_n` ranks */
  int probe_n;
};

/* A group as the planner keyed by ranks knows it: the ranks, in order. */
typedef struct coll_ranks {
  int n;
  int ranks[];
} coll_ranks;

static guint coll_ranks_hash(gconstpointer k)
{
  const coll_ranks *x = k;
  guint h = (guint)x->n * 2654435761u;
  for (int i = 0; i < x->n; i++)
    h = (h ^ (guint)x->ranks[i]) * 16777619u;
  return h;
}

static gboolean coll_ranks_equal(gconstpointer a, gconstpointer b)
{
  const coll_ranks *x = a, *y = b;
  return x->n == y->n && memcmp(x->ranks, y->ranks, sizeof(int) * (size_t)x->n) == 0;
}

/* The key of a rank list: the same for every program that has the group, whatever its id. */
static int coll_ranks_key(coll_planner *pl, const int *ranks, int n)
{
  gsize size = sizeof(coll_ranks) + sizeof(int) * (gsize)n;
  if (n > pl->probe_n) {
    pl->probe = g_realloc(pl->probe, size);
    pl->probe_n = n;
  }
  pl->probe->n = n;
  memcpy(pl->probe->ranks, ranks, sizeof(int) * (size_t)n);
  gpointer id = g_hash_table_lookup(pl->ids, pl->probe);
  if (id)
    return GPOINTER_TO_INT(id);
  int key = (int)g_hash_table_size(pl->ids) + 1;
  g_hash_table_insert(pl->ids, g_memdup2(pl->probe, size), GINT_TO_POINTER(key));
  return key;
}

/* A group as its plans see it: the same transfers between its members whatever nodes it sits
 * on, so its ranks relative to its first rank's node (with the op and the rule that chose the
 * algorithms). */
typedef struct coll_shape {
  int op, ruled, n;
  int ranks[];
} coll_shape;

static guint coll_shape_hash(gconstpointer k)
{
  const coll_shape *x = k;
  guint h = ((guint)x->n * 2654435761u) ^ ((guint)x->op * 40503u) ^ (guint)x->ruled;
  for (int i = 0; i < x->n; i++)
    h = (h ^ (guint)x->ranks[i]) * 16777619u;
  return h;
}

static gboolean coll_shape_equal(gconstpointer a, gconstpointer b)
{
  const coll_shape *x = a, *y = b;
  return x->op == y->op && x->ruled == y->ruled && x->n == y->n &&
         memcmp(x->ranks, y->ranks, sizeof(int) * (size_t)x->n) == 0;
}

typedef struct {
  int key;
  int op;
  double bytes;
} coll_cache_key;

static guint coll_key_hash(gconstpointer k)
{
  const coll_cache_key *x = k;
  guint64 bits;
  memcpy(&bits, &x->bytes, sizeof bits);
  return (guint)x->key * 2654435761u ^ (guint)x->op * 40503u ^ (guint)(bits ^ (bits >> 29));
}

static gboolean coll_key_equal(gconstpointer a, gconstpointer b)
{
  const coll_cache_key *x = a, *y = b;
  return x->key == y->key && x->op == y->op && x->bytes == y->bytes;
}

static void coll_plans_free(gpointer a)
{
  GPtrArray *plans = a;
  for (guint i = 0; i < plans->len; i++)
    coll_plan_free(g_ptr_array_index(plans, i));
  g_ptr_array_free(plans, TRUE);
}

static void coll_schedule_free(gpointer s)
{
  coll_schedule_clear(s);
  g_free(s);
}

coll_planner *coll_planner_new(const hw_cluster *hw, coll_algo algo, int proto, bool fold)
{
  coll_planner *pl = g_new0(coll_planner, 1);
  pl->hw = hw;
  pl->algo = algo;
  pl->proto = proto;
  pl->fold = fold;
  pl->plans = g_hash_table_new_full(coll_key_hash, coll_key_equal, g_free, coll_plans_free);
  pl->shapes = g_hash_table_new_full(coll_shape_hash, coll_shape_equal, g_free, NULL);
  pl->schedules = g_hash_table_new_full(coll_key_hash, coll_key_equal, g_free, coll_schedule_free);
  return pl;
}

void coll_planner_key_by_ranks(coll_planner *pl)
{
  if (!pl->ids)
    pl->ids = g_hash_table_new_full(coll_ranks_hash, coll_ranks_equal, g_free, NULL);
  g_hash_table_remove_all(pl->schedules);
  g_hash_table_remove_all(pl->shapes);
  g_hash_table_remove_all(pl->plans);
}

void coll_planner_set_runtime(coll_planner *pl, const coll_runtime *rt)
{
  pl->rt = rt;
  g_hash_table_remove_all(pl->schedules);
  g_hash_table_remove_all(pl->shapes);
  g_hash_table_remove_all(pl->plans);
}

void coll_planner_free(coll_planner *pl)
{
  if (!pl)
    return;
  g_hash_table_destroy(pl->schedules);
  g_hash_table_destroy(pl->shapes);
  g_hash_table_destroy(pl->plans);
  if (pl->ids)
    g_hash_table_destroy(pl->ids);
  g_free(pl->probe);
  g_free(pl->load);
  g_free(pl);
}

/* NCCL's algorithms for an op, in the order its tuner prefers on ties. */
static int coll_auto_candidates(prog_coll op, int n, coll_algo *out)
{
  switch (op) {
  case PROG_COLL_ALLREDUCE:
    out[0] = COLL_ALGO_NVLS, out[1] = COLL_ALGO_NVLS_TREE, out[2] = COLL_ALGO_SHARP;
    out[3] = COLL_ALGO_RING, out[4] = COLL_ALGO_TREE;
    return 5;
  case PROG_COLL_ALLTOALL:
    out[0] = n <= 256 ? COLL_ALGO_DIRECT : COLL_ALGO_PAIRWISE;
    return 1;
  case PROG_COLL_SENDRECV:
    out[0] = COLL_ALGO_DIRECT;
    return 1;
  default:
    out[0] = COLL_ALGO_RING;
    return 1;
  }
}

/* An MPI's algorithms for an op when no size rule names one: NCCL's without its in-switch and
 * tree designs, plus MPI's own. */
static int coll_cpu_candidates(prog_coll op, int n, coll_algo *out)
{
  switch (op) {
  case PROG_COLL_ALLREDUCE:
    out[0] = COLL_ALGO_RING, out[1] = COLL_ALGO_RHD, out[2] = COLL_ALGO_RD;
    out[3] = COLL_ALGO_MULTI_LEADER;
    return 4;
  case PROG_COLL_ALLGATHER:
    out[0] = COLL_ALGO_RING, out[1] = COLL_ALGO_RD;
    return 2;
  default:
    return coll_auto_candidates(op, n, out);
  }
}

/* The shape of a group (newly allocated). */
static coll_shape *coll_shape_of(const hw_cluster *hw, prog_coll op, coll_algo ruled,
                                 const int *ranks, int n)
{
  coll_shape *sh = g_malloc(sizeof(coll_shape) + sizeof(int) * (gsize)n);
  *sh = (coll_shape){.op = op, .ruled = ruled, .n = n};
  int base = n > 0 ? hw_node_of(hw, ranks[0]) * hw_gpus_per_node(hw) : 0;
  for (int i = 0; i < n; i++)
    sh->ranks[i] = ranks[i] - base;
  return sh;
}

/* The plans of a group shaped like one planned before: each moved onto its ranks, or planned
 * again when it reduces in switches (their endpoints are not the group's ranks). */
static GPtrArray *coll_candidates_moved(coll_planner *pl, const GPtrArray *like, const int *ranks,
                                        int n)
{
  GPtrArray *plans = g_ptr_array_new();
  int leaders = pl->rt ? pl->rt->leaders : 1, gpn = hw_gpus_per_node(pl->hw);
  for (guint i = 0; i < like->len; i++) {
    const coll_plan *p = g_ptr_array_index(like, i);
    int shift = (hw_node_of(pl->hw, ranks[0]) - hw_node_of(pl->hw, p->ranks[0])) * gpn;
    g_ptr_array_add(plans, p->nmembers == p->n
                               ? coll_plan_moved(p, pl->hw, shift, pl->load)
                               : coll_plan_build(pl->hw, p->op, ranks, n, p->algo, NULL, pl->fold,
                                                 leaders, pl->load));
  }
  return plans;
}

/* The candidate plans: the forced algorithm, the one a runtime's size rule names (`ruled`), or
 * every one the tuner weighs. Cached per group and op (and ruled algorithm). */
static GPtrArray *coll_candidates(coll_planner *pl, prog_coll op, const int *ranks, int n, int key,
                                  coll_algo ruled, const double *vbytes, GError **err)
{
  coll_cache_key k = {.key = key, .op = op, .bytes = -1.0 - (double)ruled};
  GPtrArray *plans = g_hash_table_lookup(pl->plans, &k);
  if (plans)
    return plans;
  if (!pl->load)
    pl->load = g_new0(int, 2 * (gsize)hw_nlinks(pl->hw));
  /* an all-to-allv's matrix is its own */
  coll_shape *shape = vbytes || n == 0 ? NULL : coll_shape_of(pl->hw, op, ruled, ranks, n);
  const GPtrArray *like = shape ? g_hash_table_lookup(pl->shapes, shape) : NULL;
  if (like) {
    g_free(shape);
    plans = coll_candidates_moved(pl, like, ranks, n);
    g_hash_table_insert(pl->plans, g_memdup2(&k, sizeof k), plans);
    return plans;
  }
  coll_algo algos[8];
  int na = 0;
  /* the group's layout once, for every algorithm weighed (sorting a large group's ranks for
   * each was a twentieth of a 16,384-GPU configuration) */
  coll_layout l;
  coll_layout_of(pl->hw, ranks, n, &l);
  if (pl->algo != COLL_ALGO_AUTO && coll_algo_applies_to(pl->hw, op, n, &l, pl->algo))
    algos[na++] = pl->algo;
  else if (ruled != COLL_ALGO_AUTO)
    algos[na++] = ruled;
  else if (coll_runtime_cpu(pl->rt))
    na = coll_cpu_candidates(op, n, algos);
  else
    na = coll_auto_candidates(op, n, algos);
  plans = g_ptr_array_new();
  int leaders = pl->rt ? pl->rt->leaders : 1;
  for (int i = 0; i < na; i++)
    if (coll_algo_applies_to(pl->hw, op, n, &l, algos[i]))
      g_ptr_array_add(plans, coll_plan_build(pl->hw, op, ranks, n, algos[i], vbytes, pl->fold,
                                             leaders, pl->load));
  coll_layout_clear(&l);
  if (plans->len == 0) {
    g_ptr_array_free(plans, TRUE);
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "no algorithm can run %s on this group",
                prog_coll_name(op));
    g_free(shape);
    return NULL;
  }
  g_hash_table_insert(pl->plans, g_memdup2(&k, sizeof k), plans);
  if (shape)
    g_hash_table_insert(pl->shapes, shape, plans);
  return plans;
}

/* NCCL's send/recv (and so its all-to-all, grouped sends and receives) does not weigh protocols
 * as its collective tuner does: a peer's message of at most NCCL_P2P_LL_THRESHOLD (16 KiB by
 * default) goes as LL, anything larger as Simple, and LL128 never (src/enqueue.cc,
 * addP2pToPlan). An MPI sends plain messages anyway. */
#define COLL_P2P_LL_THRESHOLD 16384.0

static bool coll_p2p_proto_skipped(const coll_plan *p, const hw_cluster *hw, double bytes,
                                   int proto)
{
  if (!coll_is_p2p(p) || p->nphases == 0)
    return false;
  double message = coll_p2p_message(p, hw, bytes);
  int nccl = message <= COLL_P2P_LL_THRESHOLD ? CFG_PROTO_LL : CFG_PROTO_SIMPLE;
  return proto != nccl;
}

/* A forced protocol is the only one tried; under auto, those the algorithm can run, and for
 * point-to-point plans only the one NCCL's own rule picks. */
static bool coll_nccl_proto_tried(const coll_planner *pl, const coll_plan *plan, double bytes,
                                  int proto)
{
  if (pl->proto != COLL_PROTO_AUTO)
    return proto == pl->proto;
  return coll_proto_applies(plan->algo, proto) &&
         !coll_p2p_proto_skipped(plan, pl->hw, bytes, proto);
}

const coll_schedule *coll_planner_get(coll_planner *pl, prog_coll op, const int *ranks, int n,
                                      int key, double bytes, const double *vbytes, GError **err)
{
  /* an all-to-allv's matrix is known by the caller's key alone */
  g_return_val_if_fail(!pl->ids || !vbytes, NULL);
  if (pl->ids)
    key = coll_ranks_key(pl, ranks, n);
  coll_cache_key k = {.key = key, .op = op, .bytes = bytes};
  coll_schedule *best = g_hash_table_lookup(pl->schedules, &k);
  if (best)
    return best;
  int rule;
  coll_algo ruled = coll_runtime_pick(pl->rt, pl->hw, op, ranks, n, bytes, &rule);
  GPtrArray *plans = coll_candidates(pl, op, ranks, n, key, ruled, vbytes, err);
  if (!plans)
    return NULL;
  bool cpu = coll_runtime_cpu(pl->rt);
  best = g_new0(coll_schedule, 1);
  best->time = INFINITY;
  best->pre = best->post = NULL;
  for (guint i = 0; i < plans->len; i++)
    for (int proto = 0; proto < CFG_NPROTOS; proto++) {
      const coll_plan *plan = g_ptr_array_index(plans, i);
      bool skip = cpu ? proto != CFG_PROTO_SIMPLE /* MPI sends plain messages: no LL */
                      : !coll_nccl_proto_tried(pl, plan, bytes, proto);
      if (skip)
        continue;
      coll_schedule s;
      coll_schedule_eval_rt(plan, pl->hw, pl->rt, proto, bytes, &s);
      if (s.time < best->time) {
        coll_schedule_clear(best);
        *best = s;
      } else {
        coll_schedule_clear(&s);
      }
    }
  g_hash_table_insert(pl->schedules, g_memdup2(&k, sizeof k), best);
  return best;
}

double coll_busbw_factor(prog_coll op, int n)
{
  if (n <= 1)
    return 1.0;
  switch (op) {
  case PROG_COLL_ALLREDUCE:
    return 2.0 * (n - 1) / n;
  case PROG_COLL_ALLGATHER:
  case PROG_COLL_REDUCESCATTER:
  case PROG_COLL_ALLTOALL:
    return (double)(n - 1) / n;
  default:
    return 1.0;
  }
}

bool coll_group_check(const hw_cluster *hw, const int *ranks, int n, GError **err)
{
  g_autofree char *seen = g_new0(char, hw_gpus(hw));
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= hw_gpus(hw)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "process group: rank %d is not a GPU of the cluster (it has %d GPUs, 0..%d)",
                  ranks[i], hw_gpus(hw), hw_gpus(hw) - 1);
      return false;
    }
    if (seen[ranks[i]]++) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "process group: rank %d appears twice",
                  ranks[i]);
      return false;
    }
  }
  return true;
}
