/* OSU Micro-Benchmarks output: a title ("# OSU MPI-CUDA Allreduce Latency Test v7.5"), comments
 * ("# Datatype: MPI_CHAR."), a column header ("# Size  Avg Latency(us)  Min Latency(us) ...")
 * and rows. Rewritten as CSV in place, as nccl-tests' output is, with one column added: time_us,
 * the average latency, or for the bandwidth tests the time per message, size / bandwidth. */
#include "calibration/calibration_internal.h"

#include <stdio.h>
#include <string.h>

/* OMB's column labels (their spaces as one blank) and the CSV names they get. Older versions
 * print osu_latency's average as "Latency (us)". A label not here becomes a column per word. */
static const char *const calib_omb_labels[][2] = {
    {"Size", "size_bytes"},
    {"Avg Latency(us)", "avg_latency_us"},
    {"Min Latency(us)", "min_latency_us"},
    {"Max Latency(us)", "max_latency_us"},
    {"Latency (us)", "avg_latency_us"},
    {"Iterations", "iterations"},
    {"Bandwidth (MB/s)", "bandwidth_MBps"},
    {"Messages/s", "messages_per_s"},
    {"P50 Tail Lat(us)", "p50_latency_us"},
    {"P90 Tail Lat(us)", "p90_latency_us"},
    {"P99 Tail Lat(us)", "p99_latency_us"},
    {"Validation", "validation"},
};

static bool calib_omb_is_title(const char *line)
{
  return g_str_has_prefix(line, "# OSU ");
}

/* The line stripped of a launcher's rank label and blanks; `indent` gets how far it started. */
static char *calib_omb_strip(char *line, int *indent)
{
  size_t label = calib_launcher_label(line);
  *indent = (int)(label + strspn(line + label, " \t"));
  return g_strstrip(line + label);
}

bool calib_omb_is_table(char **lines)
{
  int indent = 0;
  for (char **l = lines; *l; l++) {
    g_autofree char *copy = g_strdup(*l);
    if (calib_omb_is_title(calib_omb_strip(copy, &indent)))
      return true;
  }
  return false;
}

/* The column names of a header line ("# Size  Bandwidth (MB/s)"), or NULL when the line is not
 * OMB's column header. */
static char **calib_omb_header(const char *line)
{
  g_auto(GStrv) words = calib_words(line + (*line == '#'));
  if (*line != '#' || !words[0] || strcmp(words[0], "Size") != 0)
    return NULL;
  g_autofree char *text = g_strjoinv(" ", words);
  GPtrArray *names = g_ptr_array_new();
  for (const char *at = text; *at;) {
    const char *name = NULL;
    size_t len = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(calib_omb_labels) && !name; i++) {
      len = strlen(calib_omb_labels[i][0]);
      if (strncmp(at, calib_omb_labels[i][0], len) == 0 && (at[len] == ' ' || at[len] == '\0'))
        name = calib_omb_labels[i][1];
    }
    if (!name)
      len = strcspn(at, " ");
    g_ptr_array_add(names, name ? g_strdup(name) : g_ascii_strdown(at, (gssize)len));
    at += len + (at[len] == ' ');
  }
  g_ptr_array_add(names, NULL);
  return (char **)g_ptr_array_free(names, FALSE);
}

static int calib_omb_column(char **names, const char *name)
{
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], name) == 0)
      return i;
  return -1;
}

typedef struct {
  char **names;
  int ncols, size, latency, bandwidth; /* column indices, -1 when absent */
} calib_omb_layout;

static bool calib_omb_layout_of(const char *path, int lineno, char **names, calib_omb_layout *o,
                                GError **err)
{
  o->names = names;
  o->ncols = (int)g_strv_length(names);
  o->size = calib_omb_column(names, "size_bytes");
  o->latency = calib_omb_column(names, "avg_latency_us");
  o->bandwidth = calib_omb_column(names, "bandwidth_MBps");
  if (o->latency < 0 && o->bandwidth < 0) {
    g_autofree char *got = g_strjoinv(" ", names);
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s:%d: expected an OMB column header with 'Avg Latency(us)', 'Latency (us)' or "
                "'Bandwidth (MB/s)', got columns %s", path, lineno, got);
    return false;
  }
  return true;
}

/* A row as CSV with its time_us appended; "" for the size-0 row osu_latency prints first (no
 * collective moves 0 bytes). NULL and the error when the row is not one. */
static char *calib_omb_row(const char *path, int lineno, int indent, const char *line,
                           const calib_omb_layout *o, GError **err)
{
  char *csv = calib_raw_row(path, lineno, indent, line, o->names, o->ncols, "an OMB", err);
  if (!csv)
    return NULL;
  g_auto(GStrv) cells = g_strsplit(csv, ",", -1);
  double size = g_ascii_strtod(cells[o->size], NULL);
  if (size == 0) {
    g_free(csv);
    return g_strdup("");
  }
  double time = o->latency >= 0 ? g_ascii_strtod(cells[o->latency], NULL)
                                : size / g_ascii_strtod(cells[o->bandwidth], NULL);
  if (o->latency < 0 && !(g_ascii_strtod(cells[o->bandwidth], NULL) > 0)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d: bandwidth_MBps: expected a bandwidth "
                "above 0, got '%s'", path, lineno, cells[o->bandwidth]);
    g_free(csv);
    return NULL;
  }
  char number[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_dtostr(number, sizeof number, time); /* MB/s is bytes per us: size / bw is in us */
  char *row = g_strconcat(csv, ",", number, NULL);
  g_free(csv);
  return row;
}

/* Reads the first table of the file: lines before its column header, comments, the log lines
 * of UCX or MVAPICH ("[host:pid] ...") and everything from a second title on become blank. */
bool calib_omb_to_csv(const char *path, char **lines, int *window, GError **err)
{
  calib_omb_layout o = {0};
  g_auto(GStrv) names = NULL;
  bool titled = false, done = false, ok = true;
  int lineno = 0;
  for (char **l = lines; *l && ok; l++) {
    int indent = 0;
    char *line = calib_omb_strip(*l, &indent), *csv = NULL;
    lineno++;
    if (calib_omb_is_title(line)) {
      done = names != NULL;
      titled = true;
    } else if (titled && !names && !done && (names = calib_omb_header(line))) {
      ok = calib_omb_layout_of(path, lineno, names, &o, err);
      *window = ok && o.latency < 0 ? CALIB_OMB_WINDOW : 0;
      if (ok) {
        g_autofree char *header = g_strjoinv(",", names);
        csv = g_strconcat(header, ",time_us", NULL);
      }
    } else if (names && !done && *line && *line != '#' && *line != '[' && !calib_raw_is_log(line)) {
      ok = (csv = calib_omb_row(path, lineno, indent, line, &o, err)) != NULL;
    }
    g_free(*l);
    *l = csv ? csv : g_strdup("");
  }
  if (ok && !names)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: an OMB title ('# OSU ...') but no column "
                "header ('# Size ...') under it", path);
  return ok && names;
}

void calib_table_model_sizes(calib_table *t, prog_coll op, int group)
{
  if (!t->omb || (op != PROG_COLL_ALLGATHER && op != PROG_COLL_ALLTOALL))
    return;
  for (guint i = 0; i < t->points->len; i++)
    g_array_index(t->points, calib_point, i).size *= group;
}
