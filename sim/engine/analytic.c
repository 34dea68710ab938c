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

/* The last collective a unit planned on a family: the next one there is most often the same
 * (every micro-batch sends the same activations), and is then the same schedule and time. */
typedef struct {
  const coll_schedule *s;
  prog_coll coll;
  double bytes, time; /* time: beside its siblings (eng_coll_crowded) */
} an_last_coll;

typedef struct {
  int rank, cls;
  /* its class's ops and dependencies, and each stream's op indices (`nstream` of them), read
   * for every op walked (through the program and its arrays, 3 % of a configuration) */
  const prog_op *ops;
  const uint32_t *deps;
  const uint32_t *stream[PROG_NSTREAMS];
  guint nstream[PROG_NSTREAMS];
  guint pos[PROG_NSTREAMS];    /* next op of each stream (index into stream lists) */
  double free_at[PROG_NSTREAMS];
  bool blocked[PROG_NSTREAMS]; /* waiting in a collective for the other members */
  /* per stream, the position whose op a forking walk's second program moves or inserts before
   * (G_MAXUINT: none) */
  guint fence[PROG_NSTREAMS];
  unsigned live;               /* bit s: stream s has ops left (a class uses a few streams) */
  double *end;                 /* per op, NAN until done */
  uint32_t *seq;               /* per comm op: how many earlier ops of the unit share its group */
  an_last_coll *last;          /* per family */
  eng_span *spans;             /* `nspans` of room for `spans_room` (GLib's append per span
                                * was a twentieth of a run) */
  guint nspans, spans_room;
  /* its collectives that later compute may meet: `ncomms` of room for `comms_room` (GLib's
   * append per collective was a fortieth of a run) */
  eng_interval *comms;
  guint ncomms, comms_room;
  double hidden[PROG_NDIMS];   /* collective time run under compute inside macros */
  /* eng_mem_event: room for one per memory op of the class from the start, the first `nmem`
   * filled (an append each, through GLib, was a twentieth of a run) */
  GArray *mem;
  guint nmem;
  double finish;
} an_unit;

typedef struct {
  gint64 key;  /* group << 32 | seq */
  double arrived_max;
  int arrived;
  int needed;
  /* the `arrived` units, with the op each arrived with (the two sides of a send / receive are
   * on different streams); room for `room` (an array: appending to a GArray was a fiftieth
   * of a run) */
  struct an_waiter *waiting;
  int room;
} an_instance;

typedef struct an_waiter {
  an_unit *unit;
  uint32_t idx;
} an_waiter;

/* A group as the walk meets it. */
typedef struct {
  /* its instance in progress: each group's collectives complete in order, so a group has at
   * most one unless its units use it on several streams; those others go to the table */
  an_instance *open;
  GArray *units; /* unit indices, made on first use */
} an_group;

typedef struct {
  const prog_program *p;
  const hw_cluster *hw;
  const eng_options *opt;
  coll_planner *planner;
  eng_costs *costs;
  GError *error; /* the first planning failure */
  an_unit *units;
  int nunits;
  int *unit_of_rank;   /* -1 when a rank has no unit */
  GArray **stream_ops; /* per class per stream: op indices */
  /* per group; made and freed only where the walk met it (zeroing and scanning thousands of
   * groups per run, in two arrays, was a fiftieth of it) */
  an_group *groups;
  GArray *met;           /* int: the groups whose units were made */
  GHashTable *instances; /* (group, seq) -> an_instance: those beside a group's open one */
  guint nhashed;         /* in `instances`: most runs have none, and skip the lookup */
  /* completed instances, reused (thousands a run): a stack of `nspare`, room for
   * `spare_room` (GLib's pointer array was a thirtieth of a run) */
  an_instance **spare;
  guint nspare, spare_room;
  eng_result *out;
  /* where the walk is, for a fork to resume it: the sweep's unit and stream, the progress
   * the sweep made before that call, and inside a compute op's an_advance_beside the streams
   * it has yet to advance (the current one first; 0 outside it) */
  int sweep_unit, sweep_stream;
  bool sweep_progress;
  unsigned beside;
  eng_fork *fork;
} an_state;

/* True when every group a representative uses contains the representatives of all the classes
 * it touches; `used` (per unit, per family) says which families each unit's ops name. */
static bool an_reps_hold(const prog_program *p, const an_unit *units, int nunits, const bool *used)
{
  guint nf = p->families->len;
  for (int u = 0; u < nunits; u++)
    for (guint f = 0; f < nf; f++) {
      if (!used[(gsize)u * nf + f])
        continue;
      const prog_group *g = prog_group_of(p, (int)f, units[u].rank);
      for (int m = 0; m < g->n; m++) {
        int rep = prog_class_at(p, p->class_of[g->ranks[m]])->rep;
        bool found = false;
        for (int j = 0; j < g->n && !found; j++)
          found = g->ranks[j] == rep;
        if (!found)
          return false;
      }
    }
  return true;
}

/* Per family, the first family naming the same group of `rank` (families may share one). */
static int *an_family_slots(const prog_program *p, int rank)
{
  guint nf = p->families->len;
  int *slot = g_new(int, MAX(nf, 1u));
  for (guint f = 0; f < nf; f++) {
    int g = ((const prog_family *)g_ptr_array_index(p->families, f))->group_of[rank];
    slot[f] = (int)f;
    for (guint e = 0; e < f && slot[f] == (int)f; e++)
      if (g >= 0 && ((const prog_family *)g_ptr_array_index(p->families, e))->group_of[rank] == g)
        slot[f] = (int)e;
  }
  return slot;
}

/* A unit's per-op state, in one pass over its class's ops: no end yet, and each collective's
 * order on its group (collectives of one group match by it: their order in the op list, the
 * ops of one group being on one stream), counted per group on the first family naming it (an
 * array per family, where one per group id was zeroed for thousands of groups). Counts the
 * class's memory and compute ops. */
static void an_unit_ops(const prog_program *p, an_unit *x, guint *mems, guint *computes,
                        bool *used)
{
  guint nops = prog_class_at(p, x->cls)->ops->len;
  g_autofree int *slot = an_family_slots(p, x->rank);
  g_autofree uint32_t *count = g_new0(uint32_t, MAX(p->families->len, 1u));
  x->end = g_new(double, MAX(nops, 1u));
  x->seq = g_new(uint32_t, MAX(nops, 1u)); /* set below for each comm op, read for no other */
  guint kinds[PROG_MEM + 1] = {0}; /* not through the pointers, which the stores may alias */
  for (guint i = 0; i < nops; i++) {
    const prog_op *op = &x->ops[i];
    x->end[i] = NAN;
    if (op->kind == PROG_COMM) {
      x->seq[i] = count[slot[op->family]]++;
      used[op->family] = true;
    }
    kinds[op->kind]++;
  }
  *mems = kinds[PROG_MEM];
  *computes = kinds[PROG_COMPUTE];
}

static void an_units_free(an_state *st)
{
  for (int u = 0; u < st->nunits; u++) {
    g_free(st->units[u].end);
    g_free(st->units[u].seq);
    g_free(st->units[u].last);
    g_free(st->units[u].spans);
    g_free(st->units[u].comms);
    g_array_free(st->units[u].mem, TRUE);
  }
  g_clear_pointer(&st->units, g_free);
  g_clear_pointer(&st->unit_of_rank, g_free);
}

static void an_unit_lists(const an_state *st, an_unit *x)
{
  const prog_class *k = prog_class_at(st->p, x->cls);
  x->ops = (const prog_op *)(void *)k->ops->data;
  x->deps = (const uint32_t *)(void *)k->deps->data;
  for (int s = 0; s < PROG_NSTREAMS; s++) {
    const GArray *list = st->stream_ops[x->cls * PROG_NSTREAMS + s];
    x->stream[s] = (const uint32_t *)(void *)list->data;
    x->nstream[s] = list->len;
  }
}

/* One unit per class that ranks run (templates have none) when `reps`, else one per rank;
 * marks in `used` (per unit, per family) the families each unit's ops name. */
static void an_units_make(an_state *st, bool reps, bool *used)
{
  const prog_program *p = st->p;
  g_autofree int *unit_of_class = g_new(int, p->classes->len);
  int nclasses = 0;
  for (guint c = 0; c < p->classes->len; c++)
    unit_of_class[c] = prog_class_at(p, (int)c)->rep >= 0 ? nclasses++ : -1;
  st->nunits = reps ? nclasses : p->nranks;
  st->units = g_new0(an_unit, st->nunits);
  st->unit_of_rank = g_new(int, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    st->unit_of_rank[r] = reps ? unit_of_class[p->class_of[r]] : r;
  for (int u = 0; u < st->nunits; u++) {
    an_unit *x = &st->units[u];
    x->cls = -1;
    for (guint c = 0; reps && c < p->classes->len; c++)
      if (unit_of_class[c] == u)
        x->cls = (int)c;
    if (!reps)
      x->cls = p->class_of[u];
    x->rank = reps ? prog_class_at(p, x->cls)->rep : u;
    for (int s = 0; s < PROG_NSTREAMS; s++)
      x->fence[s] = G_MAXUINT;
    an_unit_lists(st, x);
    guint nops = prog_class_at(p, x->cls)->ops->len, mems, computes;
    an_unit_ops(p, x, &mems, &computes, used + (gsize)u * MAX(p->families->len, 1u));
    x->last = g_new0(an_last_coll, MAX(p->families->len, 1u));
    /* a span an op, and a macro's waits (most have one or two): reserved at once rather than
     * grown and copied */
    x->spans_room = nops + 2 * computes;
    x->spans = g_new(eng_span, x->spans_room);
    x->mem = g_array_sized_new(FALSE, FALSE, sizeof(eng_mem_event), mems);
    g_array_set_size(x->mem, mems);
  }
}

/* Units per class when their representatives suffice, else per rank. Whether they do is read
 * off the families the class units' ops name, found in the pass that makes them (a pass of
 * its own over every op was a hundredth of a run); the rare program they do not suffice for
 * makes its units twice. */
static void an_units_init(an_state *st)
{
  const prog_program *p = st->p;
  gsize nf = MAX(p->families->len, 1u);
  g_autofree bool *used = g_new0(bool, p->classes->len * nf);
  an_units_make(st, true, used);
  if (an_reps_hold(p, st->units, st->nunits, used))
    return;
  an_units_free(st);
  g_free(used);
  used = g_new0(bool, (gsize)p->nranks * nf);
  an_units_make(st, false, used);
}

static GArray *an_units_of_group(an_state *st, int group)
{
  GArray *u = st->groups[group].units;
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
  st->groups[group].units = u;
  g_array_append_val(st->met, group);
  return u;
}

/* Room for `k` more spans of `u`: where the next goes. */
static eng_span *an_spans_room(an_unit *u, guint k)
{
  if (u->nspans + k > u->spans_room) {
    u->spans_room = MAX(2 * u->spans_room, u->nspans + k);
    u->spans = g_renew(eng_span, u->spans, u->spans_room);
  }
  return u->spans + u->nspans;
}

static void an_comms_add(an_unit *u, double start, double end)
{
  if (u->ncomms == u->comms_room) {
    u->comms_room = MAX(16u, 2 * u->comms_room);
    u->comms = g_renew(eng_interval, u->comms, u->comms_room);
  }
  u->comms[u->ncomms++] = (eng_interval){start, end};
}

/* Ends op `idx` (a compute op's spans are already recorded: an_advance). Inline: every op walked
 * ends here (the call was 2 % of a configuration). */
static inline void an_finish_op(an_state *st, an_unit *u, const prog_op *op, uint32_t idx,
                                double start, double end)
{
  u->end[idx] = end;
  u->pos[op->stream]++;
  u->free_at[op->stream] = end;
  u->finish = MAX(u->finish, end);
  if (op->kind == PROG_COMM && end > start) {
    *an_spans_room(u, 1) = (eng_span){start, end, (int)op->dim, op->stream};
    u->nspans++;
    an_comms_add(u, start, end);
  }
  if (st->opt->trace) {
    eng_event e = {.rank = u->rank, .stream = op->stream, .kind = op->kind, .dim = op->dim,
                   .op = idx, .name = op->name, .start = start, .end = end};
    g_array_append_val(st->out->events, e);
  }
}

static void an_instance_free(gpointer p)
{
  an_instance *in = p;
  g_free(in->waiting);
  g_free(in);
}

static an_instance *an_instance_new(an_state *st, gint64 key, int needed)
{
  an_instance *in = st->nspare ? st->spare[--st->nspare] : NULL;
  if (!in)
    in = g_new0(an_instance, 1);
  in->key = key;
  in->needed = needed;
  in->arrived = 0;
  in->arrived_max = 0;
  if (in->room < needed) {
    in->waiting = g_renew(an_waiter, in->waiting, needed);
    in->room = needed;
  }
  int group = (int)(key >> 32);
  if (!st->groups[group].open)
    st->groups[group].open = in;
  else {
    g_hash_table_insert(st->instances, &in->key, in);
    st->nhashed++;
  }
  return in;
}

static an_instance *an_instance_find(an_state *st, gint64 key)
{
  an_instance *in = st->groups[key >> 32].open;
  if (in && in->key == key)
    return in;
  return st->nhashed ? g_hash_table_lookup(st->instances, &key) : NULL;
}

static void an_spare_push(an_state *st, an_instance *in)
{
  if (st->nspare == st->spare_room) {
    st->spare_room = MAX(16u, 2 * st->spare_room);
    st->spare = g_renew(an_instance *, st->spare, st->spare_room);
  }
  st->spare[st->nspare++] = in;
}

/* A completed instance leaves the table for the spares (the table frees none). */
static void an_instance_done(an_state *st, an_instance *in)
{
  int group = (int)(in->key >> 32);
  if (st->groups[group].open == in)
    st->groups[group].open = NULL;
  else {
    g_hash_table_remove(st->instances, &in->key);
    st->nhashed--;
  }
  an_spare_push(st, in);
}

/* A unit reached a collective at time `ready`. Returns true if it could complete it now. */
static bool an_arrive(an_state *st, an_unit *u, uint32_t idx, double ready)
{
  const prog_op *op = &u->ops[idx];
  const prog_family *f = g_ptr_array_index(st->p->families, op->family);
  int group = f->group_of[u->rank];
  an_last_coll *last = &u->last[op->family];
  if (!last->s || last->coll != op->coll || last->bytes != op->comm_bytes) {
    const coll_schedule *s = eng_schedule_for(st->planner, st->p, op, u->rank,
                                              st->error ? NULL : &st->error);
    if (!s)
      return false;
    *last = (an_last_coll){.s = s, .coll = op->coll, .bytes = op->comm_bytes,
                           .time = eng_coll_crowded(st->costs, op, u->rank, s)};
  }
  double dur = op->count * last->time;
  GArray *members = an_units_of_group(st, group);
  if (members->len == 1) {
    an_finish_op(st, u, op, idx, ready, ready + dur);
    return true;
  }
  gint64 key = (gint64)group << 32 | u->seq[idx];
  an_instance *in = an_instance_find(st, key);
  if (!in)
    in = an_instance_new(st, key, (int)members->len);
  for (int i = 0; i < in->arrived; i++)
    if (in->waiting[i].unit == u)
      return false; /* already waiting */
  an_waiter me = {.unit = u, .idx = idx};
  in->waiting[in->arrived++] = me;
  in->arrived_max = MAX(in->arrived_max, ready);
  if (in->arrived < in->needed) {
    u->blocked[op->stream] = true;
    return false;
  }
  for (int i = 0; i < in->arrived; i++) {
    an_waiter *w = &in->waiting[i];
    const prog_op *wop = &w->unit->ops[w->idx];
    w->unit->blocked[wop->stream] = false;
    an_finish_op(st, w->unit, wop, w->idx, in->arrived_max, in->arrived_max + dur);
  }
  an_instance_done(st, in);
  return true;
}

static bool an_advance(an_state *st, an_unit *u, int stream);
static void an_fork_take(an_state *st, bool call_progress);

/* A compute op or macro of the unit from `ready` for `dur`, slowed by the unit's collectives
 * that ran beside it (as the DES charges it): returns its duration with that. */
static double an_interfered(an_state *st, an_unit *u, const prog_op *op, double ready, double dur)
{
  double extra = eng_interference_charge_v(st->costs, op, u->rank, ready, dur, u->comms,
                                           &u->ncomms, INFINITY);
  if (extra > 0) {
    *an_spans_room(u, 1) = (eng_span){ready + dur, ready + dur + extra, -1, op->stream};
    u->nspans++;
  }
  return dur + extra;
}

/* Advances the streams of mask `m` in turn, lowest first (st->beside: those yet to go). */
static void an_advance_streams(an_state *st, an_unit *u, unsigned m)
{
  for (; m; m &= m - 1) {
    int s = __builtin_ctz(m);
    st->beside = m;
    if (!u->blocked[s])
      an_advance(st, u, s);
  }
  st->beside = 0;
}

/* The collectives a compute op lets start must be known before the next compute op is timed:
 * they run beside it (the gradient reductions under the backward). */
static void an_advance_beside(an_state *st, an_unit *u)
{
  /* only streams with ops left that no collective holds: the call per stream and compute op
   * (a class uses a few of the nine) was a tenth of a run, and testing the nine per compute op
   * 2 %; advancing stream s clears no other stream's bit, so the mask is read once */
  an_advance_streams(st, u, u->live & ~(1u << PROG_STREAM_COMPUTE));
}

/* Advances one stream of a unit as far as its dependencies allow. */
static bool an_advance(an_state *st, an_unit *u, int stream)
{
  const uint32_t *list = u->stream[stream];
  guint len = u->nstream[stream];
  bool progress = false;
  if (u->pos[stream] >= u->fence[stream])
    an_fork_take(st, false);
  if (u->pos[stream] >= len)
    u->live &= ~(1u << stream);
  while (u->pos[stream] < len && !u->blocked[stream]) {
    uint32_t idx = list[u->pos[stream]];
    const prog_op *op = &u->ops[idx];
    const uint32_t *deps = u->deps + op->dep_start;
    double ready = u->free_at[stream];
    for (uint32_t d = 0; d < op->ndeps; d++) {
      if (isnan(u->end[deps[d]]))
        return progress;
      ready = MAX(ready, u->end[deps[d]]);
    }
    if (op->kind == PROG_COMPUTE) {
      double dur;
      u->nspans += eng_op_place(st->costs, op, u->rank, ready,
                                an_spans_room(u, ENG_OP_SPANS_MAX), u->hidden, &dur);
      dur = an_interfered(st, u, op, ready, dur);
      an_finish_op(st, u, op, idx, ready, ready + dur);
      if (stream == PROG_STREAM_COMPUTE)
        an_advance_beside(st, u);
    } else if (op->kind == PROG_MEM) {
      g_array_index(u->mem, eng_mem_event, u->nmem++) =
          (eng_mem_event){.time = ready, .delta = op->mem_delta, .seq = idx};
      an_finish_op(st, u, op, idx, ready, ready);
    } else if (!an_arrive(st, u, idx, ready)) {
      return progress;
    }
    progress = true;
    /* the next op is one the second program moves past its inserts or inserts before */
    if (u->pos[stream] >= u->fence[stream])
      an_fork_take(st, true);
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

/* Names the first op each stream of a stuck unit waits on, for the deadlock error. */
static char *an_stuck_heads(const an_state *st)
{
  GString *g = g_string_new(NULL);
  int shown = 0;
  for (int u = 0; u < st->nunits && shown < 12; u++) {
    const an_unit *x = &st->units[u];
    for (int s = 0; s < PROG_NSTREAMS && shown < 12; s++) {
      GArray *list = st->stream_ops[x->cls * PROG_NSTREAMS + s];
      if (x->pos[s] >= list->len)
        continue;
      uint32_t idx = g_array_index(list, uint32_t, x->pos[s]);
      g_string_append_printf(g, "%srank %d waits at op %u '%s'", shown ? "; " : "", x->rank, idx,
                             prog_op_at(st->p, x->cls, idx)->name);
      shown++;
    }
  }
  return g_string_free(g, FALSE);
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
  eng_breakdown_of(st->units[crit].spans, st->units[crit].nspans, st->units[crit].hidden,
                   eng_pipelined(st->p), out->step_time, out);
  out->nclasses = (int)st->p->classes->len;
  out->class_peak = g_new0(double, out->nclasses);
  for (int u = 0; u < st->nunits; u++) {
    an_unit *x = &st->units[u];
    g_array_set_size(x->mem, x->nmem);
    double peak = eng_mem_peak(x->mem, prog_class_at(st->p, x->cls)->base_memory, out->mem_samples, x->rank);
    out->class_peak[x->cls] = MAX(out->class_peak[x->cls], peak);
    out->peak_memory = MAX(out->peak_memory, peak);
  }
}

static void an_state_free(an_state *st)
{
  an_units_free(st);
  eng_stream_lists_free(st->p, st->stream_ops);
  GHashTableIter it;
  gpointer in;
  g_hash_table_iter_init(&it, st->instances);
  while (g_hash_table_iter_next(&it, NULL, &in)) /* left waiting by a deadlock */
    an_spare_push(st, in);
  g_hash_table_destroy(st->instances);
  for (guint i = 0; i < st->met->len; i++) {
    an_group *g = &st->groups[g_array_index(st->met, int, i)];
    if (g->open)
      an_spare_push(st, g->open);
    g_array_free(g->units, TRUE);
  }
  g_free(st->groups);
  g_array_free(st->met, TRUE);
  for (guint i = 0; i < st->nspare; i++)
    an_instance_free(st->spare[i]);
  g_free(st->spare);
  if (st->costs != st->opt->costs)
    eng_costs_free(st->costs);
  if (st->planner != st->opt->planner)
    coll_planner_free(st->planner);
}

/* Everything a walk needs before its first step, for `p`. */
static void an_state_init(an_state *st, const prog_program *p, const hw_cluster *hw,
                          const eng_options *opt, eng_result *out)
{
  *st = (an_state){.p = p, .hw = hw, .opt = opt, .out = out};
  st->planner = opt->planner ? opt->planner : eng_planner_new(hw, opt);
  st->costs = opt->costs && opt->planner ? opt->costs : eng_costs_new(p, hw, st->planner, opt);
  eng_costs_bind(st->costs, p);
  st->stream_ops = eng_stream_lists(p);
  st->instances = g_hash_table_new(g_int64_hash, g_int64_equal);
  st->groups = g_new0(an_group, MAX(p->groups->len, 1u));
  st->met = g_array_new(FALSE, FALSE, sizeof(int));
  if (opt->trace) {
    out->events = g_array_new(FALSE, FALSE, sizeof(eng_event));
    out->mem_samples = g_array_new(FALSE, FALSE, sizeof(eng_mem_sample));
  }
  an_units_init(st);
  /* streams without ops are never live: the walk's loops skip them from the start */
  for (int u = 0; u < st->nunits; u++)
    for (int s = 0; s < PROG_NSTREAMS; s++)
      if (st->stream_ops[st->units[u].cls * PROG_NSTREAMS + s]->len)
        st->units[u].live |= 1u << s;
}

/* One sweep over the units' streams from unit u0's stream s0 on, `progress` made before it:
 * whether any stream moved. */
static bool an_sweep(an_state *st, int u0, int s0, bool progress)
{
  for (int u = u0; u < st->nunits; u++)
    for (int s = u == u0 ? s0 : 0; s < PROG_NSTREAMS; s++) {
      /* a stream waiting in a collective moves only when the collective completes (calling it
       * only to return was 1 % of a configuration) */
      if (!(st->units[u].live >> s & 1) || st->units[u].blocked[s])
        continue;
      st->sweep_unit = u;
      st->sweep_stream = s;
      st->sweep_progress = progress;
      progress |= an_advance(st, &st->units[u], s);
    }
  return progress;
}

/* Sweeps until no stream moves. */
static void an_walk(an_state *st)
{
  while (an_sweep(st, 0, 0, false))
    ;
}

/* The run's result from a finished walk (or the deadlock's error), and the state freed. */
static bool an_state_finish(an_state *st, GError **err)
{
  bool ok = an_all_done(st);
  if (ok)
    an_collect(st);
  else if (st->error)
    g_propagate_error(err, g_steal_pointer(&st->error));
  else {
    g_autofree char *heads = an_stuck_heads(st);
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                "analytic engine: the program deadlocks (collectives issued in different orders "
                "on the ranks of a group): %s", heads);
  }
  g_clear_error(&st->error);
  an_state_free(st);
  return ok;
}

bool eng_run_analytic(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                      eng_result *out, GError **err)
{
  an_state st;
  an_state_init(&st, p, hw, opt, out);
  an_walk(&st);
  return an_state_finish(&st, err);
}

/* ---- a walk forked where a second program first differs ----------------------------------- */

/* A unit's state as the fork took it (its ops numbered as in the first program). */
typedef struct {
  int cls, rank;
  guint nops;
  guint pos[PROG_NSTREAMS];
  double free_at[PROG_NSTREAMS];
  bool blocked[PROG_NSTREAMS];
  unsigned live;
  double finish, hidden[PROG_NDIMS];
  double *end;
  an_last_coll *last;
  eng_span *spans;
  guint nspans;
  eng_interval *comms;
  guint ncomms;
  eng_mem_event *mem;
  guint nmem;
} an_kept_unit;

/* A collective instance some units wait in: its waiters by unit index. */
typedef struct {
  int group, arrived, needed;
  double arrived_max;
  int *unit;
  uint32_t *idx;
} an_kept_instance;

struct eng_fork {
  int nunits;
  guint nfamilies;
  an_kept_unit *units;
  GArray *instances; /* an_kept_instance */
  guint nclasses;
  guint *at, *ins;
  /* where the walk was (an_state's sweep fields and `beside`), and the progress the sweep's
   * current call had made when the fork was taken outside an_advance_beside */
  int unit, stream;
  bool progress, call_progress;
  unsigned beside;
};

void eng_fork_free(eng_fork *f)
{
  if (!f)
    return;
  for (int u = 0; u < f->nunits; u++) {
    an_kept_unit *k = &f->units[u];
    g_free(k->end);
    g_free(k->last);
    g_free(k->spans);
    g_free(k->comms);
    g_free(k->mem);
  }
  g_free(f->units);
  for (guint i = 0; f->instances && i < f->instances->len; i++) {
    an_kept_instance *k = &g_array_index(f->instances, an_kept_instance, i);
    g_free(k->unit);
    g_free(k->idx);
  }
  if (f->instances)
    g_array_free(f->instances, TRUE);
  g_free(f->at);
  g_free(f->ins);
  g_free(f);
}

static void an_keep_unit(const an_state *st, const an_unit *x, an_kept_unit *k)
{
  guint nops = prog_class_at(st->p, x->cls)->ops->len, nf = MAX(st->p->families->len, 1u);
  *k = (an_kept_unit){.cls = x->cls, .rank = x->rank, .nops = nops, .live = x->live,
                      .finish = x->finish, .nspans = x->nspans, .ncomms = x->ncomms,
                      .nmem = x->nmem};
  memcpy(k->pos, x->pos, sizeof k->pos);
  memcpy(k->free_at, x->free_at, sizeof k->free_at);
  memcpy(k->blocked, x->blocked, sizeof k->blocked);
  memcpy(k->hidden, x->hidden, sizeof k->hidden);
  k->end = g_memdup2(x->end, sizeof(double) * MAX(nops, 1u));
  k->last = g_memdup2(x->last, sizeof(an_last_coll) * nf);
  k->spans = g_memdup2(x->spans, sizeof(eng_span) * MAX(x->nspans, 1u));
  k->comms = g_memdup2(x->comms, sizeof(eng_interval) * MAX(x->ncomms, 1u));
  k->mem = g_memdup2(x->mem->data, sizeof(eng_mem_event) * MAX(x->nmem, 1u));
}

static void an_keep_instance(const an_state *st, const an_instance *in, GArray *out)
{
  an_kept_instance k = {.group = (int)(in->key >> 32), .arrived = in->arrived,
                        .needed = in->needed, .arrived_max = in->arrived_max,
                        .unit = g_new(int, MAX(in->arrived, 1)),
                        .idx = g_new(uint32_t, MAX(in->arrived, 1))};
  for (int i = 0; i < in->arrived; i++) {
    k.unit[i] = (int)(in->waiting[i].unit - st->units);
    k.idx[i] = in->waiting[i].idx;
  }
  g_array_append_val(out, k);
}

/* The walk as it stands, kept once (the first op the second program changes is next): later
 * fences are lifted. */
static void an_fork_take(an_state *st, bool call_progress)
{
  for (int u = 0; u < st->nunits; u++)
    for (int s = 0; s < PROG_NSTREAMS; s++)
      st->units[u].fence[s] = G_MAXUINT;
  eng_fork *f = st->fork;
  if (st->error || !f)
    return; /* a planning failure ends the run anyway */
  f->nunits = st->nunits;
  f->nfamilies = st->p->families->len;
  f->units = g_new(an_kept_unit, MAX(st->nunits, 1));
  for (int u = 0; u < st->nunits; u++)
    an_keep_unit(st, &st->units[u], &f->units[u]);
  f->instances = g_array_new(FALSE, FALSE, sizeof(an_kept_instance));
  for (guint i = 0; i < st->met->len; i++) {
    const an_instance *in = st->groups[g_array_index(st->met, int, i)].open;
    if (in)
      an_keep_instance(st, in, f->instances);
  }
  GHashTableIter it;
  gpointer in;
  g_hash_table_iter_init(&it, st->instances);
  while (g_hash_table_iter_next(&it, NULL, &in))
    an_keep_instance(st, in, f->instances);
  f->unit = st->sweep_unit;
  f->stream = st->sweep_stream;
  f->progress = st->sweep_progress;
  f->beside = st->beside;
  f->call_progress = call_progress;
}

/* Each unit's fences: per stream the splice inserts on, the position of its first op from the
 * splice's on (its list's end when it has none). */
static void an_fences_set(an_state *st, const eng_splice *sp)
{
  for (int u = 0; u < st->nunits; u++) {
    an_unit *x = &st->units[u];
    if ((guint)x->cls >= sp->nclasses)
      continue;
    for (int s = 0; s < PROG_NSTREAMS; s++) {
      if (!(sp->streams[x->cls] >> s & 1))
        continue;
      guint n = 0;
      while (n < x->nstream[s] && x->stream[s][n] < sp->at[x->cls])
        n++;
      x->fence[s] = n;
    }
  }
}

bool eng_run_forking(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                     const eng_splice *sp, eng_result *out, eng_fork **fork, GError **err)
{
  *fork = NULL;
  if (opt->kind != ENG_ANALYTIC || opt->trace)
    return eng_run(p, hw, opt, out, err);
  memset(out, 0, sizeof *out);
  gint64 t0 = g_get_monotonic_time();
  an_state st;
  an_state_init(&st, p, hw, opt, out);
  eng_fork *f = st.fork = g_new0(eng_fork, 1);
  f->nclasses = sp->nclasses;
  f->at = g_memdup2(sp->at, sizeof(guint) * MAX(sp->nclasses, 1u));
  f->ins = g_memdup2(sp->ins, sizeof(guint) * MAX(sp->nclasses, 1u));
  an_fences_set(&st, sp);
  an_walk(&st);
  bool ok = an_state_finish(&st, err);
  if (ok && f->units)
    *fork = f;
  else
    eng_fork_free(f);
  out->wall_time = (double)(g_get_monotonic_time() - t0) / 1e6;
  return ok;
}

/* Where the first program's op i of class `cls` is in the second. */
static uint32_t an_moved(const eng_fork *f, int cls, uint32_t i)
{
  return (guint)cls < f->nclasses && i >= f->at[cls] ? i + f->ins[cls] : i;
}

static bool an_fork_fits(const an_state *st, const eng_fork *f)
{
  if (f->nunits != st->nunits || f->nfamilies != st->p->families->len)
    return false;
  for (int u = 0; u < st->nunits; u++)
    if (f->units[u].cls != st->units[u].cls || f->units[u].rank != st->units[u].rank)
      return false;
  return true;
}

static void an_restore_unit(const eng_fork *f, const an_kept_unit *k, an_unit *x)
{
  memcpy(x->pos, k->pos, sizeof k->pos);
  memcpy(x->free_at, k->free_at, sizeof k->free_at);
  memcpy(x->blocked, k->blocked, sizeof k->blocked);
  memcpy(x->hidden, k->hidden, sizeof k->hidden);
  x->live = k->live;
  x->finish = k->finish;
  memcpy(x->last, k->last, sizeof(an_last_coll) * MAX(f->nfamilies, 1u));
  for (guint i = 0; i < k->nops; i++)
    x->end[an_moved(f, x->cls, i)] = k->end[i];
  memcpy(an_spans_room(x, k->nspans), k->spans, sizeof(eng_span) * k->nspans);
  x->nspans = k->nspans;
  for (guint i = 0; i < k->ncomms; i++)
    an_comms_add(x, k->comms[i].start, k->comms[i].end);
  if (x->mem->len < k->nmem)
    g_array_set_size(x->mem, k->nmem);
  for (guint i = 0; i < k->nmem; i++) {
    eng_mem_event e = k->mem[i];
    e.seq = an_moved(f, x->cls, e.seq);
    g_array_index(x->mem, eng_mem_event, i) = e;
  }
  x->nmem = k->nmem;
}

/* A kept instance in the second program: its waiters' ops moved, its key their collective's
 * order there. */
static void an_restore_instance(an_state *st, const eng_fork *f, const an_kept_instance *k)
{
  an_units_of_group(st, k->group); /* met, as the first walk had */
  an_unit *first = &st->units[k->unit[0]];
  uint32_t idx0 = an_moved(f, first->cls, k->idx[0]);
  an_instance *in = an_instance_new(st, (gint64)k->group << 32 | first->seq[idx0], k->needed);
  in->arrived = k->arrived;
  in->arrived_max = k->arrived_max;
  for (int i = 0; i < k->arrived; i++) {
    an_unit *x = &st->units[k->unit[i]];
    in->waiting[i] = (an_waiter){.unit = x, .idx = an_moved(f, x->cls, k->idx[i])};
  }
}

/* Goes on from where the fork was taken, as the first walk went on from there. */
static void an_resume(an_state *st, const eng_fork *f)
{
  an_unit *u = &st->units[f->unit];
  bool called;
  if (f->beside) {
    /* inside the compute op's an_advance_beside: its streams left, then the compute stream's
     * call goes on (it has moved) */
    an_advance_streams(st, u, f->beside);
    an_advance(st, u, PROG_STREAM_COMPUTE);
    called = true;
  } else {
    called = an_advance(st, u, f->stream);
    called = called || f->call_progress;
  }
  if (an_sweep(st, f->unit, f->stream + 1, f->progress || called))
    an_walk(st);
}

bool eng_run_from_fork(const eng_fork *f, const prog_program *p, const hw_cluster *hw,
                       const eng_options *opt, eng_result *out, bool *resumed, GError **err)
{
  memset(out, 0, sizeof *out);
  gint64 t0 = g_get_monotonic_time();
  an_state st;
  an_state_init(&st, p, hw, opt, out);
  *resumed = an_fork_fits(&st, f);
  if (!*resumed) {
    an_state_free(&st);
    return false;
  }
  for (int u = 0; u < st.nunits; u++)
    an_restore_unit(f, &f->units[u], &st.units[u]);
  for (guint i = 0; i < f->instances->len; i++)
    an_restore_instance(&st, f, &g_array_index(f->instances, an_kept_instance, i));
  an_resume(&st, f);
  bool ok = an_state_finish(&st, err);
  out->wall_time = (double)(g_get_monotonic_time() - t0) / 1e6;
  return ok;
}
