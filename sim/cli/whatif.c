/* dlsim whatif -c CLUSTER -w WORKLOAD --set KEY=VALUE [--set ...] [--base KEY=VALUE]...
 *              [--engine des|analytic] [--json | --csv]
 * dlsim whatif -c CLUSTER -w WORKLOAD --sweep KEY=V1,V2,... [--plot FILE.svg] [--csv] [--json]
 * The same job on changed hardware (or settings): the baseline and the changed system side by
 * side with the delta of every reported figure; or a one-dimensional sweep as a table and a
 * plot of step time and MFU against the swept value. */
#include "cli/cli_internal.h"
#include "report/report.h"
#include "run/run.h"
#include "serving/serving.h"
#include "units/units.h"

#include <math.h>
#include <plplot.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *cluster, *workload, *sweep, *plot, *engine, *max_memory;
  char **sets, **base;
  gboolean json, csv, yes;
  bud_limits budget;
} wi_args;

static void wi_args_clear(wi_args *a)
{
  g_free(a->cluster);
  g_free(a->workload);
  g_free(a->sweep);
  g_free(a->plot);
  g_free(a->engine);
  g_free(a->max_memory);
  g_strfreev(a->sets);
  g_strfreev(a->base);
}

/* What `dlsim serve --json` reports, for a serving workload. */
static cJSON *wi_serve(const wi_args *a, char *const *sets, GError **err)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cJSON *j = NULL;
  srv_result r;
  if (cfg_load_with(a->cluster, a->workload, sets, &c, &w, err)) {
    if (srv_simulate(c, w, NULL, &r, err))
      j = srv_result_json(&r);
    srv_result_clear(&r);
  }
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return j;
}

/* Whether the workload file is a serving one (no training section). */
static bool wi_is_serving(const wi_args *a, char *const *sets, GError **err, bool *serving)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  bool ok = cfg_load_with(a->cluster, a->workload, sets, &c, &w, err);
  *serving = ok && w->has_serving && !w->has_training;
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return ok;
}

/* What `dlsim run --json` (or `dlsim serve --json`) reports for these overrides. */
static cJSON *wi_run(const wi_args *a, char *const *sets, eng_kind engine, GError **err)
{
  bool serving = false;
  if (!wi_is_serving(a, sets, err, &serving))
    return NULL;
  if (serving)
    return wi_serve(a, sets, err);
  sim_options o = sim_options_for(engine);
  o.budget = &a->budget;
  sim_result run;
  cJSON *j = sim_run_files(a->cluster, a->workload, sets, &o, &run, err) ? rep_run_json(&run) : NULL;
  sim_result_clear(&run);
  return j;
}

/* changed - baseline for every number the two have at the same place; the simulator's own
 * figures (wall time, messages) are not the system's and are left out. */
static cJSON *wi_delta(const cJSON *base, const cJSON *changed)
{
  cJSON *d = cJSON_CreateObject();
  const cJSON *b;
  cJSON_ArrayForEach(b, base)
  {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(changed, b->string);
    if (!c || strcmp(b->string, "simulator") == 0)
      continue;
    if (cJSON_IsNumber(b) && cJSON_IsNumber(c)) {
      double x = c->valuedouble - b->valuedouble;
      cJSON_AddNumberToObject(d, b->string,
                              fabs(x) <= 1e-9 * MAX(fabs(b->valuedouble), fabs(c->valuedouble)) ? 0 : x);
    }
    else if (cJSON_IsObject(b) && cJSON_IsObject(c))
      cJSON_AddItemToObject(d, b->string, wi_delta(b, c));
    else if (cJSON_IsBool(b) && cJSON_IsBool(c) && cJSON_IsTrue(b) != cJSON_IsTrue(c))
      cJSON_AddBoolToObject(d, b->string, cJSON_IsTrue(c));
  }
  return d;
}

static double wi_num(const cJSON *j, const char *a, const char *b)
{
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
  if (b)
    x = cJSON_GetObjectItemCaseSensitive(x, b);
  return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static void wi_row_seconds(const char *what, double b, double c)
{
  if (fabs(c - b) <= 1e-9 * MAX(fabs(b), fabs(c))) /* the same, up to rounding */
    c = b;
  g_autofree char *sb = units_format_seconds(b), *sc = units_format_seconds(c);
  g_autofree char *sd = units_format_seconds(fabs(c - b));
  printf("  %-20s %14s %14s   %s%s", what, sb, sc, c - b < 0 ? "-" : "+", sd);
  if (b > 0)
    printf(" (%+.1f %%)", 100 * (c / b - 1));
  printf("\n");
}

static void wi_row_plain(const char *what, double b, double c, const char *unit)
{
  printf("  %-20s %12.4g %s %12.4g %s   %+.4g", what, b, unit, c, unit, c - b);
  if (b > 0)
    printf(" (%+.1f %%)", 100 * (c / b - 1));
  printf("\n");
}

static void wi_print_serving(const cJSON *b, const cJSON *c)
{
  const char *lat[] = {"ttft_s", "tbt_s", "e2e_s"}, *q[] = {"p50", "p99"};
  for (size_t i = 0; i < G_N_ELEMENTS(lat); i++)
    for (size_t k = 0; k < G_N_ELEMENTS(q); k++) {
      g_autofree char *what = g_strdup_printf("%.*s %s", (int)(strlen(lat[i]) - 2), lat[i], q[k]);
      wi_row_seconds(what, wi_num(b, lat[i], q[k]), wi_num(c, lat[i], q[k]));
    }
  wi_row_plain("output tokens/s", wi_num(b, "output_tokens_per_s", NULL),
               wi_num(c, "output_tokens_per_s", NULL), " ");
  wi_row_plain("requests/s", wi_num(b, "requests_per_s", NULL), wi_num(c, "requests_per_s", NULL), " ");
  wi_row_plain("SLO attainment", wi_num(b, "slo_attainment", NULL), wi_num(c, "slo_attainment", NULL), " ");
}

static void wi_print_text(const cJSON *b, const cJSON *c, char *const *sets)
{
  printf("dlsim whatif:");
  for (int i = 0; sets && sets[i]; i++)
    printf(" %s", sets[i]);
  const cJSON *engine = cJSON_GetObjectItemCaseSensitive(b, "engine");
  if (cJSON_IsString(engine))
    printf(" (engine %s)", engine->valuestring);
  printf("\n  %-20s %14s %14s   %s\n", "", "baseline", "changed", "delta");
  if (!cJSON_GetObjectItemCaseSensitive(b, "step_time_s")) {
    wi_print_serving(b, c);
    return;
  }
  wi_row_seconds("step time", wi_num(b, "step_time_s", NULL), wi_num(c, "step_time_s", NULL));
  double mb = wi_num(b, "mfu", NULL), mc = wi_num(c, "mfu", NULL);
  printf("  %-20s %12.1f %% %12.1f %%   %+.1f points\n", "MFU", 100 * mb, 100 * mc, 100 * (mc - mb));
  double tb = wi_num(b, "tokens_per_s", NULL), tc = wi_num(c, "tokens_per_s", NULL);
  if (tb > 0)
    printf("  %-20s %14.0f %14.0f   %+.1f %%\n", "tokens/s", tb, tc, 100 * (tc / tb - 1));
  const char *parts[] = {"compute", "exposed_comm", "bubble", "other"};
  for (size_t i = 0; i < G_N_ELEMENTS(parts); i++)
    wi_row_seconds(parts[i], wi_num(b, "breakdown_s", parts[i]), wi_num(c, "breakdown_s", parts[i]));
  const cJSON *dims = cJSON_GetObjectItemCaseSensitive(b, "exposed_comm_s"), *d;
  cJSON_ArrayForEach(d, dims)
  {
    double x = d->valuedouble, y = wi_num(c, "exposed_comm_s", d->string);
    if (x > 0 || y > 0) {
      g_autofree char *what = g_strdup_printf("  exposed %s", d->string);
      wi_row_seconds(what, x, y);
    }
  }
  double pb = wi_num(b, "memory", "peak_bytes"), pc = wi_num(c, "memory", "peak_bytes");
  g_autofree char *sb = units_format_bytes(pb), *sc = units_format_bytes(pc);
  g_autofree char *sd = units_format_bytes(fabs(pc - pb));
  bool fb = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "memory"), "fits"));
  bool fc = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "memory"), "fits"));
  printf("  %-20s %14s %14s   %s%s\n", "memory per GPU", sb, sc, pc - pb < 0 ? "-" : "+", sd);
  printf("  %-20s %14s %14s\n", "fits", fb ? "yes" : "NO", fc ? "yes" : "NO");
}

/* Every number both systems report, one row each, in the unit its name says. */
static void wi_print_csv(const cJSON *b, const cJSON *c)
{
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) values = g_ptr_array_new();
  g_autoptr(GPtrArray) ckeys = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) cvalues = g_ptr_array_new();
  cli_json_leaves(b, NULL, keys, values);
  cli_json_leaves(c, NULL, ckeys, cvalues);
  cJSON *rows = cJSON_CreateArray();
  for (guint i = 0; i < keys->len; i++) {
    const cJSON *x = values->pdata[i];
    guint k = 0;
    if (!cJSON_IsNumber(x) || g_str_has_prefix(keys->pdata[i], "simulator.") ||
        !g_ptr_array_find_with_equal_func(ckeys, keys->pdata[i], g_str_equal, &k) ||
        !cJSON_IsNumber((const cJSON *)cvalues->pdata[k]))
      continue;
    double y = ((const cJSON *)cvalues->pdata[k])->valuedouble, d = y - x->valuedouble;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "figure", keys->pdata[i]);
    cJSON_AddNumberToObject(o, "baseline", x->valuedouble);
    cJSON_AddNumberToObject(o, "changed", y);
    cJSON_AddNumberToObject(o, "delta", fabs(d) <= 1e-9 * MAX(fabs(x->valuedouble), fabs(y)) ? 0 : d);
    cJSON_AddItemToArray(rows, o);
  }
  cli_csv_print(stdout, rows);
  cJSON_Delete(rows);
}

/* ---- sweeps ------------------------------------------------------------------------------- */

typedef struct {
  char *value;
  double x, step, mfu, tokens, peak;
  bool fits;
} wi_point;

/* What a sweep reports: a training step (step time, MFU, tokens/s, memory, fits) or a serving
 * run (TBT p50, SLO attainment, output tokens/s, -, not saturated). JSON keeps bytes (for
 * programs); the table and CSV give GiB (for people and spreadsheets). */
typedef struct {
  const char *json[5], *csv_memory, *head[5], *axis[2];
} wi_columns;

static const wi_columns wi_training = {
    {"step_time_s", "mfu", "tokens_per_s", "peak_bytes", "fits"},
    "peak_GiB",
    {"step (s)", "MFU %", "tokens/s", "memory (GiB)", "fits"},
    {"step time (s)", "MFU (%)"}};
static const wi_columns wi_serving = {
    {"tbt_p50_s", "slo_attainment", "output_tokens_per_s", "peak_bytes", "below_saturation"},
    "peak_GiB",
    {"TBT p50 (s)", "SLO %", "out tok/s", "memory (GiB)", "unsat."},
    {"TBT p50 (s)", "SLO attainment (%)"}};

static wi_point wi_point_of(const cJSON *j, char *value, double x)
{
  wi_point p = {.value = value, .x = x};
  if (cJSON_GetObjectItemCaseSensitive(j, "step_time_s")) {
    p.step = wi_num(j, "step_time_s", NULL);
    p.mfu = wi_num(j, "mfu", NULL);
    p.tokens = wi_num(j, "tokens_per_s", NULL);
    p.peak = wi_num(j, "memory", "peak_bytes");
    p.fits = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "memory"), "fits"));
  } else {
    p.step = wi_num(j, "tbt_s", "p50");
    p.mfu = wi_num(j, "slo_attainment", NULL);
    p.tokens = wi_num(j, "output_tokens_per_s", NULL);
    p.peak = NAN;
    p.fits = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "saturated"));
  }
  return p;
}

/* The plot device for a file name, checked before any simulation runs. */
static bool wi_plot_device(const char *path, const char **dev, GError **err)
{
  const char *ext = strrchr(path, '.');
  *dev = ext && strcmp(ext, ".svg") == 0   ? "svg"
         : ext && strcmp(ext, ".pdf") == 0 ? "pdf"
         : ext && strcmp(ext, ".ps") == 0  ? "psc"
                                           : NULL;
  if (!*dev)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--plot %s: expected a .svg, .pdf or .ps file",
                path);
  return *dev != NULL;
}

/* A swept value as a number on the x axis, in the key's SI unit when it has one. */
static double wi_sweep_x(const char *key, const char *value, int index)
{
  units_kind unit;
  double x = 0;
  if (cfg_key_unit(key, &unit) && units_parse(value, unit, &x, NULL))
    return x;
  char *end = NULL;
  x = g_ascii_strtod(value, &end);
  return end != value ? x : index;
}

static const char *wi_unit_symbol(const char *key)
{
  static const char *const symbols[] = {"", "B", "B/s", "FLOP/s", "s", "1/s", ""};
  units_kind unit;
  return cfg_key_unit(key, &unit) ? symbols[unit] : "";
}

/* Geometric sweeps (all positive, spanning a factor of 8 or more) read best on a log axis. */
static bool wi_geometric(const PLFLT *x, int n)
{
  PLFLT lo = INFINITY, hi = 0;
  for (int i = 0; i < n; i++) {
    if (!(x[i] > 0))
      return false;
    lo = MIN(lo, x[i]);
    hi = MAX(hi, x[i]);
  }
  return n >= 3 && hi >= 8 * lo;
}

/* Colours by index: white paper, black ink for axes and text, blue and red series. */
static void wi_plot_palette(void)
{
  plscol0(0, 255, 255, 255);
  plscol0(1, 0, 0, 0);
  plscol0(2, 31, 89, 180);
  plscol0(3, 200, 45, 40);
}

/* The marks of the two series, the same in the plot and its legend. */
#define WI_MARK_STEP "#(728)"
#define WI_MARK_MFU "#(727)"

static void wi_plot_legend(const wi_columns *cols)
{
  PLINT opts[2] = {PL_LEGEND_LINE | PL_LEGEND_SYMBOL, PL_LEGEND_LINE | PL_LEGEND_SYMBOL};
  PLINT colors[2] = {2, 3}, ink[2] = {1, 1}, solid[2] = {1, 1}, marks[2] = {3, 3};
  PLFLT widths[2] = {1, 1}, scales[2] = {1, 1};
  const char *texts[2] = {cols->axis[0], cols->axis[1]}, *symbols[2] = {WI_MARK_STEP, WI_MARK_MFU};
  PLFLT w, h;
  pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
           PL_POSITION_BOTTOM | PL_POSITION_RIGHT | PL_POSITION_INSIDE, 0.02, 0.02, 0.1, 0, 1, 1, 0,
           0, 2, opts, 1.0, 0.8, 2.0, 0, ink, texts, NULL, NULL, NULL, NULL, colors, solid, widths,
           colors, scales, marks, symbols);
}

/* A plot of step time (left axis) and MFU (right axis), or their serving counterparts, against
 * the swept value, dark ink on white, with units, a legend, and a log x axis for geometric
 * sweeps. */
static bool wi_plot(const char *path, const char *key, const GArray *pts, const wi_columns *cols,
                    GError **err)
{
  const char *dev = NULL;
  if (!wi_plot_device(path, &dev, err))
    return false;
  int n = (int)pts->len;
  g_autofree PLFLT *x = g_new(PLFLT, n), *t = g_new(PLFLT, n), *m = g_new(PLFLT, n);
  PLFLT t1 = 0;
  for (int i = 0; i < n; i++) {
    const wi_point *p = &g_array_index(pts, wi_point, i);
    x[i] = p->x;
    t[i] = p->step;
    m[i] = 100 * p->mfu;
    t1 = MAX(t1, t[i]);
  }
  bool log_x = wi_geometric(x, n);
  PLFLT x0 = INFINITY, x1 = -INFINITY;
  for (int i = 0; i < n; i++) {
    x[i] = log_x ? log10(x[i]) : x[i];
    x0 = MIN(x0, x[i]);
    x1 = MAX(x1, x[i]);
  }
  if (x1 <= x0)
    x1 = x0 + 1;
  PLFLT pad = 0.05 * (x1 - x0);
  const char *sym = wi_unit_symbol(key);
  g_autofree char *xlabel = *sym ? g_strdup_printf("%s (%s%s)", key, sym, log_x ? ", log scale" : "")
                                 : g_strdup_printf("%s%s", key, log_x ? " (log scale)" : "");
  g_autofree char *title = g_strdup_printf("dlsim whatif: %s and %s vs %s", cols->axis[0],
                                           cols->axis[1], key);
  plsdev(dev);
  plsfnam(path);
  wi_plot_palette();
  plinit();
  pladv(0);
  plvpor(0.12, 0.86, 0.14, 0.88);
  plwind(x0 - pad, x1 + pad, 0, t1 * 1.15);
  plcol0(1);
  plbox(log_x ? "bcnstl" : "bcnst", 0, 0, "bnstv", 0, 0);
  pllab(xlabel, cols->axis[0], title);
  plcol0(2);
  plline(n, x, t);
  plstring(n, x, t, WI_MARK_STEP);
  plwind(x0 - pad, x1 + pad, 0, 100);
  plcol0(1);
  plbox("", 0, 0, "cmstv", 0, 0);
  plmtex("r", 3.0, 0.5, 0.5, cols->axis[1]);
  plcol0(3);
  plline(n, x, m);
  plstring(n, x, m, WI_MARK_MFU);
  wi_plot_legend(cols);
  plend();
  return true;
}

/* Every point of the sweep this rank takes, as what `dlsim run --json` (or serve) prints or
 * the error that stopped it; a rank stops at its first error (one process stops at the first
 * in sweep order, which is never later). Rank 0 ends with every rank's points. */
static GPtrArray *wi_sweep_run(const wi_args *a, const char *key, char **values, eng_kind engine,
                               const cli_mpi *m)
{
  GPtrArray *results = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  g_ptr_array_set_size(results, (gint)g_strv_length(values));
  bool ok = true;
  for (guint i = 0; ok && values[i]; i++) {
    if (!cli_mpi_takes(m, i))
      continue;
    g_autofree char *set = g_strdup_printf("%s=%s", key, g_strstrip(values[i]));
    char *one[] = {set, NULL};
    g_auto(GStrv) sets = sim_strv_concat(a->base, one);
    GError *err = NULL;
    cJSON *j = wi_run(a, sets, engine, &err);
    ok = j != NULL;
    g_autofree char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    results->pdata[i] = ok ? cli_mpi_pack_text(text) : cli_mpi_pack_error(err);
    cJSON_Delete(j);
    g_clear_error(&err);
  }
  cli_mpi_gather_items(m, results);
  return results;
}

/* On MPI ranks, the points are shared out and rank 0 prints what one process would. */
static bool wi_sweep(const wi_args *a, eng_kind engine, const cli_mpi *m, GError **err)
{
  const char *eq = strchr(a->sweep, '=');
  if (!eq || !eq[1]) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--sweep %s: expected KEY=V1,V2,...", a->sweep);
    return false;
  }
  g_autofree char *key = g_strndup(a->sweep, (gsize)(eq - a->sweep));
  const char *dev = NULL;
  if (a->plot && !wi_plot_device(a->plot, &dev, err)) /* before minutes of sweeping */
    return false;
  g_auto(GStrv) values = g_strsplit(eq + 1, ",", -1);
  GPtrArray *results = wi_sweep_run(a, key, values, engine, m);
  if (m->rank != 0) { /* rank 0 reports */
    g_ptr_array_free(results, TRUE);
    return true;
  }
  GArray *pts = g_array_new(FALSE, TRUE, sizeof(wi_point));
  bool ok = true, serving = false;
  for (guint i = 0; ok && i < results->len; i++) {
    g_autofree char *text = cli_mpi_unpack(results->pdata[i], err);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    ok = j != NULL;
    if (text && !j)
      g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "--sweep: point %u came back garbled", i + 1);
    if (ok) {
      serving = !cJSON_GetObjectItemCaseSensitive(j, "step_time_s");
      wi_point p = wi_point_of(j, values[i], wi_sweep_x(key, g_strstrip(values[i]), (int)i));
      g_array_append_val(pts, p);
    }
    cJSON_Delete(j);
  }
  g_ptr_array_free(results, TRUE);
  const wi_columns *cols = serving ? &wi_serving : &wi_training;
  if (ok && a->json) {
    cJSON *arr = cJSON_CreateArray();
    for (guint i = 0; i < pts->len; i++) {
      const wi_point *p = &g_array_index(pts, wi_point, i);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, key, p->value);
      cJSON_AddNumberToObject(o, cols->json[0], p->step);
      cJSON_AddNumberToObject(o, cols->json[1], p->mfu);
      cJSON_AddNumberToObject(o, cols->json[2], p->tokens);
      if (!serving)
        cJSON_AddNumberToObject(o, cols->json[3], p->peak);
      cJSON_AddBoolToObject(o, cols->json[4], p->fits);
      cJSON_AddItemToArray(arr, o);
    }
    rep_json_print(stdout, arr);
    cJSON_Delete(arr);
  } else if (ok) {
    const char *fmt = a->csv ? "%s,%.6g,%.4f,%.6g,%s,%s\n" : "  %-16s %12.4f %8.1f %12.0f %14s %s\n";
    if (a->csv)
      printf("%s,%s,%s,%s,%s,%s\n", key, cols->json[0], cols->json[1], cols->json[2],
             cols->csv_memory, cols->json[4]);
    else
      printf("dlsim whatif: sweep of %s\n  %-16s %12s %8s %12s %14s %s\n", key, "value",
             cols->head[0], cols->head[1], cols->head[2], cols->head[3], cols->head[4]);
    for (guint i = 0; i < pts->len; i++) {
      const wi_point *p = &g_array_index(pts, wi_point, i);
      char gib[32];
      g_snprintf(gib, sizeof gib, isfinite(p->peak) ? (a->csv ? "%.4f" : "%.2f") : "-",
                 p->peak / (1024.0 * 1024 * 1024));
      printf(fmt, p->value, p->step, a->csv ? p->mfu : 100 * p->mfu, p->tokens,
             isfinite(p->peak) || !a->csv ? gib : "", p->fits ? "yes" : "no");
    }
  }
  if (ok && a->plot && pts->len > 0) {
    ok = wi_plot(a->plot, key, pts, cols, err);
    if (ok && !a->json && !a->csv)
      printf("  wrote %s\n", a->plot);
  }
  g_array_free(pts, TRUE);
  return ok;
}

int cli_whatif(int argc, char **argv)
{
  wi_args a = {0};
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &a.cluster, NULL),
      cli_opt(CLI_WORKLOAD, &a.workload, NULL),
      cli_opt(CLI_SET, &a.sets,
              "The change: override a key in the changed system only, repeatable (--base: in both)"),
      {"base", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.base, "Override a key of both systems, repeatable", "KEY=VALUE"},
      {"sweep", 0, 0, G_OPTION_ARG_STRING, &a.sweep, "Sweep one key over values", "KEY=V1,V2,..."},
      {"plot", 0, 0, G_OPTION_ARG_FILENAME, &a.plot, "With --sweep: plot to a .svg/.pdf/.ps file", "FILE"},
      cli_opt(CLI_ENGINE, &a.engine, NULL),
      cli_opt(CLI_MAX_MEMORY, &a.max_memory, NULL),
      cli_opt(CLI_YES, &a.yes, NULL),
      cli_opt(CLI_JSON, &a.json, NULL),
      cli_opt(CLI_CSV, &a.csv,
              "Print CSV: one row per figure (baseline, changed, delta) or per swept value"),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- the same job on changed hardware or settings", &argc, &argv, &code)) {
    wi_args_clear(&a);
    return code;
  }
  if (!a.cluster || !a.workload || (!a.sets && !a.sweep)) {
    fprintf(stderr, "dlsim: error: dlsim whatif needs -c CLUSTER, -w WORKLOAD and --set KEY=VALUE "
                    "or --sweep KEY=V1,V2,... (see --help)\n");
    wi_args_clear(&a);
    return 2;
  }
  GError *err = NULL;
  eng_kind engine;
  cli_mpi mpi;
  cli_mpi_init(&mpi);
  bool ok = cli_engine(a.engine, &engine, &err) &&
            bud_limits_parse(&a.budget, a.max_memory, a.yes, &err);
  if (ok && a.sweep) {
    ok = wi_sweep(&a, engine, &mpi, &err);
  } else if (ok && mpi.rank == 0) { /* two runs: nothing to share */
    g_auto(GStrv) changed = sim_strv_concat(a.base, a.sets);
    cJSON *b = wi_run(&a, a.base, engine, &err);
    cJSON *c = b ? wi_run(&a, changed, engine, &err) : NULL;
    ok = c != NULL;
    if (ok && a.json) {
      cJSON *j = cJSON_CreateObject();
      cJSON_AddItemToObject(j, "delta", wi_delta(b, c));
      cJSON_AddItemToObject(j, "baseline", b);
      cJSON_AddItemToObject(j, "changed", c);
      b = c = NULL;
      rep_json_print(stdout, j);
      cJSON_Delete(j);
    } else if (ok && a.csv) {
      wi_print_csv(b, c);
    } else if (ok) {
      wi_print_text(b, c, a.sets);
    }
    cJSON_Delete(b);
    cJSON_Delete(c);
  }
  wi_args_clear(&a);
  return cli_mpi_finish(&mpi, 0, ok ? NULL : err);
}
