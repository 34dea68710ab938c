/* A training step to a whole run: failures, checkpoints, goodput, energy, cost. */
#include "lifecycle/lifecycle.h"

#include "memory/memory.h"
#include "workloads/workloads.h"

#include <math.h>

/* ---- failures ------------------------------------------------------------------------------ */

const char *lc_kind_name(lc_kind k)
{
  static const char *const names[] = {"gpu", "node", "software", "nic", "switch", "link"};
  return k < LC_NKINDS ? names[k] : "?";
}

/* A fat tree over `nics` ports: below the top tier each switch gives half its ports to the tier
 * below, the top tier all of them; every tier carries as many links as there are NICs. */
static void lc_fabric(int nics, int tiers, int radix, double *switches, double *links)
{
  if (nics == 0) {
    *switches = *links = 0;
    return;
  }
  tiers = MAX(tiers, 1);
  *switches = (tiers - 1) * ceil(nics / (radix / 2.0)) + ceil((double)nics / radix);
  *links = (double)nics * tiers;
}

lc_fleet lc_fleet_of(const cfg_cluster *c, int gpus)
{
  const cfg_reliability *r = &c->reliability;
  int nodes = (gpus + c->node.gpus_per_node - 1) / c->node.gpus_per_node;
  int nics = nodes > 1 ? nodes * c->node.nics_per_node : 0;
  lc_fleet f = {.count = {gpus, nodes, nodes, nics, 0, 0},
                .mtbf = {r->gpu_mtbf, r->node_mtbf, r->software_mtbf, r->nic_mtbf, r->switch_mtbf,
                         r->link_mtbf}};
  lc_fabric(nics, c->network.ntiers, r->switch_radix, &f.count[LC_SWITCH], &f.count[LC_LINK]);
  return f;
}

double lc_interruptions(const lc_fleet *f, double wall, double by[LC_NKINDS])
{
  double total = 0;
  for (int k = 0; k < LC_NKINDS; k++) {
    double n = f->mtbf[k] > 0 ? f->count[k] * wall / f->mtbf[k] : 0;
    if (by)
      by[k] = n;
    total += n;
  }
  return total;
}

double lc_failure_rate(const lc_fleet *f)
{
  return lc_interruptions(f, 1.0, NULL);
}

/* ---- checkpoints and goodput ---------------------------------------------------------------- */

double lc_young_daly(double stall, double mtbf)
{
  return sqrt(2 * stall * mtbf);
}

bool lc_timeline_at(const lc_timeline_in *in, double interval, lc_timeline *out)
{
  double survive = 1 - in->rate * (interval / 2 + in->lost_fixed);
  if (!(interval > 0) || survive <= 0)
    return false;
  out->interval = interval;
  out->checkpoints = in->productive / interval;
  out->checkpoint_s = out->checkpoints * in->stall;
  out->wall = (in->productive + out->checkpoint_s) / survive;
  out->failure_s = out->wall - in->productive - out->checkpoint_s;
  out->goodput = in->productive / out->wall;
  return true;
}

/* ---- energy --------------------------------------------------------------------------------- */

const char *lc_phase_name(lc_phase p)
{
  static const char *const names[] = {"compute_bound", "memory_bound", "communicating", "idle"};
  return p < LC_NPHASES ? names[p] : "?";
}

double lc_gpu_power(const cfg_power *p, lc_phase phase)
{
  const double frac[] = {p->compute, p->memory_bound, p->communication, p->idle};
  return phase < LC_NPHASES ? p->gpu_tdp * frac[phase] : 0;
}

double lc_node_power(const cfg_cluster *c)
{
  /* 8.4 kW measured on an 8x H100 node in training (Latif et al. 2024), less its GPUs at TDP */
  return isnan(c->power.node) ? 350.0 * c->node.gpus_per_node : c->power.node;
}

double lc_step_energy(const cfg_power *p, const double time[LC_NPHASES], int gpus, double nodes,
                      double switches)
{
  double gpu = 0, step = 0;
  for (int ph = 0; ph < LC_NPHASES; ph++) {
    gpu += lc_gpu_power(p, (lc_phase)ph) * time[ph];
    step += time[ph];
  }
  return p->pue * (gpus * gpu + (nodes * p->node + switches * p->switch_power) * step);
}

void lc_step_phases(const sim_result *r, double time[LC_NPHASES])
{
  const cfg_efficiency *e = &r->cluster->gpu.efficiency;
  double bound = e->flops_efficiency[CFG_KCLASS_GEMM] * e->sustained;
  double compute = r->eng.compute;
  /* the FLOP/s the compute time reaches, as a share of what compute-bound kernels reach */
  double share = compute > 0 && bound > 0 ? r->hfu * r->step_time / (compute * bound) : 0;
  share = CLAMP(share, 0.0, 1.0);
  time[LC_COMPUTE_BOUND] = share * compute;
  time[LC_MEMORY_BOUND] = (1 - share) * compute;
  /* the other ranks wait for a straggler inside a collective */
  time[LC_COMMUNICATING] = r->eng.exposed_comm + r->stragglers.cost;
  time[LC_IDLE] = r->eng.bubble + r->eng.other;
}

/* ---- the run -------------------------------------------------------------------------------- */

bool lc_wanted(const cfg_workload *w)
{
  return w->has_training && (w->training.tokens > 0 || w->training.steps > 0);
}

static bool lc_fail(GError **err, const cfg_doc *doc, const char *key, const char *what)
{
  g_autofree char *where = doc ? cfg_doc_where(doc, key) : g_strdup("dlsim");
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s %s", where, key, what);
  return false;
}

static bool lc_steps(const sim_result *r, lc_run *run, GError **err)
{
  const cfg_training *t = &r->workload->training;
  const cfg_doc *doc = r->workload->doc;
  /* a step as the run sees it: the slowest rank sets it (cluster.stragglers) */
  run->step_time = r->step_time + r->stragglers.cost;
  run->tokens_per_step = r->tokens_per_s * r->step_time;
  if (t->tokens > 0 && t->steps > 0)
    return lc_fail(err, doc, "training.steps",
                   "and training.tokens both give the run's length: keep one");
  if (t->tokens > 0 && !(run->tokens_per_step > 0))
    return lc_fail(err, doc, "training.tokens",
                   "needs a model of token sequences: give training.steps instead");
  run->steps = t->steps > 0 ? t->steps : ceil(t->tokens / run->tokens_per_step);
  run->tokens = run->steps * run->tokens_per_step;
  run->straggler_s = run->steps * r->stragglers.cost;
  return true;
}

/* What a checkpoint holds: every parameter once (replicas are written by one rank), in the
 * training dtype, with its optimizer states (Adam: fp32 master copy, m and v); no gradients. */
static bool lc_checkpoint_bytes(const sim_result *r, double *bytes, GError **err)
{
  double params = 0, largest = 0;
  if (!mem_model_params(r->workload, &params, &largest, err))
    return false;
  wl_state_bytes b = wl_state_bytes_per_param(&r->workload->training);
  *bytes = params * (b.weights + b.optimizer);
  return true;
}

static bool lc_checkpoint(const sim_result *r, lc_run *run, GError **err)
{
  const cfg_cluster *c = r->cluster;
  const cfg_storage *s = &c->storage;
  if (!(s->bandwidth > 0))
    return lc_fail(err, c->doc, "storage.bandwidth", "must be above 0: checkpoints are written through it");
  double per_node = isnan(s->node_bandwidth) ? c->node.nics_per_node * c->network.nic_bandwidth
                                             : s->node_bandwidth;
  double nodes = run->fleet.count[LC_NODE];
  if (!(per_node > 0) && !isnan(s->node_bandwidth))
    return lc_fail(err, c->doc, "storage.node_bandwidth", "must be above 0: checkpoints leave the nodes through it");
  double bw = per_node > 0 ? MIN(s->bandwidth, nodes * per_node) : s->bandwidth;
  if (!lc_checkpoint_bytes(r, &run->checkpoint_bytes, err))
    return false;
  run->checkpoint_write = run->checkpoint_bytes / bw;
  run->read = run->checkpoint_write; /* read back at the bandwidth it was written with */
  run->async = r->workload->checkpoint.async;
  if (run->async && !(s->host_bandwidth > 0))
    return lc_fail(err, c->doc, "storage.host_bandwidth", "must be above 0: asynchronous checkpoints copy through it");
  /* asynchronous: each GPU copies its share of the checkpoint to host memory, then trains on */
  run->checkpoint_stall = run->async ? run->checkpoint_bytes / r->gpus / s->host_bandwidth
                                     : run->checkpoint_write;
  run->restart = r->workload->checkpoint.restart;
  return true;
}

static bool lc_schedule(const sim_result *r, lc_run *run, GError **err)
{
  double rate = lc_failure_rate(&run->fleet);
  run->job_mtbf = rate > 0 ? 1 / rate : 0;
  lc_timeline_in in = {.productive = run->steps * run->step_time,
                       .stall = run->checkpoint_stall,
                       .rate = rate,
                       .lost_fixed = run->restart + run->read +
                                     (run->async ? run->checkpoint_write : 0)};
  double given = r->workload->checkpoint.interval;
  run->interval_given = !isnan(given) && given > 0;
  double interval = run->interval_given ? given
                    : rate > 0          ? lc_young_daly(in.stall, run->job_mtbf)
                                        : in.productive;
  /* no more often than every step, nor (asynchronous) before the last one has been written;
   * at least one checkpoint, at the end */
  interval = MIN(interval, in.productive);
  interval = MAX(interval, run->step_time);
  if (run->async)
    interval = MAX(interval, run->checkpoint_write);
  if (!lc_timeline_at(&in, interval, &run->t))
    return lc_fail(err, r->cluster->doc, "reliability",
                   "fails faster than the job restarts and catches up: it never ends");
  run->interruptions = lc_interruptions(&run->fleet, run->t.wall, run->interruptions_by);
  double per_failure = interval / 2 + in.lost_fixed;
  for (int k = 0; k < LC_NKINDS; k++)
    run->lost_by[k] = run->interruptions_by[k] * per_failure;
  return true;
}

/* Energy: steps and their rework at the step's power, checkpoint stalls and restarts idle. */
static void lc_energy_and_cost(const sim_result *r, lc_run *run)
{
  const cfg_cluster *c = r->cluster;
  cfg_power p_node = c->power;
  p_node.node = lc_node_power(c);
  const cfg_power *p = &p_node;
  double *time = run->phase_time;
  lc_step_phases(r, time);
  double nodes = run->fleet.count[LC_NODE], switches = run->fleet.count[LC_SWITCH];
  run->step_energy = lc_step_energy(p, time, r->gpus, nodes, switches);
  run->gpu_watts = 0;
  for (int ph = 0; ph < LC_NPHASES; ph++) {
    run->phase_power[ph] = lc_gpu_power(p, (lc_phase)ph);
    run->gpu_watts += run->phase_power[ph] * time[ph] / run->step_time;
  }
  double idle_time[LC_NPHASES] = {0, 0, 0, 1};
  double idle_power = lc_step_energy(p, idle_time, r->gpus, nodes, switches);
  double restarts = run->interruptions * (run->restart + run->read);
  double busy = run->t.wall - run->t.checkpoint_s - restarts;
  double joules = busy / run->step_time * run->step_energy +
                  (run->t.checkpoint_s + restarts) * idle_power;
  run->pue = p->pue;
  run->energy_kwh = joules / 3.6e6;
  run->gpu_hours = r->gpus * run->t.wall / 3600;
  run->gpu_hour_price = c->cost.gpu_hour;
  run->kwh_price = c->cost.kwh;
  run->cost_usd = run->gpu_hours * c->cost.gpu_hour + run->energy_kwh * c->cost.kwh;
  run->cost_per_mtoken = run->tokens > 0 ? run->cost_usd / (run->tokens / 1e6) : 0;
}

bool lc_estimate(const sim_result *r, lc_run *out, GError **err)
{
  *out = (lc_run){0};
  if (!(r->cluster->power.pue >= 1))
    return lc_fail(err, r->cluster->doc, "power.pue", "must be at least 1 (facility / IT power)");
  out->fleet = lc_fleet_of(r->cluster, r->gpus);
  if (!lc_steps(r, out, err) || !lc_checkpoint(r, out, err) || !lc_schedule(r, out, err))
    return false;
  lc_energy_and_cost(r, out);
  return true;
}
