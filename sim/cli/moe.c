/* dlsim moe -c CLUSTER -w WORKLOAD [--json] [--set K=V]...
 * One mixture-of-experts layer in isolation, per GPU and micro-batch: the routing's load
 * imbalance, the dispatch and combine all-to-alls (forward and backward: bytes, time, the
 * bandwidth on the bottleneck link as DeepEP reports it) and the expert compute beside them. */
#include "cli/cli_internal.h"
#include "engine/engine.h"
#include "report/report.h"
#include "workloads/workloads.h"

#include <stdio.h>

static const char *const moe_steps[4] = {"dispatch", "combine", "combine_bwd", "dispatch_bwd"};

/* Times the four all-to-alls on the first ep GPUs. */
static bool moe_times(const hw_cluster *hw, const wl_moe_info *m, double time[4], GError **err)
{
  eng_options opt = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  for (int i = 0; i < 4; i++) {
    eng_coll_result r = {0};
    if (m->ep > 1 && !eng_collective_time(hw, &opt, PROG_COLL_ALLTOALL, m->ep, m->ep,
                                          m->model_bytes[i], &r, err))
      return false;
    time[i] = r.time;
  }
  return true;
}

static void moe_print_text(const cfg_cluster *c, const cfg_workload *w, const wl_moe_info *m,
                           const double time[4])
{
  const char *link = m->nodes > 1 ? "InfiniBand" : "NVLink";
  printf("dlsim moe: %s on %s, EP %d over %d node%s, all-to-all %s\n", w->model.name, c->name,
         m->ep, m->nodes, m->nodes > 1 ? "s" : "", w->collectives.a2a == CFG_A2A_NCCL ? "nccl"
                                                   : w->collectives.a2a == CFG_A2A_DEEPEP ? "deepep"
                                                                                          : "deepep-ll");
  printf("  per GPU and micro-batch: %.0f tokens routed, %.0f copies (top-%d)\n", m->tokens,
         m->copies, w->model.moe.top_k);
  printf("  routing: busiest rank runs %.3fx the mean, %.1f %% of copies dropped\n", m->load,
         100 * m->dropped);
  printf("  %-13s %12s %12s %14s\n", "", "time", "bytes", "GB/s on link");
  for (int i = 0; i < 4; i++)
    printf("  %-13s %9.1f us %9.2f MB %9.1f (%s)\n", moe_steps[i], time[i] * 1e6,
           m->link_bytes[i] / 1e6, time[i] > 0 ? m->link_bytes[i] / time[i] / 1e9 : 0, link);
  printf("  %-13s %9.1f us   forward, %9.1f us backward\n", "experts", m->experts_time[0] * 1e6,
         m->experts_time[1] * 1e6);
  printf("  %-13s %9.1f us   forward, %9.1f us backward (all kernels, without all-to-alls)\n",
         "layer", m->layer_time[0] * 1e6, m->layer_time[1] * 1e6);
}

static cJSON *moe_json(const wl_moe_info *m, const double time[4])
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "ep", m->ep);
  cJSON_AddNumberToObject(j, "nodes", m->nodes);
  cJSON_AddNumberToObject(j, "tokens_per_gpu", m->tokens);
  cJSON_AddNumberToObject(j, "copies_per_gpu", m->copies);
  cJSON_AddNumberToObject(j, "load_factor", m->load);
  cJSON_AddNumberToObject(j, "dropped_fraction", m->dropped);
  for (int i = 0; i < 4; i++) {
    cJSON *s = cJSON_AddObjectToObject(j, moe_steps[i]);
    cJSON_AddNumberToObject(s, "time_s", time[i]);
    cJSON_AddNumberToObject(s, "link_bytes", m->link_bytes[i]);
    cJSON_AddNumberToObject(s, "bottleneck_GBps", time[i] > 0 ? m->link_bytes[i] / time[i] / 1e9 : 0);
    cJSON_AddStringToObject(s, "link", m->nodes > 1 ? "infiniband" : "nvlink");
  }
  cJSON_AddNumberToObject(j, "experts_fwd_s", m->experts_time[0]);
  cJSON_AddNumberToObject(j, "experts_bwd_s", m->experts_time[1]);
  cJSON_AddNumberToObject(j, "layer_fwd_s", m->layer_time[0]);
  cJSON_AddNumberToObject(j, "layer_bwd_s", m->layer_time[1]);
  return j;
}

/* Loads the files and analyses the workload's MoE layer; the caller frees c and w. */
static bool moe_analyse(const char *cluster, const char *workload, char *const *sets,
                        cfg_cluster **c, cfg_workload **w, wl_moe_info *m, double time[4],
                        GError **err)
{
  if (!cfg_load_with(cluster, workload, sets, c, w, err))
    return false;
  hw_cluster *hw = hw_cluster_new(*c);
  bool ok = wl_moe_layer(*w, hw, m, err) && moe_times(hw, m, time, err);
  hw_cluster_free(hw);
  return ok;
}

cJSON *cli_moe_json(const char *cluster, const char *workload, char *const *sets, GError **err)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  wl_moe_info m;
  double time[4];
  cJSON *j = moe_analyse(cluster, workload, sets, &c, &w, &m, time, err) ? moe_json(&m, time) : NULL;
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return j;
}

int cli_moe(int argc, char **argv)
{
  g_autofree char *cluster = NULL, *workload = NULL;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
      {"cluster", 'c', 0, G_OPTION_ARG_FILENAME, &cluster, "Cluster file or preset name", "CLUSTER"},
      {"workload", 'w', 0, G_OPTION_ARG_FILENAME, &workload, "Workload file or preset name", "WORKLOAD"},
      {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON", NULL},
      {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &sets, "Override a key", "KEY=VALUE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
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
  wl_moe_info m;
  double time[4];
  bool ok = moe_analyse(cluster, workload, sets, &c, &w, &m, time, &err);
  if (ok && json) {
    cJSON *j = moe_json(&m, time);
    rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else if (ok) {
    moe_print_text(c, w, &m, time);
  }
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return ok ? 0 : cli_fail(err);
}
