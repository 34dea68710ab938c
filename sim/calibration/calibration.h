/* calibration: real measurements in, model parameters out. Reads nccl-tests style tables,
 * predicts them with the collectives model, reports the error per size, and fits the NCCL
 * parameters (link efficiencies, protocol latencies, pipeline chunks) to a table. */
#ifndef DLSIM_CALIBRATION_H
#define DLSIM_CALIBRATION_H

#include "config/config.h"
#include "engine/engine.h"

typedef struct {
  double size;      /* bytes, nccl-tests convention; FLOPs of a GEMM table */
  double time;      /* seconds */
  double gemm[4];   /* a GEMM table's batch, M, N, K */
} calib_point;

typedef struct {
  char *path;
  GArray *points; /* calib_point, in file order */
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

/* What the table measured: `op` over the first `gpus` GPUs in groups of `group`. */
typedef struct {
  prog_coll op;
  int gpus, group;
  eng_kind engine;
  coll_algo algo;
  int proto;
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
  int n_large, n_small, n;
} calib_errors;

void calib_errors_of(const calib_table *tab, const double *predicted, calib_errors *out);

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

#endif
