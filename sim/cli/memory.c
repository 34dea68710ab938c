/* dlsim memory -c CLUSTER -w WORKLOAD [--json] [--states-only] [--set K=V]...
 *   [--deepspeed] : DeepSpeed's documented estimator formulas instead, for comparison */
#include "cli/cli.h"
#include "memory/memory.h"
#include "report/report.h"

#include <stdio.h>

static bool mem_print_deepspeed(const cfg_cluster *c, const cfg_workload *w, bool json, bool csv,
                                GError **err)
{
  const cfg_parallel *p = &w->parallel;
  double params = 0, largest = 0;
  if (!mem_model_params(w, &params, &largest, err))
    return false;
  mem_deepspeed e = mem_deepspeed_estimate(params, largest,
                                           c->node.gpus_per_node, c->node.count, p->zero,
                                           p->offload != CFG_OFFLOAD_NONE, p->offload_params != 0,
                                           false);
  if (json || csv) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "gpu_bytes", e.gpu);
    cJSON_AddNumberToObject(j, "cpu_bytes_per_node", e.cpu);
    if (csv) {
      cJSON *rows = cJSON_CreateArray();
      cJSON_AddItemToArray(rows, j);
      cli_csv_print(stdout, rows);
      cJSON_Delete(rows);
    } else {
      rep_json_print(stdout, j);
      cJSON_Delete(j);
    }
    return true;
  }
  printf("DeepSpeed estimator (ZeRO-%d%s): %.2f GiB per GPU, %.2f GiB CPU per node\n", p->zero,
         p->offload != CFG_OFFLOAD_NONE ? ", offload" : "", e.gpu / 1073741824.0,
         e.cpu / 1073741824.0);
  return true;
}

/* The CSV's columns name their unit: the extra lines of "other" are bytes too. */
static void mem_csv_units(cJSON *ranks)
{
  cJSON *rank;
  cJSON_ArrayForEach(rank, ranks)
  {
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(rank, "other"), *x;
    cJSON *named = cJSON_CreateObject();
    cJSON_ArrayForEach(x, other)
    {
      g_autofree char *key = g_strdup_printf("%s_bytes", x->string);
      cJSON_AddNumberToObject(named, key, x->valuedouble);
    }
    cJSON_ReplaceItemInObjectCaseSensitive(rank, "other", named);
  }
}

int cli_memory(int argc, char **argv)
{
  g_autofree char *cluster = NULL, *workload = NULL;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE, csv = FALSE, states_only = FALSE, deepspeed = FALSE;
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &cluster, NULL),
      cli_opt(CLI_WORKLOAD, &workload, NULL),
      cli_opt(CLI_JSON, &json, NULL),
      cli_opt(CLI_CSV, &csv, "Print CSV: one row per pipeline stage, sizes in bytes"),
      {"states-only", 0, 0, G_OPTION_ARG_NONE, &states_only, "Count model states only", NULL},
      {"deepspeed", 0, 0, G_OPTION_ARG_NONE, &deepspeed,
       "DeepSpeed's estimator formulas (generic models, ZeRO 2 or 3)", NULL},
      cli_opt(CLI_SET, &sets, NULL),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- per-GPU memory of a training workload", &argc, &argv, &code))
    return code;
  if (!cluster || !workload) {
    fprintf(stderr, "dlsim: error: dlsim memory needs -c CLUSTER and -w WORKLOAD (see --help)\n");
    return 2;
  }
  GError *err = NULL;
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  if (!cfg_load_with(cluster, workload, sets, &c, &w, &err))
    return cli_fail(err);
  if (!w->has_training) {
    cfg_cluster_free(c);
    cfg_workload_free(w);
    fprintf(stderr, "dlsim: error: dlsim memory takes a training workload\n");
    return 2;
  }
  if (deepspeed) {
    bool done = mem_print_deepspeed(c, w, json, csv, &err);
    cfg_cluster_free(c);
    cfg_workload_free(w);
    return done ? 0 : cli_fail(err);
  }
  mem_options o = {.states_only = states_only, .search = true};
  mem_report m;
  cfg_cluster *mps = sim_mps_cluster(c, w); /* memory per process, in 1/k of the GPU */
  bool ok = mem_estimate(w, mps ? mps : c, &o, &m, &err);
  if (ok) {
    rep_memory r = {.cluster = mps ? mps : c, .workload = w, .memory = &m};
    if (json || csv) {
      cJSON *j = rep_memory_json(&r);
      cJSON *ranks = cJSON_GetObjectItemCaseSensitive(j, "ranks");
      if (csv) {
        mem_csv_units(ranks);
        cli_csv_print(stdout, ranks);
      } else {
        rep_json_print(stdout, j);
      }
      cJSON_Delete(j);
    } else {
      rep_memory_text(stdout, &r);
    }
  }
  mem_report_clear(&m);
  g_free(mps);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return ok ? 0 : cli_fail(err);
}
