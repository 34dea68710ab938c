/* Schedulers: which sequences the next iteration of a lane computes, and how many tokens each.
 *
 * The KV cache is paged in blocks of serving.block_size tokens, shared by the lanes of a
 * replica. Under preemption: recompute (vLLM) a request takes blocks as it grows; when none are
 * left, the newest running request of the lane is preempted: its blocks are freed and it goes
 * back to the head of the queue, to recompute its prompt and the tokens it had generated. Under
 * preemption: none (TensorRT-LLM's guaranteed-no-evict), static batches and temporal fusion,
 * a request reserves its whole KV at admission and is never preempted. */
#include "serving/serving_internal.h"

#include <math.h>

int srv_blocks_for(const srv_sim *s, double tokens)
{
  return (int)ceil(tokens / s->cap.block_size);
}

srv_replica *srv_replica_of(srv_sim *s, const srv_lane *lane)
{
  return &s->replicas[lane->replica];
}

static bool srv_reserving(const srv_sim *s)
{
  return s->cfg->preemption == CFG_PREEMPT_NONE || s->cfg->scheduler == CFG_SCHEDULER_STATIC ||
         s->cfg->scheduler == CFG_SCHEDULER_FUSED;
}

/* What admission reserves: the request's prompt and output, or (temporal fusion) a buffer slot
 * of max_model_len tokens, as a fixed-buffer engine allocates. */
static int srv_reservation(const srv_sim *s, const srv_request *r)
{
  double tokens = s->cfg->scheduler == CFG_SCHEDULER_FUSED ? s->cfg->max_model_len
                                                            : r->prompt + r->output;
  return srv_blocks_for(s, tokens) - r->shared_blocks;
}

/* Adds `q` tokens of `r` to the lane's next iteration. */
static void srv_add(srv_lane *lane, srv_request *r, int q)
{
  srv_sched_item it = {.req = r, .q = q};
  g_array_append_val(lane->batch, it);
  srv_batch *b = &lane->shape;
  b->seqs++;
  b->tokens += q;
  if (q == 1 && r->ctx > 0) {
    b->decodes++;
    b->decode_kv += r->ctx + 1;
  } else {
    b->prefill_tokens += q;
    b->prefill_attn += q * (r->ctx + (q + 1) / 2.0);
    b->prefill_kv += r->ctx + q;
  }
  if (r->ctx + q >= r->known)
    b->samples++;
}

/* A decoding sequence's step: with speculative decoding, a verify pass over its last token and
 * k proposals (k + 1 tokens of the budget and of KV, written before the check throws the
 * rejected ones away), else one token. Returns the tokens taken. */
static int srv_add_decode(srv_sim *s, srv_lane *lane, srv_request *r, int budget)
{
  int q = s->spec_rng ? s->cfg->speculative.tokens + 1 : 1;
  if (q > budget) /* the engines shorten the proposal when the budget is short */
    q = 1;
  if (q == 1) {
    srv_add(lane, r, 1);
    return 1;
  }
  srv_add(lane, r, q);
  srv_sched_item *it = &g_array_index(lane->batch, srv_sched_item, lane->batch->len - 1);
  it->verify = true;
  srv_batch *b = &lane->shape; /* srv_add counted it as a prompt chunk: a decode instead */
  b->prefill_tokens -= q;
  b->prefill_attn -= q * (r->ctx + (q + 1) / 2.0);
  b->prefill_kv -= r->ctx + q;
  b->decodes++;
  b->decode_kv += r->ctx + q;
  b->verifies++;
  b->verify_kv += r->ctx + 1;
  b->verify_pairs += q * (r->ctx + (q + 1) / 2.0) - (r->ctx + q);
  b->samples += q - 1; /* the logits of every position */
  return q;
}

/* Past its first token (a prompt's last chunk of one token is not a decode to speculate on). */
static bool srv_decoding(const srv_request *r)
{
  return r->generated > 0 && r->known - r->ctx == 1;
}

void srv_release(srv_sim *s, srv_replica *rep, srv_request *r)
{
  rep->free_blocks += r->reserved > 0 ? r->reserved : r->blocks;
  r->blocks = r->reserved = 0;
  srv_prefix_release(s, rep, r);
}

static void srv_preempt(srv_sim *s, srv_lane *lane, srv_request *victim)
{
  g_ptr_array_remove(lane->running, victim);
  srv_release(s, srv_replica_of(s, lane), victim);
  victim->ctx = 0;
  victim->state = SRV_WAITING;
  victim->preemptions++;
  g_queue_push_head(&lane->waiting, victim);
  s->preemptions++;
}

/* Room for `r` to hold `tokens` in its KV, preempting the lane's newest requests if needed;
 * false if `r` itself had to go. */
static bool srv_grow(srv_sim *s, srv_lane *lane, srv_request *r, int tokens)
{
  if (r->reserved > 0)
    return true;
  srv_replica *rep = srv_replica_of(s, lane);
  int need = srv_blocks_for(s, tokens) - r->shared_blocks - r->blocks;
  while (need > rep->free_blocks) {
    srv_request *victim = g_ptr_array_index(lane->running, lane->running->len - 1);
    srv_preempt(s, lane, victim);
    if (victim == r)
      return false;
  }
  if (need > 0) {
    srv_take_blocks(s, rep, need);
    r->blocks += need;
  }
  return true;
}

/* Admits the head of the queue with `q` tokens this iteration, if its KV fits. */
static bool srv_admit(srv_sim *s, srv_lane *lane, srv_request *r, int q)
{
  srv_replica *rep = srv_replica_of(s, lane);
  bool reserve = srv_reserving(s);
  int need = reserve ? srv_reservation(s, r) : srv_blocks_for(s, r->ctx + q) - r->shared_blocks;
  if (need > rep->free_blocks)
    return false;
  srv_take_blocks(s, rep, need);
  if (reserve)
    r->reserved = need;
  else
    r->blocks = need;
  g_queue_pop_head(&lane->waiting);
  r->state = SRV_RUNNING;
  srv_prefix_admitted(s, lane, r, isnan(r->admitted));
  if (isnan(r->admitted))
    r->admitted = s->now;
  g_ptr_array_add(lane->running, r);
  srv_add(lane, r, q);
  return true;
}

/* Sarathi-Serve / vLLM V1: running sequences first (decodes, then the rest of chunked
 * prompts), then new prompts, chunked to fill the token budget. */
static void srv_schedule_chunked(srv_sim *s, srv_lane *lane)
{
  int budget = s->cfg->max_tokens;
  long preempted = s->preemptions;
  for (guint i = 0; i < lane->running->len && budget > 0;) {
    srv_request *r = g_ptr_array_index(lane->running, i);
    bool dec = srv_decoding(r) && s->spec_rng;
    int q = dec && s->cfg->speculative.tokens < budget ? s->cfg->speculative.tokens + 1
                                                       : MIN(r->known - r->ctx, budget);
    if (!srv_grow(s, lane, r, r->ctx + q))
      break;
    if (dec) {
      budget -= srv_add_decode(s, lane, r, budget);
    } else {
      srv_add(lane, r, q);
      budget -= q;
    }
    i++;
  }
  if (s->preemptions != preempted)
    return; /* no admissions while the cache is short */
  srv_replica *rep = srv_replica_of(s, lane);
  while (budget > 0 && (int)lane->running->len < s->cfg->max_batch && lane->waiting.length) {
    srv_request *r = g_queue_peek_head(&lane->waiting);
    srv_prefix_use(s, rep, r);
    int q = MIN(r->known - r->ctx, budget);
    if (!srv_admit(s, lane, r, q)) {
      srv_prefix_unuse(s, rep, r);
      break;
    }
    budget -= q;
  }
}

/* New prompts, whole, up to the token budget (`tokens` already taken; at least one prompt). */
static int srv_admit_prompts(srv_sim *s, srv_lane *lane, int tokens)
{
  srv_replica *rep = srv_replica_of(s, lane);
  int admitted = 0;
  while ((int)lane->running->len < s->cfg->max_batch && lane->waiting.length) {
    srv_request *r = g_queue_peek_head(&lane->waiting);
    srv_prefix_use(s, rep, r);
    int q = r->known - r->ctx;
    bool fits = admitted == 0 || tokens + q <= s->cfg->max_tokens;
    if (!fits || !srv_admit(s, lane, r, q)) {
      srv_prefix_unuse(s, rep, r);
      break;
    }
    if (lane->slots) {
      r->slot = (int)lane->slots->len;
      g_ptr_array_add(lane->slots, r);
    }
    tokens += q;
    admitted++;
  }
  return admitted;
}

/* vLLM V0: waiting prompts first, in an iteration of their own; otherwise every running
 * sequence decodes one token. */
static void srv_schedule_continuous(srv_sim *s, srv_lane *lane)
{
  if (srv_admit_prompts(s, lane, 0) > 0)
    return;
  int k = s->spec_rng ? s->cfg->speculative.tokens : 0;
  for (guint i = 0; i < lane->running->len;) {
    srv_request *r = g_ptr_array_index(lane->running, i);
    if (!srv_grow(s, lane, r, r->ctx + 1 + k))
      break;
    srv_add_decode(s, lane, r, s->cfg->max_tokens);
    i++;
  }
}

/* Flover: one persistent loop; every running request decodes and newly arrived prompts are
 * folded into the same iteration (KV slots reserved at admission). */
static void srv_schedule_fused(srv_sim *s, srv_lane *lane)
{
  int tokens = 0;
  for (guint i = 0; i < lane->running->len; i++)
    tokens += srv_add_decode(s, lane, g_ptr_array_index(lane->running, i), s->cfg->max_tokens);
  srv_admit_prompts(s, lane, tokens);
}

/* A static batch decodes until its longest request is done, padded: every slot computes. */
static void srv_static_decode(srv_lane *lane)
{
  srv_batch *b = &lane->shape;
  int n = (int)lane->running->len;
  lane->static_ctx++;
  for (int i = 0; i < n; i++) {
    srv_request *r = g_ptr_array_index(lane->running, i);
    srv_sched_item it = {.req = r, .q = r->state == SRV_RUNNING ? 1 : 0};
    g_array_append_val(lane->batch, it);
  }
  *b = (srv_batch){.seqs = n, .tokens = n, .decodes = n, .decode_kv = (double)n * lane->static_ctx,
                   .samples = n};
  lane->static_steps--;
}

static void srv_schedule_static(srv_sim *s, srv_lane *lane)
{
  if (lane->static_steps > 0) {
    srv_static_decode(lane);
    return;
  }
  srv_replica *rep = srv_replica_of(s, lane);
  for (guint i = 0; i < lane->running->len; i++)
    srv_release(s, rep, g_ptr_array_index(lane->running, i));
  g_ptr_array_set_size(lane->running, 0);
  int n = 0, max_p = 0, max_o = 0;
  for (GList *l = lane->waiting.head; l && n < s->cfg->max_batch; l = l->next, n++) {
    const srv_request *r = l->data;
    int p = MAX(max_p, r->prompt), o = MAX(max_o, r->output);
    if (n > 0 && (n + 1) * srv_blocks_for(s, p + o) > rep->free_blocks)
      break;
    max_p = p;
    max_o = o;
  }
  if (n == 0)
    return;
  int per = srv_blocks_for(s, max_p + max_o);
  for (int i = 0; i < n; i++) {
    srv_request *r = g_queue_pop_head(&lane->waiting);
    r->state = SRV_RUNNING;
    r->reserved = per;
    r->admitted = s->now;
    rep->free_blocks -= per;
    g_ptr_array_add(lane->running, r);
    srv_sched_item it = {.req = r, .q = r->known - r->ctx};
    g_array_append_val(lane->batch, it);
  }
  double P = max_p;
  lane->shape = (srv_batch){.seqs = n, .tokens = n * P, .prefill_tokens = n * P,
                            .prefill_attn = n * P * (P + 1) / 2, .prefill_kv = n * P, .samples = n};
  lane->static_ctx = max_p;
  lane->static_steps = max_o - 1;
}

void srv_schedule(srv_sim *s, srv_lane *lane)
{
  switch (s->cfg->scheduler) {
  case CFG_SCHEDULER_CHUNKED:
    srv_schedule_chunked(s, lane);
    break;
  case CFG_SCHEDULER_CONTINUOUS:
    srv_schedule_continuous(s, lane);
    break;
  case CFG_SCHEDULER_FUSED:
    srv_schedule_fused(s, lane);
    break;
  case CFG_SCHEDULER_STATIC:
    srv_schedule_static(s, lane);
    break;
  }
}

bool srv_schedules_ahead(const cfg_serving *s)
{
  return s->async_scheduling == CFG_ASYNC_ON ||
         (s->async_scheduling == CFG_ASYNC_MULTIPROCESS && srv_replica_gpus(s) > 1);
}
