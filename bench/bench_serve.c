/* Simulator speed of dlsim serve: wall time and peak memory to simulate a request stream,
 * each in a fresh process so its peak RSS is its own. */
#include "bench_util.h"
#include "serving/serving.h"

static const char bench_usage[] =
    "usage: dlsim_bench_serve [REQUESTS]\n"
    "Simulator speed of dlsim serve on DGX H100: wall time, peak RSS and engine iterations to\n"
    "simulate a request stream for each serving case (Llama 2 7B and Llama 3 70B, schedulers\n"
    "and rates as labelled), each in a fresh process.\n"
    "  REQUESTS  requests per run (default 10000: the README's figure)\n";

typedef struct {
  const char *what, *workload;
  const char *sets[10];
} bench_case;

static int bench_requests = 10000;

static const bench_case bench_cases[] = {
    {"Llama 2 7B, 1 H100, chunked, 10/s", "llama2-7b-vllm", {"serving.requests.rate=10/s", NULL}},
    {"Llama 3 70B, 2 x TP 8, chunked, 40/s",
     "llama3-70b-tp8",
     {"serving.scheduler=chunked", "serving.max_tokens=2048", "serving.replicas=2",
      "serving.router=least-loaded", "serving.requests.rate=40/s", NULL}},
    {"Llama 2 7B, 1 H100, overloaded at 60/s", "llama2-7b-vllm", {"serving.requests.rate=60/s", NULL}},
    {"Llama 3 8B fp8, offline, 2048 at once",
     "llama2-7b-vllm",
     {"model=llama3-8b", "serving.dtype=fp8", "serving.max_batch=2048", "serving.max_tokens=8192",
      "serving.requests.arrival=burst", "serving.requests.prompt_tokens=128",
      "serving.requests.output_tokens=2048", "serving.requests.prefix_tokens=0",
      "serving.max_model_len=2176", NULL}},
};

static bench_row bench_one(int which, bool unused)
{
  (void)unused;
  const bench_case *b = &bench_cases[which];
  bench_row row = {0};
  GPtrArray *sets = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; b->sets[i]; i++)
    g_ptr_array_add(sets, g_strdup(b->sets[i]));
  g_ptr_array_add(sets, g_strdup_printf("serving.requests.count=%d", bench_requests));
  g_ptr_array_add(sets, NULL);
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  GError *err = NULL;
  srv_result r = {0};
  if (cfg_load_with("dgx-h100", b->workload, (char **)sets->pdata, &c, &w, &err) &&
      srv_simulate(c, w, NULL, &r, &err)) {
    row.ok = 1;
    row.sim = r.duration;
    row.wall = r.wall_time;
    row.messages = r.iterations;
  } else {
    fprintf(stderr, "bench: %s\n", err->message);
    g_error_free(err);
  }
  srv_result_clear(&r);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  g_ptr_array_free(sets, TRUE);
  return row;
}

int main(int argc, char **argv)
{
  bench_args(argc, argv, bench_usage, 1);
  bench_requests = argc > 1 ? atoi(argv[1]) : 10000;
  printf("dlsim bench serve: %d requests per run, DGX H100\n", bench_requests);
  printf("%-42s %14s %10s %12s %12s\n", "case", "simulated_s", "wall_s", "peak_rss_MB", "iterations");
  for (size_t i = 0; i < G_N_ELEMENTS(bench_cases); i++) {
    bench_row r = bench_isolated(bench_one, (int)i, false);
    if (!r.ok) {
      printf("%-42s %14s\n", bench_cases[i].what, "failed");
      continue;
    }
    printf("%-42s %14.1f %10.3f %12.1f %12ld\n", bench_cases[i].what, r.sim, r.wall, r.rss_mb,
           r.messages);
  }
  return 0;
}
