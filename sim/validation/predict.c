/* Predicting a case: the JSON its command prints, and the metric read from it by its dotted
 * key, so that a case names exactly what a user's script would read. */
#include "validation/validation_internal.h"

#include "memory/memory.h"
#include "report/report.h"
#include "run/run.h"
#include "serving/serving.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Finds a dotted path ("memory.peak_bytes", "ranks.0.total_bytes") in a JSON document. */
static bool val_json_path(const cJSON *j, const char *path, double *out)
{
  g_auto(GStrv) parts = g_strsplit(path, ".", -1);
  for (char **p = parts; *p && j; p++)
    j = cJSON_IsArray(j) ? cJSON_GetArrayItem(j, atoi(*p)) : cJSON_GetObjectItemCaseSensitive(j, *p);
  if (cJSON_IsBool(j)) {
    *out = cJSON_IsTrue(j) ? 1 : 0;
    return true;
  }
  if (!cJSON_IsNumber(j))
    return false;
  *out = j->valuedouble;
  return true;
}

/* dlsim serve --json (serve), or with --find-max-rate (serve-max-rate: adds max_rate_rps). */
static cJSON *val_serve_json(const cfg_cluster *cl, const cfg_workload *w, bool max_rate,
                             GError **err)
{
  cJSON *j = NULL;
  if (max_rate) {
    srv_max_rate m;
    if (srv_find_max_rate(cl, w, &m, err)) {
      j = m.max_rate > 0 ? srv_result_json(&m.at) : cJSON_CreateObject();
      cJSON_AddNumberToObject(j, "max_rate_rps", m.max_rate);
    }
    srv_max_rate_clear(&m);
    return j;
  }
  srv_result r;
  if (srv_simulate(cl, w, NULL, &r, err))
    j = srv_result_json(&r);
  srv_result_clear(&r);
  return j;
}

static cJSON *val_deepspeed_json(const cfg_cluster *cl, const cfg_workload *w, GError **err)
{
  const cfg_parallel *p = &w->parallel;
  double params = 0, largest = 0;
  if (!mem_model_params(w, &params, &largest, err))
    return NULL;
  mem_deepspeed e = mem_deepspeed_estimate(params, largest,
                                           cl->node.gpus_per_node, cl->node.count, p->zero,
                                           p->offload != CFG_OFFLOAD_NONE, p->offload_params, false);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "gpu_bytes", e.gpu);
  cJSON_AddNumberToObject(j, "cpu_bytes_per_node", e.cpu);
  return j;
}

static cJSON *val_memory_json(const cfg_cluster *cl, const cfg_workload *w, bool states_only,
                              GError **err)
{
  mem_options o = {.states_only = states_only};
  mem_report m;
  cJSON *j = NULL;
  if (mem_estimate(w, cl, &o, &m, err)) {
    rep_memory r = {.cluster = cl, .workload = w, .memory = &m};
    j = rep_memory_json(&r);
  }
  mem_report_clear(&m);
  return j;
}

static const char *val_command(const cfg_case *c)
{
  return c->command ? c->command : "run";
}

/* The JSON the case's command prints for a loaded cluster and workload (all but replay). */
static cJSON *val_command_json(const cfg_case *c, const cfg_cluster *cl, const cfg_workload *w,
                               GError **err)
{
  const char *cmd = val_command(c);
  if (strcmp(cmd, "run") == 0) {
    sim_options o = sim_options_for(c->engine ? ENG_DES : ENG_ANALYTIC);
    sim_result r;
    cJSON *j = sim_run(cl, w, &o, &r, err) ? rep_run_json(&r) : NULL;
    sim_result_clear(&r);
    return j;
  }
  if (strcmp(cmd, "moe") == 0) {
    sim_moe m;
    return sim_moe_layer(cl, w, &m, err) ? rep_moe_json(&m) : NULL;
  }
  if (strcmp(cmd, "deepspeed") == 0)
    return val_deepspeed_json(cl, w, err);
  if (strcmp(cmd, "memory") == 0 || strcmp(cmd, "memory-states") == 0)
    return val_memory_json(cl, w, strcmp(cmd, "memory-states") == 0, err);
  if (strcmp(cmd, "serve") == 0 || strcmp(cmd, "serve-max-rate") == 0)
    return val_serve_json(cl, w, strcmp(cmd, "serve-max-rate") == 0, err);
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "command '%s' is not one of run, memory, memory-states, deepspeed, moe, serve, "
              "serve-max-rate, replay", cmd);
  return NULL;
}

/* `dlsim replay TRACE -c CLUSTER --steps STEPS --json`: `sets` describe the traced machine
 * (its calibration...), not a what-if. */
static cJSON *val_replay_json(const cfg_case *c, char *const *sets, GError **err)
{
  char *traces[] = {c->trace, NULL};
  sim_replay_args a = {.traces = traces, .machine = (char **)sets, .cluster = c->cluster,
                       .steps = c->steps, .engine = c->engine ? "des" : "analytic"};
  sim_replay r;
  cJSON *j = sim_replay_run(&a, &r, err) ? rep_replay_json(&r) : NULL;
  sim_replay_clear(&r);
  return j;
}

/* What one unit of the case's measurement is in SI (the case says GiB, ms...). */
static double val_unit(const char *unit)
{
  const struct {
    const char *name;
    double scale;
  } units[] = {{"GiB", 1073741824.0}, {"GB", 1e9}, {"MiB", 1048576.0}, {"MB", 1e6},
               {"ms", 1e-3},          {"us", 1e-6}, {"s", 1}};
  for (size_t i = 0; unit && i < G_N_ELEMENTS(units); i++)
    if (strcmp(unit, units[i].name) == 0)
      return units[i].scale;
  return 1;
}

/* The metric read from the command's JSON (consumed), in the case's unit. */
static bool val_metric_of(const cfg_case *c, cJSON *j, double *out, GError **err)
{
  if (!j)
    return false;
  bool ok = val_json_path(j, c->metric, out);
  cJSON_Delete(j);
  if (!ok)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "metric '%s' is not a number in the %s output",
                c->metric, val_command(c));
  *out /= val_unit(c->unit);
  return ok;
}

/* The case's metric with the cluster and workload it names, these overrides applied. */
static bool val_predict_with(const cfg_case *c, char *const *sets, double *out,
                             const char **run_kind, GError **err)
{
  if (strcmp(val_command(c), "replay") == 0)
    return val_metric_of(c, val_replay_json(c, sets, err), out, err);
  cfg_cluster *cl = NULL;
  cfg_workload *w = NULL;
  bool ok = cfg_load_with(c->cluster, c->workload, sets, &cl, &w, err) &&
            val_metric_of(c, val_command_json(c, cl, w, err), out, err);
  if (ok && run_kind && strcmp(val_command(c), "run") == 0)
    *run_kind = unc_run_kind(w);
  cfg_cluster_free(cl);
  cfg_workload_free(w);
  return ok;
}

bool val_predict(const cfg_case *c, char *const *extra, double *out, const char **run_kind,
                 GError **err)
{
  g_auto(GStrv) sets = sim_strv_concat(c->set, extra);
  double value = 0, base = 1;
  if (!val_predict_with(c, sets, &value, run_kind, err))
    return false;
  if (c->ratio_to) {
    g_auto(GStrv) ratio = sim_strv_concat(c->ratio_to, extra);
    if (!val_predict_with(c, ratio, &base, NULL, err))
      return false;
  }
  *out = value / base;
  return true;
}

bool val_predict_loaded(const cfg_case *c, const cfg_cluster *cl, const cfg_workload *w,
                        double *out, GError **err)
{
  return val_metric_of(c, val_command_json(c, cl, w, err), out, err);
}
