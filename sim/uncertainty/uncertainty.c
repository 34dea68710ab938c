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
static void unc_conformal(double *ratios, int n, double *low, double *high)
{
  qsort(ratios, (size_t)n, sizeof *ratios, unc_compare);
  int klo = MAX((n + 1) / 10, 1), khi = MIN((9 * (n + 1) + 9) / 10, n);
  *low = ratios[klo - 1];
  *high = ratios[khi - 1];
}

/* The median of sorted v[0..n-1] (n > 0). */
static double unc_median(const double *v, int n)
{
  return (v[(n - 1) / 2] + v[n / 2]) / 2;
}

/* The quantile p of sorted v[0..n-1] (n > 0), interpolated between order statistics. */
static double unc_quantile(const double *v, int n, double p)
{
  double at = p * (n - 1);
  int i = (int)floor(at);
  return i + 1 < n ? v[i] + (v[i + 1] - v[i]) * (at - i) : v[n - 1];
}

typedef struct {
  int source;
  double log_ratio;
} unc_point;

static int unc_compare_points(const void *a, const void *b)
{
  const unc_point *x = a, *y = b;
  if (x->source != y->source)
    return (x->source > y->source) - (x->source < y->source);
  return unc_compare(&x->log_ratio, &y->log_ratio);
}

/* The median log ratio of each of kind k's sources but `left_out`, into medians; how many. */
static int unc_source_medians(const unc_residual *r, int n, int k, int left_out, double *medians)
{
  unc_point *p = g_new(unc_point, MAX(n, 1));
  double *logs = g_new(double, MAX(n, 1));
  int m = 0, sources = 0;
  for (int i = 0; i < n; i++)
    if (r[i].kind == k && r[i].source != left_out)
      p[m++] = (unc_point){r[i].source, log(r[i].ratio)};
  qsort(p, (size_t)m, sizeof *p, unc_compare_points); /* by source, then ratio */
  for (int i = 0, j; i < m; i = j) {
    for (j = i; j < m && p[j].source == p[i].source; j++)
      logs[j - i] = p[j].log_ratio;
    medians[sources++] = unc_median(logs, j - i);
  }
  g_free(logs);
  g_free(p);
  return sources;
}

/* Appends to `out` the offsets of kind k's sources but `left_out`: |a source's median log ratio
 * - the median of the sources' medians|, when the kind has two sources or more. */
static void unc_kind_offsets(const unc_residual *r, int n, int k, int left_out, GArray *out)
{
  double *medians = g_new(double, MAX(n, 1));
  int sources = unc_source_medians(r, n, k, left_out, medians);
  if (sources >= 2) {
    double *sorted = g_memdup2(medians, sizeof *medians * (gsize)sources);
    qsort(sorted, (size_t)sources, sizeof *sorted, unc_compare);
    double center = unc_median(sorted, sources);
    for (int s = 0; s < sources; s++) {
      double d = fabs(medians[s] - center);
      g_array_append_val(out, d);
    }
    g_free(sorted);
  }
  g_free(medians);
}

double unc_source_offset(const unc_residual *r, int n, int left_out)
{
  int kinds = 0;
  for (int i = 0; i < n; i++)
    kinds = MAX(kinds, r[i].kind + 1);
  GArray *offsets = g_array_new(FALSE, FALSE, sizeof(double));
  for (int k = 0; k < kinds; k++)
    unc_kind_offsets(r, n, k, left_out, offsets);
  double d = 0;
  if (offsets->len > 0) {
    g_array_sort(offsets, unc_compare);
    d = unc_quantile((const double *)offsets->data, (int)offsets->len, UNC_SOURCE_OFFSET_LEVEL);
  }
  g_array_free(offsets, TRUE);
  return d;
}

/* Kind k's ratios but those of source `left_out`, into out; how many. */
static int unc_kind_ratios(const unc_residual *r, int n, int k, int left_out, double *out)
{
  int m = 0;
  for (int i = 0; i < n; i++)
    if (r[i].kind == k && r[i].source != left_out)
      out[m++] = r[i].ratio;
  return m;
}

/* Kind k's band without source `left_out`, widened by the offset of the sources but it (into
 * *offset); how many cases it was fitted on, 0 when fewer than 5 are left. */
static int unc_band_without(const unc_residual *r, int n, int k, int left_out, double *scratch,
                            double *low, double *high, double *offset)
{
  int m = unc_kind_ratios(r, n, k, left_out, scratch);
  if (m < 5)
    return 0;
  unc_conformal(scratch, m, low, high);
  *offset = unc_source_offset(r, n, left_out);
  double widen = exp(*offset);
  *low /= widen;
  *high *= widen;
  return m;
}

/* Each source of kind k left out in turn: the share of its cases that the band of the rest
 * held (NAN when no source could be left out). */
static double unc_cross_validate(const unc_residual *r, int n, int k, double *scratch)
{
  int held = 0, tried = 0;
  GHashTable *done = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int i = 0; i < n; i++) {
    int s = r[i].source;
    double low, high, offset;
    if (r[i].kind != k || g_hash_table_contains(done, GINT_TO_POINTER(s + 1)))
      continue;
    g_hash_table_add(done, GINT_TO_POINTER(s + 1));
    if (!unc_band_without(r, n, k, s, scratch, &low, &high, &offset))
      continue;
    for (int j = i; j < n; j++)
      if (r[j].kind == k && r[j].source == s) {
        held += r[j].ratio >= low && r[j].ratio <= high;
        tried++;
      }
  }
  g_hash_table_destroy(done);
  return tried ? (double)held / tried : NAN;
}

unc_band unc_band_fit(const char *kind, int k, const unc_residual *r, int n)
{
  unc_band b = {.kind = g_strdup(kind)};
  double *scratch = g_new(double, MAX(n, 1));
  GHashTable *sources = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int i = 0; i < n; i++)
    if (r[i].kind == k)
      g_hash_table_add(sources, GINT_TO_POINTER(r[i].source + 1));
  b.cases = unc_band_without(r, n, k, -1, scratch, &b.low, &b.high, &b.offset);
  if (b.cases > 0) {
    b.sources = (int)g_hash_table_size(sources);
    b.cv_coverage = unc_cross_validate(r, n, k, scratch);
  }
  g_hash_table_destroy(sources);
  g_free(scratch);
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
                            "# statistics), widened by exp(offset) both ways for a case of a new source (offset:\n"
                            "# a quantile of the sources' median log errors about their kind's), and how often the\n"
                            "# band fitted without a case's source held it (leave-one-source-out).\n"
                            "kind\tcases\tsources\tlow\thigh\toffset\tcv_coverage\n");
  for (int i = 0; i < n; i++)
    if (bands[i].cases > 0)
      g_string_append_printf(o, "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.3f\n", bands[i].kind, bands[i].cases,
                             bands[i].sources, bands[i].low, bands[i].high, bands[i].offset,
                             bands[i].cv_coverage);
  bool ok = g_file_set_contents(path, o->str, (gssize)o->len, err);
  g_string_free(o, TRUE);
  return ok;
}

/* A number of a field, whole: false on trailing text. */
static bool unc_field(const char *f, double *out)
{
  char *end = NULL;
  *out = g_ascii_strtod(f, &end);
  return end != f && *end == '\0';
}

/* A line of today's seven fields, or of the five before sources were recorded (kind, cases,
 * low, high, cv_coverage). */
static bool unc_parse_line(const char *path, int lineno, const char *line, unc_band *b, GError **err)
{
  g_auto(GStrv) f = g_strsplit(line, "\t", -1);
  guint fields = g_strv_length(f);
  double v[6] = {0};
  bool numbers = fields == 5 || fields == 7;
  for (guint i = 1; numbers && i < fields; i++)
    numbers = unc_field(f[i], &v[i - 1]);
  if (numbers) {
    bool old = fields == 5;
    b->cases = (int)v[0];
    b->sources = old ? 0 : (int)v[1];
    b->low = v[old ? 1 : 2];
    b->high = v[old ? 2 : 3];
    b->offset = old ? 0 : v[4];
    b->cv_coverage = v[old ? 3 : 5];
    if (b->cases > 0 && b->cases == v[0] && b->low > 0 && b->high >= b->low && isfinite(b->high)) {
      b->kind = g_strdup(f[0]);
      return true;
    }
  }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s:%d: expected KIND, CASES, SOURCES, LOW, HIGH, OFFSET, CV_COVERAGE separated by "
              "tabs (0 < LOW <= HIGH)", path, lineno);
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
