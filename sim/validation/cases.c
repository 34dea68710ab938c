/* Case files, and running them: each case predicted and compared with its measurement. */
#include "run/run.h"
#include "validation/validation_internal.h"

#include <math.h>
#include <string.h>

const char *val_role_name(cfg_case_role r)
{
  return r == CFG_CASE_FIT ? "fit" : r == CFG_CASE_CHECK ? "check" : "ref";
}

char *val_metric_label(const cfg_case *c)
{
  if (val_is_gemm(c))
    return g_strdup("time median");
  if (c->table)
    return g_strdup("busbw median >=1MiB");
  return c->ratio_to ? g_strdup_printf("%s ratio", c->metric) : g_strdup(c->metric);
}

static int val_compare_paths(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A named case: a path, or NAME(.yaml) in validation/cases/. */
static char *val_case_path(const char *dir, const char *name, GError **err)
{
  g_autofree char *base = g_str_has_suffix(name, ".yaml") ? g_strdup(name)
                                                          : g_strdup_printf("%s.yaml", name);
  char *path = g_file_test(name, G_FILE_TEST_IS_REGULAR) ? g_strdup(name)
                                                         : g_build_filename(dir, base, NULL);
  if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
    return path;
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "no validation case '%s' in %s", name, dir);
  g_free(path);
  return NULL;
}

GPtrArray *val_case_files(char *const *names, GError **err)
{
  g_autofree char *dir = cfg_data_path("validation", "cases", NULL);
  GPtrArray *files = g_ptr_array_new_with_free_func(g_free);
  if (names && names[0]) {
    for (int i = 0; names[i]; i++) {
      char *path = val_case_path(dir, names[i], err);
      if (!path) {
        g_ptr_array_free(files, TRUE);
        return NULL;
      }
      g_ptr_array_add(files, path);
    }
    return files;
  }
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *e;
  while (d && (e = g_dir_read_name(d)))
    if (g_str_has_suffix(e, ".yaml"))
      g_ptr_array_add(files, g_build_filename(dir, e, NULL));
  if (d)
    g_dir_close(d);
  g_ptr_array_sort(files, val_compare_paths);
  return files;
}

void val_run_case(val_row *row)
{
  if (row->c.table) {
    val_run_table(row);
    return;
  }
  GError *err = NULL;
  if (!val_predict(&row->c, NULL, &row->predicted, &row->run_kind, &err)) {
    row->failure = g_strdup(err->message);
    g_error_free(err);
    return;
  }
  row->error = row->c.measured != 0 ? (row->predicted - row->c.measured) / row->c.measured
                                    : row->predicted - row->c.measured;
  row->pass = fabs(row->error) <= row->c.tolerance;
}

/* Cases that run the DES (which forks) run on the calling thread once the others are done: a
 * fork copies only the calling thread, so a lock another thread holds at that moment stays held
 * in the child forever. */
static bool val_needs_main_thread(const cfg_case *c)
{
  bool forks = !c->command || strcmp(c->command, "run") == 0 || strcmp(c->command, "replay") == 0;
  return c->engine && (forks || c->table);
}

bool val_load_files(GPtrArray *files, GArray **rows, GError **err)
{
  GArray *r = g_array_new(FALSE, TRUE, sizeof(val_row));
  g_array_set_size(r, files->len);
  for (guint i = 0; i < files->len; i++)
    if (!cfg_case_load(g_ptr_array_index(files, i), &g_array_index(r, val_row, i).c, err)) {
      val_rows_free(r);
      return false;
    }
  *rows = r;
  return true;
}

/* Whether row i is this share's. */
static bool val_in_share(guint i, int shard, int nshards)
{
  return nshards <= 1 || i % (guint)nshards == (guint)shard;
}

/* The rows the threads share: each takes the next index until none is left. */
typedef struct {
  GArray *rows;
  int shard, nshards;
  gint next;
} val_queue;

static gpointer val_run_queue(gpointer data)
{
  val_queue *q = data;
  for (guint i; (i = (guint)g_atomic_int_add(&q->next, 1)) < q->rows->len;) {
    val_row *row = &g_array_index(q->rows, val_row, i);
    if (val_in_share(i, q->shard, q->nshards) && !val_needs_main_thread(&row->c))
      val_run_case(row);
  }
  return NULL;
}

/* Plain threads, joined, rather than a GThreadPool: g_thread_pool_free returns once the tasks
 * are done but before its threads have exited (still releasing their GLib state under locks),
 * and GLib keeps a thread to spawn pool threads for the rest of the process. After the joins
 * no other thread exists when the DES cases fork. */
static void val_run_threaded(GArray *r, int threads, int shard, int nshards)
{
  val_queue q = {.rows = r, .shard = shard, .nshards = nshards};
  GPtrArray *workers = g_ptr_array_new();
  for (int t = 1; t < threads; t++)
    g_ptr_array_add(workers, g_thread_new("dlsim-validate", val_run_queue, &q));
  val_run_queue(&q);
  for (guint t = 0; t < workers->len; t++)
    g_thread_join(g_ptr_array_index(workers, t));
  g_ptr_array_free(workers, TRUE);
}

void val_run_rows(GArray *r, int threads, int shard, int nshards)
{
  if (threads > 1)
    val_run_threaded(r, threads, shard, nshards);
  for (guint i = 0; i < r->len; i++) {
    val_row *row = &g_array_index(r, val_row, i);
    if (val_in_share(i, shard, nshards) && (threads <= 1 || val_needs_main_thread(&row->c)))
      val_run_case(row);
  }
}

bool val_run_files(GPtrArray *files, int threads, GArray **rows, GError **err)
{
  if (!val_load_files(files, rows, err))
    return false;
  val_run_rows(*rows, threads, 0, 1);
  return true;
}

bool val_rows_leave_out_fits(GArray *rows, GError **err)
{
  for (guint i = 0; i < rows->len; i++) {
    cfg_case *c = &g_array_index(rows, val_row, i).c;
    if (c->role != CFG_CASE_FIT)
      continue;
    if (!c->unfit) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "case %s is fitted on but says nothing of how to undo it (key 'unfit')", c->name);
      return false;
    }
    char **set = sim_strv_concat(c->set, c->unfit);
    g_strfreev(c->set);
    c->set = set;
  }
  return true;
}

void val_rows_free(GArray *rows)
{
  if (!rows)
    return;
  for (guint i = 0; i < rows->len; i++) {
    val_row *row = &g_array_index(rows, val_row, i);
    cfg_case_clear(&row->c);
    calib_table_clear(&row->table);
    g_free(row->times);
    g_free(row->failure);
  }
  g_array_free(rows, TRUE);
}

const char *val_category(const cfg_case *c)
{
  const char *cmd = c->command ? c->command : "run";
  if (c->category > 0)
    return cfg_case_category_name(c->category);
  if (c->table)
    return val_is_gemm(c) ? "kernels" : "collectives";
  if (c->trace)
    return "traces";
  if (g_str_has_prefix(cmd, "memory") || strcmp(cmd, "deepspeed") == 0)
    return "memory";
  if (g_str_has_prefix(cmd, "serve"))
    return "serving";
  if (strcmp(cmd, "moe") == 0)
    return "moe";
  return "training";
}

static int val_compare_doubles(gconstpointer a, gconstpointer b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Whether more of the metric is better (a rate, a share of the peak, KV blocks, `fits`) or
 * worse (a time: `*_s`, `*_s.mean`; bytes; the `saturated` flag). */
static bool val_more_is_better(const char *metric)
{
  if (!metric || strstr(metric, "per_s") || strstr(metric, "GBps"))
    return true;
  return !(g_str_has_suffix(metric, "_s") || strstr(metric, "_s.") || strstr(metric, "bytes") ||
           strcmp(metric, "saturated") == 0);
}

/* 0/1 metrics, whose error is predicted - measured rather than a ratio */
static bool val_is_flag(const char *metric)
{
  return metric && (strcmp(metric, "saturated") == 0 || strcmp(metric, "fits") == 0);
}

/* A case's optimism: how much better than measured dlsim says things are, > 0 when it
 * predicts a step too fast, a rate too high or memory too small. A table's is its median row's:
 * busbw for collectives, time for GEMMs. Averaged per category, so that predicted / measured
 * - 1 of times and of rates (opposite signs for one too-fast model) do not cancel. */
double val_optimism(const val_row *r)
{
  if (r->c.table)
    return val_is_gemm(&r->c) ? 1 / (1 + r->gemm_errors.signed_median) - 1
                              : r->errors.signed_large;
  if (val_is_flag(r->c.metric))
    return val_more_is_better(r->c.metric) ? r->error : -r->error;
  return val_more_is_better(r->c.metric) ? r->error : 1 / (1 + r->error) - 1;
}

static void val_summary_of(const GArray *rows, const char *category, GArray *out)
{
  val_summary s = {.category = category};
  GArray *abs = g_array_new(FALSE, FALSE, sizeof(double));
  double signed_sum = 0;
  /* a table's error is a median |error|; its sign comes from the table's signed median */
  for (guint i = 0; i < rows->len; i++) {
    const val_row *r = &g_array_index(rows, val_row, i);
    if (strcmp(val_category(&r->c), category) != 0)
      continue;
    s.cases++;
    if (r->failure) {
      s.failed++;
      continue;
    }
    s.within += r->pass;
    double a = fabs(r->error);
    g_array_append_val(abs, a);
    signed_sum += val_optimism(r);
  }
  if (abs->len > 0) {
    g_array_sort(abs, val_compare_doubles);
    guint n = abs->len;
    s.median_abs = n % 2 ? g_array_index(abs, double, n / 2)
                         : (g_array_index(abs, double, n / 2 - 1) + g_array_index(abs, double, n / 2)) / 2;
    s.mean_signed = signed_sum / n;
  }
  g_array_free(abs, TRUE);
  if (s.cases > 0)
    g_array_append_val(out, s);
}

GArray *val_summarize(const GArray *rows)
{
  static const char *const order[] = {"training", "fsdp",    "memory", "moe",
                                      "collectives", "kernels", "serving", "traces",
                                      "megatron-ci"};
  GArray *out = g_array_new(FALSE, FALSE, sizeof(val_summary));
  for (size_t i = 0; i < G_N_ELEMENTS(order); i++)
    val_summary_of(rows, order[i], out);
  return out;
}

