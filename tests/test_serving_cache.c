/* dlsim serve's prefix cache (hits, LRU eviction, the host tier, conversations) and speculative
 * decoding (tokens per verify step, the verify pass' cost, memory), against hand-derived
 * answers, and their bad input. */
#include "helpers.h"
#include "serving/serving_internal.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static srv_result sc_run(const char *workload, const char *const *sets, bool trace)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  char *why = th_load_error("dgx-h100", workload, sets);
  cr_assert_null(why, "%s", why);
  cr_assert(th_load("dgx-h100", workload, sets, &c, &w));
  srv_result r;
  GError *err = NULL;
  srv_options o = {.trace = trace};
  cr_assert(srv_simulate(c, w, &o, &r, &err), "%s", err ? err->message : "");
  r.cluster = NULL;
  r.workload = NULL;
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return r;
}

static double sc_hand_time(const char *workload, const char *const *sets, const srv_batch *b)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", workload, sets, &c, &w));
  srv_cost *cost = NULL;
  GError *err = NULL;
  cr_assert(srv_cost_new(c, w, &cost, &err), "%s", err ? err->message : "");
  srv_time t;
  srv_iteration_time(cost, b, &t);
  srv_cost_free(cost);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return t.total;
}

/* Llama 2 7B in fp16 on one H100, chunked prefill, with the serving keys `tail` adds; written
 * once into `*path`. */
static const char *sc_workload(char **path, const char *name, const char *tail)
{
  if (!*path) {
    g_autofree char *text = g_strdup_printf("model: llama2-7b\nserving:\n  dtype: fp16\n"
                                            "  scheduler: chunked\n  max_tokens: 2048\n%s",
                                            tail);
    *path = th_write(name, text);
  }
  return *path;
}

/* Two requests ten seconds apart that share a 512-token system prompt, one output token each:
 * TTFT is one prefill iteration. */
static const char *sc_prefix_workload(void)
{
  static char *path = NULL;
  return sc_workload(&path, "prefix-serve.yaml",
                     "  prefix_cache: true\n"
                     "  requests: {rate: 0.1/s, arrival: uniform, count: 2, prompt_tokens: 528,\n"
                     "             output_tokens: 1, shared_prefix: 512, prefix_groups: 1}\n");
}

Test(serving_cache, a_full_prefix_hit_skips_the_prefix_prefill)
{
  srv_result r = sc_run(sc_prefix_workload(), NULL, true);
  cr_assert_eq(r.reqs->len, 2);
  const srv_request_record *a = &g_array_index(r.reqs, srv_request_record, 0);
  const srv_request_record *b = &g_array_index(r.reqs, srv_request_record, 1);
  /* the first computes all 528 tokens; the second finds the prefix's 32 blocks cached and
   * computes 16 tokens, whose attention still reads the 512 cached ones */
  srv_batch all = {.seqs = 1, .tokens = 528, .prefill_tokens = 528,
                   .prefill_attn = 528 * (0 + 529 / 2.0), .prefill_kv = 528, .samples = 1};
  srv_batch rest = {.seqs = 1, .tokens = 16, .prefill_tokens = 16,
                    .prefill_attn = 16 * (512 + 17 / 2.0), .prefill_kv = 528, .samples = 1};
  double t_all = sc_hand_time(sc_prefix_workload(), NULL, &all);
  double t_rest = sc_hand_time(sc_prefix_workload(), NULL, &rest);
  cr_assert_float_eq(a->first_token - a->arrival, t_all, 1e-12 * t_all);
  cr_assert_float_eq(b->first_token - b->arrival, t_rest, 1e-12 * t_rest);
  cr_assert(t_rest < 0.6 * t_all, "%g s vs %g s", t_rest, t_all); /* weights read either way */
  cr_assert_float_eq(r.prefix.gpu_hit_tokens, 512, 1e-9);
  cr_assert_float_eq(r.prefix.prompt_tokens, 2 * 528, 1e-9);
  cJSON *j = srv_result_json(&r);
  cJSON *pc = cJSON_GetObjectItem(j, "prefix_cache");
  cr_assert_float_eq(cJSON_GetObjectItem(pc, "hit_rate")->valuedouble, 512.0 / 1056, 1e-12);
  cr_assert_float_eq(cJSON_GetObjectItem(pc, "host_hit_rate")->valuedouble, 0, 1e-12);
  cr_assert_null(cJSON_GetObjectItem(j, "speculative"));
  cJSON_Delete(j);
  srv_result_clear(&r);
  const char *off[] = {"serving.prefix_cache=false", NULL};
  r = sc_run(sc_prefix_workload(), off, true);
  b = &g_array_index(r.reqs, srv_request_record, 1);
  cr_assert_float_eq(b->first_token - b->arrival, t_all, 1e-12 * t_all);
  cr_assert_not(r.prefix.on);
  srv_result_clear(&r);
}

/* ---- the cache alone: 4 blocks of 4 tokens, requests of 9-token prompts (2 full blocks) ---- */

typedef struct {
  cfg_serving cfg;
  srv_sim s;
  srv_replica rep;
  srv_lane lane;
} sc_cache;

static void sc_cache_init(sc_cache *c, int host_blocks)
{
  memset(c, 0, sizeof *c);
  c->cfg.kv_offload.bandwidth = 1e9;
  c->s.cfg = &c->cfg;
  c->s.cap.block_size = 4;
  c->s.cap.kv_per_token = 1000;
  c->rep.total_blocks = c->rep.free_blocks = 4;
  c->rep.cache = srv_prefix_new(host_blocks);
  c->s.replicas = &c->rep;
  c->s.nreplicas = 1;
}

static srv_request sc_req(int conv)
{
  return (srv_request){.conv = conv, .group = -1, .prompt = 9, .known = 9};
}

/* A request computes its prompt's two full blocks, which join the cache, and finishes. */
static void sc_serve(sc_cache *c, srv_request *r)
{
  srv_prefix_use(&c->s, &c->rep, r);
  int own = 2 - r->shared_blocks;
  srv_take_blocks(&c->s, &c->rep, own);
  r->blocks = own;
  r->ctx = 8;
  srv_prefix_publish(&c->s, &c->rep, r);
  cr_assert_eq(r->shared_blocks, 2);
  cr_assert_eq(r->blocks, 0);
  srv_release(&c->s, &c->rep, r);
}

/* A cache in which request A (conversation 0), then B (conversation 1) were served. */
static void sc_cache_served(sc_cache *c, int host_blocks)
{
  sc_cache_init(c, host_blocks);
  srv_request a = sc_req(0), b = sc_req(1);
  sc_serve(c, &a);
  sc_serve(c, &b);
}

/* How many of a conversation's blocks a new request finds (then lets go). */
static int sc_found(sc_cache *c, int conv)
{
  srv_request r = sc_req(conv);
  srv_prefix_use(&c->s, &c->rep, &r);
  int n = r.shared_blocks;
  srv_prefix_unuse(&c->s, &c->rep, &r);
  return n;
}

Test(serving_cache, lru_evicts_the_least_recently_used_deepest_block_first)
{
  sc_cache c;
  sc_cache_served(&c, 0);
  /* all 4 blocks cached and idle: free to take, in the order A1, A0, B1, B0 */
  cr_assert_eq(c.rep.free_blocks, 4);
  cr_assert_eq(srv_prefix_idle(&c.rep), 4);
  cr_assert_eq(sc_found(&c, 0), 2);
  cr_assert_eq(sc_found(&c, 1), 2); /* looking B up made it the most recent... */
  srv_take_blocks(&c.s, &c.rep, 1);
  cr_assert_eq(c.s.prefix.evicted, 1);
  cr_assert_eq(sc_found(&c, 0), 1); /* ...so A's deeper block went first */
  cr_assert_eq(sc_found(&c, 1), 2);
  /* a block in use is pinned: with B's two in use (and one block taken), one more evicts A0,
   * the only idle one, and nothing of B */
  srv_request user = sc_req(1);
  srv_prefix_use(&c.s, &c.rep, &user);
  cr_assert_eq(user.shared_blocks, 2);
  cr_assert_eq(c.rep.free_blocks, 1);
  srv_take_blocks(&c.s, &c.rep, 1);
  cr_assert_eq(c.s.prefix.evicted, 2);
  cr_assert_eq(c.rep.free_blocks, 0);
  cr_assert_eq(sc_found(&c, 0), 0);
  srv_release(&c.s, &c.rep, &user);
  cr_assert_eq(c.rep.free_blocks, 2);
  cr_assert_eq(sc_found(&c, 1), 2);
  srv_prefix_free(c.rep.cache);
}

Test(serving_cache, a_host_hit_costs_its_copy_over_the_host_link)
{
  sc_cache c;
  sc_cache_served(&c, 1);
  srv_take_blocks(&c.s, &c.rep, 2); /* evicts A1 then A0; the host keeps one: A0 */
  cr_assert_eq(c.s.prefix.evicted, 2);
  cr_assert_eq(c.s.prefix.offloaded, 2);
  c.rep.free_blocks += 2; /* what took them is done */
  srv_request again = sc_req(0);
  srv_prefix_use(&c.s, &c.rep, &again);
  cr_assert_eq(again.shared_blocks, 1);
  cr_assert_eq(again.host_blocks, 1);
  srv_prefix_admitted(&c.s, &c.lane, &again, true);
  /* one block of 4 tokens x 1000 bytes at 1 GB/s */
  cr_assert_float_eq(c.lane.pending_cost, 4e-6, 1e-18);
  cr_assert_float_eq(c.s.prefix.host_hit_tokens, 4, 1e-12);
  cr_assert_float_eq(c.s.prefix.gpu_hit_tokens, 0, 1e-12);
  srv_release(&c.s, &c.rep, &again);
  srv_prefix_free(c.rep.cache);
}

Test(serving_cache, a_block_coming_back_from_host_memory_is_not_pushed_out_by_the_room_it_needs)
{
  sc_cache c;
  sc_cache_served(&c, 1);
  srv_take_blocks(&c.s, &c.rep, 2); /* A1, A0 out; the host holds A0; B1, B0 idle */
  srv_request again = sc_req(0);
  /* A0's way back evicts B1 to the one-block host tier, which must not drop A0 for it */
  srv_prefix_use(&c.s, &c.rep, &again);
  cr_assert_eq(again.shared_blocks, 1);
  cr_assert_eq(again.host_blocks, 1);
  cr_assert_eq(c.s.prefix.evicted, 3);
  srv_release(&c.s, &c.rep, &again);
  cr_assert_eq(sc_found(&c, 0), 1);
  srv_prefix_free(c.rep.cache);
}

Test(serving_cache, a_turn_holds_the_conversation_and_arrives_after_the_answer)
{
  const char *sets[] = {"serving.requests.count=2", "serving.requests.turns=2",
                        "serving.requests.think_time=3s", "serving.requests.shared_prefix=0",
                        "serving.requests.prompt_tokens=100", "serving.requests.output_tokens=20",
                        NULL};
  srv_result r = sc_run(sc_prefix_workload(), sets, true);
  const srv_request_record *t0 = &g_array_index(r.reqs, srv_request_record, 0);
  const srv_request_record *t1 = &g_array_index(r.reqs, srv_request_record, 1);
  cr_assert_eq(t1->prompt, 100 + 20 + 100);
  cr_assert_float_eq(t1->arrival, t0->finish + 3, 1e-9);
  /* turn 0 leaves the KV of 119 tokens (the last answer token's is never computed): 7 full
   * blocks of 16, which turn 1 finds */
  cr_assert_float_eq(r.prefix.gpu_hit_tokens, 7 * 16, 1e-9);
  cr_assert_float_eq(r.prefix.prompt_tokens, 100 + 220, 1e-9);
  srv_result_clear(&r);
}

Test(serving_cache, a_disaggregated_prompt_lets_go_of_its_cached_blocks_once_moved)
{
  /* 600 blocks hold four prompts of 128 blocks: cached blocks a moved prompt kept would fill
   * the prefill replicas after a few requests and the rest would never start */
  const char *sets[] = {"serving.kv_blocks=600", "serving.requests.count=100",
                        "serving.requests.shared_prefix=1024", "serving.requests.prefix_groups=4",
                        NULL};
  srv_result r = sc_run("llama3-70b-disagg", sets, false);
  cr_assert_eq(r.requests, 100);
  cr_assert(r.prefix.gpu_hit_tokens > 0);
  srv_result_clear(&r);
}

/* ---- speculative decoding ---------------------------------------------------------------- */

Test(serving_cache, tokens_per_verify_step_by_hand)
{
  cfg_speculative sp = {.method = CFG_SPEC_MTP, .tokens = 4, .acceptance = 0.8};
  /* (1 - 0.8^5) / (1 - 0.8) = 0.67232 / 0.2 */
  cr_assert_float_eq(srv_spec_expected_tokens(&sp), 3.3616, 1e-12);
  sp.acceptance = 1;
  cr_assert_float_eq(srv_spec_expected_tokens(&sp), 5, 1e-12);
  sp.acceptance = 0;
  cr_assert_float_eq(srv_spec_expected_tokens(&sp), 1, 1e-12);
  cfg_speculative prof = {.method = CFG_SPEC_DRAFT, .tokens = 3, .nprofile = 3,
                          .profile = {0.9, 0.8, 0.7}};
  /* 1 + 0.9 + 0.9 x 0.8 + 0.9 x 0.8 x 0.7 */
  cr_assert_float_eq(srv_spec_expected_tokens(&prof), 3.124, 1e-12);
  /* the draws' mean over 10^6 steps: standard error about 0.0012 */
  g_autoptr(GRand) g = g_rand_new_with_seed(42);
  double sum = 0;
  int n = 1000000;
  for (int i = 0; i < n; i++)
    sum += srv_spec_draw(&prof, g);
  cr_assert(fabs(sum / n - 3.124) < 0.005, "mean %g", sum / n);
}

static const char *sc_spec_workload(void)
{
  static char *path = NULL;
  return sc_workload(&path, "spec-serve.yaml",
                     "  speculative: {method: mtp, tokens: 3, acceptance: 1}\n"
                     "  requests: {arrival: burst, count: 1, prompt_tokens: 100, output_tokens: 41}\n");
}

Test(serving_cache, a_verify_step_costs_its_k_plus_one_tokens_and_the_proposer)
{
  srv_result r = sc_run(sc_spec_workload(), NULL, true);
  /* acceptance 1: every step yields k + 1 = 4 tokens; 40 tokens after the first: 10 steps, the
   * j-th over a context of 100 + 4 j tokens (the last token and its 3 proposals) */
  cr_assert_eq(r.spec.steps, 10);
  double decode = 0;
  for (int j = 0; j < 10; j++) {
    double ctx = 100 + 4 * j, q = 4;
    srv_batch b = {.seqs = 1, .tokens = q, .decodes = 1, .decode_kv = ctx + q, .samples = 4,
                   .verifies = 1, .verify_kv = ctx + 1,
                   .verify_pairs = q * (ctx + (q + 1) / 2) - (ctx + q)};
    decode += sc_hand_time(sc_spec_workload(), NULL, &b);
  }
  const srv_request_record *a = &g_array_index(r.reqs, srv_request_record, 0);
  cr_assert_float_eq(a->finish - a->first_token, decode, 1e-12 * decode);
  cr_assert_float_eq(r.tpot.mean, decode / 40, 1e-12 * decode);
  cJSON *j = srv_result_json(&r);
  cJSON *sp = cJSON_GetObjectItem(j, "speculative");
  cr_assert_float_eq(cJSON_GetObjectItem(sp, "tokens_per_step")->valuedouble, 4, 1e-12);
  cr_assert_float_eq(cJSON_GetObjectItem(sp, "expected_tokens_per_step")->valuedouble, 4, 1e-12);
  cJSON_Delete(j);
  /* the verify pass with its proposer is dearer than a decode, cheaper than four */
  srv_batch one = {.seqs = 1, .tokens = 1, .decodes = 1, .decode_kv = 101, .samples = 1};
  const char *plain[] = {"serving.speculative.method=none", NULL};
  double t1 = sc_hand_time(sc_spec_workload(), plain, &one);
  cr_assert(decode / 10 > t1 && decode / 10 < 2 * t1, "%g vs %g", decode / 10, t1);
  srv_result_clear(&r);
}

Test(serving_cache, the_proposer_takes_memory_from_the_kv_cache)
{
  const char *plain[] = {"serving.speculative.method=none", NULL};
  const char *draft[] = {"serving.speculative.method=draft", "serving.speculative.draft=llama2-7b",
                         NULL};
  srv_result a = sc_run(sc_spec_workload(), plain, false);
  srv_result b = sc_run(sc_spec_workload(), draft, false);
  /* a draft as large as the model: twice the weights and twice the KV per token */
  cr_assert_float_eq(b.capacity.weights, 2 * a.capacity.weights, 1e-9 * a.capacity.weights);
  cr_assert_float_eq(b.capacity.kv_per_token, 2 * a.capacity.kv_per_token, 1e-9);
  double left = b.capacity.usable - b.capacity.weights - b.capacity.activations - b.capacity.other;
  cr_assert_eq(b.capacity.blocks, (int)floor(left / (b.capacity.kv_per_token * 16)));
  srv_result_clear(&a);
  srv_result_clear(&b);
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void sc_refused(const char *yaml_tail, const char *want)
{
  g_autofree char *text = g_strdup_printf("model: llama2-7b\nserving:\n%s", yaml_tail);
  g_autofree char *path = th_write("bad-serve.yaml", text);
  g_autofree char *args = g_strdup_printf("serve -c dgx-h100 -w %s", path);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 2, "%s", p.out);
  cr_assert(strstr(p.out, want), "wanted '%s' in: %s", want, p.out);
  th_proc_clear(&p);
}

#define SC_REQS "  requests: {rate: 1/s, prompt_tokens: 100, output_tokens: 10}\n"

Test(serving_cache, bad_input_is_named_with_its_position)
{
  sc_refused("  speculative: {method: mtp, tokens: 2, acceptance_profile: [0.9, 0.8, 0.7]}\n" SC_REQS,
             "bad-serve.yaml:3:61: serving.speculative.acceptance_profile: 3 entries, but tokens = 2");
  sc_refused("  speculative: {method: mtp, acceptance: 1.5}\n" SC_REQS,
             "bad-serve.yaml:3:42: serving.speculative.acceptance: expected a value from 0 to 1");
  sc_refused("  speculative: {method: mtp, acceptance_profile: [0.9, x]}\n" SC_REQS,
             "bad-serve.yaml:3:56: serving.speculative.acceptance_profile[1]");
  sc_refused("  speculative: {method: draft, acceptance: 0.7}\n" SC_REQS,
             "bad-serve.yaml:3:25: serving.speculative.method = draft needs serving.speculative.draft");
  sc_refused("  speculative: {method: draft, acceptance: 0.7, draft: {preset: llama2-7b, heads: 7}}\n" SC_REQS,
             "bad-serve.yaml:3:83: serving.speculative.draft.heads = 7 does not divide hidden = 4096");
  sc_refused("  tp: 8\n  speculative: {method: draft, acceptance: 0.7,\n"
             "                draft: {preset: llama2-7b, heads: 12, kv_heads: 12, hidden: 768}}\n" SC_REQS,
             "bad-serve.yaml:5:51: serving.speculative.draft: the draft model llama2-7b runs with "
             "serving.tp = 8, which must divide its heads (12)");
  sc_refused("  speculative: {method: draft, acceptance: 0.7, draft: nosuchmodel}\n" SC_REQS,
             "bad-serve.yaml:3:56: serving.speculative.draft: no model file 'nosuchmodel'");
  sc_refused("  requests: {rate: 1/s, prompt_tokens: 100, output_tokens: 10, shared_prefix: 50, "
             "prefix_tokens: 40}\n",
             "bad-serve.yaml:3:79: serving.requests.shared_prefix = 50 but "
             "serving.requests.prefix_tokens = 40");
  sc_refused("  requests: {concurrency: 4, prompt_tokens: 100, output_tokens: 10, turns: 3}\n",
             "bad-serve.yaml:3:76: serving.requests.turns = 3: conversations take open-loop");
  sc_refused("  scheduler: static\n  speculative: {method: mtp, acceptance: 0.5}\n" SC_REQS,
             "bad-serve.yaml:4:25: serving.speculative: static batches");
}
