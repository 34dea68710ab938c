/* The DES engine: every simulated GPU is a SimGrid host, every stream of it an actor.
 *
 * Compute kernels are executions on the GPU host (host speed x modelled duration, so the cost
 * model stays in one place); collectives run the transfers of their schedule as SimGrid
 * communications, so flows that share a link share its bandwidth. SimGrid keeps one engine per
 * process, so the simulation runs in a forked child that sends its results back over a pipe:
 * any number of simulations can run from one dlsim process, a SimGrid abort becomes an error
 * instead of a crash, and a stuck child an error instead of a hang (des_watch.c). */
#include "engine/engine_internal.h"

#include <errno.h>
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/log.h>

/* A collective of a group as its members enter it: the latest arrival so far, and how many
 * members have yet to leave it. */
typedef struct {
  gint64 key; /* (channel, seq) */
  double last;
  int pending;
  int arriving; /* members yet to enter it: until then it is not in flight */
} des_arrival;

typedef struct {
  int rank, cls;
  uint8_t *done;
  double *end;
  /* per stream: a semaphore its actor sleeps on, and the op it waits for (DES_NOTHING: none),
   * so that an op's end wakes only the actor waiting for it. A semaphore rather than a condition
   * and its mutex: one simcall each side instead of three (lock, wait or notify, unlock), and a
   * release posted before the acquire is handled is kept, so no lock is needed around it */
  sg_sem_t wake[PROG_NSTREAMS];
  uint32_t awaits[PROG_NSTREAMS];
  GArray *spans; /* eng_span */
  GArray *comms;   /* eng_interval: its collectives outside layer passes that have ended... */
  GPtrArray *open; /* ... and the des_arrival of those under way (interference on compute) */
  GArray *scratch; /* eng_interval: both, as des_comms_until lists them */
  double hidden[PROG_NDIMS]; /* collective time run under compute inside macros */
  GArray *mem;   /* eng_mem_event */
  double finish;
  GHashTable *seq; /* group -> collectives of it this rank has entered */
} des_rank;

typedef struct des_ctx des_ctx;

/* Link loads: the bytes each link carried each way (key: link * 2 + down), from the routes
 * of the transfers the ranks sent; when tracing, also per interval of `dt` (at most
 * DES_SAMPLES: when the step outgrows them, neighbours merge and dt doubles), each transfer's
 * bytes spread evenly over its phase. */
#define DES_SAMPLES 256
typedef struct {
  int nkeys;
  double *bytes;
  double *buckets; /* nkeys x DES_SAMPLES, or NULL */
  double dt;
} des_links;
/* A stream actor's last schedules and mailboxes: its collectives cycle through a few groups
 * (a pipeline stage's two neighbours, a chunk's), so most lookups in the planner's and the
 * mailboxes' tables, which dominate at thousands of ranks, are answered here with the same
 * pointers (DES_MEMO entries each, replaced in turn). */
#define DES_MEMO 4
typedef struct {
  int group;
  prog_coll coll;
  double bytes;
  const coll_schedule *s;
} des_memo_sched;

typedef struct {
  des_memo_sched sched[DES_MEMO];
  struct des_mb *box[DES_MEMO];
  unsigned next_sched, next_box;
} des_memo;

typedef struct {
  des_ctx *ctx;
  int rank, stream;
  des_memo memo;
  void *sink;   /* where received payload pointers land */
  double ready; /* when the stream is free: later than now while it carries a charge (des_carry_ok) */
} des_actor_arg;

struct des_ctx {
  const prog_program *p;
  const hw_cluster *hw;
  const eng_options *opt;
  coll_planner *planner;
  eng_costs *costs;
  des_rank *ranks;
  GArray **stream_ops; /* per class per stream */
  uint8_t **needed;    /* per class per op: another op depends on it */
  GHashTable *mailboxes;
  double speed;
  long messages;
  long activities; /* executions and sleeps (des_execute, des_sleep) */
  long ops_done, ops_total; /* for the progress report */
  GArray *events;
  GPtrArray *args;
  GHashTable *hosts; /* name -> sg_host_t: SimGrid's own lookup walks every zone */
  bool *active;      /* ranks simulated (NULL: all); the others mirror a simulated one */
  GHashTable *arrivals; /* (channel, seq) -> des_arrival of a collective under way */
  des_links *links;     /* the links whose load is measured */
  bool *flows;          /* per family: its collectives run as flows (eng_flow_families) */
  bool **expand;        /* per class: a template run op by op (its ops off the synchronous
                         * chain, eng_async_ops), or NULL: its macros keep the closed form */
  bool carry;           /* interference charges are carried, not executed (des_carry_ok) */
};

static bool des_active(const des_ctx *c, int rank)
{
  return !c->active || c->active[rank];
}

/* Whether an endpoint of a simulated rank's transfer is a GPU the DES does not simulate. */
static bool des_ghost_end(const des_ctx *c, int endpoint)
{
  return c->active && endpoint < c->p->nranks && !c->active[endpoint];
}

/* Whether op is a macro whose layer pass runs op by op, its collectives as flows. */
static bool des_expanded(const des_ctx *c, const prog_op *op)
{
  return op->tmpl >= 0 && c->expand[op->tmpl];
}

static void des_build_tables(des_ctx *c)
{
  const prog_program *p = c->p;
  guint ncls = p->classes->len;
  c->stream_ops = eng_stream_lists(p);
  c->needed = g_new0(uint8_t *, ncls);
  for (guint k = 0; k < ncls; k++) {
    const prog_class *cl = prog_class_at(p, (int)k);
    c->needed[k] = g_new0(uint8_t, MAX(cl->ops->len, 1u));
    for (guint i = 0; i < cl->ops->len; i++) {
      const prog_op *op = &g_array_index(cl->ops, prog_op, i);
      const uint32_t *deps = prog_op_deps(p, (int)k, op);
      for (uint32_t d = 0; d < op->ndeps; d++)
        c->needed[k][deps[d]] = 1;
    }
  }
}

/* Messages between two endpoints of one process group go through their own mailbox: both
 * sides run the group's collectives in the same order, so first-in first-out matches them.
 * Each side counts the messages it arrived for, so that the other knows, on its own arrival,
 * whether it comes first (des_lone_first). */
typedef struct {
  int src, dst, group;
} des_mb_key;

typedef struct des_mb {
  des_mb_key key;
  sg_mailbox_t mb;
  uint32_t sends, receives; /* arrivals so far */
  /* a first end that posted before it really arrives (des_carry_ok): which side, its arrival
   * number and when it arrives, for the later end to start the transfer from */
  bool early, early_sends;
  uint32_t early_seq;
  double early_at;
} des_mb;

static guint des_mb_hash(gconstpointer k)
{
  const des_mb_key *x = k;
  return ((guint)x->src * 73856093u) ^ ((guint)x->dst * 19349663u) ^ ((guint)x->group * 83492791u);
}

static gboolean des_mb_equal(gconstpointer a, gconstpointer b)
{
  const des_mb_key *x = a, *y = b;
  return x->src == y->src && x->dst == y->dst && x->group == y->group;
}

static des_mb *des_mailbox_lookup(des_ctx *c, int src, int dst, int group)
{
  des_mb_key key = {src, dst, group};
  des_mb *mb = g_hash_table_lookup(c->mailboxes, &key);
  if (mb)
    return mb;
  char name[64];
  g_snprintf(name, sizeof name, "m%d.%d.%d", src, dst, group);
  sg_mailbox_t box = sg_mailbox_by_name(name);
  /* a simcall: the other end may have added the mailbox meanwhile */
  mb = g_hash_table_lookup(c->mailboxes, &key);
  if (!mb) {
    mb = g_new0(des_mb, 1);
    *mb = (des_mb){.key = key, .mb = box};
    g_hash_table_insert(c->mailboxes, &mb->key, mb);
  }
  return mb;
}

/* The mailbox of (src, dst, group) as `memo` last returned it, or NULL. */
static des_mb *des_memo_box(const des_memo *memo, int src, int dst, int group)
{
  for (int i = 0; memo && i < DES_MEMO; i++) {
    des_mb *mb = memo->box[i];
    if (mb && mb->key.src == src && mb->key.dst == dst && mb->key.group == group)
      return mb;
  }
  return NULL;
}

/* des_mailbox_lookup through a stream actor's memo (NULL: none). */
static des_mb *des_mailbox(des_ctx *c, des_memo *memo, int src, int dst, int group)
{
  des_mb *mb = des_memo_box(memo, src, dst, group);
  if (mb)
    return mb;
  mb = des_mailbox_lookup(c, src, dst, group);
  if (memo)
    memo->box[memo->next_box++ % DES_MEMO] = mb;
  return mb;
}

/* Executions and sleeps: SimGrid activities besides the transfers, counted (eng_result's
 * `activities`: what the DES's cost goes with, past the transfers). */
static void des_execute(des_ctx *c, double seconds)
{
  c->activities++;
  sg_actor_execute(seconds * c->speed);
}

static void des_sleep(des_ctx *c, double seconds)
{
  c->activities++;
  sg_actor_sleep_for(seconds);
}

#define DES_NOTHING UINT32_MAX

static void des_wait_deps(des_ctx *c, des_rank *r, const prog_op *op, int stream)
{
  const uint32_t *deps = prog_op_deps(c->p, r->cls, op);
  for (uint32_t d = 0; d < op->ndeps; d++) {
    while (!r->done[deps[d]]) {
      r->awaits[stream] = deps[d];
      sg_sem_acquire(r->wake[stream]);
    }
  }
}

/* Wakes the stream actor of the rank that waits for op `idx`, if any. Each release answers the
 * one acquire that set `awaits`, so the semaphore never counts past one. */
static void des_wake(des_rank *r, uint32_t idx)
{
  for (int s = 0; s < PROG_NSTREAMS; s++)
    if (r->awaits[s] == idx) {
      r->awaits[s] = DES_NOTHING;
      sg_sem_release(r->wake[s]);
    }
}

static void des_complete(des_ctx *c, des_rank *r, uint32_t idx, double start, double end)
{
  const prog_op *op = prog_op_at(c->p, r->cls, idx);
  /* every 256 ops: the report reads the clock */
  if (c->opt->progress && ++c->ops_done % 256 == 0)
    c->opt->progress((double)c->ops_done / MAX(c->ops_total, 1), c->opt->progress_ctx);
  r->done[idx] = 1;
  r->end[idx] = end;
  r->finish = MAX(r->finish, end);
  if (c->needed[r->cls][idx])
    des_wake(r, idx);
  if (c->events) {
    eng_event e = {.rank = r->rank, .stream = op->stream, .kind = op->kind, .dim = op->dim,
                   .op = idx, .name = op->name, .start = start, .end = end};
    g_array_append_val(c->events, e);
  }
}

static void des_span(des_rank *r, double start, double end, int what)
{
  if (end > start) {
    eng_span s = {.start = start, .end = end, .what = what};
    g_array_append_val(r->spans, s);
  }
}

static des_links *des_links_new(const hw_cluster *hw, bool sampled)
{
  des_links *l = g_new0(des_links, 1);
  l->nkeys = 2 * hw_nlinks(hw);
  l->bytes = g_new0(double, l->nkeys);
  if (sampled)
    l->buckets = g_new0(double, (gsize)l->nkeys * DES_SAMPLES);
  l->dt = 1e-5;
  return l;
}

static void des_links_free(des_links *l)
{
  if (!l)
    return;
  g_free(l->bytes);
  g_free(l->buckets);
  g_free(l);
}

/* Halves the resolution until time t fits in the buckets. */
static void des_links_widen(des_links *l, double t)
{
  while (t >= DES_SAMPLES * l->dt) {
    for (int k = 0; k < l->nkeys; k++) {
      double *b = l->buckets + (gsize)k * DES_SAMPLES;
      for (int i = 0; i < DES_SAMPLES / 2; i++)
        b[i] = b[2 * i] + b[2 * i + 1];
      memset(b + DES_SAMPLES / 2, 0, sizeof(double) * DES_SAMPLES / 2);
    }
    l->dt *= 2;
  }
}

/* `bytes` crossed every link of the route from `src` to `dst` between t0 and t1. */
static void des_links_add(des_links *l, const hw_cluster *hw, int src, int dst, double bytes,
                          double t0, double t1)
{
  hw_route r;
  hw_route_get(hw, src, dst, &r);
  if (l->buckets)
    des_links_widen(l, t1);
  for (int h = 0; h < r.nhops; h++) {
    int key = HW_HOP_LINK(r.hops[h]) * 2 + r.hops[h] % 2;
    l->bytes[key] += bytes;
    if (!l->buckets)
      continue;
    double *b = l->buckets + (gsize)key * DES_SAMPLES;
    int i0 = (int)(t0 / l->dt), i1 = MIN((int)(t1 / l->dt), DES_SAMPLES - 1);
    for (int i = i0; i <= i1; i++) {
      double lo = MAX(t0, i * l->dt), hi = MIN(t1, (i + 1) * l->dt);
      b[i] += t1 > t0 ? bytes * MAX(hi - lo, 0) / (t1 - t0) : (i == i0 ? bytes : 0);
    }
  }
}

typedef struct {
  int key;
  double use;
} des_link_use;

static int des_use_cmp(const void *a, const void *b)
{
  double x = ((const des_link_use *)a)->use, y = ((const des_link_use *)b)->use;
  return (x < y) - (x > y);
}

/* The busiest links by mean use over the step, and their rates per interval when tracing. */
static void des_collect_links(const des_ctx *c, double step, eng_result *out)
{
  const des_links *l = c->links;
  des_link_use *use = g_new(des_link_use, l->nkeys);
  for (int k = 0; k < l->nkeys; k++) { /* a FATPIPE link stands for a switch: never busy */
    const hw_link *hl = hw_link_get(c->hw, k / 2);
    use[k] = (des_link_use){k, hl->policy == HW_LINK_FATPIPE
                                   ? 0 : l->bytes[k] / (hl->bandwidth * MAX(step, 1e-30))};
  }
  qsort(use, (size_t)l->nkeys, sizeof *use, des_use_cmp);
  out->link_loads = g_array_new(FALSE, FALSE, sizeof(eng_link_load));
  if (l->buckets)
    out->link_samples = g_array_new(FALSE, FALSE, sizeof(eng_link_sample));
  for (int i = 0; i < MIN(l->nkeys, ENG_BUSIEST_LINKS) && use[i].use > 0; i++) {
    int key = use[i].key;
    eng_link_load ld = {.link = key / 2, .down = key % 2, .bytes = l->bytes[key],
                        .utilisation = use[i].use};
    g_array_append_val(out->link_loads, ld);
    for (int b = 0; l->buckets && b < DES_SAMPLES && b * l->dt < step; b++) {
      eng_link_sample smp = {.link = key / 2, .down = key % 2, .time = b * l->dt,
                             .rate = l->buckets[(gsize)key * DES_SAMPLES + b] / l->dt};
      g_array_append_val(out->link_samples, smp);
    }
  }
  g_free(use);
}

/* The bytes this endpoint sent in a phase, and those a ghost sent it (a rank not simulated),
 * on the links they crossed. */
static void des_count_sent(des_ctx *c, const coll_schedule *s, const coll_phase *ph, int from,
                           int to, int self, double t0)
{
  /* the end matters only to the samples of a trace (des_links_add) */
  double eff = hw_config(c->hw)->nccl.protocol_efficiency[s->proto];
  double t1 = c->links->buckets ? simgrid_get_clock() : t0;
  for (int j = from; j < to; j++) {
    const coll_xfer *x = &ph->xfers[ph->member_idx[j]];
    if (x->src == self || (x->dst == self && des_ghost_end(c, x->src)))
      des_links_add(c->links, c->hw, x->src, x->dst,
                    (double)(long)coll_wire_bytes(s->plan, ph, x, s->bytes, eff), t0, t1);
  }
}

/* The other end of a transfer of a simulated rank, played by a ghost on its host: it posts its
 * side of that one transfer when the simulated rank posts its own, as the absent rank would
 * (fold.c: it runs in step with its representative), and ends. */
typedef struct {
  des_ctx *ctx;
  sg_mailbox_t mailbox;
  bool sends;
  long bytes;
} des_ghost_arg;

static void des_ghost_actor(int argc, char **argv)
{
  (void)argc, (void)argv;
  des_ghost_arg *a = sg_actor_self_get_data();
  if (a->sends)
    sg_mailbox_put(a->mailbox, a->ctx, a->bytes);
  else
    sg_mailbox_get(a->mailbox);
}

static void des_spawn_ghost(des_ctx *c, int host_rank, sg_mailbox_t mb, bool sends, long bytes)
{
  des_ghost_arg *a = g_new0(des_ghost_arg, 1);
  *a = (des_ghost_arg){.ctx = c, .mailbox = mb, .sends = sends, .bytes = bytes};
  g_ptr_array_add(c->args, a);
  char host[32];
  hw_host_name(host_rank, host, sizeof host);
  sg_actor_t actor = sg_actor_init("ghost", g_hash_table_lookup(c->hosts, host));
  sg_actor_set_data(actor, a);
  sg_actor_start(actor, des_ghost_actor, 0, NULL);
}

/* Whether a transfer is a phase's one, both of whose ends the DES simulates. Not when
 * tracing, where a transfer's posting time spreads its bytes over time. */
static bool des_lone(const des_ctx *c, const coll_phase *ph, const coll_xfer *x)
{
  return ph->nxfers == 1 && !c->links->buckets && x->src < c->p->nranks &&
         x->dst < c->p->nranks && des_active(c, x->src) && des_active(c, x->dst);
}

/* Counts this end's arrival at transfer `x`, which it really reaches at `*at` (later than now,
 * `*clock`, while it carries a charge, des_carry_ok); returns whether, of a lone transfer's two
 * ends, it comes first (each end sleeps the same time before posting). The transfer then starts
 * when the later end has slept, so the first may post at once: it waits in the mailbox either way,
 * and a sleep fewer is a SimGrid activity fewer. A first end that is not there yet leaves its
 * arrival for the later one, which then starts from it (`*at` becomes the later of the two); one
 * still ahead by an earlier transfer cannot, and waits until it is there. */
static bool des_lone_first(des_ctx *c, const coll_phase *ph, const coll_xfer *x, int self,
                           des_mb *mb, double *at, double *clock)
{
  bool sends = x->src == self, lone = des_lone(c, ph, x);
  uint32_t *mine = sends ? &mb->sends : &mb->receives;
  const uint32_t *theirs = sends ? &mb->receives : &mb->sends;
  double now = *clock;
  if (lone && *at > now && *theirs < *mine) {
    des_sleep(c, *at - now);
    now = *clock = simgrid_get_clock();
  }
  bool first = lone && *theirs <= *mine;
  if (first && *at > now) {
    mb->early = true;
    mb->early_sends = sends;
    mb->early_seq = *mine;
    mb->early_at = *at;
  } else if (lone && !first && mb->early && mb->early_sends != sends && mb->early_seq == *mine) {
    *at = MAX(*at, mb->early_at);
  }
  (*mine)++;
  return first;
}

/* An endpoint's one transfer of a phase, `send` made and not started (NULL: it receives): a
 * comm waited for before it starts runs as one simcall, not two (start, then wait). */
static void des_run_lone(sg_mailbox_t mb, sg_comm_t send, void **sink)
{
  if (send)
    sg_comm_wait(send);
  else
    *sink = sg_mailbox_get(mb);
}

/* What one endpoint (a GPU or a reducing switch) does in one phase of a collective. `*late`:
 * how long after now the endpoint really arrives (a charge it carries, des_carry_ok), slept with
 * the phase's latency, or left to the other end of a lone transfer (des_lone_first). */
static void des_run_phase(des_ctx *c, const coll_schedule *s, int i, int member, int self,
                          int group, des_memo *memo, void **sink, double wait, double *late)
{
  const coll_plan *plan = s->plan;
  const coll_phase *ph = &plan->phases[i];
  double eff = hw_config(c->hw)->nccl.protocol_efficiency[s->proto];
  int from = ph->member_off[member], to = ph->member_off[member + 1];
  sg_comm_t local[16];
  des_mb *boxes_local[16];
  sg_comm_t *comms = to - from <= 16 ? local : g_new(sg_comm_t, to - from);
  des_mb **boxes = to - from <= 16 ? boxes_local : g_new(des_mb *, to - from);
  size_t k = 0;
  bool first = false;
  /* the clock moves only when this actor sleeps: read again after that, not per use */
  double now = simgrid_get_clock(), at = now + *late;
  *late = 0;
  for (int j = from; j < to; j++) {
    const coll_xfer *x = &ph->xfers[ph->member_idx[j]];
    des_mb *mb = boxes[j - from] = des_mailbox(c, memo, x->src, x->dst, group);
    first = des_lone_first(c, ph, x, self, mb, &at, &now);
  }
  double pause = at - now + wait + s->pre[i];
  if (pause > 0 && !first) {
    des_sleep(c, pause);
    now = simgrid_get_clock();
  }
  double t0 = now;
  for (int j = from; j < to; j++) {
    const coll_xfer *x = &ph->xfers[ph->member_idx[j]];
    long wire = (long)coll_wire_bytes(plan, ph, x, s->bytes, eff);
    sg_mailbox_t mb = boxes[j - from]->mb;
    if (x->src == self) {
      if (des_ghost_end(c, x->dst))
        des_spawn_ghost(c, x->dst, mb, false, 0);
      /* a lone transfer is posted and waited for in one simcall (des_run_lone) */
      comms[k++] = to - from == 1 ? sg_mailbox_put_init(mb, c, wire) : sg_mailbox_put_async(mb, c, wire);
      c->messages++;
    } else {
      if (des_ghost_end(c, x->src))
        des_spawn_ghost(c, x->src, mb, true, wire);
      comms[k++] = to - from == 1 ? NULL : sg_mailbox_get_async(mb, sink);
    }
  }
  if (to - from == 1)
    des_run_lone(boxes[0]->mb, comms[0], sink);
  else if (k)
    sg_comm_wait_all(comms, k);
  des_count_sent(c, s, ph, from, to, self, t0);
  if (comms != local) {
    g_free(comms);
    g_free(boxes);
  }
}

/* The sleeps between one phase's transfers and the next's (the base latency, a phase's tail,
 * the next one's latency) run as one: a SimGrid activity fewer each, the same clock. */
static void des_run_schedule(des_ctx *c, const coll_schedule *s, int self, int group,
                             des_memo *memo, void **sink, double *late)
{
  int member = coll_member(s->plan, self);
  double wait = s->plan->nphases ? MAX(s->base, 0) : 0;
  for (int i = 0; i < s->plan->nphases; i++) {
    des_run_phase(c, s, i, member, self, group, memo, sink, wait, late);
    wait = MAX(s->post[i], 0);
  }
  if (wait > 0)
    des_sleep(c, wait);
}

/* A switch that reduces in place runs its part of one collective, then ends. */
typedef struct {
  des_ctx *ctx;
  const coll_schedule *sched;
  int endpoint, group;
  void *sink;
} des_switch_arg;

static void des_switch_actor(int argc, char **argv)
{
  (void)argc, (void)argv;
  des_switch_arg *a = sg_actor_self_get_data();
  double late = 0;
  des_run_schedule(a->ctx, a->sched, a->endpoint, a->group, NULL, &a->sink, &late);
}

static void des_spawn_switches(des_ctx *c, const coll_schedule *s, int group)
{
  const coll_plan *plan = s->plan;
  for (int m = plan->n; m < plan->nmembers; m++) {
    des_switch_arg *a = g_new0(des_switch_arg, 1);
    a->ctx = c;
    a->sched = s;
    a->endpoint = plan->members[m];
    a->group = group;
    g_ptr_array_add(c->args, a);
    char host[48];
    hw_endpoint_name(c->hw, a->endpoint, host, sizeof host);
    sg_actor_t actor = sg_actor_init("switch", g_hash_table_lookup(c->hosts, host));
    sg_actor_set_data(actor, a);
    sg_actor_start(actor, des_switch_actor, 0, NULL);
  }
}

/* The channel a collective's messages and arrivals go by: its group's. A layer pass's
 * collectives run on actors of their own, beside the rank's stream actors and each other, so
 * each of its streams gets a channel of its own (negative), where the members issue them in
 * one order. A send and its receive are on two streams: they keep the group's. */
static int des_channel(const des_ctx *c, int rank, const prog_op *op, bool in_layer)
{
  int group = ((const prog_family *)g_ptr_array_index(c->p->families, op->family))->group_of[rank];
  if (!in_layer || op->coll == PROG_COLL_SENDRECV)
    return group;
  return -(group * PROG_NSTREAMS + op->stream) - 1;
}

/* eng_schedule_for through a stream actor's memo (NULL: none): the planner keys a schedule by
 * its group, collective and size. */
static const coll_schedule *des_schedule(des_ctx *c, des_memo *memo, const prog_op *op, int rank)
{
  if (!memo)
    return eng_schedule_for(c->planner, c->p, op, rank, NULL);
  int group = ((const prog_family *)g_ptr_array_index(c->p->families, op->family))->group_of[rank];
  for (int i = 0; i < DES_MEMO; i++)
    if (memo->sched[i].s && memo->sched[i].group == group && memo->sched[i].coll == op->coll &&
        memo->sched[i].bytes == op->comm_bytes)
      return memo->sched[i].s;
  const coll_schedule *s = eng_schedule_for(c->planner, c->p, op, rank, NULL);
  memo->sched[memo->next_sched++ % DES_MEMO] =
      (des_memo_sched){.group = group, .coll = op->coll, .bytes = op->comm_bytes, .s = s};
  return s;
}

/* Runs a collective on `channel`, arriving `*late` after now (left what was not slept); returns
 * the time it takes alone, once every member has arrived. */
static double des_run_collective(des_ctx *c, int rank, const prog_op *op, int channel,
                                 des_memo *memo, void **sink, double *late)
{
  const coll_schedule *s = des_schedule(c, memo, op, rank);
  for (uint32_t rep = 0; rep < op->count; rep++) {
    /* the group's first rank brings the switches that reduce in place along */
    if (s->plan->nmembers > s->plan->n && s->plan->ranks[0] == rank) {
      if (*late > 0)
        des_sleep(c, *late);
      *late = 0;
      des_spawn_switches(c, s, channel);
    }
    des_run_schedule(c, s, rank, channel, memo, sink, late);
  }
  return op->count * s->time;
}

/* A straggler's compute spans, appended from `from` on, stretched by `f` (its waits on
 * collectives inside a macro are not: they are the network's); returns the time they add. */
static double des_slow_spans(GArray *spans, guint from, double f)
{
  double shift = 0;
  for (guint i = from; f != 1 && i < spans->len; i++) {
    eng_span *s = &g_array_index(spans, eng_span, i);
    double len = s->end - s->start;
    s->start += shift;
    if (s->what < 0)
      shift += len * (f - 1);
    s->end = s->start + len * (s->what < 0 ? f : 1);
  }
  return shift;
}

/* The rank's collectives outside layer passes, ended or in flight, as intervals up to `now`, in
 * the rank's scratch array (one allocation per rank, not one per compute run). */
static GArray *des_comms_until(des_rank *r, double now)
{
  GArray *all = r->scratch;
  g_array_set_size(all, 0);
  g_array_append_vals(all, r->comms->data, r->comms->len);
  for (guint i = 0; i < r->open->len; i++) {
    const des_arrival *a = g_ptr_array_index(r->open, i);
    if (a->arriving <= 0 && a->last < now)
      g_array_append_val(all, ((eng_interval){a->last, now}));
  }
  return all;
}

/* What the rank's collectives outside layer passes add to compute ops list[i..j], which ran
 * from t0 back to back (their durations `dur`) up to `now`, the clock (as the analytic engine
 * charges it: eng_interference_charge): run here, or with `carry` left to the caller
 * (des_carry_ok); returns the time added. */
static double des_interference(des_ctx *c, des_rank *r, GArray *list, guint i, guint j, double t0,
                               const double *dur, double now, bool carry)
{
  if (r->comms->len == 0 && r->open->len == 0)
    return 0;
  double at = t0, extra = 0;
  GArray *comms = des_comms_until(r, now);
  for (guint k = i; k <= j; k++) {
    const prog_op *op = prog_op_at(c->p, r->cls, g_array_index(list, uint32_t, k));
    if (op->kind != PROG_MEM)
      extra += eng_interference_charge(c->costs, op, r->rank, at, dur[k - i], comms, now);
    at += dur[k - i];
  }
  /* what ended before this run's start no longer meets the rank's compute */
  for (guint k = r->comms->len; k-- > 0;)
    if (g_array_index(r->comms, eng_interval, k).end <= t0)
      g_array_remove_index_fast(r->comms, k);
  if (extra > 0) {
    if (!carry)
      des_execute(c, extra);
    des_span(r, now, carry ? now + extra : simgrid_get_clock(), -1);
  }
  return extra;
}

/* The host runs `busy` seconds of kernels (executed, sharing the GPU host with the other
 * streams' kernels) and `measured` seconds of measured ones (trace replay: they already hold
 * whatever shared the GPU with them, and the host's own time is no GPU work, so they pass as a
 * sleep), after `late` seconds of a charge carried (des_carry_ok: the host is this actor's
 * alone, so a second of it executed is a second). One activity each at most; with nothing to
 * run, none, and the charge stays carried. Returns whether it ran any. */
static bool des_occupy(des_ctx *c, double late, double busy, double measured)
{
  if (!(busy > 0) && !(measured > 0))
    return false;
  if (busy > 0)
    des_execute(c, busy + late);
  if (measured > 0)
    des_sleep(c, busy > 0 ? measured : measured + late);
  return true;
}

/* Runs list[i] and, when nobody watches the ops in between, the compute and memory ops that
 * follow it as one execution: the GPU runs one kernel at a time, so each op's start inside the
 * run is the run's start plus the durations before it. The run starts `late` after `clock`, now
 * (a charge the actor carries). Returns the index of the last op run. */
static guint des_run_compute(des_actor_arg *a, GArray *list, guint i, double clock, double late)
{
  des_ctx *c = a->ctx;
  des_rank *r = &c->ranks[a->rank];
  guint j = i;
  while (!c->events && j + 1 < list->len && !c->needed[r->cls][g_array_index(list, uint32_t, j)]) {
    const prog_op *next = prog_op_at(c->p, r->cls, g_array_index(list, uint32_t, j + 1));
    if (next->kind == PROG_COMM || next->ndeps > 0 || des_expanded(c, next))
      break;
    j++;
  }
  double t0 = clock + late, total = 0, measured = 0;
  double slow = c->opt->slowdown ? c->opt->slowdown[r->rank] : 1;
  /* a run's durations on the stack: an allocation per run otherwise */
  double dur_local[32] = {0};
  guint n = j - i + 1;
  g_autofree double *dur_heap = n > G_N_ELEMENTS(dur_local) ? g_new0(double, n) : NULL;
  double *dur = dur_heap ? dur_heap : dur_local;
  for (guint k = i; k <= j; k++) {
    uint32_t idx = g_array_index(list, uint32_t, k);
    const prog_op *op = prog_op_at(c->p, r->cls, idx);
    if (op->kind == PROG_MEM) {
      eng_mem_event m = {.time = t0 + total, .delta = op->mem_delta, .seq = idx};
      g_array_append_val(r->mem, m);
    } else {
      guint from = r->spans->len;
      double d = eng_op_spans(c->costs, op, r->rank, t0 + total, r->spans, r->hidden);
      d += des_slow_spans(r->spans, from, slow);
      dur[k - i] = d;
      total += d;
      if (op->tmpl < 0 && op->fixed_time >= 0)
        measured += d;
    }
  }
  /* the clock moves only with an activity: read once after each */
  bool ran = des_occupy(c, late, total - measured, measured);
  double now = ran ? simgrid_get_clock() : clock, t1 = ran ? now : t0;
  double extra = des_interference(c, r, list, i, j, t0, dur, now, c->carry);
  t1 = c->carry ? t1 + extra : extra > 0 ? simgrid_get_clock() : now;
  a->ready = t1;
  for (guint k = i; k <= j; k++)
    des_complete(c, r, g_array_index(list, uint32_t, k), t0, t1);
  return j;
}

/* Members of a group the DES simulates (folding may leave some to ghosts). */
static int des_active_members(const des_ctx *c, const prog_group *g)
{
  int n = 0;
  for (int m = 0; m < g->n; m++)
    n += des_active(c, g->ranks[m]);
  return n;
}

/* Records that this rank entered its next collective of `group`; returns the latest arrival of
 * the group's members so far (when the rank leaves the collective, every member has arrived).
 * Members of a group issue its collectives in one order, but the two sides of a send / receive
 * do so on different streams: those are not matched (NULL). */
static des_arrival *des_arrive(des_ctx *c, des_rank *r, const prog_op *op, int channel,
                               double now)
{
  if (op->coll == PROG_COLL_SENDRECV)
    return NULL;
  gpointer gk = GINT_TO_POINTER(channel);
  guint32 seq = GPOINTER_TO_UINT(g_hash_table_lookup(r->seq, gk));
  g_hash_table_insert(r->seq, gk, GUINT_TO_POINTER(seq + 1));
  gint64 key = (gint64)((guint64)(guint32)channel << 32 | seq);
  des_arrival *a = g_hash_table_lookup(c->arrivals, &key);
  if (!a) {
    a = g_new(des_arrival, 1);
    int n = des_active_members(c, prog_group_of(c->p, op->family, r->rank));
    *a = (des_arrival){.key = key, .last = now, .pending = n, .arriving = n};
    g_hash_table_insert(c->arrivals, &a->key, a);
  }
  a->last = MAX(a->last, now);
  a->arriving--;
  return a;
}

/* A member is done with the collective; the last simulated one forgets it. */
static void des_depart(des_ctx *c, des_arrival *a)
{
  if (a && --a->pending == 0)
    g_hash_table_remove(c->arrivals, &a->key);
}

/* Spreads (channel, seq) keys: g_int64_hash folds the halves together, so that (channel,
 * seq) and (channel ^ 1, seq ^ 1) collide. */
static guint des_arrival_hash(gconstpointer k)
{
  return (guint)((guint64)*(const gint64 *)k * 0x9E3779B97F4A7C15ull >> 32);
}

/* ---- layer passes op by op ---------------------------------------------------------------- */

/* A macro op of one rank run op by op: its template `count` times, each stream of the template
 * on an actor of its own (the compute stream on the rank's, which runs the macro), so that its
 * collectives are flows beside everything else in flight. As the closed form has it, ops of a
 * run wait for their dependencies in that run, the next run's synchronous chain waits for this
 * run's, and the asynchronous streams (ZeRO-3's prefetched gathers, reductions, hidden MoE
 * all-to-alls) run ahead in their stream's order. */
typedef struct {
  des_ctx *ctx;
  des_rank *r;
  const prog_op *op;
  uint32_t idx;      /* the macro's index in the rank's class */
  const bool *async; /* per template op */
  guint nops;
  uint8_t *done;     /* count x nops */
  guint *sync_left;  /* per run: ops of its synchronous chain not yet done */
  int running;       /* stream actors not yet finished */
  int in_flight;     /* collectives of the layer pass under way */
  double busy, since;/* time with one in flight, up to `since` (the last time none was) */
  double t0, hd, per_run, *issue; /* the launch queue: eng_template_issues from t0, NULL: none */
  /* per stream: a semaphore its actor sleeps on and whether it sleeps (as the rank's streams
   * do, des_wake: a simcall each side instead of three) */
  sg_sem_t wake[PROG_NSTREAMS];
  bool sleeps[PROG_NSTREAMS];
} des_macro;

typedef struct {
  des_macro *m;
  int stream;
  void *sink;
} des_macro_arg;

/* Whether op `idx` of run `run` may start: its dependencies in the run are done, and the
 * previous run's synchronous chain too unless it is off that chain. */
static bool des_macro_ready(const des_macro *m, guint run, const prog_op *op, uint32_t idx)
{
  const uint32_t *deps = prog_op_deps(m->ctx->p, m->op->tmpl, op);
  for (uint32_t d = 0; d < op->ndeps; d++)
    if (!m->done[run * m->nops + deps[d]])
      return false;
  return run == 0 || m->async[idx] || m->sync_left[run - 1] == 0;
}

/* Sleeps the actor of `stream` until something of the macro changes. */
static void des_macro_sleep(des_macro *m, int stream)
{
  m->sleeps[stream] = true;
  sg_sem_acquire(m->wake[stream]);
}

/* Wakes every stream actor of the macro that sleeps, to look again. */
static void des_macro_wake(des_macro *m)
{
  for (int s = 0; s < PROG_NSTREAMS; s++)
    if (m->sleeps[s]) {
      m->sleeps[s] = false;
      sg_sem_release(m->wake[s]);
    }
}

static void des_macro_wait(des_macro *m, int stream, guint run, const prog_op *op, uint32_t idx)
{
  while (!des_macro_ready(m, run, op, idx))
    des_macro_sleep(m, stream);
}

static void des_macro_done(des_macro *m, guint run, uint32_t idx)
{
  m->done[run * m->nops + idx] = 1;
  if (!m->async[idx])
    m->sync_left[run]--;
  des_macro_wake(m);
}

/* One collective of a layer pass: as flows, or, when its family's links see no other traffic,
 * for its closed-form time (with its class's siblings in step, as the analytic engine has it). */
static void des_macro_comm(des_macro *m, const prog_op *op, void **sink)
{
  des_ctx *c = m->ctx;
  des_rank *r = m->r;
  double t0 = simgrid_get_clock();
  des_arrival *arrival = NULL;
  if (c->flows[op->family]) {
    int channel = des_channel(c, r->rank, op, true);
    arrival = des_arrive(c, r, op, channel, t0);
    double late = 0;
    des_run_collective(c, r->rank, op, channel, NULL, sink, &late);
  } else {
    const coll_schedule *s = eng_schedule_for(c->planner, c->p, op, r->rank, NULL);
    double d = s ? op->count * eng_coll_crowded(c->costs, op, r->rank, s) : 0;
    if (d > 0)
      des_sleep(c, d);
  }
  des_span(r, MAX(t0, arrival ? arrival->last : t0), simgrid_get_clock(), op->dim);
  des_depart(c, arrival);
}

/* Time with a collective of the layer pass in flight, from its start up to `now`. */
static double des_macro_busy(const des_macro *m, double now)
{
  return m->busy + (m->in_flight > 0 ? now - m->since : 0);
}

static void des_macro_compute(des_ctx *c, const prog_op *op, double d)
{
  if (op->fixed_time >= 0) /* measured: it holds whatever shared the GPU (des_run_compute) */
    des_sleep(c, d);
  else if (d > 0)
    des_execute(c, d);
}

/* Waits for the host to issue launch `nth` (from the op's last, 0) of op `idx` of run `run`. */
static void des_macro_issued(const des_macro *m, guint run, uint32_t idx, double nth)
{
  if (!m->issue || nth < 0)
    return;
  double at = m->t0 + run * m->per_run + m->issue[idx] - nth * m->hd;
  double now = simgrid_get_clock();
  if (at > now)
    des_sleep(m->ctx, at - now);
}

static void des_macro_op(des_macro *m, guint run, uint32_t at, const prog_op *op, void **sink)
{
  des_ctx *c = m->ctx;
  des_rank *r = m->r;
  double t0 = simgrid_get_clock();
  if (op->kind == PROG_COMM) {
    if (m->in_flight++ == 0)
      m->since = t0;
    des_macro_comm(m, op, sink);
    if (--m->in_flight == 0)
      m->busy += simgrid_get_clock() - m->since;
  } else if (op->kind == PROG_MEM) {
    eng_mem_event e = {.time = t0, .delta = op->mem_delta, .seq = m->idx};
    g_array_append_val(r->mem, e);
  } else {
    double d = eng_kernel_time(c->hw, op) * (c->opt->slowdown ? c->opt->slowdown[r->rank] : 1);
    double busy0 = des_macro_busy(m, t0);
    des_macro_compute(c, op, d);
    /* communication kernels hold SMs and share HBM: the time a collective ran beside it costs
     * its class's extra (the closed form's charge) */
    double rate = eng_interference_rate(c->costs, op);
    if (rate > 0)
      des_macro_compute(c, op, (des_macro_busy(m, simgrid_get_clock()) - busy0) * rate);
    des_span(r, t0, simgrid_get_clock(), -1);
    /* the last kernel cannot end before its launch plus its own time */
    if (m->issue && eng_launches(op) > 0) {
      double end = m->t0 + run * m->per_run + m->issue[at] + d / op->count;
      if (end > simgrid_get_clock())
        des_sleep(c, end - simgrid_get_clock());
    }
  }
}

static void des_macro_stream(des_macro *m, int stream, void **sink)
{
  GArray *list = m->ctx->stream_ops[m->op->tmpl * PROG_NSTREAMS + stream];
  for (guint run = 0; run < m->op->count; run++)
    for (guint i = 0; i < list->len; i++) {
      uint32_t idx = g_array_index(list, uint32_t, i);
      const prog_op *op = prog_op_at(m->ctx->p, m->op->tmpl, idx);
      des_macro_wait(m, stream, run, op, idx);
      des_macro_issued(m, run, idx, eng_issue_lead(op));
      des_macro_op(m, run, idx, op, sink);
      des_macro_done(m, run, idx);
    }
}

static void des_macro_actor(int argc, char **argv)
{
  (void)argc, (void)argv;
  des_macro_arg *a = sg_actor_self_get_data();
  des_macro *m = a->m;
  des_macro_stream(m, a->stream, &a->sink);
  /* only the compute stream waits for the others to end; once woken it may free the macro, so
   * nothing of it is touched past the release */
  if (--m->running == 0 && m->sleeps[PROG_STREAM_COMPUTE]) {
    m->sleeps[PROG_STREAM_COMPUTE] = false;
    sg_sem_release(m->wake[PROG_STREAM_COMPUTE]);
  }
}

static void des_macro_init(des_macro *m, des_ctx *c, des_rank *r, uint32_t idx)
{
  const prog_op *op = prog_op_at(c->p, r->cls, idx);
  const prog_class *t = prog_class_at(c->p, op->tmpl);
  *m = (des_macro){.ctx = c, .r = r, .op = op, .idx = idx, .async = c->expand[op->tmpl],
                   .nops = t->ops->len};
  m->done = g_new0(uint8_t, (gsize)MAX(op->count, 1u) * MAX(m->nops, 1u));
  m->sync_left = g_new0(guint, MAX(op->count, 1u));
  guint sync = 0;
  for (guint i = 0; i < m->nops; i++)
    sync += !m->async[i];
  for (guint run = 0; run < op->count; run++)
    m->sync_left[run] = sync;
  for (int s = 0; s < PROG_NSTREAMS; s++)
    m->wake[s] = sg_sem_init(0);
  m->t0 = simgrid_get_clock();
  m->hd = eng_queue_dispatch(c->hw);
  if (m->hd > 0)
    m->issue = eng_template_issues(c->p, op->tmpl, m->hd, &m->per_run);
}

/* Runs macro op list[i] of the rank on actor `a` (its compute stream) and waits for all of it. */
static void des_run_macro(des_actor_arg *a, GArray *list, guint i)
{
  des_ctx *c = a->ctx;
  des_rank *r = &c->ranks[a->rank];
  uint32_t idx = g_array_index(list, uint32_t, i);
  const prog_op *op = prog_op_at(c->p, r->cls, idx);
  double t0 = simgrid_get_clock();
  des_macro m;
  des_macro_init(&m, c, r, idx);
  des_macro_arg args[PROG_NSTREAMS];
  for (int s = 0; s < PROG_NSTREAMS; s++) {
    if (s == PROG_STREAM_COMPUTE || c->stream_ops[op->tmpl * PROG_NSTREAMS + s]->len == 0)
      continue;
    args[s] = (des_macro_arg){.m = &m, .stream = s};
    m.running++;
    sg_actor_t actor = sg_actor_init("layer", sg_host_self());
    sg_actor_set_data(actor, &args[s]);
    sg_actor_start(actor, des_macro_actor, 0, NULL);
  }
  des_macro_stream(&m, PROG_STREAM_COMPUTE, &a->sink);
  while (m.running > 0)
    des_macro_sleep(&m, PROG_STREAM_COMPUTE);
  for (int s = 0; s < PROG_NSTREAMS; s++)
    sg_sem_destroy(m.wake[s]);
  g_free(m.done);
  g_free(m.sync_left);
  g_free(m.issue);
  double now = simgrid_get_clock(), dur = now - t0;
  des_interference(c, r, list, i, i, t0, &dur, now, false);
  des_complete(c, r, idx, t0, simgrid_get_clock());
}

/* How long after now the actor may really start op: its stream is free (des_run_compute) and
 * the ops it waits for have ended. Past now only while a charge is carried (des_carry_ok). */
static double des_late(const des_ctx *c, const des_rank *r, const des_actor_arg *a,
                       const prog_op *op, double now)
{
  double ready = a->ready;
  const uint32_t *deps = prog_op_deps(c->p, r->cls, op);
  for (uint32_t d = 0; d < op->ndeps; d++)
    ready = MAX(ready, r->end[deps[d]]);
  return ready > now ? ready - now : 0;
}

static void des_actor(int argc, char **argv)
{
  (void)argc, (void)argv;
  des_actor_arg *a = sg_actor_self_get_data();
  des_ctx *c = a->ctx;
  des_rank *r = &c->ranks[a->rank];
  GArray *list = c->stream_ops[r->cls * PROG_NSTREAMS + a->stream];
  for (guint i = 0; i < list->len; i++) {
    uint32_t idx = g_array_index(list, uint32_t, i);
    const prog_op *op = prog_op_at(c->p, r->cls, idx);
    des_wait_deps(c, r, op, a->stream);
    double now = simgrid_get_clock(), late = des_late(c, r, a, op, now), t0 = now + late;
    if (des_expanded(c, op)) {
      if (late > 0) /* not with des_carry_ok */
        des_sleep(c, late);
      des_run_macro(a, list, i);
    } else if (op->kind != PROG_COMM) {
      i = des_run_compute(a, list, i, now, late);
    } else {
      int channel = des_channel(c, r->rank, op, false);
      des_arrival *arrival = des_arrive(c, r, op, channel, t0);
      if (arrival)
        g_ptr_array_add(r->open, arrival);
      double alone = des_run_collective(c, r->rank, op, channel, &a->memo, &a->sink, &late);
      if (late > 0) /* no transfer slept it */
        des_sleep(c, late);
      double t1 = simgrid_get_clock();
      /* in flight from when the last member arrived, as the analytic engine counts it, not while
       * this rank waited for the others (a receive is posted long before its send); a
       * collective that shares links with others is in flight all the longer */
      double from = MAX(t0, arrival ? arrival->last : t1 - alone);
      des_span(r, from, t1, op->dim);
      if (arrival)
        g_ptr_array_remove_fast(r->open, arrival);
      if (t1 > from)
        g_array_append_val(r->comms, ((eng_interval){from, t1}));
      des_depart(c, arrival);
      des_complete(c, r, idx, t0, t1);
    }
  }
}

static void des_configure(const des_ctx *c, int nactors)
{
  int argc = 1;
  char prog[] = "dlsim";
  char *argv[] = {prog, NULL};
  xbt_log_control_set("root.thresh:critical");
  simgrid_init(&argc, argv);
  /* Exact alpha-beta: no TCP window bound, no cross traffic, no hidden factors. */
  sg_cfg_set_string("network/model", "CM02");
  sg_cfg_set_boolean("network/crosstraffic", "no");
  sg_cfg_set_double("network/TCP-gamma", 0.0);
  sg_cfg_set_double("surf/precision", 1e-12);
  sg_cfg_set_double("maxmin/precision", 1e-9);
  /* A host has one core, and no resource of it is shared with another host, so SimGrid's
   * trace-integration CPU model (each host's finish dates, no max-min system over all of them)
   * gives the dates the default one solves for: the same step to the last digit, 8 % fewer
   * instructions. DLSIM_SIMGRID_CPU_OPTIM=Lazy restores the default, to check that. */
  const char *cpu = g_getenv("DLSIM_SIMGRID_CPU_OPTIM");
  sg_cfg_set_string("cpu/optim", cpu && *cpu ? cpu : "TI");
  const char *factory = g_getenv("DLSIM_SIMGRID_CONTEXTS");
  if (factory && *factory)
    sg_cfg_set_string("contexts/factory", factory);
  if (nactors > 30000) /* two mappings per actor stack would exceed vm.max_map_count */
    sg_cfg_set_int("contexts/guard-size", 0);
  (void)c;
}

/* The GPU pairs (src, dst appended to `pairs`) of the transfers `rank` runs in schedule `s`. */
static void des_add_pairs(const des_ctx *c, const coll_schedule *s, int rank, GArray *pairs)
{
  int m = s ? coll_member(s->plan, rank) : -1;
  for (int i = 0; m >= 0 && i < s->plan->nphases; i++) {
    const coll_phase *ph = &s->plan->phases[i];
    for (int j = ph->member_off[m]; j < ph->member_off[m + 1]; j++) {
      const coll_xfer *x = &ph->xfers[ph->member_idx[j]];
      if (x->src < c->p->nranks && x->dst < c->p->nranks)
        g_array_append_vals(pairs, (int[]){x->src, x->dst}, 2);
    }
  }
}

/* The collectives of class `k` that `rank` runs (and, for its templates run op by op, theirs
 * that run as flows): their transfers' GPU pairs. `distinct` caches eng_distinct_comms. */
static void des_class_pairs(des_ctx *c, int k, int rank, GArray **distinct, GArray *pairs)
{
  if (!distinct[k])
    distinct[k] = eng_distinct_comms(c->p, k);
  const prog_class *cl = prog_class_at(c->p, k);
  for (guint i = 0; i < distinct[k]->len; i++) {
    const prog_op *op = prog_op_at(c->p, k, g_array_index(distinct[k], uint32_t, i));
    if (!cl->is_template || c->flows[op->family])
      des_add_pairs(c, eng_schedule_for(c->planner, c->p, op, rank, NULL), rank, pairs);
  }
  for (guint i = 0; !cl->is_template && i < cl->ops->len; i++) {
    const prog_op *op = &g_array_index(cl->ops, prog_op, i);
    if (op->tmpl >= 0 && c->expand[op->tmpl])
      des_class_pairs(c, op->tmpl, rank, distinct, pairs);
  }
}

/* Every GPU pair a simulated rank's transfer joins (flattened src, dst; repeats): the platform
 * holds their routes whole (hw_platform_xml_routes), so that starting one looks its route up
 * instead of walking SimGrid's search of a rail group. A pair left out is still searched. */
static GArray *des_route_pairs(des_ctx *c)
{
  guint ncls = c->p->classes->len;
  GArray **distinct = g_new0(GArray *, MAX(ncls, 1u));
  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(int));
  for (int r = 0; r < c->p->nranks; r++)
    if (des_active(c, r))
      des_class_pairs(c, c->p->class_of[r], r, distinct, pairs);
  for (guint k = 0; k < ncls; k++)
    if (distinct[k])
      g_array_free(distinct[k], TRUE);
  g_free(distinct);
  return pairs;
}

static bool des_load_platform(des_ctx *c, GError **err)
{
  g_autoptr(GArray) pairs = des_route_pairs(c);
  char *xml = hw_platform_xml_routes(c->hw, c->p->nranks, c->speed, (const int *)(void *)pairs->data,
                                     pairs->len / 2);
  char *path = NULL;
  int fd = g_file_open_tmp("dlsim-platform-XXXXXX.xml", &path, NULL);
  bool ok = fd >= 0 && write(fd, xml, strlen(xml)) == (ssize_t)strlen(xml);
  if (fd >= 0)
    close(fd);
  g_free(xml);
  if (!ok) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "des engine: cannot write the platform file");
    g_free(path);
    return false;
  }
  simgrid_load_platform(path);
  unlink(path);
  g_free(path);
  return true;
}

static void des_index_hosts(des_ctx *c)
{
  size_t n = sg_host_count();
  sg_host_t *all = sg_host_list();
  c->hosts = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = 0; i < n; i++)
    g_hash_table_insert(c->hosts, (gpointer)sg_host_get_name(all[i]), all[i]);
  free(all);
}

static void des_spawn(des_ctx *c)
{
  char name[32];
  des_index_hosts(c);
  for (int rank = 0; rank < c->p->nranks; rank++) {
    des_rank *r = &c->ranks[rank];
    if (!des_active(c, rank))
      continue;
    hw_host_name(rank, name, sizeof name);
    sg_host_t host = g_hash_table_lookup(c->hosts, name);
    for (int s = 0; s < PROG_NSTREAMS; s++) {
      if (c->stream_ops[r->cls * PROG_NSTREAMS + s]->len == 0)
        continue;
      des_actor_arg *a = g_new0(des_actor_arg, 1);
      a->ctx = c;
      a->rank = rank;
      a->stream = s;
      g_ptr_array_add(c->args, a);
      char aname[48];
      g_snprintf(aname, sizeof aname, "r%d.s%d", rank, s);
      sg_actor_t actor = sg_actor_init(aname, host);
      sg_actor_set_data(actor, a);
      sg_actor_start(actor, des_actor, 0, NULL);
    }
  }
}

/* Another tenant's flow (network.background): a daemon that waits for its start and then
 * sends without end over its link, capped by its private one; a kill time ends it. */
typedef struct {
  sg_host_t from, to;
  double start;
} des_bg_arg;

static void des_bg_actor(int argc, char **argv)
{
  (void)argc, (void)argv;
  const des_bg_arg *a = sg_actor_self_get_data();
  if (a->start > 0)
    sg_actor_sleep_for(a->start);
  sg_host_sendto(a->from, a->to, 1e18); /* no end in any step (the size is a uint64_t) */
}

static void des_spawn_background(des_ctx *c)
{
  g_autoptr(GArray) bg = hw_background_flows(c->hw);
  for (guint i = 0; i < bg->len; i++) {
    const hw_bg_flow *f = &g_array_index(bg, hw_bg_flow, i);
    char from[32], to[32];
    g_snprintf(from, sizeof from, "bg%ua", i);
    g_snprintf(to, sizeof to, "bg%ub", i);
    des_bg_arg *a = g_new0(des_bg_arg, 1);
    a->from = g_hash_table_lookup(c->hosts, from);
    a->to = g_hash_table_lookup(c->hosts, to);
    a->start = f->start;
    g_ptr_array_add(c->args, a);
    if (!a->from || !a->to) /* one node: the platform has no network links */
      continue;
    sg_actor_t actor = sg_actor_init(from, a->from);
    sg_actor_set_data(actor, a);
    sg_actor_daemonize(actor);
    if (f->duration > 0)
      sg_actor_set_kill_time(actor, f->start + f->duration);
    sg_actor_start(actor, des_bg_actor, 0, NULL);
  }
}

static long des_count_ops(const des_ctx *c)
{
  long n = 0;
  for (int rank = 0; rank < c->p->nranks; rank++)
    n += des_active(c, rank) ? (long)prog_class_at(c->p, c->ranks[rank].cls)->ops->len : 0;
  return n;
}

/* Actors at most at once: each rank's streams, and those of the layer pass it runs op by op. */
static int des_count_actors(const des_ctx *c)
{
  int n = 0, layer = 0;
  for (guint k = 0; k < c->p->classes->len; k++)
    for (int s = 0, m = 0; c->expand[k] && s < PROG_NSTREAMS; s++, layer = MAX(layer, m))
      m += s != PROG_STREAM_COMPUTE && c->stream_ops[k * PROG_NSTREAMS + s]->len > 0;
  for (int rank = 0; rank < c->p->nranks; rank++) {
    for (int s = 0; s < PROG_NSTREAMS && des_active(c, rank); s++)
      n += c->stream_ops[c->ranks[rank].cls * PROG_NSTREAMS + s]->len > 0;
    n += des_active(c, rank) ? layer : 0;
  }
  return n;
}

/* Whether some group of a family has more than one rank. */
static bool des_moves(const des_ctx *c, int family)
{
  const prog_family *f = g_ptr_array_index(c->p->families, family);
  for (int r = 0; r < c->p->nranks; r++) {
    const prog_group *g = f->group_of[r] >= 0 ? g_ptr_array_index(c->p->groups, f->group_of[r]) : NULL;
    if (g && g->n > 1)
      return true;
  }
  return false;
}

/* Which dimensions ran collectives as flows (outside layer passes always) and which kept the
 * closed form in layer passes; groups of one rank move nothing and count for neither. */
static void des_collect_dims(const des_ctx *c, eng_result *out)
{
  const prog_program *p = c->p;
  g_autofree bool *moves = g_new0(bool, MAX(p->families->len, 1u));
  for (guint f = 0; f < p->families->len; f++)
    moves[f] = des_moves(c, (int)f);
  for (guint k = 0; k < p->classes->len; k++) {
    const prog_class *cl = prog_class_at(p, (int)k);
    for (guint i = 0; i < cl->ops->len; i++) {
      const prog_op *op = &g_array_index(cl->ops, prog_op, i);
      if (op->kind != PROG_COMM || !moves[op->family])
        continue;
      if (!cl->is_template || c->flows[op->family])
        out->flow_dims |= 1u << op->dim;
      else
        out->closed_dims |= 1u << op->dim;
    }
  }
}

static void des_collect(des_ctx *c, eng_result *out)
{
  int crit = 0;
  for (int r = 1; r < c->p->nranks; r++)
    if (des_active(c, r) && c->ranks[r].finish > c->ranks[crit].finish)
      crit = r;
  out->step_time = c->ranks[crit].finish;
  out->critical_rank = crit;
  eng_breakdown(c->ranks[crit].spans, c->ranks[crit].hidden, eng_pipelined(c->p), out->step_time,
                out);
  out->nclasses = (int)c->p->classes->len;
  out->class_peak = g_new0(double, out->nclasses);
  for (int r = 0; r < c->p->nranks; r++) {
    if (!des_active(c, r))
      continue;
    double peak = eng_mem_peak(c->ranks[r].mem, prog_class_at(c->p, c->ranks[r].cls)->base_memory, out->mem_samples, r);
    out->class_peak[c->ranks[r].cls] = MAX(out->class_peak[c->ranks[r].cls], peak);
    out->peak_memory = MAX(out->peak_memory, peak);
  }
  out->messages = c->messages;
  out->activities = c->activities;
  des_collect_dims(c, out);
  out->events = c->events;
  c->events = NULL;
}

/* The transfers one run of template `t` adds when its flow families' collectives run as flows,
 * for rank `rank` (a member sends about one message per phase of its schedule). */
static double des_template_messages(des_ctx *c, const prog_class *t, int rank)
{
  double n = 0;
  for (guint j = 0; j < t->ops->len; j++) {
    const prog_op *x = &g_array_index(t->ops, prog_op, j);
    if (x->kind != PROG_COMM || !c->flows[x->family])
      continue;
    const coll_schedule *s = eng_schedule_for(c->planner, c->p, x, rank, NULL);
    n += s ? (double)x->count * s->plan->nphases : 0;
  }
  return n;
}

/* How many transfers running the in-layer families as flows would add to the step, every rank
 * counted (folding may spare some, but rarely where layers run as flows). */
static double des_layer_messages(des_ctx *c)
{
  const prog_program *p = c->p;
  double total = 0;
  for (guint k = 0; k < p->classes->len; k++) {
    const prog_class *cl = prog_class_at(p, (int)k);
    for (guint i = 0; !cl->is_template && i < cl->ops->len; i++) {
      const prog_op *op = &g_array_index(cl->ops, prog_op, i);
      if (op->tmpl >= 0)
        total += (double)cl->nranks * op->count *
                 des_template_messages(c, prog_class_at(p, op->tmpl), cl->rep);
    }
  }
  return total;
}

/* `auto` past collectives.layer_flow_budget transfers (SimGrid runs about 35,000 a second here,
 * so the default million is about half a minute): the in-layer families go back to their
 * closed form, and the report says so (those outside layer passes always run as flows);
 * `always` runs them whatever they cost. */
static void des_cap_layer_flows(des_ctx *c, eng_result *out)
{
  if (c->opt->layer_flows != CFG_LAYER_FLOWS_AUTO || c->opt->layer_flow_budget <= 0)
    return;
  double n = des_layer_messages(c);
  if (n <= c->opt->layer_flow_budget)
    return;
  g_autofree bool *in = eng_in_template_families(c->p);
  for (guint f = 0; f < c->p->families->len; f++)
    if (in[f] && c->flows[f]) {
      c->flows[f] = false;
      out->capped_dims |= 1u << ((const prog_family *)g_ptr_array_index(c->p->families, f))->dim;
    }
  out->capped_messages = n;
}

/* Which families run as flows, and so which templates run op by op: those with a collective
 * of such a family. */
static bool des_plan_flows(des_ctx *c, eng_result *out, GError **err)
{
  const prog_program *p = c->p;
  c->flows = eng_flow_families(p, c->hw, c->planner, c->opt->layer_flows, err);
  if (!c->flows)
    return false;
  des_cap_layer_flows(c, out);
  c->expand = g_new0(bool *, MAX(p->classes->len, 1u));
  for (guint k = 0; k < p->classes->len; k++) {
    const prog_class *t = prog_class_at(p, (int)k);
    bool flows = false;
    for (guint i = 0; t->is_template && i < t->ops->len && !flows; i++) {
      const prog_op *op = &g_array_index(t->ops, prog_op, i);
      flows = op->kind == PROG_COMM && c->flows[op->family];
    }
    if (flows)
      c->expand[k] = eng_async_ops(p, (int)k);
  }
  return true;
}

/* Plans every collective before the simulation starts, so that a collective no algorithm can
 * run is an error, not a crash inside an actor. */
static bool des_plan_all(des_ctx *c, GError **err)
{
  guint ncls = c->p->classes->len;
  GArray **distinct = g_new0(GArray *, MAX(ncls, 1u));
  bool ok = true;
  for (int r = 0; r < c->p->nranks && ok; r++) {
    int k = c->p->class_of[r];
    if (!des_active(c, r))
      continue;
    if (!distinct[k])
      distinct[k] = eng_distinct_comms(c->p, k);
    for (guint i = 0; i < distinct[k]->len && ok; i++)
      ok = eng_schedule_for(c->planner, c->p,
                            prog_op_at(c->p, k, g_array_index(distinct[k], uint32_t, i)), r, err);
  }
  for (guint k = 0; k < ncls; k++)
    if (distinct[k])
      g_array_free(distinct[k], TRUE);
  g_free(distinct);
  return ok;
}

static bool des_all_done(const des_ctx *c)
{
  for (int r = 0; r < c->p->nranks; r++) {
    guint n = des_active(c, r) ? prog_class_at(c->p, c->ranks[r].cls)->ops->len : 0;
    for (guint i = 0; i < n; i++)
      if (!c->ranks[r].done[i])
        return false;
  }
  return true;
}

/* Whether a compute run's interference charge may be carried rather than executed: its actor
 * then gives its ops the end they would have had after executing the charge, and what waits
 * for them, or for the stream, starts that much after now (des_late), folding the wait into
 * its next activity, so a SimGrid activity fewer per charge. That holds when a charge executed
 * takes its own length, so when no other kernel runs on the host: only the compute stream
 * computes and no layer pass runs op by op. Not when tracing, whose link samples follow the
 * transfers as posted. DLSIM_DES_CARRY=0 executes every charge, to check that. */
static bool des_carry_ok(const des_ctx *c)
{
  const char *env = g_getenv("DLSIM_DES_CARRY");
  if (c->events || (env && strcmp(env, "0") == 0))
    return false;
  for (guint k = 0; k < c->p->classes->len; k++) {
    if (c->expand[k])
      return false;
    for (int s = 0; s < PROG_NSTREAMS; s++) {
      GArray *list = c->stream_ops[k * PROG_NSTREAMS + s];
      for (guint i = 0; s != PROG_STREAM_COMPUTE && i < list->len; i++)
        if (prog_op_at(c->p, (int)k, g_array_index(list, uint32_t, i))->kind == PROG_COMPUTE)
          return false;
    }
  }
  return true;
}

/* Runs the simulation in this (child) process. */
static bool des_simulate(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                         eng_result *out, GError **err)
{
  des_ctx c = {.p = p, .hw = hw, .opt = opt};
  c.planner = eng_planner_new(hw, opt);
  c.costs = eng_costs_new(p, hw, c.planner, opt);
  if (!des_plan_flows(&c, out, err) || !des_plan_all(&c, err))
    return false;
  c.speed = hw_peak_flops(hw, p->meta.dtype);
  c.mailboxes = g_hash_table_new_full(des_mb_hash, des_mb_equal, NULL, g_free);
  c.arrivals = g_hash_table_new_full(des_arrival_hash, g_int64_equal, NULL, g_free);
  c.args = g_ptr_array_new_with_free_func(g_free);
  if (opt->trace) {
    c.events = g_array_new(FALSE, FALSE, sizeof(eng_event));
    out->mem_samples = g_array_new(FALSE, FALSE, sizeof(eng_mem_sample));
  }
  des_build_tables(&c);
  c.carry = des_carry_ok(&c);
  c.active = eng_fold_ranks(p, hw, opt, c.flows, c.planner, &out->fold);
  c.ranks = g_new0(des_rank, p->nranks);
  for (int r = 0; r < p->nranks; r++) {
    des_rank *x = &c.ranks[r];
    x->rank = r;
    x->cls = p->class_of[r];
    guint nops = prog_class_at(p, x->cls)->ops->len;
    x->done = g_new0(uint8_t, MAX(nops, 1u));
    x->end = g_new0(double, MAX(nops, 1u));
    x->spans = g_array_new(FALSE, FALSE, sizeof(eng_span));
    x->comms = g_array_new(FALSE, FALSE, sizeof(eng_interval));
    x->open = g_ptr_array_new();
    x->scratch = g_array_new(FALSE, FALSE, sizeof(eng_interval));
    x->mem = g_array_new(FALSE, FALSE, sizeof(eng_mem_event));
    x->seq = g_hash_table_new(g_direct_hash, g_direct_equal);
  }
  des_configure(&c, des_count_actors(&c));
  if (!des_load_platform(&c, err))
    return false;
  c.links = des_links_new(hw, c.events != NULL);
  for (int r = 0; r < p->nranks; r++) {
    for (int s = 0; s < PROG_NSTREAMS; s++) {
      c.ranks[r].wake[s] = des_active(&c, r) ? sg_sem_init(0) : NULL;
      c.ranks[r].awaits[s] = DES_NOTHING;
    }
  }
  c.ops_total = des_count_ops(&c);
  des_spawn(&c);
  des_spawn_background(&c);
  simgrid_run();
  if (!des_all_done(&c)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                "des engine: the program deadlocks (the ranks of a group issue its collectives in "
                "different orders)");
    return false;
  }
  des_collect(&c, out);
  des_collect_links(&c, out->step_time, out);
  des_links_free(c.links);
  /* The child exits right after sending results; the OS reclaims the rest. */
  return true;
}

/* ---- the child process and the pipe ------------------------------------------------------- */

/* What the child sends first: the result itself (its pointers mean nothing in the parent and
 * are replaced by the arrays that follow), how many of each array follow, and the error. */
typedef struct {
  eng_result r;
  guint nevents, nmem, nloads, nlsamples;
  int ok;
  int code; /* cfg_error_code of the failure: input errors stay input errors */
  char error[512];
} des_header;

bool eng_write_all(int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    len -= (size_t)w;
  }
  return true;
}

/* `w` NULL: no stall watch, a blocking read */
static bool des_read_all(int fd, void *buf, size_t len, des_watch *w)
{
  char *p = buf;
  while (len) {
    if (w && !des_watch_readable(w, fd))
      return false;
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    len -= (size_t)r;
  }
  return true;
}

bool eng_read_all(int fd, void *buf, size_t len)
{
  return des_read_all(fd, buf, len, NULL);
}

static void des_child(int fd, const prog_program *p, const hw_cluster *hw, const eng_options *opt)
{
  /* zeroed bytewise, padding included: the header goes down the pipe as raw bytes */
  eng_result r;
  des_header h;
  memset(&r, 0, sizeof r);
  memset(&h, 0, sizeof h);
  GError *err = NULL;
  h.ok = des_simulate(p, hw, opt, &r, &err);
  if (!h.ok) {
    g_strlcpy(h.error, err ? err->message : "unknown error", sizeof h.error);
    h.code = err ? err->code : CFG_ERROR_RUNTIME;
  }
  memcpy(&h.r, &r, sizeof r);
  h.nevents = r.events ? r.events->len : 0;
  h.nmem = r.mem_samples ? r.mem_samples->len : 0;
  h.nloads = r.link_loads ? r.link_loads->len : 0;
  h.nlsamples = r.link_samples ? r.link_samples->len : 0;
  bool ok = eng_write_all(fd, &h, sizeof h) &&
            eng_write_all(fd, r.class_peak, sizeof(double) * (size_t)MAX(r.nclasses, 0)) &&
            (!h.nevents || eng_write_all(fd, r.events->data, sizeof(eng_event) * h.nevents)) &&
            (!h.nmem || eng_write_all(fd, r.mem_samples->data, sizeof(eng_mem_sample) * h.nmem)) &&
            (!h.nloads ||
             eng_write_all(fd, r.link_loads->data, sizeof(eng_link_load) * h.nloads)) &&
            (!h.nlsamples ||
             eng_write_all(fd, r.link_samples->data, sizeof(eng_link_sample) * h.nlsamples));
  close(fd);
  _exit(ok ? 0 : 3);
}

static GArray *des_read_array(int fd, guint n, size_t size, bool *ok, des_watch *w)
{
  if (!*ok || n == 0)
    return NULL;
  GArray *a = g_array_sized_new(FALSE, FALSE, (guint)size, n);
  g_array_set_size(a, n);
  *ok = des_read_all(fd, a->data, size * n, w);
  return a;
}

/* Why the results did not come: the watch's reason if it gave up, else `what`. */
static void des_receive_failed(des_watch *w, const char *what, GError **err)
{
  if (w->error) {
    g_propagate_error(err, w->error);
    w->error = NULL;
  } else {
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "des engine: %s", what);
  }
}

static bool des_receive(int fd, eng_result *out, des_watch *w, GError **err)
{
  des_header h;
  if (!des_read_all(fd, &h, sizeof h, w)) {
    des_receive_failed(w, "the simulation died", err);
    return false;
  }
  if (!h.ok) {
    g_set_error(err, CFG_ERROR, h.code, "%s", h.error);
    return false;
  }
  *out = h.r;
  out->class_peak = g_new0(double, MAX(h.r.nclasses, 1));
  bool ok =
      des_read_all(fd, out->class_peak, sizeof(double) * (size_t)MAX(h.r.nclasses, 0), w);
  out->events = des_read_array(fd, h.nevents, sizeof(eng_event), &ok, w);
  out->mem_samples = des_read_array(fd, h.nmem, sizeof(eng_mem_sample), &ok, w);
  out->link_loads = des_read_array(fd, h.nloads, sizeof(eng_link_load), &ok, w);
  out->link_samples = des_read_array(fd, h.nlsamples, sizeof(eng_link_sample), &ok, w);
  if (!ok)
    des_receive_failed(w, "truncated results", err);
  return ok;
}

int eng_fork_replying(const char *who, int *fd, GError **err)
{
  int fds[2];
  if (pipe(fds) != 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "%s: pipe: %s", who, g_strerror(errno));
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "%s: fork: %s", who, g_strerror(errno));
    return -1;
  }
  close(fds[pid == 0 ? 0 : 1]);
  *fd = fds[pid == 0 ? 1 : 0];
  return (int)pid;
}

bool eng_run_des(const prog_program *p, const hw_cluster *hw, const eng_options *opt,
                 eng_result *out, GError **err)
{
  double stall;
  if (!des_watch_stall(&stall, err))
    return false;
  int fd;
  pid_t pid = eng_fork_replying("des engine", &fd, err);
  if (pid < 0)
    return false;
  if (pid == 0)
    des_child(fd, p, hw, opt);
  des_watch w;
  des_watch_start(&w, pid, stall);
  bool ok = des_receive(fd, out, &w, err);
  close(fd);
  int status = 0;
  if (!des_watch_exit(&w, &status) && ok) {
    des_receive_failed(&w, "the simulation did not end", err);
    ok = false;
  }
  des_watch_end(&w);
  if (ok && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    if (WIFSIGNALED(status))
      g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "des engine: the simulation was killed by "
                  "signal %d", WTERMSIG(status));
    else
      g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "des engine: the simulation exited with "
                  "status %d", WEXITSTATUS(status));
    ok = false;
  } else if (!ok && !w.killed && WIFSIGNALED(status) && err && *err) {
    g_prefix_error(err, "SimGrid aborted (signal %d): ", WTERMSIG(status));
  }
  return ok;
}
