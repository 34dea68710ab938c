/* Collective schedules: closed forms, DES = analytic without contention, folded = unfolded. */
#include "collectives/collectives.h"
#include "engine/engine.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* A cluster of `nodes` x `gpn` GPUs with round numbers, overhead 0 so closed forms are exact. */
static hw_cluster *make_cluster(int nodes, int gpn, cfg_cluster **cfg)
{
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS},\n"
      "      efficiency: {comm_overhead: 0}}\n"
      "node: {count: %d, gpus_per_node: %d, intra: {bandwidth: 100GB/s, latency: 2us}}\n"
      "network: {nic_bandwidth: 100Gb/s, tiers: [{name: leaf, latency: 1us}]}\n",
      nodes, gpn);
  g_autofree char *path = th_write("c.yaml", text);
  cr_assert(th_load(path, NULL, NULL, cfg, NULL));
  return hw_cluster_new(*cfg);
}

/* A program in which every rank runs one collective over all ranks. */
static prog_program *one_collective(int n, prog_coll op, double bytes)
{
  prog_program *p = prog_new(n);
  int cls = prog_class_add(p, "all");
  int fam = prog_family_add(p, "world", PROG_DIM_DP);
  g_autofree int *ranks = g_new(int, n);
  for (int r = 0; r < n; r++)
    ranks[r] = r;
  int g = prog_group_add(p, ranks, n);
  for (int r = 0; r < n; r++) {
    prog_rank_set_class(p, r, cls);
    prog_family_set(p, fam, r, g);
  }
  prog_finalize(p);
  prog_comm(p, cls, PROG_STREAM_DP, "coll", op, fam, bytes, NULL, 0);
  return p;
}

static double run_engine(prog_program *p, hw_cluster *hw, eng_kind kind, bool unfold)
{
  eng_options o = {.kind = kind, .unfold = unfold, .algo = COLL_ALGO_AUTO};
  eng_result r;
  GError *err = NULL;
  bool ok = eng_run(p, hw, &o, &r, &err);
  cr_assert(ok, "engine failed: %s", err ? err->message : "");
  double t = r.step_time;
  eng_result_clear(&r);
  return t;
}

Test(collectives, ring_allreduce_matches_closed_form_2_to_512)
{
  const int sizes[] = {2, 3, 4, 8, 16, 64, 128, 512};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    int p = sizes[i];
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(p, 1, &cfg);
    g_autofree int *ranks = g_new(int, p);
    for (int r = 0; r < p; r++)
      ranks[r] = r;
    double S = 1 << 30;
    coll_schedule *s = coll_schedule_new(hw, PROG_COLL_ALLREDUCE, ranks, p, S, COLL_ALGO_RING, true);
    /* textbook ring: 2(p-1) steps of S/p over a 12.5 GB/s link of 1 us latency; the folded
     * message carries all steps' bytes, truncated to whole bytes as SimGrid sends them */
    double alpha = 1e-6, B = 12.5e9;
    double expect = 2.0 * (p - 1) * alpha + floor(2.0 * (p - 1) * (S / p)) / B;
    cr_assert_float_eq(s->time, expect, expect * 1e-12, "p=%d: %.12g vs %.12g", p, s->time, expect);
    coll_schedule_free(s);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, des_ring_allreduce_matches_closed_form)
{
  const int sizes[] = {2, 64, 512};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    int p = sizes[i];
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(p, 1, &cfg);
    double S = 1 << 30;
    prog_program *prog = one_collective(p, PROG_COLL_ALLREDUCE, S);
    double t = run_engine(prog, hw, ENG_DES, false);
    double expect = 2.0 * (p - 1) * 1e-6 + floor(2.0 * (p - 1) * (S / p)) / 12.5e9;
    cr_assert_float_eq(t, expect, expect * 1e-9, "p=%d: des %.12g vs %.12g", p, t, expect);
    prog_free(prog);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, des_equals_analytic_uncontended)
{
  const struct {
    int nodes, gpn;
    prog_coll op;
  } cases[] = {{4, 1, PROG_COLL_ALLREDUCE}, {1, 8, PROG_COLL_ALLREDUCE}, {2, 8, PROG_COLL_ALLREDUCE},
               {4, 4, PROG_COLL_ALLGATHER}, {4, 4, PROG_COLL_REDUCESCATTER},
               {2, 4, PROG_COLL_BROADCAST}, {2, 4, PROG_COLL_REDUCE}, {4, 1, PROG_COLL_ALLTOALL}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(cases[i].nodes, cases[i].gpn, &cfg);
    prog_program *p = one_collective(cases[i].nodes * cases[i].gpn, cases[i].op, 256e6);
    double a = run_engine(p, hw, ENG_ANALYTIC, false);
    double d = run_engine(p, hw, ENG_DES, false);
    cr_assert(a > 0);
    cr_assert_float_eq(d, a, a * 1e-9, "%s on %dx%d: des %.12g analytic %.12g",
                       prog_coll_name(cases[i].op), cases[i].nodes, cases[i].gpn, d, a);
    prog_free(p);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, folded_equals_step_by_step_on_a_uniform_ring)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(8, 1, &cfg);
  prog_program *p = one_collective(8, PROG_COLL_ALLREDUCE, 64e6);
  double folded = run_engine(p, hw, ENG_DES, false);
  double steps = run_engine(p, hw, ENG_DES, true);
  double steps_analytic = run_engine(p, hw, ENG_ANALYTIC, true);
  cr_assert_float_eq(steps, folded, folded * 1e-6, "steps %.12g folded %.12g", steps, folded);
  cr_assert_float_eq(steps_analytic, steps, steps * 1e-9);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, one_gpu_takes_no_time)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 1, &cfg);
  for (int op = 0; op < PROG_NCOLLS; op++) {
    if (op == PROG_COLL_SENDRECV)
      continue;
    int r0 = 0;
    coll_schedule *s = coll_schedule_new(hw, (prog_coll)op, &r0, 1, 1e9, COLL_ALGO_AUTO, true);
    cr_assert_eq(s->time, 0.0, "%s", prog_coll_name((prog_coll)op));
    coll_schedule_free(s);
  }
  prog_program *p = one_collective(1, PROG_COLL_ALLREDUCE, 1e9);
  cr_assert_eq(run_engine(p, hw, ENG_DES, false), 0.0);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, group_must_be_a_subset_of_the_cluster)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 2, &cfg);
  int bad[] = {0, 1, 7};
  GError *err = NULL;
  cr_assert_not(coll_group_check(hw, bad, 3, &err));
  cr_assert(strstr(err->message, "rank 7 is not a GPU of the cluster (it has 4 GPUs, 0..3)"), "%s", err->message);
  g_clear_error(&err);
  int dup[] = {0, 1, 1};
  cr_assert_not(coll_group_check(hw, dup, 3, &err));
  cr_assert(strstr(err->message, "rank 1 appears twice"));
  g_clear_error(&err);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, busbw_monotone_in_size)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(4, 8, &cfg);
  int ranks[32];
  for (int r = 0; r < 32; r++)
    ranks[r] = r;
  double prev = 0;
  for (double size = 8; size <= 8.0 * (1 << 30); size *= 2) {
    coll_schedule *s = coll_schedule_new(hw, PROG_COLL_ALLREDUCE, ranks, 32, size, COLL_ALGO_AUTO, true);
    double busbw = size / s->time * coll_busbw_factor(PROG_COLL_ALLREDUCE, 32);
    cr_assert(busbw >= prev * (1 - 1e-9), "busbw fell at %g bytes", size);
    prev = busbw;
    coll_schedule_free(s);
  }
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}
