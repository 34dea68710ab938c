/* Shared engine parts: the entry point, compute costs, schedules and the step breakdown. */
#include "engine/engine_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *eng_kind_name(eng_kind k)
{
  return k == ENG_DES ? "des" : "analytic";
}

bool eng_kind_parse(const char *name, eng_kind *out, GError **err)
{
  if (strcmp(name, "des") == 0)
    *out = ENG_DES;
  else if (strcmp(name, "analytic") == 0)
    *out = ENG_ANALYTIC;
  else {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--engine: expected des or analytic, got '%s'",
                name);
    return false;
  }
  return true;
}

double eng_kernel_time(const hw_cluster *hw, const prog_op *op)
{
  if (op->fixed_time >= 0)
    return op->fixed_time;
  g_assert(op->tmpl < 0); /* macros go through eng_op_duration */
  hw_kernel k = {.kclass = op->kclass, .dtype = op->dtype, .flops = op->flops, .bytes = op->bytes,
                 .inner = op->inner, .rows = op->rows, .cols = op->cols, .attn = op->attn,
                 .split_rows = op->split_rows, .split_cols = op->split_cols,
                 .sms_held = op->sms_held};
  double gpu = op->count * hw_kernel_time(hw, &k);
  /* a blocking launch returns when its kernel ends, so the next launch starts only then: host
   * and GPU time add up, kernel by kernel */
  if (hw_config(hw)->node.cpu.launch_blocking)
    gpu += eng_launches(op) * hw_efficiency(hw)->host_dispatch;
  return gpu;
}

double eng_queue_dispatch(const hw_cluster *hw)
{
  return hw_config(hw)->node.cpu.launch_blocking ? 0 : hw_efficiency(hw)->host_dispatch;
}

double eng_queue_end(double ready, double first, double last, double n, double t)
{
  return MAX(MAX(ready, first) + n * t, last + t);
}

double eng_launches(const prog_op *op)
{
  /* host_dispatch is the time of a modelled kernel, which stands for an op's several launches
   * (fitted on Megatron-LM's CI); charged as much per collective, the CI's TP 2-4 and CP 2 runs
   * came out 15-25 points slow (validation/README.md): a collective costs only the calls its
   * framework makes to issue it (host_ops, counted from the source; none unless the workload
   * says so) */
  if (op->kind == PROG_COMM)
    return op->count * op->host_ops / PROG_HOST_OPS_PER_KERNEL;
  return op->kind == PROG_COMPUTE && op->fixed_time < 0 && !op->hostless ? op->count : 0;
}

double eng_issue_lead(const prog_op *op)
{
  double n = eng_launches(op);
  if (!(n > 0))
    return -1;
  /* a compute op's first kernel is issued n - 1 launches before its last; a collective's
   * calls come before it and it starts once they are done */
  return op->kind == PROG_COMM ? 0 : n - 1;
}

double eng_compute_time(const hw_cluster *hw, const prog_op *op)
{
  double gpu = eng_kernel_time(hw, op), hd = eng_queue_dispatch(hw), n = eng_launches(op);
  if (!(hd > 0) || !(n > 0))
    return gpu;
  /* outside layer passes the queue starts empty: such ops follow the host's sync points
   * (pipeline receives, the loss, the optimizer step) */
  return eng_queue_end(0, hd, n * hd, n, gpu / n);
}

double *eng_template_issues(const prog_program *p, int tmpl, double hd, double *per_run)
{
  const prog_class *k = prog_class_at(p, tmpl);
  double *last = g_new0(double, MAX(k->ops->len, 1u)), host = 0;
  for (guint i = 0; i < k->ops->len; i++) {
    host += hd * eng_launches(&g_array_index(k->ops, prog_op, i));
    last[i] = host;
  }
  *per_run = host;
  return last;
}

bool eng_run(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
             eng_result *out, GError **err)
{
  memset(out, 0, sizeof *out);
  gint64 t0 = g_get_monotonic_time();
  bool ok = opt->kind == ENG_DES ? eng_run_des(p, hw, opt, out, err)
                                 : eng_run_analytic(p, hw, opt, out, err);
  out->wall_time = (double)(g_get_monotonic_time() - t0) / 1e6;
  return ok;
}

void eng_result_clear(eng_result *r)
{
  g_free(r->class_peak);
  if (r->events)
    g_array_free(r->events, TRUE);
  if (r->mem_samples)
    g_array_free(r->mem_samples, TRUE);
  if (r->link_loads)
    g_array_free(r->link_loads, TRUE);
  if (r->link_samples)
    g_array_free(r->link_samples, TRUE);
  memset(r, 0, sizeof *r);
}

static double eng_lerp(double a, double b, double k)
{
  return a + (b - a) * k;
}

/* A part of the step extrapolated from two parts that are equal but for rounding (an exposed
 * wait of 1e-15 s) can come out a hair below zero: that is rounding, not time. A part further
 * below zero is left for the run's sanity check to report. */
static double eng_lerp_part(double a, double b, double k, double step)
{
  double v = eng_lerp(a, b, k);
  return v < 0 && v > -1e-9 * step ? 0 : v;
}

/* A busiest link of b carries along the line through a and b (when a has it among its own) at
 * the rate it had in b: its use is those bytes over the extrapolated step. */
static void eng_links_extrapolate(const eng_result *a, const eng_result *b, double k, double step,
                                  eng_result *r)
{
  for (guint i = 0; r->link_loads && i < r->link_loads->len; i++) {
    eng_link_load *l = &g_array_index(r->link_loads, eng_link_load, i);
    for (guint j = 0; a->link_loads && j < a->link_loads->len; j++) {
      const eng_link_load *m = &g_array_index(a->link_loads, eng_link_load, j);
      if (m->link != l->link || m->down != l->down || l->bytes <= 0 || step <= 0)
        continue;
      double bytes = eng_lerp(m->bytes, l->bytes, k);
      l->utilisation *= bytes / l->bytes * b->step_time / step;
      l->bytes = bytes;
    }
  }
}

void eng_result_extrapolate(const eng_result *a, const eng_result *b, double k, eng_result *r)
{
  double step = eng_lerp(a->step_time, b->step_time, k);
  eng_links_extrapolate(a, b, k, step, r);
  r->step_time = step;
  r->compute = eng_lerp_part(a->compute, b->compute, k, step);
  r->exposed_comm = eng_lerp_part(a->exposed_comm, b->exposed_comm, k, step);
  r->bubble = eng_lerp_part(a->bubble, b->bubble, k, step);
  r->other = eng_lerp_part(a->other, b->other, k, step);
  for (int d = 0; d < PROG_NDIMS; d++) {
    r->comm[d] = eng_lerp_part(a->comm[d], b->comm[d], k, step);
    r->exposed[d] = eng_lerp_part(a->exposed[d], b->exposed[d], k, step);
  }
  r->peak_memory = eng_lerp(a->peak_memory, b->peak_memory, k);
  for (int c = 0; c < r->nclasses && c < a->nclasses; c++)
    r->class_peak[c] = eng_lerp(a->class_peak[c], b->class_peak[c], k);
  r->critical_rank = b->critical_rank;
  r->wall_time = a->wall_time + b->wall_time;
  r->messages = a->messages + b->messages;
  r->activities = a->activities + b->activities;
}

GArray **eng_stream_lists(const prog_program *p)
{
  /* templates have lists too (empty for ranks): every class index stays valid */
  GArray **lists = g_new0(GArray *, p->classes->len * PROG_NSTREAMS);
  /* the (class, stream) pairs without ops, most of them, share one empty list: an array each
   * was a fortieth of an analytic run */
  GArray *none = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  for (guint c = 0; c < p->classes->len; c++) {
    const prog_class *k = prog_class_at(p, (int)c);
    /* sized first and filled in place: growing them op by op was a tenth of an analytic run */
    guint n[PROG_NSTREAMS] = {0};
    const prog_op *ops = (const prog_op *)(void *)k->ops->data;
    for (guint i = 0; i < k->ops->len; i++)
      n[ops[i].stream]++;
    uint32_t *next[PROG_NSTREAMS]; /* where each list's next index goes */
    for (int s = 0; s < PROG_NSTREAMS; s++) {
      GArray *l = n[s] ? g_array_sized_new(FALSE, FALSE, sizeof(uint32_t), n[s])
                       : g_array_ref(none);
      lists[c * PROG_NSTREAMS + s] = g_array_set_size(l, n[s]);
      next[s] = (uint32_t *)(void *)l->data;
    }
    for (guint i = 0; i < k->ops->len; i++)
      *next[ops[i].stream]++ = i;
  }
  g_array_unref(none);
  return lists;
}

void eng_stream_lists_free(const prog_program *p, GArray **lists)
{
  for (guint i = 0; i < p->classes->len * PROG_NSTREAMS; i++)
    g_array_unref(lists[i]);
  g_free(lists);
}

/* ---- op durations ------------------------------------------------------------------------- */

struct eng_costs {
  const prog_program *p;
  const hw_cluster *hw;
  coll_planner *pl;
  GHashTable *templates; /* (tmpl, class) -> eng_tmpl, one of by_comm's */
  /* (tmpl, its collectives' durations) -> eng_tmpl: a template's times depend on the rank
   * only through those, so the stages of a pipeline, whose tensor-parallel groups differ but
   * cost the same, share one evaluation */
  GHashTable *by_comm;
  /* extra time per second a kernel of each class runs beside a collective of its GPU:
   * gpu.efficiency.interference with collectives.sm_reserved's 1 / (1 - f) */
  double extra[CFG_NKCLASSES];
  bool siblings_apart;   /* no link two sibling groups could share (eng_topology_foldable) */
  bool fold;
  GHashTable *crowded;   /* eng_crowd_key -> time of a collective beside its siblings */
  /* the bound program's templates by (tmpl, class), filled from `templates` as ops ask: a
   * macro op's lookup in the table was a tenth of an analytic run */
  struct eng_slot *index;
  guint nindex; /* classes of the bound program: the index holds nindex^2 */
};

/* One template as a class runs it. */
typedef struct eng_tmpl {
  double makespan, period;         /* with the host's launch queue */
  double gpu_makespan, gpu_period; /* with a host that keeps ahead */
  double compute;               /* compute stream busy per run */
  double sync;                  /* makespan of the synchronous chain alone */
  double sync_comm[PROG_NDIMS]; /* busy time of collectives on that chain, per dimension */
  double async_comm[PROG_NDIMS];/* ... and off it (data / expert parallel) */
  double overlap;               /* what kernels beside a collective add (eng_costs.extra) */
  double interf;                /* extra time per second of the run's compute beside a
                                 * collective of the step outside it (its kernels' mean) */
  double async_beside;          /* compute time beside the run's own asynchronous collectives */
  double spill;                 /* what each run after the first adds: the previous run's
                                 * asynchronous collectives beside its compute */
} eng_tmpl;

/* What eng_op_spans derives from a template's times and a macro's count, but not from where
 * the macro starts: the same macro runs once per micro-batch and pass, and deriving it again
 * (two splits over the dimensions) was most of a macro's placing. */
typedef struct {
  uint32_t count; /* > 0 once filled */
  double dur, compute;
  double wait[PROG_NDIMS]; /* exposed waits: the synchronous chain's and the async streams' */
  double hid[PROG_NDIMS];  /* collective time the compute hid */
} eng_macro_parts;

/* A template as one class of the bound program runs it, and its last macro's parts. */
typedef struct eng_slot {
  const eng_tmpl *t;
  eng_macro_parts parts;
} eng_slot;

typedef struct {
  int family, cls, group, coll;
  double bytes;
} eng_crowd_key;

static guint eng_crowd_hash(gconstpointer k)
{
  const eng_crowd_key *x = k;
  return (guint)x->family * 73856093u ^ (guint)x->group * 19349663u ^ (guint)x->cls * 83492791u ^
         (guint)x->coll * 2654435761u ^ g_double_hash(&x->bytes);
}

static gboolean eng_crowd_equal(gconstpointer a, gconstpointer b)
{
  const eng_crowd_key *x = a, *y = b;
  return x->family == y->family && x->cls == y->cls && x->group == y->group &&
         x->coll == y->coll && x->bytes == y->bytes;
}

/* A template with the durations its collectives take as some rank runs them (eng_template_pass's:
 * op count times the time beside the siblings, 0 when none can run it), in op order. */
typedef struct {
  int tmpl;
  guint n;
  double dur[];
} eng_comm_key;

static gsize eng_comm_key_size(guint n)
{
  return sizeof(eng_comm_key) + sizeof(double) * n;
}

static guint eng_comm_key_hash(gconstpointer k)
{
  const eng_comm_key *x = k;
  const guchar *b = (const guchar *)x->dur;
  guint h = (guint)x->tmpl * 2654435761u ^ x->n;
  for (gsize i = 0; i < sizeof(double) * x->n; i++)
    h = (h ^ b[i]) * 16777619u;
  return h;
}

/* Bit for bit: equal bits give equal passes. */
static gboolean eng_comm_key_equal(gconstpointer a, gconstpointer b)
{
  const eng_comm_key *x = a, *y = b;
  return x->tmpl == y->tmpl && x->n == y->n &&
         memcmp(x->dur, y->dur, sizeof(double) * x->n) == 0;
}

static bool eng_topology_foldable(const hw_cluster *hw);

/* A host-staged runtime (MPI) runs no kernel beside compute: neither its SMs nor the measured
 * interference apply (run.c already passes sm_reserved 0 for it). */
static void eng_costs_set_interference(eng_costs *c, const hw_cluster *hw, const eng_options *opt)
{
  double f = opt ? opt->sm_reserved : 0;
  bool kernels = !(opt && opt->runtime && coll_runtime_cpu(opt->runtime));
  const double *k = hw_efficiency(hw)->interference;
  for (int i = 0; i < CFG_NKCLASSES; i++) {
    double factor = (kernels ? k[i] : 1) / (f > 0 && f < 1 ? 1 - f : 1);
    c->extra[i] = factor > 1 ? factor - 1 : 0;
  }
}

double eng_interference_rate(const eng_costs *c, const prog_op *op)
{
  /* a measured duration (trace replay) already holds whatever ran beside it */
  return op->fixed_time >= 0 ? 0 : c->extra[op->kclass];
}

eng_costs *eng_costs_new(const prog_program *p, const hw_cluster *hw, coll_planner *pl,
                         const eng_options *opt)
{
  eng_costs *c = g_new0(eng_costs, 1);
  c->p = p;
  c->hw = hw;
  c->pl = pl;
  eng_costs_set_interference(c, hw, opt);
  c->fold = !(opt && opt->unfold);
  c->siblings_apart = eng_topology_foldable(hw);
  c->templates = g_hash_table_new(g_direct_hash, g_direct_equal);
  c->by_comm = g_hash_table_new_full(eng_comm_key_hash, eng_comm_key_equal, g_free, g_free);
  c->crowded = g_hash_table_new_full(eng_crowd_hash, eng_crowd_equal, g_free, g_free);
  return c;
}

eng_costs *eng_costs_new_shared(const hw_cluster *hw, const eng_options *o)
{
  return eng_costs_new(NULL, hw, o->planner, o);
}

bool eng_costs_fit(const eng_costs *c, const hw_cluster *hw, const eng_options *o)
{
  eng_costs want = {0};
  eng_costs_set_interference(&want, hw, o);
  return c->hw == hw && c->pl == o->planner && c->fold == !o->unfold &&
         memcmp(c->extra, want.extra, sizeof want.extra) == 0;
}

void eng_costs_bind(eng_costs *c, const prog_program *p)
{
  c->p = p;
  g_free(c->index);
  c->nindex = p->classes->len;
  c->index = g_new0(eng_slot, (gsize)c->nindex * c->nindex);
}

void eng_costs_free(eng_costs *c)
{
  if (!c)
    return;
  g_hash_table_destroy(c->templates);
  g_hash_table_destroy(c->by_comm);
  g_hash_table_destroy(c->crowded);
  g_free(c->index);
  g_free(c);
}

bool *eng_async_ops(const prog_program *p, int tmpl)
{
  const prog_class *k = prog_class_at(p, tmpl);
  bool *async = g_new0(bool, MAX(k->ops->len, 1u));
  g_autofree bool *needed = g_new0(bool, MAX(k->ops->len, 1u));
  for (guint i = 0; i < k->ops->len; i++) {
    const prog_op *op = &g_array_index(k->ops, prog_op, i);
    const uint32_t *deps = prog_op_deps(p, tmpl, op);
    for (uint32_t d = 0; d < op->ndeps; d++)
      needed[deps[d]] = true;
  }
  for (guint i = 0; i < k->ops->len; i++) {
    const prog_op *op = &g_array_index(k->ops, prog_op, i);
    async[i] = (op->stream == PROG_STREAM_DP && !op->on_chain) ||
               (op->stream == PROG_STREAM_EP && !needed[i]);
  }
  return async;
}

static int eng_interval_cmp(const void *a, const void *b)
{
  const eng_interval *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Time during which one of the `na` intervals of `a` (disjoint, in order: one compute stream)
 * meets one of `b` (any order, may overlap), each of a's weighted by `w` (NULL: 1). */
static double eng_intersection(const eng_interval *a, guint na, const double *w, GArray *b)
{
  g_array_sort(b, eng_interval_cmp);
  double total = 0, reach = -INFINITY;
  guint i = 0;
  for (guint j = 0; j < b->len; j++) {
    eng_interval x = g_array_index(b, eng_interval, j);
    x.start = MAX(x.start, reach); /* the union: skip what an earlier interval covered */
    if (x.end <= x.start)
      continue;
    reach = x.end;
    while (i < na && a[i].end <= x.start)
      i++;
    for (guint k = i; k < na && a[k].start < x.end; k++) {
      const eng_interval *y = &a[k];
      total += MAX(0.0, MIN(y->end, x.end) - MAX(y->start, x.start)) * (w ? w[k] : 1);
    }
  }
  return total;
}

/* Whether the members of a group sit on more than one node: only then can groups of other
 * ranks share its links (inside a node every GPU has its own). */
static bool eng_group_spans_nodes(const hw_cluster *hw, const prog_group *g)
{
  for (int m = 1; m < g->n; m++)
    if (hw_node_of(hw, g->ranks[m]) != hw_node_of(hw, g->ranks[0]))
      return true;
  return false;
}

/* The other groups of the family that the ranks of `rank`'s class belong to, their ranks one
 * group after the other. */
static int eng_sibling_groups(const prog_program *p, const prog_family *f, int rank, GArray *out)
{
  const prog_group *own = g_ptr_array_index(p->groups, f->group_of[rank]);
  g_autofree bool *seen = g_new0(bool, p->groups->len);
  seen[f->group_of[rank]] = true;
  int n = 0;
  for (int r = 0; r < p->nranks; r++) {
    int gi = f->group_of[r];
    if (gi < 0 || seen[gi] || p->class_of[r] != p->class_of[rank])
      continue;
    seen[gi] = true;
    const prog_group *g = g_ptr_array_index(p->groups, gi);
    if (g->n == own->n) {
      g_array_append_vals(out, g->ranks, (guint)g->n);
      n++;
    }
  }
  return n;
}

double eng_coll_crowded(eng_costs *c, const prog_op *op, int rank, const coll_schedule *s)
{
  const prog_program *p = c->p;
  const prog_family *f = g_ptr_array_index(p->families, op->family);
  const prog_group *own = g_ptr_array_index(p->groups, f->group_of[rank]);
  /* every GPU with its own NIC and no tier oversubscribed: siblings share no link, and the
   * crowd's link loads (the costliest part of a large job's analytic step) are not needed */
  if (!eng_group_spans_nodes(c->hw, own) || c->siblings_apart)
    return s->time;
  eng_crowd_key key = {.family = op->family, .cls = p->class_of[rank], .group = f->group_of[rank],
                       .coll = op->coll, .bytes = op->comm_bytes};
  double *hit = g_hash_table_lookup(c->crowded, &key);
  if (hit)
    return *hit;
  GArray *ranks = g_array_new(FALSE, FALSE, sizeof(int));
  int nsib = eng_sibling_groups(p, f, rank, ranks);
  double *t = g_new(double, 1);
  *t = coll_schedule_crowded(s, c->hw, c->fold, (const int *)ranks->data, nsib);
  g_array_free(ranks, TRUE);
  g_hash_table_insert(c->crowded, g_memdup2(&key, sizeof key), t);
  return *t;
}

/* List-schedules a template once; with `sync_only` the asynchronous ops are left out. Fills
 * `t`'s busy times (sync_only: the synchronous chain's) and, for the full pass, how long
 * compute ran beside a collective; `starts` (NULL: not wanted) and `ends` get every op's
 * interval. */
static double eng_template_pass(eng_costs *c, int tmpl, int rank, bool sync_only, eng_tmpl *t,
                                const double *issue, double *starts, double *ends)
{
  double hd = eng_queue_dispatch(c->hw);
  const prog_class *k = prog_class_at(c->p, tmpl);
  double free_at[PROG_NSTREAMS] = {0}, makespan = 0;
  g_autofree double *end = g_new0(double, MAX(k->ops->len, 1u));
  g_autofree bool *is_async = eng_async_ops(c->p, tmpl);
  GArray *computes = g_array_new(FALSE, FALSE, sizeof(eng_interval));
  GArray *rates = g_array_new(FALSE, FALSE, sizeof(double)); /* per compute interval */
  GArray *comms = g_array_new(FALSE, FALSE, sizeof(eng_interval));
  GArray *asyncs = g_array_new(FALSE, FALSE, sizeof(eng_interval));
  double weighted = 0; /* compute time times its rate */
  for (guint i = 0; i < k->ops->len; i++) {
    const prog_op *op = &g_array_index(k->ops, prog_op, i);
    bool async = is_async[i];
    if (sync_only && async)
      continue;
    double ready = free_at[op->stream];
    const uint32_t *deps = prog_op_deps(c->p, tmpl, op);
    for (uint32_t d = 0; d < op->ndeps; d++)
      ready = MAX(ready, end[deps[d]]);
    double n = eng_launches(op), lead = eng_issue_lead(op);
    double first = issue && lead >= 0 ? issue[i] - lead * hd : 0;
    double dur = 0;
    if (op->kind == PROG_COMPUTE) {
      dur = eng_kernel_time(c->hw, op);
      if (!sync_only)
        t->compute += dur;
      if (issue && n > 0) {
        double end_at = eng_queue_end(ready, first, issue[i], n, dur / n);
        ready = end_at - dur;
      }
    } else if (op->kind == PROG_COMM) {
      ready = MAX(ready, first);
      const coll_schedule *s = eng_schedule_for(c->pl, c->p, op, rank, NULL);
      dur = s ? op->count * eng_coll_crowded(c, op, rank, s) : 0;
      if (sync_only)
        t->sync_comm[op->dim] += dur;
      else if (async)
        t->async_comm[op->dim] += dur;
    }
    end[i] = ready + dur;
    if (starts) {
      starts[i] = ready;
      ends[i] = end[i];
    }
    free_at[op->stream] = end[i];
    makespan = MAX(makespan, end[i]);
    if (dur > 0 && op->kind != PROG_MEM)
      g_array_append_val(op->kind == PROG_COMM ? comms : computes, ((eng_interval){ready, end[i]}));
    if (dur > 0 && op->kind == PROG_COMM && async)
      g_array_append_val(asyncs, ((eng_interval){ready, end[i]}));
    if (dur > 0 && op->kind == PROG_COMPUTE) {
      double rate = eng_interference_rate(c, op);
      g_array_append_val(rates, rate);
      weighted += rate * dur;
    }
  }
  if (!sync_only) {
    const eng_interval *run = (const eng_interval *)(void *)computes->data;
    t->overlap = eng_intersection(run, computes->len, (const double *)rates->data, comms);
    t->interf = t->compute > 0 ? weighted / t->compute : 0;
    t->async_beside = eng_intersection(run, computes->len, NULL, asyncs);
  }
  g_array_free(asyncs, TRUE);
  g_array_free(rates, TRUE);
  g_array_free(computes, TRUE);
  g_array_free(comms, TRUE);
  return makespan;
}

/* The launch queue over `count` runs: the first run's kernels wait for a host that starts
 * issuing with it; later runs find the host ahead (the period of the GPU alone) unless one
 * run's launches take longer than its kernels (a host-bound layer pass). */
static void eng_template_hosted(eng_costs *c, int tmpl, int rank, double slow, eng_tmpl *t)
{
  double hd = eng_queue_dispatch(c->hw), per_run = 0;
  t->makespan = t->gpu_makespan;
  t->period = t->gpu_period;
  if (!(hd > 0))
    return;
  g_autofree double *issue = eng_template_issues(c->p, tmpl, hd, &per_run);
  eng_tmpl scratch = {0};
  double hosted = eng_template_pass(c, tmpl, rank, false, &scratch, issue, NULL, NULL) + slow;
  t->makespan = MAX(t->makespan, hosted);
  t->period = MAX(t->period, per_run);
}

static const eng_tmpl *eng_template_computed(eng_costs *c, int tmpl, int rank);

/* The bound program's slot of (tmpl, rank's class); NULL outside the index. */
static eng_slot *eng_template_slot(eng_costs *c, int tmpl, int rank)
{
  int cls = c->p->class_of[rank];
  return c->index && (guint)tmpl < c->nindex && (guint)cls < c->nindex
             ? &c->index[(gsize)tmpl * c->nindex + (guint)cls]
             : NULL;
}

static const eng_tmpl *eng_template_times(eng_costs *c, int tmpl, int rank)
{
  eng_slot *slot = eng_template_slot(c, tmpl, rank);
  if (slot && slot->t)
    return slot->t;
  const eng_tmpl *t = eng_template_computed(c, tmpl, rank);
  if (slot)
    slot->t = t;
  return t;
}

/* The durations of `tmpl`'s collectives as `rank` runs them, as eng_template_pass takes them. */
static eng_comm_key *eng_template_comm_key(eng_costs *c, int tmpl, int rank)
{
  const prog_class *k = prog_class_at(c->p, tmpl);
  guint n = 0;
  for (guint i = 0; i < k->ops->len; i++)
    n += g_array_index(k->ops, prog_op, i).kind == PROG_COMM;
  eng_comm_key *key = g_malloc(eng_comm_key_size(n));
  key->tmpl = tmpl;
  key->n = n;
  n = 0;
  for (guint i = 0; i < k->ops->len; i++) {
    const prog_op *op = &g_array_index(k->ops, prog_op, i);
    if (op->kind != PROG_COMM)
      continue;
    const coll_schedule *s = eng_schedule_for(c->pl, c->p, op, rank, NULL);
    key->dur[n++] = s ? op->count * eng_coll_crowded(c, op, rank, s) : 0;
  }
  return key;
}

static eng_tmpl *eng_template_evaluate(eng_costs *c, int tmpl, int rank);

static const eng_tmpl *eng_template_computed(eng_costs *c, int tmpl, int rank)
{
  gpointer key = GINT_TO_POINTER(tmpl * 65536 + c->p->class_of[rank] + 1);
  eng_tmpl *t = g_hash_table_lookup(c->templates, key);
  if (t)
    return t;
  eng_comm_key *comm = eng_template_comm_key(c, tmpl, rank);
  t = g_hash_table_lookup(c->by_comm, comm);
  if (t) {
    g_free(comm);
  } else {
    t = eng_template_evaluate(c, tmpl, rank);
    g_hash_table_insert(c->by_comm, comm, t);
  }
  g_hash_table_insert(c->templates, key, t);
  return t;
}

static eng_tmpl *eng_template_evaluate(eng_costs *c, int tmpl, int rank)
{
  eng_tmpl *t = g_new0(eng_tmpl, 1);
  t->gpu_makespan = eng_template_pass(c, tmpl, rank, false, t, NULL, NULL, NULL);
  t->sync = eng_template_pass(c, tmpl, rank, true, t, NULL, NULL, NULL);
  /* communication kernels hold SMs and share HBM: the compute that runs beside them is slower */
  double slow = t->overlap;
  double async = 0, async_busy = 0;
  for (int d = 0; d < PROG_NDIMS; d++) {
    async = MAX(async, t->async_comm[d]);
    async_busy += t->async_comm[d];
  }
  /* in the steady state, what a run's asynchronous collectives (ZeRO-3's prefetched gathers,
   * the reductions after its backward) do not spend beside its own compute they spend beside
   * the next run's */
  t->spill = t->interf * MIN(MAX(0.0, async_busy - t->async_beside), t->compute);
  t->gpu_makespan += slow;
  t->sync += slow;
  t->compute += slow;
  t->gpu_period = MAX(t->sync + t->spill, async);
  eng_template_hosted(c, tmpl, rank, slow, t);
  return t;
}

static double eng_macro_duration(const eng_tmpl *t, const prog_op *op)
{
  return op->count ? t->makespan + (op->count - 1) * t->period : 0;
}

double eng_op_duration(eng_costs *c, const prog_op *op, int rank)
{
  if (op->tmpl < 0)
    return eng_compute_time(c->hw, op);
  return eng_macro_duration(eng_template_times(c, op->tmpl, rank), op);
}

/* Extra time per second of op's duration that a collective beside it costs: its kernel
 * class's rate, or a macro's kernels' mean, times the share of the op the GPU computes (not
 * the host's launches, not the waits of its own collectives). */
static double eng_interference_weight(eng_costs *c, const prog_op *op, int rank, double dur)
{
  if (!(dur > 0))
    return 0;
  if (op->tmpl < 0)
    return eng_interference_rate(c, op) * MIN(1.0, eng_kernel_time(c->hw, op) / dur);
  const eng_tmpl *t = eng_template_times(c, op->tmpl, rank);
  return t->interf * MIN(1.0, op->count * t->compute / dur);
}

/* Stable insertion sort by start: the few intervals a charge meets come nearly in order, and
 * ties keep their order, as the sort the union's sum was first written with did (the order of
 * tied pieces decides the sum's last bit). */
static void eng_intervals_sort(eng_interval *v, guint n)
{
  for (guint i = 1; i < n; i++) {
    eng_interval x = v[i];
    guint j = i;
    for (; j > 0 && v[j - 1].start > x.start; j--)
      v[j] = v[j - 1];
    v[j] = x;
  }
}

double eng_union_overlap(eng_interval *clipped, guint n, double start, double end)
{
  if (n == 1) /* the one piece, as the loop below adds it */
    return MAX(0.0, MIN(end, clipped[0].end) - MAX(start, clipped[0].start));
  eng_intervals_sort(clipped, n);
  double total = 0, reach = -INFINITY;
  for (guint j = 0; j < n; j++) {
    eng_interval x = clipped[j];
    x.start = MAX(x.start, reach); /* the union: skip what an earlier interval covered */
    if (x.end <= x.start)
      continue;
    reach = x.end;
    total += MAX(0.0, MIN(end, x.end) - MAX(start, x.start));
  }
  return total;
}

/* Drops the intervals that ended by `start`, in the order GLib's remove_index_fast left them
 * (the order of the survivors decides how ties sum). */
static guint eng_intervals_prune(eng_interval *v, guint n, double start)
{
  for (guint i = n; i-- > 0;)
    if (v[i].end <= start)
      v[i] = v[--n];
  return n;
}

double eng_interference_charge_v(eng_costs *c, const prog_op *op, int rank, double start,
                                 double dur, eng_interval *comms, guint *ncomms, double now)
{
  double end = start + dur;
  if (op->stream == PROG_STREAM_COMPUTE) /* the compute stream only moves on */
    *ncomms = eng_intervals_prune(comms, *ncomms, start);
  guint n = *ncomms;
  double w = n ? eng_interference_weight(c, op, rank, dur) : 0;
  if (!(w > 0))
    return 0;
  /* on the stack: an allocation per charge was most of its cost */
  eng_interval local[32];
  eng_interval *clipped = n <= G_N_ELEMENTS(local) ? local : g_new(eng_interval, n);
  guint k = 0;
  for (guint i = 0; i < n; i++) {
    eng_interval x = {MAX(comms[i].start, start), MIN(MIN(comms[i].end, end), now)};
    if (x.end > x.start)
      clipped[k++] = x;
  }
  double overlap = k ? eng_union_overlap(clipped, k, start, end) : 0; /* counted once */
  if (clipped != local)
    g_free(clipped);
  return w * overlap;
}

double eng_interference_charge(eng_costs *c, const prog_op *op, int rank, double start, double dur,
                               GArray *comms, double now)
{
  guint n = comms->len;
  eng_interval *v = (eng_interval *)(void *)comms->data;
  double extra = eng_interference_charge_v(c, op, rank, start, dur, v, &n, now);
  g_array_set_size(comms, n);
  return extra;
}

/* Splits `total` over the dimensions in proportion to `weights` (all to `fallback` if none). */
static void eng_split(double total, const double weights[PROG_NDIMS], prog_dim fallback,
                      double out[PROG_NDIMS])
{
  double sum = 0;
  for (int d = 0; d < PROG_NDIMS; d++)
    sum += weights[d];
  for (int d = 0; d < PROG_NDIMS; d++)
    out[d] = sum > 0 ? total * weights[d] / sum : (d == (int)fallback ? total : 0);
}

/* A macro's parts, derived from the template's times and its count (op->count > 0). */
static void eng_macro_parts_derive(const eng_tmpl *t, const prog_op *op, eng_macro_parts *m)
{
  /* A macro: its compute, then the waits of its synchronous chain (tensor / context parallel
   * collectives), then what the asynchronous streams added; the rest of each dimension's
   * collectives ran under compute. */
  double n = op->count, spill = (n - 1) * t->spill;
  m->count = op->count;
  m->dur = eng_macro_duration(t, op);
  m->compute = n * t->compute + spill;
  double sync_wait[PROG_NDIMS], async_wait[PROG_NDIMS];
  eng_split(n * (t->sync - t->compute), t->sync_comm, PROG_DIM_TP, sync_wait);
  /* what the launch queue adds is idle GPU, no span: the breakdown's "other" */
  double gpu = t->gpu_makespan + (n - 1) * t->gpu_period;
  eng_split(MAX(0.0, MIN(m->dur, gpu) - n * t->sync - spill), t->async_comm, PROG_DIM_DP,
            async_wait);
  for (int d = 0; d < PROG_NDIMS; d++) {
    m->wait[d] = sync_wait[d] + async_wait[d];
    m->hid[d] = MAX(0.0, n * (t->sync_comm[d] + t->async_comm[d]) - m->wait[d]);
  }
}

/* The parts of macro `op` as `rank` runs it: its slot's when the slot last saw its count. */
static const eng_macro_parts *eng_macro_parts_of(eng_costs *c, const prog_op *op, int rank,
                                                 eng_macro_parts *scratch)
{
  eng_slot *slot = eng_template_slot(c, op->tmpl, rank);
  if (slot && slot->t && slot->parts.count == op->count)
    return &slot->parts;
  eng_macro_parts *m = slot ? &slot->parts : scratch;
  eng_macro_parts_derive(eng_template_times(c, op->tmpl, rank), op, m);
  return m;
}

guint eng_op_place(eng_costs *c, const prog_op *op, int rank, double start,
                   eng_span out[ENG_OP_SPANS_MAX], double hidden[PROG_NDIMS], double *dur)
{
  if (op->tmpl < 0 || op->count == 0) {
    /* the GPU idles first while the host launches, then runs the kernels */
    const eng_tmpl *t = op->tmpl >= 0 ? eng_template_times(c, op->tmpl, rank) : NULL;
    *dur = t ? eng_macro_duration(t, op) : eng_compute_time(c->hw, op);
    double busy = op->tmpl < 0 ? MIN(*dur, eng_kernel_time(c->hw, op)) : *dur;
    if (!(busy > 0))
      return 0;
    out[0] = (eng_span){start + *dur - busy, start + *dur, -1, op->stream};
    return 1;
  }
  eng_macro_parts scratch;
  const eng_macro_parts *m = eng_macro_parts_of(c, op, rank, &scratch);
  *dur = m->dur;
  guint nadd = 0;
  double at = start;
  if (m->compute > 0)
    out[nadd++] = (eng_span){at, at + m->compute, -1, op->stream};
  at += m->compute;
  for (int d = 0; d < PROG_NDIMS; d++) {
    if (m->wait[d] > 0)
      out[nadd++] = (eng_span){at, at + m->wait[d], d, op->stream};
    at += m->wait[d];
    hidden[d] += m->hid[d];
  }
  return nadd;
}

double eng_op_spans(eng_costs *c, const prog_op *op, int rank, double start, GArray *spans,
                    double hidden[PROG_NDIMS])
{
  eng_span add[ENG_OP_SPANS_MAX];
  double dur;
  guint n = eng_op_place(c, op, rank, start, add, hidden, &dur);
  /* appended together: an append each was a twentieth of an analytic run */
  if (n)
    g_array_append_vals(spans, add, n);
  return dur;
}

/* ---- evaluator ---------------------------------------------------------------------------- */

struct eng_evaluator {
  const prog_program *p;
  coll_planner *pl;
  eng_costs *costs;
};

eng_evaluator *eng_evaluator_new(const prog_program *p, const hw_cluster *hw, const eng_options *opt)
{
  eng_evaluator *e = g_new0(eng_evaluator, 1);
  e->p = p;
  e->pl = eng_planner_new(hw, opt);
  e->costs = eng_costs_new(p, hw, e->pl, opt);
  /* a template's times by index, not through the hash table: most of a screened layout */
  eng_costs_bind(e->costs, p);
  return e;
}

void eng_evaluator_free(eng_evaluator *e)
{
  if (!e)
    return;
  eng_costs_free(e->costs);
  coll_planner_free(e->pl);
  g_free(e);
}

double eng_evaluate_macro(eng_evaluator *e, int tmpl, uint32_t count, int rank)
{
  return eng_evaluate_macro_rate(e, tmpl, count, rank, NULL);
}

double eng_evaluate_macro_rate(eng_evaluator *e, int tmpl, uint32_t count, int rank, double *rate)
{
  prog_op op = {.kind = PROG_COMPUTE, .tmpl = tmpl, .count = count, .fixed_time = -1};
  double dur = eng_op_duration(e->costs, &op, rank);
  if (rate)
    *rate = eng_interference_weight(e->costs, &op, rank, dur);
  return dur;
}

bool eng_evaluate_coll(eng_evaluator *e, prog_coll coll, int family, double bytes, int rank,
                       double *time, GError **err)
{
  prog_op op = {.kind = PROG_COMM, .coll = coll, .family = family, .comm_bytes = bytes,
                .count = 1, .tmpl = -1, .fixed_time = -1};
  const coll_schedule *s = eng_schedule_for(e->pl, e->p, &op, rank, err);
  *time = s ? s->time : 0;
  return s != NULL;
}

void eng_evaluate_template(eng_evaluator *e, int tmpl, int rank, eng_template_schedule *out)
{
  const eng_tmpl *t = eng_template_times(e->costs, tmpl, rank);
  guint n = prog_class_at(e->p, tmpl)->ops->len;
  out->makespan = t->makespan;
  out->period = t->period;
  out->nops = n;
  out->start = g_new0(double, MAX(n, 1u));
  out->end = g_new0(double, MAX(n, 1u));
  eng_tmpl scratch = {0};
  double raw = eng_template_pass(e->costs, tmpl, rank, false, &scratch, NULL, out->start, out->end);
  /* compute slowed by the SMs collectives hold stretches the run: spread that over its ops
   * (the host's launches are idle time between runs, not longer kernels) */
  double k = raw > 0 ? t->gpu_makespan / raw : 1;
  for (guint i = 0; i < n; i++) {
    out->start[i] *= k;
    out->end[i] *= k;
  }
}

void eng_template_schedule_clear(eng_template_schedule *s)
{
  g_free(s->start);
  g_free(s->end);
  memset(s, 0, sizeof *s);
}

const coll_schedule *eng_evaluate_schedule(eng_evaluator *e, const prog_op *op, int rank)
{
  return eng_schedule_for(e->pl, e->p, op, rank, NULL);
}

/* ---- schedules ---------------------------------------------------------------------------- */

coll_planner *eng_planner_new(const hw_cluster *hw, const eng_options *o)
{
  coll_planner *pl = coll_planner_new(hw, o->algo, o->proto, !o->unfold);
  coll_planner_set_runtime(pl, o->runtime);
  return pl;
}

const coll_schedule *eng_schedule_for(coll_planner *pl, const prog_program *p, const prog_op *op,
                                      int rank, GError **err)
{
  const prog_family *f = g_ptr_array_index(p->families, op->family);
  int group = f->group_of[rank];
  const prog_group *g = g_ptr_array_index(p->groups, group);
  return coll_planner_get(pl, op->coll, g->ranks, g->n, group, op->comm_bytes, NULL, err);
}

static bool eng_topology_foldable(const hw_cluster *hw)
{
  const cfg_cluster *c = hw_config(hw);
  if (c->node.count > 1 && c->node.nics_per_node < c->node.gpus_per_node)
    return false; /* siblings would share a NIC */
  for (int t = 0; t < c->network.ntiers; t++)
    if (c->network.tiers[t].oversubscription > 1)
      return false;
  return true;
}

bool eng_pipelined(const prog_program *p)
{
  for (guint c = 0; c < p->classes->len; c++) {
    const prog_class *k = prog_class_at(p, (int)c);
    if (!k->is_template && k->stage > 0)
      return true;
  }
  return false;
}

/* ---- breakdown ---------------------------------------------------------------------------- */

typedef struct {
  double t;
  int what;  /* -1 compute, else dim */
  int delta; /* +1 start, -1 end */
} eng_edge;

/* Ends before starts at the same instant; edges equal in both may come in any order (between
 * them no time passes). */
static bool eng_edge_before(const eng_edge *x, const eng_edge *y)
{
  return x->t < y->t || (x->t == y->t && x->delta < y->delta);
}

/* Merges e[lo, mid) and e[mid, hi), each in order, into tmp[lo, hi). */
static void eng_edges_merge(const eng_edge *e, eng_edge *tmp, size_t lo, size_t mid, size_t hi)
{
  size_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi)
    tmp[k++] = eng_edge_before(&e[j], &e[i]) ? e[j++] : e[i++];
  while (i < mid)
    tmp[k++] = e[i++];
  while (j < hi)
    tmp[k++] = e[j++];
}

/* Sorts `n` edges with `tmp` (room for n) as scratch: a merge sort of the runs already in order
 * with the comparison inline, where qsort's callback was a twentieth
 * of an analytic run; a rank's spans grouped by stream come in a few long runs. Returns the
 * sorted array (`e` or `tmp`). `bounds` has room for n + 1 run starts and at least 2. */
static eng_edge *eng_edges_sort(eng_edge *e, eng_edge *tmp, size_t n, size_t *bounds)
{
  size_t runs = 0;
  bounds[runs++] = 0;
  for (size_t i = 1; i < n; i++)
    if (eng_edge_before(&e[i], &e[i - 1]))
      bounds[runs++] = i;
  bounds[runs] = n;
  while (runs > 1) {
    size_t merged = 0;
    for (size_t r = 0; r < runs; r += 2) {
      size_t lo = bounds[r], mid = bounds[r + 1], hi = r + 1 < runs ? bounds[r + 2] : mid;
      eng_edges_merge(e, tmp, lo, mid, hi);
      bounds[merged++] = lo;
    }
    bounds[merged] = n;
    runs = merged;
    eng_edge *swap = e;
    e = tmp;
    tmp = swap;
  }
  return e;
}

/* The spans' edges into `e`, grouped by stream (each stream's in time order): first the counts,
 * then each span's two edges at its stream's next place. */
static void eng_edges_by_stream(const eng_span *spans, guint n, eng_edge *e)
{
  size_t at[PROG_NSTREAMS + 1] = {0};
  for (guint i = 0; i < n; i++)
    at[spans[i].stream + 1] += 2;
  for (int s = 0; s < PROG_NSTREAMS; s++)
    at[s + 1] += at[s];
  for (guint i = 0; i < n; i++) {
    const eng_span *s = &spans[i];
    e[at[s->stream]++] = (eng_edge){s->start, s->what, +1};
    e[at[s->stream]++] = (eng_edge){s->end, s->what, -1};
  }
}

void eng_breakdown(GArray *spans, const double hidden[PROG_NDIMS], bool pipelined, double step,
                   eng_result *out)
{
  eng_breakdown_of((const eng_span *)(void *)spans->data, spans->len, hidden, pipelined, step,
                   out);
}

void eng_breakdown_of(const eng_span *spans, guint n, const double hidden[PROG_NDIMS],
                      bool pipelined, double step, eng_result *out)
{
  eng_edge *buf = g_new(eng_edge, 4 * (gsize)MAX(n, 1u));
  /* a run starts at every edge at most, and one run starts even with no edge */
  g_autofree size_t *bounds = g_new(size_t, 2 * (gsize)n + 2);
  eng_edges_by_stream(spans, n, buf);
  const eng_edge *e = eng_edges_sort(buf, buf + 2 * (gsize)MAX(n, 1u), 2 * (size_t)n, bounds);
  int active[PROG_NDIMS + 1] = {0}; /* [0] compute, [1 + dim] */
  double compute = 0, exposed = 0, bubble = 0, comm[PROG_NDIMS] = {0}, exp_dim[PROG_NDIMS] = {0};
  double prev = 0;
  for (guint i = 0; i < 2 * n; i++) {
    double dt = e[i].t - prev;
    if (dt > 0) {
      bool busy = active[0] > 0, any_comm = false, non_pp = false;
      for (int d = 0; d < PROG_NDIMS; d++)
        if (active[1 + d] > 0) {
          comm[d] += dt;
          any_comm = true;
          non_pp |= d != PROG_DIM_PP;
          if (!busy)
            exp_dim[d] += dt;
        }
      if (busy)
        compute += dt;
      else if (non_pp)
        exposed += dt;
      else if (any_comm || pipelined)
        bubble += dt; /* idle but for pipeline transfers: waiting for the other stages */
    }
    prev = e[i].t;
    active[e[i].what + 1] += e[i].delta;
  }
  g_free(buf);
  out->compute = compute;
  out->exposed_comm = exposed;
  out->bubble = bubble;
  out->other = step - compute - exposed - bubble;
  if (out->other < 1e-9 * step) /* rounding, not time */
    out->other = 0;
  for (int d = 0; d < PROG_NDIMS; d++)
    out->comm[d] = comm[d] + hidden[d];
  memcpy(out->exposed, exp_dim, sizeof exp_dim);
}

static int eng_mem_cmp(const void *a, const void *b)
{
  const eng_mem_event *x = a, *y = b;
  if (x->time != y->time)
    return x->time < y->time ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A unit's events mostly come in time order already: sorting them anyway was a twentieth of a
 * run. */
static bool eng_mem_sorted(GArray *events)
{
  for (guint i = 1; i < events->len; i++)
    if (eng_mem_cmp(&g_array_index(events, eng_mem_event, i - 1),
                    &g_array_index(events, eng_mem_event, i)) > 0)
      return false;
  return true;
}

double eng_mem_peak(GArray *events, double base, GArray *samples_out, int rank)
{
  if (!eng_mem_sorted(events))
    g_array_sort(events, eng_mem_cmp);
  double now = base, peak = base;
  for (guint i = 0; i < events->len; i++) {
    const eng_mem_event *m = &g_array_index(events, eng_mem_event, i);
    now += m->delta;
    peak = MAX(peak, now);
    if (samples_out) {
      eng_mem_sample s = {.rank = rank, .time = m->time, .bytes = now};
      g_array_append_val(samples_out, s);
    }
  }
  return peak;
}
