/* The event loop: request arrivals and iteration ends in one heap (time, then insertion order,
 * so equal times resolve the same way every run). An arrival is routed to a replica and a lane;
 * an idle lane plans an iteration at once; an iteration's end advances its sequences, emits
 * their tokens, frees what finished and plans the next one. */
#include "serving/serving_internal.h"

#include <math.h>
#include <string.h>

#define SRV_BUCKETS 64

enum { SRV_EV_ARRIVAL, SRV_EV_DONE };

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

typedef struct {
  srv_sim sim;
  srv_stream stream;
  const cfg_workload *w;
  GArray *heap; /* srv_event */
  guint64 seq;
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

static void srv_account(srv_run *run, const srv_lane *lane, double start, double end)
{
  const srv_replica *rep = &run->sim.replicas[lane->replica];
  double kv = 1 - (double)rep->free_blocks / rep->total_blocks;
  double batch = lane->shape.seqs, dt = end - start;
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
  srv_iter_record rec = {.lane = lane->id, .replica = lane->replica, .start = start, .end = end,
                         .seqs = lane->shape.seqs, .prefill_seqs = prefills,
                         .tokens = lane->shape.tokens, .prefill_tokens = lane->shape.prefill_tokens,
                         .kv_occupancy = kv};
  g_array_append_val(run->out->iters, rec);
}

/* ---- lanes ------------------------------------------------------------------------------------ */

static void srv_lane_start(srv_run *run, srv_lane *lane)
{
  srv_sim *s = &run->sim;
  srv_replica *rep = srv_replica_of(s, lane);
  g_array_set_size(lane->batch, 0);
  lane->shape = (srv_batch){0};
  srv_schedule(s, lane);
  if (lane->batch->len == 0) {
    lane->busy = false;
    return;
  }
  srv_time t;
  srv_iteration_time(s->cost, &lane->shape, &t);
  s->spec.draft_s += t.draft;
  double start = MAX(s->now, rep->stage0_free);
  double dur = t.total + lane->pending_cost;
  rep->stage0_free = start + t.period + lane->pending_cost;
  lane->pending_cost = 0;
  lane->busy = true;
  lane->iter_start = start;
  srv_push(run, start + dur, SRV_EV_DONE, lane->id);
  srv_account(run, lane, start, start + dur);
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
    lane->pending_cost += srv_copy_time(run->sim.cost, last->ctx * run->sim.cap.kv_per_token);
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
  else
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
  srv_replica *rep = srv_replica_of(&run->sim, lane);
  rep->outstanding--;
  if (run->sim.cfg->scheduler != CFG_SCHEDULER_STATIC) { /* a static batch frees at its end */
    if (lane->slots)
      srv_leave_slot(run, lane, r);
    srv_release(&run->sim, rep, r);
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

static void srv_lane_finish(srv_run *run, srv_lane *lane)
{
  srv_sim *s = &run->sim;
  srv_replica *rep = srv_replica_of(s, lane);
  for (guint i = 0; i < lane->batch->len; i++) {
    srv_sched_item *it = &g_array_index(lane->batch, srv_sched_item, i);
    srv_request *r = it->req;
    if (it->q == 0)
      continue;
    int kept = it->verify ? srv_spec_step(s, r) : it->q;
    r->ctx += kept;
    srv_prefix_publish(s, rep, r);
    if (r->ctx >= r->known)
      srv_emit(run, lane, r, it->verify ? kept : 1);
  }
  if (s->cfg->scheduler != CFG_SCHEDULER_STATIC) {
    guint k = 0;
    for (guint i = 0; i < lane->running->len; i++) {
      srv_request *r = g_ptr_array_index(lane->running, i);
      if (r->state != SRV_DONE)
        lane->running->pdata[k++] = r;
    }
    g_ptr_array_set_size(lane->running, k);
  }
  lane->busy = false;
  srv_lane_start(run, lane);
  for (int l = 0; l < rep->nlanes; l++) /* freed blocks may let another lane go on */
    if (!rep->lanes[l].busy && rep->lanes[l].waiting.length)
      srv_lane_start(run, &rep->lanes[l]);
}

/* ---- routing ---------------------------------------------------------------------------------- */

static srv_replica *srv_route(srv_sim *s)
{
  if (s->cfg->router == CFG_ROUTER_ROUND_ROBIN)
    return &s->replicas[s->next_rr++ % s->nreplicas];
  int best = 0;
  for (int i = 1; i < s->nreplicas; i++)
    if (s->replicas[i].outstanding < s->replicas[best].outstanding)
      best = i;
  return &s->replicas[best];
}

static void srv_arrive(srv_run *run, srv_request *r)
{
  srv_replica *rep = srv_route(&run->sim);
  srv_lane *lane = &rep->lanes[0];
  for (int l = 1; l < rep->nlanes; l++) {
    const srv_lane *x = &rep->lanes[l];
    if (x->waiting.length + x->running->len < lane->waiting.length + lane->running->len)
      lane = &rep->lanes[l];
  }
  r->replica = rep->id;
  r->lane = lane->id;
  r->state = SRV_WAITING;
  rep->outstanding++;
  g_queue_push_tail(&lane->waiting, r);
  if (!lane->busy)
    srv_lane_start(run, lane);
}

/* ---- set-up -------------------------------------------------------------------------------- */

static void srv_replicas_new(srv_run *run)
{
  srv_sim *s = &run->sim;
  const cfg_serving *c = s->cfg;
  s->nreplicas = c->replicas;
  s->replicas = g_new0(srv_replica, s->nreplicas);
  run->nlanes = c->replicas * c->pp;
  run->lanes = g_new(srv_lane *, run->nlanes);
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
      lane->id = i * c->pp + l;
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

static void srv_replicas_free(srv_run *run)
{
  srv_sim *s = &run->sim;
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
  g_free(run->lanes);
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
    if (srv_blocks_for(s, need) > s->cap.blocks) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s: request %d needs %.0f tokens of KV cache (prompt %d + output %d%s) but a "
                  "replica holds %.0f (%d blocks of %d tokens, %.2f GiB per GPU); use more GPUs "
                  "per replica, a smaller serving.kv_dtype or shorter requests",
                  where, i, need, r->prompt, r->output,
                  c->scheduler == CFG_SCHEDULER_FUSED ? ", a max_model_len slot" : "",
                  s->cap.tokens, s->cap.blocks, s->cap.block_size,
                  s->cap.blocks * s->cap.block_size * s->cap.kv_per_token / 1073741824.0);
      return false;
    }
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
    if (e.kind == SRV_EV_ARRIVAL)
      srv_arrive(run, &st->reqs[e.id]);
    else
      srv_lane_finish(run, run->lanes[e.id]);
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

static double srv_median_ttft(const srv_request *reqs, int from, int n)
{
  g_autofree double *v = g_new(double, MAX(n, 1));
  for (int i = 0; i < n; i++)
    v[i] = reqs[from + i].first_token - reqs[from + i].arrival;
  srv_dist d;
  srv_dist_of(v, n, &d);
  return d.p50;
}

/* Open-loop overload: the queue grows, so the last tenth of the requests wait longer than the
 * first by a share of the arrival window (served rate below ~90 % of the offered one). */
static bool srv_saturated(const srv_stream *st)
{
  int n = st->n, k = n / 10;
  if (st->offered_rate <= 0 || k < 2)
    return false;
  double span = st->reqs[n - 1].arrival - st->reqs[0].arrival;
  double growth = srv_median_ttft(st->reqs, n - k, k) - srv_median_ttft(st->reqs, 0, k);
  return growth > 0.1 * span;
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

static void srv_collect(srv_run *run, srv_result *out)
{
  const srv_stream *st = &run->stream;
  const cfg_serving *c = run->sim.cfg;
  int n = st->n, ntpot = 0, met = 0;
  g_autofree double *ttft = g_new(double, n), *e2e = g_new(double, n), *tpot = g_new(double, n);
  double t0 = INFINITY, t1 = -INFINITY, prompt = 0, output = 0, ov = c->request_overhead;
  for (int i = 0; i < n; i++) {
    const srv_request *r = &st->reqs[i];
    ttft[i] = r->first_token - r->arrival + ov;
    e2e[i] = r->finish - r->arrival + ov;
    double per = r->output > 1 ? (r->finish - r->first_token) / (r->output - 1) : 0;
    if (r->output > 1)
      tpot[ntpot++] = per;
    met += ttft[i] <= c->slo.ttft && per <= c->slo.tbt;
    t0 = MIN(t0, r->arrival);
    t1 = MAX(t1, r->finish);
    prompt += r->prompt;
    output += r->output;
    if (run->trace) {
      srv_request_record rec = {.id = r->id, .replica = r->replica, .arrival = r->arrival,
                                .admitted = r->admitted, .first_token = r->first_token, .finish = r->finish,
                                .prompt = r->prompt, .output = r->output,
                                .preemptions = r->preemptions};
      g_array_append_val(out->reqs, rec);
    }
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
  out->preemptions = run->sim.preemptions;
  out->batch_mean = run->busy > 0 ? run->batch_sum / run->busy : 0;
  out->kv_mean = run->busy > 0 ? run->kv_sum / run->busy : 0;
  out->batch_max = run->batch_max;
  out->kv_max = run->kv_max;
  out->prefix = run->sim.prefix;
  out->spec = run->sim.spec;
  out->spec.busy_s = run->busy;
  srv_timeline_samples(run, t1, out->timeline);
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
  double rate = o && o->rate > 0 ? o->rate : w->serving.requests.rate;
  bool ok = srv_within_budget(w, o, err) && srv_cost_new(c, w, &run.sim.cost, err) &&
            srv_capacity_of(c, w, run.sim.cost, &run.sim.cap, err) &&
            srv_stream_build(w, rate, &run.stream, err) && srv_check_requests(&run, err);
  out->capacity = run.sim.cap;
  if (ok) {
    run.heap = g_array_new(FALSE, FALSE, sizeof(srv_event));
    srv_hist_init(&run.gaps);
    srv_replicas_new(&run);
    srv_spec_start(&run.sim, w);
    ok = srv_loop(&run, err);
    if (ok)
      srv_collect(&run, out);
    ok = ok && srv_check_result(out, err);
    srv_replicas_free(&run);
    if (run.sim.spec_rng)
      g_rand_free(run.sim.spec_rng);
    srv_hist_clear(&run.gaps);
    g_array_free(run.heap, TRUE);
  }
  srv_stream_clear(&run.stream);
  srv_cost_free(run.sim.cost);
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
