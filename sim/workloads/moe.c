/* Routing of a mixture-of-experts layer: how unevenly token copies land on the expert-parallel
 * ranks, which sets the layer's time (every rank waits in the combine for the busiest). */
#include "workloads/workloads_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-expert loads from a file: one number per line (or the last field of a CSV line); '#'
 * comments, blank lines and a header without a number are skipped. */
static bool wl_moe_histogram(const char *path, int experts, double *p, GError **err)
{
  g_autofree char *text = NULL;
  GError *io = NULL;
  if (!g_file_get_contents(path, &text, NULL, &io)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "model.moe.histogram: %s", io->message);
    g_error_free(io);
    return false;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int n = 0;
  for (int i = 0; lines[i]; i++) {
    char *l = g_strstrip(lines[i]);
    if (!*l || *l == '#')
      continue;
    const char *field = strrchr(l, ',') ? strrchr(l, ',') + 1 : l;
    char *end = NULL;
    double v = g_ascii_strtod(field, &end);
    if (end == field || *g_strstrip(end)) {
      if (n == 0 && i == 0)
        continue; /* a header */
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d: expected a number (an expert's load), got '%s'",
                  path, i + 1, l);
      return false;
    }
    if (n >= experts || !(v >= 0)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s:%d: %s", path, i + 1,
                  v >= 0 ? "more loads than model.moe.experts" : "a load must be >= 0");
      return false;
    }
    p[n++] = v;
  }
  if (n != experts) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %d loads for model.moe.experts = %d",
                path, n, experts);
    return false;
  }
  return true;
}

/* The probability that a token copy goes to each expert. */
static bool wl_moe_probabilities(const cfg_moe *m, double *p, GError **err)
{
  int E = m->experts;
  if (m->routing == CFG_ROUTING_HISTOGRAM && !wl_moe_histogram(m->histogram, E, p, err))
    return false;
  for (int e = 0; e < E; e++)
    if (m->routing == CFG_ROUTING_UNIFORM)
      p[e] = 1;
    else if (m->routing == CFG_ROUTING_ZIPF)
      p[e] = pow(e + 1, -m->zipf_s);
  double sum = 0;
  for (int e = 0; e < E; e++)
    sum += p[e];
  if (!(sum > 0)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "model.moe.histogram: every load is 0");
    return false;
  }
  for (int e = 0; e < E; e++)
    p[e] /= sum;
  return true;
}

bool wl_moe_load(const cfg_moe *m, int ep, double tokens, double *load, double *dropped,
                 GError **err)
{
  int E = m->experts;
  g_autofree double *p = g_new0(double, E);
  g_autofree double *rank = g_new0(double, ep);
  g_autofree double *cap = g_new0(double, ep);
  if (!wl_moe_probabilities(m, p, err))
    return false;
  double copies = tokens * ep * m->top_k; /* routed in the expert-parallel group per layer */
  double cap_e = m->capacity_factor > 0 ? m->capacity_factor * copies / E : INFINITY;
  double kept = 0;
  for (int e = 0; e < E; e++) {
    double l = copies * p[e];
    if (m->drop_tokens)
      l = MIN(l, cap_e);
    rank[e % ep] += l;
    cap[e % ep] += cap_e;
    kept += l;
  }
  /* the busiest rank: its expected load plus the expected maximum of ep binomial
   * fluctuations (about sqrt(2 ln ep) standard deviations) */
  double z = ep > 1 ? sqrt(2 * log(ep)) : 0, busiest = 0;
  for (int r = 0; r < ep; r++) {
    double q = rank[r] / copies;
    double b = rank[r] + z * sqrt(copies * q * (1 - q));
    if (m->drop_tokens)
      b = MIN(b, cap[r]);
    busiest = MAX(busiest, b);
  }
  *load = busiest / (copies / ep);
  *dropped = 1 - kept / copies;
  return true;
}

/* Expected distinct bins hit by k uniform picks among n bins. */
static double wl_distinct(double n, double k)
{
  return n * (1 - pow(1 - 1 / n, k));
}

void wl_moe_a2a(const cfg_workload *w, double tokens, double load, int ep, int nodes,
                const cfg_nccl *nc, double model[4], double link[4])
{
  double h = w->model.hidden, k = w->model.moe.top_k, dt = cfg_dtype_bytes(w->training.dtype);
  const double dtypes[4] = {dt, MAX(dt, 2.0), MAX(dt, 2.0), MAX(dt, 2.0)};
  double local = (double)ep / nodes; /* GPUs of the group on one node */
  for (int i = 0; i < 4; i++) {
    double unit = tokens * h * dtypes[i] * load, copies;
    switch (w->collectives.a2a) {
    case CFG_A2A_DEEPEP:
      if (nodes == 1) {
        copies = wl_distinct(ep, k) * (ep - 1) / ep; /* once per remote GPU */
        link[i] = unit * copies;
        model[i] = link[i] * ep / (ep - 1) * nc->p2p_efficiency / nc->deepep_efficiency;
      } else {
        double reach = wl_distinct(nodes, k);
        if (w->model.moe.max_nodes > 0)
          reach = MIN(reach, w->model.moe.max_nodes);
        link[i] = unit * reach * (nodes - 1) / nodes; /* once per remote node */
        model[i] = link[i] * ep / (ep - local);
      }
      break;
    case CFG_A2A_DEEPEP_LL:
      link[i] = unit * k * (ep - 1) / ep; /* every remote copy, over RDMA */
      model[i] = nodes == 1 ? link[i] * ep / (ep - 1) : link[i] * (ep - 1) / (ep - local);
      break;
    default:
      model[i] = unit * k;
      link[i] = nodes == 1 ? model[i] * (ep - 1) / ep : model[i] * (ep - local) / ep;
      break;
    }
  }
}

static double wl_kernels_time(const hw_cluster *hw, const GArray *ks,
                              bool experts_only)
{
  double t = 0;
  for (guint i = 0; i < ks->len; i++) {
    const wl_kernel *k = &g_array_index(ks, wl_kernel, i);
    bool expert = k->role == WL_ROLE_EXPERT_UP || k->role == WL_ROLE_EXPERT_ACT ||
                  k->role == WL_ROLE_EXPERT_DOWN;
    if (experts_only && !expert)
      continue;
    hw_kernel hk = wl_hw_kernel(k);
    t += hw_kernel_time(hw, &hk);
  }
  return t;
}

bool wl_moe_layer(const cfg_workload *w, const hw_cluster *hw, wl_moe_info *out, GError **err)
{
  memset(out, 0, sizeof *out);
  if (w->model.kind != CFG_MODEL_MOE_TRANSFORMER) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "model.kind = %s: not a mixture of experts",
                w->model.kind == CFG_MODEL_CNN ? "cnn" : "transformer");
    return false;
  }
  if (!wl_check_layout(w, err))
    return false;
  wl_shard shard = wl_shard_of(w);
  wl_model *m = NULL;
  if (!wl_model_build(&w->model, &w->training, &shard, &m, err))
    return false;
  const wl_layer *moe = NULL;
  for (guint i = 0; i < m->layers->len && !moe; i++)
    if (((const wl_layer *)g_ptr_array_index(m->layers, i))->moe)
      moe = g_ptr_array_index(m->layers, i);
  const cfg_cluster *c = hw_config(hw);
  out->ep = shard.ep;
  /* an expert-parallel group of consecutive ranks (tensor parallel 1 inside it) */
  int span = shard.ep * w->parallel.tp * w->parallel.cp;
  int domain = hw_gpus_per_node(hw); /* one NVLink domain, several trays on NVL72 */
  out->nodes = MAX(1, (span + domain - 1) / domain);
  out->tokens = m->moe_tokens;
  out->copies = m->moe_copies;
  out->load = shard.moe_load;
  out->dropped = shard.moe_dropped;
  wl_moe_a2a(w, m->moe_tokens, m->moe_load, shard.ep, out->nodes, &c->nccl, out->model_bytes,
             out->link_bytes);
  out->experts_time[0] = wl_kernels_time(hw, moe->fwd, true);
  out->experts_time[1] = wl_kernels_time(hw, moe->bwd, true);
  out->layer_time[0] = wl_kernels_time(hw, moe->fwd, false);
  out->layer_time[1] = wl_kernels_time(hw, moe->bwd, false);
  wl_model_free(m);
  return true;
}
