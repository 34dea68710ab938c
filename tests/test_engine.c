/* Engines on whole training steps: DES and analytic agree without contention, the breakdown
 * adds up, gradient accumulation is folded, memory follows the program. */
#include "engine/engine.h"
#include "helpers.h"
#include "pipeline/pipeline.h"

#include <criterion/criterion.h>
#include <math.h>

static double step_of(const char *cluster, const char *workload, const char *const *sets,
                      eng_kind kind, eng_result *copy)
{
  pipe_run run;
  GError *err = NULL;
  bool ok = pipe_simulate(cluster, workload, (char *const *)sets, kind, false, &run, &err);
  cr_assert(ok, "%s", err ? err->message : "");
  double t = run.result.step_time;
  if (copy) {
    *copy = run.result;
    copy->class_peak = NULL;
    copy->events = copy->mem_samples = NULL;
  }
  pipe_clear(&run);
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
  pipe_run run;
  GError *err = NULL;
  cr_assert(pipe_simulate("v100-edr", "resnet50-horovod", NULL, ENG_DES, true, &run, &err));
  double closed = mem_worst(&run.memory)->total;
  cr_assert_float_eq(run.result.peak_memory, closed, closed * 1e-9);
  cr_assert(run.result.events && run.result.events->len > 100);
  cr_assert(run.result.mem_samples && run.result.mem_samples->len >= 4);
  pipe_clear(&run);
}
