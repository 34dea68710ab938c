/* dlsim moe's analysis: one mixture-of-experts layer in isolation, per GPU and micro-batch. */
#include "run/run.h"

const char *const sim_a2a_names[4] = {"dispatch", "combine", "combine_bwd", "dispatch_bwd"};

/* Times the four all-to-alls on the first ep GPUs, on the workload's runtime (which says
 * whether they are NCCL's send/recv or DeepEP's kernels). */
static bool sim_moe_times(const hw_cluster *hw, const cfg_workload *w, sim_moe *m, GError **err)
{
  coll_runtime *rt = coll_runtime_new(&w->collectives, w->doc, err);
  if (!rt)
    return false;
  eng_options opt = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO,
                     .runtime = rt};
  bool ok = true;
  for (int i = 0; i < 4 && ok; i++) {
    eng_coll_result r = {0};
    ok = m->info.ep <= 1 || eng_collective_time(hw, &opt, PROG_COLL_ALLTOALL, m->info.ep,
                                                m->info.ep, m->info.model_bytes[i], &r, err);
    m->time[i] = r.time;
  }
  coll_runtime_free(rt);
  return ok;
}

bool sim_moe_layer(const cfg_cluster *c, const cfg_workload *w, sim_moe *out, GError **err)
{
  hw_cluster *hw = hw_cluster_new(c);
  bool ok = wl_moe_layer(w, hw, &out->info, err) && sim_moe_times(hw, w, out, err);
  hw_cluster_free(hw);
  return ok;
}
