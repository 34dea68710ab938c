/* Per-step summary of a trace. A step is the window of its ProfilerStep annotation (a CPU-side
 * range; Kineto puts GPU times on the same clock), so the figures of a step add up to its
 * measured duration: compute (any GPU op but NCCL kernels running) + exposed communication
 * (an NCCL kernel running and nothing else) + idle = duration. */
#include "trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

static int trc_cmp_span(const void *a, const void *b)
{
  const trc_span *x = a, *y = b;
  return x->a < y->a ? -1 : x->a > y->a;
}

double trc_spans_merge(GArray *spans)
{
  if (spans->len == 0)
    return 0;
  g_array_sort(spans, trc_cmp_span);
  guint w = 0;
  trc_span *s = (trc_span *)spans->data;
  for (guint i = 1; i < spans->len; i++) {
    if (s[i].a <= s[w].b)
      s[w].b = MAX(s[w].b, s[i].b);
    else
      s[++w] = s[i];
  }
  g_array_set_size(spans, w + 1);
  double total = 0;
  for (guint i = 0; i < spans->len; i++)
    total += s[i].b - s[i].a;
  return total;
}

double trc_spans_overlap(const GArray *x, const GArray *y)
{
  guint i = 0, j = 0;
  double total = 0;
  while (i < x->len && j < y->len) {
    const trc_span *a = &g_array_index(x, trc_span, i), *b = &g_array_index(y, trc_span, j);
    double lo = MAX(a->a, b->a), hi = MIN(a->b, b->b);
    if (hi > lo)
      total += hi - lo;
    if (a->b < b->b)
      i++;
    else
      j++;
  }
  return total;
}

/* The windows: ProfilerSteps, or the span of every GPU op. */
static void trc_windows(const trc_trace *t, trc_summary *out)
{
  out->profiler_steps = t->steps->len > 0;
  for (guint i = 0; i < t->steps->len; i++) {
    const trc_step *s = &g_array_index(t->steps, trc_step, i);
    trc_step_summary w = {.start = s->ts, .duration = s->dur};
    g_snprintf(w.name, sizeof w.name, "ProfilerStep#%d", s->number);
    g_array_append_val(out->steps, w);
  }
  if (out->profiler_steps || t->ops->len == 0)
    return;
  double a = g_array_index(t->ops, trc_gpu_op, 0).ts, b = a;
  for (guint i = 0; i < t->ops->len; i++) {
    const trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
    b = MAX(b, op->ts + op->dur);
  }
  trc_step_summary w = {.start = a, .duration = b - a};
  g_strlcpy(w.name, "whole trace", sizeof w.name);
  g_array_append_val(out->steps, w);
}

static void trc_window_figures(const trc_trace *t, double longest, trc_step_summary *w)
{
  double a = w->start, b = w->start + w->duration;
  GArray *comp = g_array_new(FALSE, FALSE, sizeof(trc_span));
  GArray *comm = g_array_new(FALSE, FALSE, sizeof(trc_span));
  GArray *copy = g_array_new(FALSE, FALSE, sizeof(trc_span));
  /* ops are sorted by start: skip those that ended before the window */
  guint lo = 0, hi = t->ops->len;
  while (lo < hi) {
    guint mid = (lo + hi) / 2;
    if (g_array_index(t->ops, trc_gpu_op, mid).ts < a - longest)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (guint i = lo; i < t->ops->len; i++) {
    const trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
    if (op->ts >= b)
      break;
    trc_span s = {MAX(a, op->ts), MIN(b, op->ts + op->dur)};
    if (s.b <= s.a)
      continue;
    w->by_class[op->kclass] += s.b - s.a;
    g_array_append_val(op->kclass == TRC_NCCL ? comm : comp, s);
    if (op->kind != TRC_OP_KERNEL)
      g_array_append_val(copy, s);
  }
  w->compute = trc_spans_merge(comp);
  w->comm = trc_spans_merge(comm);
  w->overlap = trc_spans_overlap(comp, comm);
  w->exposed_comm = w->comm - w->overlap;
  w->memcpy = trc_spans_merge(copy);
  w->idle = MAX(0.0, w->duration - w->compute - w->exposed_comm);
  g_array_free(comp, TRUE);
  g_array_free(comm, TRUE);
  g_array_free(copy, TRUE);
}

static void trc_nccl_stats(const trc_trace *t, GArray *out)
{
  for (guint i = 0; i < t->ops->len; i++) {
    const trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
    if (op->kclass != TRC_NCCL)
      continue;
    trc_nccl_stat s = {.coll = (trc_nccl_coll)op->coll};
    trc_nccl_parse_name(op->name, &s.name);
    trc_nccl_stat *found = NULL;
    for (guint k = 0; k < out->len && !found; k++) {
      trc_nccl_stat *x = &g_array_index(out, trc_nccl_stat, k);
      if (x->coll == s.coll && memcmp(&x->name, &s.name, sizeof s.name) == 0)
        found = x;
    }
    if (!found) {
      g_array_append_val(out, s);
      found = &g_array_index(out, trc_nccl_stat, out->len - 1);
    }
    found->count++;
    found->total += op->dur * 1e-6;
  }
}

static int trc_cmp_stat(const void *a, const void *b)
{
  const trc_kernel_stat *x = a, *y = b;
  return x->total > y->total ? -1 : x->total < y->total;
}

static void trc_kernel_stats(const trc_trace *t, trc_summary *out)
{
  GHashTable *at = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < t->ops->len; i++) {
    const trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
    out->by_class[op->kclass] += op->dur;
    out->counts[op->kclass]++;
    if (op->kclass == TRC_NCCL)
      out->nccl_counts[MIN(op->coll, TRC_NCCL_UNKNOWN)]++;
    guint k = GPOINTER_TO_UINT(g_hash_table_lookup(at, op->name));
    if (!k) {
      trc_kernel_stat s = {.name = op->name, .kclass = op->kclass};
      g_array_append_val(out->kernels, s);
      k = out->kernels->len;
      g_hash_table_insert(at, (gpointer)op->name, GUINT_TO_POINTER(k));
    }
    trc_kernel_stat *s = &g_array_index(out->kernels, trc_kernel_stat, k - 1);
    s->count++;
    s->total += op->dur;
  }
  g_hash_table_destroy(at);
  g_array_sort(out->kernels, trc_cmp_stat);
}

/* Microseconds of the trace to seconds. */
static void trc_to_seconds(trc_summary *s, double origin)
{
  for (int c = 0; c < TRC_NCLASSES; c++)
    s->by_class[c] *= 1e-6;
  for (guint i = 0; i < s->kernels->len; i++)
    g_array_index(s->kernels, trc_kernel_stat, i).total *= 1e-6;
  for (guint i = 0; i < s->steps->len; i++) {
    trc_step_summary *w = &g_array_index(s->steps, trc_step_summary, i);
    w->start = (w->start - origin) * 1e-6;
    w->duration *= 1e-6;
    w->compute *= 1e-6;
    w->comm *= 1e-6;
    w->exposed_comm *= 1e-6;
    w->overlap *= 1e-6;
    w->idle *= 1e-6;
    w->memcpy *= 1e-6;
    for (int c = 0; c < TRC_NCLASSES; c++)
      w->by_class[c] *= 1e-6;
  }
}

void trc_summarize(const trc_trace *t, trc_summary *out)
{
  memset(out, 0, sizeof *out);
  out->steps = g_array_new(FALSE, TRUE, sizeof(trc_step_summary));
  out->kernels = g_array_new(FALSE, TRUE, sizeof(trc_kernel_stat));
  out->nccl = g_array_new(FALSE, TRUE, sizeof(trc_nccl_stat));
  trc_nccl_stats(t, out->nccl);
  trc_windows(t, out);
  double longest = 0;
  for (guint i = 0; i < t->ops->len; i++)
    longest = MAX(longest, g_array_index(t->ops, trc_gpu_op, i).dur);
  for (guint i = 0; i < out->steps->len; i++)
    trc_window_figures(t, longest, &g_array_index(out->steps, trc_step_summary, i));
  trc_kernel_stats(t, out);
  trc_to_seconds(out, out->steps->len ? g_array_index(out->steps, trc_step_summary, 0).start : 0);
}

void trc_summary_clear(trc_summary *s)
{
  if (s->steps)
    g_array_free(s->steps, TRUE);
  if (s->kernels)
    g_array_free(s->kernels, TRUE);
  if (s->nccl)
    g_array_free(s->nccl, TRUE);
  memset(s, 0, sizeof *s);
}
