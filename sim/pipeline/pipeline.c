#include "pipeline/pipeline.h"

#include <string.h>

bool pipe_simulate(const char *cluster, const char *workload, char *const *sets, eng_kind engine,
                   bool trace, pipe_run *out, GError **err)
{
  memset(out, 0, sizeof *out);
  if (!cfg_load_with(cluster, workload, sets, &out->cluster, &out->workload, err))
    return false;
  out->hw = hw_cluster_new(out->cluster);
  out->options.kind = engine;
  out->options.trace = trace;
  if (!coll_algo_parse(out->workload->collectives.algorithm, &out->options.algo, err) ||
      !coll_proto_parse(out->workload->collectives.protocol, &out->options.proto, err))
    return false;
  if (!wl_build(out->workload, out->hw, &out->program, err))
    return false;
  mem_options mo = {.states_only = false};
  if (!mem_estimate(out->workload, out->cluster, &mo, &out->memory, err))
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
