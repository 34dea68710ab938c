/* dlsim moe's report: the routing's imbalance, the four all-to-alls (bytes, time, the bandwidth
 * on the bottleneck link as DeepEP reports it) and the expert compute beside them. */
#include "report/report.h"

void rep_moe_text(FILE *out, const cfg_cluster *c, const cfg_workload *w, const sim_moe *s)
{
  const wl_moe_info *m = &s->info;
  const double *time = s->time;
  const char *link = m->nodes > 1 ? "InfiniBand" : "NVLink";
  fprintf(out, "dlsim moe: %s on %s, EP %d over %d node%s, all-to-all %s\n", w->model.name, c->name,
         m->ep, m->nodes, m->nodes > 1 ? "s" : "", cfg_a2a_name(w->collectives.a2a));
  fprintf(out, "  per GPU and micro-batch: %.0f tokens routed, %.0f copies (top-%d)\n", m->tokens,
         m->copies, w->model.moe.top_k);
  fprintf(out, "  routing: busiest rank runs %.3fx the mean, %.1f %% of copies dropped\n", m->load,
         100 * m->dropped);
  fprintf(out, "  %-13s %12s %12s %14s\n", "", "time", "bytes", "GB/s on link");
  for (int i = 0; i < 4; i++)
    fprintf(out, "  %-13s %9.1f us %9.2f MB %9.1f (%s)\n", sim_a2a_names[i], time[i] * 1e6,
           m->link_bytes[i] / 1e6, time[i] > 0 ? m->link_bytes[i] / time[i] / 1e9 : 0, link);
  fprintf(out, "  %-13s %9.1f us   forward, %9.1f us backward\n", "experts", m->experts_time[0] * 1e6,
         m->experts_time[1] * 1e6);
  fprintf(out, "  %-13s %9.1f us   forward, %9.1f us backward (all kernels, without all-to-alls)\n",
         "layer", m->layer_time[0] * 1e6, m->layer_time[1] * 1e6);
}

cJSON *rep_moe_json(const sim_moe *s)
{
  const wl_moe_info *m = &s->info;
  const double *time = s->time;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "ep", m->ep);
  cJSON_AddNumberToObject(j, "nodes", m->nodes);
  cJSON_AddNumberToObject(j, "tokens_per_gpu", m->tokens);
  cJSON_AddNumberToObject(j, "copies_per_gpu", m->copies);
  cJSON_AddNumberToObject(j, "load_factor", m->load);
  cJSON_AddNumberToObject(j, "dropped_fraction", m->dropped);
  for (int i = 0; i < 4; i++) {
    cJSON *s = cJSON_AddObjectToObject(j, sim_a2a_names[i]);
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

