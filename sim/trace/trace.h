/* trace: real PyTorch profiler (Kineto) traces in. A trace is read as a stream (plain or gzip
 * JSON, one event at a time, so memory grows with the records kept, not with the document),
 * into what the rest of dlsim needs: the GPU ops (kernels, copies, memsets) with their streams
 * and durations, the CUDA runtime calls that launched them (matched by correlation id), the CPU
 * ops around those calls (shapes, collective sizes), ProfilerStep boundaries, device
 * properties and the distributed setup. Kernels are classified by name (GEMM, convolution,
 * attention, ..., NCCL by collective, algorithm and protocol).
 *
 * A trace can be summarised per step (time by kernel class, overlap of communication and
 * computation, idle time) and turned into a program (trc_replay_build) that the engines run:
 * the CPU thread as a chain of measured intervals that launches the GPU ops, the GPU streams
 * with their kernels (measured, or re-timed on other hardware), the NCCL kernels as
 * collectives over their process group. Times inside records are microseconds of the trace's
 * clock; everything returned to callers is in seconds. */
#ifndef DLSIM_TRACE_H
#define DLSIM_TRACE_H

#include "config/config.h"
#include "engine/engine.h"
#include "hardware/hardware.h"
#include "program/program.h"

#include <glib.h>
#include <stdint.h>

/* ---- kernel classes ----------------------------------------------------------------------- */

typedef enum {
  TRC_GEMM,
  TRC_CONV,
  TRC_ATTENTION,
  TRC_ELEMENTWISE,
  TRC_REDUCTION, /* reductions, norms, softmax, sort/scan */
  TRC_EMBEDDING, /* embedding lookups and their fused backward */
  TRC_OPTIMIZER,
  TRC_MEMCPY,
  TRC_MEMSET,
  TRC_NCCL,
  TRC_OTHER,
  TRC_NCLASSES
} trc_class;

const char *trc_class_name(trc_class c);
/* The class of a GPU kernel from its name (memcpy / memset ops are classified by category). */
trc_class trc_classify(const char *kernel_name);
/* The cost model's class a trace class is re-timed as. */
cfg_kernel_class trc_class_model(trc_class c);
/* Whether kernels of the class are bound by FLOP/s (else by memory bandwidth). */
bool trc_class_compute_bound(trc_class c);
/* The data type a kernel computes in, from its name ("s1688gemm" is TF32 on tensor cores,
 * "sgemm" FP32, "h16816" FP16, "bf16..." BF16), or `fallback`. */
cfg_dtype trc_kernel_dtype(const char *kernel_name, cfg_dtype fallback);
/* A short, readable kernel name: no "void ", no parameter list, templates cut (the first
 * template argument kept for generic wrappers such as cutlass::Kernel). Newly allocated. */
char *trc_short_name(const char *kernel_name);

/* NCCL kernel names: ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv,
 * ncclDevKernel_AllGather_RING_LL, ncclDevKernel_AllReduce_Sum_f32_TREE_LL128 ... Before NCCL
 * 2.19 the name is the entry kernel's: the algorithm and protocol really used are chosen per
 * operation inside it, so treat them as a hint. */
typedef enum {
  TRC_NCCL_ALLREDUCE, TRC_NCCL_ALLGATHER, TRC_NCCL_REDUCESCATTER, TRC_NCCL_BROADCAST,
  TRC_NCCL_REDUCE, TRC_NCCL_ALLTOALL, TRC_NCCL_SENDRECV, TRC_NCCL_SEND, TRC_NCCL_RECV,
  TRC_NCCL_UNKNOWN
} trc_nccl_coll;
const char *trc_nccl_coll_name(trc_nccl_coll c);
/* The program's collective, or false for point-to-point and unknown operations. */
bool trc_nccl_coll_prog(trc_nccl_coll c, prog_coll *out);

typedef struct {
  trc_nccl_coll coll;
  char algo[16];  /* RING, TREE, NVLS, COLLNET_DIRECT ... or "" */
  char proto[8];  /* LL, LL128, SIMPLE or "" */
} trc_nccl_name;
bool trc_nccl_parse_name(const char *kernel_name, trc_nccl_name *out);

/* ---- records ------------------------------------------------------------------------------ */

typedef enum { TRC_OP_KERNEL, TRC_OP_MEMCPY, TRC_OP_MEMSET } trc_op_kind;
typedef enum { TRC_COPY_NONE, TRC_COPY_HTOD, TRC_COPY_DTOH, TRC_COPY_DTOD, TRC_COPY_OTHER } trc_copy;

/* One GPU op. */
typedef struct {
  const char *name;    /* interned in the trace */
  double ts, dur;      /* microseconds */
  int64_t correlation; /* links it to the runtime call that launched it */
  int call;            /* that call (index into calls), or -1 when the trace lacks it */
  int stream, device;
  uint8_t kind;        /* trc_op_kind */
  uint8_t kclass;      /* trc_class */
  uint8_t dtype;       /* cfg_dtype it computes in (a guess from the name and the CPU op) */
  uint8_t copy;        /* trc_copy of a memcpy */
  double bytes;        /* memcpy / memset bytes (args), or HBM bytes from the CPU op's shapes, or 0 */
  double flops;        /* from the launching CPU op's shapes (GEMMs), or 0 */
  double gemm[4];      /* batch, m, n, k of a GEMM whose shapes are known, else 0 */
  int shape_op;        /* the CPU op whose shapes gave flops / bytes, or -1 */
  /* NCCL kernels */
  uint8_t coll;        /* trc_nccl_coll */
  int group_size;      /* ranks of the process group, or 0 when unknown */
  double comm_bytes;   /* nccl-tests size of the collective, or 0 when unknown */
} trc_gpu_op;

/* One CUDA runtime (or driver) call on a CPU thread. */
typedef struct {
  const char *name;
  double ts, dur;
  int64_t tid, correlation;
  int cpu_op;          /* innermost CPU op around it on its thread, or -1 */
} trc_call;

/* One CPU op (aten op, record_function, user annotation), with what its shapes tell. */
typedef struct {
  const char *name;
  double ts, dur;
  int64_t tid;
  int parent;          /* enclosing CPU op on the same thread, or -1 */
  double in_bytes;     /* bytes of its tensor inputs (0 when the trace has no shapes) */
  double out_bytes;    /* estimated output: the largest input */
  double gemm[4];      /* batch, m, n, k for matrix products, else 0 */
  int8_t dtype;        /* cfg_dtype of the first tensor input, or -1 */
  /* collectives (nccl:* and c10d::* ops, record_param_comms) */
  uint8_t coll;        /* trc_nccl_coll, TRC_NCCL_UNKNOWN if none */
  double coll_in, coll_out; /* elements in and out, 0 when unknown */
  double elem_size;    /* bytes per element of the collective's data */
  int group_size;
} trc_cpu_op;

typedef struct {
  int number;   /* N of ProfilerStep#N */
  double ts, dur;
} trc_step;

typedef struct {
  char *path;
  /* device */
  char *gpu_name;       /* deviceProperties name of the GPU the ops ran on, or NULL */
  int num_sms, cc_major, cc_minor;
  double gpu_memory;    /* bytes, 0 when unknown */
  int device;           /* CUDA device of the GPU ops */
  /* distributed */
  int rank, world_size; /* -1 / 0 when unknown */
  char *backend, *nccl_version;
  int pg_size;          /* size of the default process group from pg_config, or 0 */
  /* records, sorted by ts */
  GArray *ops;          /* trc_gpu_op */
  GArray *calls;        /* trc_call */
  GArray *cpu_ops;      /* trc_cpu_op */
  GArray *steps;        /* trc_step */
  GStringChunk *strings;
  guint64 events;       /* events read */
  guint64 bytes_read;   /* JSON bytes (after decompression) */
  int nstreams;         /* distinct GPU streams */
} trc_trace;

/* Reads a Kineto trace (.json or .json.gz). Bad or truncated input is a CFG_ERROR_INPUT that
 * names the file, the line and column, and what was expected. */
trc_trace *trc_load(const char *path, GError **err);
/* The same from text in memory (tests); `origin` names it in errors. */
trc_trace *trc_load_text(const char *text, gsize len, const char *origin, GError **err);
void trc_free(trc_trace *t);

/* Steps whose number is within [first, last] (-1: unbounded): indices into t->steps. Returns
 * the count; *from is the first index. Fails (CFG_ERROR_INPUT) when none is in range. */
bool trc_step_range(const trc_trace *t, int first, int last, guint *from, guint *count,
                    GError **err);
/* Parses "A-B", "A-", "-B" or "A" (ProfilerStep numbers) for --steps. */
bool trc_parse_steps(const char *text, int *first, int *last, GError **err);

/* ---- summary ------------------------------------------------------------------------------ */

typedef struct {
  char name[32];
  double start, duration;      /* seconds; start relative to the first step */
  double compute, comm, exposed_comm, overlap, idle, memcpy;
  double by_class[TRC_NCLASSES];
} trc_step_summary;

typedef struct {
  const char *name;  /* the kernel's full name (owned by the trace) */
  trc_class kclass;
  guint count;
  double total;      /* seconds */
} trc_kernel_stat;

typedef struct {
  trc_nccl_coll coll;    /* what ran (args or CPU op), else what the name says */
  trc_nccl_name name;    /* what the kernel's name says */
  guint count;
  double total;          /* seconds */
} trc_nccl_stat;

typedef struct {
  GArray *steps;           /* trc_step_summary: ProfilerSteps, or one span of the whole trace */
  GArray *nccl;            /* trc_nccl_stat per collective, algorithm and protocol */
  bool profiler_steps;     /* false: the trace has no ProfilerStep, the one step is its GPU span */
  double by_class[TRC_NCLASSES]; /* seconds over the whole trace */
  GArray *kernels;         /* trc_kernel_stat over the whole trace, longest total first */
  guint counts[TRC_NCLASSES];
  guint nccl_counts[TRC_NCCL_UNKNOWN + 1];
} trc_summary;

void trc_summarize(const trc_trace *t, trc_summary *out);
void trc_summary_clear(trc_summary *s);

/* ---- replay ------------------------------------------------------------------------------- */

typedef struct {
  int first_step, last_step; /* ProfilerStep numbers to replay, -1: all */
  int nranks;                /* ranks of the program, 0: the trace's world size (1 if unknown) */
  bool comm_measured;        /* NCCL kernels at their measured duration (not the collective model) */
  bool host_only;            /* every GPU op takes no time: what the CPU side alone allows */
  const hw_cluster *base;    /* the hardware the trace ran on */
  const hw_cluster *target;  /* the hardware to predict on; NULL: as measured (no re-timing) */
} trc_replay_options;

typedef struct {
  prog_program *program;
  int nsteps;
  double *measured;        /* per step, seconds (the ProfilerStep durations of the first trace) */
  int *numbers;            /* ProfilerStep numbers */
  char **markers;          /* the CPU marker ops: step k starts at 2k, ends at 2k + 1 */
  /* what went in */
  guint cpu_ops, gpu_ops, collectives, fixed_comm, delays, cross_deps, sync_deps, dropped_deps;
  guint retimed;           /* GPU ops re-timed for the target hardware */
  int streams_merged;      /* trace streams that had to share a program stream */
} trc_replay;

/* Turns traces (one per rank, ranks from their distributedInfo; ranks without a trace repeat
 * the first one) into a program. */
bool trc_replay_build(trc_trace *const *traces, int ntraces, const trc_replay_options *o,
                      trc_replay *out, GError **err);
void trc_replay_clear(trc_replay *r);
/* Each step's predicted duration (seconds), from the times the engine ran the step markers of
 * the first trace's rank (run it with eng_options.trace). */
bool trc_replay_step_times(const trc_replay *r, const eng_result *res, double *out, GError **err);

#endif
