/* nccl-tests tables as CSV (the columns of nccl-tests, or any CSV with a size and a time
 * column, filtered by column values). */
#include "calibration/calibration.h"

#include <math.h>
#include <string.h>

static int calib_column(char **header, const char *name)
{
  for (int i = 0; header[i]; i++)
    if (strcmp(g_strstrip(header[i]), name) == 0)
      return i;
  return -1;
}

/* A time column may be "a|b": the smaller of the two (nccl-tests' out-of-place and in-place
 * runs time the same collective; the smaller is the one not disturbed by warm-up). */
static bool calib_time_cols(char **header, const char *spec, int *cols, int *n)
{
  g_auto(GStrv) names = g_strsplit(spec, "|", 4);
  *n = 0;
  for (int i = 0; names[i]; i++) {
    int c = calib_column(header, names[i]);
    if (c < 0)
      return false;
    cols[(*n)++] = c;
  }
  return *n > 0;
}

/* The batch, m, n, k columns of a GEMM table. */
static bool calib_gemm_cols(char **header, int *cols)
{
  const char *names[] = {"batch", "m", "n", "k"};
  for (int i = 0; i < 4; i++)
    if ((cols[i] = calib_column(header, names[i])) < 0)
      return false;
  return true;
}

static bool calib_parse_gemm(char **cells, int n, const int *cols, calib_point *p)
{
  p->size = 2;
  for (int i = 0; i < 4; i++) {
    char *end = NULL;
    if (cols[i] >= n)
      return false;
    p->gemm[i] = g_ascii_strtod(cells[cols[i]], &end);
    if (!end || *end || !(p->gemm[i] > 0) || !isfinite(p->gemm[i]))
      return false;
    p->size *= p->gemm[i];
  }
  return true;
}

static bool calib_row_matches(char **cells, int ncells, char **header, char *const *filters)
{
  for (int f = 0; filters && filters[f]; f++) {
    g_auto(GStrv) kv = g_strsplit(filters[f], "=", 2);
    int col = kv[1] ? calib_column(header, kv[0]) : -1;
    if (col < 0 || col >= ncells || strcmp(g_strstrip(cells[col]), kv[1]) != 0)
      return false;
  }
  return true;
}

bool calib_table_load(const char *path, const calib_columns *cols, calib_table *out, GError **err)
{
  memset(out, 0, sizeof *out);
  g_autofree char *text = NULL;
  GError *io = NULL;
  if (!g_file_get_contents(path, &text, NULL, &io)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: cannot read: %s", path, io->message);
    g_error_free(io);
    return false;
  }
  const char *size_name = cols && cols->size_column ? cols->size_column : "size_bytes";
  const char *time_name = cols && cols->time_column ? cols->time_column : "oop_time_us";
  double scale = cols && cols->time_scale > 0 ? cols->time_scale : 1e-6;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  char **header = NULL;
  int size_col = -1, time_cols[4] = {0}, ntime = 0, lineno = 0, gemm_cols[4];
  bool gemm = cols && cols->gemm;
  if (gemm)
    size_name = "batch, m, n, k";
  out->path = g_strdup(path);
  out->points = g_array_new(FALSE, FALSE, sizeof(calib_point));
  for (char **l = lines; *l; l++) {
    lineno++;
    g_strstrip(*l);
    if (**l == '\0' || **l == '#')
      continue;
    char **cells = g_strsplit(*l, ",", -1);
    if (!header) {
      header = cells;
      size_col = gemm ? (calib_gemm_cols(header, gemm_cols) ? 0 : -1) : calib_column(header, size_name);
      if (size_col < 0 || !calib_time_cols(header, time_name, time_cols, &ntime)) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d: no column '%s' or '%s' in the header",
                    path, lineno, size_name, time_name);
        goto fail;
      }
      continue;
    }
    int n = (int)g_strv_length(cells);
    if (calib_row_matches(cells, n, header, cols ? cols->filters : NULL)) {
      char *e1 = "", *e2 = NULL;
      calib_point p = {.time = INFINITY};
      bool parsed = gemm ? calib_parse_gemm(cells, n, gemm_cols, &p) : size_col < n;
      if (parsed && !gemm)
        p.size = g_ascii_strtod(cells[size_col], &e1);
      for (int k = 0; k < ntime && parsed; k++) {
        parsed = time_cols[k] < n;
        if (parsed)
          p.time = MIN(p.time, g_ascii_strtod(cells[time_cols[k]], &e2) * scale);
      }
      if (!parsed || !e1 || !e2 || *e1 || *e2 || !(p.size > 0) || !isfinite(p.size) ||
          !(p.time > 0) || !isfinite(p.time)) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d: expected a size and a time, got '%s'",
                    path, lineno, *l);
        g_strfreev(cells);
        goto fail;
      }
      g_array_append_val(out->points, p);
    }
    g_strfreev(cells);
  }
  if (!header || out->points->len == 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: no rows%s", path,
                cols && cols->filters ? " match the filters" : "");
    goto fail;
  }
  g_strfreev(header);
  return true;
fail:
  g_strfreev(header);
  calib_table_clear(out);
  return false;
}

void calib_table_clear(calib_table *t)
{
  g_free(t->path);
  if (t->points)
    g_array_free(t->points, TRUE);
  memset(t, 0, sizeof *t);
}

bool calib_time_unit(const char *unit, double *out, GError **err)
{
  const struct {
    const char *name;
    double scale;
  } units[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  for (size_t i = 0; i < G_N_ELEMENTS(units); i++)
    if (strcmp(unit, units[i].name) == 0) {
      *out = units[i].scale;
      return true;
    }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--time-unit: expected s, ms, us or ns, got '%s'", unit);
  return false;
}
