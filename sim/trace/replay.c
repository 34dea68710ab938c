/* A trace turned into a program. What a GPU does in a step depends on three things the trace
 * records, and the program keeps all three:
 *
 * - The CPU thread that launches the work. Its time between two CUDA calls is kept as
 *   measured: a chain of intervals on one program stream, each from one call (or step
 *   boundary) to the next. A GPU op cannot start before the interval that ends at its launch
 *   call. A call that blocks on the GPU (a synchronize, a copy to the host) makes the thread's
 *   next call wait for the GPU op that ended last before it returned: that interval waits for
 *   the op and keeps only the time measured after it (the wake-up and the work until the call).
 * - The GPU streams (kernels of one stream run in order), with the cross-stream waits that the
 *   trace shows: an op that started late on its stream, within a few microseconds of an op
 *   ending on another stream, waited for it. What no cause explains (a CUDA graph's internal
 *   waits, launch latency) is kept as a measured delay before the op.
 * - The collectives: an NCCL kernel whose collective and size are known becomes a collective
 *   of the program over its process group, timed by the collective model (the measured
 *   duration includes waiting for the slowest peer, which a replay must not bake in).
 *
 * Kernels keep their measured duration, or are re-timed for other hardware by the cost model:
 * a kernel of a compute-bound class scales with the ratio of modelled times of a compute-bound
 * kernel of its class and type on the two clusters (peak FLOP/s, efficiency, sustained
 * clocks), a memory-bound one with that of a streaming kernel (HBM bandwidth and efficiency),
 * and the fixed per-kernel cost with the launch overheads. Host copies (PCIe) and the CPU keep
 * their measured time. With identical hardware every time is the measured one. */
#include "trace/trace_internal.h"

#include <math.h>
#include <string.h>

/* An op that started later than its stream and its launch allowed, and this close after an op
 * of another stream ended, waited for that op (a CUDA event wait costs a few microseconds). */
#define RP_CROSS_WINDOW 20.0
/* A blocking call waited for an op that ended at most this long after the call returned
 * (timestamps are often whole microseconds). */
#define RP_SYNC_SLACK 1.0

enum { RP_CPU_SLOT = PROG_STREAM_CP, RP_GPU_SLOTS = PROG_STREAM_CP };

typedef struct {
  double ts;      /* trace time of the point */
  int call;       /* call index, or -1 for a step boundary */
  int marker;     /* step boundary index, or -1 */
  double wait_end;/* latest end of the GPU ops the interval waits for (trace time), or -INF */
  int nwait;
} rp_point;

typedef struct {
  int op;         /* index into the trace's ops */
  int point;      /* chain point of the call that launched it, or -1 */
  int prev;       /* replay index of the op before it on its stream, or -1 */
  int cross;      /* replay index of the op of another stream it waited for, or -1 */
  int slot;       /* program stream */
  double start, end; /* trace times, clipped to the window's start */
  double delay;   /* measured time no cause explains */
} rp_gpu;

typedef struct {
  int point, gpu; /* interval `point` waits for replay op `gpu` */
} rp_wait;

typedef struct {
  double key;
  int rank;  /* tie-break: intervals, then delays, then GPU ops */
  int idx;
} rp_node;

typedef struct {
  const trc_trace *t;
  const trc_replay_options *o;
  trc_replay *out;
  prog_program *p;
  int cls;
  const int *family_of_group; /* group size -> family, indexed by size */
  int max_group;
  guint step0, nsteps;
  double t0, t1;
  guint c0, c1;      /* calls in the window */
  GArray *points;    /* rp_point */
  int *point_of_call;/* call - c0 -> point */
  GArray *gpu;       /* rp_gpu, by start */
  GArray *waits;     /* rp_wait */
  uint32_t *cpu_op, *gpu_op; /* program op of each point / GPU op (UINT32_MAX before) */
} rp_builder;

/* ---- the window and the CPU chain ------------------------------------------------------------ */

static guint rp_lower_call(const trc_trace *t, double ts)
{
  guint lo = 0, hi = t->calls->len;
  while (lo < hi) {
    guint mid = (lo + hi) / 2;
    if (g_array_index(t->calls, trc_call, mid).ts < ts)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The time of step boundary k: step k / 2's start (k even) or end (k odd). */
static double rp_boundary(const rp_builder *b, guint k)
{
  const trc_step *s = &g_array_index(b->t->steps, trc_step, b->step0 + k / 2);
  return k % 2 ? s->ts + s->dur : s->ts;
}

static void rp_chain(rp_builder *b)
{
  const trc_trace *t = b->t;
  b->c0 = rp_lower_call(t, b->t0);
  b->c1 = rp_lower_call(t, b->t1);
  b->points = g_array_new(FALSE, FALSE, sizeof(rp_point));
  b->point_of_call = g_new(int, MAX(b->c1 - b->c0, 1u));
  guint k = 0, nmarkers = 2 * b->nsteps;
  for (guint c = b->c0; c <= b->c1; c++) {
    double ts = c < b->c1 ? g_array_index(t->calls, trc_call, c).ts : INFINITY;
    /* step boundaries first: a call at the very start of a step belongs to it */
    for (; k < nmarkers && rp_boundary(b, k) <= ts; k++) {
      rp_point m = {.ts = rp_boundary(b, k), .call = -1, .marker = (int)k, .wait_end = -INFINITY};
      g_array_append_val(b->points, m);
    }
    if (c < b->c1) {
      rp_point pt = {.ts = ts, .call = (int)c, .marker = -1, .wait_end = -INFINITY};
      b->point_of_call[c - b->c0] = (int)b->points->len;
      g_array_append_val(b->points, pt);
    }
  }
}

/* ---- the GPU ops ------------------------------------------------------------------------------ */

/* Ops launched inside the window, and those launched before it still running at its start. */
static bool rp_in_window(const rp_builder *b, const trc_gpu_op *op)
{
  if (op->call >= (int)b->c0 && op->call < (int)b->c1)
    return true;
  bool before = op->call >= 0 ? op->call < (int)b->c0 : op->ts < b->t1;
  return before && op->ts + op->dur > b->t0 && op->ts < b->t1;
}

/* Program streams: the busiest trace stream is the compute stream; the others take the free
 * slots in order of busy time, sharing the least busy slot when there are more. */
static GHashTable *rp_stream_slots(rp_builder *b)
{
  g_autoptr(GHashTable) busy = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  for (guint i = 0; i < b->gpu->len; i++) {
    const trc_gpu_op *op = &g_array_index(b->t->ops, trc_gpu_op, g_array_index(b->gpu, rp_gpu, i).op);
    double *v = g_hash_table_lookup(busy, GINT_TO_POINTER(op->stream));
    if (!v)
      g_hash_table_insert(busy, GINT_TO_POINTER(op->stream), v = g_new0(double, 1));
    *v += op->dur;
  }
  GList *streams = g_hash_table_get_keys(busy);
  GHashTable *slots = g_hash_table_new(g_direct_hash, g_direct_equal);
  double load[RP_GPU_SLOTS] = {0};
  for (guint n = 0; streams; n++) {
    GList *best = streams;
    for (GList *l = streams; l; l = l->next)
      if (*(double *)g_hash_table_lookup(busy, l->data) > *(double *)g_hash_table_lookup(busy, best->data))
        best = l;
    int slot = (int)n;
    if (n >= RP_GPU_SLOTS) {
      slot = 1;
      for (int s = 2; s < RP_GPU_SLOTS; s++)
        if (load[s] < load[slot])
          slot = s;
      b->out->streams_merged++;
    }
    load[slot] += *(double *)g_hash_table_lookup(busy, best->data);
    g_hash_table_insert(slots, best->data, GINT_TO_POINTER(slot));
    streams = g_list_delete_link(streams, best);
  }
  return slots;
}

static int rp_cmp_end(const void *a, const void *b, void *data)
{
  const rp_gpu *g = data;
  double x = g[*(const int *)a].end, y = g[*(const int *)b].end;
  return x < y ? -1 : x > y;
}

/* Replay ops sorted by end, for "what ended just before". */
static int *rp_by_end(const rp_builder *b)
{
  int *idx = g_new(int, MAX(b->gpu->len, 1u));
  for (guint i = 0; i < b->gpu->len; i++)
    idx[i] = (int)i;
  g_qsort_with_data(idx, (gint)b->gpu->len, sizeof(int), rp_cmp_end, b->gpu->data);
  return idx;
}

/* The last index k of `by_end` with end <= t, or -1. */
static int rp_ended_by(const rp_builder *b, const int *by_end, double t)
{
  int lo = 0, hi = (int)b->gpu->len;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (g_array_index(b->gpu, rp_gpu, by_end[mid]).end <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

/* Stream order, launch points, cross-stream waits and the delays nothing explains. */
static void rp_gpu_causes(rp_builder *b)
{
  GHashTable *slots = rp_stream_slots(b);
  g_autoptr(GHashTable) last = g_hash_table_new(g_direct_hash, g_direct_equal);
  int *by_end = rp_by_end(b);
  for (guint i = 0; i < b->gpu->len; i++) {
    rp_gpu *g = &g_array_index(b->gpu, rp_gpu, i);
    const trc_gpu_op *op = &g_array_index(b->t->ops, trc_gpu_op, g->op);
    g->slot = GPOINTER_TO_INT(g_hash_table_lookup(slots, GINT_TO_POINTER(op->stream)));
    g->prev = GPOINTER_TO_INT(g_hash_table_lookup(last, GINT_TO_POINTER(op->stream))) - 1;
    g_hash_table_insert(last, GINT_TO_POINTER(op->stream), GINT_TO_POINTER((int)i + 1));
    bool launched = op->call >= (int)b->c0 && op->call < (int)b->c1;
    g->point = launched ? b->point_of_call[op->call - (int)b->c0] : -1;
    double ready = launched ? g_array_index(b->t->calls, trc_call, op->call).ts : b->t0;
    if (g->prev >= 0)
      ready = MAX(ready, g_array_index(b->gpu, rp_gpu, g->prev).end);
    g->cross = -1;
    for (int k = rp_ended_by(b, by_end, g->start); k >= 0; k--) {
      const rp_gpu *c = &g_array_index(b->gpu, rp_gpu, by_end[k]);
      if (c->end <= ready || c->end < g->start - RP_CROSS_WINDOW)
        break;
      if (g_array_index(b->t->ops, trc_gpu_op, c->op).stream != op->stream && by_end[k] != (int)i) {
        g->cross = by_end[k];
        ready = c->end;
        b->out->cross_deps++;
        break;
      }
    }
    g->delay = MAX(0.0, g->start - ready);
  }
  g_free(by_end);
  g_hash_table_destroy(slots);
}

/* A call that blocks the thread on the GPU: the replay op it waited for, or -1. A copy
 * waited for its own op if that ended before the call returned; a synchronize for the op that
 * ended last before it returned. */
static int rp_blocked_on(const rp_builder *b, const int *by_end, guint c, const int *own)
{
  const trc_call *call = &g_array_index(b->t->calls, trc_call, c);
  double ret = call->ts + call->dur + RP_SYNC_SLACK;
  if (g_str_has_prefix(call->name, "cudaMemcpy")) {
    int o = own[c - b->c0];
    return o >= 0 && g_array_index(b->gpu, rp_gpu, o).end <= ret ? o : -1;
  }
  if (!strstr(call->name, "Synchronize"))
    return -1;
  int k = rp_ended_by(b, by_end, ret);
  return k >= 0 && g_array_index(b->gpu, rp_gpu, by_end[k]).end >= b->t0 ? by_end[k] : -1;
}

/* Every blocking call makes the interval before its thread's next call wait. */
static void rp_sync_waits(rp_builder *b)
{
  b->waits = g_array_new(FALSE, FALSE, sizeof(rp_wait));
  int *by_end = rp_by_end(b);
  int *own = g_new(int, MAX(b->c1 - b->c0, 1u)); /* call -> the first replay op it launched */
  for (guint c = b->c0; c < b->c1; c++)
    own[c - b->c0] = -1;
  for (guint i = b->gpu->len; i-- > 0;) {
    int call = g_array_index(b->t->ops, trc_gpu_op, g_array_index(b->gpu, rp_gpu, i).op).call;
    if (call >= (int)b->c0 && call < (int)b->c1)
      own[call - (int)b->c0] = (int)i;
  }
  g_autoptr(GHashTable) next = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  int end_point = (int)b->points->len - 1;
  for (guint c = b->c1; c-- > b->c0;) {
    const trc_call *call = &g_array_index(b->t->calls, trc_call, c);
    gpointer nx = g_hash_table_lookup(next, &call->tid);
    int target = rp_blocked_on(b, by_end, c, own);
    if (target >= 0) {
      int np = nx ? b->point_of_call[GPOINTER_TO_INT(nx) - 1 - (int)b->c0] : end_point;
      rp_wait w = {.point = np - 1, .gpu = target};
      g_array_append_val(b->waits, w);
      rp_point *pt = &g_array_index(b->points, rp_point, np - 1);
      pt->wait_end = MAX(pt->wait_end, g_array_index(b->gpu, rp_gpu, target).end);
      pt->nwait++;
      b->out->sync_deps++;
    }
    g_hash_table_insert(next, g_memdup2(&call->tid, sizeof call->tid), GINT_TO_POINTER((int)c + 1));
  }
  g_free(own);
  g_free(by_end);
}

/* ---- durations -------------------------------------------------------------------------------- */

/* Modelled time of a reference kernel of the op's class and type (1 GFLOP or 1 GB), without
 * the fixed per-kernel cost. */
static double rp_reference(const hw_cluster *hw, const trc_gpu_op *op)
{
  bool compute = trc_class_compute_bound(op->kclass);
  hw_kernel k = {.kclass = trc_class_model(op->kclass), .dtype = op->dtype,
                 .flops = compute ? 1e9 : 0, .bytes = compute ? 0 : 1e9, .inner = op->gemm[3]};
  return hw_kernel_time(hw, &k) - hw_efficiency(hw)->launch_overhead;
}

static double rp_duration(rp_builder *b, const rp_gpu *g)
{
  const trc_gpu_op *op = &g_array_index(b->t->ops, trc_gpu_op, g->op);
  double d = (g->end - g->start) * 1e-6;
  const hw_cluster *base = b->o->base, *target = b->o->target;
  if (!target || target == base || (op->kind == TRC_OP_MEMCPY && op->copy != TRC_COPY_DTOD))
    return d;
  double lb = hw_efficiency(base)->launch_overhead, lt = hw_efficiency(target)->launch_overhead;
  double scale = rp_reference(target, op) / rp_reference(base, op);
  b->out->retimed++;
  return MAX(d - lb, 0.0) * scale + MIN(d, lb) * (lb > 0 ? lt / lb : 1.0);
}

/* ---- emitting ---------------------------------------------------------------------------------- */

static int rp_cmp_node(const void *a, const void *b)
{
  const rp_node *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  if (x->rank != y->rank)
    return x->rank - y->rank;
  return x->idx - y->idx;
}

/* Keeps the dependencies already emitted (in a trace's time order they all are; one that is
 * not is dropped and counted, never fatal). */
static uint32_t rp_deps(rp_builder *b, const uint32_t *cand, int n, uint32_t *out)
{
  uint32_t k = 0;
  for (int i = 0; i < n; i++) {
    if (cand[i] != UINT32_MAX)
      out[k++] = cand[i];
    else
      b->out->dropped_deps++;
  }
  return k;
}

static uint32_t rp_fixed(rp_builder *b, int slot, const char *name, cfg_kernel_class kc, double t,
                         const uint32_t *deps, uint32_t ndeps)
{
  uint32_t i = prog_compute(b->p, b->cls, name, kc, CFG_FP32, 0, 0, deps, ndeps);
  prog_op *op = prog_op_at(b->p, b->cls, i);
  op->stream = (uint8_t)slot;
  op->fixed_time = MAX(0.0, t);
  return i;
}

static void rp_emit_point(rp_builder *b, int j)
{
  const rp_point *pt = &g_array_index(b->points, rp_point, j);
  double next = j + 1 < (int)b->points->len ? g_array_index(b->points, rp_point, j + 1).ts : pt->ts;
  double t = (next - MAX(pt->ts, pt->wait_end)) * 1e-6;
  g_autofree uint32_t *cand = g_new(uint32_t, MAX(pt->nwait, 1));
  int n = 0;
  for (guint w = 0; pt->nwait && w < b->waits->len; w++) {
    const rp_wait *x = &g_array_index(b->waits, rp_wait, w);
    if (x->point == j)
      cand[n++] = b->gpu_op[x->gpu];
  }
  g_autofree uint32_t *deps = g_new(uint32_t, MAX(n, 1));
  uint32_t nd = rp_deps(b, cand, n, deps);
  const char *name = pt->call >= 0 ? g_array_index(b->t->calls, trc_call, pt->call).name
                                   : b->out->markers[pt->marker];
  b->cpu_op[j] = rp_fixed(b, RP_CPU_SLOT, name, CFG_KCLASS_OTHER, t, deps, nd);
  b->out->cpu_ops++;
}

static int rp_family(rp_builder *b, int group)
{
  if (group < 1 || group > b->max_group || b->family_of_group[group] < 0)
    group = b->p->nranks;
  return b->family_of_group[group];
}

static void rp_emit_gpu(rp_builder *b, int i, bool delay_only)
{
  const rp_gpu *g = &g_array_index(b->gpu, rp_gpu, i);
  const trc_gpu_op *op = &g_array_index(b->t->ops, trc_gpu_op, g->op);
  uint32_t cand[2];
  int nc = 0;
  if (g->point > 0)
    cand[nc++] = b->cpu_op[g->point - 1];
  if (g->cross >= 0)
    cand[nc++] = b->gpu_op[g->cross];
  uint32_t deps[2];
  uint32_t nd = rp_deps(b, cand, nc, deps);
  if (delay_only) { /* carries the op's dependencies; the op follows it on its stream */
    rp_fixed(b, g->slot, "delay", CFG_KCLASS_OTHER, b->o->host_only ? 0 : g->delay * 1e-6, deps, nd);
    b->out->delays++;
    return;
  }
  if (g->delay > 0)
    nd = 0;
  prog_coll coll;
  bool launched = op->call >= (int)b->c0;
  if (op->kclass == TRC_NCCL && !b->o->comm_measured && !b->o->host_only && launched &&
      op->comm_bytes > 0 && b->p->nranks > 1 &&
      trc_nccl_coll_prog((trc_nccl_coll)op->coll, &coll)) {
    b->gpu_op[i] = prog_comm(b->p, b->cls, (prog_stream)g->slot, op->name, coll,
                             rp_family(b, op->group_size), op->comm_bytes, deps, nd);
    b->out->collectives++;
    return;
  }
  b->out->fixed_comm += op->kclass == TRC_NCCL;
  b->gpu_op[i] = rp_fixed(b, g->slot, op->name, trc_class_model(op->kclass),
                          b->o->host_only ? 0 : rp_duration(b, g), deps, nd);
  prog_op *po = prog_op_at(b->p, b->cls, b->gpu_op[i]);
  po->dtype = (cfg_dtype)op->dtype;
  po->flops = op->flops;
  po->bytes = op->bytes;
  po->inner = op->gemm[3];
  po->rows = op->gemm[1];
  po->cols = op->gemm[2];
  b->out->gpu_ops++;
}

static void rp_emit(rp_builder *b)
{
  guint np = b->points->len, ng = b->gpu->len;
  GArray *nodes = g_array_sized_new(FALSE, FALSE, sizeof(rp_node), np + 2 * ng);
  double key = -INFINITY;
  for (guint j = 0; j < np; j++) { /* the chain keeps its order: keys never decrease */
    const rp_point *pt = &g_array_index(b->points, rp_point, j);
    key = MAX(key, MAX(pt->ts, pt->wait_end));
    rp_node n = {.key = key, .rank = 0, .idx = (int)j};
    g_array_append_val(nodes, n);
  }
  for (guint i = 0; i < ng; i++) {
    const rp_gpu *g = &g_array_index(b->gpu, rp_gpu, i);
    if (g->delay > 0) {
      rp_node d = {.key = g->start, .rank = 1, .idx = (int)i};
      g_array_append_val(nodes, d);
    }
    rp_node n = {.key = g->start, .rank = 2, .idx = (int)i};
    g_array_append_val(nodes, n);
  }
  g_array_sort(nodes, rp_cmp_node);
  b->cpu_op = g_new(uint32_t, MAX(np, 1u));
  b->gpu_op = g_new(uint32_t, MAX(ng, 1u));
  memset(b->cpu_op, 0xff, sizeof(uint32_t) * MAX(np, 1u));
  memset(b->gpu_op, 0xff, sizeof(uint32_t) * MAX(ng, 1u));
  for (guint k = 0; k < nodes->len; k++) {
    const rp_node *n = &g_array_index(nodes, rp_node, k);
    if (n->rank == 0)
      rp_emit_point(b, n->idx);
    else
      rp_emit_gpu(b, n->idx, n->rank == 1);
  }
  g_array_free(nodes, TRUE);
}

/* ---- one trace, one class ----------------------------------------------------------------------- */

static bool rp_window(rp_builder *b, GError **err)
{
  const trc_replay_options *o = b->o;
  if (!trc_step_range(b->t, o->first_step, o->last_step, &b->step0, &b->nsteps, err))
    return false;
  const trc_step *first = &g_array_index(b->t->steps, trc_step, b->step0);
  const trc_step *last = &g_array_index(b->t->steps, trc_step, b->step0 + b->nsteps - 1);
  b->t0 = first->ts;
  b->t1 = last->ts + last->dur;
  return true;
}

static void rp_collect_gpu(rp_builder *b)
{
  b->gpu = g_array_new(FALSE, FALSE, sizeof(rp_gpu));
  for (guint i = 0; i < b->t->ops->len; i++) {
    const trc_gpu_op *op = &g_array_index(b->t->ops, trc_gpu_op, i);
    if (!rp_in_window(b, op))
      continue;
    rp_gpu g = {.op = (int)i, .start = MAX(op->ts, b->t0), .end = MAX(op->ts + op->dur, b->t0)};
    g_array_append_val(b->gpu, g);
  }
}

static void rp_builder_clear(rp_builder *b)
{
  if (b->points)
    g_array_free(b->points, TRUE);
  if (b->gpu)
    g_array_free(b->gpu, TRUE);
  if (b->waits)
    g_array_free(b->waits, TRUE);
  g_free(b->point_of_call);
  g_free(b->cpu_op);
  g_free(b->gpu_op);
}

static bool rp_build_class(rp_builder *b, GError **err)
{
  if (!rp_window(b, err))
    return false;
  rp_chain(b);
  rp_collect_gpu(b);
  rp_gpu_causes(b);
  rp_sync_waits(b);
  rp_emit(b);
  return true;
}

/* ---- the program --------------------------------------------------------------------------------- */

/* One family per group size: ranks in consecutive blocks (the trace names only this rank's
 * group, if any; consecutive blocks are what torch.distributed's new_group usually gets). */
static int *rp_families(prog_program *p, trc_trace *const *traces, int ntraces, int *max_group)
{
  int n = p->nranks;
  int *family_of = g_new(int, n + 1);
  for (int g = 0; g <= n; g++)
    family_of[g] = -1;
  *max_group = n;
  for (int k = 0; k <= ntraces; k++) {
    const trc_trace *t = traces[MIN(k, ntraces - 1)];
    for (guint i = 0; i < t->ops->len; i++) {
      int g = k == ntraces ? n : g_array_index(t->ops, trc_gpu_op, i).group_size;
      if (g < 2 || g > n || n % g || family_of[g] >= 0)
        continue;
      g_autofree char *name = g_strdup_printf("group-of-%d", g);
      int f = prog_family_add(p, name, PROG_DIM_DP);
      family_of[g] = f;
      for (int r = 0; r < n; r++) {
        g_autofree int *ranks = g_new(int, g);
        for (int m = 0; m < g; m++)
          ranks[m] = r / g * g + m;
        prog_family_set(p, f, r, prog_group_add(p, ranks, g));
      }
    }
  }
  if (family_of[n] < 0 && n == 1) { /* a single GPU: every "collective" is local */
    int f = prog_family_add(p, "self", PROG_DIM_DP);
    int self = 0;
    prog_family_set(p, f, 0, prog_group_add(p, &self, 1));
    family_of[1] = f;
  }
  return family_of;
}

static bool rp_ranks(trc_trace *const *traces, int ntraces, int nranks, int *class_of, GError **err)
{
  for (int r = 0; r < nranks; r++)
    class_of[r] = 0;
  for (int k = 1; k < ntraces; k++) {
    int r = traces[k]->rank;
    if (r < 0 || r >= nranks || class_of[r] != 0 || r == traces[0]->rank) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s: rank %d is missing, out of 0..%d or given twice (one trace per rank)",
                  traces[k]->path, r, nranks - 1);
      return false;
    }
    class_of[r] = k;
  }
  return true;
}

/* Two markers per step: its start and its end (steps need not touch: the host may work between
 * them). */
static void rp_markers(trc_replay *out, const trc_trace *t, guint step0, guint nsteps)
{
  out->nsteps = (int)nsteps;
  out->measured = g_new(double, nsteps);
  out->numbers = g_new(int, nsteps);
  out->markers = g_new0(char *, 2 * nsteps + 1);
  for (guint k = 0; k < nsteps; k++) {
    const trc_step *s = &g_array_index(t->steps, trc_step, step0 + k);
    out->measured[k] = s->dur * 1e-6;
    out->numbers[k] = s->number;
    out->markers[2 * k] = g_strdup_printf("ProfilerStep#%d", s->number);
    out->markers[2 * k + 1] = g_strdup_printf("end of ProfilerStep#%d", s->number);
  }
}

/* The collectives of every class must meet: same kinds and sizes, in the same order, on each
 * group size (otherwise the traces cover different windows of the job). */
static bool rp_check_collectives(const prog_program *p, trc_trace *const *traces, GError **err)
{
  const prog_class *a = prog_class_at(p, 0);
  for (guint c = 1; c < p->classes->len; c++) {
    const prog_class *b = prog_class_at(p, (int)c);
    guint i = 0, j = 0;
    for (guint k = 1;; k++, i++, j++) {
      while (i < a->ops->len && g_array_index(a->ops, prog_op, i).kind != PROG_COMM)
        i++;
      while (j < b->ops->len && g_array_index(b->ops, prog_op, j).kind != PROG_COMM)
        j++;
      if (i >= a->ops->len && j >= b->ops->len)
        break;
      const prog_op *x = i < a->ops->len ? &g_array_index(a->ops, prog_op, i) : NULL;
      const prog_op *y = j < b->ops->len ? &g_array_index(b->ops, prog_op, j) : NULL;
      if (x && y && x->coll == y->coll && x->family == y->family)
        continue;
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s and %s do not run the same collectives in the same order (collective %u: %s "
                  "vs %s): replay them one at a time",
                  traces[0]->path, traces[c]->path, k, x ? prog_coll_name(x->coll) : "none",
                  y ? prog_coll_name(y->coll) : "none");
      return false;
    }
  }
  return true;
}

bool trc_replay_build(trc_trace *const *traces, int ntraces, const trc_replay_options *o,
                      trc_replay *out, GError **err)
{
  memset(out, 0, sizeof *out);
  const trc_trace *t0 = traces[0];
  int nranks = o->nranks > 0 ? o->nranks : MAX(t0->world_size, 1);
  prog_program *p = prog_new(nranks);
  g_autofree int *class_of = g_new(int, nranks);
  bool ok = rp_ranks(traces, ntraces, nranks, class_of, err);
  int max_group = 0;
  g_autofree int *family_of = ok ? rp_families(p, traces, ntraces, &max_group) : NULL;
  for (int k = 0; ok && k < ntraces; k++) {
    g_autofree char *name = g_path_get_basename(traces[k]->path);
    rp_builder b = {.t = traces[k], .o = o, .out = out, .p = p, .family_of_group = family_of,
                    .max_group = max_group};
    b.cls = prog_class_add(p, name);
    ok = rp_window(&b, err);
    if (ok && k == 0)
      rp_markers(out, traces[0], b.step0, b.nsteps);
    if (ok && k > 0 && (int)b.nsteps != out->nsteps) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s has %u of the %d ProfilerSteps of %s",
                  traces[k]->path, b.nsteps, out->nsteps, t0->path);
      ok = false;
    }
    ok = ok && rp_build_class(&b, err);
    rp_builder_clear(&b);
  }
  for (int r = 0; ok && r < nranks; r++)
    prog_rank_set_class(p, r, class_of[r]);
  if (ok) {
    prog_finalize(p);
    g_autofree char *base = g_path_get_basename(t0->path);
    p->meta.description = g_strdup_printf("replay of %s (%d step%s, %d rank%s)", base, out->nsteps,
                                          out->nsteps == 1 ? "" : "s", nranks, nranks == 1 ? "" : "s");
    ok = rp_check_collectives(p, traces, err);
  }
  out->program = p;
  if (!ok)
    trc_replay_clear(out);
  return ok;
}

void trc_replay_clear(trc_replay *r)
{
  prog_free(r->program);
  g_free(r->measured);
  g_free(r->numbers);
  g_strfreev(r->markers);
  memset(r, 0, sizeof *r);
}

bool trc_replay_step_times(const trc_replay *r, const eng_result *res, double *out, GError **err)
{
  int n = 2 * r->nsteps, rank = prog_class_at(r->program, 0)->rep;
  g_autofree double *at = g_new(double, MAX(n, 1));
  for (int k = 0; k < n; k++)
    at[k] = NAN;
  for (guint i = 0; res->events && i < res->events->len; i++) {
    const eng_event *e = &g_array_index(res->events, eng_event, i);
    if (e->rank != rank || e->kind != PROG_COMPUTE || e->stream != RP_CPU_SLOT)
      continue;
    for (int k = 0; k < n; k++)
      if (isnan(at[k]) && strcmp(e->name, r->markers[k]) == 0)
        at[k] = e->start;
  }
  for (int k = 0; k < r->nsteps; k++) {
    if (isnan(at[2 * k]) || isnan(at[2 * k + 1])) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                  "replay: no step markers in the engine's events (run it with tracing on)");
      return false;
    }
    out[k] = at[2 * k + 1] - at[2 * k];
  }
  return true;
}
