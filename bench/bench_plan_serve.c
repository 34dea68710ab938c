/* Serving planner speed: `dlsim plan` for a serving workload on 64 H100 in one process, the
 * screening of every candidate deployment (loading its --set overlays, memory, closed-form
 * estimate) and the whole plan with the top 3 confirmed by srv_find_max_rate. The README's
 * table. */
#include "bench_util.h"
#include "planner/planner.h"

#include <math.h>
#include <time.h>

static const char bench_usage[] =
    "usage: dlsim_bench_plan_serve\n"
    "Serving planner speed in one process on 64 H100 (dgx-h100): Llama 3 70B with continuous\n"
    "batching (llama3-70b-tp8) and with chunked prefill, TTFT <= 2 s and TPOT <= 50 ms; Llama 2\n"
    "7B with vLLM's defaults (llama2-7b-vllm) and its own SLA. Candidates, how many fit in memory,\n"
    "screening time and candidates per second, the whole plan with the top 3 confirmed by\n"
    "simulation (wall and CPU seconds: the CPU time is what a busy machine does not inflate),\n"
    "and the winner's estimated and confirmed rates. No arguments.\n";

typedef struct {
  const char *workload, *label;
  char *sets[2];
  double ttft, tpot;
} bench_search;

static bool bench_one(const bench_search *b)
{
  GError *err = NULL;
  gint64 t0 = g_get_monotonic_time();
  clock_t c0 = clock();
  plan_srv_setup *s = plan_srv_setup_new("dgx-h100", b->workload, (char **)b->sets, 64, b->ttft,
                                         b->tpot, &err);
  plan_srv_result r = {0};
  bool ok = s && plan_srv_screen(s, 0, 1, &r, &err);
  double screen = (double)(g_get_monotonic_time() - t0) / 1e6;
  double screen_cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
  ok = ok && plan_srv_rank(s, &r, 10, 3, &err);
  double total = (double)(g_get_monotonic_time() - t0) / 1e6;
  double total_cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
  if (ok && r.kept->len > 0) {
    const plan_srv_candidate *w = &g_array_index(r.kept, plan_srv_candidate, 0);
    g_autofree char *d = plan_srv_describe(w);
    printf("%-36s %7ld %6ld %8.2f %7.2f %8.0f %8.2f %7.2f  %-40s %8.1f %8.1f\n", b->label,
           r.candidates, r.fits, screen, screen_cpu, r.candidates / screen, total, total_cpu, d,
           w->est_rate, w->rate);
  } else if (!ok) {
    fprintf(stderr, "bench: %s\n", err->message);
    g_error_free(err);
  }
  plan_srv_result_clear(&r);
  plan_srv_setup_free(s);
  return ok;
}

int main(int argc, char **argv)
{
  bench_args(argc, argv, bench_usage, 0);
  const bench_search searches[] = {
      {"llama3-70b-tp8", "Llama 3 70B, continuous, 64 H100", {NULL}, 2, 0.05},
      {"llama3-70b-tp8", "Llama 3 70B, chunked prefill, 64 H100", {"serving.scheduler=chunked", NULL},
       2, 0.05},
      {"llama2-7b-vllm", "Llama 2 7B, vLLM, 64 H100", {NULL}, 0, 0},
  };
  printf("dlsim bench: serving planner speed (one process)\n");
  printf("%-36s %7s %6s %8s %7s %8s %8s %7s  %-40s %8s %8s\n", "search", "cands", "fit",
         "screen_s", "cpu_s", "cands/s", "plan_s", "cpu_s", "winner", "est/s", "conf/s");
  bool ok = true;
  for (size_t i = 0; i < G_N_ELEMENTS(searches); i++)
    ok = bench_one(&searches[i]) && ok;
  return ok ? 0 : 1;
}
