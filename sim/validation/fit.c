/* Fitting cluster parameters to validation cases (dlsim calibrate --case). Each case's cluster
 * and workload are loaded once; an evaluation sets the parameters in the loaded clusters by
 * their keys (cfg_cluster_param) and predicts every case, with nothing re-read or re-parsed. */
#include "validation/validation_internal.h"

#include "run/run.h"

#include <math.h>
#include <string.h>

static void val_case_free(gpointer p)
{
  cfg_case_clear(p);
  g_free(p);
}

static bool val_fit_params(val_fit *f, char *const *params, GError **err)
{
  f->nkeys = (int)g_strv_length((char **)params);
  if (f->nkeys > CALIB_MAX_PARAMS) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--param: at most %d", CALIB_MAX_PARAMS);
    return false;
  }
  f->keys = g_new0(char *, f->nkeys + 1);
  f->values = g_new0(double, MAX(f->nkeys, 1));
  for (int i = 0; i < f->nkeys; i++) {
    const char *eq = strchr(params[i], '=');
    char *end = NULL;
    double v = eq ? g_ascii_strtod(eq + 1, &end) : NAN;
    if (!eq || !end || *end || !(v > 0) || (strncmp(params[i], "gpu.efficiency.", 15) != 0 &&
                                           strncmp(params[i], "nccl.", 5) != 0)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "--param %s: expected KEY=START with a positive number, KEY under "
                  "gpu.efficiency. or nccl.", params[i]);
      return false;
    }
    f->keys[i] = g_strndup(params[i], (gsize)(eq - params[i]));
    f->values[i] = v;
  }
  return true;
}

static bool val_fit_case_ok(const val_fit *f, const cfg_case *c, GError **err)
{
  const cfg_case *first = g_ptr_array_index(f->cases, 0);
  if (c->table || !(c->measured > 0))
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "case %s: only cases with one positive measured number can be fitted", c->name);
  else if (c->trace)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "case %s: a replayed trace is fitted with dlsim calibrate --trace", c->name);
  else if (strcmp(c->cluster, first->cluster) != 0)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "case %s: every fitted case must use the same cluster file", c->name);
  else
    return true;
  return false;
}

/* The case's cluster and workload with its overrides (or its ratio_to ones), and the fit's. */
static bool val_fit_load(val_fit *f, const cfg_case *c, char *const *own, GError **err)
{
  g_auto(GStrv) sets = sim_strv_concat(own, f->sets);
  cfg_cluster *cl = NULL;
  cfg_workload *w = NULL;
  if (!cfg_load_with(c->cluster, c->workload, sets, &cl, &w, err))
    return false;
  g_ptr_array_add(f->clusters, cl);
  g_ptr_array_add(f->workloads, w);
  return true;
}

static bool val_fit_cases(val_fit *f, char *const *names, GError **err)
{
  GPtrArray *files = val_case_files(names, err);
  bool ok = files != NULL;
  for (guint i = 0; ok && i < files->len; i++) {
    cfg_case *c = g_new0(cfg_case, 1);
    ok = cfg_case_load(g_ptr_array_index(files, i), c, err);
    g_ptr_array_add(f->cases, c);
    ok = ok && val_fit_case_ok(f, c, err) && val_fit_load(f, c, c->set, err) &&
         (!c->ratio_to || val_fit_load(f, c, c->ratio_to, err));
  }
  if (files)
    g_ptr_array_free(files, TRUE);
  return ok;
}

bool val_fit_init(val_fit *f, char *const *cases, char *const *params, char *const *sets,
                  GError **err)
{
  memset(f, 0, sizeof *f);
  f->cases = g_ptr_array_new_with_free_func(val_case_free);
  f->clusters = g_ptr_array_new_with_free_func((GDestroyNotify)cfg_cluster_free);
  f->workloads = g_ptr_array_new_with_free_func((GDestroyNotify)cfg_workload_free);
  f->sets = g_strdupv((char **)sets);
  return val_fit_params(f, params, err) && val_fit_cases(f, cases, err);
}

/* Sets the parameters' current values in a loaded cluster. */
static bool val_fit_apply(const val_fit *f, cfg_cluster *cl, GError **err)
{
  for (int k = 0; k < f->nkeys; k++) {
    double *slot = cfg_cluster_param(cl, f->keys[k], err);
    if (!slot)
      return false;
    *slot = f->values[k];
  }
  return true;
}

/* One loaded pair (index into clusters / workloads): the metric with the current values. */
static bool val_fit_metric(val_fit *f, const cfg_case *c, guint pair, double *out, GError **err)
{
  cfg_cluster *cl = g_ptr_array_index(f->clusters, pair);
  return val_fit_apply(f, cl, err) &&
         val_predict_loaded(c, cl, g_ptr_array_index(f->workloads, pair), out, err);
}

/* Pairs are loaded case by case: one each, two for a ratio. */
static guint val_fit_pair(const val_fit *f, guint i)
{
  guint pair = 0;
  for (guint k = 0; k < i; k++)
    pair += ((const cfg_case *)g_ptr_array_index(f->cases, k))->ratio_to ? 2 : 1;
  return pair;
}

double val_fit_predict(val_fit *f, guint i)
{
  const cfg_case *c = g_ptr_array_index(f->cases, i);
  guint pair = val_fit_pair(f, i);
  double value = NAN, base = 1;
  GError **err = f->error ? NULL : &f->error;
  if (!val_fit_metric(f, c, pair, &value, err) ||
      (c->ratio_to && !val_fit_metric(f, c, pair + 1, &base, err)))
    return NAN;
  return value / base;
}

double val_fit_loss(val_fit *f)
{
  double sum = 0;
  for (guint i = 0; i < f->cases->len; i++) {
    const cfg_case *c = g_ptr_array_index(f->cases, i);
    double p = val_fit_predict(f, i);
    if (!(p > 0))
      return INFINITY;
    sum += fabs(log(p / c->measured));
  }
  return sum / f->cases->len;
}

static double val_fit_objective(void *ctx)
{
  return val_fit_loss(ctx);
}

bool val_fit_run(val_fit *f, GError **err)
{
  /* few cases, few parameters: a light prior keeps a flat direction from wandering */
  calib_search s = {.prior_weight = 1e-3, .loss = val_fit_objective, .ctx = f};
  for (int i = 0; i < f->nkeys; i++) {
    double v = f->values[i];
    bool fraction = v < 1 && strstr(f->keys[i], "efficiency") != NULL;
    calib_search_add(&s, &f->values[i], fraction, fraction ? 0.05 : v / 10,
                     fraction ? 0.99 : v * 10, f->keys[i]);
  }
  /* each evaluation simulates every case: a few dozen per parameter reach 1e-10 */
  int budget = 40 * f->nkeys + 20;
  calib_search_run(&s, f->nkeys > 1 ? 3 : 1, budget, budget / 3);
  if (!f->error && isfinite(val_fit_loss(f)))
    return true;
  if (f->error)
    g_propagate_error(err, g_steal_pointer(&f->error));
  else
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "the fit found no parameters that predict every case");
  return false;
}

bool val_fit_write(const val_fit *f, const char *output, GError **err)
{
  const cfg_case *first = g_ptr_array_index(f->cases, 0);
  cfg_cluster *c = NULL;
  if (!cfg_load_with(first->cluster, NULL, f->sets, &c, NULL, err) || !val_fit_apply(f, c, err)) {
    cfg_cluster_free(c);
    return false;
  }
  GString *notes = g_string_new("fitted on cases");
  for (guint i = 0; i < f->cases->len; i++)
    g_string_append_printf(notes, "%s %s", i ? "," : "",
                           ((cfg_case *)g_ptr_array_index(f->cases, i))->name);
  for (int i = 0; f->sets && f->sets[i]; i++)
    g_string_append_printf(notes, "%s %s", i ? "," : "; with", f->sets[i]);
  char *fitted[CALIB_MAX_PARAMS + 1] = {NULL};
  for (int i = 0; i < f->nkeys; i++) /* keys as the calibration file spells them */
    fitted[i] = f->keys[i] + (g_str_has_prefix(f->keys[i], "gpu.") ? 4 : 0);
  bool ok = calib_write(output, c, notes->str, fitted, err);
  g_string_free(notes, TRUE);
  cfg_cluster_free(c);
  return ok;
}

void val_fit_clear(val_fit *f)
{
  if (f->cases)
    g_ptr_array_free(f->cases, TRUE);
  if (f->clusters)
    g_ptr_array_free(f->clusters, TRUE);
  if (f->workloads)
    g_ptr_array_free(f->workloads, TRUE);
  g_strfreev(f->sets);
  g_strfreev(f->keys);
  g_free(f->values);
  g_clear_error(&f->error);
  memset(f, 0, sizeof *f);
}
