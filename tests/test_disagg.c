/* dlsim serve, disaggregated (serving.prefill and serving.decode): TTFT of a lone request by
 * hand (queue + prefill + KV bytes / link bandwidth + latency), transfers sharing a link, the
 * flow model's max-min shares, the routers, short prompts prefilled on decode, the report's
 * parts adding up, and bad input named at its position. */
#include "helpers.h"
#include "serving/serving_internal.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* Llama 2 7B (32 layers, 32 KV heads of 128, fp16: 0.5 MiB of KV per token) on DGX H100
 * nodes; prompts of 1024 tokens at once, one iteration of prefill each. */
static const char *dis_workload(void)
{
  static char *path = NULL;
  if (!path)
    path = th_write("disagg.yaml",
                    "model: llama2-7b\n"
                    "serving:\n"
                    "  dtype: fp16\n"
                    "  scheduler: chunked\n"
                    "  max_batch: 64\n"
                    "  max_tokens: 2048\n"
                    "  max_model_len: 4096\n"
                    "  prefill: {tp: 1, replicas: 1}\n"
                    "  decode: {tp: 1, replicas: 1}\n"
                    "  requests: {arrival: burst, count: 1, prompt_tokens: 1024, output_tokens: 16}\n");
  return path;
}

#define DIS_KV_BYTES (1024 * 32 * 32 * 128 * 2 * 2.0)

typedef struct {
  cfg_cluster *c;
  cfg_workload *w;
  srv_result r;
} dis_run;

static dis_run dis_simulate(const char *workload, const char *const *sets)
{
  dis_run d = {0};
  char *why = th_load_error("dgx-h100", workload, sets);
  cr_assert_null(why, "%s", why);
  cr_assert(th_load("dgx-h100", workload, sets, &d.c, &d.w));
  GError *err = NULL;
  srv_options o = {.trace = true};
  cr_assert(srv_simulate(d.c, d.w, &o, &d.r, &err), "%s", err ? err->message : "");
  return d;
}

static void dis_clear(dis_run *d)
{
  srv_result_clear(&d->r);
  cfg_cluster_free(d->c);
  cfg_workload_free(d->w);
}

/* One iteration that prefills a whole prompt of `p` tokens on one GPU. */
static double dis_prefill_time(const cfg_cluster *c, const cfg_workload *w, double p)
{
  srv_cost *cost = NULL;
  cr_assert(srv_cost_new(c, w, &cost, NULL));
  srv_batch b = {.seqs = 1, .tokens = p, .prefill_tokens = p, .prefill_attn = p * (p + 1) / 2,
                 .prefill_kv = p, .samples = 1};
  srv_time t;
  srv_iteration_time(cost, &b, &t);
  srv_cost_free(cost);
  return t.total;
}

static const srv_request_record *dis_req(const dis_run *d, int i)
{
  return &g_array_index(d->r.reqs, srv_request_record, i);
}

static void dis_near(double got, double want, const char *what)
{
  cr_assert(fabs(got - want) <= 1e-9 * want + 1e-12, "%s: %.9g s, expected %.9g s", what, got,
            want);
}

Test(disagg, a_lone_request_over_nvlink_pays_bytes_over_bandwidth_plus_latency)
{
  dis_run d = dis_simulate(dis_workload(), NULL);
  /* prefill on GPU 0, decode on GPU 1 of the same node: NVLink out of 0 and into 1, each at
   * 450 GB/s x NCCL's intra-node link efficiency, 1 us end to end */
  double bw = 450e9 * d.c->nccl.link_efficiency[CFG_LINK_INTRA];
  double transfer = DIS_KV_BYTES / bw + 1e-6;
  double prefill = dis_prefill_time(d.c, d.w, 1024);
  const srv_request_record *q = dis_req(&d, 0);
  dis_near(q->transfer_end - q->transfer_start, transfer, "transfer");
  dis_near(d.r.ttft.mean, 0 + prefill + transfer, "TTFT = queue 0 + prefill + transfer");
  dis_near(d.r.disagg.time.mean, transfer, "kv_transfer_s.mean");
  cr_assert_eq(d.r.disagg.transfers, 1);
  cr_assert_eq(d.r.disagg.network, 0);
  cr_assert_float_eq(d.r.disagg.bytes_mean, DIS_KV_BYTES, 1);
  cr_assert_eq(d.r.pools[0].first_gpu, 0);
  cr_assert_eq(d.r.pools[1].first_gpu, 1);
  dis_clear(&d);
}

Test(disagg, a_lone_request_across_nodes_takes_the_nics)
{
  /* eight prefill replicas fill node 0; the decode replica is GPU 8, on node 1 and on the same
   * rail as GPU 0: NIC out, leaf switch (1 us), NIC in, at 400 Gb/s x the network efficiency */
  const char *sets[] = {"serving.prefill.replicas=8", NULL};
  dis_run d = dis_simulate(dis_workload(), sets);
  double bw = 400e9 / 8 * d.c->nccl.link_efficiency[CFG_LINK_NETWORK];
  double transfer = DIS_KV_BYTES / bw + 1e-6;
  double prefill = dis_prefill_time(d.c, d.w, 1024);
  const srv_request_record *q = dis_req(&d, 0);
  cr_assert_eq(q->replica, 0);
  dis_near(q->transfer_end - q->transfer_start, transfer, "transfer");
  dis_near(d.r.ttft.mean, prefill + transfer, "TTFT");
  cr_assert_eq(d.r.disagg.network, 1);
  cr_assert_eq(d.r.pools[1].first_gpu, 8);
  dis_clear(&d);
}

Test(disagg, two_transfers_into_one_gpu_each_take_twice_as_long)
{
  /* two prefill replicas (GPUs 0 and 1, round robin) finish together and both send to the
   * decode GPU 2: its NVLink ingress is shared, half each */
  const char *nvl[] = {"serving.prefill.replicas=2", "serving.requests.count=2", NULL};
  dis_run d = dis_simulate(dis_workload(), nvl);
  double bw = 450e9 * d.c->nccl.link_efficiency[CFG_LINK_INTRA];
  for (int i = 0; i < 2; i++) {
    const srv_request_record *q = dis_req(&d, i);
    cr_assert_eq(q->replica, i);
    dis_near(q->transfer_end - q->transfer_start, 2 * DIS_KV_BYTES / bw + 1e-6, "shared NVLink");
  }
  dis_clear(&d);
  /* across nodes: GPU 1 reaches rail 0 over NVLink (PXN) and shares GPU 0's NIC */
  const char *net[] = {"serving.prefill.replicas=8", "serving.requests.count=2", NULL};
  d = dis_simulate(dis_workload(), net);
  bw = 400e9 / 8 * d.c->nccl.link_efficiency[CFG_LINK_NETWORK];
  for (int i = 0; i < 2; i++) {
    const srv_request_record *q = dis_req(&d, i);
    double lat = i == 0 ? 1e-6 : 2e-6; /* GPU 1 adds its NVLink hop to GPU 0: 0.5 us each way */
    dis_near(q->transfer_end - q->transfer_start, 2 * DIS_KV_BYTES / bw + lat, "shared NIC");
  }
  dis_clear(&d);
}

Test(disagg, flows_share_a_link_max_min_and_reshare_when_one_starts)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", dis_workload(), NULL, &c, &w));
  hw_cluster *hw = hw_cluster_new(c);
  srv_flows *f = srv_flows_new(hw);
  double bw = 450e9 * c->nccl.link_efficiency[CFG_LINK_INTRA], bytes = 1e9, T = bytes / bw;
  GArray *ended = g_array_new(FALSE, FALSE, sizeof(int));
  /* A: GPU 0 -> 2 alone; at T/2, B: GPU 1 -> 2 joins on GPU 2's ingress; C: GPU 3 -> 4 shares
   * nothing and ends at T. A has half its bytes left at half the rate: it ends at 1.5 T; B has
   * moved half of its bytes by then, and the rest at the full rate takes T/2 more */
  srv_flows_start(f, 0, 0, 2, bytes, 0);
  srv_flows_start(f, 0, 3, 4, bytes, 2);
  dis_near(srv_flows_next(f), T, "A or C alone");
  srv_flows_start(f, T / 2, 1, 2, bytes, 1);
  dis_near(srv_flows_next(f), T, "C still at full rate");
  srv_flows_advance(f, T, ended);
  cr_assert_eq(ended->len, 1);
  cr_assert_eq(g_array_index(ended, int, 0), 2);
  dis_near(srv_flows_next(f), 1.5 * T, "A at half the rate from T/2");
  srv_flows_advance(f, 1.5 * T, ended);
  cr_assert_eq(g_array_index(ended, int, 1), 0);
  dis_near(srv_flows_next(f), 2 * T, "B alone after A");
  srv_flows_advance(f, 2 * T, ended);
  cr_assert_eq(ended->len, 3);
  cr_assert_eq(srv_flows_active(f), 0);
  g_array_free(ended, TRUE);
  srv_flows_free(f);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* Four requests replayed onto two decode replicas: r0 (long prompt) and r1 decode for seconds,
 * r2 finishes at once (two tokens), r3 comes after it. */
static const char *dis_router_trace(void)
{
  static char *path = NULL;
  if (!path)
    path = th_write("routers.csv", "arrival_s,prompt_tokens,output_tokens\n"
                                   "0,2000,500\n0.5,100,500\n1.0,100,2\n1.5,100,500\n");
  return path;
}

static void dis_check_router(const char *router, const int want[4])
{
  g_autofree char *trace = g_strdup_printf("serving.requests.trace=%s", dis_router_trace());
  g_autofree char *r = g_strdup_printf("serving.decode.router=%s", router);
  const char *sets[] = {"serving.decode.replicas=2", trace, r, NULL};
  dis_run d = dis_simulate(dis_workload(), sets);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(dis_req(&d, i)->decode_replica, want[i], "%s: request %d on decode %d, not %d",
                 router, i, dis_req(&d, i)->decode_replica, want[i]);
  dis_clear(&d);
}

Test(disagg, routers_pick_as_documented)
{
  /* round robin alternates; least loaded counts outstanding requests (r2 is done by r3: a tie,
   * the lowest index); kv-aware takes the most free KV blocks (r0's 2000 tokens weigh) */
  dis_check_router("round-robin", (const int[]){0, 1, 0, 1});
  dis_check_router("least-loaded", (const int[]){0, 1, 0, 0});
  dis_check_router("kv-aware", (const int[]){0, 1, 1, 1});
}

Test(disagg, short_prompts_go_straight_to_decode)
{
  g_autofree char *trace = g_strdup_printf("serving.requests.trace=%s", dis_router_trace());
  const char *sets[] = {trace, "serving.disagg.direct_decode_below=1000", NULL};
  dis_run d = dis_simulate(dis_workload(), sets);
  cr_assert_eq(d.r.disagg.direct, 3);
  cr_assert_eq(d.r.disagg.transfers, 1);
  cr_assert(!isnan(dis_req(&d, 0)->transfer_end));
  for (int i = 1; i < 4; i++) {
    cr_assert(isnan(dis_req(&d, i)->transfer_start), "request %d moved", i);
    cr_assert_eq(dis_req(&d, i)->decode_replica, 0);
  }
  cr_assert_eq(d.r.pools[0].iterations, 1, "the prefill pool ran r0 only");
  dis_clear(&d);
}

Test(disagg, ttft_parts_add_up_under_load)
{
  const char *sets[] = {"serving.requests.arrival=poisson", "serving.requests.rate=30/s",
                        "serving.requests.count=200", "serving.requests.output_tokens=128",
                        "serving.decode.max_batch=8",
                        "serving.request_overhead=10ms", NULL};
  dis_run d = dis_simulate(dis_workload(), sets);
  const srv_disagg_result *p = &d.r.disagg;
  double sum = p->queue + p->prefill + p->decode_wait + p->transfer + p->overhead;
  cr_assert(fabs(sum - d.r.ttft.mean) < 1e-9 * d.r.ttft.mean, "%g vs %g", sum, d.r.ttft.mean);
  cr_assert(p->decode_wait > 0, "eight decode slots for 30 requests/s: some wait");
  cr_assert(d.r.pools[1].utilization > d.r.pools[0].utilization);
  cr_assert(d.r.pools[1].utilization <= 1.0 + 1e-9);
  dis_clear(&d);
}

Test(disagg, json_has_the_transfer_and_pool_keys)
{
  g_autofree char *args = g_strdup_printf("serve -c dgx-h100 -w %s --json", dis_workload());
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 0, "%s", p.out);
  const char *keys[] = {"\"kv_transfer_s\"", "\"p99\"", "\"ttft_parts\"", "\"transfer_s\"",
                        "\"pools\"", "\"prefill\"", "\"decode\"", "\"utilization\""};
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
    cr_assert(strstr(p.out, keys[i]), "no %s in %s", keys[i], p.out);
  th_proc_clear(&p);
}

Test(disagg, the_trace_shows_both_pools_and_the_transfer)
{
  g_autofree char *path = th_write("disagg-trace.json", "");
  g_autofree char *args = g_strdup_printf(
      "serve -c dgx-h100 -w %s --set serving.decode.pp=2 --trace %s", dis_workload(), path);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 0, "%s", p.out);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL));
  const char *want[] = {"\"prefill 0\"", "\"decode 0\"", "iterations (lane 1)", "\"KV transfer\"",
                        "\"decode wait\"" /* zero long: absent */};
  for (size_t i = 0; i < 4; i++)
    cr_assert(strstr(text, want[i]), "no %s in the trace", want[i]);
  cr_assert_null(strstr(text, want[4]), "a lone request waits for nothing");
  th_proc_clear(&p);
}

static void dis_bad(const char *const *sets, const char *yaml, const char *want)
{
  const char *w = yaml ? th_write("bad-disagg.yaml", yaml) : dis_workload();
  char *why = th_load_error("dgx-h100", w, sets);
  cr_assert(why && strstr(why, want), "%s\nexpected: %s", why, want);
  g_free(why);
}

Test(disagg, bad_pools_are_named_at_their_position)
{
  const char *tp3[] = {"serving.decode.tp=3", NULL};
  dis_bad(tp3, NULL, "--set serving.decode.tp: serving.decode.tp = 3 does not divide model.heads = 32");
  dis_bad(NULL,
          "model: llama2-7b\nserving:\n  prefill: {tp: 3}\n  decode: {tp: 1}\n"
          "  requests: {arrival: burst, count: 1, prompt_tokens: 10, output_tokens: 10}\n",
          "bad-disagg.yaml:3:17: serving.prefill.tp = 3 does not divide model.heads = 32");
  dis_bad(NULL,
          "model: llama2-7b\nserving:\n  decode: {tp: 2}\n"
          "  requests: {arrival: burst, count: 1, prompt_tokens: 10, output_tokens: 10}\n",
          "bad-disagg.yaml:3:11: serving.decode without serving.prefill");
  const char *big[] = {"serving.prefill.replicas=8", "serving.prefill.tp=4", "serving.decode.tp=8", NULL};
  dis_bad(big, NULL, "prefill 8 x 4 x 1 + decode 1 x 8 x 1 (replicas x tp x pp) = 40 GPUs, but the "
                     "cluster has 32");
  const char *stat[] = {"serving.scheduler=static", NULL};
  dis_bad(stat, NULL, "disaggregated pools run continuous or chunked batching");
  g_autofree char *args = g_strdup_printf("serve -c dgx-h100 -w %s --set serving.prefill.tp=3",
                                          dis_workload());
  /* a prompt that one prefill replica cannot hold (7B on one H100: about 120k tokens of KV) */
  g_autofree char *huge = g_strdup_printf(
      "serve -c dgx-h100 -w %s --set serving.requests.prompt_tokens=200000 "
      "--set serving.max_model_len=300000", dis_workload());
  th_proc q = th_dlsim(huge);
  cr_assert_eq(q.status, 2, "%s", q.out);
  cr_assert(strstr(q.out, "but a prefill replica holds"), "%s", q.out);
  th_proc_clear(&q);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 2, "%s", p.out);
  th_proc_clear(&p);
}
