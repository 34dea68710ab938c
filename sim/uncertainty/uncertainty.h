/* uncertainty: 80 % intervals around a prediction, from the errors dlsim made on real
 * measurements of the same kind. `dlsim validate --update-pins` writes, per kind of prediction,
 * the band of predicted time / measured time over the check cases that holds a new case of the
 * same spread at least 80 % of the time (validation/intervals.tsv); a prediction of that kind
 * then brackets the truth with it. */
#ifndef DLSIM_UNCERTAINTY_H
#define DLSIM_UNCERTAINTY_H

#include "config/config.h"

#include <glib.h>
#include <stdbool.h>

/* Whether a figure is a time (the truth is predicted / ratio) or a rate (predicted x ratio). */
typedef enum { UNC_TIME, UNC_RATE } unc_sense;

typedef struct {
  char *kind;        /* training, training.small, fsdp, serve.ttft, serve.tbt, serve.throughput */
  int cases;         /* check cases behind it */
  double low, high;  /* conformal 80 % band of predicted time / measured time */
  double cv_coverage;/* how often a 5-fold cross-validated band held the measurement */
} unc_band;

typedef struct unc_table unc_table;

/* The bands of `path` (NULL: the data directory's validation/intervals.tsv). A missing file is
 * an empty table, not an error: predictions then carry no interval. */
unc_table *unc_table_load(const char *path, GError **err);
void unc_table_free(unc_table *t);
/* The band of a kind, or NULL when none was measured. */
const unc_band *unc_band_of(const unc_table *t, const char *kind);

/* The interval [out[0], out[1]] that holds the true value of `predicted` as often as the
 * band's cases did (80 % of them). */
void unc_interval(const unc_band *b, double predicted, unc_sense sense, double out[2]);

/* A band from the time ratios (predicted / measured) of `n` check cases; fewer than 5 cases
 * make no band (cases 0). */
unc_band unc_band_fit(const char *kind, const double *ratios, int n);
/* Writes bands as validation/intervals.tsv does. */
bool unc_table_write(const char *path, const unc_band *bands, int n, GError **err);
void unc_band_clear(unc_band *b);

/* Runs on fewer GPUs than this (one to a few nodes: Megatron-LM's CI runs, single-node
 * benchmarks) err differently from the large published runs: launch, host and small-collective
 * costs weigh more, and same-layout runs differ more between repeats. */
#define UNC_SMALL_RUN_GPUS 64

/* The kind of a training step's prediction: fsdp for sharded data parallelism alone (ZeRO 2 or
 * 3, no tensor or pipeline parallelism), training.small below UNC_SMALL_RUN_GPUS, else
 * training. */
const char *unc_run_kind(const cfg_workload *w);
/* The kinds unc_run_kind returns as small numbers and back (-1 and NULL for none), for a
 * result that crosses a process boundary. */
int unc_run_kind_index(const char *kind);
const char *unc_run_kind_name(int index);
/* The band of a training step's kind; a small run falls back on the training band when the
 * table has none of its own. */
const unc_band *unc_band_for_run(const unc_table *t, const cfg_workload *w);

#endif
