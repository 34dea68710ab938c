/* Planner speed: how many candidate layouts dlsim plan screens per second (enumeration,
 * validity, memory, closed-form estimate), for three searches of 67,000 to 81,000 layouts;
 * and the time of the whole plan without DES confirmation (the 16 best re-simulated with the
 * analytic engine). The README's table. With arguments K [J], the whole plan of Llama 3 405B
 * on 8192 H100 with its top K confirmed by the DES, J at once (minutes). */
#include "bench_util.h"
#include "planner/planner.h"

static const char bench_usage[] =
    "usage: dlsim_bench_plan\n"
    "Planner speed in one process, on three searches (GPT-3 175B on 1024 A100, batch 1536; Llama\n"
    "3 405B on 8192 H100, batch 2048, and on 16384 H100, batch 4096): layouts enumerated and\n"
    "fitting in memory, screening time and layouts per second, and the whole plan without DES\n"
    "confirmation (the 16 best on the analytic engine); wall seconds, then CPU seconds of the\n"
    "screening and of the whole plan, and of the analytic refinement alone with every run on\n"
    "its own (alone_cpu: no hardware or collective plans shared across layouts; the plan's\n"
    "refinement shares them); then the layouts the refinement simulated (runs) and the CPU\n"
    "milliseconds of one, shared (ms/run: what the planner pays per configuration) and alone.\n"
    "\n"
    "usage: dlsim_bench_plan K [J]\n"
    "The whole plan of Llama 3 405B on 8192 H100, batch 2048, with its top K confirmed by the\n"
    "DES, J runs at once (default: the CPUs online), as `dlsim plan ... --top K -j J`: wall\n"
    "seconds and CPU seconds (this process and its DES children). Minutes.\n";

typedef struct {
  const char *cluster, *model, *label;
  int gpus, batch;
} bench_search;

static plan_setup *bench_setup(const bench_search *b)
{
  g_autofree char *nodes = g_strdup_printf("node.count=%d", b->gpus / 8);
  g_autofree char *dp = g_strdup_printf("parallel.dp=%d", b->gpus);
  g_autofree char *gb = g_strdup_printf("training.global_batch=%d", b->gpus);
  char *sets[] = {nodes, dp, gb, "training.micro_batch=1", NULL};
  g_autofree char *text = g_strdup_printf("model: %s\ntraining: {global_batch: 8, micro_batch: 1}\n"
                                          "parallel: {dp: 8}\n", b->model);
  GError *err = NULL;
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  plan_setup *s = cfg_load_text(b->cluster, text, sets, &c, &w, &err)
                      ? plan_setup_new(c, w, b->batch, &err) : NULL;
  if (!s) {
    fprintf(stderr, "bench: %s\n", err->message);
    g_error_free(err);
  }
  return s;
}

/* The whole plan with its top k confirmed by the DES, `jobs` at once. */
static bool bench_confirmed(const bench_search *b, int k, int jobs)
{
  plan_setup *s = bench_setup(b);
  if (!s)
    return false;
  plan_options o = {.refine = 16, .nshards = 1, .top_k = k, .jobs = jobs};
  plan_pins_init(&o.pins);
  plan_screen_result r;
  GError *err = NULL;
  gint64 t0 = g_get_monotonic_time();
  double c0 = bench_cpu_seconds();
  bool ok = plan_screen(s, &o, &r, &err) && plan_refine(s, &o, &r, &err);
  double wall = (double)(g_get_monotonic_time() - t0) / 1e6, cpu = bench_cpu_seconds() - c0;
  if (ok)
    printf("%-34s %3d %3d %9.1f %9.1f\n", b->label, k, jobs, wall, cpu);
  else
    fprintf(stderr, "bench: %s\n", err->message);
  g_clear_error(&err);
  plan_screen_clear(&r);
  plan_setup_free(s);
  return ok;
}

static bool bench_one(const bench_search *b)
{
  plan_setup *s = bench_setup(b);
  if (!s)
    return false;
  GError *err = NULL;
  plan_options o = {.refine = 16, .nshards = 1};
  plan_pins_init(&o.pins);
  plan_screen_result r;
  gint64 t0 = g_get_monotonic_time();
  double c0 = bench_cpu_seconds();
  bool ok = plan_screen(s, &o, &r, &err);
  double screen = (double)(g_get_monotonic_time() - t0) / 1e6, screen_cpu = bench_cpu_seconds() - c0;
  /* the same refinement with every run alone, for what the shared cache saves */
  plan_screen_result alone = r;
  alone.best = g_array_copy(r.best);
  plan_options fresh = o;
  fresh.fresh_runs = true;
  double a0 = bench_cpu_seconds();
  ok = ok && plan_refine(s, &fresh, &alone, &err);
  double alone_cpu = bench_cpu_seconds() - a0;
  gint64 r0 = g_get_monotonic_time();
  double rc0 = bench_cpu_seconds();
  ok = ok && plan_refine(s, &o, &r, &err);
  /* the plan: its screening, then its refinement */
  double total = screen + (double)(g_get_monotonic_time() - r0) / 1e6;
  double total_cpu = screen_cpu + bench_cpu_seconds() - rc0;
  /* what the plan paid per layout it re-simulated, sharing the cache and alone */
  double per = r.simulated > 0 ? (total_cpu - screen_cpu) / r.simulated * 1e3 : 0;
  double per_alone = alone.simulated > 0 ? alone_cpu / alone.simulated * 1e3 : 0;
  if (ok)
    printf("%-34s %9ld %8ld %8.3f %12.0f %9.3f %10.3f %10.3f %10.3f %6d %9.2f %9.2f\n", b->label,
           r.candidates, r.fits, screen, r.candidates / screen, total, screen_cpu, total_cpu,
           alone_cpu, r.simulated, per, per_alone);
  plan_screen_clear(&alone);
  plan_screen_clear(&r);
  plan_setup_free(s);
  return ok;
}

int main(int argc, char **argv)
{
  bench_args(argc, argv, bench_usage, 2);
  const bench_search searches[] = {
      {"dgx-a100", "gpt3-175b", "GPT-3 175B, 1024 A100, batch 1536", 1024, 1536},
      {"dgx-h100", "llama3-405b", "Llama 3 405B, 8192 H100, batch 2048", 8192, 2048},
      {"dgx-h100", "llama3-405b", "Llama 3 405B, 16384 H100, batch 4096", 16384, 4096},
  };
  if (argc > 1) {
    int jobs = argc > 2 ? atoi(argv[2]) : (int)MAX(sysconf(_SC_NPROCESSORS_ONLN), 1);
    printf("dlsim bench: the whole plan with DES confirmation\n");
    printf("%-34s %3s %3s %9s %9s\n", "search", "top", "j", "wall_s", "cpu_s");
    return bench_confirmed(&searches[1], atoi(argv[1]), jobs) ? 0 : 1;
  }
  printf("dlsim bench: planner search speed (one process)\n");
  printf("%-34s %9s %8s %8s %12s %9s %10s %10s %10s %6s %9s %9s\n", "search", "layouts", "fit",
         "screen_s", "layouts/s", "plan_s", "screen_cpu", "plan_cpu", "alone_cpu", "runs",
         "ms/run", "ms/alone");
  for (size_t i = 0; i < G_N_ELEMENTS(searches); i++)
    bench_one(&searches[i]);
  return 0;
}
