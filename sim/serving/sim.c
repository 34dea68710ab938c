/* The event loop: request arrivals and iteration ends in one heap (time, then insertion order,
 * so equal times resolve the same way every run). An arrival is routed to a replica and a lane;
 * an idle lane plans an iteration at once; an iteration's end advances its sequences, emits
 * their tokens, frees what finished and plans the next one.
 *
 * Disaggregated (serving.prefill and serving.decode): two pools of replicas, each a srv_sim of
 * its own (its layout, cost model, KV cache and batch limits), placed on the cluster's GPUs in
 * order, prefill first. A request is prefilled by a prefill replica, which samples its first
 * token; a decode replica chosen by the decode router reserves room for its KV (the request
 * waits for it if there is none), the KV moves as flows over the cluster's links (flows.c),
 * and when the last byte has landed the first token reaches the client and the request joins
 * the decode replica's running batch. */
#include "serving/serving_internal.h"

#include <math.h>
#include <string.h>

#define SRV_BUCKETS 64

/* FLOW: the next KV flow ends (id: the flow model's epoch; stale when it changed since);
 * LANDED: a request's KV is on its decode replica (id: the request) */
enum { SRV_EV_ARRIVAL, SRV_EV_DONE, SRV_EV_FLOW, SRV_EV_LANDED };

typedef struct {
  double t;
  guint64 seq;
  int kind, id;
} srv_event;

/* Time-weighted sums in SRV_BUCKETS buckets whose width doubles as the run goes on. */
typedef struct {
  double width;
  double busy[SRV_BUCKETS], batch[SRV_BUCKETS], kv[SRV_BUCKETS], waiting[SRV_BUCKETS];
} srv_timeline;

/* A request's way through a disaggregated deployment. */
typedef struct {
  int prefill_replica, decode_replica; /* -1: none */
  int prefill_blocks;  /* KV blocks it holds on its prefill replica until the transfer ends */
  int prefill_cached;  /* of those, the ones in the prefix cache (its first, shared) */
  int flows_left;
  bool direct, network;
  double prefill_end, wait_end, landed; /* NAN until then */
  double bytes, latency;
} srv_move;

/* What a disaggregated run adds: the decode pool and the KV transfers. */
typedef struct {
  srv_sim sim;             /* the decode pool (the run's `sim` is the prefill pool) */
  cfg_serving cfg[2];      /* serving as each pool sees it: its layout and limits */
  cfg_workload w[2];
  int lane0;               /* the decode pool's first lane */
  int gpu0[2];             /* each pool's first GPU */
  srv_move *moves;         /* per request */
  GQueue *inbound;         /* per decode replica: prefilled requests waiting for room */
  int *landing;            /* per decode replica: transfers in flight to it */
  hw_cluster *hw;
  srv_flows *flows;
  GArray *ended;
  int epoch;
} srv_disagg;

typedef struct {
  srv_sim sim;
  srv_disagg *dis;         /* NULL: aggregated */
  double pool_busy[2], pool_batch[2];
  long pool_iters[2];
  srv_stream stream;
  const cfg_workload *w;
  GArray *heap; /* srv_event */
  guint64 seq;
  GPtrArray *burst; /* idle lanes that requests of the current instant joined (srv_lane) */
  srv_hist gaps;
  srv_lane **lanes;
  int nlanes;
  int next_send, done;
  srv_timeline tl;
  double busy, batch_sum, kv_sum, batch_max, kv_max;
  long iterations;
  bool trace;
  srv_result *out;
} srv_run;

/* ---- the heap --------------------------------------------------------------------------------- */

static bool srv_before(const srv_event *a, const srv_event *b)
{
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void srv_push(srv_run *run, double t, int kind, int id)
{
  srv_event e = {.t = t, .seq = run->seq++, .kind = kind, .id = id};
  g_array_append_val(run->heap, e);
  srv_event *h = (srv_event *)run->heap->data;
  for (guint i = run->heap->len - 1; i > 0;) {
    guint up = (i - 1) / 2;
    if (!srv_before(&h[i], &h[up]))
      break;
    srv_event tmp = h[i];
    h[i] = h[up];
    h[up] = tmp;
    i = up;
  }
}

static srv_event srv_pop(srv_run *run)
{
  srv_event *h = (srv_event *)run->heap->data;
  srv_event top = h[0];
  guint n = run->heap->len - 1;
  h[0] = h[n];
  g_array_set_size(run->heap, n);
  for (guint i = 0;;) {
    guint l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && srv_before(&h[l], &h[m]))
      m = l;
    if (r < n && srv_before(&h[r], &h[m]))
      m = r;
    if (m == i)
      break;
    srv_event tmp = h[i];
    h[i] = h[m];
    h[m] = tmp;
    i = m;
  }
  return top;
}

/* ---- statistics over time ------------------------------------------------------------------ */

static void srv_timeline_add(srv_timeline *tl, double t0, double t1, double batch, double kv,
                             double waiting)
{
  double *series[] = {tl->busy, tl->batch, tl->kv, tl->waiting};
  while (t1 > tl->width * SRV_BUCKETS) {
    for (size_t k = 0; k < G_N_ELEMENTS(series); k++) {
      double *x = series[k];
      for (int i = 0; i < SRV_BUCKETS / 2; i++)
        x[i] = x[2 * i] + x[2 * i + 1];
      memset(x + SRV_BUCKETS / 2, 0, sizeof(double) * SRV_BUCKETS / 2);
    }
    tl->width *= 2;
  }
  for (int b = (int)(t0 / tl->width); b < SRV_BUCKETS && b * tl->width < t1; b++) {
    double dt = MIN(t1, (b + 1) * tl->width) - MAX(t0, b * tl->width);
    if (dt <= 0)
      continue;
    tl->busy[b] += dt;
    tl->batch[b] += batch * dt;
    tl->kv[b] += kv * dt;
    tl->waiting[b] += waiting * dt;
  }
}

static int srv_waiting(const srv_run *run)
{
  int n = 0;
  for (int i = 0; i < run->nlanes; i++)
    n += (int)run->lanes[i]->waiting.length;
  return n;
}

/* The pool a lane belongs to: 0 the aggregated or prefill pool, 1 the decode pool. */
static int srv_pool_of(const srv_run *run, const srv_lane *lane)
{
  return run->dis && lane->id >= run->dis->lane0;
}

static srv_sim *srv_sim_of(srv_run *run, const srv_lane *lane)
{
  return srv_pool_of(run, lane) ? &run->dis->sim : &run->sim;
}

static void srv_account(srv_run *run, const srv_lane *lane, double start, double end)
{
  int pool = srv_pool_of(run, lane);
  const srv_replica *rep = srv_replica_of(srv_sim_of(run, lane), lane);
  double kv = 1 - (double)rep->free_blocks / rep->total_blocks;
  double batch = lane->shape.seqs, dt = end - start;
  run->pool_busy[pool] += dt;
  run->pool_batch[pool] += batch * dt;
  run->pool_iters[pool]++;
  run->iterations++;
  run->busy += dt;
  run->batch_sum += batch * dt;
  run->kv_sum += kv * dt;
  run->batch_max = MAX(run->batch_max, batch);
  run->kv_max = MAX(run->kv_max, kv);
  srv_timeline_add(&run->tl, start, end, batch, kv, srv_waiting(run));
  if (!run->trace)
    return;
  int prefills = 0;
  for (guint i = 0; i < lane->batch->len; i++) {
    const srv_sched_item *it = &g_array_index(lane->batch, srv_sched_item, i);
    prefills += it->q > 1 || (it->q == 1 && it->req->ctx == 0);
  }
  int replica = lane->replica + (pool ? run->sim.nreplicas : 0); /* one numbering for the trace */
  srv_iter_record rec = {.lane = lane->id, .replica = replica, .start = start, .end = end,
                         .seqs = lane->shape.seqs, .prefill_seqs = prefills,
                         .tokens = lane->shape.tokens, .prefill_tokens = lane->shape.prefill_tokens,
                         .kv_occupancy = kv};
  g_array_append_val(run->out->iters, rec);
}

/* ---- lanes ------------------------------------------------------------------------------------ */

/* Moves the waiting requests that arrived after `since` and have not started from the lane's
 * queue to `later`, in order (the queue is in arrival order but for preempted requests, which
 * go back to its head). */
static void srv_hold_back(srv_lane *lane, double since, GQueue *later)
{
  while (lane->waiting.length) {
    srv_request *r = g_queue_peek_tail(&lane->waiting);
    if (!(r->arrival > since) || r->ctx > 0 || r->preemptions > 0)
      break;
    g_queue_push_head(later, g_queue_pop_tail(&lane->waiting));
  }
}

/* A run's time by part (srv_result.parts). */
static void srv_time_add(srv_time *to, const srv_time *t)
{
  to->total += t->total;
  to->gemm += t->gemm;
  to->attention += t->attention;
  to->other += t->other;
  to->comm += t->comm;
  to->host += t->host;
  to->draft += t->draft;
}

/* Starts the lane's next iteration. `ahead`: the scheduler planned it when the iteration just
 * finished began (serving.async_scheduling), so requests that arrived since wait for the next
 * one. */
static void srv_lane_start_planned(srv_run *run, srv_lane *lane, bool ahead)
{
  srv_sim *s = srv_sim_of(run, lane);
  srv_replica *rep = srv_replica_of(s, lane);
  g_array_set_size(lane->batch, 0);
  lane->shape = (srv_batch){0};
  GQueue later = G_QUEUE_INIT;
  if (ahead)
    srv_hold_back(lane, lane->iter_start, &later);
  srv_schedule(s, lane);
  while (later.length)
    g_queue_push_tail(&lane->waiting, g_queue_pop_head(&later));
  if (lane->batch->len == 0) {
    lane->busy = false;
    return;
  }
  srv_time t;
  srv_iteration_time(s->cost, &lane->shape, &t);
  s->spec.draft_s += t.draft;
  srv_time_add(&s->parts, &t);
  double start = MAX(s->now, rep->stage0_free);
  double dur = t.total + lane->pending_cost;
  rep->stage0_free = start + t.period + lane->pending_cost;
  lane->pending_cost = 0;
  lane->busy = true;
  lane->iter_start = start;
  srv_push(run, start + dur, SRV_EV_DONE, lane->id);
  srv_account(run, lane, start, start + dur);
}

static void srv_lane_start(srv_run *run, srv_lane *lane)
{
  srv_lane_start_planned(run, lane, false);
}

/* A closed-loop client sends its next request once it has its answer: the engine sees it
 * serving.request_overhead after it finished the last (the way back and the way in). */
static void srv_send_next(srv_run *run, double finished)
{
  if (run->stream.concurrency == 0 || run->next_send >= run->stream.n)
    return;
  srv_request *r = &run->stream.reqs[run->next_send];
  r->arrival = finished + run->sim.cfg->request_overhead;
  srv_push(run, r->arrival, SRV_EV_ARRIVAL, run->next_send++);
}

/* Temporal fusion keeps the running requests' buffers contiguous: the last slot's KV moves into
 * the slot of a request that leaves, a copy the next iteration waits for. */
static void srv_leave_slot(srv_run *run, srv_lane *lane, srv_request *r)
{
  GPtrArray *slots = lane->slots;
  srv_request *last = g_ptr_array_index(slots, slots->len - 1);
  if (last != r) {
    const srv_sim *s = srv_sim_of(run, lane);
    lane->pending_cost += srv_copy_time(s->cost, last->ctx * s->cap.kv_per_token);
    slots->pdata[r->slot] = last;
    last->slot = r->slot;
  }
  g_ptr_array_set_size(slots, slots->len - 1);
  r->slot = -1;
}

/* A conversation's next turn reaches the engine when the user has read this answer and
 * written the next message (serving.requests.think_time), after the way back and in. */
static void srv_send_turn(srv_run *run, const srv_request *r)
{
  if (r->next_turn < 0)
    return;
  srv_request *next = &run->stream.reqs[r->next_turn];
  next->arrival = r->finish + run->sim.cfg->request_overhead + run->sim.cfg->requests.think_time;
  srv_push(run, next->arrival, SRV_EV_ARRIVAL, r->next_turn);
}

/* `n` tokens reach the client together (a speculative step's): one gap between tokens, as a
 * client that streams them sees. */
static void srv_emit(srv_run *run, srv_lane *lane, srv_request *r, int n)
{
  double t = run->sim.now;
  if (r->generated == 0)
    r->first_token = t;
  else if (r->id >= run->sim.cfg->requests.warmup)
    srv_hist_add(&run->gaps, t - r->last_token);
  r->last_token = t;
  n = MIN(n, r->output - r->generated);
  r->generated += n;
  r->known += n;
  if (r->generated < r->output)
    return;
  r->finish = t;
  r->state = SRV_DONE;
  run->done++;
  srv_sim *s = srv_sim_of(run, lane);
  srv_replica *rep = srv_replica_of(s, lane);
  rep->outstanding--;
  if (s->cfg->scheduler != CFG_SCHEDULER_STATIC) { /* a static batch frees at its end */
    if (lane->slots)
      srv_leave_slot(run, lane, r);
    srv_release(s, rep, r);
  }
  srv_send_next(run, t);
  srv_send_turn(run, r);
}

/* A verify step keeps the KV of the last token and the accepted proposals: as many tokens as
 * it yields (at most what the request still has to say). */
static int srv_spec_step(srv_sim *s, const srv_request *r)
{
  int n = srv_spec_draw(&s->cfg->speculative, s->spec_rng);
  s->spec.steps++;
  s->spec.drawn += n;
  return MIN(n, r->output - r->generated);
}

static void srv_handoff(srv_run *run, srv_request *r);
static void srv_pull_inbound(srv_run *run, srv_replica *d);

/* Freed blocks may let an idle lane of the replica go on. */
static void srv_kick(srv_run *run, srv_replica *rep)
{
  for (int l = 0; l < rep->nlanes; l++)
    if (!rep->lanes[l].busy && rep->lanes[l].waiting.length)
      srv_lane_start(run, &rep->lanes[l]);
}

static void srv_lane_finish(srv_run *run, srv_lane *lane)
{
  srv_sim *s = srv_sim_of(run, lane);
  srv_replica *rep = srv_replica_of(s, lane);
  bool prefill_pool = run->dis && !srv_pool_of(run, lane);
  for (guint i = 0; i < lane->batch->len; i++) {
    srv_sched_item *it = &g_array_index(lane->batch, srv_sched_item, i);
    srv_request *r = it->req;
    if (it->q == 0)
      continue;
    int kept = it->verify ? srv_spec_step(s, r) : it->q;
    r->ctx += kept;
    srv_prefix_publish(s, rep, r);
    if (r->ctx >= r->known && prefill_pool && r->output > 1)
      srv_handoff(run, r);
    else if (r->ctx >= r->known)
      srv_emit(run, lane, r, it->verify ? kept : 1);
  }
  if (s->cfg->scheduler != CFG_SCHEDULER_STATIC) {
    guint k = 0;
    for (guint i = 0; i < lane->running->len; i++) {
      srv_request *r = g_ptr_array_index(lane->running, i);
      if (r->state != SRV_DONE && r->state != SRV_MOVING)
        lane->running->pdata[k++] = r;
    }
    g_ptr_array_set_size(lane->running, k);
  }
  lane->busy = false;
  srv_lane_start_planned(run, lane, srv_schedules_ahead(s->cfg));
  srv_kick(run, rep);
  if (run->dis && !prefill_pool)
    srv_pull_inbound(run, rep);
}

/* ---- routing ---------------------------------------------------------------------------------- */

/* kv-aware: the replica whose prefix cache holds the most of the request's prompt (a shared
 * prefix, an earlier turn), else the one with the most free KV blocks; ties go to the fewest
 * outstanding requests, then the lowest index. */
static srv_replica *srv_route_kv(srv_sim *s, const srv_request *r)
{
  int held = 0, holder = 0;
  for (int i = 0; i < s->nreplicas; i++) {
    int n = srv_prefix_held(s, &s->replicas[i], r);
    if (n > held) {
      held = n;
      holder = i;
    }
  }
  if (held > 0)
    return &s->replicas[holder];
  int best = 0;
  for (int i = 1; i < s->nreplicas; i++) {
    const srv_replica *a = &s->replicas[i], *b = &s->replicas[best];
    if (a->free_blocks > b->free_blocks ||
        (a->free_blocks == b->free_blocks && a->outstanding < b->outstanding))
      best = i;
  }
  return &s->replicas[best];
}

static srv_replica *srv_route(srv_sim *s, const srv_request *r)
{
  if (s->cfg->router == CFG_ROUTER_ROUND_ROBIN)
    return &s->replicas[s->next_rr++ % s->nreplicas];
  if (s->cfg->router == CFG_ROUTER_KV_AWARE)
    return srv_route_kv(s, r);
  int best = 0;
  for (int i = 1; i < s->nreplicas; i++)
    if (s->replicas[i].outstanding < s->replicas[best].outstanding)
      best = i;
  return &s->replicas[best];
}

/* The replica's lane with the fewest requests. */
static srv_lane *srv_pick_lane(srv_replica *rep)
{
  srv_lane *lane = &rep->lanes[0];
  for (int l = 1; l < rep->nlanes; l++) {
    const srv_lane *x = &rep->lanes[l];
    if (x->waiting.length + x->running->len < lane->waiting.length + lane->running->len)
      lane = &rep->lanes[l];
  }
  return lane;
}

static void srv_arrive(srv_run *run, srv_request *r)
{
  srv_disagg *dis = run->dis;
  bool direct = dis && r->prompt < run->w->serving.disagg.direct_decode_below;
  srv_replica *rep = srv_route(direct ? &dis->sim : &run->sim, r);
  srv_lane *lane = srv_pick_lane(rep);
  if (dis) {
    srv_move *m = &dis->moves[r->id];
    m->direct = direct;
    *(direct ? &m->decode_replica : &m->prefill_replica) = rep->id;
  }
  r->replica = rep->id;
  r->lane = lane->id;
  r->state = SRV_WAITING;
  rep->outstanding++;
  g_queue_push_tail(&lane->waiting, r);
  if (!lane->busy && !g_ptr_array_find(run->burst, lane, NULL))
    g_ptr_array_add(run->burst, lane);
}

/* More requests arrive at this very instant (a burst): a server's scheduler sees them all
 * queued when it next forms a batch, so no idle lane starts before the last of them. */
static bool srv_burst_goes_on(const srv_run *run, double now)
{
  const srv_event *top = run->heap->len ? (const srv_event *)run->heap->data : NULL;
  return top && top->t == now && top->kind == SRV_EV_ARRIVAL;
}

static void srv_burst_start(srv_run *run)
{
  for (guint i = 0; i < run->burst->len; i++) {
    srv_lane *lane = g_ptr_array_index(run->burst, i);
    if (!lane->busy)
      srv_lane_start(run, lane);
  }
  g_ptr_array_set_size(run->burst, 0);
}

/* ---- disaggregation: the KV cache moves from prefill to decode ----------------------------- */

/* Bytes of the KV cache of `tokens` tokens over all layers: K and V of every KV head, or MLA's
 * one compressed latent with its rotary part. */
static double srv_kv_bytes(const cfg_workload *w, double tokens)
{
  const cfg_model *m = &w->model;
  double per_layer = m->mla.kv_rank > 0 ? m->mla.kv_rank + m->mla.rope_dim
                                        : 2.0 * m->kv_heads * m->head_dim;
  return per_layer * m->layers * cfg_dtype_bytes(w->serving.kv_dtype) * tokens;
}

/* The GPUs of a replica that hold distinct parts of the KV cache: each pipeline stage's layers
 * split over its tensor-parallel ranks by KV head (fewer KV heads than ranks: copies, sent
 * once; MLA's latent is on every rank). */
static int srv_kv_holders(const cfg_workload *w, const cfg_serving *pool, int gpu0, int replica,
                          int *out)
{
  const cfg_model *m = &w->model;
  int shards = m->mla.kv_rank > 0 ? 1 : MIN(pool->tp, m->kv_heads), n = 0;
  int base = gpu0 + replica * pool->tp * pool->pp;
  for (int st = 0; st < pool->pp; st++)
    for (int k = 0; k < shards; k++)
      out[n++] = base + st * pool->tp + k * (pool->tp / shards);
  return n;
}

static void srv_flows_reschedule(srv_run *run)
{
  srv_disagg *dis = run->dis;
  double t = srv_flows_next(dis->flows);
  dis->epoch++;
  if (isfinite(t))
    srv_push(run, MAX(t, run->sim.now), SRV_EV_FLOW, dis->epoch);
}

/* The prefill replica's holders send their parts to the decode replica's, spread evenly over
 * max(senders, receivers) flows. */
static void srv_transfer_start(srv_run *run, srv_request *r, srv_move *m)
{
  srv_disagg *dis = run->dis;
  g_autofree int *src = g_new(int, dis->cfg[0].tp * dis->cfg[0].pp);
  g_autofree int *dst = g_new(int, dis->cfg[1].tp * dis->cfg[1].pp);
  int ns = srv_kv_holders(run->w, &dis->cfg[0], dis->gpu0[0], m->prefill_replica, src);
  int nd = srv_kv_holders(run->w, &dis->cfg[1], dis->gpu0[1], m->decode_replica, dst);
  int flows = MAX(ns, nd);
  m->bytes = srv_kv_bytes(run->w, r->ctx);
  m->flows_left = flows;
  m->wait_end = run->sim.now;
  for (int i = 0; i < flows; i++) {
    int a = src[i % ns], b = dst[i % nd];
    double lat = srv_flows_start(dis->flows, run->sim.now, a, b, m->bytes / flows, r->id);
    m->latency = MAX(m->latency, lat);
    m->network = m->network || hw_node_of(dis->hw, a) != hw_node_of(dis->hw, b);
  }
  srv_flows_reschedule(run);
}

/* Sequences a decode replica runs or has room reserved for. */
static int srv_decode_seqs(const srv_run *run, const srv_replica *d)
{
  int n = run->dis->landing[d->id];
  for (int l = 0; l < d->nlanes; l++)
    n += (int)d->lanes[l].running->len;
  return n;
}

/* Starts the transfers of the requests waiting for room on decode replica `d`, in order, while
 * its KV cache and batch limit have room (reserved as an admission would reserve it). */
static void srv_pull_inbound(srv_run *run, srv_replica *d)
{
  srv_disagg *dis = run->dis;
  const srv_sim *s = &dis->sim;
  GQueue *q = &dis->inbound[d->id];
  bool reserve = s->cfg->preemption == CFG_PREEMPT_NONE;
  while (q->length) {
    srv_request *r = g_queue_peek_head(q);
    int need = srv_blocks_for(s, reserve ? r->prompt + r->output : r->ctx);
    if (need > d->free_blocks || srv_decode_seqs(run, d) >= s->cfg->max_batch)
      return;
    g_queue_pop_head(q);
    d->free_blocks -= need;
    *(reserve ? &r->reserved : &r->blocks) = need;
    dis->landing[d->id]++;
    srv_transfer_start(run, r, &dis->moves[r->id]);
  }
}

/* A prompt's KV is complete on its prefill replica (which sampled the first token): it keeps
 * its blocks there until they have moved to the decode replica the decode router picks. */
static void srv_handoff(srv_run *run, srv_request *r)
{
  srv_disagg *dis = run->dis;
  srv_move *m = &dis->moves[r->id];
  m->prefill_end = run->sim.now;
  m->prefill_blocks = r->reserved > 0 ? r->reserved : r->blocks;
  m->prefill_cached = r->shared_blocks;
  r->blocks = r->reserved = r->shared_blocks = 0;
  r->state = SRV_MOVING;
  srv_replica *d = srv_route(&dis->sim, r);
  m->decode_replica = d->id;
  d->outstanding++;
  g_queue_push_tail(&dis->inbound[d->id], r);
  srv_pull_inbound(run, d);
}

/* The flow model's next end: the requests whose every flow is done land after the route's
 * latency. */
static void srv_flow_event(srv_run *run, int epoch)
{
  srv_disagg *dis = run->dis;
  if (epoch != dis->epoch)
    return;
  g_array_set_size(dis->ended, 0);
  srv_flows_advance(dis->flows, run->sim.now, dis->ended);
  for (guint i = 0; i < dis->ended->len; i++) {
    int id = g_array_index(dis->ended, int, i);
    srv_move *m = &dis->moves[id];
    if (--m->flows_left == 0)
      srv_push(run, run->sim.now + m->latency, SRV_EV_LANDED, id);
  }
  srv_flows_reschedule(run);
}

/* The KV is on the decode replica: the prefill replica's blocks are free, the first token
 * reaches the client, and the request decodes from the next iteration on. */
static void srv_landed(srv_run *run, srv_request *r)
{
  srv_disagg *dis = run->dis;
  srv_move *m = &dis->moves[r->id];
  m->landed = run->sim.now;
  srv_replica *p = &run->sim.replicas[m->prefill_replica];
  p->free_blocks += m->prefill_blocks;
  srv_prefix_drop(&run->sim, p, r, m->prefill_cached);
  p->outstanding--;
  srv_kick(run, p);
  srv_replica *d = &dis->sim.replicas[m->decode_replica];
  dis->landing[d->id]--;
  srv_lane *lane = srv_pick_lane(d);
  r->replica = d->id;
  r->lane = lane->id;
  r->state = SRV_RUNNING;
  g_ptr_array_add(lane->running, r);
  srv_emit(run, lane, r, 1);
  if (!lane->busy)
    srv_lane_start(run, lane);
}

/* ---- set-up -------------------------------------------------------------------------------- */

/* The replicas of a pool, whose lanes are run->lanes[lane0 ...]. */
static void srv_pool_replicas_new(srv_run *run, srv_sim *s, int lane0)
{
  const cfg_serving *c = s->cfg;
  /* each data-parallel attention rank schedules its own batch over its own KV cache; the
   * ranks of a replica run in lockstep, each iteration costed as if all carried its batch */
  s->nreplicas = c->replicas * srv_attention_dp(c);
  s->replicas = g_new0(srv_replica, s->nreplicas);
  srv_prefix_stats *ps = &s->prefix;
  ps->on = c->prefix_caching && c->scheduler != CFG_SCHEDULER_STATIC;
  double block_bytes = s->cap.kv_per_token * s->cap.block_size * c->tp * c->pp;
  ps->host_blocks = ps->on ? (int)MIN(c->kv_offload.size / block_bytes, G_MAXINT / 2) : 0;
  for (int i = 0; i < s->nreplicas; i++) {
    srv_replica *rep = &s->replicas[i];
    rep->id = i;
    rep->total_blocks = rep->free_blocks = s->cap.blocks;
    rep->cache = ps->on ? srv_prefix_new(ps->host_blocks) : NULL;
    rep->nlanes = c->pp;
    rep->lanes = g_new0(srv_lane, rep->nlanes);
    for (int l = 0; l < rep->nlanes; l++) {
      srv_lane *lane = &rep->lanes[l];
      lane->id = lane0 + i * c->pp + l;
      lane->replica = i;
      g_queue_init(&lane->waiting);
      lane->running = g_ptr_array_new();
      lane->batch = g_array_new(FALSE, FALSE, sizeof(srv_sched_item));
      lane->slots = c->scheduler == CFG_SCHEDULER_FUSED ? g_ptr_array_new() : NULL;
      run->lanes[lane->id] = lane;
    }
  }
}

/* Acceptances draw from a generator of their own, so the arrivals and lengths stay those of
 * the run without speculation. */
static void srv_spec_start(srv_sim *s, const cfg_workload *w)
{
  const cfg_speculative *sp = &w->serving.speculative;
  if (sp->method == CFG_SPEC_NONE)
    return;
  s->spec_rng = g_rand_new_with_seed((guint32)w->serving.requests.seed ^ 0x5bec0de5u);
  s->spec.on = true;
  s->spec.mtp = sp->method == CFG_SPEC_MTP;
  s->spec.tokens = sp->tokens;
  s->spec.expected = srv_spec_expected_tokens(sp);
  s->spec.weights = srv_spec_weight_bytes(s->cost);
  s->spec.kv_per_token = srv_spec_kv_bytes_per_token(s->cost);
}

static void srv_replicas_new(srv_run *run)
{
  int n0 = run->sim.cfg->replicas * srv_attention_dp(run->sim.cfg) * run->sim.cfg->pp;
  run->nlanes = n0;
  if (run->dis)
    run->nlanes += run->dis->cfg[1].replicas * run->dis->cfg[1].pp;
  run->lanes = g_new(srv_lane *, run->nlanes);
  srv_pool_replicas_new(run, &run->sim, 0);
  if (run->dis) {
    run->dis->lane0 = n0;
    srv_pool_replicas_new(run, &run->dis->sim, n0);
  }
}

static void srv_pool_replicas_free(srv_sim *s)
{
  for (int i = 0; i < s->nreplicas; i++) {
    srv_replica *rep = &s->replicas[i];
    for (int l = 0; l < rep->nlanes; l++) {
      srv_lane *lane = &rep->lanes[l];
      g_queue_clear(&lane->waiting);
      g_ptr_array_free(lane->running, TRUE);
      g_array_free(lane->batch, TRUE);
      if (lane->slots)
        g_ptr_array_free(lane->slots, TRUE);
    }
    g_free(rep->lanes);
    srv_prefix_free(rep->cache);
  }
  g_free(s->replicas);
}

static void srv_replicas_free(srv_run *run)
{
  srv_pool_replicas_free(&run->sim);
  if (run->dis)
    srv_pool_replicas_free(&run->dis->sim);
  g_free(run->lanes);
}

/* A request's `need` tokens of KV fit a replica of the pool `s` (`pool`: "" or " decode"...). */
static bool srv_fits(const srv_sim *s, const srv_request *r, double need, const char *pool,
                     const char *where, GError **err)
{
  if (srv_blocks_for(s, need) <= s->cap.blocks)
    return true;
  bool slot = s->cfg->scheduler == CFG_SCHEDULER_FUSED;
  g_autofree char *output = need > r->prompt ? g_strdup_printf(" + output %d", r->output) : g_strdup("");
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s: request %d needs %.0f tokens of KV cache (prompt %d%s%s) but a%s replica "
              "holds %.0f (%d blocks of %d tokens, %.2f GiB per GPU); use more GPUs per replica, "
              "a smaller serving.kv_dtype or shorter requests",
              where, r->id, need, r->prompt, output,
              slot ? ", a max_model_len slot" : "", pool, s->cap.tokens, s->cap.blocks,
              s->cap.block_size, s->cap.blocks * s->cap.block_size * s->cap.kv_per_token / 1073741824.0);
  return false;
}

/* Requests that can never run are bad input, named with the workload's position. */
static bool srv_check_requests(const srv_run *run, GError **err)
{
  const srv_sim *s = &run->sim;
  const cfg_serving *c = s->cfg;
  for (int i = 0; i < run->stream.n; i++) {
    const srv_request *r = &run->stream.reqs[i];
    int total = r->prompt + r->output;
    g_autofree char *where = cfg_doc_where(run->w->doc, "serving.requests");
    if (total > c->max_model_len) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s: request %d: prompt %d + output %d = %d tokens exceeds "
                  "serving.max_model_len = %d",
                  where, i, r->prompt, r->output, total, c->max_model_len);
      return false;
    }
    if (c->requests.prefix_tokens >= r->prompt) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s: request %d: its prompt of %d tokens is not longer than the shared prefix "
                  "(serving.requests.prefix_tokens = %d)",
                  where, i, r->prompt, c->requests.prefix_tokens);
      return false;
    }
    double need = c->scheduler == CFG_SCHEDULER_FUSED ? c->max_model_len : total;
    if (!srv_fits(s, r, run->dis ? r->prompt : need, run->dis ? " prefill" : "", where, err) ||
        (run->dis && !srv_fits(&run->dis->sim, r, total, " decode", where, err)))
      return false;
  }
  return true;
}

static bool srv_loop(srv_run *run, GError **err)
{
  srv_stream *st = &run->stream;
  int first = st->concurrency > 0 ? MIN(st->concurrency, st->n) : st->n;
  for (int i = 0; i < first; i++)
    if (!isnan(st->reqs[i].arrival)) /* a later turn waits for the answer before it */
      srv_push(run, st->reqs[i].arrival, SRV_EV_ARRIVAL, i);
  run->next_send = first;
  while (run->heap->len) {
    srv_event e = srv_pop(run);
    run->sim.now = e.t;
    if (run->dis)
      run->dis->sim.now = e.t; /* the pools' clocks are one */
    if (e.kind == SRV_EV_ARRIVAL) {
      srv_arrive(run, &st->reqs[e.id]);
      if (!srv_burst_goes_on(run, e.t))
        srv_burst_start(run);
    } else if (e.kind == SRV_EV_DONE)
      srv_lane_finish(run, run->lanes[e.id]);
    else if (e.kind == SRV_EV_FLOW)
      srv_flow_event(run, e.id);
    else
      srv_landed(run, &st->reqs[e.id]);
  }
  if (run->done < st->n) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                "%d of %d requests never finished: the KV cache stayed too full to admit them "
                "(requests near the cache's size?)",
                st->n - run->done, st->n);
    return false;
  }
  return true;
}

/* ---- results ------------------------------------------------------------------------------- */

/* Open-loop overload: the queue grows. A server that keeps up has started, when the last
 * request arrives, all but the few that arrived within a TTFT of it; one that does not has a
 * backlog of (offered - served rate) x the window, which the count of N Poisson arrivals
 * cannot reach by chance beyond three of its standard deviations (3 sqrt(N)). */
static bool srv_saturated(const srv_stream *st)
{
  int n = st->n;
  if (st->offered_rate <= 0 || n < 20)
    return false;
  double last = st->reqs[n - 1].arrival;
  int waiting = 0;
  for (int i = 0; i < n; i++)
    waiting += st->reqs[i].first_token > last;
  return waiting > 3 * sqrt(n);
}

static void srv_timeline_samples(const srv_run *run, double end, GArray *out)
{
  const srv_timeline *tl = &run->tl;
  for (int b = 0; b < SRV_BUCKETS && b * tl->width < end; b++) {
    double busy = tl->busy[b];
    srv_sample x = {.t = (b + 0.5) * tl->width,
                    .batch = busy > 0 ? tl->batch[b] / busy : 0,
                    .kv_occupancy = busy > 0 ? tl->kv[b] / busy : 0,
                    .waiting = busy > 0 ? tl->waiting[b] / busy : 0};
    g_array_append_val(out, x);
  }
}

/* A request of a disaggregated run in the trace: replicas numbered prefill first. */
static void srv_record_move(const srv_run *run, const srv_request *r, srv_request_record *rec)
{
  const srv_move *m = &run->dis->moves[r->id];
  rec->replica = m->direct ? run->sim.nreplicas + m->decode_replica : m->prefill_replica;
  rec->decode_replica = m->decode_replica;
  rec->prefill_end = m->prefill_end;
  rec->transfer_start = m->wait_end;
  rec->transfer_end = m->landed;
}

static void srv_collect_pools(const srv_run *run, srv_result *out)
{
  static const char *const names[2] = {"prefill", "decode"};
  const srv_disagg *dis = run->dis;
  out->npools = 2;
  for (int k = 0; k < 2; k++) {
    const cfg_serving *c = &dis->cfg[k];
    double busy = run->pool_busy[k];
    out->pools[k] = (srv_pool_result){
        .name = names[k], .replicas = c->replicas, .tp = c->tp, .pp = c->pp,
        .gpus = c->replicas * c->tp * c->pp, .first_gpu = dis->gpu0[k], .max_batch = c->max_batch,
        .max_tokens = c->max_tokens, .capacity = k ? dis->sim.cap : run->sim.cap,
        .utilization = busy / ((double)c->replicas * c->pp * out->duration),
        .batch_mean = busy > 0 ? run->pool_batch[k] / busy : 0, .iterations = run->pool_iters[k]};
  }
}

/* TTFT in its parts and the transfers' bytes and times. */
static void srv_collect_moves(const srv_run *run, srv_result *out)
{
  const srv_stream *st = &run->stream;
  srv_disagg_result *d = &out->disagg;
  g_autofree double *times = g_new(double, MAX(st->n, 1));
  for (int i = 0; i < st->n; i++) {
    const srv_request *r = &st->reqs[i];
    const srv_move *m = &run->dis->moves[i];
    d->queue += r->admitted - r->arrival;
    d->direct += m->direct;
    if (isnan(m->landed)) { /* prefilled where it decodes, or one token only */
      d->prefill += r->first_token - r->admitted;
      continue;
    }
    d->prefill += m->prefill_end - r->admitted;
    d->decode_wait += m->wait_end - m->prefill_end;
    d->transfer += m->landed - m->wait_end;
    times[d->transfers++] = m->landed - m->wait_end;
    d->bytes_total += m->bytes;
    d->network += m->network;
  }
  int n = MAX(st->n, 1);
  d->queue /= n;
  d->prefill /= n;
  d->decode_wait /= n;
  d->transfer /= n;
  d->overhead = run->sim.cfg->request_overhead;
  d->bytes_mean = d->transfers ? d->bytes_total / d->transfers : 0;
  srv_dist_of(times, d->transfers, &d->time);
}

static void srv_spec_add(srv_spec_stats *to, const srv_spec_stats *from)
{
  to->steps += from->steps;
  to->drawn += from->drawn;
  to->draft_s += from->draft_s;
}

static void srv_record_request(const srv_run *run, const srv_request *r, srv_result *out)
{
  srv_request_record rec = {.id = r->id, .replica = r->replica, .arrival = r->arrival,
                            .admitted = r->admitted, .first_token = r->first_token, .finish = r->finish,
                            .prompt = r->prompt, .output = r->output,
                            .preemptions = r->preemptions, .decode_replica = -1,
                            .prefill_end = NAN, .transfer_start = NAN, .transfer_end = NAN};
  if (run->dis)
    srv_record_move(run, r, &rec);
  g_array_append_val(out->reqs, rec);
}

static void srv_collect(srv_run *run, srv_result *out)
{
  const srv_stream *st = &run->stream;
  const cfg_serving *c = run->sim.cfg;
  /* a benchmark's warm-up requests load the server but are left out of its figures */
  int w = c->requests.warmup, n = st->n - w, ntpot = 0, met = 0;
  g_autofree double *ttft = g_new(double, n), *e2e = g_new(double, n), *tpot = g_new(double, n);
  double t0 = INFINITY, t1 = -INFINITY, prompt = 0, output = 0, ov = c->request_overhead;
  for (int i = 0; i < st->n; i++) {
    const srv_request *r = &st->reqs[i];
    if (run->trace)
      srv_record_request(run, r, out);
    if (i < w)
      continue;
    int k = i - w;
    ttft[k] = r->first_token - r->arrival + ov;
    e2e[k] = r->finish - r->arrival + ov;
    double per = r->output > 1 ? (r->finish - r->first_token) / (r->output - 1) : 0;
    if (r->output > 1)
      tpot[ntpot++] = per;
    met += ttft[k] <= c->slo.ttft && per <= c->slo.tbt;
    t0 = MIN(t0, r->arrival);
    t1 = MAX(t1, r->finish);
    prompt += r->prompt;
    output += r->output;
  }
  out->saturated = srv_saturated(st);
  srv_dist_of(ttft, n, &out->ttft);
  srv_dist_of(e2e, n, &out->e2e);
  srv_dist_of(tpot, ntpot, &out->tpot);
  const srv_hist *g = &run->gaps;
  out->tbt = (srv_dist){.n = (int)MIN(g->n, G_MAXINT), .mean = g->n ? g->sum / g->n : 0,
                        .p50 = srv_hist_quantile(g, 0.5), .p90 = srv_hist_quantile(g, 0.9),
                        .p99 = srv_hist_quantile(g, 0.99), .max = g->max};
  out->duration = MAX(t1 - t0, 1e-12);
  out->requests = n;
  out->offered_rate = st->offered_rate;
  out->output_tokens_per_s = output / out->duration;
  out->total_tokens_per_s = (prompt + output) / out->duration;
  out->requests_per_s = n / out->duration;
  out->slo_attainment = (double)met / n;
  out->goodput_rps = met / out->duration;
  out->prompt_tokens_mean = prompt / n;
  out->output_tokens_mean = output / n;
  out->iterations = run->iterations;
  out->preemptions = run->sim.preemptions + (run->dis ? run->dis->sim.preemptions : 0);
  out->batch_mean = run->busy > 0 ? run->batch_sum / run->busy : 0;
  out->kv_mean = run->busy > 0 ? run->kv_sum / run->busy : 0;
  out->batch_max = run->batch_max;
  out->kv_max = run->kv_max;
  out->prefix = run->sim.prefix;
  out->spec = run->sim.spec;
  if (run->dis) /* the decode pool verifies; its replicas cache no prefixes */
    srv_spec_add(&out->spec, &run->dis->sim.spec);
  out->spec.busy_s = run->busy;
  out->parts = run->sim.parts;
  if (run->dis)
    srv_time_add(&out->parts, &run->dis->sim.parts);
  srv_timeline_samples(run, t1, out->timeline);
  if (run->dis) {
    srv_collect_pools(run, out);
    srv_collect_moves(run, out);
  }
}

static bool srv_sane(double v)
{
  return isfinite(v) && v >= 0;
}

/* Nothing impossible is reported: a latency or rate that is not a finite number >= 0 means a
 * cost came out as nonsense (a bandwidth near zero, say), and the run fails naming it. */
static bool srv_check_result(const srv_result *r, GError **err)
{
  const struct {
    const char *what;
    const srv_dist *d;
  } dists[] = {{"TTFT", &r->ttft}, {"time between tokens", &r->tbt}, {"TPOT", &r->tpot},
               {"end-to-end latency", &r->e2e}};
  for (size_t i = 0; i < G_N_ELEMENTS(dists); i++) {
    const srv_dist *d = dists[i].d;
    if (!(srv_sane(d->mean) && srv_sane(d->p50) && srv_sane(d->p90) && srv_sane(d->p99) &&
          srv_sane(d->max))) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                  "serving: the %s came out as %g s (mean), not a time: check the GPU's and the "
                  "network's figures", dists[i].what, d->mean);
      return false;
    }
  }
  if (!(srv_sane(r->duration) && srv_sane(r->output_tokens_per_s) && srv_sane(r->requests_per_s))) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                "serving: the run lasted %g s for %g requests/s, not a result: check the GPU's and "
                "the network's figures", r->duration, r->requests_per_s);
    return false;
  }
  return true;
}

/* What the request stream will cost, before it is built (a replayed trace is as long as its
 * file, which was read already). */
static bool srv_within_budget(const cfg_workload *w, const srv_options *o, GError **err)
{
  const cfg_requests *r = &w->serving.requests;
  if (r->trace)
    return true;
  bud_limits def = bud_defaults();
  double outputs = r->output_tokens > 0 ? r->output_tokens : 1024.0;
  g_autofree char *what = g_strdup_printf("serving %d requests", r->count);
  return bud_check(o && o->budget ? o->budget : &def, what,
                   bud_serve(r->count, (double)r->count * outputs), err);
}

/* ---- disaggregated set-up ------------------------------------------------------------------ */

/* Serving as a pool sees it: its layout and batch limits. A prefill replica holds a prompt's KV
 * only until it has moved, so it grows its blocks as vLLM does rather than reserving the
 * output's; decode replicas cache no prefixes (the prompt arrives computed). */
static void srv_pool_view(const cfg_workload *w, const cfg_pool *p, bool decode, cfg_serving *s,
                          cfg_workload *pw)
{
  *s = w->serving;
  s->tp = p->tp;
  s->pp = p->pp;
  s->ep = p->ep;
  s->replicas = p->replicas;
  s->max_batch = p->max_batch;
  s->max_tokens = p->max_tokens;
  s->router = p->router;
  if (decode)
    s->prefix_caching = 0;
  else
    s->preemption = CFG_PREEMPT_RECOMPUTE;
  *pw = *w;
  pw->serving = *s;
}

static srv_disagg *srv_disagg_new(const cfg_cluster *c, const cfg_workload *w)
{
  srv_disagg *dis = g_new0(srv_disagg, 1);
  srv_pool_view(w, &w->serving.prefill, false, &dis->cfg[0], &dis->w[0]);
  srv_pool_view(w, &w->serving.decode, true, &dis->cfg[1], &dis->w[1]);
  dis->sim.cfg = &dis->cfg[1];
  dis->gpu0[1] = dis->cfg[0].replicas * dis->cfg[0].tp * dis->cfg[0].pp;
  dis->hw = hw_cluster_new(c);
  dis->flows = srv_flows_new(dis->hw);
  dis->ended = g_array_new(FALSE, FALSE, sizeof(int));
  return dis;
}

/* Per request and per decode replica, once the stream and the replicas exist. */
static void srv_disagg_start(srv_run *run)
{
  srv_disagg *dis = run->dis;
  dis->moves = g_new(srv_move, MAX(run->stream.n, 1));
  for (int i = 0; i < run->stream.n; i++)
    dis->moves[i] = (srv_move){.prefill_replica = -1, .decode_replica = -1,
                               .prefill_end = NAN, .wait_end = NAN, .landed = NAN};
  dis->inbound = g_new(GQueue, dis->cfg[1].replicas);
  for (int i = 0; i < dis->cfg[1].replicas; i++)
    g_queue_init(&dis->inbound[i]);
  dis->landing = g_new0(int, dis->cfg[1].replicas);
}

static void srv_disagg_free(srv_disagg *dis)
{
  if (!dis)
    return;
  if (dis->inbound)
    for (int i = 0; i < dis->cfg[1].replicas; i++)
      g_queue_clear(&dis->inbound[i]);
  g_free(dis->inbound);
  g_free(dis->landing);
  g_free(dis->moves);
  g_array_free(dis->ended, TRUE);
  srv_flows_free(dis->flows);
  hw_cluster_free(dis->hw);
  srv_cost_free(dis->sim.cost);
  g_free(dis);
}

bool srv_simulate(const cfg_cluster *c, const cfg_workload *w, const srv_options *o,
                  srv_result *out, GError **err)
{
  gint64 t_start = g_get_monotonic_time();
  memset(out, 0, sizeof *out);
  out->cluster = c;
  out->workload = w;
  out->timeline = g_array_new(FALSE, FALSE, sizeof(srv_sample));
  srv_run run = {.w = w, .trace = o && o->trace, .out = out, .tl = {.width = 1e-3}};
  if (run.trace) {
    out->iters = g_array_new(FALSE, FALSE, sizeof(srv_iter_record));
    out->reqs = g_array_new(FALSE, FALSE, sizeof(srv_request_record));
  }
  run.sim.cfg = &w->serving;
  const cfg_workload *w0 = w; /* the aggregated or prefill pool's view */
  if (w->serving.disaggregated) {
    run.dis = srv_disagg_new(c, w);
    run.sim.cfg = &run.dis->cfg[0];
    w0 = &run.dis->w[0];
  }
  const cfg_workload *w1 = run.dis ? &run.dis->w[1] : NULL;
  double rate = o && o->rate > 0 ? o->rate : w->serving.requests.rate;
  bool ok = srv_within_budget(w, o, err) && srv_cost_new(c, w0, &run.sim.cost, err) &&
            srv_capacity_of(c, w0, run.sim.cost, &run.sim.cap, err) &&
            (!w1 || (srv_cost_new(c, w1, &run.dis->sim.cost, err) &&
                     srv_capacity_of(c, w1, run.dis->sim.cost, &run.dis->sim.cap, err))) &&
            srv_stream_build(w, rate, &run.stream, err) && srv_check_requests(&run, err);
  out->capacity = run.sim.cap;
  if (ok) {
    run.heap = g_array_new(FALSE, FALSE, sizeof(srv_event));
    run.burst = g_ptr_array_new();
    srv_hist_init(&run.gaps);
    srv_replicas_new(&run);
    srv_spec_start(&run.sim, w);
    if (run.dis) {
      srv_disagg_start(&run);
      srv_spec_start(&run.dis->sim, w);
    }
    ok = srv_loop(&run, err);
    if (ok)
      srv_collect(&run, out);
    if (ok)
      srv_ep_summary_of(run.sim.cost, c, w, out->prompt_tokens_mean, out->output_tokens_mean,
                        &out->ep);
    ok = ok && srv_check_result(out, err);
    srv_replicas_free(&run);
    if (run.sim.spec_rng)
      g_rand_free(run.sim.spec_rng);
    srv_hist_clear(&run.gaps);
    g_array_free(run.heap, TRUE);
    g_ptr_array_free(run.burst, TRUE);
  }
  srv_stream_clear(&run.stream);
  srv_cost_free(run.sim.cost);
  srv_disagg_free(run.dis);
  out->wall_time = (g_get_monotonic_time() - t_start) / 1e6;
  return ok;
}

void srv_result_clear(srv_result *r)
{
  if (r->timeline)
    g_array_free(r->timeline, TRUE);
  if (r->iters)
    g_array_free(r->iters, TRUE);
  if (r->reqs)
    g_array_free(r->reqs, TRUE);
  memset(r, 0, sizeof *r);
}
