/* calibration: real measurements in, model parameters out. Reads nccl-tests style tables,
 * predicts them with the collectives model, reports the error per size, and fits the NCCL
 * parameters (link efficiencies, protocol latencies, pipeline chunks) to a table. */
#ifndef DLSIM_CALIBRATION_H
#define DLSIM_CALIBRATION_H

#include "config/config.h"
#include "engine/engine.h"
#include "trace/trace.h"

typedef struct {
  double size;      /* bytes, nccl-tests convention; FLOPs of a GEMM table */
  double time;      /* seconds */
  double gemm[4];   /* a GEMM table's batch, M, N, K */
} calib_point;

/* osu_bw and osu_bibw post 64 messages back to back, then wait for all of them and for one
 * acknowledgement (OMB's default window_size, -W): the bandwidth they print is that of a
 * stream, not of one message (coll_schedule_streamed). */
#define CALIB_OMB_WINDOW 64

typedef struct {
  char *path;
  GArray *points; /* calib_point, in file order */
  bool omb;       /* read from OSU Micro-Benchmarks output (see calib_table_model_sizes) */
  int window;     /* messages a bandwidth test keeps in flight (osu_bw: 64), else 0 */
} calib_table;

typedef struct {
  const char *size_column; /* default size_bytes */
  const char *time_column; /* default oop_time_us */
  double time_scale;       /* seconds per unit of the time column (default 1e-6) */
  char *const *filters;    /* "column=value" rows must match, or NULL */
  bool gemm;               /* a GEMM table: columns batch, m, n, k instead of a size */
} calib_columns;

bool calib_table_load(const char *path, const calib_columns *cols, calib_table *out, GError **err);
void calib_table_clear(calib_table *t);
/* OMB's allgather and alltoall sizes are what one rank sends to one other (allgather: its
 * share); the model's, as nccl-tests', are a rank's whole buffer, `group` times as large. Scales
 * the sizes of an OMB table of `op` to the model's; any other table is left as it is. */
void calib_table_model_sizes(calib_table *t, prog_coll op, int group);

/* What the table measured: `op` over the first `gpus` GPUs in groups of `group`. */
typedef struct {
  prog_coll op;
  int gpus, group;
  eng_kind engine;
  coll_algo algo;
  int proto;
  const coll_runtime *runtime; /* NULL: NCCL */
} calib_target;

/* Seconds per unit of a time column: "s", "ms", "us" or "ns". */
bool calib_time_unit(const char *unit, double *out, GError **err);

/* Predicted time of every point of the table. */
bool calib_predict(const cfg_cluster *c, const calib_target *t, const calib_table *tab,
                   double *out, GError **err);

typedef struct {
  /* |relative error| of busbw (= measured time / predicted time - 1) */
  double median_large, worst_large; /* sizes >= 1 MiB */
  double median_small, worst_small; /* sizes < 64 KiB */
  double median_all;
  /* signed busbw error (predicted busbw / measured - 1: > 0 predicted too fast), median over
   * sizes >= 1 MiB: what a category's mean signed error averages */
  double signed_large;
  int n_large, n_small, n;
} calib_errors;

void calib_errors_of(const calib_table *tab, const double *predicted, calib_errors *out);

/* ---- the parameter search every fit shares (validation's case fits too) ----------------- */

/* One model parameter a fit may move. It is searched in a space where it is free (the logit of
 * a fraction, the log of anything else) and held near its starting value by a penalty on its
 * log ratio, so that a fit moves it only as far as the data asks. */
typedef struct {
  double *slot;
  bool fraction;  /* logit transform, else log */
  double lo, hi;  /* physical bounds */
  double prior;   /* the starting value */
  char name[48];
} calib_param;

#define CALIB_MAX_PARAMS 16

typedef struct {
  calib_param params[CALIB_MAX_PARAMS];
  int nparams;
  double prior_weight;       /* penalty per squared log ratio to the prior */
  double (*loss)(void *ctx); /* the error with the parameters as they are in their slots */
  void *ctx;
  int evals;
} calib_search;

void calib_search_add(calib_search *s, double *slot, bool fraction, double lo, double hi,
                      const char *name);
/* Multi-start Nelder-Mead from the current values; leaves the best values in the slots and
 * returns the best objective. */
double calib_search_run(calib_search *s, int starts, int evals_per_start, int polish_evals);


typedef struct {
  int nparams;         /* parameters the table constrains */
  char names[16][48];
  calib_errors before, after;
  int evaluations;
} calib_fit_report;

/* Fits c->nccl to the table (in place). `fit` lists the parameter names (or prefixes, such as
 * "hop_latency") that may move; NULL means the latencies only, the efficiencies and chunks
 * staying at their documented values. */
bool calib_fit_nccl(cfg_cluster *c, const calib_target *t, const calib_table *tab,
                    char *const *fit, calib_fit_report *rep, GError **err);
/* Writes the cluster's GPU efficiencies and NCCL parameters as a calibration file
 * (`gpu.calibration` can point at it); `fitted` names the keys the fit moved. */
bool calib_write(const char *path, const cfg_cluster *c, const char *notes, char *const *fitted,
                 GError **err);

/* ---- GEMM tables (columns batch, m, n, k and a time) ---- */

typedef struct {
  double median, p90, worst; /* |predicted / measured - 1| */
  double signed_median;      /* predicted / measured - 1: > 0 predicted too slow */
  int n;
} calib_time_errors_t;

void calib_gemm_predict(const cfg_cluster *c, cfg_dtype dtype, const calib_table *tab, double *out);
void calib_time_errors(const calib_table *tab, const double *predicted, calib_time_errors_t *e);

typedef struct {
  calib_time_errors_t before, after;
  int evaluations;
} calib_gemm_report;

/* Fits gpu.efficiency's flops.gemm, gemm_k_half and launch_overhead to the table (in place). */
void calib_fit_gemm(cfg_cluster *c, cfg_dtype dtype, const calib_table *tab, calib_gemm_report *rep);

/* ---- real kernel traces (PyTorch profiler / Kineto) ---- */

/* The line t = latency + size * per_byte below every point (size_i, time_i), latency >= 0 and
 * per_byte >= 0, that is highest at the mean size: the edge of the points' lower convex hull
 * over the mean. An NCCL kernel's duration is its transfer plus the time it waited for its
 * slowest peer, never less than the transfer: the envelope is the transfer. With a single
 * distinct size, per_byte is 0 and latency the fastest time. Returns false when n is 0. */
bool calib_lower_envelope(const double *size, const double *time, int n, double *latency,
                          double *per_byte);

typedef struct {
  prog_coll op;
  int group;            /* ranks of the process group */
  int points, sizes;    /* kernels, distinct sizes */
  double min_size, max_size;
  double latency;       /* envelope, seconds */
  double bandwidth;     /* envelope algorithm bandwidth, bytes/s (0: one size only) */
  double waiting;       /* median of measured / envelope - 1: time spent waiting for peers */
  double before, after; /* median |model / envelope - 1| over the envelope's sizes */
} calib_envelope;

#define CALIB_MAX_ENVELOPES 16
/* Fewer GEMM ops of known shape than this leave the GEMM model as it was: two parameters,
 * shapes of one model, and the long GEMMs often inside CUDA graphs whose shapes are unknown. */
#define CALIB_TRACE_MIN_GEMMS 20
/* ... and fewer kernels than this leave the fixed cost per kernel as it was. */
#define CALIB_TRACE_MIN_KERNELS 20
/* A collective seen fewer times than this gets no envelope: the fastest of one or two kernels
 * that all waited for a peer says little about the transfer. */
#define CALIB_TRACE_MIN_COLLECTIVES 3

typedef struct {
  int nenvelopes;
  calib_envelope env[CALIB_MAX_ENVELOPES];
  int skipped_kinds;    /* collectives (op, group) seen too few times for an envelope */
  int nccl_params;
  char nccl_names[CALIB_MAX_PARAMS][48];
  int evaluations;
  /* kernels */
  int kernels;                 /* compute kernels in the window */
  double kernel_floor;         /* seconds: 10th percentile of kernel durations */
  double launch_gap;           /* seconds: median gap between back-to-back queued kernels */
  int memory_points;           /* streaming kernels of known bytes (>= 1 MiB) */
  double memory_efficiency;    /* their fraction of HBM bandwidth (median, weighted by time) */
  int gemm_points;             /* GEMM ops of known shape */
  cfg_dtype gemm_dtype;
  double gemm_before, gemm_after; /* mean |log(model / measured)|, weighted by time */
  char *fitted[2 * CALIB_MAX_PARAMS + 1]; /* keys for calib_write, NULL-terminated */
} calib_trace_report;

/* Fits what the cost models need from real traces (ProfilerSteps first..last, -1 unbounded):
 * the fixed cost per kernel (launch_overhead), the HBM efficiency of streaming kernels, the
 * GEMM model where shapes were recorded, and the NCCL parameters to the lower envelopes of
 * the collectives. `c` is changed in place; it must have the GPUs of the traces' world. */
bool calib_fit_trace(cfg_cluster *c, trc_trace *const *traces, int ntraces, int first_step,
                     int last_step, calib_trace_report *rep, GError **err);
void calib_trace_report_clear(calib_trace_report *rep);
/* Per kernel name: class, count, median and fastest time, and what it achieved where its
 * FLOPs or bytes are known (CSV). */
bool calib_trace_kernels_csv(const char *path, trc_trace *const *traces, int ntraces,
                             const cfg_cluster *c, GError **err);

#endif
