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

double eng_compute_time(const hw_cluster *hw, const prog_op *op)
{
  if (op->fixed_time >= 0)
    return op->fixed_time;
  hw_kernel k = {.kclass = op->kclass, .dtype = op->dtype, .flops = op->flops, .bytes = op->bytes};
  return op->count * hw_kernel_time(hw, &k);
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
  memset(r, 0, sizeof *r);
}

GArray **eng_stream_lists(const prog_program *p)
{
  GArray **lists = g_new0(GArray *, p->classes->len * PROG_NSTREAMS);
  for (guint c = 0; c < p->classes->len; c++) {
    const prog_class *k = prog_class_at(p, (int)c);
    for (int s = 0; s < PROG_NSTREAMS; s++)
      lists[c * PROG_NSTREAMS + s] = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    for (guint i = 0; i < k->ops->len; i++) {
      const prog_op *op = &g_array_index(k->ops, prog_op, i);
      g_array_append_val(lists[c * PROG_NSTREAMS + op->stream], i);
    }
  }
  return lists;
}

void eng_stream_lists_free(const prog_program *p, GArray **lists)
{
  for (guint i = 0; i < p->classes->len * PROG_NSTREAMS; i++)
    g_array_free(lists[i], TRUE);
  g_free(lists);
}

/* ---- schedules ---------------------------------------------------------------------------- */

coll_planner *eng_planner_new(const hw_cluster *hw, const eng_options *o)
{
  return coll_planner_new(hw, o->algo, o->proto, !o->unfold);
}

const coll_schedule *eng_schedule_for(coll_planner *pl, const prog_program *p, const prog_op *op,
                                      int rank, GError **err)
{
  const prog_family *f = g_ptr_array_index(p->families, op->family);
  int group = f->group_of[rank];
  const prog_group *g = g_ptr_array_index(p->groups, group);
  return coll_planner_get(pl, op->coll, g->ranks, g->n, group, op->comm_bytes, NULL, err);
}

/* ---- breakdown ---------------------------------------------------------------------------- */

typedef struct {
  double t;
  int what;  /* -1 compute, else dim */
  int delta; /* +1 start, -1 end */
} eng_edge;

static int eng_edge_cmp(const void *a, const void *b)
{
  const eng_edge *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return x->delta - y->delta; /* ends before starts at the same instant */
}

void eng_breakdown(GArray *spans, double step, eng_result *out)
{
  guint n = spans->len;
  eng_edge *e = g_new(eng_edge, 2 * (gsize)MAX(n, 1u));
  for (guint i = 0; i < n; i++) {
    const eng_span *s = &g_array_index(spans, eng_span, i);
    e[2 * i] = (eng_edge){s->start, s->what, +1};
    e[2 * i + 1] = (eng_edge){s->end, s->what, -1};
  }
  qsort(e, 2 * (size_t)n, sizeof *e, eng_edge_cmp);
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
      else if (any_comm)
        bubble += dt; /* only pipeline transfers or waits in flight */
    }
    prev = e[i].t;
    active[e[i].what + 1] += e[i].delta;
  }
  g_free(e);
  out->compute = compute;
  out->exposed_comm = exposed;
  out->bubble = bubble;
  out->other = MAX(0.0, step - compute - exposed - bubble);
  memcpy(out->comm, comm, sizeof comm);
  memcpy(out->exposed, exp_dim, sizeof exp_dim);
}

static int eng_mem_cmp(const void *a, const void *b)
{
  const eng_mem_event *x = a, *y = b;
  if (x->time != y->time)
    return x->time < y->time ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

double eng_mem_peak(GArray *events, double base, GArray *samples_out, int rank)
{
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
