/* Interval bands: fitting them on validation residuals, writing and reading them. */
#include "uncertainty/uncertainty.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct unc_table {
  GArray *bands; /* unc_band */
};

static int unc_compare(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The band that holds a new case of the same spread with probability at least 80 %, by split
 * conformal prediction: among n sorted ratios, a fresh one is equally likely to fall in each of
 * the n + 1 gaps, so the floor((n + 1) / 10)-th and ceil(9 (n + 1) / 10)-th smallest (1-based)
 * hold it with probability (khi - klo) / (n + 1) >= 0.8. Interpolated 10th and 90th
 * percentiles held only 72 % of the training cases under cross-validation: with 20-30 cases
 * the plain percentiles are too narrow. Below 9 cases the upper order statistic would be past
 * the largest: the band is then the extremes and holds less than it says (cv_coverage tells). */
static void unc_conformal(const double *ratios, int n, double *low, double *high)
{
  double *v = g_memdup2(ratios, sizeof *v * (gsize)n);
  qsort(v, (size_t)n, sizeof *v, unc_compare);
  int klo = MAX((n + 1) / 10, 1), khi = MIN((9 * (n + 1) + 9) / 10, n);
  *low = v[klo - 1];
  *high = v[khi - 1];
  g_free(v);
}

/* Each fifth of the cases (every fifth one, by index) checked against a band fitted on the
 * other four fifths: how often the band held it. */
static double unc_cross_validate(const double *ratios, int n)
{
  int held = 0;
  double *rest = g_new(double, n);
  for (int fold = 0; fold < 5; fold++) {
    int m = 0;
    for (int i = 0; i < n; i++)
      if (i % 5 != fold)
        rest[m++] = ratios[i];
    double low, high;
    unc_conformal(rest, m, &low, &high);
    for (int i = fold; i < n; i += 5)
      held += ratios[i] >= low && ratios[i] <= high;
  }
  g_free(rest);
  return (double)held / n;
}

unc_band unc_band_fit(const char *kind, const double *ratios, int n)
{
  unc_band b = {.kind = g_strdup(kind)};
  if (n < 5)
    return b;
  b.cases = n;
  unc_conformal(ratios, n, &b.low, &b.high);
  b.cv_coverage = unc_cross_validate(ratios, n);
  return b;
}

void unc_band_clear(unc_band *b)
{
  g_free(b->kind);
  memset(b, 0, sizeof *b);
}

void unc_interval(const unc_band *b, double predicted, unc_sense sense, double out[2])
{
  if (sense == UNC_TIME) {
    out[0] = predicted / b->high;
    out[1] = predicted / b->low;
  } else {
    out[0] = predicted * b->low;
    out[1] = predicted * b->high;
  }
}

bool unc_table_write(const char *path, const unc_band *bands, int n, GError **err)
{
  GString *o = g_string_new("# Written by dlsim validate --update-pins: per kind of prediction, the band of\n"
                            "# predicted time / measured time over its check cases (a rate's ratio is measured /\n"
                            "# predicted) that holds a new case with probability >= 80 % (split conformal order\n"
                            "# statistics), and how often a band fitted on four fifths of the cases held the\n"
                            "# fifth (5-fold cross-validation).\n"
                            "kind\tcases\tlow\thigh\tcv_coverage\n");
  for (int i = 0; i < n; i++)
    if (bands[i].cases > 0)
      g_string_append_printf(o, "%s\t%d\t%.4f\t%.4f\t%.3f\n", bands[i].kind, bands[i].cases,
                             bands[i].low, bands[i].high, bands[i].cv_coverage);
  bool ok = g_file_set_contents(path, o->str, (gssize)o->len, err);
  g_string_free(o, TRUE);
  return ok;
}

static bool unc_parse_line(const char *path, int lineno, const char *line, unc_band *b, GError **err)
{
  g_auto(GStrv) f = g_strsplit(line, "\t", -1);
  char *end[4] = {NULL};
  if (g_strv_length(f) == 5) {
    b->cases = (int)strtol(f[1], &end[0], 10);
    b->low = g_ascii_strtod(f[2], &end[1]);
    b->high = g_ascii_strtod(f[3], &end[2]);
    b->cv_coverage = g_ascii_strtod(f[4], &end[3]);
    bool numbers = *end[0] == '\0' && *end[1] == '\0' && *end[2] == '\0' && *end[3] == '\0';
    if (numbers && b->cases > 0 && b->low > 0 && b->high >= b->low && isfinite(b->high)) {
      b->kind = g_strdup(f[0]);
      return true;
    }
  }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s:%d: expected KIND, CASES, LOW, HIGH, CV_COVERAGE separated by tabs "
              "(0 < LOW <= HIGH)", path, lineno);
  return false;
}

unc_table *unc_table_load(const char *path, GError **err)
{
  g_autofree char *fallback = NULL;
  if (!path)
    path = fallback = cfg_data_path("validation", "intervals.tsv", NULL);
  unc_table *t = g_new0(unc_table, 1);
  t->bands = g_array_new(FALSE, TRUE, sizeof(unc_band));
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return t;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (int i = 0; lines[i]; i++) {
    if (!lines[i][0] || lines[i][0] == '#' || g_str_has_prefix(lines[i], "kind\t"))
      continue;
    unc_band b = {0};
    if (!unc_parse_line(path, i + 1, lines[i], &b, err)) {
      unc_table_free(t);
      return NULL;
    }
    g_array_append_val(t->bands, b);
  }
  return t;
}

void unc_table_free(unc_table *t)
{
  if (!t)
    return;
  for (guint i = 0; i < t->bands->len; i++)
    unc_band_clear(&g_array_index(t->bands, unc_band, i));
  g_array_free(t->bands, TRUE);
  g_free(t);
}

const unc_band *unc_band_of(const unc_table *t, const char *kind)
{
  for (guint i = 0; t && i < t->bands->len; i++) {
    const unc_band *b = &g_array_index(t->bands, unc_band, i);
    if (strcmp(b->kind, kind) == 0)
      return b;
  }
  return NULL;
}

/* The kinds of a training step, in the order unc_run_kind_index numbers them. */
enum { UNC_RUN_TRAINING, UNC_RUN_SMALL, UNC_RUN_FSDP };
static const char *const unc_run_kinds[] = {"training", "training.small", "fsdp"};

const char *unc_run_kind(const cfg_workload *w)
{
  const cfg_parallel *p = &w->parallel;
  bool sharded_dp = p->zero >= 2 && p->tp == 1 && p->pp == 1 && p->cp == 1;
  if (sharded_dp)
    return unc_run_kinds[UNC_RUN_FSDP];
  long gpus = (long)p->tp * p->pp * p->cp * p->dp;
  return unc_run_kinds[gpus < UNC_SMALL_RUN_GPUS ? UNC_RUN_SMALL : UNC_RUN_TRAINING];
}

int unc_run_kind_index(const char *kind)
{
  for (int i = 0; kind && i < (int)G_N_ELEMENTS(unc_run_kinds); i++)
    if (strcmp(kind, unc_run_kinds[i]) == 0)
      return i;
  return -1;
}

const char *unc_run_kind_name(int index)
{
  return index >= 0 && index < (int)G_N_ELEMENTS(unc_run_kinds) ? unc_run_kinds[index] : NULL;
}

const unc_band *unc_band_for_run(const unc_table *t, const cfg_workload *w)
{
  const char *kind = unc_run_kind(w);
  const unc_band *b = unc_band_of(t, kind);
  /* a table written before small runs had a band of their own */
  if (b || strcmp(kind, unc_run_kinds[UNC_RUN_SMALL]) != 0)
    return b;
  return unc_band_of(t, unc_run_kinds[UNC_RUN_TRAINING]);
}
