/* dlsim replay's report: per ProfilerStep, measured against predicted (and the what-if), with
 * the replay's own diagnostics. */
#include "report/report.h"
#include "units/units.h"

cJSON *rep_replay_json(const sim_replay *r)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "measured_step_s", r->measured_mean);
  cJSON_AddNumberToObject(j, "predicted_step_s", r->predicted_mean);
  cJSON_AddNumberToObject(j, "error", r->predicted_mean / r->measured_mean - 1);
  cJSON_AddNumberToObject(j, "steps", r->rep.nsteps);
  cJSON_AddNumberToObject(j, "measured_comm_step_s", r->measured_comm_mean);
  cJSON_AddNumberToObject(j, "host_bound_step_s", r->host_mean);
  if (r->baseline)
    cJSON_AddNumberToObject(j, "baseline_step_s", r->baseline_mean);
  cJSON_AddStringToObject(j, "cluster", r->base_cfg->name);
  if (r->target_cfg)
    cJSON_AddStringToObject(j, "target", r->target_cfg->name);
  cJSON_AddStringToObject(j, "engine", eng_kind_name(r->engine));
  cJSON_AddNumberToObject(j, "ranks", r->rep.program->nranks);
  cJSON_AddNumberToObject(j, "collectives", r->rep.collectives);
  cJSON *steps = cJSON_AddArrayToObject(j, "step_times");
  for (int k = 0; k < r->rep.nsteps; k++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->rep.markers[2 * k]);
    cJSON_AddNumberToObject(o, "measured_s", r->rep.measured[k]);
    cJSON_AddNumberToObject(o, "predicted_s", r->predicted[k]);
    cJSON_AddNumberToObject(o, "error", r->predicted[k] / r->rep.measured[k] - 1);
    cJSON_AddItemToArray(steps, o);
  }
  return j;
}

void rep_replay_text(FILE *out, const sim_replay *r)
{
  const trc_trace *t = r->traces[0];
  const trc_replay *rep = &r->rep;
  g_autofree char *base = g_path_get_basename(t->path);
  fprintf(out, "dlsim replay: %s (%s, rank %d of %d) on %s%s, %d rank%s, engine %s\n", base,
         t->gpu_name ? t->gpu_name : "GPU not stated", t->rank, t->world_size, r->base_cfg->name,
         r->default_cluster ? " (preset for the trace's GPU; -c to change)" : "",
         rep->program->nranks, rep->program->nranks == 1 ? "" : "s", eng_kind_name(r->engine));
  if (r->target_cfg)
    fprintf(out, "  what-if: predicted on %s (kernels re-timed: %u)\n", r->target_cfg->name, rep->retimed);
  fprintf(out, "  program: %u CPU intervals, %u GPU ops, %u collectives (%u NCCL kernels at measured "
         "times), %u cross-stream waits, %u host syncs, %u delays kept",
         rep->cpu_ops, rep->gpu_ops, rep->collectives, rep->fixed_comm, rep->cross_deps,
         rep->sync_deps, rep->delays);
  if (rep->streams_merged)
    fprintf(out, ", %d trace streams merged", rep->streams_merged);
  if (r->baseline)
    fprintf(out, "\n\n  %-20s %12s %12s %8s %12s %8s\n", "step", "measured", "replayed", "error", "what-if",
           "change");
  else
    fprintf(out, "\n\n  %-20s %12s %12s %8s\n", "step", "measured", "predicted", "error");
  for (int k = 0; k <= rep->nsteps; k++) {
    bool mean = k == rep->nsteps;
    double m = mean ? r->measured_mean : rep->measured[k];
    double p = mean ? r->predicted_mean : r->predicted[k];
    double b = r->baseline ? (mean ? r->baseline_mean : r->baseline[k]) : p;
    g_autofree char *ms = units_format_seconds(m), *ps = units_format_seconds(p);
    g_autofree char *bs = units_format_seconds(b);
    fprintf(out, "  %-20s %12s %12s %+7.1f%%", mean ? "mean" : rep->markers[2 * k], ms, bs, 100 * (b / m - 1));
    if (r->baseline)
      fprintf(out, " %12s %+7.1f%%", ps, 100 * (p / b - 1));
    fprintf(out, "\n");
  }
  g_autofree char *mc = units_format_seconds(r->measured_comm_mean);
  g_autofree char *hb = units_format_seconds(r->host_mean);
  fprintf(out, "\n  with every NCCL kernel at its measured duration: %s per step (%+.1f %%): the replay's "
         "own error; the rest is the collective model's\n",
         mc, 100 * (r->measured_comm_mean / r->measured_mean - 1));
  fprintf(out, "  with every GPU op taking no time: %s per step (%.0f %% of measured): what the host "
         "alone takes; the GPU and network models act on the rest\n",
         hb, 100 * r->host_mean / r->measured_mean);
}

