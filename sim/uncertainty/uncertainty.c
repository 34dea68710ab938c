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

/* The p-quantile of sorted `v`, interpolated between neighbours. */
static double unc_quantile(const double *v, int n, double p)
{
  double at = p * (n - 1);
  int i = (int)floor(at);
  if (i >= n - 1)
    return v[n - 1];
  return v[i] + (at - i) * (v[i + 1] - v[i]);
}

static void unc_percentiles(const double *ratios, int n, double *p10, double *p90)
{
  double *v = g_memdup2(ratios, sizeof *v * (gsize)n);
  qsort(v, (size_t)n, sizeof *v, unc_compare);
  *p10 = unc_quantile(v, n, 0.10);
  *p90 = unc_quantile(v, n, 0.90);
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
    double p10, p90;
    unc_percentiles(rest, m, &p10, &p90);
    for (int i = fold; i < n; i += 5)
      held += ratios[i] >= p10 && ratios[i] <= p90;
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
  unc_percentiles(ratios, n, &b.p10, &b.p90);
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
    out[0] = predicted / b->p90;
    out[1] = predicted / b->p10;
  } else {
    out[0] = predicted * b->p10;
    out[1] = predicted * b->p90;
  }
}

bool unc_table_write(const char *path, const unc_band *bands, int n, GError **err)
{
  GString *o = g_string_new("# Written by dlsim validate --update-pins: per kind of prediction, the 10th and 90th\n"
                            "# percentiles of predicted time / measured time over its check cases (a rate's ratio\n"
                            "# is measured / predicted), and how often a band fitted on four fifths of the\n"
                            "# cases held the fifth (5-fold cross-validation).\n"
                            "kind\tcases\tp10\tp90\tcv_coverage\n");
  for (int i = 0; i < n; i++)
    if (bands[i].cases > 0)
      g_string_append_printf(o, "%s\t%d\t%.4f\t%.4f\t%.3f\n", bands[i].kind, bands[i].cases,
                             bands[i].p10, bands[i].p90, bands[i].cv_coverage);
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
    b->p10 = g_ascii_strtod(f[2], &end[1]);
    b->p90 = g_ascii_strtod(f[3], &end[2]);
    b->cv_coverage = g_ascii_strtod(f[4], &end[3]);
    bool numbers = *end[0] == '\0' && *end[1] == '\0' && *end[2] == '\0' && *end[3] == '\0';
    if (numbers && b->cases > 0 && b->p10 > 0 && b->p90 >= b->p10 && isfinite(b->p90)) {
      b->kind = g_strdup(f[0]);
      return true;
    }
  }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s:%d: expected KIND, CASES, P10, P90, CV_COVERAGE separated by tabs "
              "(0 < P10 <= P90)", path, lineno);
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

const char *unc_run_kind(const cfg_workload *w)
{
  const cfg_parallel *p = &w->parallel;
  bool sharded_dp = p->zero >= 2 && p->tp == 1 && p->pp == 1 && p->cp == 1;
  return sharded_dp ? "fsdp" : "training";
}
