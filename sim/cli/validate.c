/* dlsim validate [CASE...] [--json]: predicted vs measured for every real case in
 * validation/cases/, with the error of each and whether the case was used for fitting. */
#include "cli/cli.h"
#include "pipeline/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  cfg_case c;
  double predicted, error;
  bool pass;
  char *failure; /* the simulation could not run */
} val_row;

static bool val_metric(const pipe_run *run, const char *metric, double *out, GError **err)
{
  rep_run rep;
  rep_figures f;
  pipe_report_of(run, &rep);
  rep_run_figures(&rep, &f);
  const struct {
    const char *name;
    double value;
  } metrics[] = {{"step_time_s", f.step_time},       {"samples_per_s", f.samples_per_s},
                 {"tokens_per_s", f.tokens_per_s},   {"mfu", f.mfu},
                 {"hfu", f.hfu},                     {"model_tflops_per_gpu", f.model_tflops_per_gpu},
                 {"peak_bytes", f.peak_bytes}};
  for (size_t i = 0; i < G_N_ELEMENTS(metrics); i++)
    if (strcmp(metric, metrics[i].name) == 0) {
      *out = metrics[i].value;
      return true;
    }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "metric '%s' is not one of step_time_s, samples_per_s, tokens_per_s, mfu, hfu, "
              "model_tflops_per_gpu, peak_bytes",
              metric);
  return false;
}

static bool val_predict(const cfg_case *c, char *const *sets, double *out, GError **err)
{
  pipe_run run;
  bool ok = pipe_simulate(c->cluster, c->workload, sets, c->engine ? ENG_DES : ENG_ANALYTIC, false,
                          &run, err) &&
            val_metric(&run, c->metric, out, err);
  pipe_clear(&run);
  return ok;
}

static void val_run_case(val_row *row)
{
  GError *err = NULL;
  double value = 0, base = 1;
  bool ok = val_predict(&row->c, row->c.set, &value, &err) &&
            (!row->c.ratio_to || val_predict(&row->c, row->c.ratio_to, &base, &err));
  if (!ok) {
    row->failure = g_strdup(err->message);
    g_error_free(err);
    return;
  }
  row->predicted = value / base;
  row->error = (row->predicted - row->c.measured) / row->c.measured;
  row->pass = fabs(row->error) <= row->c.tolerance;
}

static int val_compare_paths(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static GPtrArray *val_case_files(int argc, char **argv, GError **err)
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

static void val_print_text(const val_row *rows, guint n)
{
  printf("%-40s %-5s %-21s %11s %11s %8s %6s\n", "case", "role", "metric", "measured", "predicted",
         "error", "");
  for (guint i = 0; i < n; i++) {
    const val_row *r = &rows[i];
    g_autofree char *metric = r->c.ratio_to ? g_strdup_printf("%s ratio", r->c.metric)
                                             : g_strdup(r->c.metric);
    if (r->failure) {
      printf("%-40s %-5s %-21s %11.4g %11s %8s %6s  (%s)\n", r->c.name,
             r->c.role == CFG_CASE_FIT ? "fit" : "check", metric, r->c.measured, "-", "-",
             "FAIL", r->failure);
      continue;
    }
    printf("%-40s %-5s %-21s %11.4g %11.4g %+7.1f%% %6s\n", r->c.name,
           r->c.role == CFG_CASE_FIT ? "fit" : "check", metric, r->c.measured, r->predicted,
           100 * r->error, r->pass ? "ok" : "FAIL");
  }
  printf("\nfit: the model was tuned on this number; check: it was not (validation/README.md).\n");
}

static void val_print_json(const val_row *rows, guint n)
{
  cJSON *j = cJSON_CreateObject();
  cJSON *cases = cJSON_AddArrayToObject(j, "cases");
  for (guint i = 0; i < n; i++) {
    const val_row *r = &rows[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->c.name);
    cJSON_AddStringToObject(o, "role", r->c.role == CFG_CASE_FIT ? "fit" : "check");
    cJSON_AddStringToObject(o, "metric", r->c.metric);
    cJSON_AddNumberToObject(o, "measured", r->c.measured);
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
  GPtrArray *files = val_case_files(argc, argv, &err);
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
    g_free(rows[i].failure);
  }
  g_free(rows);
  g_ptr_array_free(files, TRUE);
  return all_pass ? 0 : 1;
}
