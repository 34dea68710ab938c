/* Interval bands: conformal order statistics, the offset between sources and leaving sources
 * out by hand, the time/rate sense, the file format, and the bands as dlsim run and serve print
 * them. */
#include "helpers.h"
#include "uncertainty/uncertainty.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* Residuals of kind k from log ratios, one source each. */
static int residuals_of(unc_residual *out, int k, int source, const double *logs, int n)
{
  for (int i = 0; i < n; i++)
    out[i] = (unc_residual){.kind = k, .source = source, .ratio = exp(logs[i])};
  return n;
}

Test(uncertainty, a_band_is_the_conformal_order_statistics)
{
  /* one source, so no offset between sources: sorted 0.80 0.90 0.95 1.00 1.00 1.00 1.00 1.05
   * 1.10 1.20; n + 1 = 11 gaps: the 1st and the ceil(9.9) = 10th smallest hold a fresh case
   * with probability 9 / 11 >= 0.8 */
  const double r[] = {1.0, 0.9, 1.2, 1.05, 0.95, 1.0, 0.8, 1.1, 1.0, 1.0};
  unc_residual res[29];
  for (int i = 0; i < 10; i++)
    res[i] = (unc_residual){.kind = 0, .source = 0, .ratio = r[i]};
  unc_band b = unc_band_fit("training", 0, res, 10);
  cr_assert_eq(b.cases, 10);
  cr_assert_eq(b.sources, 1);
  cr_assert_float_eq(b.offset, 0, 1e-12);
  cr_assert_float_eq(b.low, 0.80, 1e-12);
  cr_assert_float_eq(b.high, 1.20, 1e-12);
  cr_assert(isnan(b.cv_coverage), "no source can be left out");
  unc_band_clear(&b);
  /* 29 cases: the 3rd and the 27th smallest, (27 - 3) / 30 = 0.8 */
  for (int i = 0; i < 29; i++)
    res[i] = (unc_residual){.kind = 0, .source = 0, .ratio = 1.0 + 0.01 * ((i * 7) % 29)};
  b = unc_band_fit("training", 0, res, 29);
  cr_assert_float_eq(b.low, 1.02, 1e-12);
  cr_assert_float_eq(b.high, 1.26, 1e-12);
  unc_band_clear(&b);
}

/* Kind 0: source 0 at log ratios 0, 0.1, 0.2 (median 0.1), source 1 at 0.3, source 2 at -0.1,
 * -0.3 (median -0.2); kind 1: one source, 0.7; kind 2: sources 3, 4 and 6 at 0, 0.4, 0.5. */
static int grouped_residuals(unc_residual *r)
{
  int n = 0;
  n += residuals_of(r + n, 0, 0, (const double[]){0.0, 0.1, 0.2}, 3);
  n += residuals_of(r + n, 0, 1, (const double[]){0.3}, 1);
  n += residuals_of(r + n, 0, 2, (const double[]){-0.1, -0.3}, 2);
  n += residuals_of(r + n, 1, 5, (const double[]){0.7}, 1);
  n += residuals_of(r + n, 2, 3, (const double[]){0.0}, 1);
  n += residuals_of(r + n, 2, 4, (const double[]){0.4}, 1);
  n += residuals_of(r + n, 2, 6, (const double[]){0.5}, 1);
  return n;
}

Test(uncertainty, the_offset_between_sources_is_a_quantile_of_their_medians_about_their_kinds)
{
  unc_residual r[16];
  int n = grouped_residuals(r);
  /* kind 0: medians 0.1, 0.3, -0.2 about their median 0.1: 0, 0.2, 0.3; kind 1 has one source
   * and counts nothing; kind 2: 0, 0.4, 0.5 about 0.4: 0.4, 0, 0.1. Sorted 0, 0, 0.1, 0.2, 0.3,
   * 0.4: the 0.7 quantile sits at 0.7 x 5 = 3.5, halfway from 0.2 to 0.3 */
  cr_assert_float_eq(unc_source_offset(r, n, -1), 0.25, 1e-12);
  /* without source 2: kind 0's 0.1 and 0.3 about 0.2: 0.1, 0.1; with kind 2's: 0, 0.1, 0.1,
   * 0.1, 0.4, at 0.7 x 4 = 2.8: 0.1 */
  cr_assert_float_eq(unc_source_offset(r, n, 2), 0.1, 1e-12);
  /* no kind with two sources (source 0 alone): no offset */
  cr_assert_float_eq(unc_source_offset(r, 3, -1), 0.0, 1e-12);
}

Test(uncertainty, a_band_is_widened_by_the_offset_and_checked_leaving_sources_out)
{
  unc_residual r[16];
  int n = grouped_residuals(r);
  /* kind 0's six log ratios: n + 1 = 7 gaps, the 1st and the 6th smallest (-0.3 and 0.3),
   * widened by 0.25 both ways */
  unc_band b = unc_band_fit("training", 0, r, n);
  cr_assert_eq(b.cases, 6);
  cr_assert_eq(b.sources, 3);
  cr_assert_float_eq(b.offset, 0.25, 1e-12);
  cr_assert_float_eq(log(b.low), -0.55, 1e-12);
  cr_assert_float_eq(log(b.high), 0.55, 1e-12);
  /* only leaving source 1 out leaves 5 cases: -0.3 .. 0.2, widened by the offset without it
   * (kind 0's 0.1 and -0.2 about -0.05: 0.15, 0.15; kind 2's 0, 0.1, 0.4: 0.15 at 2.8), so
   * -0.45 .. 0.35, which holds its 0.3 */
  cr_assert_float_eq(b.cv_coverage, 1.0, 1e-12);
  unc_band_clear(&b);
  /* kind 2 has 3 cases: no band */
  b = unc_band_fit("fsdp", 2, r, n);
  cr_assert_eq(b.cases, 0);
  unc_band_clear(&b);
}

Test(uncertainty, too_few_cases_make_no_band)
{
  unc_residual r[4];
  residuals_of(r, 0, 0, (const double[]){0.0, -0.1, 0.1, 0.2}, 4);
  unc_band b = unc_band_fit("fsdp", 0, r, 4);
  cr_assert_eq(b.cases, 0);
  unc_band_clear(&b);
}

Test(uncertainty, a_time_is_divided_and_a_rate_multiplied)
{
  unc_band b = {.kind = "training", .cases = 10, .low = 0.8, .high = 1.25};
  double t[2], r[2];
  unc_interval(&b, 10, UNC_TIME, t);
  unc_interval(&b, 100, UNC_RATE, r);
  /* predicted 1.25x the truth at worst: the truth is down to 10 / 1.25 */
  cr_assert_float_eq(t[0], 8.0, 1e-12);
  cr_assert_float_eq(t[1], 12.5, 1e-12);
  cr_assert_float_eq(r[0], 80.0, 1e-12);
  cr_assert_float_eq(r[1], 125.0, 1e-12);
}

/* A deterministic spread of ratios (a linear congruential generator, log-uniform). */
static void ratios_of(double *v, int n, unsigned seed)
{
  for (int i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    v[i] = exp(0.3 * ((seed >> 8) / 16777216.0 - 0.5));
  }
}

Test(uncertainty, a_band_holds_fresh_cases_of_sources_of_the_same_spread_about_80_percent)
{
  /* ten sources of 100 cases each, all of one spread: their medians differ by sampling alone,
   * so the offset is small (about 0.01 against the band's 0.12 half-width), but the band holds
   * more than 80 % of fresh cases: sources that do not differ pay for the sampling noise of
   * their medians, here about 8 points of a flat distribution's edge */
  double fit[1000], fresh[1000];
  unc_residual r[1000];
  ratios_of(fit, 1000, 1);
  ratios_of(fresh, 1000, 7);
  for (int i = 0; i < 1000; i++)
    r[i] = (unc_residual){.kind = 0, .source = i / 100, .ratio = fit[i]};
  unc_band b = unc_band_fit("fsdp", 0, r, 1000);
  cr_assert_eq(b.sources, 10);
  cr_assert(b.offset > 0 && b.offset < 0.02, "offset %.4f", b.offset);
  int held = 0;
  for (int i = 0; i < 1000; i++)
    held += fresh[i] >= b.low && fresh[i] <= b.high;
  cr_assert(held >= 800 && held <= 900, "held %d of 1000", held);
  cr_assert(b.cv_coverage >= 0.8 && b.cv_coverage <= 0.92, "left out %.3f", b.cv_coverage);
  unc_band_clear(&b);
}

Test(uncertainty, bands_written_are_bands_read)
{
  unc_band in[2] = {{.kind = "fsdp", .cases = 139, .sources = 3, .low = 0.93, .high = 1.19,
                     .offset = 0.05, .cv_coverage = 0.78},
                    {.kind = "serve.tbt", .cases = 29, .sources = 2, .low = 0.81, .high = 1.16,
                     .offset = 0.05, .cv_coverage = 0.79}};
  g_autofree char *path = th_write("bands.tsv", "");
  GError *err = NULL;
  cr_assert(unc_table_write(path, in, 2, &err));
  unc_table *t = unc_table_load(path, &err);
  cr_assert_not_null(t);
  const unc_band *b = unc_band_of(t, "serve.tbt");
  cr_assert(b && b->cases == 29 && b->sources == 2 && fabs(b->high - 1.16) < 1e-9);
  cr_assert_float_eq(b->offset, 0.05, 1e-9);
  cr_assert_null(unc_band_of(t, "training"));
  unc_table_free(t);
}

Test(uncertainty, a_table_of_five_columns_still_reads)
{
  GError *err = NULL;
  g_autofree char *path = th_write("old.tsv", "kind\tcases\tlow\thigh\tcv_coverage\nfsdp\t259\t0.86\t1.17\t0.799\n");
  unc_table *t = unc_table_load(path, &err);
  cr_assert_not_null(t);
  const unc_band *b = unc_band_of(t, "fsdp");
  cr_assert(b && b->cases == 259 && b->sources == 0 && b->offset == 0);
  cr_assert_float_eq(b->low, 0.86, 1e-9);
  cr_assert_float_eq(b->cv_coverage, 0.799, 1e-9);
  unc_table_free(t);
}

Test(uncertainty, a_missing_file_is_no_band_and_a_bad_line_names_its_place)
{
  GError *err = NULL;
  unc_table *t = unc_table_load("/nonexistent/intervals.tsv", &err);
  cr_assert(t && !unc_band_of(t, "fsdp"));
  unc_table_free(t);
  g_autofree char *path = th_write("bad.tsv", "kind\tcases\tp10\tp90\tcv_coverage\nfsdp\t10\t1.2\t0.9\t0.8\n");
  cr_assert_null(unc_table_load(path, &err));
  cr_assert(strstr(err->message, "bad.tsv:2:"), "%s", err->message);
  g_error_free(err);
}

/* A workload of the given layout, for its interval kind. */
static const char *kind_of(int tp, int pp, int dp, int zero)
{
  cfg_workload w = {.parallel = {.tp = tp, .pp = pp, .cp = 1, .dp = dp, .zero = zero}};
  return unc_run_kind(&w);
}

Test(uncertainty, a_runs_kind_follows_its_sharding_and_its_scale)
{
  cr_assert_str_eq(kind_of(1, 1, 64, 3), "fsdp");
  cr_assert_str_eq(kind_of(8, 1, 4, 1), "training.small"); /* 32 GPUs */
  cr_assert_str_eq(kind_of(8, 8, 1, 1), "training");       /* 64 */
  cr_assert_eq(unc_run_kind_index(NULL), -1);
  cr_assert_null(unc_run_kind_name(-1));
  for (int i = 0; i < 3; i++)
    cr_assert_eq(unc_run_kind_index(unc_run_kind_name(i)), i);
}

Test(uncertainty, a_small_run_without_a_band_of_its_own_takes_the_training_band)
{
  unc_band in[2] = {{.kind = "training", .cases = 16, .low = 0.75, .high = 1.18, .cv_coverage = 0.8},
                    {.kind = "training.small", .cases = 111, .low = 0.63, .high = 1.25, .cv_coverage = 0.8}};
  g_autofree char *path = th_write("small.tsv", "");
  GError *err = NULL;
  cfg_workload small = {.parallel = {.tp = 8, .pp = 1, .cp = 1, .dp = 1, .zero = 1}};
  cr_assert(unc_table_write(path, in, 2, &err));
  unc_table *t = unc_table_load(path, &err);
  cr_assert_str_eq(unc_band_for_run(t, &small)->kind, "training.small");
  unc_table_free(t);
  cr_assert(unc_table_write(path, in, 1, &err));
  t = unc_table_load(path, &err);
  cr_assert_str_eq(unc_band_for_run(t, &small)->kind, "training");
  unc_table_free(t);
}

static cJSON *json_of(const char *args)
{
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 0, "%s", p.out);
  cJSON *j = cJSON_Parse(p.out);
  cr_assert_not_null(j, "%s", p.out);
  th_proc_clear(&p);
  return j;
}

Test(uncertainty, run_brackets_its_step_with_the_band_of_its_kind, .timeout = 60)
{
  cJSON *j = json_of("run -c dgx-a100 -w validation/fsdp/workloads/mpt-1b-fsdp.yaml -e analytic "
                     "--set parallel.dp=8 --set training.global_batch=8 --json");
  cJSON *iv = cJSON_GetObjectItem(j, "intervals");
  cr_assert_not_null(iv);
  cr_assert_str_eq(cJSON_GetObjectItem(iv, "kind")->valuestring, "fsdp");
  double step = cJSON_GetObjectItem(j, "step_time_s")->valuedouble;
  cJSON *st = cJSON_GetObjectItem(iv, "step_time_s");
  double lo = cJSON_GetArrayItem(st, 0)->valuedouble, hi = cJSON_GetArrayItem(st, 1)->valuedouble;
  cr_assert(lo > 0 && lo < hi, "[%g, %g]", lo, hi);
  cr_assert(lo <= step * 1.2 && hi >= step * 0.8, "step %g, interval [%g, %g]", step, lo, hi);
  cJSON_Delete(j);
}

Test(uncertainty, serve_brackets_latencies_and_leaves_an_unsaturated_rate_alone, .timeout = 60)
{
  cJSON *j = json_of("serve -c dgx-h100 -w llama2-7b-vllm --set serving.requests.count=200 --json");
  cJSON *iv = cJSON_GetObjectItem(j, "intervals");
  cr_assert_not_null(iv);
  cr_assert_not_null(cJSON_GetObjectItem(iv, "ttft_s.mean"));
  cr_assert_not_null(cJSON_GetObjectItem(iv, "tbt_s.mean"));
  cr_assert_null(cJSON_GetObjectItem(iv, "output_tokens_per_s"), "below saturation the rate is the offered one");
  cJSON_Delete(j);
}
