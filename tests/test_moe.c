/* Mixture of experts: routing to every expert is a dense MLP, no all-to-all without expert
 * parallelism, skew never helps, the all-to-all volume, the load model, and bad layouts. */
#include "engine/engine.h"
#include "helpers.h"
#include "run/run.h"
#include "workloads/workloads.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* Mixtral's shape shrunk to one DGX node: 8 experts, top-2. */
#define MOE_SMALL "node.count=1", "parallel.dp=8", "training.global_batch=8", "model.layers=4", \
                  "model.seq_len=2048", "training.micro_batch=1"

static double moe_kernel_flops(const wl_model *m, const char *prefix)
{
  double f = 0;
  for (guint i = 0; i < m->layers->len; i++) {
    const wl_layer *l = g_ptr_array_index(m->layers, i);
    for (int pass = 0; pass < 2; pass++) {
      const GArray *ks = pass ? l->bwd : l->fwd;
      for (guint k = 0; k < ks->len; k++) {
        const wl_kernel *x = &g_array_index(ks, wl_kernel, k);
        const char *dot = strchr(x->name, '.');
        if (dot && g_str_has_prefix(dot + 1, prefix) && x->kclass == CFG_KCLASS_GEMM)
          f += x->flops;
      }
    }
  }
  return f;
}

static wl_model *moe_model(const char *workload, const char *const *sets)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", workload, sets, &c, &w));
  wl_shard shard = wl_shard_of(w);
  wl_model *m = NULL;
  GError *err = NULL;
  cr_assert(wl_model_build(&w->model, &w->training, &shard, &m, &err), "%s", err ? err->message : "");
  cfg_workload_free(w);
  cfg_cluster_free(c);
  return m;
}

Test(moe, routing_to_every_expert_is_the_dense_mlp)
{
  /* 4 experts of width f/4, each token to all 4: the experts do the dense MLP's work */
  const char *moe[] = {"node.count=1", "parallel.dp=8", "model.kind=moe-transformer",
                       "model.moe.experts=4", "model.moe.top_k=4", "model.moe.expert_ffn_hidden=2048",
                       NULL};
  const char *dense[] = {"node.count=1", "parallel.dp=8", NULL};
  wl_model *a = moe_model("gpt3-1.3b-dp", moe), *b = moe_model("gpt3-1.3b-dp", dense);
  double experts = moe_kernel_flops(a, "experts_"), mlp = moe_kernel_flops(b, "mlp_");
  cr_assert(mlp > 0);
  cr_assert(fabs(experts / mlp - 1) < 1e-9, "experts %g vs dense MLP %g", experts, mlp);
  wl_model_free(a);
  wl_model_free(b);
}

/* Collectives of one dimension anywhere in a program (templates included). */
static int moe_count_dim(const prog_program *p, prog_dim dim)
{
  int n = 0;
  for (guint c = 0; c < p->classes->len; c++) {
    const prog_class *k = prog_class_at(p, (int)c);
    for (guint i = 0; i < k->ops->len; i++) {
      const prog_op *op = &g_array_index(k->ops, prog_op, i);
      n += op->kind == PROG_COMM && op->dim == dim;
    }
  }
  return n;
}

static prog_program *moe_program(const char *const *sets)
{
  prog_program *p = th_program("dgx-h100", "gpt3-1.3b-dp", sets);
  cr_assert(p, "the MoE workload loads and builds (reason on stderr)");
  return p;
}

Test(moe, no_all_to_all_without_expert_parallelism)
{
  const char *one[] = {MOE_SMALL, "model.kind=moe-transformer", "model.moe.experts=8",
                       "model.moe.top_k=2", "parallel.ep=1", NULL};
  const char *eight[] = {MOE_SMALL, "model.kind=moe-transformer", "model.moe.experts=8",
                         "model.moe.top_k=2", "parallel.ep=8", NULL};
  prog_program *a = moe_program(one), *b = moe_program(eight);
  cr_assert_eq(moe_count_dim(a, PROG_DIM_EP), 0);
  cr_assert(moe_count_dim(b, PROG_DIM_EP) >= 4, "dispatch and combine, forward and backward");
  prog_free(a);
  prog_free(b);
}

Test(moe, a_skewed_router_is_never_faster)
{
  const char *base[] = {MOE_SMALL, "model.kind=moe-transformer", "model.moe.experts=64",
                        "model.moe.top_k=4", "parallel.ep=8", NULL};
  eng_result r;
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result run;
  GError *err = NULL;
  cr_assert(sim_run_files("dgx-h100", "gpt3-1.3b-dp", (char *const *)base, &o, &run, &err));
  double uniform = run.eng.step_time;
  sim_result_clear(&run);
  const char *skews[] = {"model.moe.zipf_s=0.3", "model.moe.zipf_s=1", "model.moe.zipf_s=2"};
  double last = uniform;
  for (size_t i = 0; i < G_N_ELEMENTS(skews); i++) {
    const char *sets[] = {MOE_SMALL, "model.kind=moe-transformer", "model.moe.experts=64",
                          "model.moe.top_k=4", "parallel.ep=8", "model.moe.routing=zipf", skews[i], NULL};
    cr_assert(sim_run_files("dgx-h100", "gpt3-1.3b-dp", (char *const *)sets, &o, &run, &err),
              "%s", err ? err->message : "");
    r = run.eng;
    sim_result_clear(&run);
    cr_assert(r.step_time >= last, "%s: %g after %g (uniform %g)", skews[i], r.step_time, last, uniform);
    last = r.step_time;
  }
  cr_assert(last > 1.2 * uniform, "a strong skew costs: %g vs %g", last, uniform);
}

Test(moe, all_to_all_bytes_per_gpu)
{
  /* uniform routing, NCCL: every copy of a token to a remote expert crosses the network once,
   * tokens x top_k x hidden x dtype x (ep - 1) / ep per direction (the busiest rank's share
   * is that times the load factor) */
  const char *sets[] = {"node.count=2", "parallel.dp=16", "training.global_batch=16",
                        "training.micro_batch=1",
                        "model.kind=moe-transformer", "model.moe.experts=16", "model.moe.top_k=2",
                        "parallel.ep=8", "training.dtype=bf16", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", "gpt3-1.3b-dp", sets, &c, &w));
  hw_cluster *hw = hw_cluster_new(c);
  wl_moe_info m;
  GError *err = NULL;
  cr_assert(wl_moe_layer(w, hw, &m, &err), "%s", err ? err->message : "");
  double tokens = 2048, expect = tokens * 2 * 2048 * 2 * 7.0 / 8;
  cr_assert_float_eq(m.tokens, tokens, 1e-9);
  cr_assert(fabs(m.link_bytes[0] / m.load / expect - 1) < 1e-9, "%g vs %g", m.link_bytes[0] / m.load, expect);
  cr_assert(m.load > 1 && m.load < 1.05, "sampling imbalance of uniform routing: %g", m.load);
  hw_cluster_free(hw);
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

Test(moe, load_factor_of_known_distributions)
{
  cfg_moe m = {.experts = 8, .top_k = 1, .routing = CFG_ROUTING_ZIPF, .zipf_s = 50,
               .capacity_factor = 0, .drop_tokens = 0};
  double load, dropped;
  /* nearly every token to expert 0: the rank holding it does ep times the mean */
  cr_assert(wl_moe_load(&m, 8, 1e6, &load, &dropped, NULL));
  cr_assert(fabs(load - 8) < 0.01, "%g", load);
  cr_assert_float_eq(dropped, 0, 1e-12);
  /* capacity 1.25 with dropping: the hot expert keeps 1.25x the mean, the rest is dropped */
  m.capacity_factor = 1.25;
  m.drop_tokens = 1;
  cr_assert(wl_moe_load(&m, 8, 1e6, &load, &dropped, NULL));
  cr_assert(fabs(load - 1.25) < 1e-6, "%g", load);
  cr_assert(dropped > 0.8, "%g", dropped);
  /* uniform over one rank: no imbalance at all */
  cfg_moe u = {.experts = 8, .top_k = 2, .routing = CFG_ROUTING_UNIFORM};
  cr_assert(wl_moe_load(&u, 1, 1000, &load, &dropped, NULL));
  cr_assert_float_eq(load, 1, 1e-12);
}

Test(moe, routing_histogram_from_a_file)
{
  g_autofree char *hist = th_write("loads.csv", "expert,load\n0,4\n1,1\n2,1\n3,2\n");
  g_autofree char *bad = th_write("bad.csv", "4\n1\nx\n2\n");
  cfg_moe m = {.experts = 4, .top_k = 1, .routing = CFG_ROUTING_HISTOGRAM, .histogram = hist};
  double load, dropped;
  cr_assert(wl_moe_load(&m, 2, 1e9, &load, &dropped, NULL));
  /* ranks hold experts {0, 2} and {1, 3}: 5/8 and 3/8 of the copies */
  cr_assert(fabs(load - 1.25) < 1e-3, "%g", load);
  m.histogram = bad;
  GError *err = NULL;
  cr_assert_not(wl_moe_load(&m, 2, 1e9, &load, &dropped, &err));
  cr_assert(strstr(err->message, "bad.csv:3"), "%s", err->message);
  g_error_free(err);
}

Test(moe, expert_parallelism_shards_expert_states)
{
  const char *ep1[] = {"node.count=1", "parallel.dp=8", "training.global_batch=8",
                       "parallel.ep=1", "parallel.zero=0", NULL};
  const char *ep8[] = {"node.count=1", "parallel.dp=8", "training.global_batch=8",
                       "parallel.ep=8", "parallel.zero=0", NULL};
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result a, b;
  GError *err = NULL;
  cr_assert(sim_run_files("dgx-h100", "mixtral-8x7b-train", (char *const *)ep1, &o, &a, &err),
            "%s", err ? err->message : "");
  cr_assert(sim_run_files("dgx-h100", "mixtral-8x7b-train", (char *const *)ep8, &o, &b, &err),
            "%s", err ? err->message : "");
  double sa = mem_worst(&a.memory)->model_states, sb = mem_worst(&b.memory)->model_states;
  /* 45B of Mixtral's 46.7B parameters are experts: EP 8 keeps one expert per GPU */
  cr_assert(sb < 0.2 * sa, "EP 8 %g vs EP 1 %g bytes", sb, sa);
  cr_assert(b.eng.comm[PROG_DIM_EP] > 0 && a.eng.comm[PROG_DIM_EP] == 0);
  sim_result_clear(&a);
  sim_result_clear(&b);
}

Test(moe, bad_expert_layouts_exit_2)
{
  const struct {
    const char *args, *key;
  } cases[] = {
      {"--set parallel.ep=3", "parallel.ep"},
      {"--set parallel.ep=16 --set parallel.dp=16 --set node.count=2 --set training.global_batch=16",
       "model.moe.experts"},
      {"--set model.moe.top_k=9", "model.moe.top_k"},
      {"--set model.moe.routing=histogram", "model.moe.histogram"},
      {"--set model.moe.capacity_factor=0.5", "capacity_factor"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *args = g_strdup_printf("run -c dgx-h100 -w mixtral-8x7b-train --set node.count=1 %s",
                                            cases[i].args);
    th_proc p = th_dlsim(args);
    cr_assert_eq(p.status, 2, "%s -> %d: %s", args, p.status, p.out);
    cr_assert(strstr(p.out, cases[i].key), "%s: %s", args, p.out);
    th_proc_clear(&p);
  }
  th_proc p = th_dlsim("run -c dgx-h100 -w gpt3-1.3b-dp --set node.count=1 --set parallel.ep=2");
  cr_assert_eq(p.status, 2, "%s", p.out);
  cr_assert(strstr(p.out, "mixture-of-experts"), "%s", p.out);
  th_proc_clear(&p);
}

Test(moe, expert_parallel_volume_per_token_stays_two_rows)
{
  /* the HiDL tutorial's comparison: with EP a token sends [1, d] to its expert and gets [1, d]
   * back whatever the group size; a tensor-parallel MLP's all-reduce volume grows with it */
  double per_token[3];
  const int eps[] = {2, 4, 8}; /* inside one node: every remote copy crosses NVLink */
  for (int i = 0; i < 3; i++) {
    char nodes[32], dp[32], ep[32], gb[32];
    g_snprintf(nodes, sizeof nodes, "node.count=%d", MAX(eps[i] / 8, 1));
    g_snprintf(dp, sizeof dp, "parallel.dp=%d", MAX(eps[i], 8));
    g_snprintf(ep, sizeof ep, "parallel.ep=%d", eps[i]);
    g_snprintf(gb, sizeof gb, "training.global_batch=%d", MAX(eps[i], 8));
    const char *sets[] = {nodes, dp, ep, gb, "training.micro_batch=1", "model.kind=moe-transformer",
                          "model.moe.experts=16", "model.moe.top_k=1", "training.dtype=bf16", NULL};
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    cr_assert(th_load("dgx-h100", "gpt3-1.3b-dp", sets, &c, &w));
    hw_cluster *hw = hw_cluster_new(c);
    wl_moe_info m;
    cr_assert(wl_moe_layer(w, hw, &m, NULL));
    per_token[i] = (m.link_bytes[0] + m.link_bytes[1]) / m.load / m.tokens / (2048 * 2);
    hw_cluster_free(hw);
    cfg_workload_free(w);
    cfg_cluster_free(c);
  }
  /* 2 (n - 1) / n rows: 1, 1.5, 1.75: bounded by 2 */
  cr_assert(fabs(per_token[0] - 1.0) < 1e-9 && fabs(per_token[1] - 1.5) < 1e-9 &&
                fabs(per_token[2] - 1.75) < 1e-9,
            "%g %g %g", per_token[0], per_token[1], per_token[2]);
}
