/* dlsim serve -c CLUSTER -w SERVING [--json] [--trace FILE] [--set K=V]... [--find-max-rate]
 *             [--rates R1,R2,... [--csv]] */
#include "cli/cli.h"
#include "report/report.h"
#include "serving/serving.h"
#include "units/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *cluster, *workload, *trace, *rates, *max_memory;
  char **sets;
  gboolean json, csv, find_max_rate, yes;
  bud_limits budget;
} srv_args;

static void srv_args_clear(srv_args *a)
{
  g_free(a->cluster);
  g_free(a->workload);
  g_free(a->trace);
  g_free(a->rates);
  g_free(a->max_memory);
  g_strfreev(a->sets);
}

static bool srv_parse_rates(const char *text, GArray *out, GError **err)
{
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (char **p = parts; *p; p++) {
    double v = 0;
    g_autofree char *why = NULL;
    g_autofree char *item = g_strstrip(g_strdup(*p));
    /* "5" is 5 requests/s, as "5/s" */
    if (!units_parse(item, UNITS_NUMBER, &v, NULL) && !units_parse(item, UNITS_PER_SECOND, &v, &why)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--rates: '%s' is not a rate (%s)", item,
                  why ? why : "expected a number of requests/s");
      return false;
    }
    if (!(v > 0)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--rates: '%s': rates must be > 0", item);
      return false;
    }
    g_array_append_val(out, v);
  }
  return true;
}

static void srv_print_json(cJSON *j)
{
  rep_json_print(stdout, j);
}

typedef enum { SRV_TEXT, SRV_JSON, SRV_CSV } srv_format;

/* The latency-vs-rate curve: one line per rate. */
static int srv_sweep(const cfg_cluster *c, const cfg_workload *w, GArray *rates, srv_format format,
                     const bud_limits *budget)
{
  bool json = format != SRV_TEXT;
  cJSON *all = cJSON_CreateArray();
  if (!json)
    printf("dlsim serve: %s on %s, latency vs rate (%d requests per rate)\n"
           "  %9s %10s %10s %10s %10s %10s %12s %7s  %s\n",
           w->model.name, c->name, w->serving.requests.count, "rate/s", "TTFT p50", "TTFT p99",
           "TBT mean", "TPOT p50", "E2E p50", "output tok/s", "SLO %", "load");
  for (guint i = 0; i < rates->len; i++) {
    double rate = g_array_index(rates, double, i);
    srv_options o = {.rate = rate, .budget = budget};
    srv_result r;
    GError *err = NULL;
    if (!srv_simulate(c, w, &o, &r, &err)) {
      srv_result_clear(&r);
      cJSON_Delete(all);
      return cli_fail(err);
    }
    if (format == SRV_CSV) {
      cJSON *j = srv_result_json(&r);
      cli_json_prepend(j, "rate_rps", cJSON_CreateNumber(rate)); /* the rate first */
      cJSON_AddItemToArray(all, j);
    } else if (json) {
      cJSON *j = srv_result_json(&r);
      cJSON_AddNumberToObject(j, "rate_rps", rate);
      cJSON_AddItemToArray(all, j);
    } else {
      double v[] = {r.ttft.p50, r.ttft.p99, r.tbt.mean, r.tpot.p50, r.e2e.p50};
      printf("  %9.3f", rate);
      for (size_t k = 0; k < G_N_ELEMENTS(v); k++) {
        g_autofree char *x = units_format_seconds(v[k]);
        printf(" %10s", x);
      }
      printf(" %12.1f %7.1f  %s\n", r.output_tokens_per_s, 100 * r.slo_attainment,
             r.saturated ? "saturated" : "ok");
    }
    srv_result_clear(&r);
  }
  if (format == SRV_CSV) {
    cli_csv_print(stdout, all);
    cJSON_Delete(all);
  } else if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "sweep", all);
    srv_print_json(j);
    cJSON_Delete(j);
  } else {
    cJSON_Delete(all);
  }
  return 0;
}

static int srv_max_rate_report(const cfg_cluster *c, const cfg_workload *w, bool json)
{
  srv_max_rate m;
  GError *err = NULL;
  if (!srv_find_max_rate(c, w, &m, &err)) {
    srv_max_rate_clear(&m);
    return cli_fail(err);
  }
  const cfg_slo *slo = &w->serving.slo;
  if (json) {
    cJSON *j = m.max_rate > 0 ? srv_result_json(&m.at) : cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "max_rate_rps", m.max_rate);
    cJSON_AddNumberToObject(j, "search_runs", m.runs);
    srv_print_json(j);
    cJSON_Delete(j);
  } else {
    g_autofree char *ttft = units_format_seconds(slo->ttft);
    g_autofree char *tbt = units_format_seconds(slo->tbt);
    printf("max rate     %.3f requests/s with TTFT <= %s and TPOT <= %s for %.0f %% of the "
           "requests and no growing queue (%d runs)\n",
           m.max_rate, ttft, tbt, 100 * slo->attainment, m.runs);
    if (m.max_rate > 0) {
      printf("at that rate:\n");
      srv_result_text(stdout, &m.at);
    }
  }
  srv_max_rate_clear(&m);
  return 0;
}

static int srv_one(const cfg_cluster *c, const cfg_workload *w, bool json, const char *trace,
                   const bud_limits *budget)
{
  srv_options o = {.trace = trace != NULL, .budget = budget};
  srv_result r;
  GError *err = NULL;
  unc_table *bands = NULL;
  if (!srv_simulate(c, w, &o, &r, &err) || !(bands = unc_table_load(NULL, &err))) {
    srv_result_clear(&r);
    return cli_fail(err);
  }
  srv_result_bracket(&r, bands);
  unc_table_free(bands);
  if (json) {
    cJSON *j = srv_result_json(&r);
    srv_print_json(j);
    cJSON_Delete(j);
  } else {
    srv_result_text(stdout, &r);
  }
  bool ok = !trace || srv_trace_write(trace, &r, &err);
  srv_result_clear(&r);
  return ok ? 0 : cli_fail(err);
}

int cli_serve(int argc, char **argv)
{
  srv_args a = {0};
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &a.cluster, NULL),
      cli_opt(CLI_WORKLOAD, &a.workload, "Serving workload file or preset"),
      cli_opt(CLI_JSON, &a.json, NULL),
      cli_opt(CLI_CSV, &a.csv, "With --rates: print CSV, one row per rate (latencies in seconds)"),
      cli_opt(CLI_TRACE, &a.trace, NULL),
      cli_opt(CLI_SET, &a.sets, "Override a key, repeatable: --set serving.tp=2"),
      {"find-max-rate", 0, 0, G_OPTION_ARG_NONE, &a.find_max_rate,
       "Find the highest request rate that meets serving.slo (goodput)", NULL},
      {"rates", 0, 0, G_OPTION_ARG_STRING, &a.rates, "Latency vs rate: one run per rate", "R1,R2,..."},
      cli_opt(CLI_MAX_MEMORY, &a.max_memory, NULL),
      cli_opt(CLI_YES, &a.yes, NULL),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- simulate LLM serving: TTFT, TBT, throughput under SLOs", &argc, &argv,
                 &code))
    return code;
  if (argc > 1 || !a.cluster || !a.workload) {
    if (argc > 1)
      fprintf(stderr, "dlsim: error: unexpected argument '%s' (see dlsim serve --help)\n", argv[1]);
    else
      fprintf(stderr, "dlsim: error: dlsim serve needs -c CLUSTER and -w WORKLOAD (see dlsim serve --help)\n");
    srv_args_clear(&a);
    return 2;
  }
  GError *err = NULL;
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  GArray *rates = g_array_new(FALSE, FALSE, sizeof(double));
  if (!bud_limits_parse(&a.budget, a.max_memory, a.yes, &err) ||
      !cfg_load_with(a.cluster, a.workload, a.sets, &c, &w, &err) ||
      (a.rates && !srv_parse_rates(a.rates, rates, &err))) {
    code = cli_fail(err);
  } else if (!w->has_serving) {
    g_autofree char *where = cfg_doc_where(w->doc, "");
    fprintf(stderr, "dlsim: error: %s: the workload has no 'serving' section (training workloads run with dlsim run)\n",
            where);
    code = 2;
  } else if (a.find_max_rate && a.rates) {
    fprintf(stderr, "dlsim: error: --find-max-rate and --rates: give one of them\n");
    code = 2;
  } else if (a.csv && !a.rates) {
    fprintf(stderr, "dlsim: error: --csv prints the table of --rates: give --rates R1,R2,...\n");
    code = 2;
  } else if (a.trace && (a.find_max_rate || a.rates)) {
    fprintf(stderr, "dlsim: error: --trace records one run, not --find-max-rate or --rates\n");
    code = 2;
  } else if (a.find_max_rate) {
    code = srv_max_rate_report(c, w, a.json);
  } else if (a.rates) {
    code = srv_sweep(c, w, rates, a.json ? SRV_JSON : a.csv ? SRV_CSV : SRV_TEXT, &a.budget);
  } else {
    code = srv_one(c, w, a.json, a.trace, &a.budget);
  }
  g_array_free(rates, TRUE);
  cfg_cluster_free(c);
  cfg_workload_free(w);
  srv_args_clear(&a);
  return code;
}
