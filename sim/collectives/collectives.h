/* collectives: each algorithm is defined once, as a schedule of point-to-point transfers.
 * The schedule gives the closed-form (alpha-beta, with the collective's own link sharing)
 * cost, and the DES engine runs the very same transfers on SimGrid.
 *
 * A phase folds `steps` identical steps: in the DES each transfer carries steps x bytes in one
 * message, and the remaining (steps - 1) latencies are slept; this is the pipelined steady
 * state of a ring (NCCL chunks a step into slices, so the bottleneck link sets the rate) and
 * costs O(p) messages instead of O(p^2). Unfolded schedules (one phase per step) exist for
 * checking. */
#ifndef DLSIM_COLLECTIVES_H
#define DLSIM_COLLECTIVES_H

#include "hardware/hardware.h"
#include "program/program.h"

#include <glib.h>

typedef enum { COLL_ALGO_AUTO, COLL_ALGO_RING, COLL_ALGO_PAIRWISE, COLL_ALGO_DIRECT, COLL_NALGOS } coll_algo;

bool coll_algo_parse(const char *name, coll_algo *out, GError **err);
const char *coll_algo_name(coll_algo a);

typedef struct {
  int src, dst;    /* global ranks */
  double bytes;    /* per step */
} coll_xfer;

typedef struct {
  int steps;
  int nxfers;
  coll_xfer *xfers;
  double extra_latency; /* slept after the transfers: (steps - 1) x the phase's largest latency */
  int *member_off;      /* CSR: transfers of member m are member_idx[member_off[m] .. off[m+1]) */
  int *member_idx;
} coll_phase;

typedef struct {
  prog_coll op;
  coll_algo algo;
  int n;
  int *ranks;       /* group order */
  double bytes;     /* nccl-tests size */
  int channels;
  int nphases;
  coll_phase *phases;
  double overhead;  /* fixed launch cost, slept first */
  double time;      /* analytic (uncontended) duration */
  GHashTable *member_of; /* rank -> member index + 1 */
} coll_schedule;

/* Plans `op` over `ranks` (a process group, in order). `fold` selects folded phases. */
coll_schedule *coll_schedule_new(const hw_cluster *hw, prog_coll op, const int *ranks, int n,
                                 double bytes, coll_algo algo, bool fold);
void coll_schedule_free(coll_schedule *s);
int coll_member(const coll_schedule *s, int rank);
/* Bytes on the wire for one transfer of a phase: what the DES sends, as an integer. */
double coll_wire_bytes(const coll_xfer *x, int steps);
/* nccl-tests bus-bandwidth factor: busbw = algbw * factor. */
double coll_busbw_factor(prog_coll op, int n);
/* Checks that a group is a valid subset of the cluster (distinct ranks within 0..gpus-1). */
bool coll_group_check(const hw_cluster *hw, const int *ranks, int n, GError **err);

#endif
