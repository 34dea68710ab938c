/* Enumerating the layouts, keeping the best estimates, refining them with the engines. */
#include "planner/planner_internal.h"

#include "lifecycle/lifecycle.h"
#include "memory/memory.h"
#include "run/run.h"
#include "units/units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void plan_pins_init(plan_pins *p)
{
  int *v = &p->tp;
  for (size_t i = 0; i < sizeof *p / sizeof(int); i++)
    v[i] = -1;
}

bool plan_pins_parse(plan_pins *p, const char *text, GError **err)
{
  static const char *const keys[] = {"tp", "cp", "pp", "ep", "micro_batch", "virtual_stages",
                                     "zero", "recompute", "sequence_parallel", "placement"};
  g_auto(GStrv) kv = g_strsplit(text, "=", 2);
  int *slots = &p->tp;
  for (size_t i = 0; kv[1] && i < G_N_ELEMENTS(keys); i++) {
    if (strcmp(kv[0], keys[i]) != 0)
      continue;
    int v = -1;
    if (i == 7) {
      cfg_recompute r;
      v = cfg_recompute_parse(kv[1], &r) ? (int)r : -1;
    } else if (i == 8) {
      v = strcmp(kv[1], "true") == 0 ? 1 : strcmp(kv[1], "false") == 0 ? 0 : -1;
    } else if (i == 9) {
      v = strcmp(kv[1], "pp-outer") == 0 ? 1 : strcmp(kv[1], "pp-inner") == 0 ? 0 : -1;
    } else {
      char *end = NULL;
      long x = strtol(kv[1], &end, 10);
      v = end && !*end && x >= 0 && x < 1 << 20 ? (int)x : -1;
    }
    if (v < 0) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--fix %s: '%s' is not a value of %s%s", text,
                  kv[1], keys[i],
                  i == 7 ? " (none, selective, full)" : i == 8 ? " (true, false)"
                         : i == 9 ? " (pp-inner, pp-outer)" : " (a number)");
      return false;
    }
    slots[i] = v;
    return true;
  }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "--fix %s: expected KEY=VALUE with KEY one of tp, cp, pp, ep, micro_batch, "
              "virtual_stages, zero, recompute, sequence_parallel, placement", text);
  return false;
}

static bool plan_pinned_out(int pin, int v)
{
  return pin >= 0 && pin != v;
}

/* Options of one dimension. */
typedef struct {
  int v[16];
  int n;
} plan_choices;

static void plan_add(plan_choices *c, int v)
{
  if (c->n < 16)
    c->v[c->n++] = v;
}

/* 1, 2, 4, ... up to max that divide n. */
static plan_choices plan_pow2(int n, int max)
{
  plan_choices c = {0};
  for (int v = 1; v <= max && v <= n; v *= 2)
    if (n % v == 0)
      plan_add(&c, v);
  return c;
}

/* Every divisor of n up to max (pipeline depths need not be powers of 2). */
static plan_choices plan_divisors(int n, int max)
{
  plan_choices c = {0};
  for (int v = 1; v <= max && v <= n; v++)
    if (n % v == 0)
      plan_add(&c, v);
  return c;
}

typedef struct {
  plan_setup *s;
  const plan_options *o;
  plan_screen_result *out;
  long index;
  double capacity;
  long total;  /* for the progress report */
  gint64 last_report;
  bool count_only;
} plan_walk;

static int plan_better(const plan_candidate *a, const plan_candidate *b)
{
  if (a->estimate_s != b->estimate_s)
    return a->estimate_s < b->estimate_s ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

static int plan_cmp_estimate(const void *a, const void *b)
{
  return plan_better(a, b);
}

/* Keeps the `keep` best: insertion into a sorted array (keep is small). */
static void plan_keep(GArray *best, const plan_candidate *c, int keep)
{
  guint n = best->len;
  if (keep <= 0)
    return;
  if ((int)n >= keep && plan_better(c, &g_array_index(best, plan_candidate, n - 1)) >= 0)
    return;
  guint at = n;
  while (at > 0 && plan_better(c, &g_array_index(best, plan_candidate, at - 1)) < 0)
    at--;
  g_array_insert_val(best, at, *c);
  if ((int)best->len > keep)
    g_array_set_size(best, (guint)keep);
}

static bool plan_pins_reject(const plan_pins *p, const plan_layout *l)
{
  return plan_pinned_out(p->tp, l->tp) || plan_pinned_out(p->cp, l->cp) ||
         plan_pinned_out(p->pp, l->pp) || plan_pinned_out(p->ep, l->ep) ||
         plan_pinned_out(p->micro_batch, l->micro_batch) ||
         plan_pinned_out(p->virtual_stages, l->virtual_stages) ||
         plan_pinned_out(p->zero, l->zero) || plan_pinned_out(p->recompute, (int)l->recompute) ||
         plan_pinned_out(p->sequence_parallel, l->sequence_parallel) ||
         plan_pinned_out(p->pipeline_outer, l->pipeline_outer);
}

static void plan_visit(plan_walk *wk, const plan_layout *l)
{
  if (plan_pins_reject(&wk->o->pins, l))
    return;
  long index = wk->index++;
  if (wk->count_only || index % wk->o->nshards != wk->o->shard)
    return;
  plan_screen_result *out = wk->out;
  out->candidates++;
  if (wk->o->progress && index % 4096 == 0) {
    gint64 now = g_get_monotonic_time();
    if (now - wk->last_report > 100000) {
      wk->o->progress((double)index / MAX(wk->total, 1), wk->o->progress_ctx);
      wk->last_report = now;
    }
  }
  if (!plan_valid(wk->s, l))
    return;
  cfg_workload w;
  plan_apply(wk->s, l, &w);
  const wl_model *m = plan_model(wk->s, &w, l);
  if (!m)
    return;
  out->valid++;
  double peak = mem_peak_with_model(&w, m);
  if (peak > wk->capacity)
    return;
  out->fits++;
  plan_candidate c = {.l = *l, .index = index, .peak_bytes = peak, .step_time_s = NAN,
                      .des_step_time_s = NAN};
  plan_estimate(wk->s, &w, l, m, &c);
  if (wk->o->tokens_per_gpu) /* the same order for a fixed GPU count, kept for clarity */
    c.estimate_s = 1 / (c.tokens_per_s / wk->s->gpus);
  plan_keep(out->best, &c, plan_pool(wk->o->refine));
}

/* The innermost dimensions: memory and time knobs of one parallel layout. */
static void plan_walk_knobs(plan_walk *wk, plan_layout l)
{
  const cfg_workload *w = wk->s->w;
  /* FlashAttention keeps no attention scores: selective recomputation would change nothing */
  int rc_step = w->training.flash_attention ? 2 : 1;
  plan_choices mb = plan_pow2(wk->s->batch / l.dp, 16);
  int max_v = l.pp > 1 ? 4 : 1, zmax = l.dp * l.cp > 1 ? 3 : 0;
  for (int a = 0; a < mb.n; a++)
    for (int v = 1; v <= max_v; v++)
      for (int z = 0; z <= zmax; z++)
        for (int rc = 0; rc < 3; rc += rc_step)
          for (int sp = 0; sp <= (l.tp > 1); sp++)
            for (int po = 0; po <= (l.pp > 1 && l.dp > 1); po++) {
              l.micro_batch = mb.v[a];
              l.virtual_stages = v;
              l.zero = z;
              l.recompute = (cfg_recompute)rc;
              l.sequence_parallel = sp;
              l.pipeline_outer = po;
              plan_visit(wk, &l);
            }
}

/* Every layout: TP (innermost), CP, PP, DP the rest, EP out of DP for a mixture of experts. */
static void plan_walk_all(plan_walk *wk)
{
  const cfg_workload *w = wk->s->w;
  int gpus = wk->s->gpus, gpn = MAX(wk->s->c->node.nvlink_domain, wk->s->c->node.gpus_per_node);
  bool moe = w->model.kind == CFG_MODEL_MOE_TRANSFORMER;
  /* tensor parallelism up to two NVLink domains: the slow cases show why it stays inside one */
  plan_choices tp = plan_pow2(gpus, 2 * gpn);
  for (int a = 0; a < tp.n; a++) {
    plan_choices cp = plan_pow2(gpus / tp.v[a], w->training.flash_attention ? 16 : 1);
    for (int b = 0; b < cp.n; b++) {
      plan_choices pp = plan_divisors(gpus / (tp.v[a] * cp.v[b]), MIN(w->model.layers, 128));
      for (int c = 0; c < pp.n; c++) {
        int dp = gpus / (tp.v[a] * cp.v[b] * pp.v[c]);
        plan_choices ep = moe ? plan_pow2(dp, w->model.moe.experts) : (plan_choices){{1}, 1};
        for (int d = 0; d < ep.n; d++) {
          plan_layout l = {.tp = tp.v[a], .cp = cp.v[b], .pp = pp.v[c], .dp = dp, .ep = ep.v[d]};
          plan_walk_knobs(wk, l);
        }
      }
    }
  }
}

bool plan_screen(plan_setup *s, const plan_options *o, plan_screen_result *out, GError **err)
{
  (void)err;
  memset(out, 0, sizeof *out);
  out->best = g_array_new(FALSE, FALSE, sizeof(plan_candidate));
  gint64 t0 = g_get_monotonic_time();
  plan_walk wk = {.s = s, .o = o, .out = out, .capacity = s->c->gpu.memory};
  if (o->progress) { /* a dry walk to know the total */
    plan_walk d = {.s = s, .o = o, .out = out, .count_only = true};
    plan_walk_all(&d);
    wk.total = d.index;
  }
  plan_walk_all(&wk);
  if (o->progress)
    o->progress(1, o->progress_ctx);
  out->elapsed_s = (double)(g_get_monotonic_time() - t0) / 1e6;
  return true;
}

int plan_pool(int refine)
{
  return 2 * refine;
}

void plan_merge(plan_screen_result *into, const plan_screen_result *other, int pool)
{
  into->candidates += other->candidates;
  into->valid += other->valid;
  into->fits += other->fits;
  into->elapsed_s = MAX(into->elapsed_s, other->elapsed_s);
  for (guint i = 0; i < other->best->len; i++)
    plan_keep(into->best, &g_array_index(other->best, plan_candidate, i), pool);
}

void plan_screen_clear(plan_screen_result *r)
{
  if (r->best)
    g_array_free(r->best, TRUE);
  memset(r, 0, sizeof *r);
}

/* ---- refinement --------------------------------------------------------------------------- */

/* The run estimate of a simulated layout, for ranking by it. */
static bool plan_estimate_run(const sim_result *run, plan_candidate *c, GError **err)
{
  lc_run life;
  if (!lc_estimate(run, &life, err))
    return false;
  c->time_to_train_s = life.t.wall;
  c->energy_kwh = life.energy_kwh;
  c->cost_usd = life.cost_usd;
  return true;
}

/* The refined layouts' analytic runs share one cache: the hardware, and the plan of every
 * group two layouts both have (a data-parallel group is the same ranks whatever the pipeline
 * depth next to it). */
static sim_cache *plan_runs_cache(plan_setup *s, GError **err)
{
  if (!s->runs)
    s->runs = sim_cache_new(s->c, s->w, err);
  return s->runs;
}

bool plan_simulate(plan_setup *s, const plan_options *po, plan_candidate *c, eng_kind kind,
                   bool whole, GError **err)
{
  cfg_workload w;
  plan_apply(s, &c->l, &w);
  sim_options o = sim_options_for(kind);
  if (kind == ENG_ANALYTIC && !po->fresh_runs && !(o.cache = plan_runs_cache(s, err)))
    return false;
  sim_result run;
  bool ok = sim_run(s->c, &w, &o, &run, err);
  if (ok && kind == ENG_ANALYTIC && whole)
    ok = plan_estimate_run(&run, c, err);
  if (ok && kind == ENG_DES) {
    c->des_step_time_s = run.step_time;
  } else if (ok) {
    c->step_time_s = run.step_time;
    c->mfu = run.mfu;
    c->tokens_per_s = run.tokens_per_s;
    c->peak_bytes = run.peak_bytes;
    c->compute_s = run.eng.compute;
    c->exposed_comm_s = run.eng.exposed_comm;
    c->bubble_s = run.eng.bubble;
    c->other_s = run.eng.other;
    memcpy(c->exposed, run.eng.exposed, sizeof c->exposed);
  }
  sim_result_clear(&run);
  return ok;
}

double plan_run_value(const plan_candidate *c, plan_run_objective by)
{
  switch (by) {
  case PLAN_BY_COST:
    return c->cost_usd;
  case PLAN_BY_ENERGY:
    return c->energy_kwh;
  case PLAN_BY_TIME_TO_TRAIN:
    return c->time_to_train_s;
  default:
    return c->step_time_s;
  }
}

int plan_cmp_objective(const plan_candidate *x, const plan_candidate *y, plan_run_objective by)
{
  double a = plan_run_value(x, by), b = plan_run_value(y, by);
  if (a != b)
    return a < b ? -1 : 1;
  if (x->step_time_s != y->step_time_s)
    return x->step_time_s < y->step_time_s ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static gint plan_cmp_with(gconstpointer a, gconstpointer b, gpointer by)
{
  return plan_cmp_objective(a, b, (plan_run_objective)GPOINTER_TO_INT(by));
}

/* The knobs (beyond the parallel sizes) in which `b` differs from `a`, as b's values read in a
 * layout ("ZeRO-1 + PP inner"); returns how many (-1: the parallel sizes differ). */
static int plan_knobs(const plan_layout *a, const plan_layout *b, char *buf, size_t n)
{
  static const char *const rc[] = {"no recompute", "selective", "full recompute"};
  if (a->tp != b->tp || a->cp != b->cp || a->pp != b->pp || a->dp != b->dp)
    return -1;
  GString *d = g_string_new(NULL);
  int count = 0;
  const char *sep = " + ";
#define PLAN_KNOB(cond, ...)                                                                     \
  if (cond) {                                                                                    \
    g_string_append_printf(d, "%s", count++ ? sep : "");                                         \
    g_string_append_printf(d, __VA_ARGS__);                                                      \
  }
  PLAN_KNOB(a->ep != b->ep, "EP %d", b->ep)
  PLAN_KNOB(a->micro_batch != b->micro_batch, "mb %d", b->micro_batch)
  PLAN_KNOB(a->virtual_stages != b->virtual_stages, "x%d interleaving", b->virtual_stages)
  PLAN_KNOB(a->zero != b->zero, "ZeRO-%d", b->zero)
  PLAN_KNOB(a->recompute != b->recompute, "%s", rc[b->recompute])
  PLAN_KNOB(a->sequence_parallel != b->sequence_parallel, "%s",
            b->sequence_parallel ? "SP" : "no SP")
  PLAN_KNOB(a->pipeline_outer != b->pipeline_outer, "%s",
            b->pipeline_outer ? "PP outer" : "PP inner")
#undef PLAN_KNOB
  g_strlcpy(buf, d->str, n);
  g_string_free(d, TRUE);
  return count;
}

static bool plan_close(double a, double b)
{
  return fabs(a - b) <= 1e-4 * MAX(fabs(a), fabs(b));
}

/* A simulated layout and the row of the table it shows in. */
typedef struct {
  plan_layout l;
  double step;
  guint row;
} plan_seen;

/* Appends to row k's note that `c`'s layout runs the same (with its memory if that differs). */
static void plan_note_same(plan_candidate *k, const plan_candidate *c)
{
  char knobs[64];
  plan_knobs(&k->l, &c->l, knobs, sizeof knobs);
  g_autofree char *note = NULL;
  if (plan_close(k->peak_bytes, c->peak_bytes)) {
    note = g_strdup(knobs);
  } else {
    g_autofree char *mem = units_format_bytes(c->peak_bytes);
    note = g_strdup_printf("%s (%s)", knobs, mem);
  }
  size_t len = strlen(k->same);
  if (len + strlen(note) + 3 < sizeof k->same)
    g_snprintf(k->same + len, sizeof k->same - len, "%s%s", len ? ", " : "", note);
}

/* Collapses `c` into the row of a simulated layout one knob away that runs the same step
 * (within 0.01 %): that knob changes nothing, or only memory, so the table shows one row,
 * the layout that needs less memory, with the others noted. Returns whether it did. */
static bool plan_collapse(GArray *kept, GArray *seen, const plan_candidate *c)
{
  for (guint i = 0; i < seen->len; i++) {
    const plan_seen *x = &g_array_index(seen, plan_seen, i);
    char knob[64];
    if (!plan_close(x->step, c->step_time_s) || plan_knobs(&x->l, &c->l, knob, sizeof knob) != 1)
      continue;
    plan_candidate *k = &g_array_index(kept, plan_candidate, x->row);
    bool swap = c->peak_bytes < k->peak_bytes && !plan_close(k->peak_bytes, c->peak_bytes);
    if (swap && k->same[0])
      continue; /* the notes so far are relative to k's layout */
    plan_seen mine = {.l = c->l, .step = c->step_time_s, .row = x->row};
    g_array_append_val(seen, mine);
    if (swap) {
      plan_candidate old = *k;
      *k = *c;
      plan_note_same(k, &old);
    } else {
      plan_note_same(k, c);
    }
    return true;
  }
  return false;
}

typedef struct {
  char what[40];
  double delta;
} plan_part;

static int plan_cmp_part(const void *a, const void *b)
{
  double x = fabs(((const plan_part *)a)->delta), y = fabs(((const plan_part *)b)->delta);
  return x > y ? -1 : x < y;
}

/* The dimension whose exposed communication changed most (pipeline transfers count as bubble
 * in the breakdown, so not them). */
static const char *plan_exposed_dim(const plan_candidate *best, const plan_candidate *c)
{
  static const char *names[] = {"TP", "CP", "PP", "DP", "EP"};
  int top = -1;
  for (int d = 0; d < PROG_NDIMS; d++)
    if (d != PROG_DIM_PP && (top < 0 || fabs(c->exposed[d] - best->exposed[d]) >
                                            fabs(c->exposed[top] - best->exposed[top])))
      top = d;
  return names[top];
}

/* "+21.510 ms", "-1.241 s" */
static void plan_append_delta(GString *w, double v)
{
  g_autofree char *t = units_format_seconds(fabs(v));
  g_string_append_printf(w, "%c%s", v < 0 ? '-' : '+', t);
}

/* What a runner-up loses against the best: the difference of the step, then the parts of the
 * breakdown that make it, largest first (compute, exposed communication, bubble and other add
 * up to the step, so they add up to the difference); parts under 0.01 % of the step are left
 * out, and what they sum to is "the rest" when it is not itself that small. */
static void plan_explain(const plan_candidate *best, plan_candidate *c)
{
  double total = c->step_time_s - best->step_time_s, tiny = 1e-4 * best->step_time_s;
  plan_part parts[4] = {{"compute", c->compute_s - best->compute_s},
                        {"", c->exposed_comm_s - best->exposed_comm_s},
                        {"pipeline bubble", c->bubble_s - best->bubble_s},
                        {"other", c->other_s - best->other_s}};
  g_snprintf(parts[1].what, sizeof parts[1].what, "exposed comm (mostly %s)",
             plan_exposed_dim(best, c));
  qsort(parts, G_N_ELEMENTS(parts), sizeof *parts, plan_cmp_part);
  GString *w = g_string_new(NULL);
  if (fabs(total) < tiny) {
    g_string_append(w, "ties with #1 (within 0.01 %)");
  } else {
    plan_append_delta(w, total);
    g_string_append(w, " =");
    double listed = 0;
    int shown = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(parts) && fabs(parts[i].delta) >= tiny; i++) {
      g_string_append_printf(w, "%s %s ", shown++ ? "," : "", parts[i].what);
      plan_append_delta(w, parts[i].delta);
      listed += parts[i].delta;
    }
    if (fabs(total - listed) >= tiny) {
      g_string_append_printf(w, "%s the rest ", shown ? "," : "");
      plan_append_delta(w, total - listed);
    }
  }
  g_strlcpy(c->why, w->str, sizeof c->why);
  g_string_free(w, TRUE);
}

bool plan_refine(plan_setup *s, const plan_options *o, plan_screen_result *r, GError **err)
{
  GArray *pool = r->best;
  if (pool->len > 1) /* an empty GArray's data is NULL, which qsort must not get */
    qsort(pool->data, pool->len, sizeof(plan_candidate), plan_cmp_estimate);
  GArray *kept = g_array_new(FALSE, FALSE, sizeof(plan_candidate));
  GArray *seen = g_array_new(FALSE, FALSE, sizeof(plan_seen));
  bool ok = true;
  for (guint i = 0; ok && i < pool->len && (int)kept->len < o->refine; i++) {
    plan_candidate *c = &g_array_index(pool, plan_candidate, i);
    c->time_to_train_s = c->energy_kwh = c->cost_usd = NAN;
    ok = plan_simulate(s, o, c, ENG_ANALYTIC, o->by_run != PLAN_BY_STEP, err);
    r->simulated++;
    if (ok && !plan_collapse(kept, seen, c)) {
      plan_seen mine = {.l = c->l, .step = c->step_time_s, .row = kept->len};
      g_array_append_val(seen, mine);
      g_array_append_val(kept, *c);
    }
  }
  g_array_free(seen, TRUE);
  g_array_free(pool, TRUE);
  if (!ok) {
    g_array_free(kept, TRUE);
    r->best = g_array_new(FALSE, FALSE, sizeof(plan_candidate));
    return false;
  }
  r->best = kept;
  g_array_sort_with_data(kept, plan_cmp_with, GINT_TO_POINTER(o->by_run));
  if (!plan_confirm(s, o, kept, err))
    return false;
  plan_rank(kept, o->by_run);
  return true;
}

/* What a runner-up's run costs more than the first's, before its step's explanation. */
static void plan_explain_run(const plan_candidate *best, plan_candidate *c, plan_run_objective by)
{
  double d = plan_run_value(c, by) - plan_run_value(best, by);
  g_autofree char *delta = by == PLAN_BY_COST     ? g_strdup_printf("%c$%.0f", d < 0 ? '-' : '+', fabs(d))
                           : by == PLAN_BY_ENERGY ? g_strdup_printf("%+.3g MWh", d / 1e3)
                                                  : g_strdup_printf("%+.3g days", d / 86400);
  g_autofree char *step = g_strdup(c->why);
  g_snprintf(c->why, sizeof c->why, "%s a run; its step %s", delta, step);
}

void plan_rank(GArray *kept, plan_run_objective by)
{
  g_array_sort_with_data(kept, plan_cmp_with, GINT_TO_POINTER(by));
  const plan_candidate *best = &g_array_index(kept, plan_candidate, 0);
  for (guint i = 1; i < kept->len; i++) {
    plan_explain(best, &g_array_index(kept, plan_candidate, i));
    if (by != PLAN_BY_STEP)
      plan_explain_run(best, &g_array_index(kept, plan_candidate, i), by);
  }
}
