/* program: what every simulated GPU does in one training step (or one serving iteration), as a
 * DAG of ops: compute kernels, communication (collectives over process groups) and memory
 * events. Workloads produce programs, traces are converted into them, engines run them.
 *
 * Ranks that do exactly the same thing share one op list (a "class"): a data-parallel job has
 * one class, a pipeline has one per stage. Ops on the same stream of a rank run in list order;
 * `deps` add edges across streams. A comm op names a group family ("dp", "tp", "pp-next"...);
 * each rank's group in that family is a concrete list of ranks. */
#ifndef DLSIM_PROGRAM_H
#define DLSIM_PROGRAM_H

#include "config/config.h"

#include <glib.h>
#include <stdint.h>

typedef enum { PROG_COMPUTE, PROG_COMM, PROG_MEM } prog_kind;

/* Streams of one GPU: kernels on different streams may overlap in time. */
typedef enum {
  PROG_STREAM_COMPUTE,
  PROG_STREAM_DP,
  PROG_STREAM_TP,
  PROG_STREAM_PP,      /* pipeline sends */
  PROG_STREAM_EP,
  PROG_STREAM_PP_RECV, /* pipeline receives, posted ahead as Megatron does */
  PROG_STREAM_CP,
  PROG_STREAM_PP_REV,      /* DualPipe's second direction: its sends and receives run beside */
  PROG_STREAM_PP_REV_RECV, /* the first's (NCCL groups them per peer and direction) */
  PROG_NSTREAMS
} prog_stream;

typedef enum {
  PROG_COLL_ALLREDUCE,
  PROG_COLL_ALLGATHER,
  PROG_COLL_REDUCESCATTER,
  PROG_COLL_ALLTOALL,
  PROG_COLL_BROADCAST,
  PROG_COLL_REDUCE,
  PROG_COLL_SENDRECV, /* group of 2: ranks[0] sends `bytes` to ranks[1] */
  PROG_NCOLLS
} prog_coll;
const char *prog_coll_name(prog_coll op);
bool prog_coll_parse(const char *name, prog_coll *out, GError **err);

/* Which parallel dimension a communication belongs to, for reports. */
typedef enum { PROG_DIM_TP, PROG_DIM_CP, PROG_DIM_PP, PROG_DIM_DP, PROG_DIM_EP, PROG_NDIMS } prog_dim;
const char *prog_dim_name(prog_dim d);

typedef enum {
  PROG_MEM_PARAMS,
  PROG_MEM_GRADS,
  PROG_MEM_OPTIMIZER,
  PROG_MEM_ACTIVATIONS,
  PROG_MEM_KV_CACHE,
  PROG_MEM_BUFFERS,
  PROG_MEM_OTHER,
  PROG_NMEMTAGS
} prog_mem_tag;
const char *prog_mem_tag_name(prog_mem_tag t);

/* Copied and walked tens of thousands of times per configuration: the enums are stored in a
 * byte each and the fields ordered to leave no padding (144 bytes were 112). */
typedef struct {
  const char *name;   /* owned by the program */
  /* compute */
  double flops, bytes;
  double inner;       /* a GEMM's reduction dimension K, or 0 when unknown */
  double rows, cols;  /* a GEMM's output M x N, or 0 when unknown */
  double fixed_time;  /* >= 0: a measured duration (trace replay) used instead of the model */
  union {             /* an op is one kind or the other */
    double comm_bytes;/* comm: nccl-tests "size", the buffer of the collective */
    double mem_delta; /* memory: bytes, + alloc / - free */
  };
  cfg_attn_shape attn;/* a fused attention kernel's shape (keys 0: none) */
  uint32_t count;     /* identical back-to-back repetitions folded into one op */
  int tmpl;           /* >= 0: a macro op that runs template class `tmpl` `count` times */
  int16_t family;     /* comm (prog_family_add keeps them fewer than 2^15) */
  /* dependencies on earlier ops of the same class (other streams) */
  uint32_t dep_start, ndeps;
  uint8_t kind;       /* prog_kind */
  uint8_t stream;     /* prog_stream */
  uint8_t recompute;  /* compute that only exists because of activation recomputation */
  uint8_t hostless;   /* launched from C++ inside another op (a deterministic fill): no host time */
  uint8_t on_chain;   /* a data-parallel collective on the synchronous chain: issued only when
                       * the previous run's chain is done, not prefetched under it */
  uint8_t kclass;     /* cfg_kernel_class (compute) */
  uint8_t dtype;      /* cfg_dtype (compute) */
  uint8_t coll;       /* prog_coll (comm) */
  uint8_t dim;        /* prog_dim (comm) */
  uint8_t tag;        /* prog_mem_tag (memory) */
  uint8_t split_rows, split_cols; /* a GEMM run in pieces (hw_kernel's; 0: whole) */
  uint8_t sms_held;   /* SMs a communication kernel beside a GEMM holds (hw_kernel's) */
  uint8_t host_ops;   /* comm: the host's calls that issue it from eager Python, each
                       * 1 / PROG_HOST_OPS_PER_KERNEL of a modelled kernel's host time; 0: none */
} prog_op;

/* The unit of host_ops: Transformer Engine's FlashAttention call without context parallelism
 * is 14 calls from Python into PyTorch, c10d or flash-attn (validation/megatron_ci/
 * te_cp_ring_ops.csv, its `anchor` rows) and one modelled kernel of training.host_dispatch. */
#define PROG_HOST_OPS_PER_KERNEL 14.0

typedef struct {
  char *name;
  GArray *ops;  /* prog_op */
  GArray *deps; /* uint32_t op indices */
  int nranks;   /* ranks in this class */
  int rep;      /* lowest rank of the class: the one the analytic engine follows */
  int stage;    /* pipeline stage the class runs */
  double base_memory; /* bytes held before the first op (context, buffers...) */
  bool is_template;   /* a sub-DAG macro ops run, not the program of any rank */
  double flops;       /* a template's FLOPs, summed over its first `flops_ops` ops */
  guint flops_ops;
  /* what `ops` and `deps` were last grown to (GLib keeps it): the builders add ops within it
   * without a call into GLib per op */
  guint ops_room, deps_room;
} prog_class;

typedef struct {
  int n;
  int *ranks;
} prog_group;

/* A shared group of at most two ranks, in the chain of groups that start with the same rank. */
typedef struct {
  int group;
  int next; /* next entry of the chain, or -1 */
} prog_small_link;

#define PROG_RECENT_NAMES 512

typedef struct {
  char *name;
  prog_dim dim;
  int *group_of; /* per rank: group index, or -1 */
} prog_family;

/* What a step achieves, for throughput and MFU. */
typedef struct {
  double samples;        /* per step, all replicas */
  double tokens;         /* per step, all replicas */
  double model_flops;    /* per step, all GPUs, without recomputation (MFU) */
  double hardware_flops; /* per step, all GPUs, with recomputation (HFU) */
  cfg_dtype dtype;       /* whose peak MFU is measured against */
  char *description;     /* "resnet50, DP 2" */
  /* mixture of experts (a2a_bytes 0: none) */
  double a2a_bytes;      /* per GPU per step, the busiest stage: bytes its all-to-alls send */
  double moe_load;       /* the busiest expert-parallel rank's work over the mean */
  double moe_dropped;    /* fraction of token copies dropped at expert capacity */
} prog_meta;

typedef struct {
  int nranks;
  int *class_of;      /* per rank */
  GPtrArray *classes; /* prog_class* */
  GPtrArray *groups;  /* prog_group* */
  GPtrArray *families;/* prog_family* */
  GHashTable *group_index; /* rank list -> group id, to share identical groups */
  int *small_head;    /* per rank: first entry of the store's shared groups of one or two
                       * ranks (prog_small_link, chained by rank) starting with it, or -1 */
  GStringChunk *strings; /* the ops' names: string_store's chunk */
  struct prog_string_store *string_store; /* shared with the programs prog_new_deriving made */
  /* owns groups, families, group_index and the small groups: shared with the programs made
   * by prog_new_sharing_groups, freed with the last of them */
  struct prog_group_store *store;
  /* the names last interned, by the address they came from: builders pass the same few names
   * (literals, or names already interned) for every micro-batch */
  struct {
    const char *from, *name;
  } recent_names[PROG_RECENT_NAMES];
  prog_meta meta;
} prog_program;

prog_program *prog_new(int nranks);
/* A program with `like`'s ranks, classes of ranks, process groups and families, shared rather
 * than built again (the fold builds one step at two micro-batch counts: the same groups). Their
 * groups and families are then fixed: neither program may add any. Classes are its own to add
 * (prog_finalize once they are). */
prog_program *prog_new_sharing_groups(const prog_program *like);
/* The same, sharing `like`'s names too, for a program whose ops are copied from `like`'s
 * (prog_class_copy, prog_ops_append). */
prog_program *prog_new_deriving(const prog_program *like);
void prog_free(prog_program *p);

int prog_class_add(prog_program *p, const char *name);
/* Room for `nops` ops and `ndeps` dependencies in class `cls` (a builder that knows about how
 * many it will add spares the arrays' growth). */
void prog_class_reserve(prog_program *p, int cls, guint nops, guint ndeps);
/* Appends ops first..first + n - 1 of class `from_cls` of `from` (a program sharing p's names:
 * prog_new_deriving) to class `cls`, each dependency moved by as many ops as the range moved:
 * the caller makes sure that is where the dependencies of the copies are. */
void prog_ops_append(prog_program *p, int cls, const prog_program *from, int from_cls,
                     guint first, guint n);
/* Adds a copy of class `cls` of `from` (sharing p's names), all its ops; returns its index. */
int prog_class_copy(prog_program *p, const prog_program *from, int cls);
/* A program with p's groups and templates (copied, under the same class ids) and its other
 * classes empty: what prog_groups_same and prog_templates_same compare, kept without the ops
 * of p's ranks. */
prog_program *prog_templates_of(const prog_program *p);
/* A template: a sub-DAG (say one transformer block and its tensor-parallel collectives) that
 * macro ops run as a whole; its comm ops use the groups of the rank that runs the macro. */
int prog_template_add(prog_program *p, const char *name);
void prog_rank_set_class(prog_program *p, int rank, int cls);
/* Call once all ranks have a class: counts ranks and picks representatives. */
void prog_finalize(prog_program *p);

int prog_family_add(prog_program *p, const char *name, prog_dim dim);
/* The family named `name`, or -1. */
int prog_family_find(const prog_program *p, const char *name);
/* Registers (or finds) the group with these ranks, in this order. */
int prog_group_add(prog_program *p, const int *ranks, int n);
/* Registers the group of these two ranks, which the caller knows is not registered yet (a
 * pipeline pair met for the first time): prog_group_add without its search for it, under the
 * id that would have given it; prog_group_add finds it afterwards. */
int prog_pair_add_new(prog_program *p, const int pair[2]);
/* A new group with these ranks, never shared: its collectives match among themselves only (a
 * second channel between two ranks, whose order may differ from the first's). */
int prog_group_add_private(prog_program *p, const int *ranks, int n);
void prog_family_set(prog_program *p, int family, int rank, int group);
/* The family's group per rank (prog_family.group_of), for a builder that sets every rank's:
 * a call per rank was a twentieth of making the groups. */
int *prog_family_groups(prog_program *p, int family);
/* Whether both programs have the same groups under the same ids (their collectives' plans,
 * cached by group id, are then the same). */
bool prog_groups_same(const prog_program *a, const prog_program *b);
/* Whether both programs have the same templates under the same class ids, op by op (their
 * times, cached by template and class, are then the same). */
bool prog_templates_same(const prog_program *a, const prog_program *b);
const prog_group *prog_group_of(const prog_program *p, int family, int rank);

/* Op builders; `deps` may be NULL when ndeps is 0. They return the op's index in its class. */
uint32_t prog_compute(prog_program *p, int cls, const char *name, cfg_kernel_class kclass,
                      cfg_dtype dtype, double flops, double bytes, const uint32_t *deps,
                      uint32_t ndeps);
uint32_t prog_comm(prog_program *p, int cls, prog_stream stream, const char *name, prog_coll coll,
                   int family, double bytes, const uint32_t *deps, uint32_t ndeps);
uint32_t prog_mem(prog_program *p, int cls, const char *name, prog_mem_tag tag, double delta,
                  const uint32_t *deps, uint32_t ndeps);
/* Runs template `tmpl` `count` times back to back as one op of class `cls`. */
uint32_t prog_macro(prog_program *p, int cls, const char *name, int tmpl, uint32_t count,
                    const uint32_t *deps, uint32_t ndeps);
static inline prog_class *prog_class_at(const prog_program *p, int cls)
{
  return g_ptr_array_index(p->classes, cls);
}
/* Inline: the engines call these for every op they walk (a call each was 3 % of an analytic
 * configuration). */
static inline prog_op *prog_op_at(const prog_program *p, int cls, uint32_t idx)
{
  return &g_array_index(prog_class_at(p, cls)->ops, prog_op, idx);
}
static inline const uint32_t *prog_op_deps(const prog_program *p, int cls, const prog_op *op)
{
  return &g_array_index(prog_class_at(p, cls)->deps, uint32_t, op->dep_start);
}

#endif
