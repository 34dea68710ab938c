/* dlsim calibrate --nccl TABLE.csv -c CLUSTER --op OP --gpus N [--group-size G]
 *                 [--size-column C] [--time-column C] [--time-unit us|ns|ms|s] [--filter COL=V]...
 *                 -o OUT.yaml [--set K=V]...
 * Fits the NCCL parameters of the cluster to a real nccl-tests table and writes them as a
 * calibration file that `gpu.calibration` can point at. */
#include "calibration/calibration.h"
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static void cal_print_errors(const char *when, const calib_errors *e)
{
  printf("  %-7s busbw |error|: median %5.1f %%", when, 100 * e->median_all);
  if (e->n_large)
    printf(" (sizes >= 1 MiB: median %.1f %%, worst %.1f %%)", 100 * e->median_large,
           100 * e->worst_large);
  if (e->n_small)
    printf(" (< 64 KiB: median %.1f %%, worst %.1f %%)", 100 * e->median_small, 100 * e->worst_small);
  printf("\n");
}

int cli_calibrate(int argc, char **argv)
{
  g_autofree char *nccl = NULL, *cluster = NULL, *op = NULL, *output = NULL;
  g_autofree char *size_col = NULL, *time_col = NULL, *unit = NULL;
  g_auto(GStrv) sets = NULL, filters = NULL, fit = NULL;
  int gpus = 0, group = 0;
  GOptionEntry entries[] = {
      {"nccl", 0, 0, G_OPTION_ARG_FILENAME, &nccl, "nccl-tests table (CSV) to fit", "TABLE"},
      {"cluster", 'c', 0, G_OPTION_ARG_FILENAME, &cluster, "Cluster the table was measured on", "CLUSTER"},
      {"op", 0, 0, G_OPTION_ARG_STRING, &op, "Collective of the table", "OP"},
      {"gpus", 'n', 0, G_OPTION_ARG_INT, &gpus, "GPUs of the run", "N"},
      {"group-size", 'g', 0, G_OPTION_ARG_INT, &group, "GPUs per group (groups run at once)", "G"},
      {"size-column", 0, 0, G_OPTION_ARG_STRING, &size_col, "Size column (default size_bytes)", "C"},
      {"time-column", 0, 0, G_OPTION_ARG_STRING, &time_col, "Time column; a|b takes the smaller (default oop_time_us|ip_time_us)", "C"},
      {"time-unit", 0, 0, G_OPTION_ARG_STRING, &unit, "Unit of the time column (default us)", "U"},
      {"filter", 0, 0, G_OPTION_ARG_STRING_ARRAY, &filters, "Keep rows where COL=VALUE", "COL=VALUE"},
      {"fit", 0, 0, G_OPTION_ARG_STRING_ARRAY, &fit,
       "A parameter (or prefix) to fit, repeatable (default: base_latency, hop_latency)", "NAME"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Calibration file to write", "FILE"},
      {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &sets, "Override a cluster key", "KEY=VALUE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  int code = 0;
  if (!cli_parse(entries, "- fit model parameters to real measurements", &argc, &argv, &code))
    return code;
  if (!nccl || !cluster || !output || !op || gpus < 2) {
    fprintf(stderr, "dlsim: error: dlsim calibrate needs --nccl TABLE, -c CLUSTER, --op OP, "
                    "--gpus N and -o FILE (see --help)\n");
    return 2;
  }
  GError *err = NULL;
  calib_target t = {.gpus = gpus, .group = group > 0 ? group : gpus, .engine = ENG_ANALYTIC,
                    .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  calib_columns cols = {.size_column = size_col,
                        .time_column = time_col ? time_col : "oop_time_us|ip_time_us",
                        .filters = filters};
  cfg_cluster *c = NULL;
  calib_table tab = {0};
  calib_fit_report rep;
  bool ok = prog_coll_parse(op, &t.op, &err) && (!unit || calib_time_unit(unit, &cols.time_scale, &err)) &&
            calib_table_load(nccl, &cols, &tab, &err) && cfg_load_with(cluster, NULL, sets, &c, NULL, &err);
  if (ok && (gpus > cfg_cluster_gpus(c) || gpus % t.group)) {
    g_set_error(&err, CFG_ERROR, CFG_ERROR_INPUT, "--gpus %d / --group-size %d do not fit the cluster's %d GPUs",
                gpus, t.group, cfg_cluster_gpus(c));
    ok = false;
  }
  ok = ok && calib_fit_nccl(c, &t, &tab, fit, &rep, &err);
  if (ok) {
    g_autofree char *base = g_path_get_basename(nccl);
    g_autofree char *notes = g_strdup_printf("fitted on %s (%s, %d GPUs, groups of %d, %u rows)",
                                             base, op, gpus, t.group, tab.points->len);
    ok = calib_write_nccl(output, c, notes, &err);
    printf("dlsim calibrate: %s on %s, %u rows, %d parameters, %d evaluations\n", base, c->name,
           tab.points->len, rep.nparams, rep.evaluations);
    for (int i = 0; i < rep.nparams; i++)
      printf("  fitted %s\n", rep.names[i]);
    cal_print_errors("before", &rep.before);
    cal_print_errors("after", &rep.after);
    if (ok)
      printf("  wrote %s (point gpu.calibration at it)\n", output);
  }
  calib_table_clear(&tab);
  cfg_cluster_free(c);
  return ok ? 0 : cli_fail(err);
}
