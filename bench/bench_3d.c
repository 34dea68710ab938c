/* Simulator speed on 3D-parallel training: GPT-3 175B, TP 8 x PP 8 (interleaved x3) x DP n on
 * DGX A100 nodes, from 64 to 16384 simulated GPUs.
 *   analytic: the time of one configuration as the planner pays it (build the program,
 *             estimate memory, run the engine; the files are read once), the mean of 20 runs,
 *             wall and CPU (on a shared machine the CPU time is the one to compare);
 *   des:      one step in SimGrid (tensor-parallel ranks folded), in a fresh process so its
 *             peak RSS is its own.
 * The defaults give the README's table. */
#include "bench_util.h"
#include "run/run.h"

static const char bench_usage[] =
    "usage: dlsim_bench_3d [MAX_GPUS] [MAX_DES_GPUS]\n"
    "Simulator speed on one training step of GPT-3 175B, TP 8 x PP 8 (interleaved x3) x DP, DGX\n"
    "A100 nodes, on 64, 1024, 8192 and 16384 GPUs (global batch 1536 up to DP 16, then 16\n"
    "micro-batches per replica): the analytic engine's time per configuration (mean of 20) and\n"
    "one DES step, wall and CPU seconds, with peak RSS and SimGrid messages, each in a fresh\n"
    "process. From 1024 GPUs on, a sweep of 20 analytic configurations of the 1024-GPU layout\n"
    "(global batch 768-3072, ZeRO 0-1, selective or full recomputation): CPU per configuration\n"
    "with each run alone and with one cache (sim_cache) shared by the sweep.\n"
    "  MAX_GPUS      largest size to run (default 16384)\n"
    "  MAX_DES_GPUS  largest size the DES runs (default 16384: the README's table; about 5\n"
    "                minutes and 400 MB at 16384)\n"
    "At 16384 DES GPUs it then times one DES step of Llama 3 405B (8K sequence, batch 4096) on\n"
    "16384 H100 (dgx-h100) in the layouts TP 8 x PP 16 x DP 128 and TP 2 x CP 8 x PP 16 x DP\n"
    "64, and of the second at DP 8 on 2048 GPUs (batch 512), with the CPU seconds, how many\n"
    "GPUs the DES simulated (the others folded) and the executions and sleeps it ran besides\n"
    "its messages (SimGrid activities, what its cost goes with).\n";

/* The job on `gpus` GPUs, loaded once: global batch 1536 (as GPT-3 trained) up to DP 16, then
 * 16 micro-batches per replica. */
static bool bench_load(int gpus, cfg_cluster **c, cfg_workload **w)
{
  char nodes[64], dp[64], batch[64];
  int replicas = gpus / 64;
  g_snprintf(nodes, sizeof nodes, "node.count=%d", gpus / 8);
  g_snprintf(dp, sizeof dp, "parallel.dp=%d", replicas);
  g_snprintf(batch, sizeof batch, "training.global_batch=%d", replicas <= 16 ? 1536 : replicas * 16);
  char *sets[] = {nodes, dp, batch, NULL};
  GError *err = NULL;
  if (cfg_load_with("dgx-a100", "megatron-175b", sets, c, w, &err))
    return true;
  fprintf(stderr, "bench: %s\n", err->message);
  g_error_free(err);
  return false;
}

static bench_row bench_one(int gpus, bool des)
{
  bench_row row = {0};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  if (!bench_load(gpus, &c, &w))
    return row;
  sim_options o = sim_options_for(des ? ENG_DES : ENG_ANALYTIC);
  int reps = des ? 1 : 20;
  gint64 t0 = g_get_monotonic_time();
  double c0 = bench_cpu_seconds();
  for (int i = 0; i < reps; i++) {
    sim_result run;
    GError *err = NULL;
    row.ok = sim_run(c, w, &o, &run, &err);
    if (row.ok) {
      row.sim = run.step_time;
      row.messages = run.eng.messages;
    } else {
      fprintf(stderr, "bench: %s\n", err->message);
      g_error_free(err);
    }
    sim_result_clear(&run);
    if (!row.ok)
      break;
  }
  row.wall = (double)(g_get_monotonic_time() - t0) / 1e6 / reps;
  row.cpu = (bench_cpu_seconds() - c0) / reps;
  cfg_workload_free(w);
  cfg_cluster_free(c);
  return row;
}

/* A sweep of the 1024-GPU layout as the planner or a what-if pays it: 20 configurations that
 * differ in a few numbers (global batch 768-3072, ZeRO 0 or 1, selective or full
 * recomputation), loaded once, each simulated once on the analytic engine, with one cache
 * shared by all (`shared`) or each alone. */
#define BENCH_SWEEP 20

static bool bench_sweep_config(const cfg_workload *base, int i, cfg_workload *w)
{
  static const int batches[] = {1536, 1024, 2048, 3072, 768};
  *w = *base;
  w->training.global_batch = batches[i % 5];
  w->parallel.zero = i / 5 % 2;
  w->training.recompute = i / 10 ? CFG_RECOMPUTE_FULL : CFG_RECOMPUTE_SELECTIVE;
  return true;
}

static bench_row bench_sweep(int gpus, bool shared)
{
  bench_row row = {0};
  cfg_cluster *c = NULL;
  cfg_workload *base = NULL;
  if (!bench_load(gpus, &c, &base))
    return row;
  GError *err = NULL;
  sim_options o = sim_options_for(ENG_ANALYTIC);
  o.cache = shared ? sim_cache_new(c, base, &err) : NULL;
  row.ok = !shared || o.cache;
  double c0 = bench_cpu_seconds();
  gint64 t0 = g_get_monotonic_time();
  for (int i = 0; i < BENCH_SWEEP && row.ok; i++) {
    cfg_workload w;
    sim_result run;
    bench_sweep_config(base, i, &w);
    row.ok = sim_run(c, &w, &o, &run, &err);
    row.sim += row.ok ? run.step_time / BENCH_SWEEP : 0;
    sim_result_clear(&run);
  }
  row.wall = (double)(g_get_monotonic_time() - t0) / 1e6 / BENCH_SWEEP;
  row.cpu = (bench_cpu_seconds() - c0) / BENCH_SWEEP;
  if (err) {
    fprintf(stderr, "bench: %s\n", err->message);
    g_error_free(err);
  }
  sim_cache_free(o.cache);
  cfg_workload_free(base);
  cfg_cluster_free(c);
  return row;
}

static void bench_sweep_table(void)
{
  printf("\ndlsim bench: a sweep of %d analytic configurations of the 1024-GPU layout (global "
         "batch, ZeRO 0-1, recomputation), per configuration\n", BENCH_SWEEP);
  printf("%-8s %16s %12s %12s\n", "cache", "mean_step_s", "wall_s", "cpu_s");
  for (int shared = 0; shared < 2; shared++) {
    bench_row r = bench_isolated(bench_sweep, 1024, shared);
    if (!r.ok) {
      printf("%-8s %16s\n", shared ? "shared" : "alone", "failed");
      continue;
    }
    printf("%-8s %16.6f %12.6f %12.6f\n", shared ? "shared" : "alone", r.sim, r.wall, r.cpu);
    fflush(stdout);
  }
}

/* Llama 3 405B on H100: layout 0 is TP 8 x PP 16 x DP 128 on 16384 GPUs, 1 TP 2 x CP 8 x PP 16
 * x DP 64 on 16384, 2 the same layout at DP 8 on 2048 (the same per-replica step, a quick
 * check of a change). */
static bench_row bench_405b(int layout, bool des)
{
  (void)des;
  bench_row row = {0};
  char *tp8[] = {"node.count=2048", "parallel.tp=8", "parallel.cp=1", "parallel.pp=16",
                 "parallel.dp=128", "training.global_batch=4096", NULL};
  char *cp8[] = {"node.count=2048", "parallel.tp=2", "parallel.cp=8", "parallel.pp=16",
                 "parallel.dp=64", "training.global_batch=4096", "training.flash_attention=true",
                 NULL};
  char *cp8_small[] = {"node.count=256", "parallel.tp=2", "parallel.cp=8", "parallel.pp=16",
                       "parallel.dp=8", "training.global_batch=512",
                       "training.flash_attention=true", NULL};
  char **layouts[] = {tp8, cp8, cp8_small};
  sim_options o = sim_options_for(ENG_DES);
  sim_result run;
  GError *err = NULL;
  gint64 t0 = g_get_monotonic_time();
  row.ok = sim_run_files("dgx-h100", "llama3-405b", layouts[layout], &o, &run, &err);
  row.wall = (double)(g_get_monotonic_time() - t0) / 1e6;
  if (row.ok) {
    row.sim = run.step_time;
    row.messages = run.eng.messages;
    row.simulated = run.eng.fold.ranks;
    row.activities = run.eng.activities;
    sim_result_clear(&run);
  } else {
    fprintf(stderr, "bench: %s\n", err->message);
    g_error_free(err);
  }
  return row;
}

static void bench_405b_table(void)
{
  printf("\ndlsim bench: one DES step, Llama 3 405B, 8K sequence, batch 4096 on 16384 H100 "
         "(dgx-h100), batch 512 on 2048\n");
  printf("%-28s %14s %10s %10s %12s %10s %10s %11s\n", "layout", "simulated_s", "wall_s",
         "cpu_s", "peak_rss_MB", "messages", "sim_gpus", "activities");
  const char *names[] = {"tp8-pp16-dp128", "tp2-cp8-pp16-dp64", "tp2-cp8-pp16-dp8 (2048)"};
  for (int l = 0; l < 3; l++) {
    bench_row r = bench_isolated(bench_405b, l, true);
    if (!r.ok) {
      printf("%-28s %14s\n", names[l], "failed");
      continue;
    }
    printf("%-28s %14.6f %10.1f %10.1f %12.1f %10ld %10d %11ld\n", names[l], r.sim, r.wall,
           r.cpu, r.rss_mb, r.messages, r.simulated, r.activities);
    fflush(stdout);
  }
  printf("(per pipeline pass of a simulated GPU the DES runs one execution, one sleep (the later "
         "end's latency), one transfer and about 1.4 semaphore waits; SimGrid's work per "
         "activity and its solver take most of the CPU, dlsim's own code 7-10 %%; a transfer's "
         "route inside a rail group is stored per GPU pair, not searched)\n");
}

int main(int argc, char **argv)
{
  bench_args(argc, argv, bench_usage, 2);
  int max = argc > 1 ? atoi(argv[1]) : 16384;
  int max_des = argc > 2 ? atoi(argv[2]) : 16384;
  printf("dlsim bench: one training step, GPT-3 175B, TP 8 x PP 8 (interleaved x3) x DP, "
         "DGX A100 nodes\n");
  printf("%6s  %-9s %14s %12s %12s %12s %10s\n", "gpus", "engine", "simulated_s", "wall_s",
         "cpu_s", "peak_rss_MB", "messages");
  const int sizes[] = {64, 1024, 8192, 16384};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes) && sizes[i] <= max; i++)
    for (int e = 0; e < 2; e++) {
      if (e == 1 && sizes[i] > max_des)
        continue;
      bench_row r = bench_isolated(bench_one, sizes[i], e == 1);
      const char *engine = e ? "des" : "analytic";
      if (!r.ok) {
        printf("%6d  %-9s %14s\n", sizes[i], engine, "failed");
        continue;
      }
      printf("%6d  %-9s %14.6f %12.6f %12.6f %12.1f %10ld\n", sizes[i], engine, r.sim, r.wall,
             r.cpu, r.rss_mb, r.messages);
      fflush(stdout);
    }
  if (max >= 1024)
    bench_sweep_table();
  if (max >= 16384 && max_des >= 16384)
    bench_405b_table();
  return 0;
}
