#include "run/run.h"

#include "workloads/workloads.h"

#include <math.h>
#include <string.h>

sim_options sim_options_for(eng_kind engine)
{
  return (sim_options){.engine = engine, .fold = true};
}

/* Template times kept for the programs whose groups and templates `templates` has
 * (prog_templates_of). */
typedef struct {
  prog_program *templates;
  eng_costs *costs;
} sim_costs_entry;

/* How many: each holds one layout's templates and their times (kilobytes), and a sweep's
 * configurations come a few layouts and recomputation settings at a time. */
#define SIM_CACHE_COSTS 8

struct sim_cache {
  cfg_cluster *mps; /* sim_mps_cluster's copy, when the runs see one */
  hw_cluster *hw;
  coll_runtime *runtime;
  coll_planner *planner;
  wl_cache *programs; /* the process groups of the layouts met */
  sim_costs_entry costs[SIM_CACHE_COSTS];
  int ncosts, next_costs; /* entries filled; the one to replace next (oldest first) */
};

sim_cache *sim_cache_new(const cfg_cluster *c, const cfg_workload *w, GError **err)
{
  sim_cache *k = g_new0(sim_cache, 1);
  k->mps = sim_mps_cluster(c, w);
  k->hw = hw_cluster_new(k->mps ? k->mps : c);
  eng_options o = {.kind = ENG_ANALYTIC};
  k->runtime = coll_runtime_with_choices(&w->collectives, w->doc, &o.algo, &o.proto, err);
  if (!k->runtime) {
    sim_cache_free(k);
    return NULL;
  }
  o.runtime = k->runtime;
  k->planner = eng_planner_new(k->hw, &o);
  coll_planner_key_by_ranks(k->planner);
  k->programs = wl_cache_new();
  return k;
}

void sim_cache_free(sim_cache *k)
{
  if (!k)
    return;
  for (int i = 0; i < k->ncosts; i++) {
    eng_costs_free(k->costs[i].costs);
    prog_free(k->costs[i].templates);
  }
  wl_cache_free(k->programs);
  coll_planner_free(k->planner);
  coll_runtime_free(k->runtime);
  hw_cluster_free(k->hw);
  g_free(k->mps);
  g_free(k);
}

/* The collective planner the runs of `out` share: its cache's (analytic runs with folded
 * collectives, as the cache's planner plans), else one of their own (sim_planner_done frees
 * it), or none for the DES. */
static coll_planner *sim_planner_for(sim_result *out)
{
  const eng_options *o = &out->options;
  if (o->kind != ENG_ANALYTIC)
    return NULL;
  return out->cache && !o->unfold ? out->cache->planner : eng_planner_new(out->hw, o);
}

/* The cache's planner, when the runs of `out` share it (NULL: none). */
static coll_planner *sim_cache_planner(const sim_result *out)
{
  return out->cache && out->options.kind == ENG_ANALYTIC && !out->options.unfold
             ? out->cache->planner
             : NULL;
}

/* The runs are over: template times of their own are freed, the cache's kept. */
static void sim_costs_done(sim_result *out, bool own)
{
  if (own)
    eng_costs_free(out->options.costs);
  out->options.costs = NULL;
}

static void sim_planner_done(sim_result *out, coll_planner *pl)
{
  out->options.planner = NULL;
  if (!out->cache || pl != out->cache->planner)
    coll_planner_free(pl);
}

/* The model and groups the runs of `out` share: its cache's, else its own. */
static wl_cache *sim_programs(const sim_result *out)
{
  return out->cache ? out->cache->programs : out->own_programs;
}

/* Template times for `p` kept by the cache from an earlier run, or NULL. */
static eng_costs *sim_costs_kept(const sim_result *out, const prog_program *p)
{
  const sim_cache *k = out->cache;
  for (int i = 0; k && i < k->ncosts; i++) {
    const sim_costs_entry *e = &k->costs[i];
    if (prog_groups_same(e->templates, p) && prog_templates_same(e->templates, p) &&
        eng_costs_fit(e->costs, out->hw, &out->options))
      return e->costs;
  }
  return NULL;
}

/* Template times for the runs of `p` (out->options.planner set): the cache's, which it keeps
 * for later runs of the same templates on the same groups (a sweep's configurations that
 * differ in the batch or the ZeRO stage), else new ones, `*own` then telling the caller to
 * free them. */
static eng_costs *sim_costs_for(sim_result *out, const prog_program *p, bool *own)
{
  eng_costs *c = sim_costs_kept(out, p);
  *own = false;
  if (c)
    return c;
  c = eng_costs_new_shared(out->hw, &out->options);
  sim_cache *k = out->cache;
  if (!k) {
    *own = true;
    return c;
  }
  sim_costs_entry *e = &k->costs[k->next_costs];
  if (k->ncosts < SIM_CACHE_COSTS)
    k->ncosts++;
  else {
    eng_costs_free(e->costs);
    prog_free(e->templates);
  }
  *e = (sim_costs_entry){.templates = prog_templates_of(p), .costs = c};
  k->next_costs = (k->next_costs + 1) % SIM_CACHE_COSTS;
  return c;
}

/* Micro-batches each data-parallel replica runs per step. */
static int sim_micro_batches(const cfg_workload *w)
{
  return w->training.global_batch / (w->parallel.dp * w->training.micro_batch);
}

/* The engine's progress within one of the runs, as a fraction of the whole: a run covers
 * [lo, lo + span). */
typedef struct {
  const sim_options *o;
  double lo, span;
} sim_progress;

static void sim_progress_scaled(double fraction, void *ctx)
{
  const sim_progress *p = ctx;
  p->o->progress(p->lo + p->span * fraction, p->o->progress_ctx);
}

static void sim_progress_range(sim_result *out, double lo, double hi)
{
  if (out->options.progress == sim_progress_scaled) {
    sim_progress *p = out->options.progress_ctx;
    p->lo = lo;
    p->span = hi - lo;
  }
}

/* The workload with `micro` micro-batches per replica. */
static cfg_workload sim_workload_with(const sim_result *out, int micro)
{
  cfg_workload w = *out->workload;
  w.training.global_batch = micro * w.parallel.dp * w.training.micro_batch;
  return w;
}

/* Builds the step with `micro` micro-batches per replica. */
static bool sim_build_with(sim_result *out, int micro, prog_program **prog, GError **err)
{
  cfg_workload w = sim_workload_with(out, micro);
  if (!wl_build_cached(&w, out->hw, sim_programs(out), prog, err))
    return false;
  mem_annotate_program(*prog, &out->memory);
  return true;
}

/* Builds and runs the step with `micro` micro-batches per replica. */
static bool sim_run_with(sim_result *out, int micro, prog_program **prog, eng_result *res,
                         GError **err)
{
  if (!sim_build_with(out, micro, prog, err))
    return false;
  /* a planner of its own is the engine's to make */
  coll_planner *pl = out->cache ? sim_planner_for(out) : NULL;
  out->options.planner = pl;
  bool own = false;
  if (pl && pl == sim_cache_planner(out))
    out->options.costs = sim_costs_for(out, *prog, &own);
  bool ok = eng_run(*prog, out->hw, &out->options, res, err);
  sim_costs_done(out, own);
  sim_planner_done(out, pl);
  return ok;
}

/* The second of the fold's programs, once the first has run: built with it, or made in place
 * of it (`later`; the first is then gone: *p1 NULL). */
static void sim_second_program(sim_result *out, prog_program **p1, prog_program *built,
                               wl_later *later)
{
  out->program = later ? wl_later_make(later, g_steal_pointer(p1)) : built;
  mem_annotate_program(out->program, &out->memory);
}

/* The first of the fold's runs when the second is made in place of its program (`later`):
 * the walk is kept where the two first differ, for the second to go on from (*fork). */
static bool sim_run_first(sim_result *out, prog_program *p1, const wl_later *later,
                          eng_result *r1, eng_fork **fork, GError **err)
{
  g_autofree guint *at = NULL, *ins = NULL;
  g_autofree unsigned *streams = NULL;
  int n = wl_later_splice(later, p1, &at, &ins, &streams);
  eng_splice sp = {.nclasses = (guint)n, .at = at, .ins = ins, .streams = streams};
  return eng_run_forking(p1, out->hw, &out->options, &sp, r1, fork, err);
}

/* The second of the fold's runs: from the first's fork where there is one. */
static bool sim_run_second(sim_result *out, const eng_fork *fork, GError **err)
{
  bool resumed = false;
  if (fork) {
    bool ok = eng_run_from_fork(fork, out->program, out->hw, &out->options, &out->eng, &resumed,
                                err);
    if (resumed)
      return ok;
  }
  return eng_run(out->program, out->hw, &out->options, &out->eng, err);
}

/* The fold's two runs, built together (one model, one set of groups); the second shares the
 * first's collective planner and template times (the plans are the same: they depend on the
 * group and the bytes, not on how many micro-batches run). Where the second program is the
 * first's ops with copies of its own passes inserted, it is made in place of the first once
 * that has run, rather than beside it: the ops before the inserts stay where they are. */
static bool sim_run_pair(sim_result *out, int m1, int m2, prog_program **p1, eng_result *r1,
                         double first, GError **err)
{
  cfg_workload w[2] = {sim_workload_with(out, m1), sim_workload_with(out, m2)};
  const cfg_workload *const ws[2] = {&w[0], &w[1]};
  prog_program *p[2];
  wl_later *later = NULL;
  if (!wl_build_two_later(ws, out->hw, sim_programs(out), p, &later, err))
    return false;
  *p1 = p[0];
  mem_annotate_program(p[0], &out->memory);
  coll_planner *shared = sim_planner_for(out);
  out->options.planner = shared;
  /* and the template times, when the templates are the same (they do not depend on the
   * batch either; a second made from the first has the first's) */
  bool own = false;
  if (shared && (later || prog_templates_same(p[0], p[1])))
    out->options.costs = sim_costs_for(out, p[0], &own);
  sim_progress_range(out, 0, first);
  eng_fork *fork = NULL;
  bool ok = later ? sim_run_first(out, *p1, later, r1, &fork, err)
                  : eng_run(*p1, out->hw, &out->options, r1, err);
  if (ok)
    sim_second_program(out, p1, p[1], g_steal_pointer(&later));
  else
    prog_free(p[1]);
  wl_later_free(later);
  sim_progress_range(out, first, 1);
  ok = ok && sim_run_second(out, fork, err);
  eng_fork_free(fork);
  sim_costs_done(out, own);
  sim_planner_done(out, shared);
  return ok;
}

/* Identical micro-batches are not simulated one by one: past the pipeline's warm-up every `step`
 * more micro-batches add the same time (one period of the steady state; with interleaving, a
 * round of p), so the step with m micro-batches is simulated at two small counts, m1 and
 * m1 + step, and extended along the line through them. */
static int sim_fold_first(const cfg_parallel *par)
{
  /* 1F1B is in its steady state from p micro-batches on; interleaving warms up for up to
   * (v + 1) p - 2 forward passes of the m v it runs, so it needs 2p */
  int pp = par->pp, step = pp > 1 ? pp : 1;
  bool interleaved = pp > 1 && ((par->schedule == CFG_SCHED_INTERLEAVED && par->virtual_stages > 1) ||
                                par->schedule == CFG_SCHED_ZB_V);
  /* DualPipe runs at least 2p (deepseek-ai/DualPipe's rule) and is in its steady state from 3p
   * on (at 2p its bubble is a few microseconds shorter) */
  bool dual = pp > 1 && par->schedule == CFG_SCHED_DUALPIPE;
  return dual ? 3 * step : interleaved ? 2 * step : step;
}

/* Whether the fold's two runs (m1 and m1 + step micro-batches) are less work than the step:
 * an interleaved pipeline of 4p micro-batches would simulate 5p. */
static bool sim_fold_pays(const cfg_parallel *par, int micro, int step)
{
  int m1 = sim_fold_first(par);
  return micro >= 4 * step && 2 * m1 + step < micro;
}

bool sim_fold_counts(const cfg_workload *w, const sim_options *o, int m[2], double *k)
{
  const cfg_parallel *par = &w->parallel;
  int micro = sim_micro_batches(w), step = par->pp > 1 ? par->pp : 1;
  if (!o->fold || !sim_fold_pays(par, micro, step))
    return false;
  m[0] = sim_fold_first(par);
  m[1] = m[0] + step;
  *k = (double)(micro - m[0]) / step;
  return true;
}

double sim_fold_step(double a, double b, double k)
{
  /* as eng_result_extrapolate draws the line, so that the step is the same bit for bit */
  return a + (b - a) * k;
}

static bool sim_fold(sim_result *out, int micro, GError **err)
{
  const cfg_parallel *par = &out->workload->parallel;
  int step = par->pp > 1 ? par->pp : 1, m1 = sim_fold_first(par);
  prog_program *p1 = NULL;
  eng_result r1 = {0};
  /* the work of a run grows with its micro-batches */
  double first = (double)m1 / (2 * m1 + step);
  bool ok = sim_run_pair(out, m1, m1 + step, &p1, &r1, first, err);
  if (ok) {
    double k = (double)(micro - m1) / step;
    eng_result_extrapolate(&r1, &out->eng, k, &out->eng);
    /* what the step achieves scales with its micro-batches */
    prog_meta *meta = &out->program->meta;
    double scale = (double)micro / (m1 + step);
    meta->samples *= scale;
    meta->tokens *= scale;
    meta->model_flops *= scale;
    meta->hardware_flops *= scale;
    meta->a2a_bytes *= scale;
  }
  eng_result_clear(&r1);
  prog_free(p1);
  return ok;
}

/* The figures every report prints, from the program's totals and the engine's step. MFU and
 * HFU follow Megatron-LM (Korthikanti et al. 2022): MFU = model FLOPs per step (3x the forward
 * GEMMs and attention, no recomputation) / (step time x GPUs x peak FLOP/s of the training
 * dtype); HFU counts the FLOPs the hardware really ran, recomputation included. */
static void sim_figures(sim_result *r)
{
  const prog_meta *m = &r->program->meta;
  double step = r->eng.step_time;
  r->gpus = r->program->nranks;
  r->peak_flops = hw_peak_flops(r->hw, m->dtype);
  double denom = step * r->gpus * r->peak_flops;
  r->step_time = step;
  r->mfu = denom > 0 ? m->model_flops / denom : 0;
  r->hfu = denom > 0 ? m->hardware_flops / denom : 0;
  r->model_tflops_per_gpu = step > 0 ? m->model_flops / step / r->gpus / 1e12 : 0;
  r->samples_per_s = step > 0 ? m->samples / step : 0;
  r->tokens_per_s = step > 0 ? m->tokens / step : 0;
  r->peak_bytes = MAX(r->eng.peak_memory, mem_worst(&r->memory)->total);
  r->capacity_bytes = r->cluster->gpu.memory;
  /* offloaded states must fit the nodes too (as dlsim memory says) */
  r->fits = r->peak_bytes <= r->capacity_bytes && r->memory.host_fits && r->memory.nvme_fits;
}

static bool sim_sane(double v)
{
  return isfinite(v) && v >= 0;
}

/* Nothing impossible is reported: a time, rate or size that is not a finite number >= 0 means
 * a cost came out as nonsense (a bandwidth near zero, say), and the run fails naming the part. */
static bool sim_check_figures(const sim_result *r, GError **err)
{
  const eng_result *e = &r->eng;
  const struct {
    const char *what;
    double v;
  } parts[] = {{"the step time", r->step_time}, {"compute", e->compute},
               {"exposed communication", e->exposed_comm}, {"the pipeline bubble", e->bubble},
               {"other time", e->other}, {"the memory peak", r->peak_bytes},
               {"the throughput", r->samples_per_s}, {"the MFU", r->mfu}};
  for (size_t i = 0; i < G_N_ELEMENTS(parts); i++)
    if (!sim_sane(parts[i].v)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                  "the simulation gave %s = %g, not a result: check the cluster's bandwidths, "
                  "latencies and FLOP/s", parts[i].what, parts[i].v);
      return false;
    }
  for (int d = 0; d < PROG_NDIMS; d++)
    if (!sim_sane(e->comm[d]) || !sim_sane(e->exposed[d])) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                  "the simulation gave %g s of %s communication, not a result: check the "
                  "cluster's bandwidths and latencies", e->comm[d], prog_dim_name((prog_dim)d));
      return false;
    }
  return true;
}

static bool sim_options_check(const sim_options *o, GError **err)
{
  if (o->trace && o->fold) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "a trace needs every micro-batch simulated: turn folding off to trace");
    return false;
  }
  return true;
}

static bool sim_engine_options(sim_result *out, const sim_options *o, GError **err)
{
  const cfg_collectives *cl = &out->workload->collectives;
  coll_algo algo;
  int proto;
  out->runtime = coll_runtime_with_choices(cl, out->workload->doc, &algo, &proto, err);
  if (!out->runtime)
    return false;
  /* a runtime driven from the host moves data with the NIC and copy engines: no SMs held */
  double sm = coll_runtime_cpu(out->runtime) ? 0 : cl->sm_reserved;
  out->options = (eng_options){.kind = o->engine, .algo = algo, .proto = proto,
                               .trace = o->trace, .unfold = o->unfold_colls,
                               .all_ranks = o->all_ranks, .sm_reserved = sm,
                               .layer_flows = cl->layer_flows,
                               .layer_flow_budget = cl->layer_flow_budget, .runtime = out->runtime};
  return true;
}

/* MPS (parallel.processes_per_gpu = k): the job as a cluster of k times the GPUs, each a process
 * with 1/k of its GPU. The rule (NVIDIA's MPS docs: clients' kernels run concurrently on the
 * SMs; AccDP, Alnaasan et al., HiPC 2022): a GPU the processes keep busy gives each 1/k of its
 * FLOP/s and memory bandwidth, so the same per-process work takes k times as long; a kernel's
 * fixed launch cost (gpu.efficiency.launch_overhead) is not shared, so a process whose kernels
 * are too small to fill the GPU loses less than k (k x (t - launch) + launch). Each process
 * holds its own model states, activations and CUDA context in 1/k of the memory. Processes of
 * one GPU exchange data through CUDA IPC in device memory (half its bandwidth: a copy reads and
 * writes) when the node has one GPU; with several, they share the GPU's NVLink/PCIe link.
 * The same copy carries the workload's training.host_dispatch to the kernel cost model. */
cfg_cluster *sim_mps_cluster(const cfg_cluster *c, const cfg_workload *w)
{
  int k = w->has_training ? w->parallel.processes_per_gpu : 1;
  double host = cfg_host_dispatch(c, w);
  if (k <= 1 && !(host > 0))
    return NULL;
  cfg_cluster *v = g_memdup2(c, sizeof *c);
  /* the framework's launch cost is the workload's, but kernels are timed on the cluster */
  v->gpu.efficiency.host_dispatch = host;
  if (k <= 1)
    return v;
  v->node.intra.bandwidth = c->node.gpus_per_node == 1 ? c->gpu.memory_bandwidth / 2
                                                        : c->node.intra.bandwidth / k;
  v->node.gpus_per_node *= k;
  v->node.nvlink_domain *= k;
  v->gpu.memory /= k;
  v->gpu.memory_bandwidth /= k;
  for (int d = 0; d < CFG_NDTYPES; d++)
    v->gpu.flops[d] /= k;
  v->power.gpu_tdp /= k;
  v->gpu.power_limit /= k;
  v->cost.gpu_hour /= k;
  return v;
}

bool sim_run(const cfg_cluster *c, const cfg_workload *w, const sim_options *o, sim_result *out,
             GError **err)
{
  memset(out, 0, sizeof *out);
  out->mps_cluster = sim_mps_cluster(c, w);
  if (out->mps_cluster)
    c = out->mps_cluster;
  out->cluster = c;
  out->workload = w;
  if (!sim_options_check(o, err) || !sim_stragglers_check(c, err))
    return false;
  if (!w->has_training) { /* nothing below has a training step to work on */
    g_autofree char *where = cfg_doc_where(w->doc, "serving");
    g_set_error(err, CFG_ERROR, CFG_ERROR_UNSUPPORTED,
                "%s: serving workloads run with `dlsim serve`, not `dlsim run`", where);
    return false;
  }
  bud_limits def = bud_defaults();
  int gpus = cfg_cluster_gpus(c);
  g_autofree char *what = g_strdup_printf("simulating %d GPUs on the %s engine", gpus,
                                          eng_kind_name(o->engine));
  if (!bud_check(o->budget ? o->budget : &def, what, bud_run(gpus, o->engine == ENG_DES), err))
    return false;
  out->cache = o->engine == ENG_ANALYTIC ? o->cache : NULL;
  out->hw = out->cache ? out->cache->hw : hw_cluster_new(c);
  if (!sim_engine_options(out, o, err))
    return false;
  /* the model the programs will be built from, built once (failing as the estimate's own
   * would) */
  if (!out->cache)
    out->own_programs = wl_cache_new();
  mem_options mo = {.states_only = false};
  if (!(mo.model = wl_cache_shard_model(sim_programs(out), w, err)))
    return false;
  if (!mem_estimate(w, c, &mo, &out->memory, err))
    return false;
  /* the folded runs use other micro-batch counts: check the real one first */
  if (!wl_check_layout(w, err))
    return false;
  int micro = sim_micro_batches(w), step = w->parallel.pp > 1 ? w->parallel.pp : 1;
  sim_progress progress = {.o = o, .span = 1};
  if (o->progress) {
    out->options.progress = sim_progress_scaled;
    out->options.progress_ctx = &progress;
  }
  out->folded = o->fold && sim_fold_pays(&w->parallel, micro, step);
  bool ok = out->folded ? sim_fold(out, micro, err)
                        : sim_run_with(out, micro, &out->program, &out->eng, err);
  /* the result outlives `progress` */
  out->options.progress = NULL;
  out->options.progress_ctx = NULL;
  if (ok)
    sim_figures(out);
  ok = ok && sim_check_figures(out, err);
  if (ok && sim_stragglers_wanted(&c->stragglers, out->gpus))
    ok = sim_stragglers_run(out, err);
  return ok;
}

bool sim_step_again(const sim_result *r, const eng_options *opt, double *step, GError **err)
{
  /* a shallow copy: it shares the job, the hardware and the memory report, and owns only the
   * program and the engine result it makes */
  sim_result again = *r;
  again.options = *opt;
  again.program = NULL;
  again.eng = (eng_result){0};
  int micro = sim_micro_batches(r->workload);
  bool ok = r->folded ? sim_fold(&again, micro, err)
                      : sim_run_with(&again, micro, &again.program, &again.eng, err);
  *step = again.eng.step_time;
  eng_result_clear(&again.eng);
  prog_free(again.program);
  return ok;
}

bool sim_run_files(const char *cluster, const char *workload, char *const *sets,
                   const sim_options *o, sim_result *out, GError **err)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  memset(out, 0, sizeof *out);
  if (!cfg_load_with(cluster, workload, sets, &c, &w, err))
    return false;
  bool ok = sim_run(c, w, o, out, err);
  out->own_cluster = c;
  out->own_workload = w;
  return ok;
}

void sim_result_bracket(sim_result *r, const unc_table *t)
{
  const unc_band *b = unc_band_for_run(t, r->workload);
  if (!b)
    return;
  sim_interval *i = &r->interval;
  *i = (sim_interval){.set = true, .kind = b->kind, .cases = b->cases, .cv_coverage = b->cv_coverage};
  unc_interval(b, r->step_time, UNC_TIME, i->step_time);
  unc_interval(b, r->tokens_per_s, UNC_RATE, i->tokens_per_s);
  unc_interval(b, r->mfu, UNC_RATE, i->mfu);
}

void sim_result_clear(sim_result *r)
{
  eng_result_clear(&r->eng);
  mem_report_clear(&r->memory);
  prog_free(r->program);
  if (!r->cache)
    hw_cluster_free(r->hw);
  coll_runtime_free(r->runtime);
  wl_cache_free(r->own_programs);
  g_free(r->mps_cluster);
  cfg_workload_free(r->own_workload);
  cfg_cluster_free(r->own_cluster);
  memset(r, 0, sizeof *r);
}
