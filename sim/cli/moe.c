/* dlsim moe -c CLUSTER -w WORKLOAD [--json | --csv] [--set K=V]...
 * One mixture-of-experts layer in isolation, per GPU and micro-batch (run/moe.c), reported by
 * report/moe.c. */
#include "cli/cli.h"
#include "report/report.h"
#include "run/run.h"

#include <stdio.h>

/* The table of all-to-alls as CSV: one row per phase (dispatch, combine and their backward). */
static void moe_print_csv(const cJSON *j)
{
  cJSON *rows = cJSON_CreateArray();
  const cJSON *x;
  cJSON_ArrayForEach(x, j)
  {
    if (!cJSON_IsObject(x))
      continue;
    cJSON *row = cJSON_Duplicate(x, true);
    cli_json_prepend(row, "phase", cJSON_CreateString(x->string));
    cJSON_AddItemToArray(rows, row);
  }
  cli_csv_print(stdout, rows);
  cJSON_Delete(rows);
}

int cli_moe(int argc, char **argv)
{
  g_autofree char *cluster = NULL, *workload = NULL;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE, csv = FALSE;
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &cluster, NULL),
      cli_opt(CLI_WORKLOAD, &workload, NULL),
      cli_opt(CLI_JSON, &json, NULL),
      cli_opt(CLI_CSV, &csv, "Print CSV: one row per all-to-all (time in seconds, bytes per link)"),
      cli_opt(CLI_SET, &sets, NULL),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- one mixture-of-experts layer: routing, all-to-alls, experts", &argc,
                 &argv, &code))
    return code;
  if (!cluster || !workload) {
    fprintf(stderr, "dlsim: error: dlsim moe needs -c CLUSTER and -w WORKLOAD (see --help)\n");
    return 2;
  }
  GError *err = NULL;
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  sim_moe m;
  bool ok = cfg_load_with(cluster, workload, sets, &c, &w, &err) && sim_moe_layer(c, w, &m, &err);
  if (ok && (json || csv)) {
    cJSON *j = rep_moe_json(&m);
    if (csv)
      moe_print_csv(j);
    else
      rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else if (ok) {
    rep_moe_text(stdout, c, w, &m);
  }
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return ok ? 0 : cli_fail(err);
}
