#include "pipeline/pipeline.h"

#include <string.h>

static bool pipe_load(const char *cluster, const char *workload, char *const *sets, pipe_run *out,
                      GError **err)
{
  size_t n = sets ? g_strv_length((char **)sets) : 0;
  cfg_override *ov = g_new0(cfg_override, MAX(n, 1u));
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++)
    ok = cfg_override_parse(sets[i], &ov[i], err);
  if (ok)
    ok = cfg_load(cluster, workload, ov, n, &out->cluster, &out->workload, err);
  for (size_t i = 0; i < n; i++)
    cfg_override_clear(&ov[i]);
  g_free(ov);
  return ok;
}

bool pipe_simulate(const char *cluster, const char *workload, char *const *sets, eng_kind engine,
                   bool trace, pipe_run *out, GError **err)
{
  memset(out, 0, sizeof *out);
  if (!pipe_load(cluster, workload, sets, out, err))
    return false;
  out->hw = hw_cluster_new(out->cluster);
  out->options.kind = engine;
  out->options.trace = trace;
  if (!coll_algo_parse(out->workload->collectives.algorithm, &out->options.algo, err))
    return false;
  if (!wl_build(out->workload, out->hw, &out->program, err))
    return false;
  if (!mem_estimate(out->workload, out->cluster, &out->memory, err))
    return false;
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
  prog_free(run->program);
  hw_cluster_free(run->hw);
  cfg_workload_free(run->workload);
  cfg_cluster_free(run->cluster);
  memset(run, 0, sizeof *run);
}
