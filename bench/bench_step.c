/* Simulator speed: wall time and peak memory of dlsim itself for one data-parallel training step
 * (ResNet-50, bf16, batch 64 per GPU, DGX A100 nodes of 8 GPUs) on 8 to 8192 simulated GPUs,
 * with both engines. Each measurement runs in a fresh process so peak RSS is its own. The
 * defaults give the README's table. */
#include "bench_util.h"
#include "run/run.h"

static const char bench_usage[] =
    "usage: dlsim_bench [MAX_GPUS]\n"
    "Simulator speed on one data-parallel training step: ResNet-50, bf16, batch 64 per GPU, DGX\n"
    "A100 nodes, on 8, 64, 512, 2048 and 8192 simulated GPUs, with the analytic engine and the\n"
    "DES; wall time, peak RSS and SimGrid messages, each in a fresh process.\n"
    "  MAX_GPUS  largest size to run (default 8192: the README's table)\n";

static bench_row bench_one(int gpus, bool des)
{
  bench_row row = {0};
  char nodes[64], batch[64];
  g_snprintf(nodes, sizeof nodes, "node.count=%d", gpus / 8);
  g_snprintf(batch, sizeof batch, "training.global_batch=%d", gpus * 64);
  char *sets[] = {nodes, batch, "training.dtype=bf16", NULL};
  sim_result run;
  sim_options o = sim_options_for(des ? ENG_DES : ENG_ANALYTIC);
  GError *err = NULL;
  if (sim_run_files("dgx-a100", "resnet50-horovod", sets, &o, &run, &err)) {
    row.ok = 1;
    row.sim = run.eng.step_time;
    row.wall = run.eng.wall_time;
    row.messages = run.eng.messages;
  } else {
    fprintf(stderr, "bench: %s\n", err->message);
    g_error_free(err);
  }
  sim_result_clear(&run);
  return row;
}

int main(int argc, char **argv)
{
  bench_args(argc, argv, bench_usage, 1);
  int max = argc > 1 ? atoi(argv[1]) : 8192;
  printf("dlsim bench: one data-parallel step, ResNet-50 bf16, batch 64/GPU, DGX A100 nodes\n");
  printf("%6s  %-9s %14s %10s %12s %10s\n", "gpus", "engine", "simulated_s", "wall_s",
         "peak_rss_MB", "messages");
  const int sizes[] = {8, 64, 512, 2048, 8192};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes) && sizes[i] <= max; i++)
    for (int e = 0; e < 2; e++) {
      eng_kind kind = e ? ENG_DES : ENG_ANALYTIC;
      bench_row r = bench_isolated(bench_one, sizes[i], e == 1);
      if (!r.ok) {
        printf("%6d  %-9s %14s\n", sizes[i], eng_kind_name(kind), "failed");
        continue;
      }
      printf("%6d  %-9s %14.6f %10.4f %12.1f %10ld\n", sizes[i], eng_kind_name(kind), r.sim, r.wall,
             r.rss_mb, r.messages);
    }
  return 0;
}
