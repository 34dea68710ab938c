/* collectives: every algorithm is defined once, as a plan of point-to-point transfers between
 * endpoints (GPUs, and switches that reduce in place: NVLS, SHARP). The same plan yields the
 * closed-form cost and the transfers the DES engine runs on SimGrid.
 *
 * A plan does not depend on the message size: transfers carry a fraction of it. A phase folds
 * `steps` identical steps (the DES sends steps x bytes in one message per transfer) and counts
 * its latency stages per link class (a step of a ring across nodes waits on the network, a
 * chain inside a node on NVLink). With protocol p (LL, LL128, Simple, as NCCL) and size S:
 *   phase = sum over classes c of stages(c) x (latency(c) + hop(c, p))
 *         + max over transfers (wire / fair share)
 *         + (pipelined ? (stages - 1) x min(chunk(p), piece) / slowest share : 0)
 *   wire  = steps x fraction x S / protocol_efficiency(p)
 *   time  = base(p) + sum of phases
 * and a ring phase lasts at least (2 sent / protocol_efficiency(p) + own) x S / nccl.copy_bandwidth:
 * the loads and stores of the SMs NCCL's channels run on (a byte on the wire is stored by one
 * GPU's SMs and loaded by the other's); the rest is slept after the transfers.
 * where the fair share of a transfer is the smallest bandwidth / (transfers of the phase on the
 * link) along its route. Folding is the pipelined steady state of a ring; `unfold` gives one
 * phase per step for checking. */
#ifndef DLSIM_COLLECTIVES_H
#define DLSIM_COLLECTIVES_H

#include "hardware/hardware.h"
#include "program/program.h"

#include <glib.h>

typedef enum {
  COLL_ALGO_AUTO,
  COLL_ALGO_RING,
  COLL_ALGO_TREE,         /* NCCL's double binary tree across nodes, chains inside */
  COLL_ALGO_RHD,          /* recursive halving-doubling (MPI style), power-of-two groups */
  COLL_ALGO_HIERARCHICAL, /* intra-node reduce-scatter, per-rail all-reduce, intra all-gather */
  COLL_ALGO_NVLS,         /* in-NVSwitch reduction (NVLink SHARP), one node */
  COLL_ALGO_NVLS_TREE,    /* NVLS inside nodes, pipelined with per-rail exchange across nodes */
  COLL_ALGO_SHARP,        /* in-network reduction in InfiniBand switches across nodes */
  COLL_ALGO_PAIRWISE,     /* all-to-all in n-1 rounds of shifted exchanges */
  COLL_ALGO_DIRECT,       /* every transfer at once (all-to-all, send/recv) */
  COLL_ALGO_RD,           /* recursive doubling: log2 n exchanges (all-reduce: of the whole
                           * buffer), power-of-two groups (MPI's small-message choice) */
  COLL_ALGO_MULTI_LEADER, /* two-level: reduce to k leaders per node, k concurrent rings across
                           * nodes, broadcast back (MVAPICH's multi-leader design) */
  COLL_NALGOS
} coll_algo;

#define COLL_PROTO_AUTO (-1)

bool coll_algo_parse(const char *name, coll_algo *out, GError **err);
const char *coll_algo_name(coll_algo a);
bool coll_proto_parse(const char *name, int *out, GError **err);
/* Whether `algo` runs on protocol `proto` (in-switch reductions need Simple). */
bool coll_proto_applies(coll_algo algo, int proto);
/* Whether `algo` can run `op` on this group of this cluster. */
bool coll_algo_applies(const hw_cluster *hw, prog_coll op, const int *ranks, int n, coll_algo algo);

typedef struct {
  int src, dst;  /* endpoints */
  double frac;   /* bytes per step = frac x S (absolute bytes for all-to-allv) */
} coll_xfer;

typedef struct {
  double alpha, frac, rate; /* a distinct (latency, fraction, fair share) of the phase */
  cfg_link_class cls;       /* which hop latency applies */
} coll_kind;

typedef struct {
  int steps;
  int stages[CFG_NLINKCLASSES]; /* latency stages over intra-node links and over the network */
  bool pipelined;
  int nxfers;
  coll_xfer *xfers;
  int nkinds;
  coll_kind *kinds;
  double max_alpha, min_rate, max_frac;
  int max_sends; /* most transfers one endpoint starts in a step (MPI posts them one by one) */
  double class_alpha[CFG_NLINKCLASSES]; /* largest route latency of each class */
  double sent, own; /* per byte of S, what one GPU sends in the phase and what it loads and
                     * stores of its own buffers (0, 0: a phase the copy bound does not apply to) */
  int *member_off; /* CSR over members: transfers of member m */
  int *member_idx;
} coll_phase;

typedef struct {
  prog_coll op;
  coll_algo algo;
  int n;
  int *ranks;     /* the process group, in order */
  int nmembers;   /* ranks, then switch endpoints used */
  int *members;
  int members_room;
  struct coll_member_at *by_endpoint; /* the members sorted by endpoint, for coll_member */
  int channels;
  int nnodes;     /* nodes the group spans */
  int nphases;
  coll_phase *phases;
  bool absolute;  /* fractions are bytes (all-to-allv) */
} coll_plan;

/* A plan evaluated for one size and protocol. */
typedef struct {
  const coll_plan *plan;
  int proto;
  double bytes;
  double time;   /* closed form, uncontended */
  double base;   /* slept first */
  double *pre;   /* per phase: slept before the transfers */
  double *post;  /* per phase: slept after them */
} coll_schedule;

coll_plan *coll_plan_new(const hw_cluster *hw, prog_coll op, const int *ranks, int n,
                         coll_algo algo, const double *vbytes, bool fold);
void coll_plan_free(coll_plan *p);
int coll_member(const coll_plan *p, int endpoint);
/* Wire bytes of a transfer: an integer, as SimGrid sends it. */
double coll_wire_bytes(const coll_plan *p, const coll_phase *ph, const coll_xfer *x, double bytes,
                       double proto_eff);
void coll_schedule_eval(const coll_plan *p, const hw_cluster *hw, int proto, double bytes,
                        coll_schedule *out);
void coll_schedule_clear(coll_schedule *s);
/* The time of `s` when `nsiblings` other groups of the same size (their ranks one group after
 * the other in `siblings`) run the same algorithm at the same moment, as the ranks of a
 * lock-step layer pass do: each phase's transfers share links with the siblings' same phase.
 * Only links that the groups really share slow it down. */
double coll_schedule_crowded(const coll_schedule *s, const hw_cluster *hw, bool fold,
                             const int *siblings, int nsiblings);
/* The same, prepared once for a plan and its siblings (the fair shares do not depend on the
 * size): coll_crowd_time gives the time of any schedule of that plan. */
typedef struct coll_crowd coll_crowd;
coll_crowd *coll_crowd_new(const coll_plan *p, const hw_cluster *hw, bool fold,
                           const int *siblings, int nsiblings);
double coll_crowd_time(const coll_crowd *c, const coll_schedule *s, const hw_cluster *hw);
void coll_crowd_free(coll_crowd *c);

/* Chooses algorithm and protocol like NCCL's tuner (the fastest by this model among NCCL's
 * algorithms), caching plans per group. `algo`/`proto` force a choice. */
typedef struct coll_planner coll_planner;
coll_planner *coll_planner_new(const hw_cluster *hw, coll_algo algo, int proto, bool fold);
void coll_planner_free(coll_planner *pl);
/* From now on the planner knows a group by its ranks, not by the caller's key: one planner then
 * serves programs whose group ids differ (the planner's sweep over layouts), each group planned
 * once. Calls with an all-to-allv matrix are not allowed then. */
void coll_planner_key_by_ranks(coll_planner *pl);
/* `key` identifies the group (and all-to-allv matrix) for caching; NULL on error. */
const coll_schedule *coll_planner_get(coll_planner *pl, prog_coll op, const int *ranks, int n,
                                      int key, double bytes, const double *vbytes, GError **err);

/* A communication runtime (collectives.runtime and the keys its profile sets): which algorithm
 * runs for which op and size, and what it adds to the fabric's costs. With cpu progress a
 * schedule costs, on the Simple wire format (no LL protocols, no pipelined chunks beyond it):
 *   base  = call_latency + cycle_time / 2 + (host-staged ? 2 S / storage.host_bandwidth : 0)
 *   phase = stages x (route latency + step_latency
 *                     + (message > eager_limit ? rendezvous_latency : 0)) + bulk
 * where a phase's message is the largest one a transfer sends in one step. With kernel
 * progress (NCCL, or NCCL under MPI through UCC) NCCL's model holds and call_latency (and half
 * the framework's cycle_time) adds to its base latency. */
typedef struct coll_runtime coll_runtime;
/* `doc` (may be NULL) places errors in the workload's file. */
coll_runtime *coll_runtime_new(const cfg_collectives *c, const cfg_doc *doc, GError **err);
void coll_runtime_free(coll_runtime *rt);
/* The runtime of `c` and its collectives.algorithm and protocol parsed into *algo and *proto,
 * or NULL (nothing to free) when any of the three is wrong. */
coll_runtime *coll_runtime_with_choices(const cfg_collectives *c, const cfg_doc *doc,
                                        coll_algo *algo, int *proto, GError **err);
const char *coll_runtime_name(const coll_runtime *rt);
/* Whether the runtime drives collectives from the host (cpu progress): it holds no SMs. */
bool coll_runtime_cpu(const coll_runtime *rt);
/* Makes the planner choose and cost as `rt` does (NULL: NCCL, the default). */
void coll_planner_set_runtime(coll_planner *pl, const coll_runtime *rt);
/* The time per message when `window` messages of a point-to-point schedule follow each other
 * back to back, as osu_bw streams them: one message's latency (base, per-phase latencies and
 * pipeline fill) is shared by the window, and each message costs its wire time or, when larger,
 * the sender's cost of posting it (`rt`'s step_latency for an MPI; nothing for NCCL). */
double coll_schedule_streamed(const coll_schedule *s, const coll_runtime *rt, int window);
/* Why the planner's runtime runs `algo` for `op` at `bytes`, for reports ("rule 'ring' of
 * collectives.allreduce", "NCCL's tuner: the fastest"); newly allocated. */
char *coll_runtime_why(const coll_runtime *rt, prog_coll op, double bytes, coll_algo algo);

/* nccl-tests bus-bandwidth factor: busbw = algbw x factor. */
double coll_busbw_factor(prog_coll op, int n);
/* Checks that a group is a valid subset of the cluster (distinct ranks within 0..gpus-1). */
bool coll_group_check(const hw_cluster *hw, const int *ranks, int n, GError **err);

#endif
