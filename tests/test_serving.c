/* dlsim serve: the iteration cost model against first principles and the training model, the
 * schedulers' and the KV cache's behaviour, reproducibility, and bad input. */
#include "helpers.h"
#include "serving/serving.h"
#include "serving/serving_internal.h"
#include "workloads/workloads.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* Llama 2 7B on one H100, vLLM-like; tests override what they vary. */
static const char *srv_workload(void)
{
  static char *path = NULL;
  if (!path)
    path = th_write("llama2-7b-serve.yaml",
                    "model: llama2-7b\n"
                    "serving:\n"
                    "  dtype: fp16\n"
                    "  scheduler: chunked\n"
                    "  max_batch: 128\n"
                    "  max_tokens: 2048\n"
                    "  max_model_len: 4096\n"
                    "  requests: {rate: 2/s, count: 200, prompt_tokens: 512, output_tokens: 64, seed: 7}\n");
  return path;
}

static void srv_load(const char *const *sets, cfg_cluster **c, cfg_workload **w)
{
  char *why = th_load_error("dgx-h100", srv_workload(), sets);
  cr_assert_null(why, "%s", why);
  cr_assert(th_load("dgx-h100", srv_workload(), sets, c, w));
}

static srv_result srv_run(const char *const *sets)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_load(sets, &c, &w);
  srv_result r;
  GError *err = NULL;
  bool ok = srv_simulate(c, w, NULL, &r, &err);
  cr_assert(ok, "%s", err ? err->message : "");
  r.cluster = NULL;
  r.workload = NULL;
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return r;
}

/* `dlsim ARGS` exits with `status` and prints `text`. */
static void srv_cli_says(const char *args, int status, const char *text)
{
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, status, "%s", p.out);
  cr_assert(strstr(p.out, text), "%s", p.out);
  th_proc_clear(&p);
}

/* The cost model of the test workload with `sets` applied. */
static srv_cost *srv_cost_load(const char *const *sets, cfg_cluster **c, cfg_workload **w)
{
  srv_load(sets, c, w);
  srv_cost *cost = NULL;
  GError *err = NULL;
  cr_assert(srv_cost_new(*c, *w, &cost, &err), "%s", err ? err->message : "");
  return cost;
}

typedef srv_cost *srv_loader(const char *const *sets, cfg_cluster **c, cfg_workload **w);

/* One iteration of `b` timed by the cost model `load` builds with `sets`. */
static srv_time srv_iteration_of(srv_loader *load, const char *const *sets, const srv_batch *b)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_cost *cost = load(sets, &c, &w);
  srv_time t;
  srv_iteration_time(cost, b, &t);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return t;
}

Test(serving, decode_of_one_sequence_reads_the_weights_once)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  /* every kernel at HBM x `memory` (the H100 calibration's weight streaming off: its own test
   * is in test_hardware.c) */
  const char *sets[] = {"gpu.efficiency.gemm_stream=0", NULL};
  srv_cost *cost = srv_cost_load(sets, &c, &w);
  srv_batch one = {.seqs = 1, .tokens = 1, .decodes = 1, .decode_kv = 101, .samples = 1};
  srv_time t;
  srv_iteration_time(cost, &one, &t);
  double weights = srv_weight_bytes(cost);
  /* 6.74e9 parameters in fp16 (and the output layer read once more) */
  cr_assert(weights > 13.2e9 && weights < 13.8e9, "weights %g", weights);
  double peak = weights / c->gpu.memory_bandwidth;
  double achievable = weights / (c->gpu.memory_bandwidth * c->gpu.efficiency.memory_efficiency);
  /* memory-bound: the weights at the achievable bandwidth, plus the fixed cost of its 260
   * kernels (8 per layer: norm, QKV, attention, projection, residual + norm, MLP up,
   * activation, down; embedding, final norm, logits, sampling), within 3 % (the KV cache and
   * the activations are the rest) */
  double launches = (32 * 8 + 4) * c->gpu.efficiency.launch_overhead;
  cr_assert(t.total > peak, "%g s vs %g s at peak bandwidth", t.total, peak);
  cr_assert(t.total >= achievable + launches && t.total <= 1.03 * (achievable + launches),
            "%g s vs weights / HBM %g s + launches %g s", t.total, achievable, launches);
  cr_assert(t.comm == 0, "one GPU: no collectives");
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

Test(serving, prefill_is_compute_bound_and_decode_memory_bound)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_load(NULL, &c, &w);
  srv_cost *cost = NULL;
  cr_assert(srv_cost_new(c, w, &cost, NULL));
  srv_time t1, t64, p;
  srv_batch d1 = {.seqs = 1, .tokens = 1, .decodes = 1, .decode_kv = 100, .samples = 1};
  srv_batch d64 = {.seqs = 64, .tokens = 64, .decodes = 64, .decode_kv = 64 * 100, .samples = 64};
  srv_batch pre = {.seqs = 1, .tokens = 2048, .prefill_tokens = 2048,
                   .prefill_attn = 2048 * 2049 / 2.0, .prefill_kv = 2048, .samples = 1};
  srv_iteration_time(cost, &d1, &t1);
  srv_iteration_time(cost, &d64, &t64);
  srv_iteration_time(cost, &pre, &p);
  /* 64 sequences cost little more than one (the weights are read once; 64 rows of a
   * tile-padded, split-K GEMM on 132 SMs run at about half the large-GEMM rate, still under
   * the weights' read) */
  cr_assert(t64.total < 1.3 * t1.total, "%g vs %g", t64.total, t1.total);
  /* 2048 prompt tokens: 2 x 6.7e9 x 2048 FLOPs, far above the weights' read time */
  cr_assert(p.total > 3 * t1.total, "%g vs %g", p.total, t1.total);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* Llama-2-7B's decode attention by hand under an engine's paged-kernel figures: per layer, the
 * KV of `keys` tokens (K and V of 32 heads of 128 in fp16), the queries and outputs, and the new
 * tokens' K and V at bandwidth x items / (items + half) of HBM, plus the launch. */
static double srv_decode_attention_by_hand(const cfg_cluster *c, double seqs, double keys,
                                           double items)
{
  double kv_token = 2 * 32 * 128 * 2.0, bytes = (keys + 2 * seqs) * kv_token;
  double rate = c->gpu.memory_bandwidth * 0.6 * items / (items + 100);
  return 32 * (bytes / rate + c->gpu.efficiency.launch_overhead);
}

Test(serving, decode_attention_reads_the_kv_at_the_engines_rate_by_items)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *sets[] = {"serving.decode_attention_bandwidth=0.6",
                        "serving.decode_attention_half=100", NULL};
  srv_cost *cost = srv_cost_load(sets, &c, &w);
  srv_time t;
  /* 16 sequences of 2000 keys: 16 x 32 = 512 (sequence, head) items, enough not to split */
  srv_batch many = {.seqs = 16, .tokens = 16, .decodes = 16, .decode_kv = 16 * 2000,
                    .samples = 16};
  srv_iteration_time(cost, &many, &t);
  double want = srv_decode_attention_by_hand(c, 16, 16 * 2000, 512);
  cr_assert(fabs(t.attention / want - 1) < 1e-9, "%g s vs %g s by hand", t.attention, want);
  /* one sequence of 8192 keys: 32 items, split in chunks of 256 keys up to 4 x half = 400 */
  srv_batch split = {.seqs = 1, .tokens = 1, .decodes = 1, .decode_kv = 8192, .samples = 1};
  srv_iteration_time(cost, &split, &t);
  want = srv_decode_attention_by_hand(c, 1, 8192, 400);
  cr_assert(fabs(t.attention / want - 1) < 1e-9, "%g s vs %g s by hand", t.attention, want);
  /* one sequence of 200 keys: a single chunk per head, 32 items, far below the half rate */
  srv_batch few = {.seqs = 1, .tokens = 1, .decodes = 1, .decode_kv = 200, .samples = 1};
  srv_iteration_time(cost, &few, &t);
  want = srv_decode_attention_by_hand(c, 1, 200, 32);
  cr_assert(fabs(t.attention / want - 1) < 1e-9, "%g s vs %g s by hand", t.attention, want);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* Llama-2-7B is MHA (32 KV heads for 32 query heads): the MHA figures time its decode
 * attention, keys split by FlashAttention's rule. 16 sequences of 2000 keys are 512 items, past
 * 0.8 x 132 SMs: no split, rate 0.8 x 512 / (512 + 264) of HBM; one sequence of 8192 keys is 32
 * items, short of 105.6: split in chunks of 256 up to 4 x 264. The GQA figures are not used. */
Test(serving, mha_decode_attention_takes_the_mha_figures_and_fa_splits)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *sets[] = {"serving.decode_attention_bandwidth=0.6",
                        "serving.decode_attention_half=100",
                        "serving.decode_attention_mha_bandwidth=0.8",
                        "serving.decode_attention_mha_half=264", NULL};
  srv_cost *cost = srv_cost_load(sets, &c, &w);
  cr_assert_eq(c->gpu.sms, 132);
  double kv_token = 2 * 32 * 128 * 2.0, launch = c->gpu.efficiency.launch_overhead;
  srv_batch many = {.seqs = 16, .tokens = 16, .decodes = 16, .decode_kv = 16 * 2000,
                    .samples = 16};
  srv_time t;
  srv_iteration_time(cost, &many, &t);
  double rate = c->gpu.memory_bandwidth * 0.8 * 512 / (512 + 264);
  double want = 32 * ((16 * 2000 + 2 * 16) * kv_token / rate + launch);
  cr_assert(fabs(t.attention / want - 1) < 1e-9, "%g s vs %g s by hand", t.attention, want);
  srv_batch one = {.seqs = 1, .tokens = 1, .decodes = 1, .decode_kv = 8192, .samples = 1};
  srv_iteration_time(cost, &one, &t);
  rate = c->gpu.memory_bandwidth * 0.8 * 1024 / (1024 + 264); /* 32 x 8192 / 256 = 1024 chunks */
  want = 32 * ((8192 + 2) * kv_token / rate + launch);
  cr_assert(fabs(t.attention / want - 1) < 1e-9, "%g s vs %g s by hand", t.attention, want);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* Seconds of attention in one iteration of `b` with the workload's `sets`. */
static double srv_attention_time_with(const char *const *sets, const srv_batch *b)
{
  return srv_iteration_of(srv_cost_load, sets, b).attention;
}

/* A decode kernel of a block per query head (TensorRT-LLM before XQA) reads a GQA model's KV
 * once per query head: with 8 KV heads for 32 query heads the same decode batch's attention
 * grows by almost 4 (the queries and the new K and V are read and written once); a model
 * with a KV head per query head (Llama-2-7B) is timed as before. */
Test(serving, per_query_head_decode_reads_a_gqa_kv_head_per_query_head)
{
  const char *gqa[] = {"model.kv_heads=8", NULL};
  const char *gqa_old[] = {"model.kv_heads=8", "serving.decode_attention_per_query_head=true",
                           NULL};
  const char *mha_old[] = {"serving.decode_attention_per_query_head=true", NULL};
  srv_batch b = {.seqs = 64, .tokens = 64, .decodes = 64, .decode_kv = 64 * 4000,
                 .samples = 64};
  double packed = srv_attention_time_with(gqa, &b), per_head = srv_attention_time_with(gqa_old, &b);
  cr_assert(per_head / packed > 3.5 && per_head / packed < 4, "%g vs %g s", per_head, packed);
  const char *mha_new[] = {NULL};
  double mha = srv_attention_time_with(mha_new, &b);
  cr_assert(fabs(srv_attention_time_with(mha_old, &b) / mha - 1) < 1e-12);
}

/* A GQA model (8 KV heads for 32 query heads) keeps the engine's GQA figures beside MHA ones. */
Test(serving, gqa_decode_attention_ignores_the_mha_figures)
{
  const char *gqa[] = {"model.kv_heads=8", "serving.decode_attention_bandwidth=0.6",
                       "serving.decode_attention_half=100", NULL};
  const char *both[] = {"model.kv_heads=8", "serving.decode_attention_bandwidth=0.6",
                        "serving.decode_attention_half=100",
                        "serving.decode_attention_mha_bandwidth=0.3",
                        "serving.decode_attention_mha_half=500", NULL};
  srv_batch b = {.seqs = 16, .tokens = 16, .decodes = 16, .decode_kv = 16 * 2000, .samples = 16};
  double parts[2];
  const char *const *sets[] = {gqa, both};
  for (int i = 0; i < 2; i++) {
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    srv_cost *cost = srv_cost_load(sets[i], &c, &w);
    srv_time t;
    srv_iteration_time(cost, &b, &t);
    parts[i] = t.attention;
    srv_cost_free(cost);
    cfg_cluster_free(c);
    cfg_workload_free(w);
  }
  cr_assert_float_eq(parts[1], parts[0], 1e-15);
}

Test(serving, decode_attention_without_engine_figures_is_the_generic_roofline)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_cost *cost = srv_cost_load(NULL, &c, &w);
  srv_time t;
  srv_batch b = {.seqs = 16, .tokens = 16, .decodes = 16, .decode_kv = 16 * 2000, .samples = 16};
  srv_iteration_time(cost, &b, &t);
  double bytes = (16 * 2000 + 2 * 16) * 2 * 32 * 128 * 2.0;
  double want = 32 * (bytes / (c->gpu.memory_bandwidth * c->gpu.efficiency.memory_efficiency) +
                      c->gpu.efficiency.launch_overhead);
  cr_assert(fabs(t.attention / want - 1) < 1e-9, "%g s vs %g s by hand", t.attention, want);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

Test(serving, layer_gemms_match_the_training_model)
{
  for (int tp = 1; tp <= 4; tp *= 2) {
    char tps[32];
    g_snprintf(tps, sizeof tps, "serving.tp=%d", tp);
    const char *sets[] = {tps, NULL};
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    srv_load(sets, &c, &w);
    srv_cost *cost = NULL;
    cr_assert(srv_cost_new(c, w, &cost, NULL));
    cfg_training t = {.micro_batch = 1, .dtype = CFG_BF16, .flash_attention = 1,
                      .recompute = CFG_RECOMPUTE_NONE, .grad_dtype = CFG_FP32};
    wl_shard sh = {.micro_batch = 1, .tp = tp, .cp = 1};
    wl_model *m = NULL;
    cr_assert(wl_model_build(&w->model, &t, &sh, &m, NULL));
    const wl_layer *l = g_ptr_array_index(m->layers, 1);
    double gemm = 0;
    for (guint i = 0; i < l->fwd->len; i++) {
      const wl_kernel *k = &g_array_index(l->fwd, wl_kernel, i);
      if (k->kclass == CFG_KCLASS_GEMM)
        gemm += k->flops;
    }
    double mine = srv_layer_gemm_flops(cost, w->model.seq_len);
    cr_assert(fabs(mine / gemm - 1) < 1e-12, "tp %d: %g vs %g", tp, mine, gemm);
    wl_model_free(m);
    srv_cost_free(cost);
    cfg_cluster_free(c);
    cfg_workload_free(w);
  }
}

Test(serving, ttft_rises_with_prompt_length)
{
  double prev = 0;
  const int prompts[] = {128, 512, 1024, 2048, 3072};
  for (size_t i = 0; i < G_N_ELEMENTS(prompts); i++) {
    char p[64];
    g_snprintf(p, sizeof p, "serving.requests.prompt_tokens=%d", prompts[i]);
    const char *sets[] = {p, "serving.requests.rate=0.5/s", "serving.requests.count=50", NULL};
    srv_result r = srv_run(sets);
    cr_assert(r.ttft.mean > prev, "prompt %d: TTFT %g s after %g s", prompts[i], r.ttft.mean, prev);
    prev = r.ttft.mean;
    srv_result_clear(&r);
  }
}

/* `iteration_parts_s`: a lone request's iterations run back to back, so their time by part
 * adds up to the run's duration; only tensor parallelism has all-reduces to pay. */
Test(serving, iteration_parts_add_up_to_a_lone_requests_run)
{
  const char *tps[] = {"serving.tp=1", "serving.tp=2"};
  for (int i = 0; i < 2; i++) {
    const char *sets[] = {tps[i], "serving.requests.count=1", "serving.requests.output_tokens=16",
                          NULL};
    srv_result r = srv_run(sets);
    const srv_time *t = &r.parts;
    double sum = t->gemm + t->attention + t->other + t->comm + t->host + t->draft;
    cr_assert(fabs(sum / t->total - 1) < 1e-12, "%s: parts %g s, total %g s", tps[i], sum,
              t->total);
    cr_assert(fabs(t->total / r.duration - 1) < 1e-9, "%s: iterations %g s, run %g s", tps[i],
              t->total, r.duration);
    cr_assert(t->gemm > 0 && t->attention > 0 && t->other > 0, "%s", tps[i]);
    if (i == 0)
      cr_assert_eq(t->comm, 0, "one GPU has no all-reduce: %g s", t->comm);
    else
      cr_assert(t->comm > 0 && t->comm < t->total, "TP 2: all-reduces %g s of %g", t->comm,
                t->total);
    srv_result_clear(&r);
  }
}

Test(serving, throughput_rises_with_batch_until_the_kv_cache_is_full)
{
  /* every request at once; a KV cache of 64 blocks holds 8 requests of 128 tokens */
  double prev = 0, at8 = 0;
  const int batches[] = {1, 2, 4, 8, 16, 32};
  for (size_t i = 0; i < G_N_ELEMENTS(batches); i++) {
    char b[64];
    g_snprintf(b, sizeof b, "serving.max_batch=%d", batches[i]);
    const char *sets[] = {b, "serving.requests.arrival=burst", "serving.requests.count=64",
                          "serving.requests.prompt_tokens=64", "serving.requests.output_tokens=64",
                          "serving.kv_blocks=64", "serving.preemption=none", NULL};
    srv_result r = srv_run(sets);
    if (batches[i] <= 8) {
      cr_assert(r.output_tokens_per_s > 1.5 * prev, "batch %d: %g tokens/s after %g",
                batches[i], r.output_tokens_per_s, prev);
      at8 = r.output_tokens_per_s;
    } else {
      cr_assert(fabs(r.output_tokens_per_s / at8 - 1) < 0.02, "batch %d: %g tokens/s, 8: %g",
                batches[i], r.output_tokens_per_s, at8);
      cr_assert(r.batch_max <= 8, "the cache holds 8 requests, not %g", r.batch_max);
    }
    prev = r.output_tokens_per_s;
    srv_result_clear(&r);
  }
}

Test(serving, a_request_longer_than_the_kv_cache_is_an_input_error)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *sets[] = {"serving.kv_blocks=30", NULL};
  srv_load(sets, &c, &w);
  srv_result r;
  GError *err = NULL;
  cr_assert_not(srv_simulate(c, w, NULL, &r, &err));
  cr_assert_eq(err->code, CFG_ERROR_INPUT);
  cr_assert(strstr(err->message, "needs 576 tokens of KV cache") &&
                strstr(err->message, "holds 480 (30 blocks of 16 tokens"),
            "%s", err->message);
  cr_assert(strstr(err->message, "llama2-7b-serve.yaml:"), "names the file: %s", err->message);
  g_error_free(err);
  srv_result_clear(&r);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  g_autofree char *args = g_strdup_printf(
      "serve -c dgx-h100 -w %s --set serving.requests.prompt_tokens=4090", srv_workload());
  srv_cli_says(args, 2, "exceeds serving.max_model_len = 4096");
}

Test(serving, identical_seeds_give_identical_results)
{
  const char *a[] = {"serving.requests.arrival=gamma", "serving.requests.burstiness=0.5",
                     "serving.requests.distribution=uniform", "serving.requests.rate=8/s", NULL};
  const char *b[] = {"serving.requests.arrival=gamma", "serving.requests.burstiness=0.5",
                     "serving.requests.distribution=uniform", "serving.requests.rate=8/s",
                     "serving.requests.seed=8", NULL};
  srv_result r1 = srv_run(a), r2 = srv_run(a), r3 = srv_run(b);
  cJSON *j1 = srv_result_json(&r1), *j2 = srv_result_json(&r2), *j3 = srv_result_json(&r3);
  char *s1 = cJSON_PrintUnformatted(j1), *s2 = cJSON_PrintUnformatted(j2),
       *s3 = cJSON_PrintUnformatted(j3);
  cr_assert_str_eq(s1, s2);
  cr_assert_str_neq(s1, s3, "another seed, other requests");
  cJSON_free(s1);
  cJSON_free(s2);
  cJSON_free(s3);
  cJSON_Delete(j1);
  cJSON_Delete(j2);
  cJSON_Delete(j3);
  srv_result_clear(&r1);
  srv_result_clear(&r2);
  srv_result_clear(&r3);
}

Test(serving, chunked_prefill_keeps_decodes_flowing)
{
  /* long prompts: vLLM V0's prefill-only iterations stall every decode (Sarathi-Serve's point) */
  const char *base[] = {"serving.requests.prompt_tokens=3000", "serving.requests.rate=3/s", NULL};
  const char *v0[] = {"serving.requests.prompt_tokens=3000", "serving.requests.rate=3/s",
                      "serving.scheduler=continuous", NULL};
  srv_result chunked = srv_run(base), cont = srv_run(v0);
  cr_assert(chunked.tbt.p99 < cont.tbt.p99, "TBT p99: chunked %g s, continuous %g s",
            chunked.tbt.p99, cont.tbt.p99);
  srv_result_clear(&chunked);
  srv_result_clear(&cont);
}

/* SGLang runs prefill batches of their own (its scheduler's enable_mixed_chunk is off by
 * default): its profile is vLLM V0's continuous scheduler, and a workload naming the engine
 * without a scheduler runs exactly that. */
Test(serving, sglang_profile_runs_prompts_in_iterations_of_their_own)
{
  char *path = th_write("llama2-7b-sglang.yaml",
                        "model: llama2-7b\n"
                        "serving:\n"
                        "  engine: sglang\n"
                        "  dtype: fp16\n"
                        "  requests: {rate: 3/s, count: 100, prompt_tokens: 3000, output_tokens: 64, seed: 7}\n");
  const char *const sets[][2] = {{NULL}, {"serving.scheduler=continuous", NULL},
                                 {"serving.scheduler=chunked", NULL}};
  srv_result r[3];
  for (int i = 0; i < 3; i++) {
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    cr_assert(th_load("dgx-h100", path, sets[i][0] ? sets[i] : NULL, &c, &w));
    if (i == 0)
      cr_assert_eq(w->serving.scheduler, CFG_SCHEDULER_CONTINUOUS);
    GError *err = NULL;
    cr_assert(srv_simulate(c, w, NULL, &r[i], &err), "%s", err ? err->message : "");
    r[i].cluster = NULL;
    r[i].workload = NULL;
    cfg_cluster_free(c);
    cfg_workload_free(w);
  }
  cr_assert_float_eq(r[0].tbt.p99, r[1].tbt.p99, 1e-15);
  /* a 3000-token prefill stalls every decode for its iteration; mixed chunks would not */
  cr_assert(r[0].tbt.p99 > r[2].tbt.p99, "%g vs %g s", r[0].tbt.p99, r[2].tbt.p99);
  for (int i = 0; i < 3; i++)
    srv_result_clear(&r[i]);
  g_free(path);
}

Test(serving, static_batches_wait_for_the_longest_request)
{
  const char *dyn[] = {"serving.requests.distribution=uniform", "serving.requests.spread=0.9", NULL};
  const char *stat[] = {"serving.requests.distribution=uniform", "serving.requests.spread=0.9",
                        "serving.scheduler=static", NULL};
  srv_result d = srv_run(dyn), s = srv_run(stat);
  cr_assert(s.ttft.mean > 2 * d.ttft.mean, "TTFT static %g s, chunked %g s", s.ttft.mean,
            d.ttft.mean);
  cr_assert(s.e2e.mean > d.e2e.mean);
  srv_result_clear(&d);
  srv_result_clear(&s);
}

Test(serving, a_full_kv_cache_preempts_or_reserves)
{
  const char *small[] = {"serving.kv_blocks=200", "serving.requests.rate=20/s",
                         "serving.requests.output_tokens=512", NULL};
  const char *reserve[] = {"serving.kv_blocks=200", "serving.requests.rate=20/s",
                           "serving.requests.output_tokens=512", "serving.preemption=none", NULL};
  srv_result p = srv_run(small), n = srv_run(reserve);
  cr_assert(p.preemptions > 0, "a short cache under load preempts (recompute)");
  cr_assert_eq(n.preemptions, 0);
  cr_assert(p.kv_max > 0.9 && n.kv_max > 0.9, "%g %g", p.kv_max, n.kv_max);
  cr_assert_eq(p.requests, 200);
  cr_assert_eq(n.requests, 200);
  srv_result_clear(&p);
  srv_result_clear(&n);
}

Test(serving, replicas_share_the_load)
{
  const char *one[] = {"serving.requests.rate=4/s", NULL};
  const char *four[] = {"serving.requests.rate=16/s", "serving.requests.count=800",
                        "serving.replicas=4", "serving.router=least-loaded", NULL};
  srv_result a = srv_run(one), b = srv_run(four);
  cr_assert(fabs(b.tbt.mean / a.tbt.mean - 1) < 0.1, "TBT %g s vs %g s", b.tbt.mean, a.tbt.mean);
  cr_assert(b.requests_per_s > 3.5 * a.requests_per_s);
  srv_result_clear(&a);
  srv_result_clear(&b);
}

Test(serving, pipeline_stages_overlap_iterations)
{
  /* a 70B model on 8 GPUs: TP 4 x PP 2 runs two iterations at once, so it serves close to
   * TP 8 in throughput even though each iteration takes longer */
  const char *sets[] = {"model=llama2-70b", "serving.tp=4", "serving.pp=2", "serving.requests.rate=8/s",
                        NULL};
  srv_result r = srv_run(sets);
  cr_assert_not(r.saturated);
  cr_assert(r.requests_per_s > 7, "%g", r.requests_per_s);
  srv_result_clear(&r);
}

Test(serving, overload_is_detected)
{
  const char *low[] = {"serving.requests.rate=2/s", NULL};
  const char *high[] = {"serving.requests.rate=200/s", "serving.requests.count=2000", NULL};
  srv_result a = srv_run(low), b = srv_run(high);
  cr_assert_not(a.saturated);
  cr_assert(b.saturated);
  cr_assert(b.requests_per_s < 0.9 * 200);
  srv_result_clear(&a);
  srv_result_clear(&b);
}

/* A server offered 8 % more than it serves falls behind by 8 % of the requests over the run
 * (240 of 3000, beyond the 3 sqrt(3000) = 164 a Poisson count strays), though its median TTFT
 * grows by less than a tenth of the arrival window; 10 % under its capacity it keeps up. */
static srv_result srv_at_capacity_times(double capacity, double k)
{
  g_autofree char *rate = g_strdup_printf("serving.requests.rate=%g/s", k * capacity);
  const char *sets[] = {rate, "serving.requests.count=3000", NULL};
  return srv_run(sets);
}

Test(serving, a_slowly_growing_queue_is_overload)
{
  const char *burst[] = {"serving.requests.arrival=burst", "serving.requests.count=3000", NULL};
  srv_result cap = srv_run(burst);
  srv_result over = srv_at_capacity_times(cap.requests_per_s, 1.08),
             under = srv_at_capacity_times(cap.requests_per_s, 0.9);
  cr_assert(over.saturated, "served %g of %g req/s", over.requests_per_s, over.offered_rate);
  cr_assert_not(under.saturated, "served %g of %g req/s", under.requests_per_s, under.offered_rate);
  srv_result_clear(&cap);
  srv_result_clear(&over);
  srv_result_clear(&under);
}

Test(serving, find_max_rate_meets_the_slo_at_its_answer, .timeout = 60)
{
  const char *sets[] = {"serving.slo.ttft=200ms", "serving.slo.tbt=20ms", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_load(sets, &c, &w);
  srv_max_rate m;
  GError *err = NULL;
  cr_assert(srv_find_max_rate(c, w, &m, &err), "%s", err ? err->message : "");
  cr_assert(m.max_rate > 1, "%g", m.max_rate);
  cr_assert(m.at.slo_attainment >= 0.9 && !m.at.saturated);
  srv_options o = {.rate = m.max_rate * 1.5};
  srv_result above;
  cr_assert(srv_simulate(c, w, &o, &above, NULL));
  cr_assert(above.slo_attainment < 0.9 || above.saturated, "1.5x the max rate still meets it");
  srv_result_clear(&above);
  srv_max_rate_clear(&m);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

Test(serving, a_trace_is_replayed_and_bad_rows_are_named)
{
  g_autofree char *good = th_write("trace.csv", "arrival_s,prompt_tokens,output_tokens\n"
                                                "0.5,200,10\n0,100,20\n");
  g_autofree char *bad = th_write("bad.csv", "arrival_s,prompt_tokens,output_tokens\n0,100,x\n");
  g_autofree char *sg = g_strdup_printf("serving.requests.trace=%s", good);
  const char *sets[] = {sg, NULL};
  srv_result r = srv_run(sets);
  cr_assert_eq(r.requests, 2);
  cr_assert_float_eq(r.output_tokens_mean, 15, 1e-9);
  srv_result_clear(&r);
  g_autofree char *args = g_strdup_printf("serve -c dgx-h100 -w %s --set serving.requests.trace=%s",
                                          srv_workload(), bad);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 2, "%s", p.out);
  cr_assert(strstr(p.out, "bad.csv:2: serving.requests.trace: column output_tokens: expected a number"),
            "%s", p.out);
  th_proc_clear(&p);
}

/* serving.async_scheduling: the host's iteration_overhead runs beside the GPUs' work instead of
 * after it, and a request that arrives while an iteration runs waits one more: with requests
 * at 0 and 0.1 ms (during the first prompt's prefill), the second's first token comes one
 * decode iteration of the first later than without. "multiprocess" does it with 2+ GPUs only. */
static double async_iteration(const char *mode, double *host)
{
  g_autofree char *m = g_strdup_printf("serving.async_scheduling=%s", mode);
  const char *sets[] = {m, "serving.iteration_overhead=1ms", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_load(sets, &c, &w);
  srv_cost *cost = NULL;
  GError *err = NULL;
  cr_assert(srv_cost_new(c, w, &cost, &err), "%s", err ? err->message : "");
  srv_batch b = {.seqs = 8, .tokens = 8, .decodes = 8, .decode_kv = 8 * 600, .samples = 8};
  srv_time t;
  srv_iteration_time(cost, &b, &t);
  *host = t.host;
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return t.total;
}

static double async_ttft(const char *mode, const char *trace, int tp)
{
  g_autofree char *m = g_strdup_printf("serving.async_scheduling=%s", mode);
  g_autofree char *tr = g_strdup_printf("serving.requests.trace=%s", trace);
  g_autofree char *t = g_strdup_printf("serving.tp=%d", tp);
  const char *sets[] = {m, tr, t, NULL};
  srv_result r = srv_run(sets);
  double ttft = r.ttft.mean;
  srv_result_clear(&r);
  return ttft;
}

Test(serving, async_scheduling_hides_host_work_and_delays_new_requests_one_iteration)
{
  double host_off, host_on;
  double off = async_iteration("off", &host_off), on = async_iteration("on", &host_on);
  cr_assert_float_eq(host_off, 1e-3, 1e-12);
  cr_assert_float_eq(on, off - 1e-3, 1e-12, "the GPUs' %g s, not %g s", on, off);
  cr_assert_eq(host_on, 0, "a decode of 7B takes more than the host's 1 ms");
  g_autofree char *trace = th_write("async.csv", "arrival_s,prompt_tokens,output_tokens\n"
                                                 "0,512,8\n0.0001,512,8\n");
  double decode = async_iteration("off", &host_off) - 1e-3; /* about one decode iteration */
  double sync = async_ttft("off", trace, 1), ahead = async_ttft("on", trace, 1);
  /* the mean of two TTFTs: half of one iteration more, within the prefill riding along */
  cr_assert(ahead - sync > 0.4 * decode && ahead - sync < 1.5 * decode,
            "TTFT %g s ahead vs %g s, decode iteration %g s", ahead, sync, decode);
  cr_assert_float_eq(async_ttft("multiprocess", trace, 1), sync, 1e-12, "one GPU: no run-ahead");
  cr_assert_float_eq(async_ttft("multiprocess", trace, 2), async_ttft("on", trace, 2), 1e-12,
                     "two GPUs: worker processes, the scheduler runs ahead");
  cr_assert(async_ttft("on", trace, 2) > async_ttft("off", trace, 2));
}

Test(serving, bad_serving_input_is_named)
{
  const char *typo[] = {"serving.max_batchh=4", NULL};
  char *why = th_load_error("dgx-h100", srv_workload(), typo);
  cr_assert(why && strstr(why, "did you mean 'max_batch'"), "%s", why);
  g_free(why);
  const char *big[] = {"serving.replicas=8", "serving.tp=8", NULL};
  why = th_load_error("dgx-h100", srv_workload(), big);
  cr_assert(why && strstr(why, "replicas x tp x pp = 8 x 8 x 1 = 64 GPUs"), "%s", why);
  g_free(why);
  const char *rate[] = {"serving.decode_attention_bandwidth=1.5", NULL};
  why = th_load_error("dgx-h100", srv_workload(), rate);
  cr_assert(why && strstr(why, "serving.decode_attention_bandwidth"), "%s", why);
  g_free(why);
  const char *warm[] = {"serving.requests.warmup=200", NULL};
  why = th_load_error("dgx-h100", srv_workload(), warm);
  cr_assert(why && strstr(why, "serving.requests.warmup = 200: must leave requests to measure "
                               "(count is 200)"), "%s", why);
  g_free(why);
  g_autofree char *two = th_write("two.csv", "arrival_s,prompt_tokens,output_tokens\n0,8,8\n1,8,8\n");
  g_autofree char *trace_warm = g_strdup_printf(
      "serve -c dgx-h100 -w %s --set serving.requests.trace=%s --set serving.requests.warmup=2",
      srv_workload(), two);
  srv_cli_says(trace_warm, 2, "serving.requests.warmup = 2: must leave requests to measure");
  const char *ramp[] = {"serving.requests.ramp=10s", NULL};
  why = th_load_error("dgx-h100", srv_workload(), ramp);
  cr_assert(why && strstr(why, "serving.requests.ramp = 10 s: a ramp starts the clients of a "
                               "closed loop; set serving.requests.concurrency"), "%s", why);
  g_free(why);
  g_autofree char *norate = th_write("norate.yaml", "model: llama2-7b\nserving:\n  requests: {prompt_tokens: 10, output_tokens: 10}\n");
  why = th_load_error("dgx-h100", norate, NULL);
  cr_assert(why && strstr(why, "norate.yaml:3:13: serving.requests: missing required key 'rate'"), "%s", why);
  g_free(why);
  th_proc p = th_dlsim("serve -c dgx-h100 -w configs/workloads/llama3-70b-tp8.yaml --set serving.tp=1");
  cr_assert_eq(p.status, 2);
  cr_assert(strstr(p.out, "no room for the KV cache"), "%s", p.out);
  th_proc_clear(&p);
}

/* A burst's requests arrive at one instant: the server sees them all queued when it forms its
 * first batch, under the static scheduler (one batch of 4, 128 iterations for 128 tokens; it
 * used to start a batch of 1 at the first arrival and then one of 3: 256 iterations) and under
 * the continuous one alike. */
Test(serving, a_burst_is_batched_whole)
{
  g_autofree char *w = th_write("burst4.yaml", "model: llama2-7b\n"
                                               "serving:\n"
                                               "  max_batch: 4\n"
                                               "  requests: {arrival: burst, count: 4, "
                                               "prompt_tokens: 128, output_tokens: 128}\n");
  const char *sched[] = {"static", "continuous"};
  for (int i = 0; i < 2; i++) {
    g_autofree char *cmd = g_strdup_printf(
        "serve -c dgx-a100 -w %s --set serving.scheduler=%s --json", w, sched[i]);
    th_proc p = th_dlsim(cmd);
    cr_assert_eq(p.status, 0, "%s", p.out);
    cr_expect(strstr(p.out, "\"iterations\":\t128,"), "%s: %s", sched[i], p.out);
    th_proc_clear(&p);
  }
}

/* A closed loop's ramp starts client i at i x ramp / concurrency; the rest of its requests
 * wait for a free client. */
Test(serving, a_ramp_starts_the_clients_one_by_one)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *sets[] = {"serving.requests.concurrency=4", "serving.requests.ramp=2s", NULL};
  srv_load(sets, &c, &w);
  srv_stream st;
  GError *err = NULL;
  cr_assert(srv_stream_build(w, 0, &st, &err), "%s", err ? err->message : "");
  for (int i = 0; i < 4; i++)
    cr_expect_float_eq(st.reqs[i].arrival, 0.5 * i, 1e-12, "client %d", i);
  cr_expect(isnan(st.reqs[4].arrival), "the fifth request waits for an answer");
  srv_stream_clear(&st);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  g_autofree char *cmd = g_strdup_printf("serve -c dgx-h100 -w %s --set serving.requests.count=8 "
                                         "--set serving.requests.concurrency=4 "
                                         "--set serving.requests.ramp=2s",
                                         srv_workload());
  srv_cli_says(cmd, 0, "requests     8, closed loop of 4 clients started over 2.000 s;");
  g_autofree char *warm = g_strdup_printf("serve -c dgx-h100 -w %s --set serving.requests.count=8 "
                                          "--set serving.requests.warmup=2", srv_workload());
  srv_cli_says(warm, 0, "requests     6 after 2 of warm-up, ");
}

/* Two clients that start together share the first iterations' token budget, so their mean TTFT
 * exceeds a lone request's; started a second apart (a request takes ~0.1 s) each prompt is
 * alone, and the mean is the lone TTFT. */
Test(serving, a_ramp_keeps_closed_loop_prompts_apart)
{
  const char *together[] = {"serving.requests.concurrency=2", "serving.requests.count=2",
                            "serving.requests.prompt_tokens=2048", NULL};
  const char *apart[] = {"serving.requests.concurrency=2", "serving.requests.count=2",
                         "serving.requests.prompt_tokens=2048", "serving.requests.ramp=2s", NULL};
  const char *lone2k[] = {"serving.requests.concurrency=1", "serving.requests.count=1",
                          "serving.requests.prompt_tokens=2048", NULL};
  srv_result one = srv_run(lone2k), both = srv_run(together), ramped = srv_run(apart);
  cr_assert(both.ttft.mean > 1.3 * one.ttft.mean, "together %g s, lone %g s", both.ttft.mean,
            one.ttft.mean);
  cr_assert_float_eq(ramped.ttft.mean, one.ttft.mean, 1e-9, "ramped %g s, lone %g s",
                     ramped.ttft.mean, one.ttft.mean);
  srv_result_clear(&one);
  srv_result_clear(&both);
  srv_result_clear(&ramped);
}

/* A warm-up request loads the server but counts in no figure: of a burst of four 2048-token
 * prompts, the first is prefilled alone (a lone request's TTFT); leaving it out leaves the other
 * three's TTFTs and its 63 gaps between tokens out of the time between tokens. */
Test(serving, warmup_requests_are_left_out_of_the_figures)
{
  const char *base[] = {"serving.requests.arrival=burst", "serving.requests.count=4",
                        "serving.requests.prompt_tokens=2048", NULL};
  const char *warm[] = {"serving.requests.arrival=burst", "serving.requests.count=4",
                        "serving.requests.prompt_tokens=2048", "serving.requests.warmup=1", NULL};
  const char *lone[] = {"serving.requests.arrival=burst", "serving.requests.count=1",
                        "serving.requests.prompt_tokens=2048", NULL};
  srv_result all = srv_run(base), rest = srv_run(warm), one = srv_run(lone);
  cr_assert_eq(rest.requests, 3);
  cr_assert_float_eq(4 * all.ttft.mean, one.ttft.mean + 3 * rest.ttft.mean, 1e-9,
                     "all %g s, lone %g s, the rest %g s", all.ttft.mean, one.ttft.mean,
                     rest.ttft.mean);
  cr_assert_eq(rest.tbt.n, all.tbt.n - 63);
  srv_result_clear(&all);
  srv_result_clear(&rest);
  srv_result_clear(&one);
}

/* ---- wide expert parallelism (serving.ep > 1) ---------------------------------------------- */

/* A small MoE (2 layers, hidden 1024, 8 experts of width 1024, top-2) on an idealised H100 node
 * whose all-to-all takes exactly bytes x (n - 1) / n / 450 GB/s: no latencies, every NCCL
 * efficiency 1. */
static const char *ep_workload(void)
{
  static char *path = NULL;
  if (!path)
    path = th_write("tiny-moe-ep.yaml",
                    "model:\n"
                    "  kind: moe-transformer\n"
                    "  name: tiny-moe\n"
                    "  layers: 2\n"
                    "  hidden: 1024\n"
                    "  heads: 8\n"
                    "  ffn_hidden: 4096\n"
                    "  vocab: 32000\n"
                    "  seq_len: 2048\n"
                    "  activation: swiglu\n"
                    "  moe: {experts: 8, top_k: 2, expert_ffn_hidden: 1024}\n"
                    "serving:\n"
                    "  dtype: bf16\n"
                    "  ep: 2\n"
                    "  max_batch: 64\n"
                    "  max_tokens: 4096\n"
                    "  requests: {rate: 2/s, count: 50, prompt_tokens: 128, output_tokens: 16, seed: 3}\n");
  return path;
}

static srv_cost *ep_cost(const char *const *more, cfg_cluster **c, cfg_workload **w)
{
  const char *ideal[] = {"node.intra.latency=0", "nccl.base_latency.ll=0",
                         "nccl.base_latency.ll128=0", "nccl.base_latency.simple=0",
                         "nccl.hop_latency.intra.ll=0", "nccl.hop_latency.intra.ll128=0",
                         "nccl.hop_latency.intra.simple=0", "nccl.protocol_efficiency.ll=1",
                         "nccl.protocol_efficiency.ll128=1", "nccl.link_efficiency.intra=1",
                         "nccl.p2p_efficiency=1"};
  GPtrArray *sets = g_ptr_array_new();
  for (size_t i = 0; i < G_N_ELEMENTS(ideal); i++)
    g_ptr_array_add(sets, (gpointer)ideal[i]);
  for (int i = 0; more && more[i]; i++)
    g_ptr_array_add(sets, (gpointer)more[i]);
  g_ptr_array_add(sets, NULL);
  const char *const *s = (const char *const *)sets->pdata;
  char *why = th_load_error("dgx-h100", ep_workload(), s);
  cr_assert_null(why, "%s", why);
  cr_assert(th_load("dgx-h100", ep_workload(), s, c, w));
  g_ptr_array_free(sets, TRUE);
  srv_cost *cost = NULL;
  GError *err = NULL;
  cr_assert(srv_cost_new(*c, *w, &cost, &err), "%s", err ? err->message : "");
  return cost;
}

/* Tensor-parallel experts (ep 1) of the tiny MoE under an engine's profile: its iteration
 * parts for `b` at TP `tp`. */
static srv_time moe_tp_parts(const char *engine, int tp, const srv_batch *b, const char *const *more)
{
  char tps[32], eng[48];
  g_snprintf(tps, sizeof tps, "serving.tp=%d", tp);
  g_snprintf(eng, sizeof eng, "serving.engine=%s", engine);
  const char *sets[8] = {"serving.ep=1", tps, eng};
  for (int i = 0; more && more[i] && i < 4; i++)
    sets[3 + i] = more[i];
  return srv_iteration_of(ep_cost, sets, b);
}

/* TensorRT-LLM gathers the copies by expert in a kernel of its own (each copy's hidden state
 * read and written) and sorts them in four launches; vLLM gathers inside its GEMM and aligns in
 * one. Both routing paths see every token at the whole hidden size on every TP GPU, so the
 * difference is the same at TP 1 and 2. */
Test(serving, moe_gather_kernel_by_hand_and_unsplit_by_tp)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_cost_free(ep_cost(NULL, &c, &w));
  const cfg_gpu *g = &c->gpu;
  double bw = g->memory_bandwidth * g->efficiency.memory_efficiency;
  double launch = g->efficiency.launch_overhead;
  cfg_cluster_free(c);
  cfg_workload_free(w);
  srv_batch d = {.seqs = 64, .tokens = 64, .decodes = 64, .decode_kv = 64 * 200, .samples = 64};
  double copies = 64 * 2, gather = 2 * 2 * copies * 1024 / bw + launch;
  double by_hand = 2 * (gather + 3 * launch); /* two MoE layers */
  for (int tp = 1; tp <= 2; tp++) {
    srv_time trt = moe_tp_parts("trtllm", tp, &d, NULL), vllm = moe_tp_parts("vllm", tp, &d, NULL);
    double diff = trt.other - vllm.other;
    cr_assert(fabs(diff / by_hand - 1) < 1e-9, "TP %d: %g vs %g s", tp, diff, by_hand);
  }
}

/* Each expert's rows run in whole tiles: with 8 experts of 8192 x 8192 and top-2, 1280 tokens
 * give 320 rows per expert and 1284 give 321. vLLM's 64-row tiles go from 5 to 6 (a sixth more
 * work in the compute-bound expert GEMMs); TensorRT-LLM's 128-row tiles stay at 3. */
Test(serving, moe_grouped_gemm_pays_for_whole_tiles)
{
  const char *big[] = {"model.hidden=8192", "model.heads=64", "model.moe.expert_ffn_hidden=8192", NULL};
  srv_batch a = {.seqs = 1280, .tokens = 1280, .decodes = 1280, .decode_kv = 1280 * 10,
                 .samples = 1280};
  srv_batch b = {.seqs = 1284, .tokens = 1284, .decodes = 1284, .decode_kv = 1284 * 10,
                 .samples = 1284};
  double vllm = moe_tp_parts("vllm", 1, &b, big).gemm / moe_tp_parts("vllm", 1, &a, big).gemm;
  double trt = moe_tp_parts("trtllm", 1, &b, big).gemm / moe_tp_parts("trtllm", 1, &a, big).gemm;
  cr_assert(trt < 1.01, "TensorRT-LLM: %g", trt);
  cr_assert(vllm > 1.08, "vLLM: %g", vllm);
}

/* The routing and the tile come from the engine profile's keys, not its name: vLLM told to
 * expand in 128-row tiles costs what TensorRT-LLM does, and TensorRT-LLM told to fuse in
 * 64-row tiles what vLLM does. */
Test(serving, moe_routing_and_tile_are_the_profiles_keys)
{
  srv_batch d = {.seqs = 64, .tokens = 64, .decodes = 64, .decode_kv = 64 * 200, .samples = 64};
  const char *expand[] = {"serving.moe_routing=expand", "serving.moe_tile=128", NULL};
  const char *fused[] = {"serving.moe_routing=fused", "serving.moe_tile=64", NULL};
  srv_time trt = moe_tp_parts("trtllm", 1, &d, NULL), vllm = moe_tp_parts("vllm", 1, &d, NULL);
  srv_time vllm_expand = moe_tp_parts("vllm", 1, &d, expand);
  srv_time trt_fused = moe_tp_parts("trtllm", 1, &d, fused);
  cr_assert(trt.other > vllm.other);
  cr_assert_float_eq(vllm_expand.other, trt.other, 1e-15);
  cr_assert_float_eq(vllm_expand.gemm, trt.gemm, 1e-15);
  cr_assert_float_eq(trt_fused.other, vllm.other, 1e-15);
  cr_assert_float_eq(trt_fused.gemm, vllm.gemm, 1e-15);
}

/* wl_moe_load by hand: the busiest rank's expected copies plus sqrt(2 ln ep) binomial standard
 * deviations, over the mean; q is its share of the copies. */
static double ep_load_by_hand(double copies, int ep, double q)
{
  return (q * copies + sqrt(2 * log(ep)) * sqrt(copies * q * (1 - q))) / (copies / ep);
}

Test(serving, ep_decode_all_to_all_bytes_and_time_by_hand)
{
  for (int ep = 2; ep <= 4; ep *= 2) {
    char eps[32];
    g_snprintf(eps, sizeof eps, "serving.ep=%d", ep);
    const char *sets[] = {eps, NULL};
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    srv_cost *cost = ep_cost(sets, &c, &w);
    /* one decode iteration: 16 sequences on every DP rank, 100 tokens of context each */
    srv_batch d = {.seqs = 16, .tokens = 16, .decodes = 16, .decode_kv = 16 * 101, .samples = 16};
    srv_ep_layer l;
    cr_assert(srv_ep_layer_of(cost, &d, &l));
    cr_assert_eq(l.kind, CFG_A2A_DEEPEP_LL, "decode-only: the low-latency kernels");
    cr_assert_eq(l.nodes, 1);
    /* every GPU sends its 16 tokens' 2 copies in bf16 (hidden 1024), the busiest receiving
     * `load` times the mean; the low-latency kernels send every copy */
    double load = ep_load_by_hand(16.0 * ep * 2, ep, 1.0 / ep);
    cr_assert(fabs(l.load / load - 1) < 1e-12, "ep %d: load %g vs %g", ep, l.load, load);
    double bytes = 16 * 1024 * 2 * 2 * load;
    for (int i = 0; i < 2; i++) {
      cr_assert(fabs(l.bytes[i] / bytes - 1) < 1e-12, "ep %d: %g vs %g B", ep, l.bytes[i], bytes);
      /* the collectives model sends whole bytes: floor(bytes / ep) to each of ep - 1 peers */
      double t = floor(bytes / ep) * (ep - 1) / 450e9;
      cr_assert(fabs(l.time[i] / t - 1) < 1e-9, "ep %d: %g vs %g s", ep, l.time[i], t);
    }
    /* both layers dispatch and combine; nothing else communicates (attention TP 1) */
    srv_time it;
    srv_iteration_time(cost, &d, &it);
    double comm = 2 * (l.time[0] + l.time[1]);
    cr_assert(fabs(it.comm / comm - 1) < 1e-9, "ep %d: comm %g vs %g s", ep, it.comm, comm);
    /* an iteration with prefill tokens takes DeepEP's normal kernels */
    srv_batch p = {.seqs = 1, .tokens = 64, .prefill_tokens = 64, .prefill_attn = 64 * 65 / 2.0,
                   .prefill_kv = 64, .samples = 1};
    cr_assert(srv_ep_layer_of(cost, &p, &l));
    cr_assert_eq(l.kind, CFG_A2A_DEEPEP);
    srv_cost_free(cost);
    cfg_cluster_free(c);
    cfg_workload_free(w);
  }
}

Test(serving, ep_routing_imbalance_raises_the_expert_time_by_its_load)
{
  const char *uniform[] = {NULL};
  const char *zipf[] = {"model.moe.routing=zipf", "model.moe.zipf_s=1.2", NULL};
  const char *const *routes[] = {uniform, zipf};
  double load[2], experts[2];
  /* 4096 prompt tokens per GPU: the expert GEMMs are compute-bound, so their time less the
   * two launches follows the copies the busiest GPU runs */
  srv_batch p = {.seqs = 2, .tokens = 4096, .prefill_tokens = 4096,
                 .prefill_attn = 2 * 2048 * 2049 / 2.0, .prefill_kv = 4096, .samples = 2};
  double launch = 0;
  for (int i = 0; i < 2; i++) {
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    srv_cost *cost = ep_cost(routes[i], &c, &w);
    srv_ep_layer l;
    cr_assert(srv_ep_layer_of(cost, &p, &l));
    load[i] = l.load;
    experts[i] = l.experts;
    launch = c->gpu.efficiency.launch_overhead;
    srv_cost_free(cost);
    cfg_cluster_free(c);
    cfg_workload_free(w);
  }
  /* Zipf(1.2) over 8 experts, round robin over 2 GPUs: GPU 0 holds experts 1, 3, 5, 7 */
  double sum = 0, q = 0;
  for (int e = 0; e < 8; e++) {
    sum += pow(e + 1, -1.2);
    q += e % 2 == 0 ? pow(e + 1, -1.2) : 0;
  }
  double copies = 4096.0 * 2 * 2;
  cr_assert(fabs(load[0] / ep_load_by_hand(copies, 2, 0.5) - 1) < 1e-12, "uniform %g", load[0]);
  cr_assert(fabs(load[1] / ep_load_by_hand(copies, 2, q / sum) - 1) < 1e-12, "zipf %g", load[1]);
  cr_assert(load[1] > 1.2 * load[0], "zipf %g vs uniform %g", load[1], load[0]);
  /* each expert's ~2000 rows run in whole tiles: within one 128-row tile of proportional */
  double ratio = (experts[1] - 2 * launch) / (experts[0] - 2 * launch);
  cr_assert(fabs(ratio / (load[1] / load[0]) - 1) < 128 / 2000.0, "expert time x %g, load x %g",
            ratio, load[1] / load[0]);
}

/* An iteration of batch `d` (halves `h`) with two-batch overlap against the same without it:
 * over the 2 MoE layers, without overlap each runs its compute, then dispatch and combine; with
 * it the 4 half-batch jobs flow through compute (slowed by `slowdown`, the SMs the kernels hold,
 * and with `normal` kernels by the GPU's GEMM interference too) and communication as a two-machine flow shop: 4 x the larger half-batch part and the part of
 * the smaller one that `hidden` leaves exposed, plus the smaller one once (the first compute or
 * the last combine, which nothing hides). */
static void ep_check_overlap(const char *sm, const srv_batch *d, const srv_batch *h,
                             double slowdown, double hidden, bool normal)
{
  cfg_cluster *c = NULL, *c2 = NULL;
  cfg_workload *w = NULL, *w2 = NULL;
  const char *plain_sets[] = {sm, NULL};
  g_autofree char *eta = g_strdup_printf("serving.tbo_overlap=%g", hidden);
  const char *tbo[] = {sm, "serving.two_batch_overlap=true", eta, NULL};
  srv_cost *plain = ep_cost(plain_sets, &c, &w), *overlap = ep_cost(tbo, &c2, &w2);
  srv_ep_layer full, half;
  cr_assert(srv_ep_layer_of(plain, d, &full) && srv_ep_layer_of(plain, h, &half));
  srv_time a, b;
  srv_iteration_time(plain, d, &a);
  srv_iteration_time(overlap, d, &b);
  if (normal)
    slowdown *= c->gpu.efficiency.interference[CFG_KCLASS_GEMM];
  double cs = half.compute * slowdown, a2a = half.time[0] + half.time[1];
  double moe_plain = 2 * (full.compute + full.time[0] + full.time[1]);
  double expect =
      a.total - moe_plain + 4 * (MAX(cs, a2a) + (1 - hidden) * MIN(cs, a2a)) + MIN(cs, a2a);
  cr_assert(fabs(b.total / expect - 1) < 1e-9, "%d seqs: %g vs %g s", d->seqs, b.total, expect);
  cr_assert(b.comm >= 0, "%d seqs: exposed comm %g", d->seqs, b.comm);
  srv_cost_free(plain);
  srv_cost_free(overlap);
  cfg_cluster_free(c);
  cfg_cluster_free(c2);
  cfg_workload_free(w);
  cfg_workload_free(w2);
}

Test(serving, ep_two_batch_overlap_is_the_larger_part_plus_what_cannot_overlap)
{
  const int batches[] = {8, 64, 512};
  for (size_t i = 0; i < G_N_ELEMENTS(batches); i++) {
    int B = batches[i];
    srv_batch d = {.seqs = B, .tokens = B, .decodes = B, .decode_kv = B * 1001.0, .samples = B};
    srv_batch h = {.seqs = B / 2, .tokens = B / 2, .decodes = B / 2, .decode_kv = B / 2 * 1001.0,
                   .samples = B / 2};
    /* decode: the low-latency kernels hold no SMs */
    ep_check_overlap("collectives.sm_reserved=0.2", &d, &h, 1, 1, false);
    ep_check_overlap("collectives.sm_reserved=0.2", &d, &h, 1, 0.7, false);
  }
}

Test(serving, ep_two_batch_overlap_hides_only_its_overlap_of_the_shorter_part)
{
  /* the flow shop by hand: 3 layers of 2 ms compute and 1 ms all-to-alls per micro-batch */
  cr_assert_float_eq(srv_tbo_time(3, 2e-3, 1e-3, 1), 6 * 2e-3 + 1e-3, 1e-15);
  cr_assert_float_eq(srv_tbo_time(3, 2e-3, 1e-3, 0.7), 6 * (2e-3 + 0.3e-3) + 1e-3, 1e-15);
  /* no overlap at all: every part in turn, as without two micro-batches, plus the fill */
  cr_assert_float_eq(srv_tbo_time(3, 1e-3, 2e-3, 0), 6 * 3e-3 + 1e-3, 1e-15);
  cr_assert_float_eq(srv_tbo_time(0, 1e-3, 2e-3, 0.7), 0, 1e-15);
}

Test(serving, ep_two_batch_overlap_slows_compute_by_the_sms_normal_kernels_hold)
{
  /* a prefill of 2 x 1024 tokens: DeepEP's normal kernels, 20 % of the SMs theirs */
  srv_batch p = {.seqs = 2, .tokens = 2048, .prefill_tokens = 2048,
                 .prefill_attn = 2 * 1024 * 1025 / 2.0, .prefill_kv = 2048, .samples = 2};
  srv_batch h = {.seqs = 1, .tokens = 1024, .prefill_tokens = 1024,
                 .prefill_attn = 1024 * 1025 / 2.0, .prefill_kv = 1024, .samples = 1};
  ep_check_overlap("collectives.sm_reserved=0.2", &p, &h, 1 / 0.8, 1, true);
  ep_check_overlap("collectives.sm_reserved=0", &p, &h, 1, 1, true);
  ep_check_overlap("collectives.sm_reserved=0.2", &p, &h, 1 / 0.8, 0.7, true);
}

Test(serving, ep_memory_divides_the_experts_and_keeps_attention_per_dp_rank)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *ep4[] = {"serving.ep=4", NULL};
  srv_cost *cost = ep_cost(ep4, &c, &w);
  /* per layer: attention 4 h^2 (8 heads of 128, no GQA), 2 of the 8 experts of 3 h x 1024,
   * the router h x 8 (16 bit), 2 norms; the embedding and output tables 32000 h (a decode
   * reads one of them) */
  double h = 1024, layer = 4 * h * h + 2 * 3 * h * 1024;
  double layers = 2 * (layer * 2 + h * 8 * 2 + 2 * h * 2), table = 32000 * h * 2;
  double got = srv_weight_bytes(cost);
  cr_assert(fabs(got / (layers + table) - 1) < 1e-12, "%g vs %g B", got, layers + table);
  srv_capacity cap;
  cr_assert(srv_capacity_of(c, w, cost, &cap, NULL));
  cr_assert(fabs(cap.weights / (layers + 2 * table) - 1) < 1e-12, "%g vs %g B", cap.weights,
            layers + 2 * table);
  /* every DP rank holds its own K and V of all 8 heads */
  cr_assert_float_eq(srv_kv_bytes_per_token(cost), 2 * 2 * 8 * 128 * 2.0, 1e-9);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

Test(serving, mtp_proposer_of_a_moe_model_is_one_block_with_experts)
{
  /* the model's first layer dense (first_dense 1, FFN 8192), which a one-layer copy would keep:
   * its MTP block still holds experts, as DeepSeek-V3's does; per GPU (EP 2): attention 4 h^2,
   * 4 of the 8 experts of 3 h x 1024, the router h x 8 and 2 norms in 16 bit, and the
   * projection of two hidden states 2 h^2 */
  const char *sets[] = {"model.moe.first_dense=1", "model.ffn_hidden=8192",
                        "serving.speculative.method=mtp",
                        "serving.speculative.tokens=1", "serving.speculative.acceptance=0.8",
                        NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_cost *cost = ep_cost(sets, &c, &w);
  double h = 1024, block = (4 * h * h + 4 * 3 * h * 1024) * 2 + h * 8 * 2 + 2 * h * 2;
  double got = srv_spec_weight_bytes(cost);
  cr_assert(fabs(got / (block + 2 * h * h * 2) - 1) < 1e-12, "%g vs %g B", got,
            block + 2 * h * h * 2);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

Test(serving, ep_runs_a_dp_rank_per_engine_and_reports_the_layout)
{
  const char *sets[] = {"serving.ep=4", "serving.tp=2", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", ep_workload(), sets, &c, &w));
  cr_assert_eq(srv_attention_dp(&w->serving), 2);
  cr_assert_eq(srv_replica_gpus(&w->serving), 4);
  srv_result r;
  GError *err = NULL;
  cr_assert(srv_simulate(c, w, NULL, &r, &err), "%s", err ? err->message : "");
  cr_assert(r.ep.on);
  cr_assert_eq(r.requests, 50);
  cr_assert(r.ep.decode.tokens_per_s_node > 0 && r.ep.prefill.tokens_per_s_node > 0);
  FILE *f = tmpfile();
  srv_result_text(f, &r);
  long len = ftell(f);
  rewind(f);
  char *text = g_malloc0(len + 1);
  cr_assert_eq(fread(text, 1, len, f), (size_t)len);
  fclose(f);
  cr_assert(strstr(text, "1 replica of EP 4 (attention DP 2 x TP 2) (4 GPUs)"), "%s", text);
  cr_assert(strstr(text, "wide EP      8 experts over 4 GPUs (2 each) on 1 node"), "%s", text);
  g_free(text);
  srv_result_clear(&r);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

Test(serving, ep_bad_input_is_named_with_its_position)
{
  g_autofree char *path = th_write("ep-bad.yaml",
                                   "model: mixtral-8x7b\n"
                                   "serving:\n"
                                   "  ep: 3\n"
                                   "  requests: {rate: 1/s, prompt_tokens: 10, output_tokens: 10}\n");
  char *why = th_load_error("dgx-h100", path, NULL);
  cr_assert(why && strstr(why, "ep-bad.yaml:3:7: serving.ep = 3 does not divide model.moe.experts = 8"),
            "%s", why);
  g_free(why);
  const char *wide[] = {"model.moe.experts=64", "serving.ep=64", NULL};
  why = th_load_error("dgx-h100", path, wide);
  cr_assert(why && strstr(why, "replicas x ep x pp = 1 x 64 x 1 = 64 GPUs, but the cluster has 32"),
            "%s", why);
  g_free(why);
  const char *dense[] = {"model=llama2-7b", "serving.ep=2", NULL};
  why = th_load_error("dgx-h100", path, dense);
  cr_assert(why && strstr(why, "expert parallelism needs a mixture of experts"), "%s", why);
  g_free(why);
  g_autofree char *args = g_strdup_printf("serve -c dgx-h100 -w %s", path);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 2, "%s", p.out);
  th_proc_clear(&p);
}

Test(serving, ep_deepseek_v3_caches_the_mla_latent_and_fits_on_32_h100)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", "deepseek-v3-sglang-ep", NULL, &c, &w));
  srv_cost *cost = NULL;
  cr_assert(srv_cost_new(c, w, &cost, NULL));
  /* 61 layers x (KV rank 512 + RoPE 64) in bf16, whole on every DP rank */
  cr_assert_float_eq(srv_kv_bytes_per_token(cost), 61 * 576 * 2.0, 1e-6);
  srv_capacity cap;
  cr_assert(srv_capacity_of(c, w, cost, &cap, NULL));
  /* 58 MoE layers of 8 of the 256 experts (3 x 7168 x 2048 each, fp8) = 20.4 GB, plus
   * attention, shared experts, dense layers (fp8) and the two 16-bit tables: 36-40 GiB */
  cr_assert(cap.weights > 36 * 1073741824.0 && cap.weights < 40 * 1073741824.0, "%g",
            cap.weights);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* ---- the engines' own all-reduce (serving.custom_allreduce) ---------------------------------- */

/* TensorRT-LLM's AUTO policy as configs/engines/trtllm.yaml declares it. */
static cfg_custom_ar srv_trtllm_ar(void)
{
  return (cfg_custom_ar){.kernel = CFG_AR_CUSTOM, .oneshot_tp2 = 16e6, .oneshot_tp4 = 1e6,
                         .oneshot_tp8 = 500e3, .twoshot = 0, .max_size = 8e6};
}

Test(serving, custom_allreduce_switches_kernel_at_the_engines_sizes)
{
  cfg_custom_ar a = srv_trtllm_ar();
  cr_assert_eq(srv_ar_choose(&a, 2, 16e6), SRV_AR_ONESHOT);
  cr_assert_eq(srv_ar_choose(&a, 2, 16e6 + 1), SRV_AR_NCCL);
  cr_assert_eq(srv_ar_choose(&a, 4, 1e6), SRV_AR_ONESHOT);
  cr_assert_eq(srv_ar_choose(&a, 4, 1e6 + 1), SRV_AR_NCCL);
  cr_assert_eq(srv_ar_choose(&a, 8, 500e3), SRV_AR_ONESHOT);
  cr_assert_eq(srv_ar_choose(&a, 8, 500e3 + 1), SRV_AR_NCCL);
  cr_assert_eq(srv_ar_choose(&a, 16, 1e3), SRV_AR_NCCL, "past a node's 8 GPUs: NCCL");
  a.twoshot = 1; /* vLLM's rule: two-shot up to the IPC buffer */
  cr_assert_eq(srv_ar_choose(&a, 8, 500e3 + 1), SRV_AR_TWOSHOT);
  cr_assert_eq(srv_ar_choose(&a, 8, 8e6), SRV_AR_TWOSHOT);
  cr_assert_eq(srv_ar_choose(&a, 8, 8e6 + 1), SRV_AR_NCCL);
  a.kernel = CFG_AR_NCCL;
  cr_assert_eq(srv_ar_choose(&a, 2, 1e3), SRV_AR_NCCL);
}

/* On dgx-h100: NVLink 450 GB/s at link efficiency 0.82 (369 GB/s) and 1 us for the route
 * GPU - NVSwitch - GPU, HBM 3.35 TB/s at 0.8, NCCL's LL set-up 3.526 us, SMs' copy rate
 * 1152 GB/s (configs/calibration/h100.yaml). */
static hw_cluster *srv_h100(const char *const *sets, cfg_cluster **c, cfg_workload **w)
{
  srv_load(sets, c, w);
  return hw_cluster_new(*c);
}

static void srv_h100_free(hw_cluster *hw, cfg_cluster *c, cfg_workload *w)
{
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* 1 MB over 4 GPUs: the launch, the copy into the IPC buffer (2 MB of HBM traffic), one
 * barrier, 3 MB loaded from the three peers over NVLink (the SMs' 5 MB is not the bound). */
Test(serving, oneshot_allreduce_by_hand)
{
  cfg_cluster *c;
  cfg_workload *w;
  hw_cluster *hw = srv_h100(NULL, &c, &w);
  double copy = 3.526e-6 + 2e6 / (3.35e12 * 0.8);
  double want = copy + 1e-6 + 3e6 / 369e9;
  cr_assert_float_eq(srv_ar_time(hw, SRV_AR_ONESHOT, 4, 1e6), want, 1e-9);
  srv_h100_free(hw, c, w);
}

/* 1 MB over 8 GPUs: two barriers, 2 x 7/8 MB over NVLink. With the SMs' copy rate at
 * 500 GB/s they bind instead: 3 MB at 500 GB/s against 1.75 MB at 369 GB/s. */
Test(serving, twoshot_allreduce_by_hand)
{
  cfg_cluster *c;
  cfg_workload *w;
  hw_cluster *hw = srv_h100(NULL, &c, &w);
  double copy = 3.526e-6 + 2e6 / (3.35e12 * 0.8);
  cr_assert_float_eq(srv_ar_time(hw, SRV_AR_TWOSHOT, 8, 1e6), copy + 2e-6 + 1.75e6 / 369e9,
                     1e-9);
  srv_h100_free(hw, c, w);
  const char *const slow_sms[] = {"nccl.copy_bandwidth=500GB/s", NULL};
  hw = srv_h100(slow_sms, &c, &w);
  cr_assert_float_eq(srv_ar_time(hw, SRV_AR_TWOSHOT, 8, 1e6), copy + 2e-6 + 3e6 / 500e9, 1e-9);
  srv_h100_free(hw, c, w);
}

/* An iteration's communication with the engine's kernels: a decode of 4 sequences on TP 2 does
 * 32 layers x 2 all-reduces of 4 x 4096 x 2 B = 32 KiB, each one-shot, as srv_ar_time gives it;
 * with kernel nccl the same iteration pays NCCL's all-reduce instead. */
static double srv_decode_comm(const char *kernel, const char *oneshot_max)
{
  char *set = g_strdup_printf("serving.custom_allreduce.kernel=%s", kernel);
  char *max = g_strdup_printf("serving.custom_allreduce.oneshot_tp2=%s", oneshot_max);
  const char *sets[] = {"serving.tp=2", max, set, NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  srv_cost *cost = srv_cost_load(sets, &c, &w);
  srv_batch b = {.seqs = 4, .tokens = 4, .decodes = 4, .decode_kv = 400, .samples = 4};
  srv_time t;
  srv_iteration_time(cost, &b, &t);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  g_free(set);
  g_free(max);
  return t.comm;
}

Test(serving, decode_allreduces_use_the_engines_kernel)
{
  cfg_cluster *c;
  cfg_workload *w;
  hw_cluster *hw = srv_h100(NULL, &c, &w);
  double oneshot = srv_ar_time(hw, SRV_AR_ONESHOT, 2, 4 * 4096 * 2);
  srv_h100_free(hw, c, w);
  double custom = srv_decode_comm("oneshot-twoshot", "16MB");
  double nccl = srv_decode_comm("nccl", "16MB");
  cr_assert(custom < nccl, "one-shot %g s, NCCL %g s", custom, nccl);
  /* what is left is the output layer's all-gather of the logits, NCCL's either way: once an
   * iteration, less than the 64 all-reduces */
  double rest = custom - 64 * oneshot;
  cr_assert(rest > 0 && rest < 64 * oneshot, "%g s beside 64 one-shots of %g s", rest, oneshot);
  /* a one-shot limit below 32 KiB: NCCL again */
  cr_assert_float_eq(srv_decode_comm("oneshot-twoshot", "16KiB"), nccl, 1e-15);
}

Test(serving, custom_allreduce_kernel_names_what_it_expects)
{
  const char *sets[] = {"serving.custom_allreduce.kernel=oneshot", NULL};
  char *why = th_load_error("dgx-h100", srv_workload(), sets);
  cr_assert_not_null(why);
  cr_assert(strstr(why, "serving.custom_allreduce.kernel") && strstr(why, "nccl | oneshot-twoshot"),
            "%s", why);
  g_free(why);
}
