/* uncertainty: 80 % intervals around a prediction, from the errors dlsim made on real
 * measurements of the same kind. `dlsim validate --update-pins` writes, per kind of prediction,
 * the band of predicted time / measured time over the check cases (validation/intervals.tsv);
 * a prediction of that kind then brackets the truth with it. Cases of one source (a repository,
 * a paper) share framework, hardware and authors, so their errors are correlated: the band is
 * widened by how far a source's typical error lies from its kind's, and checked by leaving
 * whole sources out, since a new prediction is usually of a source not yet seen. */
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
  int sources;       /* the sources they come from (0: not recorded) */
  double low, high;  /* 80 % band of predicted time / measured time */
  double offset;     /* the widening between sources in it: low and high are the cases' own
                        band times exp(-offset) and exp(offset) */
  double cv_coverage;/* how often the band fitted without a case's source held the case */
} unc_band;

/* One check case's error: the kind it measures (an index among the kinds fitted together),
 * its source (an index: cases of one repository or paper share one) and its ratio predicted
 * time / measured time (a rate's: measured / predicted). */
typedef struct {
  int kind, source;
  double ratio;
} unc_residual;

/* How far, in log ratio, a new source's typical error lies from its kind's: this quantile of
 * the sources' offsets (below). Chosen by leave-one-source-out cross-validation on the
 * validation cases without the unseen batches, among 0.5-0.9: the level whose bands held
 * closest to 80 % of the left-out sources' cases (validation/README.md, "Intervals"). */
#define UNC_SOURCE_OFFSET_LEVEL 0.7

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

/* The offset between sources: per kind with two sources or more, each source's median log
 * ratio against the median of those medians, |difference|; UNC_SOURCE_OFFSET_LEVEL's
 * quantile (interpolated) of them over all kinds. Source `left_out` is ignored (-1: none);
 * 0 when no kind has two sources. */
double unc_source_offset(const unc_residual *r, int n, int left_out);
/* The band of kind `k` from the residuals `r` of every kind (the offset is pooled over them):
 * its cases' conformal band widened by the offset. Fewer than 5 cases make no band (cases 0).
 * cv_coverage: each source of the kind left out in turn (with at least 5 cases left), how many
 * of its cases the band of the rest held; NAN when no source can be left out. */
unc_band unc_band_fit(const char *kind, int k, const unc_residual *r, int n);
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
