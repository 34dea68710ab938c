/* Private to collectives: the builder that algorithm files fill with phases. */
#ifndef DLSIM_COLLECTIVES_INTERNAL_H
#define DLSIM_COLLECTIVES_INTERNAL_H

#include "collectives/collectives.h"

typedef struct {
  const hw_cluster *hw;
  coll_plan *p;
  bool fold;
  int leaders;      /* multi-leader: leaders per node */
  GArray *phases;   /* coll_phase (xfers filled at finish) */
  GPtrArray *xfers; /* per phase: GArray of coll_xfer */
} coll_builder;

/* Group structure: members sorted by node. */
typedef struct {
  int nnodes;   /* nodes the group spans */
  int per_node; /* members on each node (0 when uneven) */
  int *node_start; /* index into sorted[] of each node's first member; [nnodes] = n */
  int *sorted;  /* ranks sorted by (node, local) */
} coll_layout;

void coll_layout_of(const hw_cluster *hw, const int *ranks, int n, coll_layout *out);
void coll_layout_clear(coll_layout *l);

/* A phase of `steps` folded steps with `intra` + `net` latency stages. */
coll_phase *coll_add_phase(coll_builder *b, int steps, int intra, int net, bool pipelined);
/* The stages of `n` steps that each wait on the slowest hop of the layout. */
int coll_net_if(const coll_layout *l, int n);
int coll_intra_if(const coll_layout *l, int n);
void coll_add_xfer(coll_builder *b, int src, int dst, double frac);
/* The member of a node where channel c of `channels` enters (spread evenly, so that channels
 * use different NICs). */
int coll_channel_entry(int c, int channels, int members);
/* The number of ring channels across nodes: one per NIC a node's members can use. */
int coll_channels(const hw_cluster *hw, const coll_layout *l);

void coll_build_ring(coll_builder *b);
void coll_build_chain(coll_builder *b, bool towards_root);
void coll_build_rhd(coll_builder *b);
void coll_build_hierarchical(coll_builder *b);
void coll_build_tree(coll_builder *b);
/* Channel c of `channels` up and down NCCL's two inter-node trees (half of the channel's data
 * each), between the members of parent and child nodes where the channel enters them. */
void coll_add_tree_edges(coll_builder *b, const coll_layout *l, int c, int channels);
void coll_build_nvls(coll_builder *b);
/* Seconds a single-node NVLS all-reduce of `size` bytes on `heads` GPUs spends filling NCCL's
 * chunk pipeline, its transfers taking `transfer` seconds. */
double coll_nvls_fill(int heads, double size, double transfer);
/* SHARP without NVLink SHARP runs as NCCL's CollNet Direct: its latency (NCCL's tuning model)
 * and its pipeline chunk for `size` bytes over `ops` = channels x heads. */
bool coll_is_collnet(const coll_plan *p, const hw_cluster *hw);
double coll_collnet_latency(int per_node);
double coll_collnet_chunk(double ops, double size);
void coll_build_nvls_tree(coll_builder *b);
void coll_build_sharp(coll_builder *b);
/* Byte scale of point-to-point transfers (send/recv, all-to-all) within this group. */
double coll_p2p_scale(const hw_cluster *hw, const int *ranks, int n);
/* NCCL's channels for one peer's message of `bytes` in a communicator of `nranks` inside an
 * NVSwitch node, and the wait of that message's chunk pipeline when it takes `transfer`. */
int coll_p2p_channels(int nranks, double bytes);
double coll_p2p_fill(int nranks, double bytes, double transfer);
void coll_build_alltoall(coll_builder *b, bool pairwise, const double *vbytes);
void coll_build_rd(coll_builder *b);
void coll_build_multi_leader(coll_builder *b);
/* coll_plan_new with `leaders` per node for the multi-leader all-reduce; `load`: 2 x hw_nlinks
 * zeros to count link loads in, left zero (NULL: its own; a planner building many plans keeps
 * one rather than clearing a fresh one per plan). */
coll_plan *coll_plan_build(const hw_cluster *hw, prog_coll op, const int *ranks, int n,
                           coll_algo algo, const double *vbytes, bool fold, int leaders, int *load);

/* `from` as the group whose ranks are its ranks + `shift` runs it (whole nodes apart: the same
 * transfers between members), with that group's routes; `load` as coll_plan_build's. Only for
 * plans whose members are the group's ranks (no switch endpoints). */
coll_plan *coll_plan_moved(const coll_plan *from, const hw_cluster *hw, int shift, int *load);

/* A size rule of a runtime: `algo` for messages below `below` bytes. */
typedef struct {
  coll_algo algo;
  double below;
  char *text; /* as the profile wrote it, for reports */
} coll_rule;

struct coll_runtime {
  char *name;
  bool cpu;         /* host-driven point-to-point messages (MPI, Gloo): rules, Simple wire */
  bool host_staged; /* buffers copied through host memory */
  double call_latency, step_latency, eager_limit, rendezvous_latency;
  double cycle_wait; /* half the framework's cycle: the mean wait for the next one */
  bool reduce_pass;  /* reductions end with an unhidden pass over the result chunk */
  bool nccl_a2a;     /* all-to-alls are NCCL's grouped send/recv (not DeepEP's kernels) */
  int leaders;
  GArray *rules[PROG_NCOLLS]; /* coll_rule, or NULL: NCCL's tuner */
  const char *keys[PROG_NCOLLS];
};

/* The least time NCCL's bandwidth ceilings leave `bytes` of plan `p` on protocol `proto` (0:
 * none applies): see ceiling.c. */
double coll_ceiling_time(const coll_plan *p, const hw_cluster *hw, int proto, double bytes);

void coll_schedule_eval_rt(const coll_plan *p, const hw_cluster *hw, const coll_runtime *rt,
                           int proto, double bytes, coll_schedule *out);

/* The algorithm the runtime's rules give for `op` at `bytes` that can run on the group, or
 * COLL_ALGO_AUTO (no rule: the tuner's choice); `rule` gets the rule's index. */
coll_algo coll_runtime_pick(const coll_runtime *rt, const hw_cluster *hw, prog_coll op,
                            const int *ranks, int n, double bytes, int *rule);

#endif
