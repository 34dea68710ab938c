/* Wide expert parallelism in serving (serving.ep > 1), as SGLang and vLLM deploy DeepSeek-V3:
 * attention runs data parallel (ep / tp ranks, each with its own batch and KV cache, tp GPUs
 * each), the routed experts are spread whole over all ep GPUs, and every MoE layer sends each
 * token to the GPUs of its top_k experts (dispatch) and back (combine). The bytes, the kernels
 * (NCCL all-to-all, DeepEP normal or low-latency) and the routing imbalance are dlsim moe's
 * (workloads/moe.c), the all-to-all's time the collectives model's over the group's GPUs. */
#include "serving/serving_internal.h"
#include "units/units.h"
#include "workloads/workloads.h"

#include <math.h>

int srv_attention_dp(const cfg_serving *s)
{
  return s->ep > 1 ? s->ep / s->tp : 1;
}

int srv_replica_gpus(const cfg_serving *s)
{
  return (s->ep > 1 ? s->ep : s->tp) * s->pp;
}

/* DeepEP's dispatch and combine are kernels of their own, timed as all-to-alls by a planner
 * whose runtime says so (coll_p2p_fills), apart from NCCL's, whose schedules it caches. */
static bool srv_ep_kernels_planner(srv_ep *e, const cfg_workload *w, GError **err)
{
  cfg_collectives deepep = w->collectives;
  deepep.a2a = CFG_A2A_DEEPEP;
  coll_algo algo;
  int proto;
  e->kernels_rt = coll_runtime_with_choices(&deepep, w->doc, &algo, &proto, err);
  if (!e->kernels_rt)
    return false;
  e->kernels = coll_planner_new(e->hw, algo, proto, true);
  coll_planner_set_runtime(e->kernels, e->kernels_rt);
  return true;
}

bool srv_ep_init(srv_ep *e, const cfg_workload *w, hw_cluster *hw, coll_planner *pl,
                 GError **err)
{
  const cfg_serving *s = &w->serving;
  *e = (srv_ep){.n = MAX(1, s->ep)};
  if (e->n <= 1)
    return true;
  int domain = hw_gpus_per_node(hw);
  e->nodes = (e->n + domain - 1) / domain;
  e->experts = (double)w->model.moe.experts / e->n;
  e->ranks = g_new(int, e->n);
  for (int i = 0; i < e->n; i++)
    e->ranks[i] = i;
  /* dispatch in fp8 when the GEMMs run in fp8 (DeepSeek's service), else in 16 bit; combine
   * in 16 bit (wl_moe_a2a keeps it at 2 bytes or more) */
  e->a2a = *w;
  e->a2a.training.dtype = s->dtype == CFG_FP8 ? CFG_FP8 : CFG_BF16;
  e->prefill = s->a2a_prefill;
  e->decode = s->a2a_decode;
  e->tbo = s->two_batch_overlap != 0;
  e->overlap = s->tbo_overlap;
  e->routing = &w->model.moe;
  e->hw = hw;
  e->planner = pl;
  if (!srv_ep_kernels_planner(e, w, err))
    return false;
  e->memo = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  double load = 0, dropped = 0;
  /* a bad histogram file is found here, before the first iteration */
  return wl_moe_load(e->routing, e->n, 1, &load, &dropped, err);
}

void srv_ep_clear(srv_ep *e)
{
  g_free(e->ranks);
  if (e->kernels)
    coll_planner_free(e->kernels);
  if (e->kernels_rt)
    coll_runtime_free(e->kernels_rt);
  if (e->memo)
    g_hash_table_destroy(e->memo);
  *e = (srv_ep){0};
}

static double *srv_ep_memo(srv_ep *e, gint64 key, bool *hit)
{
  double *v = g_hash_table_lookup(e->memo, &key);
  *hit = v != NULL;
  if (!v) {
    gint64 *k = g_new(gint64, 1);
    *k = key;
    v = g_new0(double, 1);
    g_hash_table_insert(e->memo, k, v);
  }
  return v;
}

double srv_ep_load(srv_ep *e, double tokens)
{
  bool hit;
  /* quarter tokens: a DP rank's batch over its attention TP GPUs or halved into micro-batches */
  double *v = srv_ep_memo(e, (gint64)1 << 60 | llround(tokens * 4), &hit);
  if (!hit) {
    double dropped = 0;
    if (!wl_moe_load(e->routing, e->n, MAX(tokens, 1e-9), v, &dropped, NULL))
      *v = 1; /* checked at srv_ep_init */
  }
  return *v;
}

/* the planner's cache key of the group (cost.c: 0 tensor parallel, 1 the pipeline's pair) */
enum { SRV_EP_GROUP = 2 };

static double srv_ep_alltoall(srv_ep *e, cfg_a2a kind, double bytes)
{
  if (bytes <= 0)
    return 0;
  bool nccl = kind == CFG_A2A_NCCL, hit;
  double *v = srv_ep_memo(e, (gint64)(nccl ? 2 : 3) << 60 | llround(bytes), &hit);
  if (!hit) {
    const coll_schedule *s =
        coll_planner_get(nccl ? e->planner : e->kernels, PROG_COLL_ALLTOALL, e->ranks, e->n,
                         SRV_EP_GROUP, bytes, NULL, NULL);
    *v = s ? s->time : 0;
  }
  return *v;
}

void srv_ep_a2a(srv_ep *e, bool prefill, double tokens, srv_ep_layer *out)
{
  out->kind = prefill ? e->prefill : e->decode;
  out->ep = e->n;
  out->nodes = e->nodes;
  out->tokens = tokens;
  out->load = srv_ep_load(e, tokens);
  e->a2a.collectives.a2a = out->kind;
  double model[4], link[4];
  wl_moe_a2a(&e->a2a, tokens, out->load, e->n, e->nodes, &hw_config(e->hw)->nccl, model, link);
  for (int i = 0; i < 2; i++) {
    out->bytes[i] = model[i];
    out->link[i] = link[i];
    out->time[i] = srv_ep_alltoall(e, out->kind, model[i]);
  }
}

/* What the overlap leaves exposed is real: the all-to-alls run slower beside compute than
 * alone (DeepEP's kernels poll for data on SMs and HBM the GEMMs want; SGLang's prefill and
 * decode breakdowns, LMSYS 2025-05-05), and the micro-batches' phases do not pair up evenly. */
double srv_tbo_time(int layers, double compute, double a2a, double overlap)
{
  if (layers <= 0)
    return 0;
  double shorter = MIN(compute, a2a);
  return 2 * layers * (MAX(compute, a2a) + (1 - overlap) * shorter) + shorter;
}

static void srv_ep_phase_of(srv_cost *cost, const srv_batch *b, double per_node,
                            srv_ep_phase *out)
{
  srv_time t;
  srv_iteration_time(cost, b, &t);
  out->iteration = t.total;
  out->comm = t.comm;
  out->tokens_per_s_node = t.total > 0 ? out->batch / t.total * per_node : 0;
  srv_ep_layer_of(cost, b, &out->layer);
}

void srv_ep_summary_of(srv_cost *cost, const cfg_cluster *c, const cfg_workload *w,
                       double prompt, double output, srv_ep_summary *out)
{
  const cfg_serving *s = &w->serving;
  *out = (srv_ep_summary){.on = s->ep > 1};
  if (!out->on)
    return;
  double per_node = (double)c->node.gpus_per_node / s->tp; /* DP ranks per node */
  int B = s->max_batch;
  double ctx = MAX(1.0, prompt + output / 2); /* the mean context over a request's decode */
  srv_batch d = {.seqs = B, .tokens = B, .decodes = B, .decode_kv = B * (ctx + 1), .samples = B};
  out->decode.batch = B;
  out->decode.kv = ctx;
  srv_ep_phase_of(cost, &d, per_node, &out->decode);
  double P = MAX(1.0, MIN(prompt, s->max_tokens)), T = s->max_tokens;
  int seqs = (int)ceil(T / P);
  srv_batch p = {.seqs = seqs, .tokens = T, .prefill_tokens = T, .prefill_attn = T * (P + 1) / 2,
                 .prefill_kv = T, .samples = seqs};
  out->prefill.batch = T;
  out->prefill.kv = P;
  srv_ep_phase_of(cost, &p, per_node, &out->prefill);
}

static void srv_ep_phase_text(FILE *out, const char *label, const char *what,
                              const srv_ep_phase *p)
{
  const srv_ep_layer *l = &p->layer;
  g_autofree char *it = units_format_seconds(p->iteration);
  g_autofree char *cm = units_format_seconds(p->comm);
  g_autofree char *db = units_format_bytes(l->bytes[0]);
  g_autofree char *cb = units_format_bytes(l->bytes[1]);
  g_autofree char *dt = units_format_seconds(l->time[0]);
  g_autofree char *ct = units_format_seconds(l->time[1]);
  fprintf(out, "    %-9s %s: %s per iteration (%s exposed communication), %.0f tokens/s per node\n",
          label, what, it, cm, p->tokens_per_s_node);
  fprintf(out,
          "              a MoE layer: %.0f tokens per GPU, the busiest GPU %.2f x the mean; %s "
          "dispatch %s in %s, combine %s in %s\n",
          l->tokens, l->load, cfg_a2a_name(l->kind), db, dt, cb, ct);
}

void srv_ep_text(FILE *out, const srv_result *r)
{
  const srv_ep_summary *e = &r->ep;
  if (!e->on)
    return;
  const cfg_workload *w = r->workload;
  const cfg_serving *s = &w->serving;
  fprintf(out, "  wide EP      %d experts over %d GPUs (%d each) on %d node%s%s; at full load "
          "per DP rank:\n",
          w->model.moe.experts, s->ep, w->model.moe.experts / s->ep, e->decode.layer.nodes,
          e->decode.layer.nodes == 1 ? "" : "s",
          s->two_batch_overlap ? ", two-batch overlap" : "");
  g_autofree char *dw = g_strdup_printf("%.0f sequences x %.0f tokens of KV", e->decode.batch,
                                        e->decode.kv);
  g_autofree char *pw = g_strdup_printf("%.0f tokens in prompts of %.0f", e->prefill.batch,
                                        e->prefill.kv);
  srv_ep_phase_text(out, "decode", dw, &e->decode);
  srv_ep_phase_text(out, "prefill", pw, &e->prefill);
}

static cJSON *srv_ep_phase_json(const srv_ep_phase *p)
{
  const srv_ep_layer *l = &p->layer;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "batch", p->batch);
  cJSON_AddNumberToObject(o, "kv_tokens", p->kv);
  cJSON_AddNumberToObject(o, "iteration_s", p->iteration);
  cJSON_AddNumberToObject(o, "exposed_comm_s", p->comm);
  cJSON_AddNumberToObject(o, "tokens_per_s_per_node", p->tokens_per_s_node);
  cJSON *m = cJSON_AddObjectToObject(o, "moe_layer");
  cJSON_AddStringToObject(m, "kernels", cfg_a2a_name(l->kind));
  cJSON_AddNumberToObject(m, "tokens_per_gpu", l->tokens);
  cJSON_AddNumberToObject(m, "load", l->load);
  cJSON_AddNumberToObject(m, "dispatch_bytes", l->bytes[0]);
  cJSON_AddNumberToObject(m, "combine_bytes", l->bytes[1]);
  cJSON_AddNumberToObject(m, "dispatch_s", l->time[0]);
  cJSON_AddNumberToObject(m, "combine_s", l->time[1]);
  cJSON_AddNumberToObject(m, "experts_s", l->experts);
  cJSON_AddNumberToObject(m, "compute_s", l->compute);
  return o;
}

cJSON *srv_ep_json(const srv_result *r)
{
  const cfg_serving *s = &r->workload->serving;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "ep", s->ep);
  cJSON_AddNumberToObject(o, "attention_dp", srv_attention_dp(s));
  cJSON_AddNumberToObject(o, "attention_tp", s->tp);
  cJSON_AddNumberToObject(o, "nodes", r->ep.decode.layer.nodes);
  cJSON_AddBoolToObject(o, "two_batch_overlap", s->two_batch_overlap != 0);
  cJSON_AddItemToObject(o, "decode", srv_ep_phase_json(&r->ep.decode));
  cJSON_AddItemToObject(o, "prefill", srv_ep_phase_json(&r->ep.prefill));
  return o;
}
