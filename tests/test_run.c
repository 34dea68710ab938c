/* sim_run, the typed entry point: structs and files give the same step, the figures are the
 * program's totals over the engine's step, and a fit's parameter set in place equals --set. */
#include "helpers.h"
#include "run/run.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static const char *const run_small[] = {"node.count=1", "parallel.tp=2", "parallel.pp=2",
                                        "parallel.dp=2", "training.global_batch=32", NULL};

Test(run, structs_and_files_give_the_same_step)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-a100", "gpt3-1.3b-dp", (const char *const *)run_small, &c, &w));
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result a, b;
  GError *err = NULL;
  cr_assert(sim_run(c, w, &o, &a, &err), "%s", err ? err->message : "");
  cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)run_small, &o, &b, &err));
  cr_assert_eq(a.step_time, b.step_time);
  cr_assert_eq(a.mfu, b.mfu);
  cr_assert_eq(a.peak_bytes, b.peak_bytes);
  cr_assert(a.cluster == c && a.workload == w, "sim_run borrows what it is given");
  sim_result_clear(&a);
  sim_result_clear(&b);
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

Test(run, figures_are_the_programs_totals_over_the_step)
{
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result r;
  cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)run_small, &o, &r, NULL));
  const prog_meta *m = &r.program->meta;
  cr_assert_eq(r.gpus, 8);
  cr_assert_eq(r.step_time, r.eng.step_time);
  cr_assert_float_eq(r.mfu, m->model_flops / (r.step_time * 8 * r.peak_flops), 1e-12);
  cr_assert_float_eq(r.hfu, m->hardware_flops / (r.step_time * 8 * r.peak_flops), 1e-12);
  cr_assert_float_eq(r.tokens_per_s, m->tokens / r.step_time, 1e-6);
  cr_assert_float_eq(r.peak_flops, 312e12, 1, "A100 bf16 peak");
  cr_assert(r.fits == (r.peak_bytes <= 80.0 * (1 << 30)));
  sim_result_clear(&r);
}

Test(run, folding_is_exact_in_the_steady_state)
{
  sim_options folded = sim_options_for(ENG_ANALYTIC), full = folded;
  full.fold = false;
  sim_result a, b;
  cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)run_small, &folded, &a, NULL));
  cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)run_small, &full, &b, NULL));
  cr_assert_float_eq(a.step_time, b.step_time, 1e-9 * b.step_time);
  cr_assert_float_eq(a.tokens_per_s, b.tokens_per_s, 1e-9 * b.tokens_per_s);
  sim_result_clear(&a);
  sim_result_clear(&b);
}

/* An interleaved pipeline's fold simulates 2p and 3p micro-batches: at 4p that is more than the
 * step itself, which then runs whole; at 8p the fold pays. */
Test(run, the_fold_runs_only_where_it_is_less_work)
{
  const int micro[] = {8, 16}; /* p = 2 */
  const bool folds[] = {false, true};
  for (size_t i = 0; i < G_N_ELEMENTS(micro); i++) {
    g_autofree char *batch = g_strdup_printf("training.global_batch=%d", micro[i] * 4);
    const char *sets[] = {"node.count=1", "parallel.tp=4", "parallel.pp=2", "parallel.dp=1",
                          "parallel.schedule=interleaved", "parallel.virtual_stages=2",
                          "training.micro_batch=4", batch, NULL};
    sim_options o = sim_options_for(ENG_ANALYTIC);
    sim_result r;
    GError *err = NULL;
    cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)sets, &o, &r, &err), "%s",
              err ? err->message : "");
    cr_assert_eq(r.folded, folds[i], "%d micro-batches", micro[i]);
    sim_result_clear(&r);
  }
}

/* sim_fold_counts says what sim_run folds (the interleaved fold at 2p and 3p, k along the line)
 * and each count run on its own draws the same DES step, bit for bit: the plan runs the two
 * apart, at once. At 4p the step runs whole and nothing is said. */
Test(run, the_folds_two_runs_apart_give_the_folded_step, .timeout = 60)
{
  const char *sets[] = {"node.count=1", "parallel.tp=4", "parallel.pp=2", "parallel.dp=1",
                        "parallel.schedule=interleaved", "parallel.virtual_stages=2",
                        "training.micro_batch=4", "training.global_batch=64", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-a100", "gpt3-1.3b-dp", sets, &c, &w));
  sim_options o = sim_options_for(ENG_DES);
  int m[2];
  double k;
  cr_assert(sim_fold_counts(w, &o, m, &k));
  cr_assert(m[0] == 4 && m[1] == 6 && k == 6, "m %d and %d, k %g", m[0], m[1], k);
  sim_result whole, part[2];
  cr_assert(sim_run(c, w, &o, &whole, NULL) && whole.folded);
  sim_options apart = o;
  apart.fold = false;
  for (int i = 0; i < 2; i++) {
    cfg_workload wi = *w;
    wi.training.global_batch = m[i] * 4;
    cr_assert(sim_run(c, &wi, &apart, &part[i], NULL) && !part[i].folded);
  }
  double step = sim_fold_step(part[0].step_time, part[1].step_time, k);
  cr_assert(step == whole.step_time, "%.17g apart, %.17g folded", step, whole.step_time);
  w->training.global_batch = 32; /* 4p: whole */
  cr_assert_not(sim_fold_counts(w, &o, m, &k));
  for (int i = 0; i < 2; i++)
    sim_result_clear(&part[i]);
  sim_result_clear(&whole);
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

/* One configuration of a sweep: the layout and the knobs the planner varies. */
typedef struct {
  int tp, cp, pp, dp, v;
  cfg_schedule sched;
  bool outer;
  int zero;
  cfg_recompute rc;
  int mb, batch;
} run_sweep_row;

static void run_sweep_apply(const run_sweep_row *r, cfg_workload *w)
{
  const cfg_dim inner[] = {CFG_DIM_TP, CFG_DIM_CP, CFG_DIM_PP, CFG_DIM_DP};
  const cfg_dim outer[] = {CFG_DIM_TP, CFG_DIM_CP, CFG_DIM_DP, CFG_DIM_PP};
  cfg_parallel *p = &w->parallel;
  p->tp = r->tp;
  p->cp = r->cp;
  p->pp = r->pp;
  p->dp = r->dp;
  p->virtual_stages = r->v;
  p->schedule = r->sched;
  p->zero = r->zero;
  memcpy(p->placement, r->outer ? outer : inner, sizeof inner);
  p->nplacement = CFG_NDIMS;
  w->training.flash_attention = 1;
  w->training.recompute = r->rc;
  w->training.micro_batch = r->mb;
  w->training.global_batch = r->batch;
}

static void run_assert_same(const sim_result *a, const sim_result *b, int i)
{
  const eng_result *x = &a->eng, *y = &b->eng;
  cr_assert(a->step_time == b->step_time, "config %d: step %.17g shared, %.17g alone", i,
            a->step_time, b->step_time);
  cr_assert(x->compute == y->compute && x->exposed_comm == y->exposed_comm &&
                x->bubble == y->bubble && x->other == y->other && x->critical_rank == y->critical_rank,
            "config %d: the breakdown differs", i);
  cr_assert(a->peak_bytes == b->peak_bytes && a->mfu == b->mfu && a->tokens_per_s == b->tokens_per_s,
            "config %d: memory or rates differ", i);
  cr_assert(memcmp(x->comm, y->comm, sizeof x->comm) == 0 &&
                memcmp(x->exposed, y->exposed, sizeof x->exposed) == 0,
            "config %d: communication differs", i);
  cr_assert_eq(x->nclasses, y->nclasses);
  for (int k = 0; k < x->nclasses; k++)
    cr_assert(x->class_peak[k] == y->class_peak[k], "config %d: class %d's peak differs", i, k);
}

/* A sweep's runs share a cache (the planner's refinement): its hardware, collective plans and
 * the process groups of each layout met before (several layouts met again, one after more
 * than the cache keeps, layouts one knob apart in what decides groups: placement, the reverse
 * channels of ZB-V and DualPipe, context parallelism; SMs reserved for collectives, which
 * change the times of the same templates). Every figure of every configuration is
 * the one it has alone, bit for bit: a group store kept for the wrong layout would differ. */
Test(run, a_sweep_sharing_a_cache_gives_every_configuration_its_own_step, .timeout = 120)
{
  const cfg_schedule one = CFG_SCHED_1F1B, il = CFG_SCHED_INTERLEAVED;
  const cfg_recompute sel = CFG_RECOMPUTE_SELECTIVE, full = CFG_RECOMPUTE_FULL,
                      none = CFG_RECOMPUTE_NONE;
  const run_sweep_row rows[] = {
      {2, 1, 2, 4, 1, one, false, 0, sel, 2, 64},  {2, 1, 2, 4, 1, one, true, 0, sel, 2, 64},
      {2, 1, 2, 4, 1, one, false, 1, full, 2, 128}, {4, 1, 2, 2, 1, one, false, 0, none, 2, 64},
      {4, 1, 4, 1, 2, il, false, 0, sel, 1, 32},   {1, 1, 4, 4, 1, one, false, 2, sel, 1, 64},
      {8, 1, 1, 2, 1, one, false, 0, sel, 4, 64},  {1, 1, 1, 16, 1, one, false, 1, none, 2, 64},
      {2, 1, 4, 2, 1, one, false, 0, sel, 1, 32}, {2, 1, 4, 2, 2, CFG_SCHED_ZB_V, false, 0, sel, 1, 32},
      {1, 1, 2, 8, 1, one, true, 0, sel, 1, 64},   {2, 2, 2, 2, 1, one, false, 0, sel, 1, 32},
      {2, 1, 2, 4, 1, one, false, 0, sel, 1, 128}, {4, 1, 2, 2, 1, one, false, 1, sel, 1, 32},
      {2, 1, 2, 4, 1, CFG_SCHED_DUALPIPE, true, 0, sel, 2, 64}, {2, 1, 2, 4, 1, one, true, 1, full, 2, 64},
  };
  const char *sets[] = {"node.count=2", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *base = NULL;
  cr_assert(th_load("dgx-a100", "gpt3-1.3b-dp", sets, &c, &base));
  GError *err = NULL;
  sim_options shared = sim_options_for(ENG_ANALYTIC), alone = shared;
  shared.cache = sim_cache_new(c, base, &err);
  cr_assert(shared.cache, "%s", err ? err->message : "");
  /* the last again with SMs reserved: other times for the same templates */
  for (size_t i = 0; i <= G_N_ELEMENTS(rows); i++) {
    cfg_workload w = *base;
    run_sweep_apply(&rows[MIN(i, G_N_ELEMENTS(rows) - 1)], &w);
    w.collectives.sm_reserved = i == G_N_ELEMENTS(rows) ? 0.2 : 0;
    sim_result a, b;
    cr_assert(sim_run(c, &w, &shared, &a, &err), "config %zu: %s", i, err ? err->message : "");
    cr_assert(sim_run(c, &w, &alone, &b, &err), "config %zu: %s", i, err ? err->message : "");
    run_assert_same(&a, &b, (int)i);
    sim_result_clear(&a);
    sim_result_clear(&b);
  }
  sim_cache_free(shared.cache);
  cfg_workload_free(base);
  cfg_cluster_free(c);
}

/* What `dlsim calibrate --case` changes between evaluations: the number in the loaded struct,
 * which must mean what the same --set means. */
Test(run, a_parameter_set_in_place_equals_the_override)
{
  const char *keys[] = {"gpu.efficiency.sustained", "gpu.efficiency.flops.gemm",
                        "nccl.base_latency.simple", "nccl.hop_latency.network.ll128"};
  const char *values[] = {"0.71", "0.55", "40us", "9us"};
  const double si[] = {0.71, 0.55, 40e-6, 9e-6};
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
    g_autofree char *set = g_strdup_printf("%s=%s", keys[i], values[i]);
    const char *sets[] = {run_small[0], run_small[1], run_small[2], run_small[3], run_small[4], set, NULL};
    cfg_cluster *c = NULL, *c2 = NULL;
    cfg_workload *w = NULL, *w2 = NULL;
    cr_assert(th_load("dgx-a100", "gpt3-1.3b-dp", (const char *const *)run_small, &c, &w));
    cr_assert(th_load("dgx-a100", "gpt3-1.3b-dp", sets, &c2, &w2));
    double *p = cfg_cluster_param(c, keys[i], NULL);
    cr_assert(p, "%s", keys[i]);
    *p = si[i];
    sim_options o = sim_options_for(ENG_ANALYTIC);
    sim_result a, b;
    cr_assert(sim_run(c, w, &o, &a, NULL) && sim_run(c2, w2, &o, &b, NULL));
    cr_assert_eq(a.step_time, b.step_time, "%s: %.9g vs %.9g", keys[i], a.step_time, b.step_time);
    sim_result_clear(&a);
    sim_result_clear(&b);
    cfg_workload_free(w);
    cfg_workload_free(w2);
    cfg_cluster_free(c);
    cfg_cluster_free(c2);
  }
}

Test(run, a_key_that_names_no_number_is_an_input_error)
{
  cfg_cluster *c = NULL;
  cr_assert(th_load("dgx-a100", NULL, NULL, &c, NULL));
  const char *bad[] = {"gpu.efficiency", "gpu.efficiency.flops.warp", "gpu.name", "nope",
                       "gpu.efficiency.sustained.x", "node.count"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *err = NULL;
    cr_assert_null(cfg_cluster_param(c, bad[i], &err), "%s", bad[i]);
    cr_assert(g_error_matches(err, CFG_ERROR, CFG_ERROR_INPUT) && strstr(err->message, bad[i]));
    g_error_free(err);
  }
  cfg_cluster_free(c);
}

Test(run, serving_workloads_are_not_training_steps)
{
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result r;
  GError *err = NULL;
  cr_assert_not(sim_run_files("dgx-h100", "llama2-7b-vllm", NULL, &o, &r, &err));
  cr_assert(g_error_matches(err, CFG_ERROR, CFG_ERROR_UNSUPPORTED) && strstr(err->message, "dlsim serve"));
  g_error_free(err);
  sim_result_clear(&r);
}

/* One preset workload on dgx-h100 as a non-blocking fat tree with an engine; false if the
 * preset has no training step there (a generic model, a batch the cluster cannot split). */
static bool preset_step(const char *path, eng_kind kind, double *step, int *gpus)
{
  char *sets[] = {"network.topology=fat-tree", NULL};
  sim_options o = sim_options_for(kind);
  sim_result r;
  GError *err = NULL;
  bool ok = sim_run_files("dgx-h100", path, sets, &o, &r, &err);
  if (ok) {
    *step = r.step_time;
    *gpus = r.gpus;
    sim_result_clear(&r);
  }
  g_clear_error(&err);
  return ok;
}

/* Without contention the DES and the analytic engine time the same step: every preset training
 * workload up to 64 GPUs (the larger ones take minutes under sanitizers) within 3 %. */
Test(run, des_and_analytic_agree_on_the_preset_workloads_without_contention, .timeout = 300)
{
  g_autofree char *dir = g_build_filename(DLSIM_SOURCE_DIR, "configs", "workloads", NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  cr_assert(d);
  int checked = 0;
  for (const char *f; (f = g_dir_read_name(d));) {
    g_autofree char *path = g_build_filename(dir, f, NULL);
    double a, s;
    int gpus;
    if (!g_str_has_suffix(f, ".yaml") || !preset_step(path, ENG_ANALYTIC, &a, &gpus) || gpus > 64)
      continue;
    cr_assert(preset_step(path, ENG_DES, &s, &gpus), "%s: the DES failed", f);
    cr_assert(fabs(s / a - 1) < 0.03, "%s: des %.9g s, analytic %.9g s", f, s, a);
    checked++;
  }
  g_dir_close(d);
  cr_assert(checked >= 5, "only %d presets checked", checked);
}

/* The DES's busiest links follow the folded step as its times do: bytes along the line through
 * the two simulated micro-batch counts, over the extrapolated step. */
Test(run, folded_link_loads_equal_the_full_simulation)
{
  /* 16 micro-batches per replica: the folded run simulates 2 and 4 */
  const char *const sets[] = {"node.count=1", "parallel.tp=2", "parallel.pp=2", "parallel.dp=2",
                              "training.global_batch=256", NULL};
  sim_options folded = sim_options_for(ENG_DES), full = folded;
  full.fold = false;
  sim_result a, b;
  cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)sets, &folded, &a, NULL));
  cr_assert(sim_run_files("dgx-a100", "gpt3-1.3b-dp", (char *const *)sets, &full, &b, NULL));
  const eng_link_load *top = &g_array_index(b.eng.link_loads, eng_link_load, 0);
  bool found = false;
  for (guint i = 0; i < a.eng.link_loads->len; i++) {
    const eng_link_load *l = &g_array_index(a.eng.link_loads, eng_link_load, i);
    if (l->link != top->link || l->down != top->down)
      continue;
    found = true;
    cr_assert_float_eq(l->bytes, top->bytes, 1e-6 * top->bytes);
    cr_assert_float_eq(l->utilisation, top->utilisation, 1e-6 * top->utilisation);
  }
  cr_assert(found, "the full simulation's busiest link is among the folded one's");
  sim_result_clear(&a);
  sim_result_clear(&b);
}

/* MPS, by hand: with no launch cost, k processes on one GPU each get 1/k of its FLOP/s and
 * bandwidth, so each one's compute for the same work is k times that of one process alone;
 * each holds what a process on a GPU of its own holds (its states, its activations, its CUDA
 * context) in 1/k of the GPU's memory. */
Test(run, mps_processes_share_a_gpu_k_times_slower_each_with_its_own_memory)
{
  sim_options o = sim_options_for(ENG_ANALYTIC);
  const char *const one[] = {"node.count=1", "training.global_batch=16", "training.micro_batch=16",
                             "gpu.efficiency.launch_overhead=0",
                             "collectives.runtime=mpi-mvapich", NULL};
  const char *const four[] = {"node.count=1", "training.global_batch=64",
                              "training.micro_batch=16", "gpu.efficiency.launch_overhead=0",
                              "collectives.runtime=mpi-mvapich", "parallel.processes_per_gpu=4",
                              NULL};
  const char *const apart[] = {"node.count=4", "training.global_batch=64",
                               "training.micro_batch=16", "gpu.efficiency.launch_overhead=0",
                               "collectives.runtime=mpi-mvapich", NULL};
  sim_result r1, r4, ra;
  GError *err = NULL;
  cr_assert(sim_run_files("v100-edr", "resnet50-horovod", (char *const *)one, &o, &r1, &err), "%s",
            err ? err->message : "");
  cr_assert(sim_run_files("v100-edr", "resnet50-horovod", (char *const *)four, &o, &r4, &err), "%s",
            err ? err->message : "");
  cr_assert(sim_run_files("v100-edr", "resnet50-horovod", (char *const *)apart, &o, &ra, &err));
  cr_assert_eq(r4.gpus, 4, "four processes, four ranks");
  cr_assert_eq(r4.workload->parallel.dp, 4);
  cr_assert_float_eq(r4.eng.compute, 4 * r1.eng.compute, 1e-9 * r1.eng.compute, "%.9g vs 4 x %.9g",
                     r4.eng.compute, r1.eng.compute);
  cr_assert_float_eq(r4.peak_bytes, ra.peak_bytes, 1, "a process holds what a rank of its own GPU "
                     "holds: %.0f vs %.0f", r4.peak_bytes, ra.peak_bytes);
  cr_assert_float_eq(r4.capacity_bytes, 32.0 * (1 << 30) / 4, 1);
  sim_result_clear(&r1);
  sim_result_clear(&r4);
  sim_result_clear(&ra);
}

Test(run, mps_needs_an_mpi_runtime)
{
  const char *const sets[] = {"parallel.processes_per_gpu=2", "node.count=1", NULL};
  g_autofree char *msg = th_load_error("v100-edr", "resnet50-horovod", sets);
  cr_assert(msg && strstr(msg, "--set parallel.processes_per_gpu") &&
                strstr(msg, "NCCL refuses two ranks on one GPU"),
            "%s", msg ? msg : "(loaded)");
}

/* Megatron's CI model (12 layers, hidden 512, 8 heads, 1024 tokens, micro-batch 4, vocabulary
 * 50304) on one H100, its host time and deterministic attention cost as given, run once plain
 * and once with `extra`. */
static void run_ci_model(const char *extra, const char *host, const char *attention, double *plain,
                         double *with)
{
  const char *sets[] = {"node.count=1", "node.gpus_per_node=1", "parallel.dp=1",
                        "training.global_batch=4", "model.layers=12", "model.hidden=512",
                        "model.heads=8", "model.seq_len=1024", "model.vocab=50304",
                        "gpu.efficiency.launch_overhead=5us", "gpu.efficiency.memory=0.8", host,
                        attention, NULL, NULL};
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result a, b;
  GError *err = NULL;
  cr_assert(sim_run_files("dgx-h100", "validation/megatron_ci/gpt-ci.yaml", (char *const *)sets, &o,
                          &a, &err), "%s", err ? err->message : "");
  sets[13] = extra;
  cr_assert(sim_run_files("dgx-h100", "validation/megatron_ci/gpt-ci.yaml", (char *const *)sets, &o,
                          &b, &err), "%s", err ? err->message : "");
  *plain = a.step_time;
  *with = b.step_time;
  sim_result_clear(&a);
  sim_result_clear(&b);
}

/* What deterministic mode's fills cost by hand: each block's forward and backward fill 34 s b h
 * bytes (Korthikanti et al.'s activations of a block with fused attention; s b h = 1024 x 4 x
 * 512), the output layer's the fp32 logits and the final norm's input (4096 x 50304 x 4 +
 * 4096 x 512 x 2), each pass one memory-bound kernel at the H100 preset's 3.35 TB/s x 0.8 and
 * a launch overhead of 5 us (both set by run_ci_model). */
static double run_ci_fills(void)
{
  double sbh = 1024.0 * 4 * 512, head = 4096.0 * 50304 * 4 + 4096.0 * 512 * 2;
  return (12 * 2 * 34 * sbh + 2 * head) / (3.35e12 * 0.8) + (12 * 2 + 2) * 5e-6;
}

/* Without host time, a deterministic step is longer by its fills and, on each of the 12
 * attention backward calls, deterministic_bwd (1 ms here). */
Test(run, a_deterministic_step_is_slower_by_its_fills_and_attention_calls)
{
  double plain, det;
  run_ci_model("training.deterministic=true", "training.host_dispatch=0",
               "gpu.efficiency.attention.deterministic_bwd=1ms", &plain, &det);
  double expect = run_ci_fills() + 12 * 1e-3;
  cr_assert_float_eq(det - plain, expect, 1e-9, "%.9g s more, %.9g by hand", det - plain, expect);
}

/* Without gradient-accumulation fusion each layer's backward adds its fresh 16-bit gradients
 * into the fp32 main gradients: 2 + 4 + 4 bytes a parameter, one kernel per layer with
 * parameters (the embedding, 12 blocks, the output layer's final norm). The CI model's
 * parameters: the embedding's 50304 x 512; a block's QKV and projection 4 x 512 x 512, its MLP
 * 2 x 512 x 2048, its two norms 4 x 512; the output layer's norm 2 x 512 (the logits share the
 * embedding's weights). */
Test(run, unfused_gradient_accumulation_costs_a_pass_over_the_parameters)
{
  double plain, unfused;
  run_ci_model("training.grad_accum_fusion=false", "training.host_dispatch=0",
               "gpu.efficiency.attention.deterministic_bwd=0", &plain, &unfused);
  double params = 50304.0 * 512 + 12 * (4.0 * 512 * 512 + 2.0 * 512 * 2048 + 4 * 512) + 2 * 512;
  double expect = params * 10 / (3.35e12 * 0.8) + 14 * 5e-6;
  cr_assert_float_eq(unfused - plain, expect, 1e-9, "%.9g s more, %.9g by hand", unfused - plain,
                     expect);
}

/* Megatron-LM's unfused vocabulary-parallel cross-entropy (the CI workload's loss_fusion:
 * false) moves 24 bytes a logit more than the fused pass in forward and 8 more in backward,
 * over the 4096 x 50304 logits, in the same two kernels. */
Test(run, the_unfused_loss_moves_32_bytes_a_logit_more)
{
  double unfused, fused;
  run_ci_model("training.loss_fusion=true", "training.host_dispatch=0",
               "gpu.efficiency.attention.deterministic_bwd=0", &unfused, &fused);
  double expect = 4096.0 * 50304 * 32 / (3.35e12 * 0.8);
  cr_assert_float_eq(unfused - fused, expect, 1e-9, "%.9g s more, %.9g by hand", unfused - fused,
                     expect);
}

/* The fills are launched by the allocations' C++, not by the host's Python: with the CI's host
 * time per kernel, deterministic mode adds at most the fills' GPU time (launched by the host,
 * the 26 fills would add 26 x 190 us); the attention's deterministic cost means nothing to a
 * step that is not deterministic. */
Test(run, fills_cost_no_host_time_and_the_attention_cost_needs_the_mode)
{
  double plain, det, off;
  run_ci_model("training.deterministic=true", "training.host_dispatch=190us",
               "gpu.efficiency.attention.deterministic_bwd=0", &plain, &det);
  cr_assert(det > plain && det - plain <= run_ci_fills() * (1 + 1e-9), "%.9g s more, fills %.9g",
            det - plain, run_ci_fills());
  run_ci_model("gpu.efficiency.attention.deterministic_bwd=1ms", "training.host_dispatch=190us",
               "training.deterministic=false", &plain, &off);
  cr_assert_eq(off, plain);
}
