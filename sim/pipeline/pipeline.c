#include "pipeline/pipeline.h"

#include <string.h>

/* Micro-batches each data-parallel replica runs per step. */
static int pipe_micro_batches(const cfg_workload *w)
{
  return w->training.global_batch / (w->parallel.dp * w->training.micro_batch);
}

/* Builds and runs the step with `micro` micro-batches per replica. */
static bool pipe_run_with(pipe_run *out, int micro, prog_program **prog, eng_result *res,
                          GError **err)
{
  cfg_workload w = *out->workload;
  w.training.global_batch = micro * w.parallel.dp * w.training.micro_batch;
  if (!wl_build(&w, out->hw, prog, err))
    return false;
  mem_annotate_program(*prog, &out->memory);
  return eng_run(*prog, out->hw, &out->options, res, err);
}

static double pipe_lerp(double a, double b, double k)
{
  return a + (b - a) * k;
}

/* r = a + (b - a) k, field by field (times, breakdown, memory peaks). */
static void pipe_extrapolate(const eng_result *a, const eng_result *b, double k, eng_result *r)
{
  r->step_time = pipe_lerp(a->step_time, b->step_time, k);
  r->compute = pipe_lerp(a->compute, b->compute, k);
  r->exposed_comm = pipe_lerp(a->exposed_comm, b->exposed_comm, k);
  r->bubble = pipe_lerp(a->bubble, b->bubble, k);
  r->other = pipe_lerp(a->other, b->other, k);
  for (int d = 0; d < PROG_NDIMS; d++) {
    r->comm[d] = pipe_lerp(a->comm[d], b->comm[d], k);
    r->exposed[d] = pipe_lerp(a->exposed[d], b->exposed[d], k);
  }
  r->peak_memory = pipe_lerp(a->peak_memory, b->peak_memory, k);
  for (int c = 0; c < r->nclasses && c < a->nclasses; c++)
    r->class_peak[c] = pipe_lerp(a->class_peak[c], b->class_peak[c], k);
  r->critical_rank = b->critical_rank;
  r->wall_time = a->wall_time + b->wall_time;
  r->messages = a->messages + b->messages;
}

/* Identical micro-batches are not simulated one by one: past the pipeline's warm-up every `step`
 * more micro-batches add the same time (one period of the steady state; with interleaving, a
 * round of p), so the step with m micro-batches is simulated at two small counts, m1 and
 * m1 + step, and extended along the line through them. A trace needs every op, so it is never
 * folded. */
static bool pipe_fold(pipe_run *out, int micro, GError **err)
{
  /* 1F1B is in its steady state from p micro-batches on; interleaving warms up for up to
   * (v + 1) p - 2 forward passes of the m v it runs, so it needs 2p */
  const cfg_parallel *par = &out->workload->parallel;
  int pp = par->pp, step = pp > 1 ? pp : 1;
  bool interleaved = pp > 1 && par->schedule == CFG_SCHED_INTERLEAVED && par->virtual_stages > 1;
  int m1 = interleaved ? 2 * step : step;
  prog_program *p1 = NULL;
  eng_result r1 = {0};
  bool ok = pipe_run_with(out, m1, &p1, &r1, err) &&
            pipe_run_with(out, m1 + step, &out->program, &out->result, err);
  if (ok) {
    double k = (double)(micro - m1) / step;
    pipe_extrapolate(&r1, &out->result, k, &out->result);
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

bool pipe_simulate(const char *cluster, const char *workload, char *const *sets, eng_kind engine,
                   bool trace, pipe_run *out, GError **err)
{
  memset(out, 0, sizeof *out);
  if (!cfg_load_with(cluster, workload, sets, &out->cluster, &out->workload, err))
    return false;
  if (!out->workload->has_training) { /* nothing below has a training step to work on */
    g_autofree char *where = cfg_doc_where(out->workload->doc, "serving");
    g_set_error(err, CFG_ERROR, CFG_ERROR_UNSUPPORTED,
                "%s: serving workloads run with `dlsim serve`, not `dlsim run`", where);
    return false;
  }
  out->hw = hw_cluster_new(out->cluster);
  out->options.kind = engine;
  out->options.trace = trace;
  out->options.sm_reserved = out->workload->collectives.sm_reserved;
  if (!coll_algo_parse(out->workload->collectives.algorithm, &out->options.algo, err) ||
      !coll_proto_parse(out->workload->collectives.protocol, &out->options.proto, err))
    return false;
  mem_options mo = {.states_only = false};
  if (!mem_estimate(out->workload, out->cluster, &mo, &out->memory, err))
    return false;
  int micro = pipe_micro_batches(out->workload), pp = out->workload->parallel.pp;
  int step = pp > 1 ? pp : 1;
  /* the folded runs use other micro-batch counts: check the real one first */
  if (!wl_check_layout(out->workload, err))
    return false;
  if (!trace && micro >= 4 * step)
    return pipe_fold(out, micro, err);
  if (!wl_build(out->workload, out->hw, &out->program, err))
    return false;
  mem_annotate_program(out->program, &out->memory);
  return eng_run(out->program, out->hw, &out->options, &out->result, err);
}

void pipe_report_of(const pipe_run *run, rep_run *rep)
{
  memset(rep, 0, sizeof *rep);
  rep->cluster = run->cluster;
  rep->workload = run->workload;
  rep->program = run->program;
  rep->result = &run->result;
  rep->memory = &run->memory;
  rep->engine = run->options.kind;
  rep->gpus = run->program->nranks;
  rep->peak_flops = hw_peak_flops(run->hw, run->program->meta.dtype);
}

void pipe_clear(pipe_run *run)
{
  eng_result_clear(&run->result);
  mem_report_clear(&run->memory);
  prog_free(run->program);
  hw_cluster_free(run->hw);
  cfg_workload_free(run->workload);
  cfg_cluster_free(run->cluster);
  memset(run, 0, sizeof *run);
}
