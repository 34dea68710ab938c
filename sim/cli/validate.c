/* dlsim validate [CASE...] [--json]: predicted vs measured for every real case in
 * validation/cases/, with the error of each and whether the case was used for fitting. */
#include "calibration/calibration.h"
#include "cli/cli_internal.h"
#include "memory/memory.h"
#include "report/report.h"
#include "run/run.h"
#include "serving/serving.h"

#include <stdlib.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  cfg_case c;
  double predicted, error;
  bool pass;
  char *failure; /* the simulation could not run */
  /* table cases */
  calib_table table;
  double *times;
  calib_errors errors;
  calib_time_errors_t gemm_errors;
} val_row;

/* Finds a dotted path ("memory.peak_bytes", "ranks.0.total_bytes") in a JSON document. */
static bool val_json_path(const cJSON *j, const char *path, double *out)
{
  g_auto(GStrv) parts = g_strsplit(path, ".", -1);
  for (char **p = parts; *p && j; p++)
    j = cJSON_IsArray(j) ? cJSON_GetArrayItem(j, atoi(*p)) : cJSON_GetObjectItemCaseSensitive(j, *p);
  if (cJSON_IsBool(j)) {
    *out = cJSON_IsTrue(j) ? 1 : 0;
    return true;
  }
  if (!cJSON_IsNumber(j))
    return false;
  *out = j->valuedouble;
  return true;
}

/* dlsim serve --json (serve), or with --find-max-rate (serve-max-rate: adds max_rate_rps). */
static cJSON *val_serve_json(const cfg_cluster *cl, const cfg_workload *w, bool max_rate,
                             GError **err)
{
  cJSON *j = NULL;
  if (max_rate) {
    srv_max_rate m;
    if (srv_find_max_rate(cl, w, &m, err)) {
      j = m.max_rate > 0 ? srv_result_json(&m.at) : cJSON_CreateObject();
      cJSON_AddNumberToObject(j, "max_rate_rps", m.max_rate);
    }
    srv_max_rate_clear(&m);
    return j;
  }
  srv_result r;
  if (srv_simulate(cl, w, NULL, &r, err))
    j = srv_result_json(&r);
  srv_result_clear(&r);
  return j;
}

/* The JSON a command prints for this case and these overrides. */
static cJSON *val_command_json(const cfg_case *c, char *const *sets, GError **err)
{
  const char *cmd = c->command ? c->command : "run";
  if (strcmp(cmd, "run") == 0) {
    sim_options o = sim_options_for(c->engine ? ENG_DES : ENG_ANALYTIC);
    sim_result run;
    cJSON *j = sim_run_files(c->cluster, c->workload, sets, &o, &run, err) ? rep_run_json(&run) : NULL;
    sim_result_clear(&run);
    return j;
  }
  if (strcmp(cmd, "moe") == 0)
    return cli_moe_json(c->cluster, c->workload, sets, err);
  if (strcmp(cmd, "replay") == 0)
    return cli_replay_json(c->trace, c->cluster, sets, c->steps, c->engine, err);
  cfg_cluster *cl = NULL;
  cfg_workload *w = NULL;
  cJSON *j = NULL;
  if (!cfg_load_with(c->cluster, c->workload, sets, &cl, &w, err))
    return NULL;
  if (strcmp(cmd, "deepspeed") == 0) {
    const cfg_parallel *p = &w->parallel;
    mem_deepspeed e = mem_deepspeed_estimate(w->model.params, w->model.largest_layer_params,
                                             cl->node.gpus_per_node, cl->node.count, p->zero,
                                             p->offload != CFG_OFFLOAD_NONE, p->offload_params, false);
    j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "gpu_bytes", e.gpu);
    cJSON_AddNumberToObject(j, "cpu_bytes_per_node", e.cpu);
  } else if (strcmp(cmd, "memory") == 0 || strcmp(cmd, "memory-states") == 0) {
    mem_options o = {.states_only = strcmp(cmd, "memory-states") == 0};
    mem_report m;
    if (mem_estimate(w, cl, &o, &m, err)) {
      rep_memory r = {.cluster = cl, .workload = w, .memory = &m};
      j = rep_memory_json(&r);
    }
    mem_report_clear(&m);
  } else if (strcmp(cmd, "serve") == 0 || strcmp(cmd, "serve-max-rate") == 0) {
    j = val_serve_json(cl, w, strcmp(cmd, "serve-max-rate") == 0, err);
  } else {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "command '%s' is not one of run, memory, memory-states, deepspeed, moe, serve, "
                "serve-max-rate, replay", cmd);
  }
  cfg_cluster_free(cl);
  cfg_workload_free(w);
  return j;
}

static double val_unit(const char *unit)
{
  const struct {
    const char *name;
    double scale;
  } units[] = {{"GiB", 1073741824.0}, {"GB", 1e9}, {"MiB", 1048576.0}, {"MB", 1e6},
               {"ms", 1e-3},          {"us", 1e-6}, {"s", 1}};
  for (size_t i = 0; unit && i < G_N_ELEMENTS(units); i++)
    if (strcmp(unit, units[i].name) == 0)
      return units[i].scale;
  return 1;
}

static bool val_predict(const cfg_case *c, char *const *sets, double *out, GError **err)
{
  cJSON *j = val_command_json(c, sets, err);
  if (!j)
    return false;
  bool ok = val_json_path(j, c->metric, out);
  cJSON_Delete(j);
  if (!ok) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "metric '%s' is not a number in the %s output",
                c->metric, c->command ? c->command : "run");
    return false;
  }
  *out /= val_unit(c->unit);
  return true;
}

static bool val_is_gemm(const cfg_case *c)
{
  return c->op && strcmp(c->op, "gemm") == 0;
}

/* A table of GEMM times: predicted shape by shape, judged on the median time error. */
static void val_run_gemm_table(val_row *row)
{
  const cfg_case *c = &row->c;
  GError *err = NULL;
  cfg_cluster *cl = NULL;
  calib_columns cols = {.time_column = c->time_column, .filters = c->filter, .gemm = true};
  bool ok = (!c->time_unit || calib_time_unit(c->time_unit, &cols.time_scale, &err)) &&
            calib_table_load(c->table, &cols, &row->table, &err) &&
            cfg_load_with(c->cluster, NULL, c->set, &cl, NULL, &err);
  if (ok) {
    row->times = g_new(double, row->table.points->len);
    calib_gemm_predict(cl, (cfg_dtype)c->dtype, &row->table, row->times);
    calib_time_errors(&row->table, row->times, &row->gemm_errors);
    row->error = row->gemm_errors.median;
    row->pass = row->error <= c->tolerance;
  } else {
    row->failure = g_strdup(err->message);
    g_error_free(err);
  }
  cfg_cluster_free(cl);
}

/* A table of collective times: predicted size by size, judged on the median busbw error. */
static void val_run_table(val_row *row)
{
  const cfg_case *c = &row->c;
  if (val_is_gemm(c)) {
    val_run_gemm_table(row);
    return;
  }
  GError *err = NULL;
  cfg_cluster *cl = NULL;
  calib_target t = {.gpus = c->gpus, .group = c->group_size > 0 ? c->group_size : c->gpus,
                    .engine = c->engine ? ENG_DES : ENG_ANALYTIC, .algo = COLL_ALGO_AUTO,
                    .proto = COLL_PROTO_AUTO};
  calib_columns cols = {.size_column = c->size_column, .time_column = c->time_column,
                        .filters = c->filter};
  bool ok = prog_coll_parse(c->op, &t.op, &err) &&
            (!c->time_unit || calib_time_unit(c->time_unit, &cols.time_scale, &err)) &&
            calib_table_load(c->table, &cols, &row->table, &err) && cfg_load_with(c->cluster, NULL, c->set, &cl, NULL, &err);
  if (ok) {
    row->times = g_new(double, row->table.points->len);
    ok = calib_predict(cl, &t, &row->table, row->times, &err);
  }
  cfg_cluster_free(cl);
  if (!ok) {
    row->failure = g_strdup(err->message);
    g_error_free(err);
    return;
  }
  calib_errors_of(&row->table, row->times, &row->errors);
  row->error = row->errors.median_large;
  row->pass = (row->errors.n_large == 0 || row->errors.median_large <= c->tolerance) &&
              (row->errors.n_small == 0 || row->errors.median_small <= c->tolerance_small);
}

bool cli_case_predict(const cfg_case *c, char *const *extra, double *out, GError **err)
{
  g_auto(GStrv) sets = cli_strv_concat(c->set, extra);
  double value = 0, base = 1;
  if (!val_predict(c, sets, &value, err))
    return false;
  if (c->ratio_to) {
    g_auto(GStrv) ratio = cli_strv_concat(c->ratio_to, extra);
    if (!val_predict(c, ratio, &base, err))
      return false;
  }
  *out = value / base;
  return true;
}

static void val_run_case(val_row *row)
{
  if (row->c.table) {
    val_run_table(row);
    return;
  }
  GError *err = NULL;
  if (!cli_case_predict(&row->c, NULL, &row->predicted, &err)) {
    row->failure = g_strdup(err->message);
    g_error_free(err);
    return;
  }
  row->error = row->c.measured != 0 ? (row->predicted - row->c.measured) / row->c.measured
                                    : row->predicted - row->c.measured;
  row->pass = fabs(row->error) <= row->c.tolerance;
}

static int val_compare_paths(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

GPtrArray *cli_case_files(int argc, char **argv, GError **err)
{
  g_autofree char *dir = g_build_filename(cfg_data_dir(), "validation", "cases", NULL);
  GPtrArray *files = g_ptr_array_new_with_free_func(g_free);
  if (argc > 1) {
    for (int i = 1; i < argc; i++) {
      g_autofree char *base = g_str_has_suffix(argv[i], ".yaml") ? g_strdup(argv[i])
                                                                 : g_strdup_printf("%s.yaml", argv[i]);
      char *path = g_file_test(argv[i], G_FILE_TEST_IS_REGULAR) ? g_strdup(argv[i])
                                                                : g_build_filename(dir, base, NULL);
      if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "no validation case '%s' in %s", argv[i], dir);
        g_free(path);
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

static const char *val_role(cfg_case_role r)
{
  return r == CFG_CASE_FIT ? "fit" : r == CFG_CASE_CHECK ? "check" : "ref";
}

static void val_print_table(const val_row *r)
{
  printf("%s (%s): %s over %d GPUs%s, %s\n", r->c.name, val_role(r->c.role),
         r->c.op, r->c.gpus, r->c.group_size > 0 && r->c.group_size != r->c.gpus ? " in groups" : "",
         r->c.source);
  printf("  %14s %14s %14s %10s\n", "size (B)", "measured (us)", "predicted (us)", "busbw err");
  for (guint i = 0; i < r->table.points->len; i++) {
    const calib_point *p = &g_array_index(r->table.points, calib_point, i);
    printf("  %14.0f %14.2f %14.2f %+9.1f%%\n", p->size, p->time * 1e6, r->times[i] * 1e6,
           100 * (p->time / r->times[i] - 1));
  }
  const calib_errors *e = &r->errors;
  printf("  median |busbw error|:");
  if (e->n_large)
    printf(" >= 1 MiB %.1f %% (worst %.1f %%, %d sizes)", 100 * e->median_large,
           100 * e->worst_large, e->n_large);
  if (e->n_small)
    printf(" < 64 KiB %.1f %% (worst %.1f %%, %d sizes)", 100 * e->median_small,
           100 * e->worst_small, e->n_small);
  printf("\n\n");
}

static void val_print_gemm_table(const val_row *r)
{
  const calib_time_errors_t *e = &r->gemm_errors;
  printf("%s (%s): %s GEMM shapes, %s\n", r->c.name, val_role(r->c.role),
         cfg_dtype_name((cfg_dtype)r->c.dtype), r->c.source);
  printf("  |time error| over %d shapes: median %.1f %%, 90th percentile %.1f %%, worst %.1f %%\n\n",
         e->n, 100 * e->median, 100 * e->p90, 100 * e->worst);
}

static void val_print_text(const val_row *rows, guint n)
{
  for (guint i = 0; i < n; i++)
    if (rows[i].c.table && !rows[i].failure) {
      if (val_is_gemm(&rows[i].c))
        val_print_gemm_table(&rows[i]);
      else
        val_print_table(&rows[i]);
    }
  printf("%-40s %-5s %-21s %11s %11s %8s %6s\n", "case", "role", "metric", "measured", "predicted",
         "error", "");
  for (guint i = 0; i < n; i++) {
    const val_row *r = &rows[i];
    g_autofree char *metric = val_is_gemm(&r->c) ? g_strdup("time median")
                              : r->c.table      ? g_strdup("busbw median >=1MiB")
                              : r->c.ratio_to ? g_strdup_printf("%s ratio", r->c.metric)
                                              : g_strdup(r->c.metric);
    if (r->failure) {
      printf("%-40s %-5s %-21s %11.4g %11s %8s %6s  (%s)\n", r->c.name,
             val_role(r->c.role), metric, r->c.measured, "-", "-",
             "FAIL", r->failure);
      continue;
    }
    if (r->c.table)
      printf("%-40s %-5s %-21s %11s %11s %7.1f%% %6s\n", r->c.name,
             val_role(r->c.role), metric, "table", "table", 100 * r->error,
             r->pass ? "ok" : "FAIL");
    else
      printf("%-40s %-5s %-21s %11.4g %11.4g %+7.1f%% %6s\n", r->c.name,
             val_role(r->c.role), metric, r->c.measured, r->predicted,
             100 * r->error, r->pass ? "ok" : "FAIL");
  }
  printf("\nfit: the model was tuned on this number; check: it was not; ref: an analytic reference "
         "(a formula's output, not a measurement). See validation/README.md.\n");
}

static void val_print_json(const val_row *rows, guint n)
{
  cJSON *j = cJSON_CreateObject();
  cJSON *cases = cJSON_AddArrayToObject(j, "cases");
  for (guint i = 0; i < n; i++) {
    const val_row *r = &rows[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->c.name);
    cJSON_AddStringToObject(o, "role", val_role(r->c.role));
    bool gemm = val_is_gemm(&r->c);
    cJSON_AddStringToObject(o, "metric", gemm ? "time" : r->c.table ? "busbw" : r->c.metric);
    if (!r->c.table)
      cJSON_AddNumberToObject(o, "measured", r->c.measured);
    if (gemm && !r->failure) {
      cJSON_AddNumberToObject(o, "median_error", r->gemm_errors.median);
      cJSON_AddNumberToObject(o, "p90_error", r->gemm_errors.p90);
      cJSON_AddNumberToObject(o, "worst_error", r->gemm_errors.worst);
      cJSON_AddNumberToObject(o, "rows", r->gemm_errors.n);
    } else if (r->c.table && !r->failure) {
      const calib_errors *e = &r->errors;
      if (e->n_large) {
        cJSON_AddNumberToObject(o, "median_error_large", e->median_large);
        cJSON_AddNumberToObject(o, "worst_error_large", e->worst_large);
      }
      if (e->n_small) {
        cJSON_AddNumberToObject(o, "median_error_small", e->median_small);
        cJSON_AddNumberToObject(o, "worst_error_small", e->worst_small);
      }
      cJSON *rows_j = cJSON_AddArrayToObject(o, "rows");
      for (guint k = 0; k < r->table.points->len; k++) {
        const calib_point *p = &g_array_index(r->table.points, calib_point, k);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "size_bytes", p->size);
        cJSON_AddNumberToObject(x, "measured_us", p->time * 1e6);
        cJSON_AddNumberToObject(x, "predicted_us", r->times[k] * 1e6);
        cJSON_AddItemToArray(rows_j, x);
      }
    }
    if (r->failure) {
      cJSON_AddNullToObject(o, "predicted");
      cJSON_AddStringToObject(o, "failure", r->failure);
    } else {
      cJSON_AddNumberToObject(o, "predicted", r->predicted);
      cJSON_AddNumberToObject(o, "error", r->error);
    }
    cJSON_AddNumberToObject(o, "tolerance", r->c.tolerance);
    cJSON_AddBoolToObject(o, "pass", r->pass);
    cJSON_AddStringToObject(o, "source", r->c.source);
    cJSON_AddItemToArray(cases, o);
  }
  rep_json_print(stdout, j);
  cJSON_Delete(j);
}

int cli_validate(int argc, char **argv)
{
  gboolean json = FALSE;
  GOptionEntry entries[] = {{"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON", NULL},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  int code = 0;
  if (!cli_parse(entries, "[CASE...] - predicted vs measured for real cases", &argc, &argv, &code))
    return code;
  GError *err = NULL;
  GPtrArray *files = cli_case_files(argc, argv, &err);
  if (!files)
    return cli_fail(err);
  val_row *rows = g_new0(val_row, MAX(files->len, 1u));
  bool all_pass = true;
  for (guint i = 0; i < files->len; i++) {
    if (!cfg_case_load(g_ptr_array_index(files, i), &rows[i].c, &err)) {
      for (guint k = 0; k < i; k++)
        cfg_case_clear(&rows[k].c);
      g_free(rows);
      g_ptr_array_free(files, TRUE);
      return cli_fail(err);
    }
    val_run_case(&rows[i]);
    all_pass &= rows[i].pass;
  }
  if (json)
    val_print_json(rows, files->len);
  else
    val_print_text(rows, files->len);
  for (guint i = 0; i < files->len; i++) {
    cfg_case_clear(&rows[i].c);
    calib_table_clear(&rows[i].table);
    g_free(rows[i].times);
    g_free(rows[i].failure);
  }
  g_free(rows);
  g_ptr_array_free(files, TRUE);
  return all_pass ? 0 : 1;
}
