/* Simulator speed for collectives: one 1 GiB ring all-reduce over 512 to 8192 simulated GPUs
 * with the DES engine (DGX H100 nodes of 8), and a full nccl-tests size sweep (8 B to 8 GiB,
 * 31 sizes) with the analytic engine. Each measurement runs in a fresh process. The defaults
 * give the README's table. */
#include "bench_util.h"
#include "config/config.h"
#include "engine/engine.h"

static const char bench_usage[] =
    "usage: dlsim_bench_coll [MAX_GPUS]\n"
    "Simulator speed on collectives, DGX H100 nodes, 512, 2048 and 8192 GPUs: one 1 GiB ring\n"
    "all-reduce on the DES, and an all-reduce sweep of 31 sizes from 8 B to 8 GiB on the\n"
    "analytic engine; wall time, peak RSS and SimGrid messages, each in a fresh process.\n"
    "  MAX_GPUS  largest size to run (default 8192: the README's table)\n";

static hw_cluster *bench_cluster(int gpus, cfg_cluster **c)
{
  char nodes[64];
  g_snprintf(nodes, sizeof nodes, "node.count=%d", gpus / 8);
  cfg_override ov = {0};
  cfg_override_parse(nodes, &ov, NULL);
  bool ok = cfg_load("dgx-h100", NULL, &ov, 1, c, NULL, NULL);
  cfg_override_clear(&ov);
  return ok ? hw_cluster_new(*c) : NULL;
}

static bench_row bench_des_ring(int gpus)
{
  bench_row row = {0};
  cfg_cluster *c = NULL;
  hw_cluster *hw = bench_cluster(gpus, &c);
  eng_options o = {.kind = ENG_DES, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE};
  prog_program *p = hw ? eng_collective_program(PROG_COLL_ALLREDUCE, gpus, gpus, 1073741824.0) : NULL;
  eng_result r;
  if (p && eng_run(p, hw, &o, &r, NULL)) {
    row.ok = 1;
    row.sim = r.step_time;
    row.wall = r.wall_time;
    row.messages = r.messages;
    eng_result_clear(&r);
  }
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  return row;
}

static bench_row bench_sweep(int gpus)
{
  bench_row row = {0};
  cfg_cluster *c = NULL;
  hw_cluster *hw = bench_cluster(gpus, &c);
  if (!hw)
    return row;
  gint64 t0 = g_get_monotonic_time();
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  int *ranks = g_new(int, gpus);
  for (int i = 0; i < gpus; i++)
    ranks[i] = i;
  double total = 0;
  row.ok = 1;
  for (double s = 8; s <= 8.0 * 1073741824.0; s *= 2) {
    const coll_schedule *sched = coll_planner_get(pl, PROG_COLL_ALLREDUCE, ranks, gpus, 0, s, NULL, NULL);
    row.ok &= sched != NULL;
    total += sched ? sched->time : 0;
  }
  row.wall = (double)(g_get_monotonic_time() - t0) / 1e6;
  row.sim = total;
  g_free(ranks);
  coll_planner_free(pl);
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  return row;
}

static bench_row bench_coll(int gpus, bool sweep)
{
  return sweep ? bench_sweep(gpus) : bench_des_ring(gpus);
}

int main(int argc, char **argv)
{
  bench_args(argc, argv, bench_usage, 1);
  int max = argc > 1 ? atoi(argv[1]) : 8192;
  printf("dlsim bench: collectives on DGX H100 nodes (8 GPUs, NVSwitch, 8x NDR)\n");
  printf("%6s  %-34s %14s %10s %12s %10s\n", "gpus", "what", "simulated_s", "wall_s", "peak_rss_MB",
         "messages");
  const int sizes[] = {512, 2048, 8192};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes) && sizes[i] <= max; i++) {
    bench_row r = bench_isolated(bench_coll, sizes[i], false);
    printf("%6d  %-34s %14.6f %10.3f %12.1f %10ld\n", sizes[i], "des: 1 GiB ring all-reduce",
           r.sim, r.wall, r.rss_mb, r.messages);
    r = bench_isolated(bench_coll, sizes[i], true);
    printf("%6d  %-34s %14.6f %10.4f %12.1f %10s\n", sizes[i], "analytic: sweep 8 B-8 GiB (31 sizes)",
           r.sim, r.wall, r.rss_mb, "-");
  }
  return 0;
}
