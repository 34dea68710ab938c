/* lifecycle: from one simulated step to a whole training run (dlsim run with training.tokens or
 * training.steps): the time to train with the failures a cluster of this size sees, the
 * checkpoints that bound what each failure loses, the energy the run draws and what it costs.
 *
 * The model is first order, as Young (1974) and Daly (2006) wrote it: failures arrive at the sum
 * of the rates of every part the job uses (count / mean time between failures), each one loses
 * the restart, the checkpoint read and on average half a checkpoint interval of work;
 * checkpoints stall training for their write (synchronous) or for a snapshot to host memory
 * (asynchronous). The step itself is sim_result as the engines give it. */
#ifndef DLSIM_LIFECYCLE_H
#define DLSIM_LIFECYCLE_H

#include "config/config.h"
#include "run/run.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* ---- failures ------------------------------------------------------------------------------ */

typedef enum { LC_GPU, LC_NODE, LC_SOFTWARE, LC_NIC, LC_SWITCH, LC_LINK, LC_NKINDS } lc_kind;
const char *lc_kind_name(lc_kind k); /* gpu, node, software, nic, switch, link */

/* The parts a job runs on and how often each fails (seconds; 0: never). */
typedef struct {
  double count[LC_NKINDS];
  double mtbf[LC_NKINDS];
} lc_fleet;

/* The parts of `gpus` GPUs of cluster `c`: their nodes, the nodes' NICs, and the switches and
 * links of a fat tree with the cluster's tiers over those NICs (reliability.switch_radix). */
lc_fleet lc_fleet_of(const cfg_cluster *c, int gpus);
/* Failures per second of the whole job: sum of count / mtbf. */
double lc_failure_rate(const lc_fleet *f);
/* Expected interruptions in `wall` seconds: sum over kinds of count x wall / mtbf; each kind's
 * share in `by` (may be NULL). */
double lc_interruptions(const lc_fleet *f, double wall, double by[LC_NKINDS]);

/* ---- checkpoints and goodput ---------------------------------------------------------------- */

/* Young/Daly's interval: sqrt(2 x stall x mtbf). */
double lc_young_daly(double stall, double mtbf);

typedef struct {
  double productive; /* seconds of training the run needs (steps x step time) */
  double stall;      /* training stopped per checkpoint */
  double rate;       /* failures per second */
  double lost_fixed; /* per failure, beyond half an interval: restart, checkpoint read, and an
                        asynchronous checkpoint's write (the last one may not have landed) */
} lc_timeline_in;

typedef struct {
  double interval;     /* of training between checkpoints */
  double wall;         /* the run from start to end */
  double goodput;      /* productive / wall */
  double checkpoints;  /* taken */
  double checkpoint_s; /* stalled for them */
  double failure_s;    /* lost to failures: rework and restarts */
} lc_timeline;

/* The run with checkpoints every `interval` seconds of training: wall = productive x (1 +
 * stall / interval) / (1 - rate x (interval / 2 + lost_fixed)). False when failures come faster
 * than the run recovers from them (it never ends). */
bool lc_timeline_at(const lc_timeline_in *in, double interval, lc_timeline *out);

/* ---- energy --------------------------------------------------------------------------------- */

typedef enum { LC_COMPUTE_BOUND, LC_MEMORY_BOUND, LC_COMMUNICATING, LC_IDLE, LC_NPHASES } lc_phase;
const char *lc_phase_name(lc_phase p); /* compute_bound, memory_bound, communicating, idle */

/* One GPU's power in each phase, watts (power.gpu_tdp x power.<phase>). */
double lc_gpu_power(const cfg_power *p, lc_phase phase);
/* Watts per node beside its GPUs: power.node, else 350 W per GPU of the node. */
double lc_node_power(const cfg_cluster *c);
/* Facility joules of one step: PUE x (gpus x sum over phases of GPU power x time, plus the nodes'
 * and switches' power over the whole step). `time` is one GPU's step split by phase. */
double lc_step_energy(const cfg_power *p, const double time[LC_NPHASES], int gpus, double nodes,
                      double switches);
/* The critical rank's step split by phase: compute time into compute- and memory-bound by the
 * FLOP/s it reaches against what compute-bound kernels reach (gpu.efficiency: flops.gemm x
 * sustained); exposed communication and the wait for stragglers; bubble and other as idle. */
void lc_step_phases(const sim_result *r, double time[LC_NPHASES]);

/* ---- the run -------------------------------------------------------------------------------- */

typedef struct {
  double steps, tokens, tokens_per_step;
  double step_time;                /* with stragglers' cost */
  double straggler_s;              /* of the run's training, waiting for stragglers */
  lc_fleet fleet;
  double job_mtbf;                 /* seconds, 1 / failure rate (0: no failures) */
  double interruptions, interruptions_by[LC_NKINDS], lost_by[LC_NKINDS];
  double checkpoint_bytes, checkpoint_write, checkpoint_stall, restart, read;
  bool async, interval_given;
  lc_timeline t;
  double phase_time[LC_NPHASES];   /* one GPU's step by phase, seconds */
  double phase_power[LC_NPHASES];  /* one GPU's power in each, watts */
  double step_energy;              /* facility joules per step */
  double gpu_watts;                /* one GPU's mean power over a step */
  double energy_kwh, gpu_hours, cost_usd, cost_per_mtoken;
  double gpu_hour_price, kwh_price, pue;
} lc_run;

/* Whether the workload asks for a run (training.tokens or training.steps). */
bool lc_wanted(const cfg_workload *w);
/* The run of `r`'s workload on its cluster. Errors (CFG_ERROR_INPUT, naming the key and where
 * it is): both tokens and steps, tokens of a model without sequences, a zero bandwidth, a PUE
 * below 1, failures faster than restarts. */
bool lc_estimate(const sim_result *r, lc_run *out, GError **err);

/* The "run" block dlsim run prints after the step, and its JSON (docs/output.md: run). */
void lc_text(FILE *out, const lc_run *run);
cJSON *lc_json(const lc_run *run);

#endif
