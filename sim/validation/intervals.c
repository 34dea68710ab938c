/* The interval bands of validation/intervals.tsv: for each kind of prediction that users ask
 * for an interval on, the spread of dlsim's errors over the check cases of that kind. */
#include "uncertainty/uncertainty.h"
#include "validation/validation_internal.h"

#include <math.h>
#include <string.h>

/* The kinds, and which case metrics measure them: a time, or a rate of the same step. A "run"
 * row stands for a training step of any kind: the case's workload says which (unc_run_kind:
 * training, training.small or fsdp), so a case feeds the band that `dlsim run` brackets the
 * same workload with, whatever its category. */
typedef struct {
  const char *kind, *category, *metric;
  unc_sense sense;
} val_kind_metric;

static const val_kind_metric val_kind_metrics[] = {
    {"run", "training", "step_time_s", UNC_TIME},
    {"run", "training", "tokens_per_s", UNC_RATE},
    {"run", "training", "samples_per_s", UNC_RATE},
    {"run", "training", "model_tflops_per_gpu", UNC_RATE},
    {"run", "megatron-ci", "step_time_s", UNC_TIME},
    {"run", "fsdp", "tokens_per_s", UNC_RATE},
    {"serve.ttft", "serving", "ttft_s.mean", UNC_TIME},
    {"serve.tbt", "serving", "tbt_s.mean", UNC_TIME},
    {"serve.throughput", "serving", "output_tokens_per_s", UNC_RATE},
};

static const char *const val_kinds[] = {"training", "training.small", "fsdp", "serve.ttft",
                                        "serve.tbt", "serve.throughput"};

/* The kind a case that row `k` matches counts for: a training step's, from its workload; NULL
 * for none. */
static const char *val_case_kind(const val_row *r, const val_kind_metric *k)
{
  return strcmp(k->kind, "run") == 0 ? r->run_kind : k->kind;
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

const char *val_interval_kind(const val_row *r)
{
  for (size_t k = 0; k < G_N_ELEMENTS(val_kinds); k++)
    if (!isnan(val_time_ratio(r, val_kinds[k])))
      return val_kinds[k];
  return NULL;
}

/* The source a case's errors are correlated with: the first word of its `source`, which names
 * the repository (owner/name) or the paper (first author) the measurement comes from. */
static char *val_source_key(const cfg_case *c)
{
  const char *s = c->source ? c->source : "";
  while (g_ascii_isspace(*s))
    s++;
  size_t n = strcspn(s, " \t,(");
  return g_strndup(s, n);
}

/* The source's index in `sources` (key -> index + 1), adding it when new. */
static int val_source_index(GHashTable *sources, const cfg_case *c)
{
  char *key = val_source_key(c);
  gpointer at = g_hash_table_lookup(sources, key);
  if (at) {
    g_free(key);
    return GPOINTER_TO_INT(at) - 1;
  }
  int index = (int)g_hash_table_size(sources);
  g_hash_table_insert(sources, key, GINT_TO_POINTER(index + 1));
  return index;
}

/* Every check case's error for each kind it measures. */
static GArray *val_residuals(const GArray *rows)
{
  GArray *res = g_array_new(FALSE, FALSE, sizeof(unc_residual));
  GHashTable *sources = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < rows->len; i++) {
    const val_row *r = &g_array_index(rows, val_row, i);
    for (size_t k = 0; k < G_N_ELEMENTS(val_kinds); k++) {
      double x = val_time_ratio(r, val_kinds[k]);
      if (isnan(x))
        continue;
      unc_residual e = {.kind = (int)k, .source = val_source_index(sources, &r->c), .ratio = x};
      g_array_append_val(res, e);
    }
  }
  g_hash_table_destroy(sources);
  return res;
}

bool val_intervals_write(const char *path, const GArray *rows, GError **err)
{
  unc_band bands[G_N_ELEMENTS(val_kinds)];
  GArray *res = val_residuals(rows);
  for (size_t k = 0; k < G_N_ELEMENTS(val_kinds); k++)
    bands[k] = unc_band_fit(val_kinds[k], (int)k, (const unc_residual *)res->data, (int)res->len);
  g_array_free(res, TRUE);
  bool ok = unc_table_write(path, bands, G_N_ELEMENTS(val_kinds), err);
  for (size_t k = 0; k < G_N_ELEMENTS(val_kinds); k++)
    unc_band_clear(&bands[k]);
  return ok;
}

char *val_intervals_path(void)
{
  return cfg_data_path("validation", "intervals.tsv", NULL);
}
