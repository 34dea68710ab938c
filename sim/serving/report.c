/* The report of `dlsim serve`: latencies, throughput, batch and KV cache, SLO attainment. */
#include "serving/serving_internal.h"
#include "units/units.h"

#include <string.h>

static const char *srv_arrival_name(cfg_arrival a)
{
  static const char *const names[] = {"Poisson", "gamma", "uniform", "burst"};
  return a <= CFG_ARRIVAL_BURST ? names[a] : "?";
}

static void srv_text_kv(FILE *out, const char *indent, const srv_capacity *c)
{
  g_autofree char *kv = units_format_bytes(c->tokens * c->kv_per_token);
  fprintf(out, "%sKV cache %d blocks of %d = %.0f tokens per replica, %s per GPU%s\n", indent,
          c->blocks, c->block_size, c->tokens, kv, c->measured ? " (serving.kv_blocks)" : "");
}

/* A disaggregated deployment: the two pools, where they sit and their KV caches. */
static void srv_text_pools(FILE *out, const srv_result *r)
{
  const cfg_serving *s = &r->workload->serving;
  int gpus = r->pools[0].gpus + r->pools[1].gpus;
  bool named = s->engine && strcmp(s->engine, "none") != 0;
  fprintf(out, "dlsim serve: %s%s%s on %s, disaggregated (%d GPUs), %s weights, %s KV, scheduler %s\n",
          r->workload->model.name, named ? " with " : "", named ? s->engine : "", r->cluster->name,
          gpus, cfg_dtype_name(s->dtype), cfg_dtype_name(s->kv_dtype),
          cfg_scheduler_name(s->scheduler));
  for (int k = 0; k < r->npools; k++) {
    const srv_pool_result *p = &r->pools[k];
    fprintf(out, "  %-12s %d replica%s of TP %d x PP %d on GPUs %d-%d, max batch %d, %d tokens per "
            "iteration\n", p->name, p->replicas, p->replicas == 1 ? "" : "s", p->tp, p->pp,
            p->first_gpu, p->first_gpu + p->gpus - 1, p->max_batch, p->max_tokens);
    srv_text_kv(out, "               ", &p->capacity);
  }
}

static void srv_text_closed_loop(FILE *out, const cfg_requests *q)
{
  fprintf(out, ", closed loop of %d clients", q->concurrency);
  if (q->ramp > 0) {
    g_autofree char *ramp = units_format_seconds(q->ramp);
    fprintf(out, " started over %s", ramp);
  }
}

static void srv_text_requests(FILE *out, const srv_result *r)
{
  const cfg_requests *q = &r->workload->serving.requests;
  fprintf(out, "  requests     %d", r->requests);
  if (q->warmup > 0)
    fprintf(out, " after %d of warm-up", q->warmup);
  if (q->trace)
    fprintf(out, ", replayed from %s", q->trace);
  else if (q->concurrency > 0)
    srv_text_closed_loop(out, q);
  else if (q->arrival == CFG_ARRIVAL_BURST)
    fprintf(out, ", all at once");
  else
    fprintf(out, ", %s at %.2f/s", srv_arrival_name(q->arrival), r->offered_rate);
  if (q->turns > 1) {
    g_autofree char *think = units_format_seconds(q->think_time);
    fprintf(out, " (conversations of %d turns, %s think time)", q->turns, think);
  }
  fprintf(out, "; prompt %.0f, output %.0f tokens (mean); seed %d\n", r->prompt_tokens_mean,
          r->output_tokens_mean, q->seed);
}

static void srv_text_setup(FILE *out, const srv_result *r)
{
  const cfg_workload *w = r->workload;
  const cfg_serving *s = &w->serving;
  if (r->npools) {
    srv_text_pools(out, r);
    srv_text_requests(out, r);
    return;
  }
  int gpus = s->replicas * srv_replica_gpus(s);
  bool named = s->engine && strcmp(s->engine, "none") != 0;
  g_autofree char *layout =
      s->ep > 1 ? g_strdup_printf("EP %d (attention DP %d x TP %d)", s->ep, srv_attention_dp(s), s->tp)
                : g_strdup_printf("TP %d x PP %d", s->tp, s->pp);
  fprintf(out,
          "dlsim serve: %s%s%s on %s, %d replica%s of %s (%d GPU%s), %s weights, %s KV, "
          "scheduler %s (max batch %d, %d tokens per iteration%s)\n",
          w->model.name, named ? " with " : "", named ? s->engine : "", r->cluster->name, s->replicas, s->replicas == 1 ? "" : "s", layout,
          gpus, gpus == 1 ? "" : "s", cfg_dtype_name(s->dtype), cfg_dtype_name(s->kv_dtype),
          cfg_scheduler_name(s->scheduler), s->max_batch, s->max_tokens, s->ep > 1 ? " per DP rank" : "");
  srv_text_requests(out, r);
  const srv_capacity *c = &r->capacity;
  g_autofree char *kv = units_format_bytes(c->tokens * c->kv_per_token);
  g_autofree char *wt = units_format_bytes(c->weights);
  g_autofree char *ac = units_format_bytes(c->activations);
  g_autofree char *ot = units_format_bytes(c->other);
  fprintf(out, "  KV cache     %d blocks of %d = %.0f tokens per %s, %s per GPU%s\n",
          c->blocks, c->block_size, c->tokens, s->ep > 1 ? "DP rank" : "replica", kv,
          c->measured ? " (serving.kv_blocks)" : "");
  fprintf(out, "               (weights %s, activations %s, other %s per GPU)\n", wt, ac, ot);
  srv_ep_text(out, r);
}

static void srv_text_dist(FILE *out, const char *label, const srv_dist *d)
{
  double v[] = {d->mean, d->p50, d->p90, d->p99};
  fprintf(out, "  %-11s", label);
  for (size_t i = 0; i < G_N_ELEMENTS(v); i++) {
    g_autofree char *x = units_format_seconds(v[i]);
    fprintf(out, " %12s", x);
  }
  fprintf(out, "\n");
}

/* The timeline in eight slices: batch, KV occupancy and queue over the run. */
static void srv_text_timeline(FILE *out, const srv_result *r)
{
  const GArray *tl = r->timeline;
  int slices = 8, n = tl ? (int)tl->len : 0;
  if (n < slices)
    return;
  double sum[3][8] = {{0}};
  int count[8] = {0};
  for (int i = 0; i < n; i++) {
    const srv_sample *x = &g_array_index(tl, srv_sample, i);
    int k = i * slices / n;
    sum[0][k] += x->batch;
    sum[1][k] += 100 * x->kv_occupancy;
    sum[2][k] += x->waiting;
    count[k]++;
  }
  g_autofree char *span = units_format_seconds(r->duration / slices);
  const char *rows[] = {"batch", "KV %", "waiting"};
  fprintf(out, "  over time    (%d slices of %s)\n", slices, span);
  for (int row = 0; row < 3; row++) {
    fprintf(out, "    %-9s", rows[row]);
    for (int k = 0; k < slices; k++)
      fprintf(out, " %7.1f", count[k] ? sum[row][k] / count[k] : 0);
    fprintf(out, "\n");
  }
}

void srv_result_bracket(srv_result *r, const unc_table *t)
{
  static const char *const kinds[3] = {"serve.ttft", "serve.tbt", "serve.throughput"};
  double *iv[3] = {r->ttft_interval, r->tbt_interval, r->throughput_interval};
  /* no real disaggregated run is among the bands' cases: a band would claim what is unchecked */
  if (r->npools)
    return;
  /* below saturation the output rate is the offered one: no model error to bracket */
  bool capacity = r->saturated || r->offered_rate <= 0;
  double value[3] = {r->ttft.mean, r->tbt.mean, capacity ? r->output_tokens_per_s : 0};
  for (int i = 0; i < 3; i++) {
    const unc_band *b = unc_band_of(t, kinds[i]);
    r->interval_cases[i] = b && value[i] > 0 ? b->cases : 0;
    if (r->interval_cases[i])
      unc_interval(b, value[i], i < 2 ? UNC_TIME : UNC_RATE, iv[i]);
  }
}

/* "80 % interval" lines: where the truth was for 80 % of the real runs of each kind. */
static void srv_text_intervals(FILE *out, const srv_result *r)
{
  const char *what[2] = {"TTFT mean", "TBT mean"};
  const double *iv[2] = {r->ttft_interval, r->tbt_interval};
  for (int i = 0; i < 2; i++)
    if (r->interval_cases[i]) {
      g_autofree char *lo = units_format_seconds(iv[i][0]);
      g_autofree char *hi = units_format_seconds(iv[i][1]);
      fprintf(out, "  80 %% interval %s %s - %s (errors on %d real runs)\n", what[i], lo, hi,
              r->interval_cases[i]);
    }
  if (r->interval_cases[2])
    fprintf(out, "  80 %% interval output %.1f - %.1f tokens/s (errors on %d real runs)\n",
            r->throughput_interval[0], r->throughput_interval[1], r->interval_cases[2]);
}

static double srv_share(double part, double whole)
{
  return whole > 0 ? part / whole : 0;
}

/* Hit rates are shares of the prompt tokens of first admissions. */
static void srv_text_prefix(FILE *out, const srv_result *r)
{
  const srv_prefix_stats *p = &r->prefix;
  if (!p->on)
    return;
  double gpu = srv_share(p->gpu_hit_tokens, p->prompt_tokens);
  double host = srv_share(p->host_hit_tokens, p->prompt_tokens);
  fprintf(out, "  prefix cache %.1f %% of prompt tokens hit (GPU %.1f %%, host %.1f %%), %ld blocks "
               "evicted", 100 * (gpu + host), 100 * gpu, 100 * host, p->evicted);
  if (p->host_blocks > 0) {
    g_autofree char *load = units_format_seconds(p->host_load_s);
    fprintf(out, ", %ld to host (%d blocks there), %s copying back", p->offloaded,
            p->host_blocks, load);
  }
  fprintf(out, "\n");
}

static void srv_text_spec(FILE *out, const srv_result *r)
{
  const srv_spec_stats *p = &r->spec;
  if (!p->on)
    return;
  const cfg_speculative *sp = &r->workload->serving.speculative;
  g_autofree char *wt = units_format_bytes(p->weights);
  g_autofree char *kv = units_format_bytes(p->kv_per_token);
  fprintf(out, "  speculative  %s, %d token%s proposed: %.2f tokens per verify step expected, "
               "%.2f drawn over %ld steps\n",
          sp->method == CFG_SPEC_DRAFT ? sp->draft.name : "MTP head", sp->tokens,
          sp->tokens == 1 ? "" : "s", p->expected,
          p->steps ? p->drawn / p->steps : 0, p->steps);
  fprintf(out, "               proposer %.1f %% of busy time, %s weights and %s KV per token per "
               "GPU\n", 100 * srv_share(p->draft_s, p->busy_s), wt, kv);
}

/* TTFT in its parts, the transfers, and how busy each pool was. */
static void srv_text_disagg(FILE *out, const srv_result *r)
{
  const srv_disagg_result *d = &r->disagg;
  const double parts[] = {d->queue, d->prefill, d->decode_wait, d->transfer, d->overhead};
  const char *names[] = {"queue", "prefill", "decode wait", "transfer", "API server"};
  fprintf(out, "  TTFT parts  ");
  for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
    g_autofree char *x = units_format_seconds(parts[i]);
    fprintf(out, "%s %s %s", i ? " +" : "", names[i], x);
  }
  fprintf(out, " (means)\n");
  g_autofree char *each = units_format_bytes(d->bytes_mean);
  g_autofree char *all = units_format_bytes(d->bytes_total);
  fprintf(out, "  KV moved     %d requests, %s each (mean), %s in all; %d across nodes, %d "
          "prefilled on decode\n", d->transfers, each, all, d->network, d->direct);
  fprintf(out, "  pools        ");
  for (int k = 0; k < r->npools; k++)
    fprintf(out, "%s%s busy %.1f %% (batch %.1f, %ld iterations)", k ? ", " : "", r->pools[k].name,
            100 * r->pools[k].utilization, r->pools[k].batch_mean, r->pools[k].iterations);
  fprintf(out, "\n");
}

void srv_result_text(FILE *out, const srv_result *r)
{
  srv_text_setup(out, r);
  const cfg_serving *s = &r->workload->serving;
  g_autofree char *dur = units_format_seconds(r->duration);
  fprintf(out, "  simulated    %s, %ld iterations, %ld preemptions\n", dur, r->iterations,
          r->preemptions);
  fprintf(out, "  %-11s %12s %12s %12s %12s\n", "latency", "mean", "p50", "p90", "p99");
  srv_text_dist(out, "TTFT", &r->ttft);
  srv_text_dist(out, "TBT (ITL)", &r->tbt);
  srv_text_dist(out, "TPOT", &r->tpot);
  srv_text_dist(out, "end to end", &r->e2e);
  if (r->npools && r->disagg.transfers)
    srv_text_dist(out, "KV transfer", &r->disagg.time);
  if (r->npools)
    srv_text_disagg(out, r);
  fprintf(out, "  throughput   %.1f output tokens/s, %.1f total tokens/s, %.3f requests/s\n",
          r->output_tokens_per_s, r->total_tokens_per_s, r->requests_per_s);
  srv_text_intervals(out, r);
  fprintf(out, "  batch        %.1f sequences per iteration (mean), %.0f max\n", r->batch_mean,
          r->batch_max);
  fprintf(out, "  KV cache     %.1f %% occupied (mean), %.1f %% max\n", 100 * r->kv_mean,
          100 * r->kv_max);
  srv_text_prefix(out, r);
  srv_text_spec(out, r);
  srv_text_timeline(out, r);
  g_autofree char *ttft = units_format_seconds(s->slo.ttft);
  g_autofree char *tbt = units_format_seconds(s->slo.tbt);
  fprintf(out, "  SLO          TTFT <= %s and TPOT <= %s: %.1f %% of requests (goodput %.3f requests/s)\n",
          ttft, tbt, 100 * r->slo_attainment, r->goodput_rps);
  if (r->offered_rate > 0)
    fprintf(out, "  load         %s\n",
            r->saturated ? "SATURATED: the queue grows (served below the offered rate)"
                         : "below saturation");
}

static cJSON *srv_dist_json(const srv_dist *d)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "mean", d->mean);
  cJSON_AddNumberToObject(j, "p50", d->p50);
  cJSON_AddNumberToObject(j, "p90", d->p90);
  cJSON_AddNumberToObject(j, "p99", d->p99);
  cJSON_AddNumberToObject(j, "max", d->max);
  return j;
}

/* Where the iterations' time went, summed over the run: the cost model's terms, for finding
 * which of them a miss comes from. */
static cJSON *srv_parts_json(const srv_time *t)
{
  const char *names[] = {"total", "gemm", "attention", "other", "comm", "host", "draft"};
  const double secs[] = {t->total, t->gemm, t->attention, t->other, t->comm, t->host, t->draft};
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    cJSON_AddNumberToObject(o, names[i], secs[i]);
  return o;
}

static cJSON *srv_capacity_json(const srv_capacity *c)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "blocks", c->blocks);
  cJSON_AddNumberToObject(j, "block_size", c->block_size);
  cJSON_AddNumberToObject(j, "tokens", c->tokens);
  cJSON_AddNumberToObject(j, "bytes_per_token", c->kv_per_token);
  cJSON_AddNumberToObject(j, "weights_bytes", c->weights);
  cJSON_AddNumberToObject(j, "activations_bytes", c->activations);
  cJSON_AddNumberToObject(j, "other_bytes", c->other);
  return j;
}

static cJSON *srv_timeline_json(const GArray *tl)
{
  cJSON *a = cJSON_CreateArray();
  for (guint i = 0; tl && i < tl->len; i++) {
    const srv_sample *x = &g_array_index(tl, srv_sample, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "t_s", x->t);
    cJSON_AddNumberToObject(o, "batch", x->batch);
    cJSON_AddNumberToObject(o, "kv_occupancy", x->kv_occupancy);
    cJSON_AddNumberToObject(o, "waiting", x->waiting);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

static cJSON *srv_intervals_json(const srv_result *r)
{
  static const char *const keys[3] = {"ttft_s.mean", "tbt_s.mean", "output_tokens_per_s"};
  const double *iv[3] = {r->ttft_interval, r->tbt_interval, r->throughput_interval};
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "level", 0.8);
  cJSON *cases = cJSON_AddObjectToObject(o, "cases");
  for (int i = 0; i < 3; i++)
    if (r->interval_cases[i]) {
      cJSON_AddItemToObject(o, keys[i], cJSON_CreateDoubleArray(iv[i], 2));
      cJSON_AddNumberToObject(cases, keys[i], r->interval_cases[i]);
    }
  return o;
}

static cJSON *srv_prefix_json(const srv_prefix_stats *p)
{
  cJSON *j = cJSON_CreateObject();
  double hits = p->gpu_hit_tokens + p->host_hit_tokens;
  cJSON_AddNumberToObject(j, "hit_rate", srv_share(hits, p->prompt_tokens));
  cJSON_AddNumberToObject(j, "gpu_hit_rate", srv_share(p->gpu_hit_tokens, p->prompt_tokens));
  cJSON_AddNumberToObject(j, "host_hit_rate", srv_share(p->host_hit_tokens, p->prompt_tokens));
  cJSON_AddNumberToObject(j, "prompt_tokens", p->prompt_tokens);
  cJSON_AddNumberToObject(j, "hit_tokens", hits);
  cJSON_AddNumberToObject(j, "evicted_blocks", (double)p->evicted);
  cJSON_AddNumberToObject(j, "offloaded_blocks", (double)p->offloaded);
  cJSON_AddNumberToObject(j, "host_blocks", p->host_blocks);
  cJSON_AddNumberToObject(j, "host_load_s", p->host_load_s);
  return j;
}

static cJSON *srv_spec_json(const srv_spec_stats *p)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "method", p->mtp ? "mtp" : "draft");
  cJSON_AddNumberToObject(j, "tokens", p->tokens);
  cJSON_AddNumberToObject(j, "expected_tokens_per_step", p->expected);
  cJSON_AddNumberToObject(j, "tokens_per_step", p->steps ? p->drawn / p->steps : 0);
  cJSON_AddNumberToObject(j, "verify_steps", (double)p->steps);
  cJSON_AddNumberToObject(j, "proposer_s", p->draft_s);
  cJSON_AddNumberToObject(j, "proposer_weights_bytes", p->weights);
  cJSON_AddNumberToObject(j, "proposer_kv_bytes_per_token", p->kv_per_token);
  return j;
}

static cJSON *srv_pool_json(const srv_pool_result *p)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "replicas", p->replicas);
  cJSON_AddNumberToObject(o, "tp", p->tp);
  cJSON_AddNumberToObject(o, "pp", p->pp);
  cJSON_AddNumberToObject(o, "gpus", p->gpus);
  cJSON_AddNumberToObject(o, "first_gpu", p->first_gpu);
  cJSON_AddNumberToObject(o, "max_batch", p->max_batch);
  cJSON_AddNumberToObject(o, "max_tokens", p->max_tokens);
  cJSON_AddNumberToObject(o, "utilization", p->utilization);
  cJSON_AddNumberToObject(o, "batch_mean", p->batch_mean);
  cJSON_AddNumberToObject(o, "iterations", (double)p->iterations);
  cJSON_AddItemToObject(o, "kv_cache", srv_capacity_json(&p->capacity));
  return o;
}

/* kv_transfer_s, kv_transfer_bytes, kv_transfers, ttft_parts and pools. */
static void srv_disagg_json(cJSON *j, const srv_result *r)
{
  const srv_disagg_result *d = &r->disagg;
  cJSON_AddItemToObject(j, "kv_transfer_s", srv_dist_json(&d->time));
  cJSON *b = cJSON_AddObjectToObject(j, "kv_transfer_bytes");
  cJSON_AddNumberToObject(b, "mean", d->bytes_mean);
  cJSON_AddNumberToObject(b, "total", d->bytes_total);
  cJSON *n = cJSON_AddObjectToObject(j, "kv_transfers");
  cJSON_AddNumberToObject(n, "count", d->transfers);
  cJSON_AddNumberToObject(n, "across_nodes", d->network);
  cJSON_AddNumberToObject(n, "prefilled_on_decode", d->direct);
  cJSON *t = cJSON_AddObjectToObject(j, "ttft_parts");
  cJSON_AddNumberToObject(t, "queue_s", d->queue);
  cJSON_AddNumberToObject(t, "prefill_s", d->prefill);
  cJSON_AddNumberToObject(t, "decode_wait_s", d->decode_wait);
  cJSON_AddNumberToObject(t, "transfer_s", d->transfer);
  cJSON_AddNumberToObject(t, "overhead_s", d->overhead);
  cJSON *p = cJSON_AddObjectToObject(j, "pools");
  for (int k = 0; k < r->npools; k++)
    cJSON_AddItemToObject(p, r->pools[k].name, srv_pool_json(&r->pools[k]));
}

cJSON *srv_result_json(const srv_result *r)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddItemToObject(j, "ttft_s", srv_dist_json(&r->ttft));
  cJSON_AddItemToObject(j, "tbt_s", srv_dist_json(&r->tbt));
  cJSON_AddItemToObject(j, "tpot_s", srv_dist_json(&r->tpot));
  cJSON_AddItemToObject(j, "e2e_s", srv_dist_json(&r->e2e));
  cJSON_AddNumberToObject(j, "output_tokens_per_s", r->output_tokens_per_s);
  if (r->interval_cases[0] || r->interval_cases[1] || r->interval_cases[2])
    cJSON_AddItemToObject(j, "intervals", srv_intervals_json(r));
  cJSON_AddNumberToObject(j, "total_tokens_per_s", r->total_tokens_per_s);
  cJSON_AddNumberToObject(j, "requests_per_s", r->requests_per_s);
  cJSON_AddNumberToObject(j, "slo_attainment", r->slo_attainment);
  cJSON_AddNumberToObject(j, "goodput_rps", r->goodput_rps);
  cJSON_AddNumberToObject(j, "offered_rate_rps", r->offered_rate);
  cJSON_AddBoolToObject(j, "saturated", r->saturated);
  cJSON_AddNumberToObject(j, "requests", r->requests);
  cJSON_AddNumberToObject(j, "duration_s", r->duration);
  cJSON_AddNumberToObject(j, "iterations", (double)r->iterations);
  cJSON_AddNumberToObject(j, "preemptions", (double)r->preemptions);
  cJSON_AddNumberToObject(j, "prompt_tokens_mean", r->prompt_tokens_mean);
  cJSON_AddNumberToObject(j, "output_tokens_mean", r->output_tokens_mean);
  cJSON *b = cJSON_AddObjectToObject(j, "batch");
  cJSON_AddNumberToObject(b, "mean", r->batch_mean);
  cJSON_AddNumberToObject(b, "max", r->batch_max);
  cJSON *k = cJSON_AddObjectToObject(j, "kv_occupancy");
  cJSON_AddNumberToObject(k, "mean", r->kv_mean);
  cJSON_AddNumberToObject(k, "max", r->kv_max);
  cJSON_AddItemToObject(j, "kv_cache", srv_capacity_json(&r->capacity));
  cJSON_AddItemToObject(j, "iteration_parts_s", srv_parts_json(&r->parts));
  if (r->ep.on)
    cJSON_AddItemToObject(j, "wide_ep", srv_ep_json(r));
  if (r->prefix.on)
    cJSON_AddItemToObject(j, "prefix_cache", srv_prefix_json(&r->prefix));
  if (r->spec.on)
    cJSON_AddItemToObject(j, "speculative", srv_spec_json(&r->spec));
  cJSON_AddItemToObject(j, "timeline", srv_timeline_json(r->timeline));
  if (r->npools)
    srv_disagg_json(j, r);
  return j;
}
