/* The report of `dlsim memory`: per pipeline stage, every line in GiB, against the capacity. */
#include "report/report.h"
#include "units/units.h"

static double rep_gib(double bytes)
{
  return bytes / 1073741824.0;
}

void rep_memory_text(FILE *out, const rep_memory *r)
{
  const mem_report *m = r->memory;
  const cfg_workload *w = r->workload;
  const cfg_parallel *p = &w->parallel;
  fprintf(out, "dlsim memory: %s on %s, TP %d x PP %d x DP %d%s, ZeRO %d%s, micro-batch %d%s\n",
          w->model.name, r->cluster->name, p->tp, p->pp, p->dp, p->cp > 1 ? " x CP" : "", p->zero,
          p->offload == CFG_OFFLOAD_CPU ? " + CPU offload" : p->offload == CFG_OFFLOAD_NVME ? " + NVMe offload" : "",
          w->training.micro_batch, m->states_only ? " (model states only)" : "");
  rep_notes_text(out, w);
  fprintf(out, "  %5s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n", "stage", "params", "grads", "optim",
          "activ", "kv", "other", "total", "headroom", "GiB");
  for (int s = 0; s < m->nstages; s++) {
    const mem_stage *x = &m->stages[s];
    fprintf(out, "  %5d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f  %s\n", x->stage,
            rep_gib(x->params), rep_gib(x->grads), rep_gib(x->optimizer), rep_gib(x->activations),
            rep_gib(x->kv_cache), rep_gib(x->other), rep_gib(x->total),
            rep_gib(m->capacity - x->total), x->total <= m->capacity ? "FITS" : "OUT OF MEMORY");
  }
  const mem_stage *wst = mem_worst(m);
  g_autofree char *cap = units_format_bytes(m->capacity);
  int k = r->workload->has_training ? r->workload->parallel.processes_per_gpu : 1;
  if (k > 1) /* MPS: each process holds its own in 1/k of the GPU */
    fprintf(out, "  capacity %s per process (%d MPS processes per GPU); stage %d needs the most",
            cap, k, wst->stage);
  else
    fprintf(out, "  capacity %s per GPU; stage %d needs the most", cap, wst->stage);
  if (wst->inflight > 1)
    fprintf(out, " (activations of %.3g micro-batches in flight)", wst->inflight);
  fprintf(out, ": %s\n", m->gpu_fits ? "FITS" : "OUT OF MEMORY");
  if (!m->states_only) {
    fprintf(out, "  other on stage %d:", wst->stage);
    for (int e = 0; e < MEM_NEXTRA; e++)
      if (wst->extra[e] > 0)
        fprintf(out, " %s %.2f", mem_extra_name((mem_extra)e), rep_gib(wst->extra[e]));
    fprintf(out, " GiB\n");
  }
  if (m->host_per_node > 0 && !(m->host_capacity > 0)) {
    g_autofree char *h = units_format_bytes(m->host_per_node);
    fprintf(out, "  host memory per node: %s (node.host_memory is not stated: not checked)\n", h);
  } else if (m->host_per_node > 0) {
    g_autofree char *h = units_format_bytes(m->host_per_node), *hc = units_format_bytes(m->host_capacity);
    fprintf(out, "  host memory per node: %s of %s: %s\n", h, hc, m->host_fits ? "FITS" : "OUT OF MEMORY");
  }
  if (m->nvme_per_node > 0) {
    g_autofree char *n = units_format_bytes(m->nvme_per_node), *nc = units_format_bytes(m->nvme_capacity);
    fprintf(out, "  NVMe per node: %s of %s: %s\n", n, nc, m->nvme_fits ? "FITS" : "FULL");
  }
  if (m->gpu_fits && !m->fits)
    fprintf(out, "  the job does not fit: the GPUs hold their share, the nodes' %s does not\n",
            m->host_fits ? "NVMe" : "host memory");
  int replica = w->training.global_batch / p->dp;
  if (m->max_micro_batch > 0 && m->max_micro_batch >= replica)
    fprintf(out, "  largest micro-batch that fits: %d (the whole per-replica batch)\n", m->max_micro_batch);
  else if (m->max_micro_batch > 0)
    fprintf(out, "  largest micro-batch that fits: %d\n", m->max_micro_batch);
  else if (!m->states_only && w->model.kind != CFG_MODEL_GENERIC)
    fprintf(out, "  no micro-batch fits: even 1 sample runs out of memory\n");
}

cJSON *rep_memory_json(const rep_memory *r)
{
  const mem_report *m = r->memory;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "capacity_bytes", m->capacity);
  cJSON_AddBoolToObject(j, "fits", m->fits);
  cJSON_AddItemToObject(j, "notes", rep_notes_json(r->workload));
  cJSON *ranks = cJSON_AddArrayToObject(j, "ranks");
  for (int s = 0; s < m->nstages; s++) {
    const mem_stage *x = &m->stages[s];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "stage", x->stage);
    cJSON_AddNumberToObject(o, "params_bytes", x->params);
    cJSON_AddNumberToObject(o, "grads_bytes", x->grads);
    cJSON_AddNumberToObject(o, "optimizer_bytes", x->optimizer);
    cJSON_AddNumberToObject(o, "activations_bytes", x->activations);
    cJSON_AddNumberToObject(o, "kv_cache_bytes", x->kv_cache);
    cJSON_AddNumberToObject(o, "other_bytes", x->other);
    cJSON_AddNumberToObject(o, "model_states_bytes", x->model_states);
    cJSON_AddNumberToObject(o, "total_bytes", x->total);
    cJSON *other = cJSON_AddObjectToObject(o, "other");
    for (int e = 0; e < MEM_NEXTRA; e++)
      cJSON_AddNumberToObject(other, mem_extra_name((mem_extra)e), x->extra[e]);
    cJSON_AddNumberToObject(o, "host_bytes", x->host);
    cJSON_AddNumberToObject(o, "nvme_bytes", x->nvme);
    cJSON_AddNumberToObject(o, "micro_batches_in_flight", x->inflight);
    cJSON_AddItemToArray(ranks, o);
  }
  cJSON_AddNumberToObject(j, "host_bytes_per_node", m->host_per_node);
  cJSON_AddBoolToObject(j, "host_fits", m->host_fits);
  cJSON_AddNumberToObject(j, "nvme_bytes_per_node", m->nvme_per_node);
  cJSON_AddBoolToObject(j, "nvme_fits", m->nvme_fits);
  cJSON_AddNumberToObject(j, "max_micro_batch", m->max_micro_batch);
  /* what a tool reading the busiest GPU (torchtitan's maximum over GPUs) compares with */
  cJSON_AddNumberToObject(j, "peak_bytes", mem_worst(m)->total);
  cJSON_AddNumberToObject(j, "peak_stage", mem_worst(m)->stage);
  return j;
}
