/* Engines on whole training steps: DES and analytic agree without contention, the breakdown
 * adds up, gradient accumulation is folded, memory follows the program. */
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "helpers.h"
#include "run/run.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static double step_of(const char *cluster, const char *workload, const char *const *sets,
                      eng_kind kind, eng_result *copy)
{
  sim_options o = sim_options_for(kind);
  sim_result run;
  GError *err = NULL;
  bool ok = sim_run_files(cluster, workload, (char *const *)sets, &o, &run, &err);
  cr_assert(ok, "%s", err ? err->message : "");
  double t = run.eng.step_time;
  if (copy) {
    *copy = run.eng;
    copy->class_peak = NULL;
    copy->events = copy->mem_samples = NULL;
  }
  sim_result_clear(&run);
  return t;
}

Test(engine, des_and_analytic_agree_on_data_parallel_steps)
{
  const struct {
    const char *cluster, *workload;
    const char *sets[4];
  } cases[] = {
      {"v100-edr", "resnet50-horovod", {NULL}},
      {"v100-edr", "resnet50-horovod", {"node.count=16", "training.global_batch=1024", NULL}},
      {"dgx-a100", "resnet50-horovod", {"training.dtype=bf16", "training.global_batch=2048", NULL}},
      {"dgx-h100", "gpt3-1.3b-dp", {"node.count=2", NULL}},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    double a = step_of(cases[i].cluster, cases[i].workload, cases[i].sets, ENG_ANALYTIC, NULL);
    double d = step_of(cases[i].cluster, cases[i].workload, cases[i].sets, ENG_DES, NULL);
    cr_assert(fabs(d - a) <= 0.01 * a, "case %zu: des %.9g vs analytic %.9g", i, d, a);
  }
}

Test(engine, breakdown_adds_up_to_the_step)
{
  eng_result r;
  double t = step_of("v100-edr", "resnet50-horovod", NULL, ENG_DES, &r);
  cr_assert_float_eq(r.compute + r.exposed_comm + r.bubble + r.other, t, t * 1e-9);
  cr_assert(r.comm[PROG_DIM_DP] > r.exposed[PROG_DIM_DP], "most all-reduce time overlaps backward");
  cr_assert(r.exposed_comm > 0);
}

Test(engine, accumulation_costs_whole_micro_steps)
{
  /* 1 GPU: 4 micro-batches of 64 take 4x one micro-batch of 64, minus 3 optimizer steps */
  const char *one[] = {"node.count=1", "training.global_batch=64", NULL};
  const char *four[] = {"node.count=1", "training.global_batch=256", NULL};
  double t1 = step_of("v100-edr", "resnet50-horovod", one, ENG_ANALYTIC, NULL);
  double t4 = step_of("v100-edr", "resnet50-horovod", four, ENG_ANALYTIC, NULL);
  cr_assert(t4 > 3.9 * t1 && t4 < 4.0 * t1, "t1 %g t4 %g", t1, t4);
  double d4 = step_of("v100-edr", "resnet50-horovod", four, ENG_DES, NULL);
  cr_assert_float_eq(d4, t4, t4 * 1e-9);
}

Test(engine, more_bandwidth_never_hurts)
{
  const char *slow[] = {"node.count=8", "training.global_batch=512", "network.nic_bandwidth=25Gb/s", NULL};
  const char *fast[] = {"node.count=8", "training.global_batch=512", "network.nic_bandwidth=200Gb/s", NULL};
  double s = step_of("v100-edr", "resnet50-horovod", slow, ENG_DES, NULL);
  double f = step_of("v100-edr", "resnet50-horovod", fast, ENG_DES, NULL);
  cr_assert(f < s, "fast %g slow %g", f, s);
}

Test(engine, timeline_peak_matches_closed_form)
{
  sim_options o = {.engine = ENG_DES, .trace = true};
  sim_result run;
  GError *err = NULL;
  cr_assert(sim_run_files("v100-edr", "resnet50-horovod", NULL, &o, &run, &err));
  double closed = mem_worst(&run.memory)->total;
  cr_assert_float_eq(run.eng.peak_memory, closed, closed * 1e-9);
  cr_assert(run.eng.events && run.eng.events->len > 100);
  cr_assert(run.eng.mem_samples && run.eng.mem_samples->len >= 4);
  sim_result_clear(&run);
}

/* The engines match collectives by group id, so a rank list registered twice must give the
 * same group, in any order of registration, and a different list (or order) another: for
 * single ranks and pairs (indexed by their first rank) as for larger groups (hashed). */
Test(engine, groups_are_shared_by_their_rank_lists)
{
  prog_program *p = prog_new(4);
  int a[2] = {0, 1}, b[2] = {1, 0}, c[2] = {0, 2}, one[1] = {0}, four[4] = {0, 1, 2, 3};
  int ga = prog_group_add(p, a, 2), gone = prog_group_add(p, one, 1);
  int gb = prog_group_add(p, b, 2), gc = prog_group_add(p, c, 2);
  int gfour = prog_group_add(p, four, 4);
  cr_assert_eq(prog_group_add(p, a, 2), ga);
  cr_assert_eq(prog_group_add(p, c, 2), gc);
  cr_assert_eq(prog_group_add(p, one, 1), gone);
  cr_assert_eq(prog_group_add(p, four, 4), gfour);
  int ids[] = {ga, gb, gc, gone, gfour};
  for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
    for (size_t j = i + 1; j < G_N_ELEMENTS(ids); j++)
      cr_assert_neq(ids[i], ids[j], "groups %zu and %zu share id %d", i, j, ids[i]);
  int gp = prog_group_add_private(p, a, 2);
  cr_assert_neq(gp, ga);
  cr_assert_eq(prog_group_add(p, a, 2), ga, "a private group is never found");
  cr_assert_eq(p->groups->len, 6u);
  prog_free(p);
}

/* Op names are interned through a memo keyed by the caller's address: a buffer reused for
 * another name must still give that name, and one name from any address the same copy. */
Test(engine, op_names_keep_their_text_when_a_buffer_is_reused)
{
  prog_program *p = prog_new(1);
  int cls = prog_class_add(p, "all");
  char buf[32];
  g_strlcpy(buf, "layer 1 forward", sizeof buf);
  uint32_t a = prog_mem(p, cls, buf, PROG_MEM_ACTIVATIONS, 1, NULL, 0);
  g_strlcpy(buf, "layer 2 forward", sizeof buf);
  uint32_t b = prog_mem(p, cls, buf, PROG_MEM_ACTIVATIONS, 1, NULL, 0);
  uint32_t c = prog_mem(p, cls, "layer 1 forward", PROG_MEM_ACTIVATIONS, 1, NULL, 0);
  uint32_t d = prog_mem(p, cls, prog_op_at(p, cls, b)->name, PROG_MEM_ACTIVATIONS, 1, NULL, 0);
  cr_assert_str_eq(prog_op_at(p, cls, a)->name, "layer 1 forward");
  cr_assert_str_eq(prog_op_at(p, cls, b)->name, "layer 2 forward");
  cr_assert_eq(prog_op_at(p, cls, c)->name, prog_op_at(p, cls, a)->name);
  cr_assert_eq(prog_op_at(p, cls, d)->name, prog_op_at(p, cls, b)->name);
  prog_free(p);
}

/* Four ranks in two classes ({0, 1} and {2, 3}, whose representatives are 0 and 2), each a
 * compute op then an all-reduce in pairs: {0, 2} and {1, 3}, which the representatives cover,
 * or {0, 3} and {1, 2}, where rank 0's group needs rank 3, no representative: the analytic
 * engine then follows every rank, and the step is the same. */
static prog_program *paired_classes(bool crossed)
{
  prog_program *p = prog_new(4);
  int a = prog_class_add(p, "a"), b = prog_class_add(p, "b");
  int f = prog_family_add(p, "pairs", PROG_DIM_DP);
  int x[2] = {0, crossed ? 3 : 2}, y[2] = {1, crossed ? 2 : 3};
  int gx = prog_group_add(p, x, 2), gy = prog_group_add(p, y, 2);
  for (int k = 0; k < 2; k++) {
    prog_family_set(p, f, x[k], gx);
    prog_family_set(p, f, y[k], gy);
  }
  for (int r = 0; r < 4; r++)
    prog_rank_set_class(p, r, r < 2 ? a : b);
  prog_finalize(p);
  for (int cls = a; cls <= b; cls++) {
    uint32_t k = prog_compute(p, cls, "work", CFG_KCLASS_GEMM, CFG_BF16, 1e12 * (1 + cls), 1e6,
                              NULL, 0);
    prog_comm(p, cls, PROG_STREAM_DP, "sum", PROG_COLL_ALLREDUCE, f, 1e8, &k, 1);
  }
  return p;
}

Test(engine, analytic_follows_every_rank_where_representatives_do_not_suffice)
{
  cfg_cluster *c = NULL;
  const char *const sets[] = {"node.count=4", NULL};
  cr_assert(th_load("v100-edr", NULL, sets, &c, NULL));
  hw_cluster *hw = hw_cluster_new(c);
  double step[2];
  for (int crossed = 0; crossed < 2; crossed++) {
    prog_program *p = paired_classes(crossed);
    eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE};
    eng_result r;
    GError *err = NULL;
    cr_assert(eng_run(p, hw, &o, &r, &err), "%s", err ? err->message : "");
    step[crossed] = r.step_time;
    eng_result_clear(&r);
    prog_free(p);
  }
  /* the slower class's compute, then the all-reduce it waits on */
  cr_assert_gt(step[0], 0);
  cr_assert_eq(step[0], step[1], "%.17g != %.17g", step[0], step[1]);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

/* Two ranks that issue their two collectives in opposite orders: a program that cannot finish.
 * That is the simulation failing (exit 1), not bad input (exit 2), whichever engine finds it. */
static prog_program *crossed_collectives(void)
{
  prog_program *p = prog_new(2);
  int first = prog_class_add(p, "a then b"), second = prog_class_add(p, "b then a");
  int fa = prog_family_add(p, "a", PROG_DIM_DP), fb = prog_family_add(p, "b", PROG_DIM_DP);
  /* two communicators over the same two GPUs (as NCCL has one per process group) */
  int up[2] = {0, 1}, down[2] = {1, 0};
  int ga = prog_group_add(p, up, 2), gb = prog_group_add(p, down, 2);
  for (int r = 0; r < 2; r++) {
    prog_family_set(p, fa, r, ga);
    prog_family_set(p, fb, r, gb);
  }
  prog_rank_set_class(p, 0, first);
  prog_rank_set_class(p, 1, second);
  prog_finalize(p);
  prog_comm(p, first, PROG_STREAM_DP, "a", PROG_COLL_ALLREDUCE, fa, 1e6, NULL, 0);
  prog_comm(p, first, PROG_STREAM_DP, "b", PROG_COLL_ALLREDUCE, fb, 1e6, NULL, 0);
  prog_comm(p, second, PROG_STREAM_DP, "b", PROG_COLL_ALLREDUCE, fb, 1e6, NULL, 0);
  prog_comm(p, second, PROG_STREAM_DP, "a", PROG_COLL_ALLREDUCE, fa, 1e6, NULL, 0);
  return p;
}

Test(engine, a_deadlock_is_a_runtime_failure_on_both_engines)
{
  cfg_cluster *c = NULL;
  cr_assert(th_load("v100-edr", NULL, NULL, &c, NULL));
  hw_cluster *hw = hw_cluster_new(c);
  prog_program *p = crossed_collectives();
  const eng_kind kinds[] = {ENG_ANALYTIC, ENG_DES};
  for (size_t i = 0; i < G_N_ELEMENTS(kinds); i++) {
    eng_options o = {.kind = kinds[i], .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE};
    eng_result r;
    GError *err = NULL;
    cr_assert_not(eng_run(p, hw, &o, &r, &err), "%s finished", eng_kind_name(kinds[i]));
    cr_assert(err && strstr(err->message, "deadlock"), "%s", err ? err->message : "no error");
    cr_assert(g_error_matches(err, CFG_ERROR, CFG_ERROR_RUNTIME), "%s: code %d",
              eng_kind_name(kinds[i]), err->code);
    g_error_free(err);
    eng_result_clear(&r);
  }
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

/* Two collectives of one group in flight at once, on two streams of each rank (two families
 * sharing a communicator): the analytic engine keeps the second apart from the first until
 * both ranks reach it, and each takes the time of one alone. */
Test(engine, a_group_with_two_collectives_in_flight_completes_both)
{
  cfg_cluster *c = NULL;
  cr_assert(th_load("v100-edr", NULL, NULL, &c, NULL));
  hw_cluster *hw = hw_cluster_new(c);
  prog_program *p = prog_new(2);
  int cls[2] = {prog_class_add(p, "rank 0"), prog_class_add(p, "rank 1")};
  int fa = prog_family_add(p, "a", PROG_DIM_DP), fb = prog_family_add(p, "b", PROG_DIM_TP);
  int both[2] = {0, 1};
  int g = prog_group_add(p, both, 2);
  for (int r = 0; r < 2; r++) {
    prog_family_set(p, fa, r, g);
    prog_family_set(p, fb, r, g);
    prog_rank_set_class(p, r, cls[r]);
  }
  prog_finalize(p);
  for (int r = 0; r < 2; r++) {
    prog_comm(p, cls[r], PROG_STREAM_DP, "a", PROG_COLL_ALLREDUCE, fa, 1e6, NULL, 0);
    prog_comm(p, cls[r], PROG_STREAM_TP, "b", PROG_COLL_ALLREDUCE, fb, 1e6, NULL, 0);
  }
  eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE};
  eng_evaluator *ev = eng_evaluator_new(p, hw, &o);
  double one;
  cr_assert(eng_evaluate_coll(ev, PROG_COLL_ALLREDUCE, fa, 1e6, 0, &one, NULL));
  eng_result r;
  GError *err = NULL;
  cr_assert(eng_run(p, hw, &o, &r, &err), "%s", err ? err->message : "");
  cr_assert(one > 0 && r.step_time == one, "step %.17g, one all-reduce %.17g", r.step_time, one);
  eng_result_clear(&r);
  eng_evaluator_free(ev);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

Test(engine, folding_and_tracing_exclude_each_other)
{
  sim_options o = {.engine = ENG_ANALYTIC, .trace = true, .fold = true};
  sim_result run;
  GError *err = NULL;
  cr_assert_not(sim_run_files("v100-edr", "resnet50-horovod", NULL, &o, &run, &err));
  cr_assert(g_error_matches(err, CFG_ERROR, CFG_ERROR_INPUT) && strstr(err->message, "fold"));
  g_error_free(err);
  sim_result_clear(&run);
}

/* What a trace shows inside a layer stack is the schedule the engine timed it with: one run's
 * ops end by its makespan, and `count` runs started a period apart end where the macro does. */
Test(engine, template_schedule_adds_up_to_the_macro)
{
  const char *sets[] = {"parallel.zero=3", NULL};
  prog_program *p = th_program("dgx-h100", "gpt3-1.3b-dp", sets);
  cr_assert_not_null(p);
  hw_cluster *hw = NULL;
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", "gpt3-1.3b-dp", sets, &c, &w));
  hw = hw_cluster_new(c);
  eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_evaluator *ev = eng_evaluator_new(p, hw, &o);
  int templates = 0;
  for (guint t = 0; t < p->classes->len; t++) {
    if (!prog_class_at(p, (int)t)->is_template)
      continue;
    eng_template_schedule s;
    eng_evaluate_template(ev, (int)t, 0, &s);
    double last = 0;
    for (guint i = 0; i < s.nops; i++) {
      cr_assert(s.start[i] >= 0 && s.end[i] >= s.start[i]);
      last = MAX(last, s.end[i]);
    }
    cr_assert_float_eq(last, s.makespan, s.makespan * 1e-12);
    cr_assert(s.period > 0 && s.period <= s.makespan);
    double macro = eng_evaluate_macro(ev, (int)t, 24, 0);
    cr_assert_float_eq(macro, s.makespan + 23 * s.period, macro * 1e-12);
    eng_template_schedule_clear(&s);
    templates++;
  }
  cr_assert(templates >= 2, "%d templates", templates);
  eng_evaluator_free(ev);
  hw_cluster_free(hw);
  cfg_workload_free(w);
  cfg_cluster_free(c);
  prog_free(p);
}

/* A template's times depend on the rank only through its collectives' durations, so ranks
 * whose collectives take the same share one evaluation: nodes of six GPUs under TP 4 x PP 3
 * put the middle stage's tensor-parallel group across both nodes and the others inside one.
 * Each stage's times from an evaluator that has seen the others are those of one that has
 * seen nothing, bit for bit; the middle stage's layer pass is slower, the last shares the
 * first's. */
Test(engine, stages_whose_collectives_cost_the_same_share_a_templates_times)
{
  const char *sets[] = {"node.count=2", "node.gpus_per_node=6", "parallel.tp=4", "parallel.pp=3",
                        "parallel.dp=1", "training.global_batch=12", "training.micro_batch=1",
                        "parallel.uneven_stages=true", NULL};
  prog_program *p = th_program("dgx-h100", "gpt3-1.3b-dp", sets);
  cr_assert_not_null(p);
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", "gpt3-1.3b-dp", sets, &c, &w));
  hw_cluster *hw = hw_cluster_new(c);
  eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_evaluator *seen = eng_evaluator_new(p, hw, &o);
  const int reps[] = {0, 4, 8};
  int layers = 0;
  for (guint t = 0; t < p->classes->len; t++) {
    const prog_class *k = prog_class_at(p, (int)t);
    if (!k->is_template)
      continue;
    double macro[3];
    for (int i = 0; i < 3; i++) {
      eng_evaluator *alone = eng_evaluator_new(p, hw, &o);
      macro[i] = eng_evaluate_macro(seen, (int)t, 5, reps[i]);
      double fresh = eng_evaluate_macro(alone, (int)t, 5, reps[i]);
      cr_assert(macro[i] == fresh, "%s, rank %d: %.17g after the others, %.17g alone", k->name,
                reps[i], macro[i], fresh);
      eng_evaluator_free(alone);
    }
    if (g_str_has_prefix(k->name, "layer")) {
      cr_assert_gt(macro[1], macro[0], "%s: the group across nodes is slower", k->name);
      cr_assert(macro[2] == macro[0], "%s", k->name);
      layers++;
    }
  }
  cr_assert_gt(layers, 0);
  eng_evaluator_free(seen);
  hw_cluster_free(hw);
  cfg_workload_free(w);
  cfg_cluster_free(c);
  prog_free(p);
}

/* ---- layer passes as flows (issue 15) ------------------------------------------------------ */

/* No latencies, links at their datasheet rate, protocols lossless: times are bytes / rate. */
static const char *const flows_nccl =
    "nccl: {link_efficiency: {intra: 1, network: 1}, base_latency: {ll: 0, ll128: 0, simple: 0},\n"
    "  hop_latency: {intra: {ll: 0, ll128: 0, simple: 0}, network: {ll: 0, ll128: 0, simple: 0}},\n"
    "  protocol_efficiency: {ll: 1, ll128: 1, simple: 1}, chunk: {ll: 0, ll128: 0, simple: 0}}";

/* `nodes` nodes of one GPU each, NICs of 12.5 GB/s, leaves of `per_leaf` nodes under a spine
 * oversubscribed `over`:1, with `background` as network.background. */
static hw_cluster *flows_cluster_leaves(int nodes, int per_leaf, double over,
                                        const char *background, cfg_cluster **cfg)
{
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
      "node: {count: %d, gpus_per_node: 1, intra: {bandwidth: 100GB/s, latency: 0us}}\n"
      "network: {nic_bandwidth: 100Gb/s, background: %s,\n"
      "  tiers: [{name: leaf, latency: 0us, nodes_per_switch: %d},\n"
      "          {name: spine, latency: 0us, oversubscription: %g}]}\n%s\n",
      nodes, background, per_leaf, over, flows_nccl);
  g_autofree char *path = th_write("flows.yaml", text);
  cr_assert(th_load(path, NULL, NULL, cfg, NULL));
  return hw_cluster_new(*cfg);
}

static hw_cluster *flows_cluster(int nodes, double over, const char *background, cfg_cluster **cfg)
{
  return flows_cluster_leaves(nodes, 2, over, background, cfg);
}

/* A layer pass by hand, `count` runs of: 1 ms of compute, a collective of `bytes` over the
 * rank's group of family `dim`, 1 ms of compute that waits for it. `groups` lists the groups'
 * ranks, `size` each; every rank runs the macro. */
static prog_program *layer_pass(int nranks, const int *groups, int size, prog_dim dim,
                                prog_coll coll, double bytes, uint32_t count)
{
  prog_program *p = prog_new(nranks);
  int fam = prog_family_add(p, prog_dim_name(dim), dim);
  for (int g = 0; g < nranks / size; g++) {
    int id = prog_group_add(p, groups + g * size, size);
    for (int m = 0; m < size; m++)
      prog_family_set(p, fam, groups[g * size + m], id);
  }
  int t = prog_template_add(p, "layer");
  uint32_t a = prog_compute(p, t, "before", CFG_KCLASS_OTHER, CFG_BF16, 0, 0, NULL, 0);
  uint32_t c = prog_comm(p, t, dim == PROG_DIM_EP ? PROG_STREAM_EP : PROG_STREAM_TP, "coll", coll,
                         fam, bytes, &a, 1);
  uint32_t b = prog_compute(p, t, "after", CFG_KCLASS_OTHER, CFG_BF16, 0, 0, &c, 1);
  prog_op_at(p, t, a)->fixed_time = prog_op_at(p, t, b)->fixed_time = 1e-3;
  int cls = prog_class_add(p, "rank");
  prog_macro(p, cls, "layers", t, count, NULL, 0);
  for (int r = 0; r < nranks; r++)
    prog_rank_set_class(p, r, cls);
  prog_finalize(p);
  return p;
}

static eng_result flows_run(const prog_program *p, const hw_cluster *hw, eng_kind kind,
                            const double *slowdown)
{
  eng_options o = {.kind = kind, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE,
                   .slowdown = slowdown};
  eng_result r;
  GError *err = NULL;
  cr_assert(eng_run(p, hw, &o, &r, &err), "%s", err ? err->message : "");
  return r;
}

/* A tensor-parallel all-reduce of 1 GB between two nodes inside a layer pass (2 runs): a ring
 * of two sends 0.5 GB each way per phase, two phases, 1 GB per GPU at 12.5 GB/s: 80 ms alone.
 * Another tenant taking half of node 0's NIC out halves GPU 0's sends: 160 ms, so the step
 * grows by 2 x 80 ms. Alone on its links the all-reduce keeps the closed form, and the DES
 * the analytic engine's step; loaded, it runs as flows. */
Test(engine, a_background_flow_slows_an_all_reduce_inside_a_layer_pass)
{
  const int pair[] = {0, 1};
  prog_program *p = layer_pass(2, pair, 2, PROG_DIM_TP, PROG_COLL_ALLREDUCE, 1e9, 2);
  cfg_cluster *c0 = NULL, *c1 = NULL;
  hw_cluster *quiet = flows_cluster(2, 1, "[]", &c0);
  hw_cluster *loaded = flows_cluster(2, 1, "[{links: node 0, direction: up, fraction: 0.5}]", &c1);
  eng_result a = flows_run(p, quiet, ENG_ANALYTIC, NULL), d = flows_run(p, quiet, ENG_DES, NULL);
  eng_result b = flows_run(p, loaded, ENG_DES, NULL);
  cr_assert(fabs(a.step_time - 2 * (2e-3 + 0.08)) < 1e-9, "analytic %.12g", a.step_time);
  cr_assert(fabs(d.step_time - a.step_time) < 1e-9, "quiet DES %.12g", d.step_time);
  cr_assert(d.closed_dims == 1u << PROG_DIM_TP && d.flow_dims == 0, "quiet: %x / %x",
            d.flow_dims, d.closed_dims);
  cr_assert(fabs(b.step_time - d.step_time - 2 * 0.08) < 1e-6, "loaded %.12g vs quiet %.12g",
            b.step_time, d.step_time);
  cr_assert(b.flow_dims == 1u << PROG_DIM_TP && b.closed_dims == 0, "loaded: %x / %x",
            b.flow_dims, b.closed_dims);
  cr_assert(b.comm[PROG_DIM_TP] > d.comm[PROG_DIM_TP] + 0.15, "TP in flight %g vs %g",
            b.comm[PROG_DIM_TP], d.comm[PROG_DIM_TP]);
  eng_result_clear(&a);
  eng_result_clear(&d);
  eng_result_clear(&b);
  prog_free(p);
  hw_cluster_free(quiet);
  hw_cluster_free(loaded);
  cfg_cluster_free(c0);
  cfg_cluster_free(c1);
}

/* collectives.layer_flow_budget under auto: the loaded all-reduce above as flows counts 4
 * transfers (a member's transfer per phase of its plan, per layer pass, for every rank). A budget
 * of 3 keeps the closed form (the quiet step: contention unseen) and says why; a budget of 4
 * runs the flows (the loaded step). */
Test(engine, in_layer_flows_past_their_budget_keep_the_closed_form_and_say_so)
{
  const int pair[] = {0, 1};
  prog_program *p = layer_pass(2, pair, 2, PROG_DIM_TP, PROG_COLL_ALLREDUCE, 1e9, 2);
  cfg_cluster *c = NULL;
  hw_cluster *loaded = flows_cluster(2, 1, "[{links: node 0, direction: up, fraction: 0.5}]", &c);
  eng_options o = {.kind = ENG_DES, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE,
                   .layer_flow_budget = 3};
  eng_result capped, ran;
  GError *err = NULL;
  cr_assert(eng_run(p, loaded, &o, &capped, &err), "%s", err ? err->message : "");
  o.layer_flow_budget = 4;
  cr_assert(eng_run(p, loaded, &o, &ran, &err), "%s", err ? err->message : "");
  cr_assert(fabs(capped.step_time - 2 * (2e-3 + 0.08)) < 1e-9, "capped %.12g", capped.step_time);
  cr_assert(capped.capped_dims == 1u << PROG_DIM_TP && capped.closed_dims == 1u << PROG_DIM_TP,
            "capped: %x / %x", capped.capped_dims, capped.closed_dims);
  cr_assert(capped.capped_messages == 4, "%g transfers", capped.capped_messages);
  cr_assert(fabs(ran.step_time - capped.step_time - 2 * 0.08) < 1e-6, "ran %.12g", ran.step_time);
  cr_assert(ran.capped_dims == 0 && ran.flow_dims == 1u << PROG_DIM_TP, "ran: %x / %x",
            ran.capped_dims, ran.flow_dims);
  eng_result_clear(&capped);
  eng_result_clear(&ran);
  prog_free(p);
  hw_cluster_free(loaded);
  cfg_cluster_free(c);
}

/* Two expert-parallel groups, {0, 2} and {1, 3}, across two leaves of two nodes under a 4:1
 * spine: each leaf's uplink carries 2 x 12.5 / 4 = 6.25 GB/s. An all-to-all of 2 GB over two
 * ranks sends 1 GB to the other rank; two groups share the uplink (320 ms). Alone, one group
 * {0, 1} on leaves of one node under a 2:1 spine has the same 6.25 GB/s uplink to itself
 * (160 ms). Three runs of the layer pass: 3 x (2 ms + 320 ms) and 3 x (2 ms + 160 ms). */
Test(engine, two_expert_parallel_groups_share_an_oversubscribed_spine)
{
  const int two[] = {0, 2, 1, 3}, one[] = {0, 1};
  cfg_cluster *c = NULL, *c1 = NULL;
  hw_cluster *hw = flows_cluster(4, 4, "[]", &c);
  hw_cluster *hw1 = flows_cluster_leaves(2, 1, 2, "[]", &c1);
  prog_program *both = layer_pass(4, two, 2, PROG_DIM_EP, PROG_COLL_ALLTOALL, 2e9, 3);
  prog_program *alone = layer_pass(2, one, 2, PROG_DIM_EP, PROG_COLL_ALLTOALL, 2e9, 3);
  eng_result b = flows_run(both, hw, ENG_DES, NULL), a = flows_run(alone, hw1, ENG_DES, NULL);
  cr_assert(fabs(b.step_time - 3 * (2e-3 + 0.32)) < 1e-6, "two groups: %.12g", b.step_time);
  cr_assert(b.flow_dims == 1u << PROG_DIM_EP, "two groups: %x / %x", b.flow_dims, b.closed_dims);
  cr_assert(fabs(a.step_time - 3 * (2e-3 + 0.16)) < 1e-6, "one group: %.12g", a.step_time);
  cr_assert(a.closed_dims == 1u << PROG_DIM_EP, "one group: %x / %x", a.flow_dims, a.closed_dims);
  eng_result_clear(&b);
  eng_result_clear(&a);
  prog_free(both);
  prog_free(alone);
  hw_cluster_free(hw);
  hw_cluster_free(hw1);
  cfg_cluster_free(c);
  cfg_cluster_free(c1);
}

/* Folding stays exact when layer passes run as flows: Mixtral with TP 2 inside nodes of two
 * GPUs (its all-reduces alone on NVLink: closed form) and EP 4 across the nodes (sharing NICs
 * with data parallelism: flows). The DES simulates the first rank of each TP pair, whose
 * expert-parallel groups hold first ranks only; simulating every rank (a slowdown of 1 on each
 * turns folding off) gives the same step. */
Test(engine, folding_tensor_parallel_ranks_is_exact_with_expert_parallel_flows)
{
  const char *sets[] = {"node.count=4", "node.gpus_per_node=2", "node.nics_per_node=2",
                        "parallel.tp=2", "parallel.dp=4", "parallel.ep=4", "model.layers=4",
                        "training.global_batch=8", NULL};
  prog_program *p = th_program("dgx-h100", "mixtral-8x7b-train", sets);
  cr_assert_not_null(p);
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", "mixtral-8x7b-train", sets, &c, &w));
  hw_cluster *hw = hw_cluster_new(c);
  g_autofree double *ones = g_new(double, p->nranks);
  for (int r = 0; r < p->nranks; r++)
    ones[r] = 1;
  eng_result f = flows_run(p, hw, ENG_DES, NULL), u = flows_run(p, hw, ENG_DES, ones);
  cr_assert(f.flow_dims & 1u << PROG_DIM_EP && f.closed_dims & 1u << PROG_DIM_TP, "%x / %x",
            f.flow_dims, f.closed_dims);
  cr_assert(f.messages < u.messages, "folded: %ld messages, unfolded %ld", f.messages, u.messages);
  cr_assert(fabs(f.step_time - u.step_time) < 1e-9 * u.step_time, "folded %.12g, unfolded %.12g",
            f.step_time, u.step_time);
  cr_assert(fabs(f.comm[PROG_DIM_EP] - u.comm[PROG_DIM_EP]) < 1e-9 * u.step_time, "EP %g vs %g",
            f.comm[PROG_DIM_EP], u.comm[PROG_DIM_EP]);
  eng_result_clear(&f);
  eng_result_clear(&u);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* Reserved SMs charge a layer pass run as flows what they charge the closed form: Mixtral's
 * hidden all-to-alls (EP 8 beside data parallelism on NVLink: flows) slow the compute they run
 * beside by 1 / (1 - 0.2), and the two engines' steps stay within 0.2 %. */
Test(engine, reserved_sms_slow_compute_beside_flows_as_in_the_closed_form)
{
  const char *sets[] = {"collectives.sm_reserved=0.2", "parallel.moe_overlap=true", NULL};
  const char *none[] = {"collectives.sm_reserved=0", "parallel.moe_overlap=true", NULL};
  eng_result r;
  double d = step_of("dgx-h100", "mixtral-8x7b-train", sets, ENG_DES, &r);
  double a = step_of("dgx-h100", "mixtral-8x7b-train", sets, ENG_ANALYTIC, NULL);
  double free_sms = step_of("dgx-h100", "mixtral-8x7b-train", none, ENG_DES, NULL);
  cr_assert(r.flow_dims & 1u << PROG_DIM_EP, "EP as flows: %x", r.flow_dims);
  cr_assert(fabs(d / a - 1) < 0.002, "DES %.9g s, analytic %.9g s", d, a);
  cr_assert(d > 1.005 * free_sms, "reserved SMs %.9g s, none %.9g s", d, free_sms);
}

/* The rule keeps the closed form only where it is exact: running those collectives as flows
 * anyway (collectives.layer_flows=always) gives the same step, on TP 8 inside a DGX A100 (22B)
 * and on TP 8 x PP 8 over eight of them (175B, its pipeline and data-parallel traffic on the
 * NICs). `never` keeps the closed form beside contended traffic too: Mixtral's all-to-alls no
 * longer meet the data-parallel reduction on NVLink. Without interference: the closed form
 * charges it after its list schedule, flows as each kernel meets a collective, 0.01 % apart
 * (interference_in_both_engines_and_layer_passes holds that). */
#define NO_INTERFERENCE                                                                           \
  "gpu.efficiency.interference.gemm=1", "gpu.efficiency.interference.attention=1",               \
      "gpu.efficiency.interference.optimizer=1"
Test(engine, collectives_the_rule_keeps_in_closed_form_take_the_same_time_as_flows)
{
  const char *const sets[][7] = {
      {"model.layers=8", NO_INTERFERENCE, NULL},
      {"model.layers=8", "collectives.layer_flows=always", NO_INTERFERENCE, NULL},
      {"node.count=8", "model.layers=24", NO_INTERFERENCE, NULL},
      {"node.count=8", "model.layers=24", "collectives.layer_flows=always", NO_INTERFERENCE,
       NULL}};
  const char *workloads[] = {"megatron-22b", "megatron-175b"};
  for (size_t i = 0; i < G_N_ELEMENTS(workloads); i++) {
    eng_result a, f;
    double closed = step_of("dgx-a100", workloads[i], sets[2 * i], ENG_DES, &a);
    double flows = step_of("dgx-a100", workloads[i], sets[2 * i + 1], ENG_DES, &f);
    cr_assert(a.closed_dims & 1u << PROG_DIM_TP && f.flow_dims & 1u << PROG_DIM_TP, "%s: %x, %x",
              workloads[i], a.closed_dims, f.flow_dims);
    cr_assert(fabs(flows / closed - 1) < 1e-9, "%s: as flows %.12g s, closed form %.12g s",
              workloads[i], flows, closed);
  }
  const char *never[] = {"collectives.layer_flows=never", NULL};
  eng_result r;
  step_of("dgx-h100", "mixtral-8x7b-train", never, ENG_DES, &r);
  cr_assert(r.closed_dims & 1u << PROG_DIM_EP && !(r.flow_dims & 1u << PROG_DIM_EP), "%x / %x",
            r.flow_dims, r.closed_dims);
}

/* `--json` names what ran as flows: 22B's TP 8 inside one node alone on NVLink keeps the closed
 * form; Mixtral's EP 8 and its data-parallel reduction share NVLink: both as flows. */
Test(engine, the_report_names_the_dimensions_run_as_flows)
{
  const char *runs[] = {"run -c dgx-a100 -w megatron-22b --set model.layers=8 --json",
                        "run -c dgx-h100 -w mixtral-8x7b-train --set model.layers=2 --json"};
  const char *want[][2] = {{"[]", "[\"tp\"]"}, {"[\"dp\",\"ep\"]", "[]"}};
  for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
    th_proc p = th_dlsim(runs[i]);
    cr_assert_eq(p.status, 0, "%s: %s", runs[i], p.out);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "%s", p.out);
    const cJSON *sim = cJSON_GetObjectItem(j, "simulator");
    g_autofree char *flows = cJSON_PrintUnformatted(cJSON_GetObjectItem(sim, "flows"));
    g_autofree char *closed = cJSON_PrintUnformatted(cJSON_GetObjectItem(sim, "closed_form"));
    cr_assert_str_eq(flows, want[i][0], "%s", runs[i]);
    cr_assert_str_eq(closed, want[i][1], "%s", runs[i]);
    cJSON_Delete(j);
    th_proc_clear(&p);
  }
}

/* Two DGX H100 nodes: 16 GPUs. */
static hw_cluster *two_h100_nodes(cfg_cluster **c)
{
  const char *const sets[] = {"node.count=2", NULL};
  cr_assert(th_load("dgx-h100", NULL, sets, c, NULL));
  return hw_cluster_new(*c);
}

/* Ranks 0-15 of `p` in one class ("all"), one group of family `fam`; returns the class. */
static int sixteen_in_one_group(prog_program *p, int fam)
{
  int cls = prog_class_add(p, "all"), ranks[16];
  for (int r = 0; r < 16; r++)
    ranks[r] = r;
  int g = prog_group_add(p, ranks, 16);
  for (int r = 0; r < 16; r++) {
    prog_rank_set_class(p, r, cls);
    prog_family_set(p, fam, r, g);
  }
  return cls;
}

/* The analytic engine remembers the last collective each unit planned on a family (the next is
 * most often the same): one after another on one family, collectives that differ in size or in
 * kind each take their own time, the step their sum, as when each is timed alone. */
Test(engine, collectives_of_one_family_in_turn_take_each_its_own_time)
{
  cfg_cluster *c = NULL;
  hw_cluster *hw = two_h100_nodes(&c);
  prog_program *p = prog_new(16);
  int fam = prog_family_add(p, "dp", PROG_DIM_DP), cls = sixteen_in_one_group(p, fam);
  prog_finalize(p);
  const struct {
    prog_coll coll;
    double bytes;
  } ops[] = {{PROG_COLL_ALLREDUCE, 1 << 20},  {PROG_COLL_ALLREDUCE, 1 << 20},
             {PROG_COLL_ALLREDUCE, 1 << 26},  {PROG_COLL_ALLGATHER, 1 << 26},
             {PROG_COLL_REDUCESCATTER, 1 << 26}, {PROG_COLL_ALLREDUCE, 1 << 20}};
  eng_options o = {.kind = ENG_ANALYTIC};
  eng_evaluator *e = eng_evaluator_new(p, hw, &o);
  double expect = 0;
  uint32_t prev = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(ops); i++) {
    prev = prog_comm(p, cls, PROG_STREAM_DP, "dp", ops[i].coll, fam, ops[i].bytes, &prev, i ? 1 : 0);
    double t;
    cr_assert(eng_evaluate_coll(e, ops[i].coll, fam, ops[i].bytes, 0, &t, NULL));
    expect += t;
  }
  eng_result r;
  GError *err = NULL;
  cr_assert(eng_run(p, hw, &o, &r, &err), "%s", err ? err->message : "");
  cr_assert(fabs(r.step_time - expect) <= 1e-12 * expect, "step %.17g s, the collectives' sum %.17g s",
            r.step_time, expect);
  eng_result_clear(&r);
  eng_evaluator_free(e);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

/* ---- the host's launch queue (gpu.efficiency.host_dispatch) ------------------------------- */

/* One GPU of the flows cluster with a host that takes `hd` per launch. */
static hw_cluster *hosted_cluster(double hd, cfg_cluster **cfg)
{
  hw_cluster *plain = flows_cluster(2, 1, "[]", cfg);
  hw_cluster_free(plain);
  (*cfg)->gpu.efficiency.host_dispatch = hd;
  return hw_cluster_new(*cfg);
}

/* A program of two ranks and a family `name` whose one group is the pair: returns it, the
 * family in `fam`. */
static prog_program *pair_program(const char *name, prog_dim dim, int *fam)
{
  const int pair[] = {0, 1};
  prog_program *p = prog_new(2);
  *fam = prog_family_add(p, name, dim);
  int g = prog_group_add(p, pair, 2);
  prog_family_set(p, *fam, 0, g);
  prog_family_set(p, *fam, 1, g);
  return p;
}

/* Two ranks running `runs` layer passes of: a GEMM of `flops`, then `n` short elementwise
 * kernels (one op), then (with `bytes` > 0) an all-reduce of the pair that waits for them. */
static prog_program *hosted_pass(double flops, uint32_t n, double bytes, uint32_t runs)
{
  int fam;
  prog_program *p = pair_program("tp", PROG_DIM_TP, &fam);
  int t = prog_template_add(p, "layer");
  uint32_t last = prog_compute(p, t, "gemm", CFG_KCLASS_GEMM, CFG_BF16, flops, 0, NULL, 0);
  last = prog_compute(p, t, "short", CFG_KCLASS_ELEMENTWISE, CFG_BF16, 0, 1e3, &last, 1);
  prog_op_at(p, t, last)->count = n;
  if (bytes > 0)
    prog_comm(p, t, PROG_STREAM_TP, "ar", PROG_COLL_ALLREDUCE, fam, bytes, &last, 1);
  int cls = prog_class_add(p, "rank");
  prog_macro(p, cls, "layers", t, runs, NULL, 0);
  prog_rank_set_class(p, 0, cls);
  prog_rank_set_class(p, 1, cls);
  prog_finalize(p);
  return p;
}

static double hosted_step(const prog_program *p, const hw_cluster *hw, eng_kind kind,
                          cfg_layer_flows flows)
{
  eng_options o = {.kind = kind, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE,
                   .layer_flows = flows};
  eng_result r;
  GError *err = NULL;
  cr_assert(eng_run(p, hw, &o, &r, &err), "%s", err ? err->message : "");
  double t = r.step_time;
  eng_result_clear(&r);
  return t;
}

/* The GPU's own time of the test kernels on `hw`. */
static void hosted_kernels(const hw_cluster *hw, double flops, double *gemm, double *elem)
{
  hw_kernel g = {.kclass = CFG_KCLASS_GEMM, .dtype = CFG_BF16, .flops = flops};
  hw_kernel e = {.kclass = CFG_KCLASS_ELEMENTWISE, .dtype = CFG_BF16, .bytes = 1e3};
  *gemm = hw_kernel_time(hw, &g);
  *elem = hw_kernel_time(hw, &e);
}

/* Streams that wait for one op together, and a stream that waits for another stream's op: the
 * DES wakes each waiting actor (and only it) when its op ends, so the step is the chain
 * compute, all-reduce, compute, as the analytic engine has it; a missed wake would deadlock. */
Test(engine, streams_waiting_for_ops_of_other_streams_wake_when_they_end)
{
  cfg_cluster *c = NULL;
  hw_cluster *hw = two_h100_nodes(&c);
  prog_program *p = prog_new(16);
  int dp = prog_family_add(p, "dp", PROG_DIM_DP), ep = prog_family_add(p, "ep", PROG_DIM_EP);
  int cls = sixteen_in_one_group(p, dp);
  for (int r = 0; r < 16; r++)
    prog_family_set(p, ep, r, prog_group_add(p, &r, 1));
  uint32_t c0 = prog_compute(p, cls, "c0", CFG_KCLASS_GEMM, CFG_BF16, 1e12, 0, NULL, 0);
  uint32_t both[2] = {prog_comm(p, cls, PROG_STREAM_DP, "ar", PROG_COLL_ALLREDUCE, dp, 1 << 26, &c0, 1),
                      prog_comm(p, cls, PROG_STREAM_EP, "own", PROG_COLL_ALLREDUCE, ep, 1 << 20, &c0, 1)};
  uint32_t c1 = prog_compute(p, cls, "c1", CFG_KCLASS_GEMM, CFG_BF16, 1e12, 0, both, 2);
  prog_comm(p, cls, PROG_STREAM_EP, "own2", PROG_COLL_ALLREDUCE, ep, 1 << 20, &c1, 1);
  prog_finalize(p);
  double a = hosted_step(p, hw, ENG_ANALYTIC, CFG_LAYER_FLOWS_AUTO);
  double d = hosted_step(p, hw, ENG_DES, CFG_LAYER_FLOWS_AUTO);
  hw_kernel k = {.kclass = CFG_KCLASS_GEMM, .dtype = CFG_BF16, .flops = 1e12};
  cr_assert(a > 2 * hw_kernel_time(hw, &k), "analytic %.17g s", a);
  cr_assert(fabs(d - a) <= 1e-9 * a, "des %.17g s, analytic %.17g s", d, a);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

/* A GEMM of 1e12 FLOP then 8 short kernels on a host of hd = 100 us (blocking or not): the
 * pass takes `exposed` hd beside the GPU's own time, in both engines. */
static void expect_gemm_pass(bool blocking, double exposed)
{
  cfg_cluster *c = NULL;
  double hd = 100e-6, gemm, elem;
  hw_cluster *hw = hosted_cluster(hd, &c);
  hw_cluster_free(hw);
  c->node.cpu.launch_blocking = blocking;
  hw = hw_cluster_new(c);
  hosted_kernels(hw, 1e12, &gemm, &elem);
  cr_assert(gemm > 9 * hd && elem < hd, "GEMM %g s, short %g s", gemm, elem);
  prog_program *p = hosted_pass(1e12, 8, 0, 1);
  double want = exposed * hd + gemm + 8 * elem;
  double a = hosted_step(p, hw, ENG_ANALYTIC, CFG_LAYER_FLOWS_AUTO);
  double d = hosted_step(p, hw, ENG_DES, CFG_LAYER_FLOWS_AUTO);
  cr_assert(fabs(a - want) < 1e-12, "analytic %.9g s, by hand %.9g s", a, want);
  cr_assert(fabs(d - want) < 1e-9, "DES %.9g s, by hand %.9g s", d, want);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

/* A 10 ms GEMM issued hd after the pass starts hides the launches of the 8 short kernels
 * behind it (issued by 9 hd = 0.9 ms): the pass ends hd after the GPU alone would. */
Test(engine, a_long_kernel_hides_the_launches_of_the_short_ones_behind_it)
{
  expect_gemm_pass(false, 1);
}

/* CUDA_LAUNCH_BLOCKING=1: each of the 9 launches returns only once its kernel has run, so the
 * next starts hd after that: all 9 hd add to the GPU's time. */
Test(engine, blocking_launches_add_the_host_time_of_every_kernel_to_the_gpus)
{
  expect_gemm_pass(true, 9);
}

/* N kernels shorter than hd, issued hd apart, end when the last one issued (N hd) has run;
 * outside a layer pass the same (the queue starts empty there). */
Test(engine, n_tiny_kernels_take_n_host_dispatch_times)
{
  cfg_cluster *c = NULL;
  double hd = 100e-6, gemm, elem;
  hw_cluster *hw = hosted_cluster(hd, &c);
  hosted_kernels(hw, 1e3, &gemm, &elem);
  prog_program *p = hosted_pass(1e3, 50, 0, 1);
  double want = 51 * hd + elem; /* the GEMM is a tiny kernel too: 51 launches */
  double a = hosted_step(p, hw, ENG_ANALYTIC, CFG_LAYER_FLOWS_AUTO);
  cr_assert(fabs(a - want) < 1e-12, "analytic %.9g s, by hand %.9g s", a, want);
  prog_op *op = prog_op_at(p, p->class_of[0], 0);
  prog_op one = *prog_op_at(p, op->tmpl, 1);
  cr_assert(fabs(eng_compute_time(hw, &one) - (50 * hd + elem)) < 1e-12);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

/* Runs hosted_pass (9 short kernels, 4 runs, an all-reduce whose calls are `host_ops`) on a
 * host of `hd` per launch in both engines; `ar` is the all-reduce's own time, `elem` a short
 * kernel's. */
static void hosted_both(double hd, uint8_t host_ops, double *ar, double *elem, double *a,
                        double *d)
{
  cfg_cluster *c = NULL, *c0 = NULL;
  double gemm;
  hw_cluster *hw = hosted_cluster(hd, &c), *gpu = hosted_cluster(0, &c0);
  hosted_kernels(hw, 1e3, &gemm, elem);
  prog_program *one = hosted_pass(1e3, 9, 1e3, 1), *p = hosted_pass(1e3, 9, 1e3, 4);
  *ar = hosted_step(one, gpu, ENG_ANALYTIC, CFG_LAYER_FLOWS_AUTO) - gemm - 9 * *elem;
  prog_op *macro = prog_op_at(p, p->class_of[0], 0);
  prog_op_at(p, macro->tmpl, 2)->host_ops = host_ops;
  *a = hosted_step(p, hw, ENG_ANALYTIC, CFG_LAYER_FLOWS_AUTO);
  *d = hosted_step(p, hw, ENG_DES, CFG_LAYER_FLOWS_ALWAYS);
  prog_free(one);
  prog_free(p);
  hw_cluster_free(hw);
  hw_cluster_free(gpu);
  cfg_cluster_free(c);
  cfg_cluster_free(c0);
}

/* A host-bound pass run R times with its all-reduce as flows: each run's 10 kernels take
 * 10 hd to launch, so R runs take R x 10 hd plus the last kernel and all-reduce; the DES op by
 * op and the closed form (first run, then the host's period) agree. */
Test(engine, both_engines_run_the_launch_queue_alike)
{
  double hd = 100e-6, ar, elem, a, d;
  hosted_both(hd, 0, &ar, &elem, &a, &d);
  double want = 4 * 10 * hd + elem + ar;
  cr_assert(fabs(a - want) < 1e-9, "analytic %.9g s, by hand %.9g s", a, want);
  cr_assert(fabs(d - a) < 1e-6 * a, "DES %.9g s, analytic %.9g s", d, a);
}

/* A collective's host calls (prog_op.host_ops, 1/14 of a modelled kernel each) join the launch
 * queue: 7 calls are half a launch per run, and the all-reduce starts after them (later than
 * the last short kernel ends); both engines. */
Test(engine, a_collectives_host_calls_join_the_launch_queue)
{
  double hd = 100e-6, ar, elem, a, d;
  hosted_both(hd, 7, &ar, &elem, &a, &d);
  double want = 4 * 10.5 * hd + ar;
  cr_assert(fabs(a - want) < 1e-9, "analytic %.9g s, by hand %.9g s", a, want);
  cr_assert(fabs(d - a) < 1e-6 * a, "DES %.9g s, analytic %.9g s", d, a);
}

/* A DES step with or without its symmetric ranks folded away; returns the step time and which
 * ranks the DES simulated, and sets its exposed communication. */
static double fold_step(const char *cluster, const char *workload, const char *const *sets,
                        bool all_ranks, eng_fold_info *fold, double *exposed)
{
  sim_options o = sim_options_for(ENG_DES);
  o.all_ranks = all_ranks;
  sim_result run;
  GError *err = NULL;
  cr_assert(sim_run_files(cluster, workload, (char *const *)sets, &o, &run, &err), "%s",
            err ? err->message : "");
  double t = run.eng.step_time;
  *fold = run.eng.fold;
  *exposed = run.eng.exposed_comm;
  sim_result_clear(&run);
  return t;
}

/* Folded and unfolded DES steps are equal, and so is their exposed communication; the folded
 * one simulates `ranks` GPUs. */
static eng_fold_info fold_check(const char *cluster, const char *workload,
                                const char *const *sets, int ranks)
{
  eng_fold_info folded, full;
  double ea, eb;
  double a = fold_step(cluster, workload, sets, false, &folded, &ea);
  double b = fold_step(cluster, workload, sets, true, &full, &eb);
  cr_assert(fabs(a - b) <= 1e-9 * b, "%s: folded %.12g, every rank %.12g", workload, a, b);
  cr_assert(fabs(ea - eb) <= 1e-9 * b, "%s: exposed comm folded %.12g, every rank %.12g",
            workload, ea, eb);
  cr_assert_eq(folded.ranks, ranks, "%s: %d ranks simulated", workload, folded.ranks);
  cr_assert(full.ranks > folded.ranks || full.ranks == ranks);
  return folded;
}

/* One DES step with SimGrid's CPU model `optim` (DLSIM_SIMGRID_CPU_OPTIM): its time and exposed
 * communication. */
static double cpu_model_step(const char *const *sets, const char *optim, double *exposed)
{
  g_setenv("DLSIM_SIMGRID_CPU_OPTIM", optim, TRUE);
  eng_fold_info fold;
  double t = fold_step("dgx-h100", "megatron-22b", sets, false, &fold, exposed);
  g_unsetenv("DLSIM_SIMGRID_CPU_OPTIM");
  return t;
}

/* The keys of a TP 2 x CP x PP x DP layout on DGX nodes, 4 micro-batches per pipeline: nodes,
 * CP, PP, DP and the global batch. */
static GStrv layout_keys(int cp, int pp, int dp)
{
  char **k = g_new0(char *, 6);
  k[0] = g_strdup_printf("node.count=%d", 2 * cp * pp * dp / 8);
  k[1] = g_strdup_printf("parallel.cp=%d", cp);
  k[2] = g_strdup_printf("parallel.pp=%d", pp);
  k[3] = g_strdup_printf("parallel.dp=%d", dp);
  k[4] = g_strdup_printf("training.global_batch=%d", 4 * pp * dp);
  return k;
}

/* A GPU host runs one kernel at a time, so SimGrid's trace-integration CPU model (dlsim's
 * default: a finish date per host, no max-min system) gives the dates its solver does: TP 2 x CP
 * x PP x DP steps over rails across leaf groups of one node (the pipeline's sends, the DP x CP
 * reduction and, in the first, the layer passes as flows) and over a 4:1 oversubscribed fat tree
 * take the same time, and expose the same communication, under both. */
Test(engine, integrating_cpu_dates_gives_the_solvers_steps)
{
  const char *fabrics[][3] = {
      {"network.tiers[0].nodes_per_switch=1", "network.topology=rail-optimized", NULL},
      {"network.tiers[1].oversubscription=4", "network.topology=fat-tree", NULL}};
  const int layouts[][3] = {{2, 2, 2}, {4, 2, 2}, {2, 4, 3}}; /* CP, PP, DP */
  for (size_t f = 0; f < G_N_ELEMENTS(fabrics); f++)
    for (size_t l = 0; l < G_N_ELEMENTS(layouts); l++) {
      int cp = layouts[l][0], pp = layouts[l][1], dp = layouts[l][2];
      g_auto(GStrv) k = layout_keys(cp, pp, dp);
      const char *sets[] = {k[0], "parallel.tp=2", k[1], k[2], k[3], k[4],
                            "training.flash_attention=true", fabrics[f][0], fabrics[f][1],
                            l ? "collectives.layer_flows=never" : "collectives.layer_flows=auto",
                            NULL};
      double ea, eb;
      double a = cpu_model_step(sets, "TI", &ea), b = cpu_model_step(sets, "Lazy", &eb);
      cr_assert(fabs(a - b) <= 1e-9 * b && fabs(ea - eb) <= 1e-9 * b,
                "%s, CP %d x PP %d x DP %d: %.17g s (exposed %.17g) integrated, %.17g (%.17g) "
                "solved", fabrics[f][1], cp, pp, dp, a, ea, b, eb);
    }
}

/* TP 2 x CP 2 x PP 2 x DP 2 on 16 GPUs: tensor-parallel siblings stand for each other, context-
 * parallel ones cannot (their gradients are reduced together, outside the layer passes, over
 * NICs that also carry the pipeline's sends of ranks mirroring would leave out), and the check
 * finds which by itself. In-layer collectives keep their closed form here
 * (layer_flows never): with them as flows, TP and CP share NVLink and nothing folds (the test
 * after the next ones). */
Test(engine, symmetric_ranks_fold_exactly)
{
  const char *sets[] = {"node.count=2", "parallel.tp=2", "parallel.cp=2", "parallel.pp=2",
                        "parallel.dp=2", "training.global_batch=16", "training.flash_attention=true",
                        "collectives.layer_flows=never", NULL};
  eng_fold_info f = fold_check("dgx-h100", "megatron-22b", sets, 8);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_TP);
  cr_assert_eq(f.unfolded_dims, 1u << PROG_DIM_CP);
  cr_assert_eq(f.why, ENG_FOLD_CROSSED);
  cr_assert_eq(f.joined_dim, PROG_DIM_DP);
  /* TP 8 x PP 2 on 16 GPUs: one rank of each tensor-parallel group */
  const char *tp8[] = {"node.count=2", "parallel.tp=8", "parallel.pp=2", "parallel.dp=1",
                       "training.global_batch=8", NULL};
  f = fold_check("dgx-h100", "megatron-22b", tp8, 2);
  cr_assert_eq(f.unfolded_dims, 0u);
}

/* Context-parallel siblings whose gradients are reduced together with the data-parallel ones
 * fold by mirroring: the representatives run the DP x CP collectives with ghosts at the other
 * ends, and the step is the one every rank gives. Each case: the ranks simulated. */
Test(engine, context_parallel_siblings_fold_by_mirroring)
{
  /* TP 2 x CP 2 x DP 2 in one node: one rank per data-parallel replica */
  const char *one_node[] = {"node.count=1", "parallel.tp=2", "parallel.cp=2", "parallel.pp=1",
                            "parallel.dp=2", "training.global_batch=8",
                            "training.flash_attention=true", "collectives.layer_flows=never", NULL};
  eng_fold_info f = fold_check("dgx-h100", "megatron-22b", one_node, 2);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_TP | 1u << PROG_DIM_CP);
  cr_assert_eq(f.unfolded_dims, 0u);
  /* CP 4 x DP 2 over two nodes of four GPUs: the ring crosses the network */
  const char *two_nodes[] = {"node.count=2", "node.gpus_per_node=4", "parallel.tp=1",
                             "parallel.cp=4", "parallel.pp=1", "parallel.dp=2",
                             "training.global_batch=8", "training.flash_attention=true",
                             "collectives.layer_flows=never", NULL};
  f = fold_check("dgx-h100", "megatron-22b", two_nodes, 2);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_CP);
  /* ZeRO-1 and 2: a reduce-scatter and an all-gather over DP x CP */
  for (int zero = 1; zero <= 2; zero++) {
    char stage[32];
    g_snprintf(stage, sizeof stage, "parallel.zero=%d", zero);
    const char *zero_sets[] = {"node.count=2", "parallel.tp=2", "parallel.cp=2", "parallel.pp=1",
                               "parallel.dp=4", "training.global_batch=16",
                               "training.flash_attention=true", "collectives.layer_flows=never",
                               stage, NULL};
    f = fold_check("dgx-h100", "megatron-22b", zero_sets, 4);
    cr_assert_eq(f.folded_dims, 1u << PROG_DIM_TP | 1u << PROG_DIM_CP, "ZeRO-%d", zero);
  }
}

/* With a pipeline: CP 2 x DP 4 fill a node and the two stages sit on two nodes, so the DP x CP
 * reduction runs on NVLink and the stages' sends on the NICs: the mirrored transfers' links
 * carry nothing else and one rank per context-parallel pair runs. With the stages inside the nodes instead, the
 * reduction crosses the NICs of ranks that are not simulated, which also carry their own
 * pipeline sends: mirroring would leave those out, and the context-parallel siblings run. */
Test(engine, mirroring_with_a_pipeline_folds_only_where_its_links_are_its_own)
{
  const char *apart[] = {"node.count=2", "parallel.tp=1", "parallel.cp=2", "parallel.pp=2",
                         "parallel.dp=4", "training.global_batch=16", "parallel.placement=[cp, dp, pp, tp]",
                         "training.flash_attention=true", "collectives.layer_flows=never", NULL};
  eng_fold_info f = fold_check("dgx-h100", "megatron-22b", apart, 8);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_CP);
  const char *shared[] = {"node.count=2", "parallel.tp=2", "parallel.cp=2", "parallel.pp=2",
                          "parallel.dp=2", "training.global_batch=16",
                          "training.flash_attention=true", "collectives.layer_flows=never", NULL};
  f = fold_check("dgx-h100", "megatron-22b", shared, 8);
  cr_assert_eq(f.why, ENG_FOLD_CROSSED);
  cr_assert_eq(f.joined_dim, PROG_DIM_DP);
}

/* Mirroring needs the members of a joining group to do the same in the DES. With two nodes per
 * leaf, the DP x CP ring's hops between nodes alternate between the leaf and the spine: that is
 * the same to the DES (its links carry no latency, the schedule sleeps the plan's; the spine's
 * links are not oversubscribed and cannot bind), so one rank per context-parallel pair runs and
 * the step is every rank's. A tree's members differ (a root, leaves, inner ranks): every rank
 * runs. */
Test(engine, mirroring_needs_members_that_do_the_same)
{
  const char *ring[] = {"node.count=4", "node.gpus_per_node=2", "network.tiers[0].nodes_per_switch=2",
                        "parallel.tp=1", "parallel.cp=2", "parallel.pp=1", "parallel.dp=4",
                        "training.global_batch=16", "training.flash_attention=true",
                        "collectives.layer_flows=never", NULL};
  eng_fold_info f = fold_check("dgx-h100", "megatron-22b", ring, 4);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_CP);
  const char *tree[G_N_ELEMENTS(ring) + 1];
  memcpy(tree, ring, sizeof ring);
  tree[G_N_ELEMENTS(ring) - 1] = "collectives.algorithm=tree";
  tree[G_N_ELEMENTS(ring)] = NULL;
  f = fold_check("dgx-h100", "megatron-22b", tree, 8);
  cr_assert_eq(f.why, ENG_FOLD_UNEVEN);
  cr_assert_eq(f.unfolded_dims, 1u << PROG_DIM_CP);
}

/* Data parallelism alone: with gradients all-reduced after the layer passes, nothing folds and
 * nothing is noted; with ZeRO-3 every gather and reduction runs inside them, the replicas are
 * one class and one rank stands for the 16. */
Test(engine, data_parallel_steps_fold_when_their_collectives_stay_in_layers)
{
  const char *sets[] = {"node.count=2", NULL};
  eng_fold_info f = fold_check("dgx-h100", "gpt3-1.3b-dp", sets, 16);
  cr_assert_eq(f.folded_dims | f.unfolded_dims, 0u);
  const char *zero3[] = {"node.count=2", "parallel.zero=3", NULL};
  f = fold_check("dgx-h100", "gpt3-1.3b-dp", zero3, 1);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_DP);
}

/* A DES step's result, folded (`all_ranks` false) or with every rank simulated. */
static eng_result fold_result(const char *const *sets, bool all_ranks)
{
  sim_options o = sim_options_for(ENG_DES);
  o.all_ranks = all_ranks;
  sim_result run;
  GError *err = NULL;
  cr_assert(sim_run_files("dgx-h100", "megatron-22b", (char *const *)sets, &o, &run, &err), "%s",
            err ? err->message : "");
  eng_result r = run.eng;
  r.class_peak = NULL, r.events = r.mem_samples = r.link_loads = r.link_samples = NULL;
  sim_result_clear(&run);
  return r;
}

static void fold_same_figure(const char *what, double a, double b, double step)
{
  cr_assert(fabs(a - b) <= 1e-9 * step, "%s: folded %.17g, every rank %.17g", what, a, b);
}

/* Folded and unfolded runs report the same step and breakdown (compute, exposed communication,
 * bubble, other, each dimension's time in flight and exposed) and the same peak memory; the
 * folded one simulates `ranks` GPUs. */
static eng_fold_info fold_check_figures(const char *const *sets, int ranks)
{
  eng_result f = fold_result(sets, false), u = fold_result(sets, true);
  double t = u.step_time;
  fold_same_figure("step", f.step_time, t, t);
  fold_same_figure("compute", f.compute, u.compute, t);
  fold_same_figure("exposed comm", f.exposed_comm, u.exposed_comm, t);
  fold_same_figure("bubble", f.bubble, u.bubble, t);
  fold_same_figure("other", f.other, u.other, t);
  for (int d = 0; d < PROG_NDIMS; d++) {
    fold_same_figure("comm in flight", f.comm[d], u.comm[d], t);
    fold_same_figure("exposed per dimension", f.exposed[d], u.exposed[d], t);
  }
  cr_assert(f.peak_memory == u.peak_memory);
  cr_assert_eq(f.fold.ranks, ranks, "%d ranks simulated", f.fold.ranks);
  return f.fold;
}

/* On a non-blocking fat tree, as on rails: context-parallel siblings fold by mirroring where the
 * DP x CP reduction's links are its own (CP 2 x DP 4 on one node per stage; CP 4 x DP 2 over two
 * nodes of four GPUs; TP 2 x CP 2 x DP 4 on two nodes), and every figure of the step is every
 * rank's. An oversubscribed tier or
 * network.background keeps every rank, rails or fat tree. */
Test(engine, folding_on_a_fat_tree_is_exact_and_refused_where_flows_could_meet)
{
  const char *apart[] = {"node.count=2", "parallel.tp=1", "parallel.cp=2", "parallel.pp=2",
                         "parallel.dp=4", "training.global_batch=16",
                         "parallel.placement=[cp, dp, pp, tp]", "training.flash_attention=true",
                         "collectives.layer_flows=never", "network.topology=fat-tree", NULL};
  eng_fold_info f = fold_check_figures(apart, 8);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_CP);
  apart[G_N_ELEMENTS(apart) - 2] = "network.topology=rail-optimized";
  f = fold_check_figures(apart, 8);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_CP);
  const char *ring[] = {"node.count=2", "node.gpus_per_node=4", "parallel.tp=1",
                        "parallel.cp=4", "parallel.pp=1", "parallel.dp=2",
                        "training.global_batch=8", "training.flash_attention=true",
                        "collectives.layer_flows=never", "network.topology=fat-tree", NULL};
  f = fold_check_figures(ring, 2);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_CP);
  const char *over[] = {"node.count=2", "parallel.tp=2", "parallel.cp=2", "parallel.pp=1",
                        "parallel.dp=4", "training.global_batch=16",
                        "training.flash_attention=true", "collectives.layer_flows=never",
                        "network.topology=fat-tree", "network.tiers[1].oversubscription=4", NULL};
  over[G_N_ELEMENTS(over) - 2] = NULL; /* TP 2 x CP 2 x DP 4, non-blocking: one per replica */
  f = fold_check_figures(over, 4);
  cr_assert_eq(f.folded_dims, 1u << PROG_DIM_TP | 1u << PROG_DIM_CP);
  over[G_N_ELEMENTS(over) - 2] = "network.tiers[1].oversubscription=4";
  f = fold_check_figures(over, 16);
  cr_assert_eq(f.why, ENG_FOLD_OVERSUBSCRIBED);
  cr_assert_eq(f.unfolded_dims, 1u << PROG_DIM_TP | 1u << PROG_DIM_CP);
  const char *tenant[] = {"node.count=2", "parallel.tp=2", "parallel.cp=2", "parallel.pp=1",
                          "parallel.dp=4", "training.global_batch=16",
                          "training.flash_attention=true", "collectives.layer_flows=never",
                          "network.background=[{links: node 0, fraction: 0.5}]", NULL};
  f = fold_check_figures(tenant, 16);
  cr_assert_eq(f.why, ENG_FOLD_BACKGROUND);
  cr_assert_eq(f.unfolded_dims, 1u << PROG_DIM_TP | 1u << PROG_DIM_CP);
}

/* Where siblings' flows could meet, every rank runs, and the reason is kept. */
Test(engine, an_oversubscribed_spine_keeps_every_rank)
{
  const char *sets[] = {"node.count=2", "parallel.tp=2", "parallel.pp=2", "parallel.dp=4",
                        "training.global_batch=16", "network.tiers[0].oversubscription=4",
                        "collectives.layer_flows=never", NULL};
  eng_fold_info f = fold_check("dgx-h100", "megatron-22b", sets, 16);
  cr_assert_eq(f.why, ENG_FOLD_OVERSUBSCRIBED);
  cr_assert_eq(f.unfolded_dims, 1u << PROG_DIM_TP);
}

/* A family whose in-layer collectives the DES runs as flows cannot fold: its groups must map
 * onto each other like those outside the layer passes, which tensor-parallel pairs do not. */
Test(engine, families_run_as_flows_do_not_fold)
{
  const char *sets[] = {"node.count=2", "parallel.tp=2", "parallel.pp=2", "parallel.dp=4",
                        "training.global_batch=16", NULL};
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result run;
  cr_assert(sim_run_files("dgx-h100", "megatron-22b", (char *const *)sets, &o, &run, NULL));
  const prog_program *p = run.program;
  eng_options eo = {.kind = ENG_DES};
  eng_fold_info info;
  g_autofree bool *lead = eng_fold_ranks(p, run.hw, &eo, NULL, NULL, &info);
  cr_assert(lead && info.ranks == 8, "%d ranks", info.ranks);
  g_autofree bool *flows = g_new0(bool, p->families->len);
  for (guint f = 0; f < p->families->len; f++)
    flows[f] = ((const prog_family *)g_ptr_array_index(p->families, f))->dim == PROG_DIM_TP;
  g_autofree bool *none = eng_fold_ranks(p, run.hw, &eo, flows, NULL, &info);
  cr_assert_null(none);
  cr_assert_eq(info.ranks, 16);
  sim_result_clear(&run);
}

/* ---- the DES child's watchdog ----------------------------------------------------------------
 * A fork copies only the calling thread: a lock another thread holds at fork() stays held in
 * the child forever. These tests make such a child on purpose (its progress callback takes a
 * mutex a second thread holds) and expect an error instead of a hang. */

typedef struct {
  GMutex lock;
  gint held, release;
} held_lock;

static gpointer hold_until_released(gpointer data)
{
  held_lock *h = data;
  g_mutex_lock(&h->lock);
  g_atomic_int_set(&h->held, 1);
  while (!g_atomic_int_get(&h->release))
    g_usleep(1000);
  g_mutex_unlock(&h->lock);
  return NULL;
}

static void take_held_lock(double fraction, void *ctx)
{
  (void)fraction;
  held_lock *h = ctx;
  g_mutex_lock(&h->lock); /* in the child: blocks on the copy of the other thread's lock */
  g_mutex_unlock(&h->lock);
}

/* Runs a DES step with `progress` and the stall limit `stall`; the error message or NULL. */
static char *des_step_error(const char *stall, void (*progress)(double, void *), void *ctx)
{
  g_setenv("DLSIM_DES_STALL", stall, TRUE);
  sim_options o = sim_options_for(ENG_DES);
  o.progress = progress;
  o.progress_ctx = ctx;
  sim_result run;
  GError *err = NULL;
  bool ok = sim_run_files("dgx-h100", "gpt3-1.3b-dp", NULL, &o, &run, &err);
  g_unsetenv("DLSIM_DES_STALL");
  if (ok)
    sim_result_clear(&run);
  char *message = ok ? NULL : g_strdup(err->message);
  g_clear_error(&err);
  return message;
}

Test(engine, a_des_child_blocked_on_a_lock_held_at_fork_is_killed_and_reported, .timeout = 60)
{
  held_lock h = {0};
  g_mutex_init(&h.lock);
  GThread *t = g_thread_new("holder", hold_until_released, &h);
  while (!g_atomic_int_get(&h.held))
    g_usleep(1000);
  gint64 t0 = g_get_monotonic_time();
  char *message = des_step_error("1", take_held_lock, &h);
  double waited = (double)(g_get_monotonic_time() - t0) / G_USEC_PER_SEC;
  g_atomic_int_set(&h.release, 1);
  g_thread_join(t);
  g_mutex_clear(&h.lock);
  cr_assert(message, "the blocked child returned a result");
  cr_expect(strstr(message, "made no progress for 1 s"), "%s", message);
  cr_expect(!strstr(message, "SimGrid aborted"), "%s", message);
  cr_expect(waited < 30, "waited %g s for a 1 s stall limit", waited);
  g_free(message);
}

static void spin_once(double fraction, void *ctx)
{
  (void)fraction;
  gint *spun = ctx;
  if (*spun)
    return;
  *spun = 1;
  gint64 until = g_get_monotonic_time() + 3 * G_USEC_PER_SEC;
  while (g_get_monotonic_time() < until)
    ; /* busy: CPU time used, nothing sent, for longer than the stall limit */
}

Test(engine, a_des_child_that_computes_without_sending_for_longer_than_the_limit_is_not_killed,
     .timeout = 60)
{
  gint spun = 0;
  char *message = des_step_error("1.5", spin_once, &spun);
  cr_expect_null(message, "%s", message);
  g_free(message);
}

Test(engine, a_bad_des_stall_limit_is_an_input_error_naming_the_variable)
{
  const char *bad[] = {"0", "-3", "soon", "nan", "2s"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_setenv("DLSIM_DES_STALL", bad[i], TRUE);
    sim_options o = sim_options_for(ENG_DES);
    sim_result run;
    GError *err = NULL;
    cr_assert_not(sim_run_files("dgx-h100", "gpt3-1.3b-dp", NULL, &o, &run, &err), "%s", bad[i]);
    cr_expect(err->domain == CFG_ERROR && err->code == CFG_ERROR_INPUT, "%s", err->message);
    g_autofree char *named = g_strdup_printf("DLSIM_DES_STALL=%s: expected", bad[i]);
    cr_expect(strstr(err->message, named), "%s", err->message);
    g_error_free(err);
  }
  g_unsetenv("DLSIM_DES_STALL");
}

/* A macro's parts are derived once per (template, class) and count and then placed at each
 * start: placed from one set of costs that has seen other counts and starts, a macro's spans,
 * duration and hidden collective time are those of costs that see it first, bit for bit. */
Test(engine, a_macros_remembered_parts_place_it_as_derived_afresh)
{
  const char *sets[] = {"parallel.zero=3", NULL};
  prog_program *p = th_program("dgx-h100", "gpt3-1.3b-dp", sets);
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(p && th_load("dgx-h100", "gpt3-1.3b-dp", sets, &c, &w));
  hw_cluster *hw = hw_cluster_new(c);
  eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  coll_planner *pl = eng_planner_new(hw, &o);
  eng_costs *seen = eng_costs_new(p, hw, pl, &o);
  eng_costs_bind(seen, p);
  const uint32_t counts[] = {5, 7, 5, 5, 1};
  const double starts[] = {0, 1.25, 3.5e-3, 17.0, 0.5};
  int placed = 0;
  for (guint t = 0; t < p->classes->len; t++) {
    if (!prog_class_at(p, (int)t)->is_template)
      continue;
    for (size_t i = 0; i < G_N_ELEMENTS(counts); i++) {
      prog_op op = {.kind = PROG_COMPUTE, .tmpl = (int)t, .count = counts[i], .fixed_time = -1};
      eng_costs *fresh = eng_costs_new(p, hw, pl, &o);
      eng_costs_bind(fresh, p);
      eng_span a[ENG_OP_SPANS_MAX], b[ENG_OP_SPANS_MAX];
      double ha[PROG_NDIMS] = {0}, hb[PROG_NDIMS] = {0}, da, db;
      guint na = eng_op_place(seen, &op, 0, starts[i], a, ha, &da);
      guint nb = eng_op_place(fresh, &op, 0, starts[i], b, hb, &db);
      cr_assert(na == nb && da == db, "template %u, count %u", t, counts[i]);
      cr_assert_gt(na, 0);
      for (guint k = 0; k < na; k++)
        cr_assert(a[k].start == b[k].start && a[k].end == b[k].end && a[k].what == b[k].what,
                  "template %u, span %u", t, k);
      cr_assert(memcmp(ha, hb, sizeof ha) == 0, "template %u", t);
      eng_costs_free(fresh);
      placed++;
    }
  }
  cr_assert_gt(placed, 5);
  eng_costs_free(seen);
  coll_planner_free(pl);
  hw_cluster_free(hw);
  cfg_workload_free(w);
  cfg_cluster_free(c);
  prog_free(p);
}

/* The breakdown sorts a rank's span edges by merging the runs already in order (each stream's,
 * when grouped by stream): by hand, compute over 0-2 s, a tensor-parallel wait over 1-3 s and
 * a pipeline transfer alone over 4-5 s of a 6 s step are 2 s of compute, 1 s exposed, 2 s of
 * bubble (idle at 3-4 s, then the transfer) and 1 s else; and the same spans in any order and under any stream labels, in order
 * within a stream or not, give the same figures bit for bit. */
Test(engine, the_breakdown_does_not_depend_on_the_order_or_streams_of_its_spans)
{
  eng_span hand[] = {{4, 5, PROG_DIM_PP, 3}, {1, 3, PROG_DIM_TP, 2}, {0, 2, -1, 0}};
  double hidden[PROG_NDIMS] = {0};
  eng_result r = {0};
  eng_breakdown_of(hand, G_N_ELEMENTS(hand), hidden, true, 6, &r);
  cr_assert(r.compute == 2 && r.exposed_comm == 1 && r.bubble == 2 && r.other == 1,
            "%g %g %g %g", r.compute, r.exposed_comm, r.bubble, r.other);
  cr_assert(r.comm[PROG_DIM_TP] == 2 && r.exposed[PROG_DIM_TP] == 1 && r.comm[PROG_DIM_PP] == 1);
  GRand *rng = g_rand_new_with_seed(15);
  enum { N = 400 };
  eng_span spans[N];
  for (int i = 0; i < N; i++) {
    double a = g_rand_double_range(rng, 0, 10) * 0.1, len = g_rand_double_range(rng, 0, 0.05);
    spans[i] = (eng_span){a, a + len, g_rand_int_range(rng, -1, PROG_NDIMS), 0};
  }
  eng_result first = {0};
  eng_breakdown_of(spans, N, hidden, true, 1.1, &first);
  for (int trial = 0; trial < 20; trial++) {
    for (int i = N - 1; i > 0; i--) { /* shuffled, then labelled at random */
      int j = g_rand_int_range(rng, 0, i + 1);
      eng_span t = spans[i];
      spans[i] = spans[j];
      spans[j] = t;
    }
    for (int i = 0; i < N; i++)
      spans[i].stream = trial % 2 ? g_rand_int_range(rng, 0, PROG_NSTREAMS) : 0;
    eng_result again = {0};
    eng_breakdown_of(spans, N, hidden, true, 1.1, &again);
    cr_assert(again.compute == first.compute && again.exposed_comm == first.exposed_comm &&
              again.bubble == first.bubble && again.other == first.other, "trial %d", trial);
    cr_assert(memcmp(again.comm, first.comm, sizeof first.comm) == 0 &&
              memcmp(again.exposed, first.exposed, sizeof first.exposed) == 0, "trial %d", trial);
  }
  g_rand_free(rng);
}

/* ---- interference (gpu.efficiency.interference) ------------------------------------------- */

/* Two one-GPU nodes of the flows cluster whose GEMMs take 1.1 times as long beside a
 * collective and elementwise kernels 1.3 times. */
static hw_cluster *interfering_cluster(cfg_cluster **cfg)
{
  hw_cluster *plain = flows_cluster(2, 1, "[]", cfg);
  hw_cluster_free(plain);
  for (int k = 0; k < CFG_NKCLASSES; k++)
    (*cfg)->gpu.efficiency.interference[k] = 1;
  (*cfg)->gpu.efficiency.interference[CFG_KCLASS_GEMM] = 1.1;
  (*cfg)->gpu.efficiency.interference[CFG_KCLASS_ELEMENTWISE] = 1.3;
  return hw_cluster_new(*cfg);
}

/* Both ranks: a GEMM, then a data-parallel all-reduce of 64 MB (5.1 ms at 12.5 GB/s) beside a
 * second kernel of class `second` (~10 ms), which waits for the all-reduce when `after`; in a
 * layer pass (one run) when `in_layer`, else as the step's own ops. */
static prog_program *interfered_step(cfg_kernel_class second, bool after, bool in_layer)
{
  int dp;
  prog_program *p = pair_program("dp", PROG_DIM_DP, &dp);
  int cls = prog_class_add(p, "rank");
  int at = in_layer ? prog_template_add(p, "layer") : cls;
  uint32_t c0 = prog_compute(p, at, "c0", CFG_KCLASS_GEMM, CFG_BF16, 1e12, 0, NULL, 0);
  uint32_t ar = prog_comm(p, at, PROG_STREAM_DP, "ar", PROG_COLL_ALLREDUCE, dp, 64e6, &c0, 1);
  prog_compute(p, at, "c1", second, CFG_BF16, second == CFG_KCLASS_GEMM ? 1e12 : 0,
               second == CFG_KCLASS_GEMM ? 0 : 16e9, after ? &ar : &c0, 1);
  if (in_layer)
    prog_macro(p, cls, "layers", at, 1, NULL, 0);
  prog_rank_set_class(p, 0, cls);
  prog_rank_set_class(p, 1, cls);
  prog_finalize(p);
  return p;
}

static double interfered_time(const prog_program *p, const hw_cluster *hw, eng_kind kind,
                              cfg_layer_flows flows, double sm_reserved)
{
  eng_options o = {.kind = kind, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE,
                   .layer_flows = flows, .sm_reserved = sm_reserved};
  eng_result r;
  GError *err = NULL;
  cr_assert(eng_run(p, hw, &o, &r, &err), "%s", err ? err->message : "");
  double t = r.step_time;
  cr_assert(fabs(r.compute + r.exposed_comm + r.bubble + r.other - t) <= 1e-9 * t);
  eng_result_clear(&r);
  return t;
}

/* What the hand sum says against both engines, and in a layer pass against the DES's closed
 * form and flows. */
static void interfered_expect(cfg_kernel_class second, bool after, double sm, double expect)
{
  cfg_cluster *c = NULL;
  hw_cluster *hw = interfering_cluster(&c);
  for (int in_layer = 0; in_layer < 2; in_layer++) {
    prog_program *p = interfered_step(second, after, in_layer);
    double t[] = {interfered_time(p, hw, ENG_ANALYTIC, CFG_LAYER_FLOWS_AUTO, sm),
                  interfered_time(p, hw, ENG_DES, CFG_LAYER_FLOWS_AUTO, sm),
                  interfered_time(p, hw, ENG_DES, CFG_LAYER_FLOWS_ALWAYS, sm)};
    for (size_t i = 0; i < G_N_ELEMENTS(t); i++)
      cr_assert(fabs(t[i] - expect) <= 1e-9 * expect,
                "class %d, after %d, sm %g, in layer %d, run %zu: %.12g s, by hand %.12g s",
                second, after, sm, in_layer, i, t[i], expect);
    prog_free(p);
  }
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

static void interfered_parts(hw_cluster *hw, cfg_kernel_class second, double *gemm, double *other,
                             double *ar)
{
  hw_kernel g = {.kclass = CFG_KCLASS_GEMM, .dtype = CFG_BF16, .flops = 1e12};
  hw_kernel e = {.kclass = second, .dtype = CFG_BF16, .flops = second == CFG_KCLASS_GEMM ? 1e12 : 0,
                 .bytes = second == CFG_KCLASS_GEMM ? 0 : 16e9};
  *gemm = hw_kernel_time(hw, &g);
  *other = hw_kernel_time(hw, &e);
  eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE};
  eng_coll_result r;
  GError *err = NULL;
  cr_assert(eng_collective_time(hw, &o, PROG_COLL_ALLREDUCE, 2, 2, 64e6, &r, &err), "%s",
            err ? err->message : "");
  *ar = r.time;
}

/* A GEMM beside the all-reduce takes (1.1 - 1) of the overlapped time more: the whole
 * all-reduce, which is shorter than it. An elementwise kernel takes its class's 0.3 more; with
 * 20 % of the SMs reserved, a GEMM's 1.1 / 0.8. Outside layer passes and inside one, in both
 * engines. */
Test(engine, a_kernel_beside_a_collective_slows_by_its_class_factor_in_both_engines)
{
  cfg_cluster *c = NULL;
  hw_cluster *hw = interfering_cluster(&c);
  double g, g1, e1, ar;
  interfered_parts(hw, CFG_KCLASS_GEMM, &g, &g1, &ar);
  interfered_parts(hw, CFG_KCLASS_ELEMENTWISE, &g, &e1, &ar);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  cr_assert(ar > 4e-3 && ar < g1 && ar < e1, "all-reduce %g s, kernels %g, %g s", ar, g1, e1);
  interfered_expect(CFG_KCLASS_GEMM, false, 0, g + g1 + 0.1 * ar);
  interfered_expect(CFG_KCLASS_ELEMENTWISE, false, 0, g + e1 + 0.3 * ar);
  interfered_expect(CFG_KCLASS_GEMM, false, 0.2, g + g1 + (1.1 / 0.8 - 1) * ar);
}

/* A kernel that waits for the all-reduce never runs beside it: no slowdown, in both engines
 * and in a layer pass. */
Test(engine, a_kernel_after_a_collective_is_not_slowed)
{
  cfg_cluster *c = NULL;
  hw_cluster *hw = interfering_cluster(&c);
  double g, g1, ar;
  interfered_parts(hw, CFG_KCLASS_GEMM, &g, &g1, &ar);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  interfered_expect(CFG_KCLASS_GEMM, true, 0, g + ar + g1);
}

/* Two runs of a layer pass: a GEMM, then an asynchronous data-parallel all-reduce of its
 * output (a ZeRO reduction), which nothing in the pass waits for. The first run's all-reduce
 * runs beside the second run's GEMM, which takes 0.1 of it more; the second's ends the step:
 * 2 GEMMs + 1.1 all-reduces, in the closed form of both engines and as flows. */
Test(engine, an_asynchronous_collective_slows_the_next_runs_compute)
{
  cfg_cluster *c = NULL;
  hw_cluster *hw = interfering_cluster(&c);
  double g, g1, ar;
  interfered_parts(hw, CFG_KCLASS_GEMM, &g, &g1, &ar);
  int dp;
  prog_program *p = pair_program("dp", PROG_DIM_DP, &dp);
  int t = prog_template_add(p, "layer");
  uint32_t c0 = prog_compute(p, t, "c0", CFG_KCLASS_GEMM, CFG_BF16, 1e12, 0, NULL, 0);
  prog_comm(p, t, PROG_STREAM_DP, "ar", PROG_COLL_ALLREDUCE, dp, 64e6, &c0, 1);
  int cls = prog_class_add(p, "rank");
  prog_macro(p, cls, "layers", t, 2, NULL, 0);
  prog_rank_set_class(p, 0, cls);
  prog_rank_set_class(p, 1, cls);
  prog_finalize(p);
  double expect = 2 * g + 1.1 * ar;
  double got[] = {interfered_time(p, hw, ENG_ANALYTIC, CFG_LAYER_FLOWS_AUTO, 0),
                  interfered_time(p, hw, ENG_DES, CFG_LAYER_FLOWS_AUTO, 0),
                  interfered_time(p, hw, ENG_DES, CFG_LAYER_FLOWS_ALWAYS, 0)};
  for (size_t i = 0; i < G_N_ELEMENTS(got); i++)
    cr_assert(fabs(got[i] - expect) <= 1e-9 * expect, "run %zu: %.12g s, by hand %.12g s", i,
              got[i], expect);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
}

/* An MPI runtime driven from the host runs no kernel beside compute: GPT-3 1.3B's gradient
 * all-reduce under the backward costs the same step whatever the interference factors, where
 * NCCL's costs more with them. */
Test(engine, a_host_driven_runtime_charges_no_interference)
{
  const char *mpi[] = {"node.count=2", "collectives.runtime=mpi-ucx", NULL};
  const char *mpi_none[] = {"node.count=2", "collectives.runtime=mpi-ucx", NO_INTERFERENCE, NULL};
  const char *nccl[] = {"node.count=2", NULL};
  const char *nccl_none[] = {"node.count=2", NO_INTERFERENCE, NULL};
  double m = step_of("dgx-h100", "gpt3-1.3b-dp", mpi, ENG_ANALYTIC, NULL);
  double m0 = step_of("dgx-h100", "gpt3-1.3b-dp", mpi_none, ENG_ANALYTIC, NULL);
  double n = step_of("dgx-h100", "gpt3-1.3b-dp", nccl, ENG_ANALYTIC, NULL);
  double n0 = step_of("dgx-h100", "gpt3-1.3b-dp", nccl_none, ENG_ANALYTIC, NULL);
  cr_assert(m == m0, "MPI: %.12g s, without interference %.12g s", m, m0);
  cr_assert(n > n0 * (1 + 1e-4), "NCCL: %.12g s, without interference %.12g s", n, n0);
}

static int union_ref_cmp(const void *a, const void *b)
{
  const eng_interval *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* The interference charge's overlap as first written: the collectives that ended by `start`
 * dropped with GLib's remove_index_fast (when `prune`), the rest copied, clipped to
 * [start, end), sorted with g_array_sort and swept. */
static double union_ref(GArray *comms, bool prune, double start, double end)
{
  if (prune)
    for (guint i = comms->len; i-- > 0;)
      if (g_array_index(comms, eng_interval, i).end <= start)
        g_array_remove_index_fast(comms, i);
  GArray *b = g_array_new(FALSE, FALSE, sizeof(eng_interval));
  for (guint i = 0; i < comms->len; i++) {
    eng_interval x = g_array_index(comms, eng_interval, i);
    x.start = MAX(x.start, start);
    x.end = MIN(x.end, end);
    if (x.end > x.start)
      g_array_append_val(b, x);
  }
  g_array_sort(b, union_ref_cmp);
  double total = 0, reach = -INFINITY;
  for (guint j = 0; j < b->len; j++) {
    eng_interval x = g_array_index(b, eng_interval, j);
    x.start = MAX(x.start, reach);
    if (x.end <= x.start)
      continue;
    reach = x.end;
    total += MAX(0.0, MIN(end, x.end) - MAX(start, x.start)) * 1;
  }
  g_array_free(b, TRUE);
  return total;
}

/* The charge's overlap (a stable insertion sort on the stack, the pruning in place) equals the
 * first implementation bit for bit, ties included (their order decides the sum's last bit), on
 * a compute stream's ops walking forward among random collectives: as many as the stack holds
 * and more. */
Test(engine, the_interference_overlap_equals_its_reference_bit_for_bit)
{
  GRand *rng = g_rand_new_with_seed(15);
  cfg_cluster *c = NULL;
  hw_cluster *hw = interfering_cluster(&c);
  prog_program *p = prog_new(1);
  int cls = prog_class_add(p, "rank");
  prog_compute(p, cls, "gemm", CFG_KCLASS_GEMM, CFG_BF16, 1e12, 0, NULL, 0);
  prog_rank_set_class(p, 0, cls);
  prog_finalize(p);
  eng_options o = {0};
  coll_planner *pl = eng_planner_new(hw, &o);
  eng_costs *costs = eng_costs_new(p, hw, pl, &o);
  const prog_op *op = prog_op_at(p, cls, 0);
  guint ties = 0;
  for (int round = 0; round < 400; round++) {
    guint n = (guint)g_rand_int_range(rng, 1, round % 4 ? 12 : 80);
    GArray *ref = g_array_new(FALSE, FALSE, sizeof(eng_interval));
    eng_interval *fast = g_new(eng_interval, n);
    guint nfast = n;
    for (guint i = 0; i < n; i++) {
      /* starts on a coarse grid, ends anywhere: many equal starts once clipped */
      double s = g_rand_int_range(rng, 0, 20) * 0.1, e = s + g_rand_double_range(rng, 0, 0.7);
      fast[i] = (eng_interval){s, e};
      g_array_append_val(ref, fast[i]);
    }
    for (double at = 0; at < 2.5; at += g_rand_double_range(rng, 0.01, 0.4)) {
      double dur = g_rand_double_range(rng, 0.01, 0.9);
      double w = eng_interference_charge_v(costs, op, 0, at, dur, fast, &nfast, INFINITY);
      double want = union_ref(ref, true, at, at + dur);
      cr_assert(nfast == ref->len, "round %d: %u intervals kept, the reference %u", round, nfast,
                ref->len);
      cr_assert(memcmp(fast, ref->data, nfast * sizeof *fast) == 0,
                "round %d: kept in another order", round);
      cr_assert(want > 0 ? w > 0 : w == 0, "round %d: charged %.17g for %.17g", round, w, want);
      eng_interval *clipped = g_new(eng_interval, MAX(nfast, 1u));
      guint k = 0;
      for (guint i = 0; i < nfast; i++) {
        eng_interval x = {MAX(fast[i].start, at), MIN(fast[i].end, at + dur)};
        ties += k && x.start == at && clipped[k - 1].start == at;
        if (x.end > x.start)
          clipped[k++] = x;
      }
      double got = k ? eng_union_overlap(clipped, k, at, at + dur) : 0;
      cr_assert(memcmp(&got, &want, sizeof got) == 0, "round %d at %g: %.17g, reference %.17g",
                round, at, got, want);
      g_free(clipped);
    }
    g_free(fast);
    g_array_free(ref, TRUE);
  }
  cr_assert(ties > 100, "only %u tied starts tried", ties);
  eng_costs_free(costs);
  coll_planner_free(pl);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  g_rand_free(rng);
}

/* One DES step, `carry` or not (DLSIM_DES_CARRY): its time, exposed communication and the
 * executions and sleeps it ran. */
static double carry_step(const char *const *sets, bool carry, double *exposed, long *activities)
{
  g_setenv("DLSIM_DES_CARRY", carry ? "1" : "0", TRUE);
  sim_options o = sim_options_for(ENG_DES);
  sim_result run;
  GError *err = NULL;
  cr_assert(sim_run_files("dgx-h100", "megatron-22b", (char *const *)sets, &o, &run, &err), "%s",
            err ? err->message : "");
  g_unsetenv("DLSIM_DES_CARRY");
  double t = run.eng.step_time;
  *exposed = run.eng.exposed_comm;
  *activities = run.eng.activities;
  sim_result_clear(&run);
  return t;
}

/* A compute run's interference charge carried into the next activity of its actor and of those
 * waiting for it, instead of executed on its own, gives the same step: TP 2 x CP x PP x DP on
 * rails over several leaf groups, on a 4:1 oversubscribed fat tree and beside another tenant's
 * flow (the pipeline's sends, the DP x CP reduction, interference on every pass), with at least
 * a twentieth fewer executions and sleeps (Transformer Engine's CP ring adds host-only kernels
 * that nothing carries: CP 4 on rails saves 8 %). With layer passes as flows, whose actors share the host,
 * nothing is carried. */
Test(engine, carried_interference_charges_give_the_executed_steps)
{
  const char *fabrics[][3] = {
      {"network.tiers[0].nodes_per_switch=1", "network.topology=rail-optimized", NULL},
      {"network.tiers[1].oversubscription=4", "network.topology=fat-tree", NULL},
      {"network.background=[{links: node 0, fraction: 0.5}]", NULL, NULL}};
  const int layouts[][3] = {{2, 2, 2}, {4, 2, 2}, {2, 4, 3}, {2, 3, 4}}; /* CP, PP, DP */
  for (size_t f = 0; f < G_N_ELEMENTS(fabrics); f++)
    for (size_t l = 0; l < G_N_ELEMENTS(layouts); l++) {
      int cp = layouts[l][0], pp = layouts[l][1], dp = layouts[l][2];
      g_auto(GStrv) k = layout_keys(cp, pp, dp);
      const char *sets[] = {k[0], "parallel.tp=2", k[1], k[2], k[3], k[4],
                            "training.flash_attention=true", "collectives.layer_flows=never",
                            fabrics[f][0], fabrics[f][1], NULL};
      double ea, eb;
      long na, nb;
      double a = carry_step(sets, true, &ea, &na), b = carry_step(sets, false, &eb, &nb);
      cr_assert(fabs(a - b) <= 1e-9 * b && fabs(ea - eb) <= 1e-9 * b,
                "%s, CP %d x PP %d x DP %d: %.17g s (exposed %.17g) carried, %.17g (%.17g) "
                "executed", fabrics[f][0], cp, pp, dp, a, ea, b, eb);
      cr_assert(na * 20 < nb * 19, "%s, CP %d x PP %d x DP %d: %ld activities carried, %ld executed",
                fabrics[f][0], cp, pp, dp, na, nb);
    }
  const char *flows[] = {"node.count=2", "parallel.tp=2", "parallel.cp=2", "parallel.pp=2",
                         "parallel.dp=2", "training.global_batch=16",
                         "training.flash_attention=true", "collectives.layer_flows=always", NULL};
  double ea, eb;
  long na, nb;
  double a = carry_step(flows, true, &ea, &nb), b = carry_step(flows, false, &eb, &na);
  cr_assert(a == b && na == nb, "layers as flows: %.17g s, %ld activities / %.17g s, %ld", a, nb,
            b, na);
}

/* Two GPUs reducing 37.5 MB together from the start; meanwhile GPU 0 computes a GEMM, which the
 * reduction slows by half (its interference charge), and sends 1 MB to GPU 1, which posts the
 * receive after 1.2 times the GEMM's own time of other work, so after the GEMM's execution but
 * before its charge: the charge carried, GPU 0's end of the transfer is first in SimGrid's time
 * and last in the step's, and the transfer must start from it. Then 10 ms on GPU 1. */
static prog_program *carried_send(const hw_cluster *hw)
{
  prog_program *p = prog_new(2);
  const int both[] = {0, 1};
  int dp = prog_family_add(p, "dp", PROG_DIM_DP), pp = prog_family_add(p, "pp", PROG_DIM_PP);
  int g = prog_group_add(p, both, 2);
  for (int r = 0; r < 2; r++) {
    prog_family_set(p, dp, r, g);
    prog_family_set(p, pp, r, g);
  }
  int c0 = prog_class_add(p, "sender"), c1 = prog_class_add(p, "receiver");
  prog_comm(p, c0, PROG_STREAM_DP, "reduce", PROG_COLL_ALLREDUCE, dp, 37.5e6, NULL, 0);
  uint32_t gemm = prog_compute(p, c0, "gemm", CFG_KCLASS_GEMM, CFG_BF16, 1e11, 0, NULL, 0);
  prog_comm(p, c0, PROG_STREAM_PP, "send", PROG_COLL_SENDRECV, pp, 1e6, &gemm, 1);
  prog_comm(p, c1, PROG_STREAM_DP, "reduce", PROG_COLL_ALLREDUCE, dp, 37.5e6, NULL, 0);
  uint32_t other = prog_compute(p, c1, "other", CFG_KCLASS_OTHER, CFG_BF16, 0, 0, NULL, 0);
  uint32_t recv = prog_comm(p, c1, PROG_STREAM_PP_RECV, "recv", PROG_COLL_SENDRECV, pp, 1e6,
                            &other, 1);
  uint32_t after = prog_compute(p, c1, "after", CFG_KCLASS_OTHER, CFG_BF16, 0, 0, &recv, 1);
  prog_op_at(p, c1, other)->fixed_time = 1.2 * eng_compute_time(hw, prog_op_at(p, c0, gemm));
  prog_op_at(p, c1, after)->fixed_time = 10e-3;
  prog_rank_set_class(p, 0, c0);
  prog_rank_set_class(p, 1, c1);
  prog_finalize(p);
  return p;
}

Test(engine, a_carried_charge_starts_a_transfer_whose_other_end_came_first)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = flows_cluster(2, 1, "[]", &cfg);
  cfg->gpu.efficiency.interference[CFG_KCLASS_GEMM] = 1.5;
  prog_program *p = carried_send(hw);
  g_setenv("DLSIM_DES_CARRY", "0", TRUE);
  eng_result executed = flows_run(p, hw, ENG_DES, NULL);
  g_unsetenv("DLSIM_DES_CARRY");
  eng_result carried = flows_run(p, hw, ENG_DES, NULL);
  cr_assert(fabs(carried.step_time - executed.step_time) <= 1e-9 * executed.step_time,
            "carried %.17g s, executed %.17g s", carried.step_time, executed.step_time);
  /* the charge's execution gone, the receiver's wait for the sender come */
  cr_assert_eq(carried.activities, executed.activities);
  eng_result_clear(&executed);
  eng_result_clear(&carried);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* Two folded runs whose exposed wait differs only by rounding (1e-15 s against -5e-15 s) extend
 * to a wait of zero, not to a negative time the run would refuse; a part truly below zero stays
 * negative so that the run's sanity check still reports it. */
Test(engine, extrapolation_drops_rounding_below_zero)
{
  eng_result a = {.step_time = 0.48, .compute = 0.47}, b = {.step_time = 3.8, .compute = 3.7};
  a.exposed[PROG_DIM_DP] = 7.8e-16;
  b.exposed[PROG_DIM_DP] = -5.4e-15;
  a.bubble = 0.1;
  b.bubble = 0.05;
  eng_result r = {0};
  eng_result_extrapolate(&a, &b, 8, &r);
  cr_assert_eq(r.exposed[PROG_DIM_DP], 0.0);
  cr_assert_float_eq(r.step_time, 0.48 + (3.8 - 0.48) * 8, 1e-9);
  cr_assert(r.bubble < 0, "a real negative part is kept for the check: %g", r.bubble);
}
