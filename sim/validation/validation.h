/* validation: predicted against measured for the real cases in validation/cases/.
 *
 * A case names a command (run, memory, memory-states, deepspeed, moe, serve, serve-max-rate,
 * replay), a cluster and a workload with overrides, a metric (a key of that command's --json
 * output: what a user's script reads) and the measured value with its source; or a table of
 * collective or GEMM times. This module loads cases, predicts them in-process, compares,
 * pins the current errors so that a model change that makes any case worse is seen, and fits
 * cluster parameters to cases (dlsim calibrate --case). The CLI only parses and prints. */
#ifndef DLSIM_VALIDATION_H
#define DLSIM_VALIDATION_H

#include "calibration/calibration.h"
#include "config/config.h"

#include <glib.h>

typedef struct {
  cfg_case c;
  double predicted, error; /* error: predicted / measured - 1 (tables: the median |error|) */
  bool pass;               /* |error| within the case's tolerance */
  char *failure;           /* the prediction could not be made, and why */
  const char *run_kind;    /* a run case's interval kind (unc_run_kind), else NULL */
  /* table cases */
  calib_table table;
  double *times;
  calib_errors errors;
  calib_time_errors_t gemm_errors;
} val_row;

/* The case files named (names of validation/cases/ or paths; NULL-terminated), or every case
 * of validation/cases/ in name order when `names` is NULL or empty. */
GPtrArray *val_case_files(char *const *names, GError **err);
/* Loads and predicts every case (on `threads` threads: the DES and trace replays run on the
 * calling thread, after the rest). Input errors in a case file are returned; a case whose
 * prediction fails is a row with its `failure`. */
bool val_run_files(GPtrArray *files, int threads, GArray **rows, GError **err);
/* val_run_files in two steps, the second on a share of the rows (MPI ranks): loads every case
 * (input errors returned), then predicts the rows whose index is `shard` modulo `nshards`. */
bool val_load_files(GPtrArray *files, GArray **rows, GError **err);
void val_run_rows(GArray *rows, int threads, int shard, int nshards);
void val_rows_free(GArray *rows);
/* Leave-one-source-out: every fit case is predicted with its `unfit` overrides, as if its source
 * had not been fitted on (what the model says of a source it never saw). A fit case without
 * `unfit` is an input error. */
bool val_rows_leave_out_fits(GArray *rows, GError **err);

/* The case's metric as dlsim predicts it, with `extra` overrides after the case's own (a
 * ratio_to case: the ratio); a run case's interval kind in *run_kind when not NULL (else
 * left alone). Not for table cases. */
bool val_predict(const cfg_case *c, char *const *extra, double *out, const char **run_kind,
                 GError **err);
/* Predicts one case into its row and compares. */
void val_run_case(val_row *row);

bool val_is_gemm(const cfg_case *c);
const char *val_role_name(cfg_case_role r);
/* "time median", "busbw median >=1MiB", "METRIC ratio" or the metric: what the error is of. */
char *val_metric_label(const cfg_case *c);

/* What kind of prediction a case checks, for summaries: training, memory, serving, moe,
 * collectives, kernels, traces. */
const char *val_category(const cfg_case *c);
/* How much better than measured a predicted row says things are: > 0 for a step too fast, a
 * rate too high or memory too small (a table: its median row). */
double val_optimism(const val_row *r);

typedef struct {
  const char *category;
  int cases, within, failed; /* failed: no prediction */
  double median_abs;  /* of the errors, checks and fits alike (a table: its median |error|) */
  double mean_signed; /* mean optimism: > 0 when predictions promise more than was measured
                       * (faster, higher rates, less memory); a table counts its median row */
} val_summary;
/* One entry per category, in a fixed order, for the categories present. */
GArray *val_summarize(const GArray *rows);

/* ---- pins: the accuracy regression guard ------------------------------------------------- */

/* Every case's |error| in percent as of the last accepted model change (validation/pins.tsv).
 * A case may grow at most VAL_PIN_SLACK points beyond its pin; improving a case updates its
 * pin in the same commit (dlsim validate --update-pins). */
#define VAL_PIN_SLACK 1.0

typedef struct {
  char *name;
  double abs_error_pct; /* NAN: the case failed to predict when pinned */
} val_pin;

bool val_pins_load(const char *path, GHashTable **pins, GError **err); /* name -> val_pin */
/* Appends one line per violation to `report` ("case X: |error| 12.30 % > pin 10.00 % + 1"); a
 * case with no pin is a violation too, and so, when `rows` are all the cases (`complete`), is
 * a pinned case that is gone. */
bool val_pins_check(const GArray *rows, GHashTable *pins, bool complete, GString *report);
bool val_pins_write(const char *path, const GArray *rows, GError **err);
/* validation/pins.tsv under the data directory. */
char *val_pins_path(void);

/* The interval bands (uncertainty/) fitted on the check cases of `rows`, per kind of
 * prediction, written to `path` (validation/intervals.tsv: val_intervals_path). */
bool val_intervals_write(const char *path, const GArray *rows, GError **err);
char *val_intervals_path(void);
/* The kind of band a case's error feeds (training, fsdp, serve.ttft, ...), or NULL: a check
 * case of a kind's metric that ran. */
const char *val_interval_kind(const val_row *r);

/* ---- fitting cluster parameters to cases (dlsim calibrate --case) ------------------------ */

typedef struct {
  GPtrArray *cases;   /* cfg_case*, each with one positive measured number, one cluster */
  char **sets;        /* overrides applied to every case before the parameters */
  char **keys;        /* the parameters: numbers of the cluster (gpu.efficiency.*, nccl.*) */
  double *values;     /* their current values */
  int nkeys;
  /* per case, loaded once: the cluster whose parameters the fit sets, and the workload */
  GPtrArray *clusters, *workloads;
  GError *error;      /* the first prediction that failed */
} val_fit;

/* Loads the cases and parses KEY=START parameters. */
bool val_fit_init(val_fit *f, char *const *cases, char *const *params, char *const *sets,
                  GError **err);
/* Mean |log(predicted / measured)| over the cases with the parameters at `values`. */
double val_fit_loss(val_fit *f);
/* The case's prediction with the current parameters (NAN if it fails). */
double val_fit_predict(val_fit *f, guint i);
/* Searches the parameters (a light prior keeps flat directions from wandering). */
bool val_fit_run(val_fit *f, GError **err);
/* The first case's cluster with the fitted parameters, as a calibration file. */
bool val_fit_write(const val_fit *f, const char *output, GError **err);
void val_fit_clear(val_fit *f);

#endif
