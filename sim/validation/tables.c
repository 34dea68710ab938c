/* Table cases: a real nccl-tests table (bus bandwidth by size) or a table of GEMM times by
 * shape, predicted row by row and judged on the median error. */
#include "validation/validation_internal.h"

#include <string.h>

bool val_is_gemm(const cfg_case *c)
{
  return c->op && strcmp(c->op, "gemm") == 0;
}

static void val_table_failed(val_row *row, GError *err)
{
  row->failure = g_strdup(err->message);
  g_error_free(err);
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
    val_table_failed(row, err);
  }
  cfg_cluster_free(cl);
}

/* A case's `set` entries for its runtime profile (collectives.*: an MPI's or a framework's own
 * costs, undone by `unfit` like the cluster's) or for its cluster; NULL-terminated, the strings
 * borrowed from the case. */
static char **val_sets_for(const cfg_case *c, bool runtime)
{
  GPtrArray *out = g_ptr_array_new();
  for (int i = 0; c->set && c->set[i]; i++)
    if (g_str_has_prefix(c->set[i], "collectives.") == runtime)
      g_ptr_array_add(out, c->set[i]);
  g_ptr_array_add(out, NULL);
  return (char **)g_ptr_array_free(out, FALSE);
}

/* A table of collective times: predicted size by size, judged on the median busbw error. */
static void val_run_coll_table(val_row *row)
{
  const cfg_case *c = &row->c;
  GError *err = NULL;
  cfg_cluster *cl = NULL;
  g_autofree char **cluster_sets = val_sets_for(c, false);
  g_autofree char **runtime_sets = val_sets_for(c, true);
  calib_target t = {.gpus = c->gpus, .group = c->group_size > 0 ? c->group_size : c->gpus,
                    .engine = c->engine ? ENG_DES : ENG_ANALYTIC, .algo = COLL_ALGO_AUTO,
                    .proto = COLL_PROTO_AUTO};
  calib_columns cols = {.size_column = c->size_column, .time_column = c->time_column,
                        .filters = c->filter};
  cfg_collectives rc = {0};
  coll_runtime *rt = NULL;
  if (!c->runtime && runtime_sets[0]) {
    g_set_error(&err, CFG_ERROR, CFG_ERROR_INPUT, "case %s: %s needs a runtime profile (key "
                "'runtime')", c->name, runtime_sets[0]);
    val_table_failed(row, err);
    return;
  }
  bool ok = prog_coll_parse(c->op, &t.op, &err) &&
            (!c->algorithm || coll_algo_parse(c->algorithm, &t.algo, &err)) &&
            (!c->time_unit || calib_time_unit(c->time_unit, &cols.time_scale, &err)) &&
            calib_table_load(c->table, &cols, &row->table, &err) &&
            cfg_load_with(c->cluster, NULL, cluster_sets, &cl, NULL, &err) &&
            (!c->runtime || (cfg_runtime_load_with(c->runtime, runtime_sets, &rc, &err) &&
                             (rt = coll_runtime_new(&rc, NULL, &err)) != NULL));
  t.runtime = rt;
  if (ok) {
    calib_table_model_sizes(&row->table, t.op, t.group);
    row->times = g_new(double, row->table.points->len);
    ok = calib_predict(cl, &t, &row->table, row->times, &err);
  }
  coll_runtime_free(rt);
  cfg_collectives_clear(&rc);
  cfg_cluster_free(cl);
  if (!ok) {
    val_table_failed(row, err);
    return;
  }
  calib_errors_of(&row->table, row->times, &row->errors);
  row->error = row->errors.median_large;
  row->pass = (row->errors.n_large == 0 || row->errors.median_large <= c->tolerance) &&
              (row->errors.n_small == 0 || row->errors.median_small <= c->tolerance_small);
}

void val_run_table(val_row *row)
{
  if (val_is_gemm(&row->c))
    val_run_gemm_table(row);
  else
    val_run_coll_table(row);
}
