/* The interval bands of validation/intervals.tsv: for each kind of prediction that users ask
 * for an interval on, the spread of dlsim's errors over the check cases of that kind. */
#include "uncertainty/uncertainty.h"
#include "validation/validation_internal.h"

#include <math.h>
#include <string.h>

/* The kinds, and which case metrics measure them: a time, or a rate of the same step. A
 * "training" row stands for a training step of either scale: the case's workload says which
 * (unc_run_kind: training or training.small), so a category feeds the band of the runs it
 * resembles. */
typedef struct {
  const char *kind, *category, *metric;
  unc_sense sense;
} val_kind_metric;

static const val_kind_metric val_kind_metrics[] = {
    {"training", "training", "step_time_s", UNC_TIME},
    {"training", "training", "tokens_per_s", UNC_RATE},
    {"training", "training", "samples_per_s", UNC_RATE},
    {"training", "training", "model_tflops_per_gpu", UNC_RATE},
    {"training", "megatron-ci", "step_time_s", UNC_TIME},
    {"fsdp", "fsdp", "tokens_per_s", UNC_RATE},
    {"serve.ttft", "serving", "ttft_s.mean", UNC_TIME},
    {"serve.tbt", "serving", "tbt_s.mean", UNC_TIME},
    {"serve.throughput", "serving", "output_tokens_per_s", UNC_RATE},
};

static const char *const val_kinds[] = {"training", "training.small", "fsdp", "serve.ttft",
                                        "serve.tbt", "serve.throughput"};

/* The kind a case that row `k` matches counts for: a training step's scale, from its workload
 * (a sharded data-parallel one, kind fsdp, has no band here); NULL for none. */
static const char *val_case_kind(const val_row *r, const val_kind_metric *k)
{
  if (strcmp(k->kind, "training") != 0 || !r->run_kind)
    return k->kind;
  return g_str_has_prefix(r->run_kind, "training") ? r->run_kind : NULL;
}

/* Predicted time / measured time of a check case of `kind`, or NAN when it is not one. MFU rows
 * are left out: they restate a step time already counted. */
static double val_time_ratio(const val_row *r, const char *kind)
{
  const cfg_case *c = &r->c;
  if (r->failure || c->role != CFG_CASE_CHECK || c->ratio_to || c->table || c->trace ||
      !(r->predicted > 0) || !(c->measured > 0))
    return NAN;
  for (size_t i = 0; i < G_N_ELEMENTS(val_kind_metrics); i++) {
    const val_kind_metric *k = &val_kind_metrics[i];
    const char *case_kind = val_case_kind(r, k);
    if (case_kind && strcmp(case_kind, kind) == 0 && strcmp(k->category, val_category(c)) == 0 &&
        strcmp(k->metric, c->metric) == 0)
      return k->sense == UNC_TIME ? r->predicted / c->measured : c->measured / r->predicted;
  }
  return NAN;
}

bool val_intervals_write(const char *path, const GArray *rows, GError **err)
{
  unc_band bands[G_N_ELEMENTS(val_kinds)];
  double *ratios = g_new(double, rows->len + 1);
  for (size_t k = 0; k < G_N_ELEMENTS(val_kinds); k++) {
    int n = 0;
    for (guint i = 0; i < rows->len; i++) {
      double x = val_time_ratio(&g_array_index(rows, val_row, i), val_kinds[k]);
      if (!isnan(x))
        ratios[n++] = x;
    }
    bands[k] = unc_band_fit(val_kinds[k], ratios, n);
  }
  g_free(ratios);
  bool ok = unc_table_write(path, bands, G_N_ELEMENTS(val_kinds), err);
  for (size_t k = 0; k < G_N_ELEMENTS(val_kinds); k++)
    unc_band_clear(&bands[k]);
  return ok;
}

char *val_intervals_path(void)
{
  return cfg_data_path("validation", "intervals.tsv", NULL);
}
