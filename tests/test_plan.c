/* The planner and whatif: every layout it returns runs and fits, a small search agrees with
 * brute force on the DES, sharding over ranks changes nothing, whatif of nothing is nothing,
 * bad requests are clear errors. */
#include "helpers.h"
#include "run/run.h"
#include "planner/planner.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* GPT-3 1.3B on one DGX H100, global batch 16: the base the CLI builds for -m. */
static char *const plan_base[] = {"node.count=1", "parallel.dp=8", "parallel.tp=1", "parallel.pp=1",
                                  "training.global_batch=8", "training.micro_batch=1", NULL};

static plan_setup *plan_small(void)
{
  GError *err = NULL;
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(cfg_load_with("dgx-h100", "gpt3-1.3b-dp", plan_base, &c, &w, &err), "%s",
            err ? err->message : "");
  plan_setup *s = plan_setup_new(c, w, 16, &err);
  cr_assert(s, "%s", err ? err->message : "");
  return s;
}

static plan_options plan_opts(int top, int refine)
{
  plan_options o = {.top_k = top, .refine = refine, .nshards = 1};
  plan_pins_init(&o.pins);
  return o;
}

/* The layout as a user would write it: the overrides of `dlsim run`, on the base files. The
 * planner applies layouts to structs; these tests hold both ways to the same numbers. */
static char **plan_layout_sets(const plan_layout *l)
{
  static const char *const rc[] = {"none", "selective", "full"};
  GPtrArray *a = g_ptr_array_new();
  for (int i = 0; plan_base[i]; i++)
    g_ptr_array_add(a, g_strdup(plan_base[i]));
  g_ptr_array_add(a, g_strdup_printf("parallel.tp=%d", l->tp));
  g_ptr_array_add(a, g_strdup_printf("parallel.cp=%d", l->cp));
  g_ptr_array_add(a, g_strdup_printf("parallel.pp=%d", l->pp));
  g_ptr_array_add(a, g_strdup_printf("parallel.dp=%d", l->dp));
  g_ptr_array_add(a, g_strdup_printf("parallel.ep=%d", l->ep));
  g_ptr_array_add(a, g_strdup_printf("parallel.zero=%d", l->zero));
  g_ptr_array_add(a, g_strdup_printf("parallel.virtual_stages=%d", l->virtual_stages));
  g_ptr_array_add(a, g_strdup(l->virtual_stages > 1 ? "parallel.schedule=interleaved"
                                                    : "parallel.schedule=1f1b"));
  g_ptr_array_add(a, g_strdup_printf("parallel.sequence_parallel=%s",
                                     l->sequence_parallel ? "true" : "false"));
  g_ptr_array_add(a, g_strdup("parallel.uneven_stages=true"));
  g_ptr_array_add(a, g_strdup_printf("parallel.placement=[%s]",
                                     l->pipeline_outer ? "tp, cp, dp, pp" : "tp, cp, pp, dp"));
  g_ptr_array_add(a, g_strdup("training.global_batch=16"));
  g_ptr_array_add(a, g_strdup_printf("training.micro_batch=%d", l->micro_batch));
  g_ptr_array_add(a, g_strdup_printf("training.recompute=%s", rc[l->recompute]));
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}

static bool plan_run(const plan_layout *l, eng_kind kind, sim_result *run)
{
  g_auto(GStrv) sets = plan_layout_sets(l);
  sim_options o = sim_options_for(kind);
  return sim_run_files("dgx-h100", "gpt3-1.3b-dp", sets, &o, run, NULL);
}

Test(plan, every_returned_layout_runs_and_fits)
{
  plan_setup *s = plan_small();
  plan_options o = plan_opts(0, 24);
  plan_screen_result r;
  GError *err = NULL;
  cr_assert(plan_screen(s, &o, &r, &err) && plan_refine(s, &o, &r, &err), "%s", err ? err->message : "");
  cr_assert(r.candidates > 1000 && r.fits > 100 && r.best->len == 24, "%ld %ld %u", r.candidates,
            r.fits, r.best->len);
  for (guint i = 0; i < r.best->len; i++) {
    const plan_candidate *c = &g_array_index(r.best, plan_candidate, i);
    sim_result run;
    cr_assert(plan_run(&c->l, ENG_ANALYTIC, &run), "layout %u does not run", i);
    cr_assert(mem_worst(&run.memory)->total <= run.cluster->gpu.memory, "layout %u does not fit", i);
    cr_assert_float_eq(run.eng.step_time, c->step_time_s, 1e-9 * c->step_time_s);
    cr_assert(i == 0 || c->step_time_s >= g_array_index(r.best, plan_candidate, i - 1).step_time_s);
    sim_result_clear(&run);
  }
  plan_screen_clear(&r);
  plan_setup_free(s);
}

Test(plan, a_small_search_agrees_with_brute_force_on_the_des, .timeout = 120)
{
  plan_setup *s = plan_small();
  plan_options o = plan_opts(1, 8);
  const char *pins[] = {"zero=1", "recompute=none", "placement=pp-inner", "virtual_stages=1"};
  for (size_t i = 0; i < G_N_ELEMENTS(pins); i++)
    cr_assert(plan_pins_parse(&o.pins, pins[i], NULL));
  plan_screen_result r;
  cr_assert(plan_screen(s, &o, &r, NULL) && plan_refine(s, &o, &r, NULL));
  const plan_candidate *best = &g_array_index(r.best, plan_candidate, 0);
  /* brute force: every layout of the pinned space, each on the DES */
  double brute = INFINITY;
  int tried = 0;
  const int pow2[] = {1, 2, 4, 8};
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 4; c++)
        for (int m = 0; m < 4; m++)
          for (int sp = 0; sp <= (pow2[a] > 1); sp++) {
            int tp = pow2[a], cp = pow2[b], pp = pow2[c];
            if (tp * cp * pp > 8)
              continue;
            plan_layout l = {.tp = tp, .cp = cp, .pp = pp, .dp = 8 / (tp * cp * pp), .ep = 1,
                             .micro_batch = pow2[m], .virtual_stages = 1, .zero = 1,
                             .recompute = CFG_RECOMPUTE_NONE, .sequence_parallel = sp};
            sim_result run;
            if (!plan_run(&l, ENG_DES, &run))
              continue; /* not a valid layout */
            if (mem_worst(&run.memory)->total <= run.cluster->gpu.memory) {
              brute = MIN(brute, run.eng.step_time);
              tried++;
            }
            sim_result_clear(&run);
          }
  cr_assert(tried >= 20, "%d layouts", tried);
  cr_assert(fabs(best->des_step_time_s - brute) <= 1e-6 * brute, "planner %.9g, brute force %.9g",
            best->des_step_time_s, brute);
  plan_screen_clear(&r);
  plan_setup_free(s);
}

Test(plan, shards_merge_to_the_single_process_result)
{
  plan_setup *s = plan_small();
  plan_options one = plan_opts(0, 12);
  plan_screen_result whole, parts[3];
  cr_assert(plan_screen(s, &one, &whole, NULL));
  plan_options o = plan_opts(0, 12);
  o.nshards = 3;
  for (int i = 0; i < 3; i++) {
    o.shard = i;
    cr_assert(plan_screen(s, &o, &parts[i], NULL));
  }
  for (int i = 1; i < 3; i++)
    plan_merge(&parts[0], &parts[i], 12);
  cr_assert_eq(parts[0].candidates, whole.candidates);
  cr_assert_eq(parts[0].fits, whole.fits);
  cr_assert_eq(parts[0].best->len, whole.best->len);
  for (guint i = 0; i < whole.best->len; i++)
    cr_assert_eq(g_array_index(parts[0].best, plan_candidate, i).index,
                 g_array_index(whole.best, plan_candidate, i).index);
  for (int i = 0; i < 3; i++)
    plan_screen_clear(&parts[i]);
  plan_screen_clear(&whole);
  plan_setup_free(s);
}

Test(plan, mpirun_with_two_ranks_prints_the_same_plan, .timeout = 120)
{
  if (!th_have_mpirun())
    cr_skip_test("built without MPI, or no mpirun");
  const char *args = "plan -c dgx-h100 -m gpt3-1.3b --gpus 8 --global-batch 16 --top 1 --csv -q";
  th_proc one = th_dlsim_ranks(args, 0), two = th_dlsim_ranks(args, 2);
  cr_assert_eq(one.status, 0, "%s", one.err);
  cr_assert_eq(two.status, 0, "%s\n%s", two.out, two.err);
  cr_assert_str_eq(two.out, one.out);
  th_proc_clear(&one);
  th_proc_clear(&two);
}

Test(plan, whatif_of_nothing_changes_nothing)
{
  th_proc p = th_dlsim("whatif -c dgx-a100 -w megatron-22b --base node.count=1 --set gpu.memory=80GiB --json");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cJSON *j = cJSON_Parse(p.out);
  cr_assert(j);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "delta");
  cr_assert(cJSON_IsObject(d) && cJSON_GetArraySize(d) > 5);
  /* every number of the delta, nested ones included, is 0 */
  GPtrArray *todo = g_ptr_array_new();
  g_ptr_array_add(todo, (gpointer)d);
  while (todo->len) {
    const cJSON *o = g_ptr_array_steal_index(todo, todo->len - 1), *x;
    cJSON_ArrayForEach(x, o)
    {
      if (cJSON_IsObject(x))
        g_ptr_array_add(todo, (gpointer)x);
      else
        cr_assert(cJSON_IsNumber(x) && x->valuedouble == 0, "%s changed", x->string);
    }
  }
  g_ptr_array_free(todo, TRUE);
  cJSON_Delete(j);
  th_proc_clear(&p);
}

Test(plan, whatif_more_bandwidth_is_faster_and_says_so)
{
  th_proc p = th_dlsim("whatif -c dgx-a100 -w megatron-175b --base node.count=8 --set node.intra.bandwidth=900GB/s --json");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cJSON *j = cJSON_Parse(p.out);
  double d = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "delta"), "step_time_s")->valuedouble;
  cr_assert(d < -0.1, "%g", d);
  cJSON_Delete(j);
  th_proc_clear(&p);
}

Test(plan, bad_requests_exit_2)
{
  const char *cases[][2] = {
      {"plan -c dgx-h100 -m gpt3-1.3b --gpus 12 --global-batch 16", "whole number"},
      {"plan -c dgx-h100 -m gpt3-1.3b --gpus 8 --global-batch 16 --fix tpp=2", "--fix tpp=2"},
      {"plan -c dgx-h100 -m gpt3-1.3b --gpus 8 --global-batch 16 --fix recompute=some", "recompute"},
      {"plan -c dgx-h100 -m gpt3-1.3b --gpus 8 --global-batch 16 --objective speed", "objective"},
      {"plan -c dgx-h100 -m no-such-model --gpus 8 --global-batch 16", "no-such-model"},
      {"plan -c dgx-h100 --gpus 8 --global-batch 16", "needs"},
      {"whatif -c dgx-a100 -w megatron-22b --base node.count=1 --set gpu.memroy=1GiB", "memroy"},
      {"whatif -c dgx-a100 -w megatron-22b --sweep gpu.memory", "--sweep"},
      {"whatif -c dgx-a100 -w megatron-22b --base node.count=1 --sweep gpu.memory=1GiB,2GiB --plot x.png", "--plot"},
      {"whatif -c dgx-a100 -w megatron-22b", "needs"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    th_proc p = th_dlsim(cases[i][0]);
    cr_assert_eq(p.status, 2, "%s -> %d: %s", cases[i][0], p.status, p.out);
    cr_assert(strstr(p.out, cases[i][1]), "%s: %s", cases[i][0], p.out);
    th_proc_clear(&p);
  }
}

Test(plan, whatif_takes_serving_workloads)
{
  th_proc p = th_dlsim("whatif -c dgx-h100 -w llama2-7b-vllm --set gpu.memory_bandwidth=4.8TB/s --json");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cJSON *j = cJSON_Parse(p.out);
  const cJSON *tbt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "delta"), "tbt_s");
  double d = cJSON_GetObjectItemCaseSensitive(tbt, "p50")->valuedouble;
  cr_assert(d < 0, "more HBM bandwidth makes decoding faster: %g", d);
  cJSON_Delete(j);
  th_proc_clear(&p);
}
