/* The analytic engine: list scheduling of the DAG with closed-form costs.
 *
 * It follows one unit per class (its representative rank): all ranks of a class are assumed to
 * run identically, which holds without contention. A collective starts when every class of its
 * group has reached it (matched by the group and the number of earlier ops on that group), and
 * lasts its schedule's analytic time. If some group would need a rank that is not its class's
 * representative, every rank becomes its own unit. */
#include "engine/engine_internal.h"

#include <math.h>
#include <string.h>

typedef struct {
  int rank, cls;
  guint pos[PROG_NSTREAMS];    /* next op of each stream (index into stream lists) */
  double free_at[PROG_NSTREAMS];
  double *end;                 /* per op, NAN until done */
  GHashTable *seq;             /* group -> ops already issued on it */
  GArray *spans;               /* eng_span */
  GArray *mem;                 /* eng_mem_event */
  double finish;
} an_unit;

typedef struct {
  double arrived_max;
  int arrived;
  int needed;
  GPtrArray *waiting; /* an_unit* */
} an_instance;

typedef struct {
  const prog_program *p;
  const hw_cluster *hw;
  const eng_options *opt;
  coll_planner *planner;
  GError *error; /* the first planning failure */
  an_unit *units;
  int nunits;
  int *unit_of_rank;   /* -1 when a rank has no unit */
  GArray **stream_ops; /* per class per stream: op indices */
  GHashTable *instances; /* (group, seq) -> an_instance */
  GHashTable *group_units; /* group -> GArray of unit indices */
  eng_result *out;
} an_state;

/* True when every group used by a representative contains the representatives of all the
 * classes it touches. */
static bool an_reps_suffice(const prog_program *p)
{
  for (guint c = 0; c < p->classes->len; c++) {
    const prog_class *k = prog_class_at(p, (int)c);
    for (guint i = 0; i < k->ops->len; i++) {
      const prog_op *op = &g_array_index(k->ops, prog_op, i);
      if (op->kind != PROG_COMM)
        continue;
      const prog_group *g = prog_group_of(p, op->family, k->rep);
      for (int m = 0; m < g->n; m++) {
        int rep = prog_class_at(p, p->class_of[g->ranks[m]])->rep;
        bool found = false;
        for (int j = 0; j < g->n && !found; j++)
          found = g->ranks[j] == rep;
        if (!found)
          return false;
      }
    }
  }
  return true;
}

static void an_units_init(an_state *st)
{
  const prog_program *p = st->p;
  bool reps = an_reps_suffice(p);
  st->nunits = reps ? (int)p->classes->len : p->nranks;
  st->units = g_new0(an_unit, st->nunits);
  st->unit_of_rank = g_new(int, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    st->unit_of_rank[r] = reps ? p->class_of[r] : r;
  for (int u = 0; u < st->nunits; u++) {
    an_unit *x = &st->units[u];
    x->cls = reps ? u : p->class_of[u];
    x->rank = reps ? prog_class_at(p, u)->rep : u;
    guint nops = prog_class_at(p, x->cls)->ops->len;
    x->end = g_new(double, MAX(nops, 1u));
    for (guint i = 0; i < nops; i++)
      x->end[i] = NAN;
    x->seq = g_hash_table_new(g_direct_hash, g_direct_equal);
    x->spans = g_array_new(FALSE, FALSE, sizeof(eng_span));
    x->mem = g_array_new(FALSE, FALSE, sizeof(eng_mem_event));
  }
}

static GArray *an_units_of_group(an_state *st, int group)
{
  GArray *u = g_hash_table_lookup(st->group_units, GINT_TO_POINTER(group));
  if (u)
    return u;
  const prog_group *g = g_ptr_array_index(st->p->groups, group);
  u = g_array_new(FALSE, FALSE, sizeof(int));
  for (int m = 0; m < g->n; m++) {
    int unit = st->unit_of_rank[g->ranks[m]];
    bool dup = false;
    for (guint j = 0; j < u->len && !dup; j++)
      dup = g_array_index(u, int, j) == unit;
    if (!dup)
      g_array_append_val(u, unit);
  }
  g_hash_table_insert(st->group_units, GINT_TO_POINTER(group), u);
  return u;
}

static void an_finish_op(an_state *st, an_unit *u, uint32_t idx, double start, double end)
{
  const prog_op *op = prog_op_at(st->p, u->cls, idx);
  u->end[idx] = end;
  u->pos[op->stream]++;
  u->free_at[op->stream] = end;
  u->finish = MAX(u->finish, end);
  if (op->kind != PROG_MEM && end > start) {
    eng_span s = {.start = start, .end = end, .what = op->kind == PROG_COMM ? (int)op->dim : -1};
    g_array_append_val(u->spans, s);
  }
  if (st->opt->trace) {
    eng_event e = {.rank = u->rank, .stream = op->stream, .kind = op->kind, .dim = op->dim,
                   .name = op->name, .start = start, .end = end};
    g_array_append_val(st->out->events, e);
  }
}

typedef struct {
  int group;
  int seq;
} an_key;

static guint an_key_hash(gconstpointer k)
{
  const an_key *x = k;
  return (guint)x->group * 2654435761u ^ (guint)x->seq;
}

static gboolean an_key_equal(gconstpointer a, gconstpointer b)
{
  const an_key *x = a, *y = b;
  return x->group == y->group && x->seq == y->seq;
}

static void an_instance_free(gpointer p)
{
  an_instance *in = p;
  g_ptr_array_free(in->waiting, TRUE);
  g_free(in);
}

/* A unit reached a collective at time `ready`. Returns true if it could complete it now. */
static bool an_arrive(an_state *st, an_unit *u, uint32_t idx, double ready)
{
  const prog_op *op = prog_op_at(st->p, u->cls, idx);
  const prog_family *f = g_ptr_array_index(st->p->families, op->family);
  int group = f->group_of[u->rank];
  GArray *members = an_units_of_group(st, group);
  const coll_schedule *s = eng_schedule_for(st->planner, st->p, op, u->rank,
                                            st->error ? NULL : &st->error);
  if (!s)
    return false;
  double dur = op->count * s->time;
  if (members->len == 1) {
    an_finish_op(st, u, idx, ready, ready + dur);
    return true;
  }
  int seq = GPOINTER_TO_INT(g_hash_table_lookup(u->seq, GINT_TO_POINTER(group)));
  an_key key = {.group = group, .seq = seq};
  an_instance *in = g_hash_table_lookup(st->instances, &key);
  if (!in) {
    in = g_new0(an_instance, 1);
    in->needed = (int)members->len;
    in->waiting = g_ptr_array_new();
    g_hash_table_insert(st->instances, g_memdup2(&key, sizeof key), in);
  }
  for (guint i = 0; i < in->waiting->len; i++)
    if (g_ptr_array_index(in->waiting, i) == u)
      return false; /* already waiting */
  g_ptr_array_add(in->waiting, u);
  in->arrived++;
  in->arrived_max = MAX(in->arrived_max, ready);
  if (in->arrived < in->needed)
    return false;
  for (guint i = 0; i < in->waiting->len; i++) {
    an_unit *w = g_ptr_array_index(in->waiting, i);
    uint32_t widx = g_array_index(st->stream_ops[w->cls * PROG_NSTREAMS + op->stream], uint32_t,
                                  w->pos[op->stream]);
    g_hash_table_insert(w->seq, GINT_TO_POINTER(group), GINT_TO_POINTER(seq + 1));
    an_finish_op(st, w, widx, in->arrived_max, in->arrived_max + dur);
  }
  g_hash_table_remove(st->instances, &key);
  return true;
}

/* Advances one stream of a unit as far as its dependencies allow. */
static bool an_advance(an_state *st, an_unit *u, int stream)
{
  GArray *list = st->stream_ops[u->cls * PROG_NSTREAMS + stream];
  bool progress = false;
  while (u->pos[stream] < list->len) {
    uint32_t idx = g_array_index(list, uint32_t, u->pos[stream]);
    const prog_op *op = prog_op_at(st->p, u->cls, idx);
    const uint32_t *deps = prog_op_deps(st->p, u->cls, op);
    double ready = u->free_at[stream];
    for (uint32_t d = 0; d < op->ndeps; d++) {
      if (isnan(u->end[deps[d]]))
        return progress;
      ready = MAX(ready, u->end[deps[d]]);
    }
    if (op->kind == PROG_COMPUTE) {
      an_finish_op(st, u, idx, ready, ready + eng_compute_time(st->hw, op));
    } else if (op->kind == PROG_MEM) {
      eng_mem_event m = {.time = ready, .delta = op->mem_delta, .seq = idx};
      g_array_append_val(u->mem, m);
      an_finish_op(st, u, idx, ready, ready);
    } else if (!an_arrive(st, u, idx, ready)) {
      return progress;
    }
    progress = true;
  }
  return progress;
}

static bool an_all_done(const an_state *st)
{
  for (int u = 0; u < st->nunits; u++)
    for (int s = 0; s < PROG_NSTREAMS; s++)
      if (st->units[u].pos[s] < st->stream_ops[st->units[u].cls * PROG_NSTREAMS + s]->len)
        return false;
  return true;
}

static void an_collect(an_state *st)
{
  eng_result *out = st->out;
  int crit = 0;
  for (int u = 1; u < st->nunits; u++)
    if (st->units[u].finish > st->units[crit].finish)
      crit = u;
  out->step_time = st->units[crit].finish;
  out->critical_rank = st->units[crit].rank;
  eng_breakdown(st->units[crit].spans, out->step_time, out);
  out->nclasses = (int)st->p->classes->len;
  out->class_peak = g_new0(double, out->nclasses);
  for (int u = 0; u < st->nunits; u++) {
    an_unit *x = &st->units[u];
    double peak = eng_mem_peak(x->mem, prog_class_at(st->p, x->cls)->base_memory, out->mem_samples, x->rank);
    out->class_peak[x->cls] = MAX(out->class_peak[x->cls], peak);
    out->peak_memory = MAX(out->peak_memory, peak);
  }
}

static void an_state_free(an_state *st)
{
  for (int u = 0; u < st->nunits; u++) {
    g_free(st->units[u].end);
    g_hash_table_destroy(st->units[u].seq);
    g_array_free(st->units[u].spans, TRUE);
    g_array_free(st->units[u].mem, TRUE);
  }
  g_free(st->units);
  g_free(st->unit_of_rank);
  eng_stream_lists_free(st->p, st->stream_ops);
  g_hash_table_destroy(st->instances);
  g_hash_table_destroy(st->group_units);
  coll_planner_free(st->planner);
}

static void an_group_units_free(gpointer a)
{
  g_array_free(a, TRUE);
}

bool eng_run_analytic(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                      eng_result *out, GError **err)
{
  an_state st = {.p = p, .hw = hw, .opt = opt, .out = out};
  st.planner = eng_planner_new(hw, opt);
  st.stream_ops = eng_stream_lists(p);
  st.instances = g_hash_table_new_full(an_key_hash, an_key_equal, g_free, an_instance_free);
  st.group_units = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, an_group_units_free);
  if (opt->trace) {
    out->events = g_array_new(FALSE, FALSE, sizeof(eng_event));
    out->mem_samples = g_array_new(FALSE, FALSE, sizeof(eng_mem_sample));
  }
  an_units_init(&st);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int u = 0; u < st.nunits; u++)
      for (int s = 0; s < PROG_NSTREAMS; s++)
        progress |= an_advance(&st, &st.units[u], s);
  }
  bool ok = an_all_done(&st);
  if (ok)
    an_collect(&st);
  else if (st.error)
    g_propagate_error(err, g_steal_pointer(&st.error));
  else
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                "analytic engine: the program deadlocks (collectives issued in different orders "
                "on the ranks of a group)");
  g_clear_error(&st.error);
  an_state_free(&st);
  return ok;
}
