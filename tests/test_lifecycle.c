/* lifecycle: a step to a run. Interruptions, goodput and energy against hand-derived answers,
 * the default failure rates against the Llama 3 statistics they were fitted on, and bad input
 * named by its key. */
#include "helpers.h"
#include "lifecycle/lifecycle.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#define H 3600.0

static const char *const small_run[] = {"node.count=1", "parallel.tp=2", "parallel.pp=2",
                                        "parallel.dp=2", "training.global_batch=32", NULL};

/* Runs gpt3-1.3b-dp on one DGX A100 node with `extra` overrides, and its run estimate. */
static bool run_estimate(const char *const *extra, sim_result *r, lc_run *run, GError **err)
{
  g_auto(GStrv) sets = sim_strv_concat((char *const *)small_run, (char *const *)extra);
  sim_options o = sim_options_for(ENG_ANALYTIC);
  cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", sets, &o, r, err), "%s",
            *err ? (*err)->message : "");
  return lc_estimate(r, run, err);
}

Test(lifecycle, interruptions_are_count_times_time_over_mtbf)
{
  /* GPU, node, software, NIC, switch, link; the link never fails */
  lc_fleet f = {.count = {16, 2, 2, 16, 1, 32},
                .mtbf = {1000 * H, 2000 * H, 4000 * H, 1e5 * H, 5e4 * H, 0}};
  double by[LC_NKINDS];
  double n = lc_interruptions(&f, 500 * H, by);
  /* 16 x 500 / 1000 + 2 x 500 / 2000 + 2 x 500 / 4000 + 16 x 500 / 1e5 + 500 / 5e4 */
  cr_assert_float_eq(n, 8 + 0.5 + 0.25 + 0.08 + 0.01, 1e-12);
  cr_assert_float_eq(by[LC_GPU], 8, 1e-12);
  cr_assert_float_eq(by[LC_SWITCH], 0.01, 1e-12);
  cr_assert_eq(by[LC_LINK], 0);
  cr_assert_float_eq(lc_failure_rate(&f) * 500 * H, n, 1e-9);
}

Test(lifecycle, the_default_rates_give_back_llama3s_419_interruptions)
{
  /* a fit, not a check: the defaults were derived from these 419 in 54 days on 2,048 nodes */
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *const sets[] = {"node.count=2048", "parallel.dp=128", NULL};
  cr_assert(th_load("dgx-h100", "llama3-405b", sets, &c, &w));
  lc_fleet f = lc_fleet_of(c, 16384);
  cr_assert_eq(f.count[LC_GPU], 16384);
  cr_assert_eq(f.count[LC_NODE], 2048);
  cr_assert_eq(f.count[LC_NIC], 16384);
  cr_assert_eq(f.count[LC_SWITCH], 512 + 256, "two tiers of 64-port switches: 512 leaves, 256 spines");
  cr_assert_eq(f.count[LC_LINK], 2 * 16384);
  double by[LC_NKINDS];
  cr_assert_float_eq(lc_interruptions(&f, 54 * 24 * H, by), 419, 1e-6);
  cr_assert_float_eq(by[LC_GPU], 268, 1e-6);
  cr_assert_float_eq(by[LC_NIC], 7, 1e-6);
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

Test(lifecycle, goodput_is_productive_over_wall_time)
{
  lc_timeline_in in = {.productive = 1e6, .stall = 10, .rate = 1e-4, .lost_fixed = 100};
  lc_timeline t;
  cr_assert(lc_timeline_at(&in, 1000, &t));
  /* 1000 checkpoints of 10 s; a failure loses 500 + 100 s: wall = 1.01e6 / (1 - 0.06) */
  cr_assert_float_eq(t.checkpoints, 1000, 1e-9);
  cr_assert_float_eq(t.wall, 1.01e6 / 0.94, 1e-6);
  cr_assert_float_eq(t.goodput, 0.94 / 1.01, 1e-12);
  cr_assert_float_eq(t.failure_s, t.wall - 1.01e6, 1e-6);
}

Test(lifecycle, young_daly_interval_beats_half_and_twice_it)
{
  /* Llama 3's scale: a failure every 3.1 h, a 30 s synchronous checkpoint, 10 min restarts */
  lc_timeline_in in = {.productive = 60 * 86400, .stall = 30, .rate = 1 / (3.1 * H), .lost_fixed = 600};
  double best = lc_young_daly(in.stall, 1 / in.rate);
  cr_assert_float_eq(best, sqrt(2 * 30 * 3.1 * H), 1e-9);
  lc_timeline at, half, twice;
  cr_assert(lc_timeline_at(&in, best, &at));
  cr_assert(lc_timeline_at(&in, best / 2, &half));
  cr_assert(lc_timeline_at(&in, best * 2, &twice));
  cr_assert_geq(at.goodput, half.goodput);
  cr_assert_geq(at.goodput, twice.goodput);
}

Test(lifecycle, a_job_that_fails_faster_than_it_restarts_never_ends)
{
  lc_timeline_in in = {.productive = 1e6, .stall = 10, .rate = 1.0 / 500, .lost_fixed = 600};
  lc_timeline t;
  cr_assert_not(lc_timeline_at(&in, 100, &t));
}

Test(lifecycle, step_energy_is_power_times_time_over_the_phases)
{
  cfg_power p = {.gpu_tdp = 700, .compute = 1.0, .memory_bound = 0.7, .communication = 0.5,
                 .idle = 0.1, .node = 2800, .switch_power = 750, .pue = 1.1};
  double time[LC_NPHASES] = {2, 1, 0.5, 0.5};
  /* a GPU: 700 x 2 + 490 x 1 + 350 x 0.5 + 70 x 0.5 = 2100 J; 8 of them, one node and one
   * switch over the 4 s step, at PUE 1.1 */
  double e = lc_step_energy(&p, time, 8, 1, 1);
  cr_assert_float_eq(e, 1.1 * (8 * 2100 + 2800 * 4 + 750 * 4), 1e-9);
}

Test(lifecycle, a_step_splits_into_phases_that_add_up_to_it)
{
  sim_result r;
  lc_run run;
  GError *err = NULL;
  const char *const extra[] = {"training.steps=1000", NULL};
  cr_assert(run_estimate(extra, &r, &run, &err), "%s", err ? err->message : "");
  double time[LC_NPHASES], sum = 0;
  lc_step_phases(&r, time);
  for (int ph = 0; ph < LC_NPHASES; ph++) {
    cr_assert_geq(time[ph], 0);
    sum += time[ph];
  }
  cr_assert_float_eq(sum, r.step_time, 1e-9 * r.step_time);
  cr_assert_float_eq(time[LC_COMMUNICATING], r.eng.exposed_comm, 1e-12);
  sim_result_clear(&r);
}

Test(lifecycle, a_run_is_its_steps_failures_checkpoints_and_energy)
{
  sim_result r;
  lc_run run;
  GError *err = NULL;
  const char *const extra[] = {"training.steps=200000", NULL};
  cr_assert(run_estimate(extra, &r, &run, &err), "%s", err ? err->message : "");
  cr_assert_eq(run.steps, 200000);
  cr_assert_float_eq(run.t.wall * run.t.goodput, 200000 * r.step_time, 1e-6);
  /* one node: 8 GPUs, no NICs or switches */
  cr_assert_eq(run.fleet.count[LC_NIC], 0);
  const cfg_reliability *rel = &r.cluster->reliability;
  double expected = run.t.wall * (8 / rel->gpu_mtbf + 1 / rel->node_mtbf + 1 / rel->software_mtbf);
  cr_assert_float_eq(run.interruptions, expected, 1e-9 * expected);
  /* a checkpoint: 1.3B parameters x (2 bytes of bf16 weights + 12 of Adam's fp32 states) */
  cr_assert_float_eq(run.checkpoint_bytes / 14, 1.3e9, 0.05e9);
  /* energy: at least every productive step's, at most every second at the step's power */
  double steps_kwh = run.steps * run.step_energy / 3.6e6;
  cr_assert_geq(run.energy_kwh, steps_kwh);
  cr_assert_leq(run.energy_kwh, steps_kwh / run.t.goodput * (1 + 1e-9));
  cr_assert_float_eq(run.cost_usd, run.energy_kwh * r.cluster->cost.kwh, 1e-9);
  sim_result_clear(&r);
}

Test(lifecycle, tokens_become_steps_of_the_global_batch)
{
  sim_result r;
  lc_run run;
  GError *err = NULL;
  const char *const extra[] = {"training.tokens=1e9", NULL};
  cr_assert(run_estimate(extra, &r, &run, &err), "%s", err ? err->message : "");
  double per_step = 32.0 * r.workload->model.seq_len;
  cr_assert_float_eq(run.tokens_per_step, per_step, 1e-6);
  cr_assert_eq(run.steps, ceil(1e9 / per_step));
  sim_result_clear(&r);
}

Test(lifecycle, an_asynchronous_checkpoint_stalls_for_its_snapshot_only)
{
  sim_result a, s;
  lc_run async, sync;
  GError *err = NULL;
  const char *const with_async[] = {"training.steps=1000", "checkpoint.async=true", NULL};
  const char *const with_sync[] = {"training.steps=1000", NULL};
  cr_assert(run_estimate(with_async, &a, &async, &err), "%s", err ? err->message : "");
  cr_assert(run_estimate(with_sync, &s, &sync, &err), "%s", err ? err->message : "");
  cr_assert_float_eq(async.checkpoint_stall,
                     async.checkpoint_bytes / 8 / a.cluster->storage.host_bandwidth, 1e-12);
  cr_assert_float_eq(sync.checkpoint_stall, sync.checkpoint_write, 1e-12);
  cr_assert_lt(async.checkpoint_stall, sync.checkpoint_stall);
  sim_result_clear(&a);
  sim_result_clear(&s);
}

Test(lifecycle, a_given_interval_replaces_young_daly)
{
  sim_result r;
  lc_run run;
  GError *err = NULL;
  const char *const extra[] = {"training.steps=100000", "checkpoint.interval=30min", NULL};
  cr_assert(run_estimate(extra, &r, &run, &err), "%s", err ? err->message : "");
  cr_assert(run.interval_given);
  cr_assert_float_eq(run.t.interval, 1800, 1e-9);
  sim_result_clear(&r);
}

/* The error a run estimate stops on, with `extra` overrides. */
static char *estimate_error(const char *const *extra)
{
  sim_result r;
  lc_run run;
  GError *err = NULL;
  bool ok = run_estimate(extra, &r, &run, &err);
  cr_assert_not(ok, "expected an error");
  char *msg = g_strdup(err->message);
  g_error_free(err);
  sim_result_clear(&r);
  return msg;
}

Test(lifecycle, bad_input_names_its_key)
{
  const char *const zero_bw[] = {"training.steps=10", "storage.bandwidth=0", NULL};
  g_autofree char *a = estimate_error(zero_bw);
  cr_assert(strstr(a, "storage.bandwidth must be above 0"), "%s", a);
  const char *const both[] = {"training.steps=10", "training.tokens=1e9", NULL};
  g_autofree char *b = estimate_error(both);
  cr_assert(strstr(b, "training.steps and training.tokens"), "%s", b);
  const char *const pue[] = {"training.steps=10", "power.pue=0.5", NULL};
  g_autofree char *c = estimate_error(pue);
  cr_assert(strstr(c, "power.pue must be at least 1"), "%s", c);
  const char *const negative[] = {"reliability.gpu_mtbf=-5h", NULL};
  g_autofree char *d = th_load_error("dgx-a100", "gpt3-1.3b-dp", negative);
  cr_assert(d && strstr(d, "reliability.gpu_mtbf"), "%s", d ? d : "(loaded)");
  const char *const bare[] = {"power.gpu_tdp=700", NULL};
  g_autofree char *e = th_load_error("dgx-a100", "gpt3-1.3b-dp", bare);
  cr_assert(e && strstr(e, "power.gpu_tdp") && strstr(e, "needs a unit"), "%s", e ? e : "(loaded)");
}

Test(lifecycle, a_bad_key_in_a_file_is_named_with_its_position)
{
  static const char *const cluster =
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 3.35TB/s, flops: {bf16: 989TFLOPS}}\n"
      "node: {count: 2, gpus_per_node: 8, intra: {kind: nvswitch, bandwidth: 450GB/s}}\n"
      "network: {nic_bandwidth: 400Gb/s}\n"
      "reliability:\n"
      "  gpu_mtbf: -50000h\n"
      "storage: {bandwidth: 0}\n";
  static const char *const workload =
      "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
      "training: {global_batch: 32, micro_batch: 2, steps: 100}\n";
  g_autofree char *c = th_write("c.yaml", cluster), *w = th_write("w.yaml", workload);
  g_autofree char *msg = th_load_error(c, w, NULL);
  cr_assert(msg && strstr(msg, "c.yaml:6:13: reliability.gpu_mtbf"), "%s", msg ? msg : "(loaded)");
  /* the MTBF right, the zero bandwidth is found by the estimate, at its place in the file */
  const char *const fixed[] = {"reliability.gpu_mtbf=50000h", NULL};
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result r;
  lc_run run;
  GError *err = NULL;
  cr_assert(sim_run_files(c, w, (char *const *)fixed, &o, &r, &err), "%s", err ? err->message : "");
  cr_assert_not(lc_estimate(&r, &run, &err));
  cr_assert(strstr(err->message, "c.yaml:7:22: storage.bandwidth must be above 0"), "%s", err->message);
  g_error_free(err);
  sim_result_clear(&r);
}

Test(lifecycle, dlsim_run_prints_a_run_only_when_asked)
{
  th_proc step = th_dlsim("run -c v100-edr -w resnet50-horovod -e analytic");
  cr_assert_eq(step.status, 0, "%s", step.out);
  cr_assert_null(strstr(step.out, "time to train"));
  th_proc_clear(&step);
  th_proc run = th_dlsim("run -c v100-edr -w resnet50-horovod -e analytic --set training.steps=1000");
  cr_assert_eq(run.status, 0, "%s", run.out);
  cr_assert(strstr(run.out, "  run 1000 steps\n    time to train"), "%s", run.out);
  th_proc_clear(&run);
  th_proc json = th_dlsim("run -c v100-edr -w resnet50-horovod -e analytic --json --set training.steps=1000");
  cr_assert_eq(json.status, 0, "%s", json.out);
  cr_assert(strstr(json.out, "\"time_to_train_s\":"), "%s", json.out);
  cr_assert(strstr(json.out, "\"lost_s\":"), "%s", json.out);
  cr_assert(strstr(json.out, "\"gpu_phases\":"), "%s", json.out);
  th_proc_clear(&json);
  th_proc bad = th_dlsim("run -c v100-edr -w resnet50-horovod -e analytic --set training.steps=10 "
                         "--set storage.bandwidth=0");
  cr_assert_eq(bad.status, 2, "%s", bad.out);
  cr_assert(strstr(bad.out, "storage.bandwidth"), "%s", bad.out);
  th_proc_clear(&bad);
}

/* ---- stragglers ---------------------------------------------------------------------------- */

Test(lifecycle, the_expected_slowest_factor_matches_its_hand_values)
{
  /* one GPU of 8 twice as slow, no noise: the slowest is it */
  cfg_stragglers one = {.fraction = 0.125, .slowdown = 2};
  cr_assert_float_eq(sim_stragglers_expected_max(&one, 8), 2, 1e-12);
  /* one GPU: the mean of a lognormal, exp(sigma^2 / 2); lasting and jitter add in quadrature */
  cfg_stragglers noise = {.jitter = 0.5, .slowdown = 2};
  cr_assert_float_eq(sim_stragglers_expected_max(&noise, 1), exp(0.125), 1e-6);
  cfg_stragglers both = {.sigma = 0.3, .jitter = 0.4, .slowdown = 2};
  cr_assert_float_eq(sim_stragglers_expected_max(&both, 1), exp(0.125), 1e-6);
  /* two GPUs: E[max(e^sZ1, e^sZ2)] = 2 exp(s^2 / 2) Phi(s / sqrt 2) */
  double s = 0.5, phi = 0.5 * erfc(-(s / sqrt(2)) / sqrt(2));
  cfg_stragglers two = {.sigma = s, .slowdown = 2};
  cr_assert_float_eq(sim_stragglers_expected_max(&two, 2), 2 * exp(s * s / 2) * phi, 1e-6);
  /* more GPUs, a slower slowest */
  cr_assert_gt(sim_stragglers_expected_max(&two, 1024), sim_stragglers_expected_max(&two, 8));
}

Test(lifecycle, the_seed_picks_exactly_the_fraction_of_slow_gpus)
{
  cfg_stragglers s = {.fraction = 0.25, .slowdown = 3, .seed = 7};
  double a[16], b[16];
  g_autoptr(GRand) g1 = g_rand_new_with_seed(7);
  g_autoptr(GRand) g2 = g_rand_new_with_seed(7);
  sim_stragglers_lasting(&s, 16, g1, a);
  sim_stragglers_lasting(&s, 16, g2, b);
  int slow = 0;
  for (int i = 0; i < 16; i++) {
    cr_assert(a[i] == 1 || a[i] == 3, "GPU %d: %g", i, a[i]);
    slow += a[i] == 3;
    cr_assert_eq(a[i], b[i], "the same seed, the same draws");
  }
  cr_assert_eq(slow, 4);
}

/* resnet50 data parallel over 8 V100 nodes, with `extra` overrides, on `engine`. */
static void dp8(eng_kind engine, const char *const *extra, sim_result *r)
{
  static const char *const base[] = {"node.count=8", "training.global_batch=512", NULL};
  g_auto(GStrv) sets = sim_strv_concat((char *const *)base, (char *const *)extra);
  sim_options o = sim_options_for(engine);
  GError *err = NULL;
  cr_assert(sim_run_files("v100-edr", "resnet50-horovod", sets, &o, r, &err), "%s",
            err ? err->message : "");
}

Test(lifecycle, one_gpu_twice_as_slow_doubles_the_step_compute_in_both_engines)
{
  /* DP 8, one GPU at 2x: every other rank waits for its gradients, so the step is its compute
   * (2 x C) plus the reduction's exposed tail, as without it: the straggler costs exactly C */
  const char *const one_slow[] = {"stragglers.fraction=0.125", "stragglers.slowdown=2", NULL};
  sim_result a, d;
  dp8(ENG_ANALYTIC, one_slow, &a);
  dp8(ENG_DES, one_slow, &d);
  cr_assert(a.stragglers.on && d.stragglers.on);
  cr_assert_eq(a.stragglers.slow, 1);
  cr_assert_eq(d.stragglers.steps, 8);
  double c = a.eng.compute;
  cr_assert_float_eq(a.stragglers.cost, c, 1e-9 * c);
  cr_assert_float_eq(d.stragglers.cost, c, 1e-4 * c, "DES %g s, hand %g s", d.stragglers.cost, c);
  cr_assert_float_eq(d.stragglers.step_time, 2 * c + d.eng.exposed_comm, 1e-4 * c);
  sim_result_clear(&a);
  sim_result_clear(&d);
}

Test(lifecycle, the_des_mean_of_jittered_steps_meets_the_closed_form)
{
  /* per-step jitter of 10 % on 8 GPUs: E[slowest] = 1.155; 40 DES steps of the draws land
   * within 10 % of the closed form's cost (sampling error) */
  const char *const jitter[] = {"stragglers.jitter=0.1", "stragglers.steps=40", NULL};
  sim_result a, d;
  dp8(ENG_ANALYTIC, jitter, &a);
  dp8(ENG_DES, jitter, &d);
  cr_assert_float_eq(a.stragglers.expected_max, 1.155, 0.001);
  cr_assert_float_eq(d.stragglers.cost, a.stragglers.cost, 0.1 * a.stragglers.cost, "DES %g, closed form %g",
                     d.stragglers.cost, a.stragglers.cost);
  sim_result_clear(&a);
  sim_result_clear(&d);
}

Test(lifecycle, a_run_pays_its_stragglers_every_step)
{
  sim_result r;
  lc_run run;
  GError *err = NULL;
  const char *const extra[] = {"training.steps=1000", "stragglers.jitter=0.05", NULL};
  cr_assert(run_estimate(extra, &r, &run, &err), "%s", err ? err->message : "");
  cr_assert_gt(r.stragglers.cost, 0);
  cr_assert_float_eq(run.step_time, r.step_time + r.stragglers.cost, 1e-12);
  cr_assert_float_eq(run.straggler_s, 1000 * r.stragglers.cost, 1e-9);
  cr_assert_float_eq(run.t.wall * run.t.goodput, 1000 * run.step_time, 1e-6);
  sim_result_clear(&r);
}

Test(lifecycle, bad_straggler_input_names_its_key)
{
  const char *const slow[] = {"stragglers.slowdown=0.5", NULL};
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result r;
  GError *err = NULL;
  cr_assert_not(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)slow, &o, &r, &err));
  cr_assert(strstr(err->message, "stragglers.slowdown = 0.5"), "%s", err->message);
  g_error_free(err);
  sim_result_clear(&r);
  static const char *const cluster =
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 3.35TB/s, flops: {bf16: 989TFLOPS}}\n"
      "node: {count: 1, gpus_per_node: 8, intra: {kind: nvswitch, bandwidth: 450GB/s}}\n"
      "network: {nic_bandwidth: 400Gb/s}\n"
      "stragglers:\n"
      "  fraction: 1.5\n";
  g_autofree char *c = th_write("c.yaml", cluster);
  g_autofree char *msg = th_load_error(c, "gpt3-1.3b-dp", NULL);
  cr_assert(msg && strstr(msg, "c.yaml:6:13: stragglers.fraction"), "%s", msg ? msg : "(loaded)");
  th_proc bad = th_dlsim("run -c v100-edr -w resnet50-horovod --set stragglers.jiter=0.1");
  cr_assert_eq(bad.status, 2, "%s", bad.out);
  cr_assert(strstr(bad.out, "did you mean 'jitter'"), "%s", bad.out);
  th_proc_clear(&bad);
}

Test(lifecycle, dlsim_run_reports_what_stragglers_cost)
{
  th_proc none = th_dlsim("run -c v100-edr -w resnet50-horovod -e analytic --json");
  cr_assert_eq(none.status, 0, "%s", none.out);
  cr_assert_null(strstr(none.out, "straggler_s"), "no stragglers, no key");
  th_proc_clear(&none);
  th_proc json = th_dlsim("run -c v100-edr -w resnet50-horovod -e analytic --json "
                          "--set stragglers.fraction=0.5 --set stragglers.slowdown=1.5");
  cr_assert_eq(json.status, 0, "%s", json.out);
  cJSON *j = cJSON_Parse(json.out);
  cr_assert_not_null(j, "%s", json.out);
  /* one of 2 GPUs at 1.5x: half the compute again */
  double compute = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "breakdown_s"), "compute")->valuedouble;
  cr_assert_float_eq(cJSON_GetObjectItem(j, "straggler_s")->valuedouble, 0.5 * compute, 1e-9);
  const cJSON *s = cJSON_GetObjectItem(j, "stragglers");
  cr_assert_eq(cJSON_GetObjectItem(s, "slow_gpus")->valueint, 1);
  cr_assert_eq(cJSON_GetObjectItem(s, "steps")->valueint, 0, "the analytic engine: closed form");
  cJSON_Delete(j);
  th_proc_clear(&json);
}

/* The stage of the one slow GPU `seed` picks among 8, in TP 2 x PP 2 x DP 2 (TP innermost). */
static int slow_stage(int seed)
{
  cfg_stragglers s = {.fraction = 0.125, .slowdown = 2, .seed = seed};
  double f[8];
  g_autoptr(GRand) g = g_rand_new_with_seed((guint32)seed);
  sim_stragglers_lasting(&s, 8, g, f);
  for (int r = 0; r < 8; r++)
    if (f[r] > 1)
      return r / 2 % 2;
  return -1;
}

Test(lifecycle, a_slow_last_stage_costs_its_compute_and_a_first_stage_less)
{
  /* GPT-3 1.3B, TP 2 x PP 2 x DP 2, two micro-batches of 1F1B, one GPU at 2x. On the last stage
   * every forward and backward it runs is on the critical path: the step grows by its whole
   * compute C, as the closed form says. On the first, the other stage's work overlaps part of
   * the slowdown: the DES finds less, and the closed form is an upper bound. */
  sim_result a, d;
  for (int seed = 1; seed <= 3; seed += 2) {
    g_autofree char *pick = g_strdup_printf("stragglers.seed=%d", seed);
    const char *const extra[] = {"training.steps=10", "stragglers.fraction=0.125",
                                 "stragglers.steps=1", pick, NULL};
    lc_run run;
    GError *err = NULL;
    g_auto(GStrv) sets = sim_strv_concat((char *const *)small_run, (char *const *)extra);
    sim_options od = sim_options_for(ENG_DES);
    cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", sets, &od, &d, &err), "%s",
              err ? err->message : "");
    cr_assert(run_estimate(extra, &a, &run, &err), "%s", err ? err->message : "");
    double c = a.eng.compute;
    cr_assert_float_eq(a.stragglers.cost, c, 1e-9 * c);
    /* within 0.3 %: the layers' tensor-parallel all-reduces run as flows beside the
     * data-parallel reduction on NVLink, and a slow stage moves where the two meet, and how
     * much of its stretched compute runs beside a collective (interference) */
    if (slow_stage(seed) == 1)
      cr_assert_float_eq(d.stragglers.cost, c, 3e-3 * c, "seed %d: DES %g, C %g", seed,
                         d.stragglers.cost, c);
    else
      cr_assert(d.stragglers.cost > 0.3 * c && d.stragglers.cost < 0.9 * c,
                "seed %d: DES %g, C %g", seed, d.stragglers.cost, c);
    sim_result_clear(&a);
    sim_result_clear(&d);
  }
  cr_assert_neq(slow_stage(1), slow_stage(3), "the two seeds cover both stages");
}
