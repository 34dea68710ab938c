/* The serving planner's candidates: which deployments a budget of GPUs allows, each as the
 * --set overlays that make the workload run it, described for people and as the command
 * lines of the engines that would run it. */
#include "planner/planner_internal.h"

#include <math.h>
#include <string.h>

static const int plan_srv_batches[] = {16, 32, 64, 128, 256, 512};
static const int plan_srv_chunks[] = {512, 1024, 2048, 4096, 8192, 16384};

bool plan_srv_pools_known(void)
{
  GString *keys = g_string_new("\n");
  cfg_schema_set_keys(keys);
  bool known = strstr(keys->str, "\nserving.prefill.tp\n") &&
               strstr(keys->str, "\nserving.decode.tp\n");
  g_string_free(keys, TRUE);
  return known;
}

/* The max_tokens values the space tries: chunk sizes, or whole-prompt budgets. */
static int plan_srv_tokens(const plan_srv_space *sp, int *out)
{
  if (sp->chunked) {
    memcpy(out, plan_srv_chunks, sizeof plan_srv_chunks);
    return (int)G_N_ELEMENTS(plan_srv_chunks);
  }
  int n = sp->fixed_tokens ? 1 : 3;
  for (int i = 0; i < n; i++)
    out[i] = sp->min_tokens << i;
  return n;
}

static void plan_srv_add(GArray *out, const plan_srv_candidate *c)
{
  plan_srv_candidate x = *c;
  x.index = out->len;
  x.gpus = 0;
  for (int i = 0; i < x.npools; i++)
    x.gpus += x.pool[i].tp * x.pool[i].pp * x.pool[i].ep * x.pool[i].replicas;
  x.rate = x.ttft_p90 = x.tpot_p90 = x.attainment = NAN;
  g_array_append_val(out, x);
}

/* Replicas innermost: neighbours differ in size only, so the estimate's search starts near. */
static void plan_srv_enumerate_aggregated(const plan_srv_space *sp, const int *tokens, int ntok,
                                          GArray *out)
{
  for (int tp = 1; tp <= sp->gpus; tp *= 2)
    for (int pp = 1; tp * pp <= sp->gpus; pp *= 2)
      for (size_t b = 0; b < G_N_ELEMENTS(plan_srv_batches); b++)
        for (int t = 0; t < ntok; t++)
          for (int r = 1; r * tp * pp <= sp->gpus; r++) {
            plan_srv_candidate c = {.npools = 1, .max_tokens = tokens[t]};
            c.pool[0] = (plan_srv_pool){tp, pp, 1, r, plan_srv_batches[b]};
            plan_srv_add(out, &c);
          }
}

/* Prefill pool first, the decode pool takes what is left of the budget. */
static void plan_srv_enumerate_pools(const plan_srv_space *sp, int tokens, GArray *out)
{
  for (int ptp = 1; ptp <= sp->gpus_per_node; ptp *= 2)
    for (int dtp = 1; dtp <= sp->gpus_per_node; dtp *= 2)
      for (size_t b = 0; b < G_N_ELEMENTS(plan_srv_batches); b++)
        for (int pr = 1; pr * ptp + dtp <= sp->gpus; pr++) {
          plan_srv_candidate c = {.npools = 2, .max_tokens = tokens};
          c.pool[0] = (plan_srv_pool){ptp, 1, 1, pr, 0};
          c.pool[1] = (plan_srv_pool){dtp, 1, 1, (sp->gpus - pr * ptp) / dtp, plan_srv_batches[b]};
          plan_srv_add(out, &c);
        }
}

void plan_srv_enumerate(const plan_srv_space *sp, GArray *out)
{
  int tokens[G_N_ELEMENTS(plan_srv_chunks)];
  int ntok = plan_srv_tokens(sp, tokens);
  plan_srv_enumerate_aggregated(sp, tokens, ntok, out);
  if (sp->pools)
    plan_srv_enumerate_pools(sp, sp->chunked ? 2048 : sp->min_tokens, out);
}

static void plan_srv_pool_sets(GPtrArray *a, const char *prefix, const plan_srv_pool *p)
{
  g_ptr_array_add(a, g_strdup_printf("serving%s.tp=%d", prefix, p->tp));
  g_ptr_array_add(a, g_strdup_printf("serving%s.pp=%d", prefix, p->pp));
  if (p->ep > 1)
    g_ptr_array_add(a, g_strdup_printf("serving%s.ep=%d", prefix, p->ep));
  g_ptr_array_add(a, g_strdup_printf("serving%s.replicas=%d", prefix, p->replicas));
  if (p->max_batch > 0)
    g_ptr_array_add(a, g_strdup_printf("serving%s.max_batch=%d", prefix, p->max_batch));
}

char **plan_srv_overlay(const plan_srv_candidate *c)
{
  GPtrArray *a = g_ptr_array_new();
  if (c->npools == 1) {
    plan_srv_pool_sets(a, "", &c->pool[0]);
  } else {
    plan_srv_pool_sets(a, ".prefill", &c->pool[0]);
    plan_srv_pool_sets(a, ".decode", &c->pool[1]);
  }
  g_ptr_array_add(a, g_strdup_printf("serving.max_tokens=%d", c->max_tokens));
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}

static void plan_srv_describe_pool(GString *s, const plan_srv_pool *p)
{
  g_string_append_printf(s, "TP %d x PP %d", p->tp, p->pp);
  if (p->ep > 1)
    g_string_append_printf(s, " x EP %d", p->ep);
  g_string_append_printf(s, " x %d", p->replicas);
}

char *plan_srv_describe(const plan_srv_candidate *c)
{
  GString *s = g_string_new(NULL);
  if (c->npools == 1) {
    plan_srv_describe_pool(s, &c->pool[0]);
    g_string_append_printf(s, ", batch %d, %d tokens", c->pool[0].max_batch, c->max_tokens);
  } else {
    g_string_append(s, "prefill ");
    plan_srv_describe_pool(s, &c->pool[0]);
    g_string_append(s, ", decode ");
    plan_srv_describe_pool(s, &c->pool[1]);
    g_string_append_printf(s, ", batch %d", c->pool[1].max_batch);
  }
  return g_string_free(s, FALSE);
}

const char *plan_srv_engine_name(plan_srv_engine e)
{
  static const char *const names[] = {"vLLM", "SGLang", "TensorRT-LLM"};
  return e < PLAN_SRV_NENGINES ? names[e] : "?";
}

/* One engine process of a pool: data parallelism as the engine's own flag where it has one
 * (vLLM --data-parallel-size, SGLang --dp), else one server per replica behind a router. A pool
 * of a disaggregated deployment (role prefill or decode) adds the engine's flag for it. */
static void plan_srv_vllm(GString *s, const plan_srv_pool *p, int max_tokens, const char *role,
                          const char *model)
{
  g_string_append_printf(s, "vllm serve %s --tensor-parallel-size %d --pipeline-parallel-size %d",
                         model, p->tp, p->pp);
  if (p->replicas > 1)
    g_string_append_printf(s, " --data-parallel-size %d", p->replicas);
  if (p->max_batch > 0)
    g_string_append_printf(s, " --max-num-seqs %d", p->max_batch);
  g_string_append_printf(s, " --max-num-batched-tokens %d", max_tokens);
  if (role)
    g_string_append(s, " --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'");
}

static void plan_srv_sglang(GString *s, const plan_srv_pool *p, int max_tokens, const char *role,
                            const char *model)
{
  g_string_append_printf(s, "python -m sglang.launch_server --model-path %s --tp %d", model, p->tp);
  if (p->pp > 1)
    g_string_append_printf(s, " --pp-size %d", p->pp);
  if (p->replicas > 1)
    g_string_append_printf(s, " --dp %d", p->replicas);
  if (p->max_batch > 0)
    g_string_append_printf(s, " --max-running-requests %d", p->max_batch);
  g_string_append_printf(s, " --chunked-prefill-size %d", max_tokens);
  if (role)
    g_string_append_printf(s, " --disaggregation-mode %s", role);
}

static void plan_srv_trtllm(GString *s, const plan_srv_pool *p, int max_tokens, const char *role,
                            const char *model)
{
  g_string_append_printf(s, "trtllm-serve %s --tp_size %d --pp_size %d", model, p->tp, p->pp);
  if (p->max_batch > 0)
    g_string_append_printf(s, " --max_batch_size %d", p->max_batch);
  g_string_append_printf(s, " --max_num_tokens %d", max_tokens);
  if (role)
    g_string_append_printf(s, "   (x%d %s servers of trtllm-serve disaggregated)", p->replicas,
                           strcmp(role, "prefill") == 0 ? "context" : "generation");
  else if (p->replicas > 1)
    g_string_append_printf(s, "   (x%d servers behind a router)", p->replicas);
}

static void plan_srv_engine_line(GString *s, const plan_srv_pool *p, int max_tokens,
                                 plan_srv_engine e, const char *role, const char *model)
{
  switch (e) {
  case PLAN_SRV_VLLM:
    plan_srv_vllm(s, p, max_tokens, role, model);
    break;
  case PLAN_SRV_SGLANG:
    plan_srv_sglang(s, p, max_tokens, role, model);
    break;
  default:
    plan_srv_trtllm(s, p, max_tokens, role, model);
    break;
  }
}

char *plan_srv_flags(const plan_srv_candidate *c, plan_srv_engine e, const char *model)
{
  GString *s = g_string_new(NULL);
  if (c->npools == 1) {
    plan_srv_engine_line(s, &c->pool[0], c->max_tokens, e, NULL, model);
    return g_string_free(s, FALSE);
  }
  static const char *const roles[] = {"prefill", "decode"};
  for (int i = 0; i < c->npools; i++) {
    g_string_append_printf(s, "%s%s:%s", i ? "\n" : "", roles[i], i ? "  " : " ");
    plan_srv_engine_line(s, &c->pool[i], c->max_tokens, e, roles[i], model);
  }
  return g_string_free(s, FALSE);
}
