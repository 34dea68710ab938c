/* nccl-tests tables: what all_reduce_perf & co. print, or CSV (the columns of nccl-tests, or
 * any CSV with a size and a time column), filtered by column values. */
#include "calibration/calibration_internal.h"

#include <math.h>
#include <string.h>

/* ---- nccl-tests' own output ------------------------------------------------------------------ */

/* The names validation/nccl/ gives nccl-tests' columns, so that the CSV reader (its filters,
 * its "a|b" time columns) reads both layouts alike. */
static const char *calib_raw_name(const char *word, int run)
{
  static const char *const fixed[][2] = {{"size", "size_bytes"}, {"count", "count_elements"}};
  static const char *const per_run[][3] = {{"time", "oop_time_us", "ip_time_us"},
                                           {"algbw", "oop_algbw_GBps", "ip_algbw_GBps"},
                                           {"busbw", "oop_busbw_GBps", "ip_busbw_GBps"},
                                           {"#wrong", "oop_wrong_or_error", "ip_wrong_or_error"},
                                           {"error", "oop_wrong_or_error", "ip_wrong_or_error"}};
  for (size_t i = 0; i < G_N_ELEMENTS(fixed); i++)
    if (strcmp(word, fixed[i][0]) == 0)
      return fixed[i][1];
  for (size_t i = 0; i < G_N_ELEMENTS(per_run) && run < 2; i++)
    if (strcmp(word, per_run[i][0]) == 0)
      return per_run[i][1 + run];
  return word;
}

char **calib_words(const char *line)
{
  g_auto(GStrv) parts = g_strsplit_set(line, " \t\r", -1);
  GPtrArray *words = g_ptr_array_new();
  for (int i = 0; parts[i]; i++)
    if (*parts[i])
      g_ptr_array_add(words, g_strdup(parts[i]));
  g_ptr_array_add(words, NULL);
  return (char **)g_ptr_array_free(words, FALSE);
}

/* The column header nccl-tests prints ("#  size  count  type  redop  root  time ..."), as CSV
 * names; NULL for any other line. An older nccl-tests prints no root column and "error" for
 * "#wrong"; dlsim coll adds algorithm and protocol. */
static char *calib_raw_header(const char *line, int *ncols)
{
  if (line[0] != '#')
    return NULL;
  g_auto(GStrv) words = calib_words(line + 1);
  int n = (int)g_strv_length(words);
  if (n < 6 || strcmp(words[0], "size") != 0 || strcmp(words[1], "count") != 0 ||
      strcmp(words[2], "type") != 0)
    return NULL;
  GString *csv = g_string_new(NULL);
  int run = 0;
  for (int i = 0; i < n; i++) {
    g_string_append_printf(csv, "%s%s", i ? "," : "", calib_raw_name(words[i], run));
    run += strcmp(words[i], "#wrong") == 0 || strcmp(words[i], "error") == 0;
  }
  *ncols = n;
  return g_string_free(csv, FALSE);
}

/* NCCL_DEBUG=INFO interleaves its log with the table. */
bool calib_raw_is_log(const char *line)
{
  return strstr(line, " NCCL INFO ") || strstr(line, " NCCL WARN ");
}

bool calib_raw_number(const char *word, bool integer)
{
  char *end = NULL;
  double v = g_ascii_strtod(word, &end);
  return end != word && *end == '\0' && isfinite(v) && v >= 0 && (!integer || v == floor(v));
}

static bool calib_raw_whole(const char *name)
{
  return strcmp(name, "size_bytes") == 0 || strcmp(name, "count_elements") == 0;
}

/* Whether cell i of a row holds what its column needs: whole numbers for size and count, a
 * number for times, bandwidths and OMB's iteration counts, and no comma anywhere (the row
 * becomes a CSV line). */
static bool calib_raw_cell_ok(const char *name, const char *word)
{
  if (strchr(word, ','))
    return false;
  if (calib_raw_whole(name))
    return calib_raw_number(word, true);
  if (g_str_has_suffix(name, "_us") || g_str_has_suffix(name, "_GBps") ||
      g_str_has_suffix(name, "_MBps") || strcmp(name, "iterations") == 0)
    return calib_raw_number(word, false);
  return true;
}

char *calib_raw_row(const char *path, int lineno, int indent, const char *line, char **names,
                    int ncols, const char *tool, GError **err)
{
  g_auto(GStrv) words = calib_words(line);
  int n = (int)g_strv_length(words);
  if (n != ncols) {
    g_autofree char *expected = g_strjoinv(" ", names);
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s:%d: expected %s row of %d columns (%s), got %d: '%s'", path, lineno,
                tool, ncols, expected, n, line);
    return NULL;
  }
  const char *at = line;
  for (int i = 0; i < n; i++) {
    at = strstr(at, words[i]);
    if (!calib_raw_cell_ok(names[i], words[i])) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: %s: expected %s, got '%s'", path,
                  lineno, indent + (int)(at - line) + 1, names[i],
                  calib_raw_whole(names[i]) ? "a whole number of bytes or elements" : "a number",
                  words[i]);
      return NULL;
    }
    at += strlen(words[i]);
  }
  return g_strjoinv(",", words);
}

/* Launchers that label each line with its rank: srun -l ("0: ") and OpenMPI's --tag-output
 * ("[1,0]<stdout>:"). The length of the label, or 0. */
size_t calib_launcher_label(const char *line)
{
  static const char tag[] = "]<stdout>:";
  size_t n = strspn(line, " "), digits = strspn(line + n, "0123456789");
  if (digits > 0 && line[n + digits] == ':')
    return n + digits + 1;
  const char *end = line[n] == '[' ? strstr(line + n, tag) : NULL;
  if (end && strspn(line + n + 1, "0123456789,") == (size_t)(end - (line + n + 1)))
    return (size_t)(end - line) + strlen(tag);
  return 0;
}

static bool calib_raw_is_table(char **lines)
{
  int ncols = 0;
  for (char **l = lines; *l; l++) {
    const char *text = *l + calib_launcher_label(*l);
    g_autofree char *header = calib_raw_header(text + strspn(text, " \t"), &ncols);
    if (header)
      return true;
  }
  return false;
}

/* Rewrites nccl-tests' output in place as CSV, line for line (so errors keep their line
 * numbers): the first column header becomes the CSV header, rows become CSV rows, and the
 * rest (settings, devices, the footer, NCCL's log, what a launcher printed before the table)
 * becomes blank. Rank labels of launchers go. */
static bool calib_raw_to_csv(const char *path, char **lines, GError **err)
{
  g_auto(GStrv) names = NULL;
  int ncols = 0, lineno = 0;
  for (char **l = lines; *l; l++) {
    lineno++;
    size_t label = calib_launcher_label(*l);
    int indent = (int)(label + strspn(*l + label, " \t"));
    char *line = g_strstrip(*l + label), *csv = NULL;
    if (!names && (csv = calib_raw_header(line, &ncols)))
      names = g_strsplit(csv, ",", -1);
    else if (names && *line && *line != '#' && !calib_raw_is_log(line) &&
             !(csv = calib_raw_row(path, lineno, indent, line, names, ncols, "an nccl-tests", err)))
      return false;
    g_free(*l);
    *l = csv ? csv : g_strdup("");
  }
  return true;
}

/* ---- CSV ------------------------------------------------------------------------------------- */

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
  bool raw = !gemm && calib_raw_is_table(lines), omb = !gemm && !raw && calib_omb_is_table(lines);
  if ((raw && !calib_raw_to_csv(path, lines, err)) ||
      (omb && !calib_omb_to_csv(path, lines, &out->window, err)))
    goto fail;
  out->omb = omb;
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
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d: no column '%s' or '%s' in the header%s",
                    path, lineno, size_name, time_name,
                    omb ? " (OMB output has time_us: dlsim calibrate --omb, or time_column: time_us)"
                    : gemm || size_col >= 0 ? "" : ", and no nccl-tests column header ('#  size  count  type ...') "
                                "in the file");
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
