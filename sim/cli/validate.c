/* dlsim validate [CASE...] [--verbose] [--json | --csv] [--check-pins | --update-pins]: predicted vs
 * measured for every real case in validation/cases/ (sim/validation/): a summary per kind of
 * prediction (exit 1 when a case got worse than its pin), every case with --verbose or when
 * cases are named (exit 1 when one is outside its tolerance), or JSON. */
#include "cli/cli_internal.h"
#include "report/report.h"
#include "uncertainty/uncertainty.h"
#include "validation/validation.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void vcli_print_table(const val_row *r)
{
  printf("%s (%s): %s over %d GPUs%s, %s\n", r->c.name, val_role_name(r->c.role),
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

static void vcli_print_gemm_table(const val_row *r)
{
  const calib_time_errors_t *e = &r->gemm_errors;
  printf("%s (%s): %s GEMM shapes, %s\n", r->c.name, val_role_name(r->c.role),
         cfg_dtype_name((cfg_dtype)r->c.dtype), r->c.source);
  printf("  |time error| over %d shapes: median %.1f %%, 90th percentile %.1f %%, worst %.1f %%\n\n",
         e->n, 100 * e->median, 100 * e->p90, 100 * e->worst);
}

static void vcli_print_text(const val_row *rows, guint n)
{
  for (guint i = 0; i < n; i++)
    if (rows[i].c.table && !rows[i].failure) {
      if (val_is_gemm(&rows[i].c))
        vcli_print_gemm_table(&rows[i]);
      else
        vcli_print_table(&rows[i]);
    }
  printf("%-40s %-5s %-21s %11s %11s %8s %6s\n", "case", "role", "metric", "measured", "predicted",
         "error", "");
  for (guint i = 0; i < n; i++) {
    const val_row *r = &rows[i];
    g_autofree char *metric = val_metric_label(&r->c);
    if (r->failure) {
      printf("%-40s %-5s %-21s %11.4g %11s %8s %6s  (%s)\n", r->c.name,
             val_role_name(r->c.role), metric, r->c.measured, "-", "-",
             "FAIL", r->failure);
      continue;
    }
    if (r->c.table)
      printf("%-40s %-5s %-21s %11s %11s %7.1f%% %6s\n", r->c.name,
             val_role_name(r->c.role), metric, "table", "table", 100 * r->error,
             r->pass ? "ok" : "FAIL");
    else
      printf("%-40s %-5s %-21s %11.4g %11.4g %+7.1f%% %6s\n", r->c.name,
             val_role_name(r->c.role), metric, r->c.measured, r->predicted,
             100 * r->error, r->pass ? "ok" : "FAIL");
  }
  printf("\nfit: the model was tuned on this number; check: it was not; ref: an analytic reference "
         "(a formula's output, not a measurement). See validation/README.md.\n");
}

static void vcli_print_json(const val_row *rows, guint n, bool csv)
{
  cJSON *j = cJSON_CreateObject();
  cJSON *cases = cJSON_AddArrayToObject(j, "cases");
  for (guint i = 0; i < n; i++) {
    const val_row *r = &rows[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->c.name);
    cJSON_AddStringToObject(o, "role", val_role_name(r->c.role));
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
    /* after the first columns, which scripts read by position */
    cJSON_AddStringToObject(o, "category", val_category(&r->c));
    if (!r->failure)
      cJSON_AddNumberToObject(o, "optimism", val_optimism(r));
    /* JSON only: the CSV's columns stay those that before / after comparisons diff */
    const char *band = csv ? NULL : val_interval_kind(r);
    if (band)
      cJSON_AddStringToObject(o, "interval_kind", band);
    cJSON_AddItemToArray(cases, o);
  }
  if (csv)
    cli_csv_print(stdout, cases);
  else
    rep_json_print(stdout, j);
  cJSON_Delete(j);
}

/* A case that could not run (a stuck DES child the watchdog killed, a machine under too much
 * load) would be pinned as "failed" and stop guarding its error: --update-pins names them and
 * writes nothing. */
static bool vcli_refuse_failures(const GArray *rows)
{
  guint failed = 0;
  for (guint i = 0; i < rows->len; i++) {
    const val_row *r = &g_array_index(rows, val_row, i);
    if (r->failure) {
      fprintf(stderr, "dlsim validate: case %s did not run: %s\n", r->c.name, r->failure);
      failed++;
    }
  }
  if (failed)
    fprintf(stderr, "dlsim validate: --update-pins wrote nothing: %u case(s) did not run\n", failed);
  return failed > 0;
}

/* --check-pins: every case against its pin; --update-pins: the pins become today's errors. */
static int vcli_pins(const GArray *rows, bool update, bool all_cases)
{
  GError *err = NULL;
  g_autofree char *path = val_pins_path();
  if (update) {
    if (!all_cases) {
      fprintf(stderr, "dlsim: error: --update-pins runs every case: name none\n");
      return 2;
    }
    if (vcli_refuse_failures(rows))
      return 1;
    g_autofree char *bands = val_intervals_path();
    if (!val_pins_write(path, rows, &err) || !val_intervals_write(bands, rows, &err))
      return cli_fail(err);
    printf("dlsim validate: %u pins written to %s, interval bands to %s\n", rows->len, path, bands);
    return 0;
  }
  GHashTable *pins = NULL;
  if (!val_pins_load(path, &pins, &err))
    return cli_fail(err);
  GString *report = g_string_new(NULL);
  bool ok = val_pins_check(rows, pins, all_cases, report);
  printf("dlsim validate: %u cases against %u pins: %s\n%s", rows->len, g_hash_table_size(pins),
         ok ? "none worse than its pin" : "WORSE", report->str);
  g_string_free(report, TRUE);
  g_hash_table_destroy(pins);
  return ok ? 0 : 1;
}

/* The summary a newcomer reads: per kind of prediction, how many cases, their median |error|,
 * the mean optimism (a signed error that is > 0 when dlsim promises more than was measured:
 * a bias cannot hide behind a good median) and how many are within tolerance; then the cases
 * worse than their pins. */
static bool vcli_print_summary(const GArray *rows, bool loso)
{
  GArray *sum = val_summarize(rows);
  printf("dlsim validate: %u real measurements (validation/cases), predicted in process%s\n\n",
         rows->len, loso ? ", leaving each fitted source out (its fit undone)" : "");
  printf("  %-12s %6s %14s %14s %14s\n", "category", "cases", "median |error|", "mean optimism",
         "within tol.");
  for (guint i = 0; i < sum->len; i++) {
    const val_summary *s = &g_array_index(sum, val_summary, i);
    g_autofree char *mean = isnan(s->mean_signed) ? g_strdup("-")
                                                  : g_strdup_printf("%+.1f%%", 100 * s->mean_signed);
    printf("  %-12s %6d %13.1f%% %14s %9d of %d", s->category, s->cases, 100 * s->median_abs, mean,
           s->within, s->cases);
    if (s->failed)
      printf("  (%d did not run)", s->failed);
    printf("\n");
  }
  g_array_free(sum, TRUE);
  printf("\n  optimism: + when dlsim predicts a faster step, a higher rate or less memory than measured\n");
  if (loso) { /* the pins are of the fitted model: nothing to hold these errors to */
    printf("\n  fit cases predicted with their 'unfit' overrides; every case: --loso --verbose\n");
    return true;
  }
  g_autofree char *path = val_pins_path();
  GHashTable *pins = NULL;
  GString *report = g_string_new(NULL);
  bool ok = val_pins_load(path, &pins, NULL) && val_pins_check(rows, pins, true, report);
  printf("\n  %s\n%s", ok ? "no case is worse than its pin (validation/pins.tsv)"
                           : "WORSE than the pins (validation/pins.tsv):",
         report->str);
  printf("  every case, with its source and role (fit or check): dlsim validate --verbose;\n"
         "  what was fitted on what, and the known misses: validation/README.md\n");
  g_string_free(report, TRUE);
  if (pins)
    g_hash_table_destroy(pins);
  return ok;
}

/* ---- sharing the cases over MPI ranks ------------------------------------------------------ */

/* What predicting a case produced, as it travels to rank 0 (every rank loaded the case). */
typedef struct {
  double predicted, error;
  calib_errors errors;
  calib_time_errors_t gemm_errors;
  gint32 pass, has_table, npoints, has_times, failure_len, run_kind;
} vcli_outcome;

static GBytes *vcli_pack(const val_row *r)
{
  vcli_outcome o = {.predicted = r->predicted, .error = r->error, .errors = r->errors,
                    .gemm_errors = r->gemm_errors, .pass = r->pass,
                    .has_table = r->table.points != NULL,
                    .npoints = r->table.points ? (gint32)r->table.points->len : 0,
                    .has_times = r->times != NULL,
                    .failure_len = r->failure ? (gint32)strlen(r->failure) + 1 : 0,
                    .run_kind = unc_run_kind_index(r->run_kind)};
  GByteArray *b = g_byte_array_new();
  g_byte_array_append(b, (const guint8 *)&o, sizeof o);
  if (o.npoints)
    g_byte_array_append(b, (const guint8 *)r->table.points->data, (guint)(o.npoints * sizeof(calib_point)));
  if (o.has_times)
    g_byte_array_append(b, (const guint8 *)r->times, (guint)(o.npoints * sizeof(double)));
  if (o.failure_len)
    g_byte_array_append(b, (const guint8 *)r->failure, (guint)o.failure_len);
  return g_byte_array_free_to_bytes(b);
}

static void vcli_unpack(val_row *r, GBytes *item)
{
  gsize n = 0;
  const char *p = item ? g_bytes_get_data(item, &n) : NULL;
  vcli_outcome o;
  if (n < sizeof o) {
    r->failure = g_strdup("no result came back from its MPI rank");
    return;
  }
  memcpy(&o, p, sizeof o);
  p += sizeof o;
  r->predicted = o.predicted;
  r->error = o.error;
  r->errors = o.errors;
  r->gemm_errors = o.gemm_errors;
  r->pass = o.pass;
  if (o.has_table) {
    r->table.path = g_strdup(r->c.table);
    r->table.points = g_array_new(FALSE, FALSE, sizeof(calib_point));
    g_array_append_vals(r->table.points, p, (guint)o.npoints);
    p += o.npoints * sizeof(calib_point);
  }
  if (o.has_times) {
    r->times = g_memdup2(p, o.npoints * sizeof(double));
    p += o.npoints * sizeof(double);
  }
  if (o.failure_len)
    r->failure = g_strndup(p, (gsize)o.failure_len);
  r->run_kind = unc_run_kind_name(o.run_kind);
}

/* Each rank predicted its share of the rows; rank 0 gets the others'. */
static void vcli_share(const cli_mpi *m, GArray *rows)
{
  if (m->size == 1)
    return;
  GPtrArray *items = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  g_ptr_array_set_size(items, (gint)rows->len);
  for (guint i = 0; i < rows->len; i++)
    if (cli_mpi_takes(m, i))
      items->pdata[i] = vcli_pack(&g_array_index(rows, val_row, i));
  cli_mpi_gather_items(m, items);
  for (guint i = 0; m->rank == 0 && i < rows->len; i++)
    if (!cli_mpi_takes(m, i))
      vcli_unpack(&g_array_index(rows, val_row, i), items->pdata[i]);
  g_ptr_array_free(items, TRUE);
}

/* What to print: the options, and whether cases were named. */
typedef struct {
  gboolean json, csv, check, update, verbose, loso;
  bool named;
} vcli_output;

/* The report and its exit code, from every row (rank 0). */
static int vcli_report(const GArray *rows, const vcli_output *o)
{
  bool all_pass = true;
  for (guint i = 0; i < rows->len; i++)
    all_pass &= g_array_index(rows, val_row, i).pass;
  if (o->check || o->update)
    return vcli_pins(rows, o->update, !o->named);
  if (o->json || o->csv) {
    vcli_print_json((const val_row *)rows->data, rows->len, o->csv);
    return all_pass ? 0 : 1;
  }
  if (o->verbose || o->named) { /* named cases: their rows */
    vcli_print_text((const val_row *)rows->data, rows->len);
    return all_pass ? 0 : 1;
  }
  /* all cases: the summary, failing only when a case got worse than its pin */
  return vcli_print_summary(rows, o->loso) ? 0 : 1;
}

int cli_validate(int argc, char **argv)
{
  vcli_output o = {0};
  int threads = 2;
  GOptionEntry entries[] = {
      cli_opt(CLI_JSON, &o.json, NULL),
      cli_opt(CLI_CSV, &o.csv,
              "Print CSV: one row per case (measured and predicted in the metric's unit, "
              "error and tolerance as fractions)"),
      {"check-pins", 0, 0, G_OPTION_ARG_NONE, &o.check,
       "Fail if any case's |error| grew more than a point beyond validation/pins.tsv", NULL},
      {"update-pins", 0, 0, G_OPTION_ARG_NONE, &o.update, "Write today's errors to validation/pins.tsv", NULL},
      {"loso", 0, 0, G_OPTION_ARG_NONE, &o.loso,
       "Leave one source out: predict every fit case as if it had not been fitted on", NULL},
      cli_opt(CLI_THREADS, &threads, "Cases run at once (default 2)"),
      cli_opt(CLI_VERBOSE, &o.verbose, "Every case (the summary is the default)"),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "[CASE...] - predicted vs measured for real cases", &argc, &argv, &code))
    return code;
  if (threads < 1 || (o.check && o.update) || (o.loso && (o.check || o.update))) {
    fprintf(stderr, "dlsim: error: %s\n", threads < 1  ? "--threads: expected N >= 1"
                                           : o.loso ? "--loso: pins are of the fitted model, not with --check-pins or --update-pins"
                                                  : "--check-pins or --update-pins: one of them");
    return 2;
  }
  o.named = argc > 1;
  GError *err = NULL;
  cli_mpi mpi;
  cli_mpi_init(&mpi);
  GPtrArray *files = val_case_files(argv + 1, &err);
  GArray *rows = NULL;
  bool loaded = files && val_load_files(files, &rows, &err) &&
                (!o.loso || val_rows_leave_out_fits(rows, &err));
  if (loaded) {
    /* with MPI, each rank predicts its share of the cases on its own threads */
    val_run_rows(rows, threads, mpi.rank, mpi.size);
    vcli_share(&mpi, rows);
    if (mpi.rank == 0)
      code = vcli_report(rows, &o);
  }
  val_rows_free(rows);
  if (files)
    g_ptr_array_free(files, TRUE);
  return cli_mpi_finish(&mpi, code, loaded ? NULL : err);
}
