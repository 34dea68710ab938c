/* dlsim replay's simulation: a real trace as a program on a cluster, predicted vs measured,
 * with the replay's own diagnostics. */
#include "run/run.h"

#include <string.h>



static double sim_replay_mean(const double *v, int n)
{
  double s = 0;
  for (int i = 0; i < n; i++)
    s += v[i];
  return n ? s / n : 0;
}

/* Builds and runs one replay; fills `times` per step. */
static bool sim_replay_one(sim_replay *r, const trc_replay_options *o, const hw_cluster *on,
                         bool keep, double *times, GError **err)
{
  trc_replay rep;
  if (!trc_replay_build(r->traces, r->ntraces, o, &rep, err))
    return false;
  eng_options eo = {.kind = r->engine, .trace = true, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_result res;
  bool ok = eng_run(rep.program, on, &eo, &res, err) && trc_replay_step_times(&rep, &res, times, err);
  eng_result_clear(&res);
  if (keep && ok)
    r->rep = rep;
  else
    trc_replay_clear(&rep);
  return ok;
}



static bool sim_replay_load(const sim_replay_args *a, sim_replay *r, GError **err)
{
  r->ntraces = (int)g_strv_length(a->traces);
  r->traces = g_new0(trc_trace *, r->ntraces);
  for (int i = 0; i < r->ntraces; i++)
    if (!(r->traces[i] = trc_load(a->traces[i], err)))
      return false;
  r->engine = ENG_ANALYTIC;
  if (a->engine && !eng_kind_parse(a->engine, &r->engine, err))
    return false;
  if (a->comm && strcmp(a->comm, "model") != 0 && strcmp(a->comm, "measured") != 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--comm: expected model or measured, got '%s'", a->comm);
    return false;
  }
  int ranks = a->ranks > 0 ? a->ranks : MAX(r->traces[0]->world_size, 1);
  r->default_cluster = !a->cluster;
  r->cluster_name = g_strdup(a->cluster ? a->cluster : sim_default_cluster(r->traces[0]->gpu_name));
  if (!(r->base_cfg = sim_cluster_for(r->cluster_name, a->machine, ranks, err)))
    return false;
  r->base = hw_cluster_new(r->base_cfg);
  if (!a->sets && !a->target)
    return true;
  g_auto(GStrv) sets = sim_strv_concat(a->target ? NULL : a->machine, a->sets);
  r->target_cfg = sim_cluster_for(a->target ? a->target : r->cluster_name, sets, ranks, err);
  if (r->target_cfg)
    r->target = hw_cluster_new(r->target_cfg);
  return r->target_cfg != NULL;
}

bool sim_replay_run(const sim_replay_args *a, sim_replay *r, GError **err)
{
  memset(r, 0, sizeof *r);
  trc_replay_options o = {.first_step = -1, .last_step = -1, .nranks = a->ranks};
  if (!trc_parse_steps(a->steps, &o.first_step, &o.last_step, err) || !sim_replay_load(a, r, err))
    return false;
  o.base = r->base;
  o.target = r->target;
  o.comm_measured = a->comm && strcmp(a->comm, "measured") == 0;
  guint from, n;
  if (!trc_step_range(r->traces[0], o.first_step, o.last_step, &from, &n, err))
    return false;
  r->predicted = g_new(double, n);
  r->measured_comm = g_new(double, n);
  r->host = g_new(double, n);
  const hw_cluster *on = r->target ? r->target : r->base;
  if (!sim_replay_one(r, &o, on, true, r->predicted, err))
    return false;
  /* diagnostics of the replay itself, on the cluster the trace ran on */
  trc_replay_options mc = o, ho = o;
  mc.target = ho.target = NULL;
  mc.comm_measured = true;
  ho.host_only = true;
  if (!sim_replay_one(r, &mc, r->base, false, r->measured_comm, err) ||
      !sim_replay_one(r, &ho, r->base, false, r->host, err))
    return false;
  r->host_mean = sim_replay_mean(r->host, (int)n);
  r->measured_mean = sim_replay_mean(r->rep.measured, r->rep.nsteps);
  r->predicted_mean = sim_replay_mean(r->predicted, r->rep.nsteps);
  r->measured_comm_mean = sim_replay_mean(r->measured_comm, r->rep.nsteps);
  if (r->target) {
    trc_replay_options bo = o;
    bo.target = NULL;
    r->baseline = g_new(double, n);
    if (!sim_replay_one(r, &bo, r->base, false, r->baseline, err))
      return false;
    r->baseline_mean = sim_replay_mean(r->baseline, r->rep.nsteps);
  }
  return true;
}

void sim_replay_clear(sim_replay *r)
{
  for (int i = 0; r->traces && i < r->ntraces; i++)
    trc_free(r->traces[i]);
  g_free(r->traces);
  hw_cluster_free(r->base);
  hw_cluster_free(r->target);
  cfg_cluster_free(r->base_cfg);
  cfg_cluster_free(r->target_cfg);
  trc_replay_clear(&r->rep);
  g_free(r->predicted);
  g_free(r->measured_comm);
  g_free(r->baseline);
  g_free(r->host);
  g_free(r->cluster_name);
}

