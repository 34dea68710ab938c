/* Calibration from real kernel traces. What a trace measures directly is kept apart from what
 * it only bounds:
 *
 * - per kernel: a fixed cost (the shortest kernels take the 10th-percentile duration, and a
 *   queued kernel starts a gap after its predecessor): launch_overhead = floor + gap;
 * - streaming kernels whose bytes are known (memsets and device copies from the trace's own
 *   byte counts, elementwise kernels from the shapes of their CPU op): the median fraction of
 *   HBM bandwidth reached by those of 1 MiB or more is efficiency.memory;
 * - GEMMs whose shapes were recorded (record_shapes): flops.gemm and gemm_k_half fitted to
 *   their times with the kernel cost model (the dominant data type only);
 * - collectives: an NCCL kernel's duration is its transfer plus the wait for its slowest peer,
 *   so a duration bounds the transfer from above only. Per collective and group size, the
 *   lower envelope of the (size, duration) points is the transfer time; the NCCL parameters
 *   are fitted to the envelopes (at the sizes seen) with the collective model, each held near
 *   its prior as in the nccl-tests fit (fit.c). */
#include "calibration/calibration_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the lower envelope -------------------------------------------------------------------- */

typedef struct {
  double x, y;
} calib_xy;

static int calib_cmp_xy(const void *a, const void *b)
{
  const calib_xy *p = a, *q = b;
  if (p->x != q->x)
    return p->x < q->x ? -1 : 1;
  return p->y < q->y ? -1 : p->y > q->y;
}

/* Cross product of (o->a) x (o->b): <= 0 when b is not to the left of o->a. */
static double calib_cross(calib_xy o, calib_xy a, calib_xy b)
{
  return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
}

static bool calib_below_all(const calib_xy *p, int n, double a, double b)
{
  for (int i = 0; i < n; i++)
    if (a + b * p[i].x > p[i].y * (1 + 1e-12) + 1e-300)
      return false;
  return true;
}

bool calib_lower_envelope(const double *size, const double *time, int n, double *latency,
                          double *per_byte)
{
  if (n <= 0)
    return false;
  g_autofree calib_xy *p = g_new(calib_xy, n);
  g_autofree calib_xy *hull = g_new(calib_xy, n);
  double mean = 0, tmin = INFINITY;
  for (int i = 0; i < n; i++) {
    p[i] = (calib_xy){size[i], time[i]};
    mean += size[i] / n;
    tmin = MIN(tmin, time[i]);
  }
  qsort(p, (size_t)n, sizeof *p, calib_cmp_xy);
  int h = 0; /* Andrew's monotone chain, lower half */
  for (int i = 0; i < n; i++) {
    if (h && p[i].x == hull[h - 1].x)
      continue; /* the fastest of equal sizes came first */
    while (h >= 2 && calib_cross(hull[h - 2], hull[h - 1], p[i]) <= 0)
      h--;
    hull[h++] = p[i];
  }
  /* candidates: the hull's edges, the flat line at the fastest time, the line through the
   * origin under every point; the best feasible one at the mean size wins */
  double best_a = tmin, best_b = 0, best = tmin;
  double origin = INFINITY;
  for (int i = 0; i < n; i++)
    if (p[i].x > 0)
      origin = MIN(origin, p[i].y / p[i].x);
  if (isfinite(origin) && calib_below_all(p, n, 0, origin) && origin * mean > best) {
    best_a = 0;
    best_b = origin;
    best = origin * mean;
  }
  for (int i = 0; i + 1 < h; i++) {
    double b = (hull[i + 1].y - hull[i].y) / (hull[i + 1].x - hull[i].x);
    double a = hull[i].y - b * hull[i].x;
    if (b < 0 || a < 0 || !calib_below_all(p, n, a, b) || a + b * mean <= best)
      continue;
    best_a = a;
    best_b = b;
    best = a + b * mean;
  }
  *latency = best_a;
  *per_byte = best_b;
  return true;
}

/* ---- points from the traces -------------------------------------------------------------- */

typedef struct {
  double t0, t1; /* microseconds */
} calib_window;

static bool calib_window_of(const trc_trace *t, int first, int last, calib_window *w, GError **err)
{
  if (t->steps->len == 0 && first < 0 && last < 0) { /* no ProfilerStep: the whole trace */
    *w = (calib_window){-INFINITY, INFINITY};
    return true;
  }
  guint from, n;
  if (!trc_step_range(t, first, last, &from, &n, err))
    return false;
  const trc_step *a = &g_array_index(t->steps, trc_step, from);
  const trc_step *b = &g_array_index(t->steps, trc_step, from + n - 1);
  *w = (calib_window){a->ts, b->ts + b->dur};
  return true;
}

typedef struct {
  prog_coll op;
  int group;
  GArray *size, *time; /* double */
} calib_kind;

static calib_kind *calib_kind_of(GPtrArray *kinds, prog_coll op, int group)
{
  for (guint i = 0; i < kinds->len; i++) {
    calib_kind *k = g_ptr_array_index(kinds, i);
    if (k->op == op && k->group == group)
      return k;
  }
  if (kinds->len >= CALIB_MAX_ENVELOPES)
    return NULL;
  calib_kind *k = g_new0(calib_kind, 1);
  k->op = op;
  k->group = group;
  k->size = g_array_new(FALSE, FALSE, sizeof(double));
  k->time = g_array_new(FALSE, FALSE, sizeof(double));
  g_ptr_array_add(kinds, k);
  return k;
}

static void calib_kind_free(gpointer p)
{
  calib_kind *k = p;
  g_array_free(k->size, TRUE);
  g_array_free(k->time, TRUE);
  g_free(k);
}

static void calib_collect_nccl(const trc_trace *t, const calib_window *w, GPtrArray *kinds)
{
  for (guint i = 0; i < t->ops->len; i++) {
    const trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
    prog_coll coll;
    if (op->kclass != TRC_NCCL || op->ts < w->t0 || op->ts >= w->t1 || op->comm_bytes <= 0 ||
        op->group_size < 2 || op->dur <= 0 || !trc_nccl_coll_prog((trc_nccl_coll)op->coll, &coll))
      continue;
    calib_kind *k = calib_kind_of(kinds, coll, op->group_size);
    if (!k)
      continue;
    double s = op->comm_bytes, d = op->dur * 1e-6;
    g_array_append_val(k->size, s);
    g_array_append_val(k->time, d);
  }
}

/* ---- NCCL: the fit to the envelopes --------------------------------------------------------- */

typedef struct {
  cfg_cluster *c;
  int gpus;
  int nkinds;
  calib_target target[CALIB_MAX_ENVELOPES];
  calib_table table[CALIB_MAX_ENVELOPES]; /* the envelope at each distinct size */
  double *pred;
} calib_env_fit;

/* Median |log(model / envelope)| of each kind, averaged over kinds. */
static double calib_env_loss(void *ctx)
{
  calib_env_fit *f = ctx;
  double sum = 0;
  for (int k = 0; k < f->nkinds; k++) {
    const calib_table *tab = &f->table[k];
    if (!calib_predict(f->c, &f->target[k], tab, f->pred, NULL))
      return INFINITY;
    double e = 0;
    for (guint i = 0; i < tab->points->len; i++)
      e += fabs(log(f->pred[i] / g_array_index(tab->points, calib_point, i).time));
    sum += e / tab->points->len;
  }
  return sum / MAX(f->nkinds, 1);
}

static double calib_env_errors(calib_env_fit *f, int k)
{
  const calib_table *tab = &f->table[k];
  if (!calib_predict(f->c, &f->target[k], tab, f->pred, NULL))
    return NAN;
  g_autofree double *e = g_new(double, tab->points->len);
  for (guint i = 0; i < tab->points->len; i++)
    e[i] = fabs(f->pred[i] / g_array_index(tab->points, calib_point, i).time - 1);
  return calib_median(e, (int)tab->points->len);
}

/* The envelope of one kind, and a table of its value at each distinct size. */
static void calib_envelope_of(const calib_kind *k, calib_envelope *e, calib_table *tab)
{
  const double *s = (const double *)k->size->data, *t = (const double *)k->time->data;
  int n = (int)k->size->len;
  double a = 0, b = 0;
  calib_lower_envelope(s, t, n, &a, &b);
  *e = (calib_envelope){.op = k->op, .group = k->group, .points = n, .latency = a,
                        .bandwidth = b > 0 ? 1 / b : 0, .min_size = INFINITY};
  g_autofree double *excess = g_new(double, n);
  tab->points = g_array_new(FALSE, FALSE, sizeof(calib_point));
  for (int i = 0; i < n; i++) {
    excess[i] = t[i] / (a + b * s[i]) - 1;
    e->min_size = MIN(e->min_size, s[i]);
    e->max_size = MAX(e->max_size, s[i]);
    bool seen = false;
    for (guint j = 0; j < tab->points->len && !seen; j++)
      seen = g_array_index(tab->points, calib_point, j).size == s[i];
    if (!seen) {
      calib_point p = {.size = s[i], .time = a + b * s[i]};
      g_array_append_val(tab->points, p);
    }
  }
  e->sizes = (int)tab->points->len;
  e->waiting = calib_median(excess, n);
}

/* Keeps the parameters the envelopes constrain: those whose change by a factor 1.5 moves the
 * error itself (calib_search_keep_sensitive also counts the prior's penalty, which any change
 * moves). */
static void calib_keep_constrained(calib_search *s)
{
  double base = s->loss(s->ctx);
  int kept = 0;
  for (int i = 0; i < s->nparams; i++) {
    double *v = s->params[i].slot, was = *v;
    *v = s->params[i].fraction ? was / 1.5 : was * 1.5;
    double moved = s->loss(s->ctx);
    *v = was;
    if (fabs(moved - base) > 1e-6 * MAX(base, 1e-9))
      s->params[kept++] = s->params[i];
  }
  s->nparams = kept;
}

static const char *const calib_trace_nccl_keys[] = {
    "link_efficiency", "p2p_efficiency", "nvls_efficiency", "base_latency", "hop_latency", NULL};

static void calib_fit_envelopes(cfg_cluster *c, GPtrArray *kinds, int gpus, calib_trace_report *rep)
{
  calib_env_fit f = {.c = c, .gpus = gpus, .nkinds = (int)kinds->len};
  guint most = 1;
  for (int k = 0; k < f.nkinds; k++) {
    const calib_kind *kind = g_ptr_array_index(kinds, k);
    calib_envelope_of(kind, &rep->env[k], &f.table[k]);
    f.target[k] = (calib_target){.op = kind->op, .gpus = MAX(gpus, kind->group), .group = kind->group,
                                 .engine = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
    most = MAX(most, f.table[k].points->len);
  }
  rep->nenvelopes = f.nkinds;
  f.pred = g_new(double, most);
  for (int k = 0; k < f.nkinds; k++)
    rep->env[k].before = calib_env_errors(&f, k);
  calib_search s = {.prior_weight = 0.02, .loss = calib_env_loss, .ctx = &f};
  calib_nccl_candidates(&s, &c->nccl, (char *const *)calib_trace_nccl_keys, 0.05);
  calib_keep_constrained(&s);
  calib_search_run(&s, 8, 400, 600);
  for (int k = 0; k < f.nkinds; k++)
    rep->env[k].after = calib_env_errors(&f, k);
  rep->nccl_params = s.nparams;
  rep->evaluations = s.evals;
  for (int i = 0; i < s.nparams; i++)
    g_strlcpy(rep->nccl_names[i], s.params[i].name, sizeof rep->nccl_names[i]);
  for (int k = 0; k < f.nkinds; k++)
    calib_table_clear(&f.table[k]);
  g_free(f.pred);
}

/* ---- kernels --------------------------------------------------------------------------------- */

static bool calib_in(const calib_window *w, const trc_gpu_op *op)
{
  return op->ts >= w->t0 && op->ts < w->t1;
}

/* Floor: 10th percentile of compute kernel durations. Gap: median start - previous end of
 * kernels queued behind their stream's previous op (launched before it ended), under 50 us. */
static void calib_fit_launch(trc_trace *const *traces, int n, const calib_window *w,
                             calib_trace_report *rep)
{
  GArray *dur = g_array_new(FALSE, FALSE, sizeof(double));
  GArray *gap = g_array_new(FALSE, FALSE, sizeof(double));
  for (int k = 0; k < n; k++) {
    const trc_trace *t = traces[k];
    g_autoptr(GHashTable) last = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = 0; i < t->ops->len; i++) {
      const trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
      if (!calib_in(&w[k], op))
        continue;
      const trc_gpu_op *prev = g_hash_table_lookup(last, GINT_TO_POINTER(op->stream));
      g_hash_table_insert(last, GINT_TO_POINTER(op->stream), (gpointer)op);
      if (op->kind != TRC_OP_KERNEL || op->kclass == TRC_NCCL)
        continue;
      double d = op->dur * 1e-6;
      g_array_append_val(dur, d);
      if (!prev || op->call < 0)
        continue;
      double launched = g_array_index(t->calls, trc_call, op->call).ts, end = prev->ts + prev->dur;
      double g = (op->ts - end) * 1e-6;
      if (launched < end && g >= 0 && g < 50e-6)
        g_array_append_val(gap, g);
    }
  }
  rep->kernels = (int)dur->len;
  if (dur->len) {
    calib_median((double *)dur->data, (int)dur->len); /* sorts */
    rep->kernel_floor = g_array_index(dur, double, (guint)(0.1 * (dur->len - 1)));
  }
  rep->launch_gap = gap->len ? calib_median((double *)gap->data, (int)gap->len) : 0;
  g_array_free(dur, TRUE);
  g_array_free(gap, TRUE);
}

/* The median of the x of weighted points (weights in y): half the weight lies below it. Long
 * kernels reach the bandwidth a short one's fixed cost hides. */
static double calib_weighted_median(GArray *pts)
{
  g_array_sort(pts, calib_cmp_xy);
  double total = 0, acc = 0;
  for (guint i = 0; i < pts->len; i++)
    total += g_array_index(pts, calib_xy, i).y;
  for (guint i = 0; i < pts->len; i++) {
    acc += g_array_index(pts, calib_xy, i).y;
    if (acc >= total / 2)
      return g_array_index(pts, calib_xy, i).x;
  }
  return NAN;
}

/* Bytes a kernel streams through HBM when the trace says (memsets write them, device copies
 * read and write them) or the shapes of its CPU op do (elementwise, reductions), else 0. */
static double calib_stream_bytes(const trc_gpu_op *op)
{
  if (op->kind == TRC_OP_MEMSET)
    return op->bytes;
  if (op->kind == TRC_OP_MEMCPY)
    return op->copy == TRC_COPY_DTOD ? 2 * op->bytes : 0;
  return op->kclass == TRC_ELEMENTWISE || op->kclass == TRC_REDUCTION ? op->bytes : 0;
}

static void calib_fit_memory(cfg_cluster *c, trc_trace *const *traces, int n,
                             const calib_window *w, calib_trace_report *rep)
{
  GArray *eff = g_array_new(FALSE, FALSE, sizeof(calib_xy)); /* fraction, weight */
  for (int k = 0; k < n; k++)
    for (guint i = 0; i < traces[k]->ops->len; i++) {
      const trc_gpu_op *op = &g_array_index(traces[k]->ops, trc_gpu_op, i);
      double bytes = calib_stream_bytes(op);
      if (!calib_in(&w[k], op) || bytes < 1048576 || op->dur <= 0)
        continue;
      calib_xy e = {bytes / (op->dur * 1e-6) / c->gpu.memory_bandwidth, op->dur};
      if (e.x < 1.5) /* a shape estimate above the HBM peak is a wrong estimate, not a fast kernel */
        g_array_append_val(eff, e);
    }
  rep->memory_points = (int)eff->len;
  if (eff->len >= 5) {
    rep->memory_efficiency = CLAMP(calib_weighted_median(eff), 0.05, 0.99);
    c->gpu.efficiency.memory_efficiency = rep->memory_efficiency;
  }
  g_array_free(eff, TRUE);
}

typedef struct {
  cfg_cluster *c;
  cfg_dtype dtype;
  GArray *pts; /* calib_point: gemm[4], time (seconds, kernels + their gaps) */
  double gap;
} calib_gemm_trace;

static double calib_gemm_trace_loss(void *ctx)
{
  calib_gemm_trace *f = ctx;
  hw_cluster *hw = hw_cluster_new(f->c);
  double dt = cfg_dtype_bytes(f->dtype), sum = 0, wsum = 0;
  for (guint i = 0; i < f->pts->len; i++) {
    const calib_point *p = &g_array_index(f->pts, calib_point, i);
    const double *g = p->gemm;
    hw_kernel k = {.kclass = CFG_KCLASS_GEMM, .dtype = f->dtype, .flops = 2 * g[0] * g[1] * g[2] * g[3],
                   .bytes = dt * g[0] * (g[1] * g[3] + g[3] * g[2] + g[1] * g[2]), .inner = g[3],
                   .rows = g[1], .cols = g[2]};
    double e = log(hw_kernel_time(hw, &k) / p->time);
    sum += p->time * fabs(e); /* the long GEMMs matter: weigh by time */
    wsum += p->time;
  }
  hw_cluster_free(hw);
  return wsum > 0 ? sum / wsum : 0;
}

/* GEMM ops of known shape: the kernels one CPU op launched, summed (a split-K GEMM runs two). */
static void calib_gemm_points(trc_trace *const *traces, int n, const calib_window *w,
                              calib_gemm_trace *f)
{
  double by_dtype[CFG_NDTYPES] = {0};
  for (int k = 0; k < n; k++)
    for (guint i = 0; i < traces[k]->ops->len; i++) {
      const trc_gpu_op *op = &g_array_index(traces[k]->ops, trc_gpu_op, i);
      if (op->kclass == TRC_GEMM && op->flops > 0 && calib_in(&w[k], op))
        by_dtype[op->dtype] += op->dur;
    }
  f->dtype = CFG_FP32;
  for (int d = 0; d < CFG_NDTYPES; d++)
    if (by_dtype[d] > by_dtype[f->dtype])
      f->dtype = (cfg_dtype)d;
  for (int k = 0; k < n; k++) {
    g_autoptr(GHashTable) at = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = 0; i < traces[k]->ops->len; i++) {
      const trc_gpu_op *op = &g_array_index(traces[k]->ops, trc_gpu_op, i);
      if (op->kclass != TRC_GEMM || op->flops <= 0 || op->dtype != f->dtype || !calib_in(&w[k], op))
        continue;
      guint slot = GPOINTER_TO_UINT(g_hash_table_lookup(at, GINT_TO_POINTER(op->shape_op)));
      if (!slot) {
        calib_point p = {.size = op->flops};
        memcpy(p.gemm, op->gemm, sizeof p.gemm);
        g_array_append_val(f->pts, p);
        slot = f->pts->len;
        g_hash_table_insert(at, GINT_TO_POINTER(op->shape_op), GUINT_TO_POINTER(slot));
      }
      g_array_index(f->pts, calib_point, slot - 1).time += op->dur * 1e-6 + f->gap;
    }
  }
}

static void calib_fit_gemms(cfg_cluster *c, trc_trace *const *traces, int n, const calib_window *w,
                            calib_trace_report *rep)
{
  calib_gemm_trace f = {.c = c, .pts = g_array_new(FALSE, TRUE, sizeof(calib_point)), .gap = rep->launch_gap};
  calib_gemm_points(traces, n, w, &f);
  rep->gemm_points = (int)f.pts->len;
  rep->gemm_dtype = f.dtype;
  if (f.pts->len >= CALIB_TRACE_MIN_GEMMS) {
    cfg_efficiency *e = &c->gpu.efficiency;
    rep->gemm_before = calib_gemm_trace_loss(&f);
    /* few shapes for two parameters: the prior keeps the K ramp unless the data insists */
    calib_search s = {.prior_weight = 1e-3, .loss = calib_gemm_trace_loss, .ctx = &f};
    calib_search_add(&s, &e->flops_efficiency[CFG_KCLASS_GEMM], true, 0.05, 0.99, "efficiency.flops.gemm");
    calib_search_add(&s, &e->gemm_k_half, false, 1, 1e5, "efficiency.gemm_k_half");
    calib_search_run(&s, 4, 300, 300);
    rep->gemm_after = calib_gemm_trace_loss(&f);
  }
  g_array_free(f.pts, TRUE);
}

/* ---- the whole fit ---------------------------------------------------------------------------- */

static void calib_fitted(calib_trace_report *rep, const char *key)
{
  int n = 0;
  while (rep->fitted[n])
    n++;
  if (n < 2 * CALIB_MAX_PARAMS)
    rep->fitted[n] = g_strdup(key);
}

bool calib_fit_trace(cfg_cluster *c, trc_trace *const *traces, int ntraces, int first_step,
                     int last_step, calib_trace_report *rep, GError **err)
{
  memset(rep, 0, sizeof *rep);
  g_autofree calib_window *w = g_new(calib_window, ntraces);
  for (int k = 0; k < ntraces; k++)
    if (!calib_window_of(traces[k], first_step, last_step, &w[k], err))
      return false;
  calib_fit_launch(traces, ntraces, w, rep);
  if (rep->kernels >= CALIB_TRACE_MIN_KERNELS) {
    c->gpu.efficiency.launch_overhead = rep->kernel_floor + rep->launch_gap;
    calib_fitted(rep, "efficiency.launch_overhead");
  }
  calib_fit_memory(c, traces, ntraces, w, rep);
  if (rep->memory_efficiency > 0)
    calib_fitted(rep, "efficiency.memory");
  calib_fit_gemms(c, traces, ntraces, w, rep);
  if (rep->gemm_points >= CALIB_TRACE_MIN_GEMMS) {
    calib_fitted(rep, "efficiency.flops.gemm");
    calib_fitted(rep, "efficiency.gemm_k_half");
  }
  GPtrArray *kinds = g_ptr_array_new_with_free_func(calib_kind_free);
  int gpus = 2;
  for (int k = 0; k < ntraces; k++) {
    calib_collect_nccl(traces[k], &w[k], kinds);
    gpus = MAX(gpus, traces[k]->world_size);
  }
  if (kinds->len && gpus > cfg_cluster_gpus(c)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "the traces' job has %d ranks, the cluster %d GPUs",
                gpus, cfg_cluster_gpus(c));
    g_ptr_array_free(kinds, TRUE);
    return false;
  }
  for (guint i = kinds->len; i-- > 0;) /* an envelope needs kernels that did not wait */
    if (((calib_kind *)g_ptr_array_index(kinds, i))->size->len < CALIB_TRACE_MIN_COLLECTIVES) {
      rep->skipped_kinds++;
      g_ptr_array_remove_index(kinds, i);
    }
  if (kinds->len)
    calib_fit_envelopes(c, kinds, gpus, rep);
  for (int i = 0; i < rep->nccl_params; i++) {
    g_autofree char *key = g_strdup_printf("nccl.%s", rep->nccl_names[i]);
    calib_fitted(rep, key);
  }
  g_ptr_array_free(kinds, TRUE);
  return true;
}

void calib_trace_report_clear(calib_trace_report *rep)
{
  for (int i = 0; rep->fitted[i]; i++)
    g_free(rep->fitted[i]);
  memset(rep, 0, sizeof *rep);
}

/* ---- per-kernel table ------------------------------------------------------------------------ */

typedef struct {
  const char *name;
  trc_class kclass;
  GArray *dur;      /* seconds */
  double flops, bytes; /* summed where known */
  double known_time;   /* time of the kernels whose FLOPs or bytes are known */
} calib_kstat;

static void calib_kstat_free(gpointer p)
{
  calib_kstat *k = p;
  g_array_free(k->dur, TRUE);
  g_free(k);
}

static void calib_kstat_add(GHashTable *by_name, const trc_gpu_op *op)
{
  calib_kstat *k = g_hash_table_lookup(by_name, op->name);
  if (!k) {
    k = g_new0(calib_kstat, 1);
    k->name = op->name;
    k->kclass = op->kclass;
    k->dur = g_array_new(FALSE, FALSE, sizeof(double));
    g_hash_table_insert(by_name, (gpointer)op->name, k);
  }
  double d = op->dur * 1e-6, b = calib_stream_bytes(op);
  g_array_append_val(k->dur, d);
  if (op->flops > 0 || b > 0) {
    k->flops += op->flops;
    k->bytes += b;
    k->known_time += d;
  }
}

static int calib_cmp_kstat(gconstpointer a, gconstpointer b)
{
  double x = 0, y = 0;
  const calib_kstat *p = *(calib_kstat *const *)a, *q = *(calib_kstat *const *)b;
  for (guint i = 0; i < p->dur->len; i++)
    x += g_array_index(p->dur, double, i);
  for (guint i = 0; i < q->dur->len; i++)
    y += g_array_index(q->dur, double, i);
  return x > y ? -1 : x < y;
}

static void calib_csv_row(GString *o, const calib_kstat *k, double peak_bw)
{
  double total = 0, fastest = INFINITY;
  for (guint i = 0; i < k->dur->len; i++) {
    total += g_array_index(k->dur, double, i);
    fastest = MIN(fastest, g_array_index(k->dur, double, i));
  }
  double median = calib_median((double *)k->dur->data, (int)k->dur->len);
  g_autofree char *name = trc_short_name(k->name);
  g_strdelimit(name, ",\"", ';');
  g_string_append_printf(o, "\"%s\",%s,%u,%.3f,%.3f,%.3f", name, trc_class_name(k->kclass),
                         k->dur->len, total * 1e6, median * 1e6, fastest * 1e6);
  if (k->flops > 0)
    g_string_append_printf(o, ",%.2f", k->flops / k->known_time / 1e12);
  else
    g_string_append(o, ",");
  if (k->bytes > 0)
    g_string_append_printf(o, ",%.1f,%.3f\n", k->bytes / k->known_time / 1e9,
                           k->bytes / k->known_time / peak_bw);
  else
    g_string_append(o, ",,\n");
}

bool calib_trace_kernels_csv(const char *path, trc_trace *const *traces, int ntraces,
                             const cfg_cluster *c, GError **err)
{
  GHashTable *by_name = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, calib_kstat_free);
  for (int k = 0; k < ntraces; k++)
    for (guint i = 0; i < traces[k]->ops->len; i++)
      calib_kstat_add(by_name, &g_array_index(traces[k]->ops, trc_gpu_op, i));
  GPtrArray *rows = g_ptr_array_new();
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, by_name);
  while (g_hash_table_iter_next(&it, &key, &value))
    g_ptr_array_add(rows, value);
  g_ptr_array_sort(rows, calib_cmp_kstat);
  GString *o = g_string_new("kernel,class,count,total_us,median_us,fastest_us,achieved_tflops,"
                            "achieved_GBps,fraction_of_hbm\n");
  for (guint i = 0; i < rows->len; i++)
    calib_csv_row(o, g_ptr_array_index(rows, i), c->gpu.memory_bandwidth);
  bool ok = cfg_write_text("--kernels", path, o, err);
  g_string_free(o, TRUE);
  g_ptr_array_free(rows, TRUE);
  g_hash_table_destroy(by_name);
  return ok;
}
