/* dlsim replay --chakra: a Chakra execution trace as a program, run on a cluster by either
 * engine. The trace carries no step markers and, in ASTRA-sim's workloads, often no measured
 * times at all: the result is the simulated time of the whole trace. */
#include "run/run.h"

#include <string.h>

bool sim_chakra_run(const sim_chakra_args *a, sim_chakra *r, GError **err)
{
  memset(r, 0, sizeof *r);
  chk_options o = {.recost = a->recost, .dtype = CFG_BF16};
  if (!a->cluster) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--chakra: expected -c CLUSTER as well (a Chakra trace does not say which GPUs it ran on)");
    return false;
  }
  if ((a->dtype && !cfg_dtype_parse(a->dtype, &o.dtype, err)) ||
      (a->engine && !eng_kind_parse(a->engine, &r->engine, err)) ||
      !(r->trace = chk_load(a->trace, err)) ||
      !(r->cfg = sim_cluster_for(a->cluster, a->sets, r->trace->nranks, err)))
    return false;
  if (a->groups && !(o.groups = chk_groups_load(a->groups, err)))
    return false;
  prog_program *p = chk_program(r->trace, &o, &r->counts, err);
  if (o.groups)
    g_hash_table_destroy(o.groups);
  if (!p)
    return false;
  hw_cluster *hw = hw_cluster_new(r->cfg);
  eng_options eo = {.kind = r->engine, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  bool ok = eng_run(p, hw, &eo, &r->res, err);
  hw_cluster_free(hw);
  prog_free(p);
  return ok;
}

void sim_chakra_clear(sim_chakra *r)
{
  chk_free(r->trace);
  cfg_cluster_free(r->cfg);
  eng_result_clear(&r->res);
}
