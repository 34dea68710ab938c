/* Validation: real measurements (validation/cases/) through the binary, and the validation
 * module in process: pins, case fits, and every case against its pin. */
#include "helpers.h"
#include "run/run.h"
#include "validation/validation.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

static cJSON *validate(const char *cases)
{
  g_autofree char *args = g_strdup_printf("validate --json %s", cases);
  th_proc p = th_dlsim(args);
  cJSON *j = cJSON_Parse(p.out);
  cr_assert_not_null(j, "%s", p.out);
  th_proc_clear(&p);
  return j;
}

static double case_error(cJSON *j, const char *name)
{
  cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases"))
  {
    if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, name) == 0) {
      cJSON *e = cJSON_GetObjectItem(c, "error");
      cr_assert(cJSON_IsNumber(e), "%s did not run", name);
      return e->valuedouble;
    }
  }
  cr_assert_fail("no case %s", name);
  return NAN;
}

Test(validation, horovod_resnet50_two_nodes_scales_within_5_percent, .timeout = 60)
{
  cJSON *j = validate("horovod-resnet50-v100-1gpu horovod-resnet50-v100-2node "
                      "horovod-resnet50-v100-2node-scaling");
  /* the fit reproduces its own number; the checks were not fitted */
  cr_assert(fabs(case_error(j, "horovod-resnet50-v100-1gpu")) < 0.001);
  cr_assert(fabs(case_error(j, "horovod-resnet50-v100-2node-scaling")) <= 0.05);
  cr_assert(fabs(case_error(j, "horovod-resnet50-v100-2node")) <= 0.05);
  cJSON_Delete(j);
}

/* Two Megatron CI mechanisms end to end, on check cases: GB200's deterministic 7B runs take
 * FlashAttention-2 (cuDNN's deterministic backward on Blackwell takes no dropout), 55 % and
 * 47 % too fast with cuDNN's rates; Megatron's own modules cost the host less than
 * Transformer Engine's, 46 % too slow on BERT's local spec with TE's host time. */
Test(validation, gb200_deterministic_7b_and_local_modules_are_within_tolerance, .timeout = 120)
{
  const char *names[] = {"mci-gb200-gpt3-7b-tp4-pp1-memory-speed",
                         "mci-gb200-gpt3-7b-tp1-pp4-memory-speed",
                         "mci-h100-bert-mcore-tp2-pp2-local-spec", NULL};
  g_autofree char *list = g_strjoinv(" ", (char **)names);
  cJSON *j = validate(list);
  for (size_t i = 0; names[i]; i++)
    cr_expect(fabs(case_error(j, names[i])) <= 0.25, "%s: %+.1f %%", names[i],
              100 * case_error(j, names[i]));
  cJSON_Delete(j);
}

/* golden_history.csv (validation/megatron_ci/golden-history.py): every CI run that wrote a
 * Megatron CI test's golden file, newest first, and whether the run was out of line with the
 * runs before it. Keyed by "platform/test_case"; each value the test's runs as rows of cells. */
static GHashTable *golden_runs(void)
{
  g_autofree char *path =
      g_build_filename(DLSIM_SOURCE_DIR, "validation/megatron_ci/golden_history.csv", NULL);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "%s is missing", path);
  GHashTable *runs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                           (GDestroyNotify)g_ptr_array_unref);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (size_t i = 1; lines[i] && *lines[i]; i++) {
    char **cells = g_strsplit(lines[i], ",", -1);
    cr_assert_eq(g_strv_length(cells), 11, "%s:%zu: 11 columns expected", path, i + 1);
    char *key = g_strdup_printf("%s/%s", cells[0], cells[2]);
    GPtrArray *test = g_hash_table_lookup(runs, key);
    if (!test) {
      test = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
      g_hash_table_insert(runs, g_strdup(key), test);
    }
    g_ptr_array_add(test, cells);
    g_free(key);
  }
  return runs;
}

/* A golden file holds one CI run's step times; the H100 run that refreshed 36 files with the
 * 26.04 container measured them 1.48x their runs before and after it (validation/README.md,
 * "Megatron-LM's CI: which CI run measured a row"). A case takes its step time from the newest
 * run of its test that was in line, and says which. */
Test(validation, megatron_ci_cases_take_no_step_time_from_an_out_of_line_ci_run)
{
  g_autoptr(GHashTable) runs = golden_runs();
  GError *err = NULL;
  GPtrArray *files = val_case_files(NULL, &err);
  cr_assert(files, "%s", err ? err->message : "");
  g_autoptr(GRegex) re = g_regex_new(
      "@ ([0-9a-f]+) tests/functional_tests/test_cases/[a-z]+/([A-Za-z0-9_]+)/"
      "golden_values_dev_dgx_([a-z0-9]+)\\.json(?s:.*)\nmeasured: ([0-9.]+)", 0, 0, NULL);
  int cases = 0, rerouted = 0;
  for (guint i = 0; i < files->len; i++) {
    const char *path = g_ptr_array_index(files, i);
    if (!strstr(path, "/mci-"))
      continue;
    g_autofree char *text = NULL;
    cr_assert(g_file_get_contents(path, &text, NULL, NULL));
    g_autoptr(GMatchInfo) m = NULL;
    cr_assert(g_regex_match(re, text, 0, &m), "%s: no golden file or measurement", path);
    g_autofree char *commit = g_match_info_fetch(m, 1), *test = g_match_info_fetch(m, 2);
    g_autofree char *platform = g_match_info_fetch(m, 3), *measured = g_match_info_fetch(m, 4);
    g_autofree char *key = g_strdup_printf("%s/%s", platform, test);
    GPtrArray *history = g_hash_table_lookup(runs, key);
    cr_assert(history, "%s: %s has no runs in golden_history.csv", path, key);
    /* the summary's commit stands for the newest run; any other commit names its run */
    char **taken = g_ptr_array_index(history, 0);
    bool summary = g_str_has_prefix("d98e8a64ddf34856e74b24714e3bedb2f5a39553", commit);
    for (guint r = 0; r < history->len && !summary; r++)
      if (g_str_has_prefix(((char **)g_ptr_array_index(history, r))[3], commit))
        taken = g_ptr_array_index(history, r);
    cr_expect_str_eq(taken[10], "false", "%s takes its step time from the out-of-line run %s",
                     path, taken[3]);
    if (!summary) {
      cr_expect(g_str_has_prefix(taken[3], commit), "%s: run %s not in the history", path, commit);
      cr_expect_float_eq(g_ascii_strtod(measured, NULL), g_ascii_strtod(taken[7], NULL), 1e-9,
                         "%s: measured %s, its run's median %s", path, measured, taken[7]);
      rerouted++;
    }
    cases++;
  }
  cr_assert_eq(cases, 107);
  cr_assert_eq(rerouted, 19);
  g_ptr_array_free(files, TRUE);
}

Test(validation, bad_case_names_are_usage_errors)
{
  th_proc p = th_dlsim("validate no-such-case");
  cr_assert_eq(p.status, 2);
  cr_assert(strstr(p.out, "no validation case 'no-such-case'"), "%s", p.out);
  th_proc_clear(&p);
}

/* ---- the module, in process ------------------------------------------------------------- */

static GArray *pin_rows(const char *const *names, const double *errors, int n)
{
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(val_row));
  g_array_set_size(rows, (guint)n);
  for (int i = 0; i < n; i++) {
    val_row *r = &g_array_index(rows, val_row, i);
    r->c.name = g_strdup(names[i]);
    if (isnan(errors[i]))
      r->failure = g_strdup("it did not run");
    else
      r->error = errors[i];
  }
  return rows;
}

static GHashTable *pins_of(const char *text)
{
  g_autofree char *path = th_write("pins.tsv", text);
  GHashTable *pins = NULL;
  GError *err = NULL;
  cr_assert(val_pins_load(path, &pins, &err), "%s", err ? err->message : "");
  return pins;
}

Test(validation, a_case_may_grow_one_point_beyond_its_pin_and_no_more)
{
  GHashTable *pins = pins_of("# comment\na\t10.00\nb\t2.00\nc\tfailed\n");
  const char *names[] = {"a", "b", "c"};
  const double within[] = {-0.1099, 0.0299, NAN}, worse[] = {0.1101, 0.01, 0.5};
  GArray *ok = pin_rows(names, within, 3), *bad = pin_rows(names, worse, 3);
  GString *report = g_string_new(NULL);
  cr_assert(val_pins_check(ok, pins, true, report), "%s", report->str);
  cr_assert_str_empty(report->str);
  cr_assert_not(val_pins_check(bad, pins, true, report));
  cr_assert(strstr(report->str, "case a: |error| 11.01 % > pin 10.00 % + 1"), "%s", report->str);
  cr_assert_null(strstr(report->str, "case b"), "b improved");
  cr_assert_null(strstr(report->str, "case c"), "c was failing and now runs");
  g_string_free(report, TRUE);
  val_rows_free(ok);
  val_rows_free(bad);
  g_hash_table_destroy(pins);
}

Test(validation, a_missing_pin_a_gone_case_and_a_new_failure_are_violations)
{
  GHashTable *pins = pins_of("a\t1.00\ngone\t3.00\n");
  const char *names[] = {"a", "new"};
  const double errors[] = {NAN, 0.01};
  GArray *rows = pin_rows(names, errors, 2);
  GString *report = g_string_new(NULL);
  cr_assert_not(val_pins_check(rows, pins, true, report));
  cr_assert(strstr(report->str, "case a: failed (it did not run)"), "%s", report->str);
  cr_assert(strstr(report->str, "case new has no pin"), "%s", report->str);
  cr_assert(strstr(report->str, "pinned case gone is gone"), "%s", report->str);
  g_string_truncate(report, 0);
  const char *one[] = {"a"};
  const double fine[] = {0.005};
  GArray *subset = pin_rows(one, fine, 1);
  cr_assert(val_pins_check(subset, pins, false, report), "a subset answers for itself: %s", report->str);
  g_string_free(report, TRUE);
  val_rows_free(rows);
  val_rows_free(subset);
  g_hash_table_destroy(pins);
}

Test(validation, a_bad_pin_line_names_its_file_and_line)
{
  g_autofree char *path = th_write("bad-pins.tsv", "a\t1.0\nb 2.0\n");
  GHashTable *pins = NULL;
  GError *err = NULL;
  cr_assert_not(val_pins_load(path, &pins, &err));
  cr_assert(strstr(err->message, "bad-pins.tsv:2:"), "%s", err->message);
  g_error_free(err);
}

Test(validation, pins_written_are_pins_read)
{
  const char *names[] = {"x", "y"};
  const double errors[] = {-0.1234, NAN};
  GArray *rows = pin_rows(names, errors, 2);
  g_autofree char *path = th_write("pins-out.tsv", "");
  GError *err = NULL;
  cr_assert(val_pins_write(path, rows, &err), "%s", err ? err->message : "");
  GHashTable *pins = NULL;
  cr_assert(val_pins_load(path, &pins, &err));
  cr_assert_float_eq(((val_pin *)g_hash_table_lookup(pins, "x"))->abs_error_pct, 12.34, 1e-9);
  cr_assert(isnan(((val_pin *)g_hash_table_lookup(pins, "y"))->abs_error_pct));
  g_hash_table_destroy(pins);
  val_rows_free(rows);
}

/* A case file made here: resnet50 on one V100, its throughput as if the convolutions ran at
 * 0.70 of peak; the fit starts at 0.50 and must find 0.70 again. */
Test(validation, a_case_fit_recovers_the_parameter_that_made_the_measurement, .timeout = 120)
{
  const char *truth[] = {"gpu.efficiency.flops.conv=0.70", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("v100-edr", "resnet50-horovod", truth, &c, &w));
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result r;
  cr_assert(sim_run(c, w, &o, &r, NULL));
  g_autofree char *yaml = g_strdup_printf(
      "name: synthetic-resnet\nrole: fit\nsource: made by this test\n"
      "cluster: %s/configs/clusters/v100-edr.yaml\n"
      "workload: %s/configs/workloads/resnet50-horovod.yaml\n"
      "engine: analytic\nmetric: samples_per_s\nmeasured: %.9g\n",
      DLSIM_SOURCE_DIR, DLSIM_SOURCE_DIR, r.samples_per_s);
  sim_result_clear(&r);
  cfg_workload_free(w);
  cfg_cluster_free(c);
  g_autofree char *path = th_write("synthetic-resnet.yaml", yaml);
  char *cases[] = {path, NULL}, *params[] = {"gpu.efficiency.flops.conv=0.5", NULL};
  val_fit f;
  GError *err = NULL;
  cr_assert(val_fit_init(&f, cases, params, NULL, &err), "%s", err ? err->message : "");
  cr_assert(val_fit_loss(&f) > 0.05, "0.5 is far from the truth");
  cr_assert(val_fit_run(&f, &err), "%s", err ? err->message : "");
  cr_assert_float_eq(f.values[0], 0.70, 0.005, "fitted %g", f.values[0]);
  cr_assert(val_fit_loss(&f) < 1e-3);
  val_fit_clear(&f);
}

Test(validation, a_replayed_trace_is_not_fitted_by_case)
{
  char *cases[] = {"trace-v100-2rank-fit", NULL}, *params[] = {"gpu.efficiency.sustained=0.9", NULL};
  val_fit f;
  GError *err = NULL;
  cr_assert_not(val_fit_init(&f, cases, params, NULL, &err));
  cr_assert(strstr(err->message, "calibrate --trace"), "%s", err->message);
  g_error_free(err);
  val_fit_clear(&f);
}

/* The accuracy regression guard: every case of validation/cases/, in process, against
 * validation/pins.tsv. A model change that makes any case worse by more than a point fails
 * here; one that improves a case updates its pin (dlsim validate --update-pins). */
Test(validation, every_case_is_within_a_point_of_its_pin, .timeout = 900)
{
  GError *err = NULL;
  GPtrArray *files = val_case_files(NULL, &err);
  cr_assert(files && files->len > 300, "%s", err ? err->message : "");
  GArray *rows = NULL;
  cr_assert(val_run_files(files, 1, &rows, &err), "%s", err ? err->message : "");
  g_autofree char *path = val_pins_path();
  GHashTable *pins = NULL;
  cr_assert(val_pins_load(path, &pins, &err), "%s", err ? err->message : "");
  GString *report = g_string_new(NULL);
  bool ok = val_pins_check(rows, pins, true, report);
  cr_assert(ok, "%s", report->str);
  g_string_free(report, TRUE);
  g_hash_table_destroy(pins);
  val_rows_free(rows);
  g_ptr_array_free(files, TRUE);
}

Test(validation, the_summary_gives_each_category_its_median_and_signed_error)
{
  const char *names[] = {"a", "b", "c", "d"};
  const double errors[] = {-0.10, 0.02, 0.30, NAN};
  GArray *rows = pin_rows(names, errors, 4);
  const char *commands[] = {NULL, "run", "serve", "serve"};
  for (int i = 0; i < 4; i++) {
    val_row *r = &g_array_index(rows, val_row, i);
    r->c.command = commands[i] ? g_strdup(commands[i]) : NULL;
    r->pass = fabs(r->error) <= 0.1 && !r->failure;
  }
  GArray *sum = val_summarize(rows);
  cr_assert_eq(sum->len, 2);
  const val_summary *t = &g_array_index(sum, val_summary, 0), *s = &g_array_index(sum, val_summary, 1);
  cr_assert_str_eq(t->category, "training");
  cr_assert_eq(t->cases, 2);
  cr_assert_float_eq(t->median_abs, 0.06, 1e-12);
  cr_assert_float_eq(t->mean_signed, -0.04, 1e-12, "too fast on average, though the median is small");
  cr_assert_eq(t->within, 2);
  cr_assert_str_eq(s->category, "serving");
  cr_assert(s->cases == 2 && s->failed == 1 && s->within == 0);
  cr_assert_float_eq(s->mean_signed, 0.30, 1e-12);
  g_array_free(sum, TRUE);
  val_rows_free(rows);
}

/* One model 25 % too fast: a step time 0.8 of the truth, a rate 1.25 of it, memory 0.8 of it.
 * predicted / measured - 1 gives -20 %, +25 %, -20 %, which would average to -5 % and hide it;
 * the optimism is +25 % for each. */
Test(validation, optimism_has_one_sign_for_times_rates_and_bytes)
{
  const char *names[] = {"t", "r", "m"};
  const double errors[] = {-0.20, 0.25, -0.20};
  const char *metrics[] = {"ttft_s.mean", "output_tokens_per_s", "gpu_bytes"};
  GArray *rows = pin_rows(names, errors, 3);
  for (int i = 0; i < 3; i++) {
    val_row *r = &g_array_index(rows, val_row, i);
    r->c.metric = g_strdup(metrics[i]);
    r->c.command = g_strdup("serve");
  }
  GArray *sum = val_summarize(rows);
  cr_assert_eq(sum->len, 1);
  cr_assert_float_eq(g_array_index(sum, val_summary, 0).mean_signed, 0.25, 1e-12);
  g_array_free(sum, TRUE);
  val_rows_free(rows);
}

/* Flags are 0/1: a server predicted to keep up (saturated 0) that fell behind (1) is an
 * optimistic miss, and so is a model predicted to fit (fits 1) that ran out of memory (0). */
Test(validation, optimism_of_flags_is_the_promise_they_broke)
{
  const char *names[] = {"s", "f"};
  const double errors[] = {-1.0, 1.0}; /* predicted - measured */
  const char *metrics[] = {"saturated", "fits"};
  GArray *rows = pin_rows(names, errors, 2);
  for (int i = 0; i < 2; i++) {
    val_row *r = &g_array_index(rows, val_row, i);
    r->c.metric = g_strdup(metrics[i]);
    cr_assert_float_eq(val_optimism(r), 1.0, 1e-12, "%s", metrics[i]);
  }
  val_rows_free(rows);
}

Test(validation, a_case_may_name_its_category)
{
  const char *names[] = {"a", "b"};
  const double errors[] = {0.05, -0.05};
  GArray *rows = pin_rows(names, errors, 2);
  g_array_index(rows, val_row, 1).c.category = 2; /* fsdp */
  GArray *sum = val_summarize(rows);
  cr_assert_eq(sum->len, 2);
  cr_assert_str_eq(g_array_index(sum, val_summary, 0).category, "training");
  cr_assert_str_eq(g_array_index(sum, val_summary, 1).category, "fsdp");
  cr_assert_float_eq(g_array_index(sum, val_summary, 1).mean_signed, -0.05, 1e-12);
  g_array_free(sum, TRUE);
  val_rows_free(rows);
}

/* Megatron-LM's CI cases are 107 small, host-bound runs: in `training` they would outnumber
 * the 35 large ones and set its median, so they are summarised apart. */
Test(validation, megatron_ci_cases_are_summarised_apart_from_training)
{
  const char *names[] = {"a", "b", "c"};
  const double errors[] = {0.02, -0.50, -0.70};
  GArray *rows = pin_rows(names, errors, 3);
  GError *err = NULL;
  GPtrArray *files = val_case_files(NULL, &err);
  cr_assert(files, "%s", err ? err->message : "");
  const char *path = NULL;
  for (guint i = 0; i < files->len && !path; i++)
    if (strstr(g_ptr_array_index(files, i), "/mci-h100-gpt3-mcore-tp1-pp2.yaml"))
      path = g_ptr_array_index(files, i);
  cr_assert(path, "the Megatron CI cases are missing from validation/cases");
  cfg_case c = {0};
  cr_assert(cfg_case_load(path, &c, &err), "%s", err ? err->message : "");
  for (int i = 1; i < 3; i++)
    g_array_index(rows, val_row, i).c.category = c.category;
  GArray *sum = val_summarize(rows);
  cr_assert_eq(sum->len, 2);
  cr_assert_str_eq(g_array_index(sum, val_summary, 0).category, "training");
  cr_assert_eq(g_array_index(sum, val_summary, 0).cases, 1);
  cr_assert_str_eq(g_array_index(sum, val_summary, 1).category, "megatron-ci");
  cr_assert_float_eq(g_array_index(sum, val_summary, 1).mean_signed, -0.60, 1e-12);
  g_array_free(sum, TRUE);
  val_rows_free(rows);
  cfg_case_clear(&c);
  g_ptr_array_free(files, TRUE);
}

Test(validation, an_unknown_category_is_an_input_error)
{
  g_autofree char *path = th_write("badcat.yaml", "name: badcat\nrole: check\ncategory: fdsp\n"
                                                  "metric: step_time_s\nmeasured: 1\n");
  cfg_case c = {0};
  GError *err = NULL;
  cr_assert_not(cfg_case_load(path, &c, &err));
  cr_assert(strstr(err->message, "category") && strstr(err->message, "fsdp"), "%s", err->message);
  g_error_free(err);
  cfg_case_clear(&c);
}

Test(validation, leaving_a_source_out_undoes_its_fit, .timeout = 60)
{
  cJSON *fitted = validate("fa2-gpt3-1.3b-2k-fa2");
  double with = case_error(fitted, "fa2-gpt3-1.3b-2k-fa2");
  cJSON_Delete(fitted);
  th_proc p = th_dlsim("validate --loso --json fa2-gpt3-1.3b-2k-fa2");
  cJSON *j = cJSON_Parse(p.out);
  cr_assert_not_null(j, "%s", p.out);
  th_proc_clear(&p);
  double without = case_error(j, "fa2-gpt3-1.3b-2k-fa2");
  cJSON_Delete(j);
  /* sustained back at 1 (kernel-benchmark clocks): faster than the run, by more than the fit */
  cr_assert_gt(without, with + 0.1, "fitted %+.3f, left out %+.3f", with, without);
}

Test(validation, a_fit_case_that_cannot_be_left_out_is_an_input_error)
{
  const char *names[] = {"a"};
  const double errors[] = {0.0};
  GArray *rows = pin_rows(names, errors, 1);
  g_array_index(rows, val_row, 0).c.role = CFG_CASE_FIT;
  GError *err = NULL;
  cr_assert_not(val_rows_leave_out_fits(rows, &err));
  cr_assert(strstr(err->message, "'unfit'"), "%s", err->message);
  g_error_free(err);
  val_rows_free(rows);
}

/* The groups-of-2 all-gather of XLA's table as a case, `sets` appended to its set list, on the
 * XLA runtime profile or (with_runtime false) on none. */
static val_row run_xla_table(const char *sets, bool with_runtime)
{
  g_autofree char *text = g_strdup_printf(
      "name: xla-ag-2\nrole: check\nsource: test\n"
      "cluster: %s/configs/clusters/dgx-h100.yaml\n%s%s/validation/nccl/xla-on-nccl.yaml\n"
      "set: [node.count=1%s]\n"
      "table: %s/validation/nccl/xla_collective_perf_table_sm90_8gpu.csv\n"
      "size_column: tensor_size_bytes\ntime_column: time_ns_derived\ntime_unit: ns\n"
      "filter: [collective=all-gather, devices_per_group=2]\n"
      "op: allgather\ngpus: 8\ngroup_size: 2\n",
      DLSIM_SOURCE_DIR, with_runtime ? "runtime: " : "# ", DLSIM_SOURCE_DIR, sets,
      DLSIM_SOURCE_DIR);
  g_autofree char *path = th_write("xla-ag-2.yaml", text);
  val_row row = {0};
  GError *err = NULL;
  cr_assert(cfg_case_load(path, &row.c, &err), "%s", err ? err->message : "");
  val_run_case(&row);
  return row;
}

static void val_row_clear(val_row *row)
{
  cfg_case_clear(&row->c);
  calib_table_clear(&row->table);
  g_free(row->times);
  g_free(row->failure);
}

Test(validation, a_table_cases_collectives_keys_set_its_runtime, .timeout = 60)
{
  val_row own = run_xla_table("", true);
  val_row none = run_xla_table(", collectives.call_latency=0us", true);
  val_row more = run_xla_table(", collectives.call_latency=111.9us", true);
  cr_assert_null(own.failure, "%s", own.failure);
  cr_assert_null(none.failure, "%s", none.failure);
  /* every size pays the call once: 11.9 us, as the profile says, or what the case sets */
  for (guint i = 0; i < own.table.points->len; i++) {
    cr_assert_float_eq(own.times[i] - none.times[i], 11.9e-6, 1e-9, "row %u", i);
    cr_assert_float_eq(more.times[i] - own.times[i], 100e-6, 1e-9, "row %u", i);
  }
  val_row_clear(&own);
  val_row_clear(&none);
  val_row_clear(&more);
}

Test(validation, a_runtime_key_without_a_runtime_profile_is_a_failure_named)
{
  val_row row = run_xla_table(", collectives.call_latency=0us", false);
  cr_assert_not_null(row.failure);
  cr_assert(strstr(row.failure, "collectives.call_latency=0us") &&
                strstr(row.failure, "runtime"), "%s", row.failure);
  val_row_clear(&row);
  val_row bad = run_xla_table(", collectives.call_latncy=0us", true);
  cr_assert_not_null(bad.failure);
  cr_assert(strstr(bad.failure, "call_latncy"), "%s", bad.failure);
  val_row_clear(&bad);
}

/* The threads of this process, from /proc. */
static int threads_alive(void)
{
  g_autofree char *status = NULL;
  cr_assert(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
  const char *t = strstr(status, "\nThreads:");
  cr_assert(t);
  return atoi(t + strlen("\nThreads:"));
}

/* A DES case forks: a thread still alive then (a pool's worker releasing its GLib state, GLib's
 * thread that spawns pool workers) could hold a lock that the child would then wait on forever.
 * So the threads that predicted the other cases must all be gone when the DES cases run. */
Test(validation, no_thread_of_the_run_is_left_when_des_cases_fork, .timeout = 120)
{
  char *names[] = {"horovod-resnet50-v100-1gpu", "korthikanti-530b-states",
                   "horovod-resnet50-v100-2node-scaling",
                   "trtllm-v0.17-h100-llama3.1-70b-tp1-2048-128", NULL};
  GError *err = NULL;
  GPtrArray *files = val_case_files(names, &err);
  cr_assert(files, "%s", err ? err->message : "");
  int before = threads_alive();
  GArray *rows = NULL;
  cr_assert(val_run_files(files, 3, &rows, &err), "%s", err ? err->message : "");
  cr_expect_eq(threads_alive(), before, "%d threads before, %d after", before, threads_alive());
  for (guint i = 0; i < rows->len; i++) {
    const val_row *r = &g_array_index(rows, val_row, i);
    cr_expect_null(r->failure, "%s: %s", r->c.name, r->failure);
  }
  val_rows_free(rows);
  g_ptr_array_free(files, TRUE);
}

/* The first child of process `pid` (0 if it has none yet), from /proc. */
static pid_t first_child(pid_t pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/children", (int)pid, (int)pid);
  g_autofree char *children = NULL;
  return g_file_get_contents(path, &children, NULL, NULL) ? (pid_t)atoi(children) : 0;
}

/* Stops process `pid` and whether it is stopped now: one that already ended (a zombie not yet
 * reaped takes the signal too) is not. */
static bool stop(pid_t pid)
{
  if (kill(pid, SIGSTOP) != 0)
    return false;
  g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
  for (int wait = 0; wait < 100; wait++, g_usleep(1000)) {
    g_autofree char *stat = NULL;
    const char *state = g_file_get_contents(path, &stat, NULL, NULL) ? strrchr(stat, ')') : NULL;
    if (!state || state[1] != ' ' || state[2] == 'Z')
      return false;
    if (state[2] == 'T' || state[2] == 't')
      return true;
  }
  return false;
}

/* Runs `dlsim argv...` with a 1 s stall limit and stops (SIGSTOP) its first DES child as soon as
 * there is one: a child that can never go on, as one blocked on a lock copied by fork. Whether a
 * child was caught before the run ended goes to `caught`. */
static th_proc dlsim_with_child_stopped(char **argv, bool *caught)
{
  g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "DLSIM_DATA_DIR", DLSIM_SOURCE_DIR, TRUE);
  env = g_environ_setenv(env, "DLSIM_DES_STALL", "1", TRUE);
  GPid pid;
  int out_fd, err_fd;
  GError *err = NULL;
  cr_assert(g_spawn_async_with_pipes(DLSIM_SOURCE_DIR, argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                     NULL, &pid, NULL, &out_fd, &err_fd, &err),
            "%s", err ? err->message : "");
  int status = 0;
  *caught = false;
  while (!*caught && waitpid(pid, &status, WNOHANG) == 0) {
    pid_t child = first_child(pid);
    *caught = child > 0 && stop(child);
    if (!*caught)
      g_usleep(500);
  }
  if (*caught)
    waitpid(pid, &status, 0);
  th_proc p = {.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
  GIOChannel *o = g_io_channel_unix_new(out_fd), *e = g_io_channel_unix_new(err_fd);
  g_autofree char *out = NULL, *errs = NULL;
  g_io_channel_read_to_end(o, &out, NULL, NULL);
  g_io_channel_read_to_end(e, &errs, NULL, NULL);
  g_io_channel_shutdown(o, FALSE, NULL);
  g_io_channel_shutdown(e, FALSE, NULL);
  g_io_channel_unref(o);
  g_io_channel_unref(e);
  g_spawn_close_pid(pid);
  p.out = g_strconcat(out ? out : "", errs ? errs : "", NULL);
  return p;
}

/* A DES child that never goes on fails its case, named with the reason, and validate ends
 * instead of waiting on the child forever. The child may end before it is caught (a loaded
 * machine, a fast case): then the run is tried again. */
Test(validation, a_stuck_des_child_fails_its_case_by_name_instead_of_hanging, .timeout = 120)
{
  char *argv[] = {DLSIM_BINARY, "validate", "--check-pins", "horovod-resnet50-v100-2node-scaling",
                  NULL};
  bool caught = false;
  th_proc p = {0};
  for (int attempt = 0; attempt < 5 && !caught; attempt++) {
    th_proc_clear(&p);
    p = dlsim_with_child_stopped(argv, &caught);
  }
  cr_assert(caught, "no DES child to stop in 5 runs:\n%s", p.out);
  cr_expect_eq(p.status, 1, "%s", p.out);
  cr_expect(strstr(p.out, "case horovod-resnet50-v100-2node-scaling: failed (des engine: the "
                          "simulation made no progress for 1 s"),
            "%s", p.out);
  th_proc_clear(&p);
}

/* A case that cannot run must not be pinned as "failed" (it would then guard nothing):
 * --update-pins names it, exits 1 and writes no pins. The data directory holds one case whose
 * metric the run's output lacks. */
Test(validation, update_pins_refuses_a_case_that_did_not_run, .timeout = 60)
{
  g_autofree char *root = g_dir_make_tmp("dlsim-pins-XXXXXX", NULL);
  g_autofree char *cases = g_build_filename(root, "validation", "cases", NULL);
  g_autofree char *configs = g_build_filename(root, "configs", NULL);
  cr_assert(g_mkdir_with_parents(cases, 0755) == 0 && g_mkdir_with_parents(configs, 0755) == 0);
  g_autofree char *text = g_strdup_printf(
      "name: no-such-metric\nrole: check\nsource: test\n"
      "cluster: %s/configs/clusters/dgx-a100.yaml\nworkload: %s/configs/workloads/gpt3-1.3b-dp.yaml\n"
      "metric: no_such_key\nmeasured: 1\ntolerance: 0.1\n",
      DLSIM_SOURCE_DIR, DLSIM_SOURCE_DIR);
  g_autofree char *path = g_build_filename(cases, "no-such-metric.yaml", NULL);
  cr_assert(g_file_set_contents(path, text, -1, NULL));
  /* th_dlsim points DLSIM_DATA_DIR at the source tree: spawn with the scratch one instead */
  char *argv[] = {DLSIM_BINARY, "validate", "--update-pins", NULL};
  g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "DLSIM_DATA_DIR", root, TRUE);
  g_autofree char *out = NULL, *errs = NULL;
  int status = 0;
  cr_assert(g_spawn_sync(root, argv, env, 0, NULL, NULL, &out, &errs, &status, NULL));
  g_autofree char *pins = g_build_filename(root, "validation", "pins.tsv", NULL);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s%s", status, out, errs);
  cr_expect(strstr(errs, "case no-such-metric did not run") &&
                strstr(errs, "--update-pins wrote nothing"), "%s", errs);
  cr_expect_not(g_file_test(pins, G_FILE_TEST_EXISTS), "pins were written");
  g_remove(path);
  g_rmdir(cases);
  g_autofree char *validation = g_path_get_dirname(cases);
  g_rmdir(validation);
  g_rmdir(configs);
  g_rmdir(root);
}
