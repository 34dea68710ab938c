/* The run block of dlsim run, as text and as JSON. */
#include "lifecycle/lifecycle.h"

#include "units/units.h"

#include <math.h>

/* A long duration in the unit a person plans in: days, hours, minutes, else seconds. */
static char *lc_duration(double s)
{
  if (s >= 2 * 86400)
    return g_strdup_printf("%.1f days", s / 86400);
  if (s >= 2 * 3600)
    return g_strdup_printf("%.1f h", s / 3600);
  if (s >= 120)
    return g_strdup_printf("%.1f min", s / 60);
  return units_format_seconds(s);
}

/* 15.6T, 2.3M: counts of tokens, GPU-hours and dollars (below a thousand with `small`
 * decimals). */
static char *lc_count(double v, int small)
{
  static const char *const names[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (i < 4 && fabs(v) >= 1000) {
    v /= 1000;
    i++;
  }
  return g_strdup_printf("%.*f%s", i ? 2 : small, v, names[i]);
}

static void lc_text_failures(FILE *out, const lc_run *run)
{
  fprintf(out, "    interruptions    %12.*f   (", run->interruptions < 10 ? 1 : 0, run->interruptions);
  const char *sep = "";
  for (int k = 0; k < LC_NKINDS; k++)
    if (run->interruptions_by[k] > 0) {
      fprintf(out, "%s%s %.*f", sep, lc_kind_name((lc_kind)k), run->interruptions < 10 ? 1 : 0,
              run->interruptions_by[k]);
      sep = ", ";
    }
  g_autofree char *mtbf = lc_duration(run->job_mtbf);
  fprintf(out, "%sone every %s)\n", *sep ? "; " : "", run->job_mtbf > 0 ? mtbf : "never");
}

static void lc_text_checkpoints(FILE *out, const lc_run *run)
{
  g_autofree char *bytes = units_format_bytes(run->checkpoint_bytes);
  g_autofree char *every = lc_duration(run->t.interval);
  g_autofree char *write = units_format_seconds(run->checkpoint_write);
  g_autofree char *stall = units_format_seconds(run->checkpoint_stall);
  g_autofree char *restart = lc_duration(run->restart + run->read);
  fprintf(out, "    checkpoints      %12s every %s (%s), written in %s, ", bytes, every,
          run->interval_given ? "checkpoint.interval" : "Young/Daly", write);
  if (run->async)
    fprintf(out, "asynchronous: stalls %s\n", stall);
  else
    fprintf(out, "synchronous\n");
  fprintf(out, "    restart          %12s per failure (with reading the checkpoint)\n", restart);
  g_autofree char *ckpt = lc_duration(run->t.checkpoint_s);
  g_autofree char *fail = lc_duration(run->t.failure_s);
  fprintf(out, "    time lost        %12s to checkpoints, %s to failures (", ckpt, fail);
  const char *sep = "";
  for (int k = 0; k < LC_NKINDS; k++)
    if (run->lost_by[k] > 0) {
      g_autofree char *d = lc_duration(run->lost_by[k]);
      fprintf(out, "%s%s %s", sep, lc_kind_name((lc_kind)k), d);
      sep = ", ";
    }
  fprintf(out, ")\n");
}

void lc_text(FILE *out, const lc_run *run)
{
  g_autofree char *tokens = lc_count(run->tokens, 0);
  g_autofree char *wall = lc_duration(run->t.wall);
  g_autofree char *productive = lc_duration(run->t.wall * run->t.goodput);
  fprintf(out, "  run");
  if (run->tokens > 0)
    fprintf(out, " of %s tokens,", tokens);
  fprintf(out, " %.0f steps\n", run->steps);
  fprintf(out, "    time to train    %12s   (training %s: goodput %.1f %%)\n", wall, productive,
          100 * run->t.goodput);
  if (run->straggler_s > 0) {
    g_autofree char *total = lc_duration(run->straggler_s);
    g_autofree char *per = units_format_seconds(run->straggler_s / run->steps);
    fprintf(out, "    stragglers       %12s   (+%s a step waiting for the slowest rank, in the "
                 "training time)\n", total, per);
  }
  lc_text_failures(out, run);
  lc_text_checkpoints(out, run);
  g_autofree char *mwh = run->energy_kwh >= 1e6   ? g_strdup_printf("%.0f MWh", run->energy_kwh / 1e3)
                         : run->energy_kwh >= 1e3 ? g_strdup_printf("%.1f MWh", run->energy_kwh / 1e3)
                                                  : g_strdup_printf("%.1f kWh", run->energy_kwh);
  fprintf(out, "    energy           %12s   (%.3g kWh per step at PUE %.2f; a GPU draws %.0f W "
               "over a step)\n",
          mwh, run->step_energy / 3.6e6, run->pue, run->gpu_watts);
  g_autofree char *count = lc_count(run->cost_usd, 2), *hours = lc_count(run->gpu_hours, 1);
  g_autofree char *usd = g_strdup_printf("$%s", count);
  fprintf(out, "    cost             %12s   (%s GPU-hours at $%.2f, %s at $%.3f/kWh", usd, hours,
          run->gpu_hour_price, mwh, run->kwh_price);
  if (run->tokens > 0)
    fprintf(out, "; $%.3f per million tokens", run->cost_per_mtoken);
  fprintf(out, ")\n");
}

static cJSON *lc_json_by_kind(const double v[LC_NKINDS])
{
  cJSON *o = cJSON_CreateObject();
  for (int k = 0; k < LC_NKINDS; k++)
    cJSON_AddNumberToObject(o, lc_kind_name((lc_kind)k), v[k]);
  return o;
}

cJSON *lc_json(const lc_run *run)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "steps", run->steps);
  cJSON_AddNumberToObject(j, "tokens", run->tokens);
  cJSON_AddNumberToObject(j, "time_to_train_s", run->t.wall);
  cJSON_AddNumberToObject(j, "productive_s", run->t.wall * run->t.goodput);
  cJSON_AddNumberToObject(j, "goodput", run->t.goodput);
  cJSON_AddNumberToObject(j, "interruptions", run->interruptions);
  cJSON_AddItemToObject(j, "interruptions_by", lc_json_by_kind(run->interruptions_by));
  cJSON_AddNumberToObject(j, "job_mtbf_s", run->job_mtbf);
  cJSON_AddNumberToObject(j, "checkpoint_bytes", run->checkpoint_bytes);
  cJSON_AddNumberToObject(j, "checkpoint_interval_s", run->t.interval);
  cJSON_AddNumberToObject(j, "checkpoint_write_s", run->checkpoint_write);
  cJSON_AddNumberToObject(j, "checkpoint_stall_s", run->checkpoint_stall);
  cJSON_AddNumberToObject(j, "restart_s", run->restart + run->read);
  cJSON *lost = lc_json_by_kind(run->lost_by);
  cJSON_AddNumberToObject(lost, "checkpoints", run->t.checkpoint_s);
  cJSON_AddNumberToObject(lost, "stragglers", run->straggler_s);
  cJSON_AddItemToObject(j, "lost_s", lost);
  cJSON *phases = cJSON_CreateObject();
  for (int ph = 0; ph < LC_NPHASES; ph++) {
    cJSON *one = cJSON_CreateObject();
    cJSON_AddNumberToObject(one, "s", run->phase_time[ph]);
    cJSON_AddNumberToObject(one, "w", run->phase_power[ph]);
    cJSON_AddItemToObject(phases, lc_phase_name((lc_phase)ph), one);
  }
  cJSON_AddItemToObject(j, "gpu_phases", phases);
  cJSON_AddNumberToObject(j, "step_energy_j", run->step_energy);
  cJSON_AddNumberToObject(j, "energy_kwh", run->energy_kwh);
  cJSON_AddNumberToObject(j, "gpu_hours", run->gpu_hours);
  cJSON_AddNumberToObject(j, "cost_usd", run->cost_usd);
  cJSON_AddNumberToObject(j, "cost_per_million_tokens_usd", run->cost_per_mtoken);
  return j;
}
