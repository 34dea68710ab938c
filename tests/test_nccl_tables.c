/* nccl-tests tables in every layout users have: what all_reduce_perf & co. print (current and
 * older columns), CSV, and what dlsim coll prints, which must read back to the parameters that
 * made it. */
#include "calibration/calibration.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static calib_table nt_load(const char *relative)
{
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, relative, NULL);
  calib_columns cols = {.time_column = "oop_time_us|ip_time_us"};
  calib_table t = {0};
  GError *err = NULL;
  cr_assert(calib_table_load(path, &cols, &t, &err), "%s", err ? err->message : "");
  return t;
}

static char *nt_error(const char *text, const char *time_column)
{
  g_autofree char *path = th_write("table.txt", text);
  calib_columns cols = {.time_column = time_column};
  calib_table t = {0};
  GError *err = NULL;
  cr_assert_not(calib_table_load(path, &cols, &t, &err), "loaded:\n%s", text);
  cr_assert_eq(err->code, CFG_ERROR_INPUT);
  char *message = g_strdup(err->message + strlen(path));
  g_error_free(err);
  return message;
}

Test(nccl_tables, raw_output_reads_as_its_csv)
{
  calib_table raw = nt_load("tests/data/nccl_issue309_all_reduce_perf.txt");
  calib_table csv = nt_load("validation/nccl/issue309_h100_16gpu_2node_allreduce.csv");
  cr_assert_eq(raw.points->len, 32);
  cr_assert_eq(raw.points->len, csv.points->len);
  for (guint i = 0; i < raw.points->len; i++) {
    const calib_point *a = &g_array_index(raw.points, calib_point, i);
    const calib_point *b = &g_array_index(csv.points, calib_point, i);
    cr_assert_eq(a->size, b->size);
    cr_assert_eq(a->time, b->time, "row %u: %g s against %g s", i, a->time, b->time);
  }
  /* the smaller of out-of-place (68.52 us) and in-place (24.70 us) */
  cr_assert_float_eq(g_array_index(raw.points, calib_point, 0).time, 24.70e-6, 1e-12);
  calib_table_clear(&raw);
  calib_table_clear(&csv);
}

Test(nccl_tables, older_layout_without_root_reads)
{
  calib_table t = nt_load("tests/data/nccl_coreweave_all_reduce_perf_old.txt");
  cr_assert_eq(t.points->len, 31);
  const calib_point *last = &g_array_index(t.points, calib_point, t.points->len - 1);
  cr_assert_eq(last->size, 8589934592.0);
  cr_assert_float_eq(last->time, 143927e-6, 1e-9);
  calib_table_clear(&t);
}

static const char *nt_header =
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor)\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n";

Test(nccl_tables, log_lines_footer_and_filters)
{
  g_autofree char *text = g_strconcat(
      "Warning: Permanently added 'node2' to the list of known hosts.\n", nt_header,
      "node1:12:12 [0] NCCL INFO comm 0x5 rank 0 nranks 8 - Init COMPLETE\n",
      "           8             2     float     sum      -1    25.01    0.00    0.00      0    24.70    0.00    0.00    N/A\n",
      "          16             4     float     sum      -1    25.00    0.00    0.00      0    26.00    0.00    0.00      0\n",
      "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.0012 \n#\n", NULL);
  g_autofree char *path = th_write("table.txt", text);
  char *filters[] = {"size_bytes=16", NULL};
  calib_columns cols = {.time_column = "ip_time_us", .filters = filters};
  calib_table t = {0};
  GError *err = NULL;
  cr_assert(calib_table_load(path, &cols, &t, &err), "%s", err ? err->message : "");
  cr_assert_eq(t.points->len, 1);
  cr_assert_float_eq(g_array_index(t.points, calib_point, 0).time, 26e-6, 1e-12);
  calib_table_clear(&t);
}

Test(nccl_tables, malformed_rows_say_where_and_what)
{
  g_autofree char *short_row = g_strconcat(nt_header, "  8  2  float  sum  -1  25.01  0.00  0.00  0\n", NULL);
  g_autofree char *m1 = nt_error(short_row, "oop_time_us");
  cr_assert(g_str_has_prefix(m1, ":4: expected an nccl-tests row of 13 columns (size_bytes count_elements"), "%s", m1);
  cr_assert(strstr(m1, "got 9"), "%s", m1);
  g_autofree char *bad_time = g_strconcat(nt_header,
      "           8             2     float     sum      -1    2x.01    0.00    0.00      0    24.70    0.00    0.00      0\n", NULL);
  g_autofree char *m2 = nt_error(bad_time, "oop_time_us");
  cr_assert_str_eq(m2, ":4:57: oop_time_us: expected a number, got '2x.01'");
  g_autofree char *bad_size = g_strconcat(nt_header,
      "         8.5             2     float     sum      -1    25.01    0.00    0.00      0    24.70    0.00    0.00      0\n", NULL);
  g_autofree char *m3 = nt_error(bad_size, "oop_time_us");
  cr_assert_str_eq(m3, ":4:10: size_bytes: expected a whole number of bytes or elements, got '8.5'");
}

/* dlsim coll prints nccl-tests' layout: calibrating on it finds the parameter it was made with. */
Test(nccl_tables, coll_output_round_trips_through_calibrate, .timeout = 60)
{
  const char *cluster = "-c dgx-a100 --set node.count=1 --set gpu.calibration=none";
  g_autofree char *coll = g_strdup_printf("coll %s --set nccl.p2p_efficiency=0.5 --op sendrecv "
                                          "--gpus 8 --min 1KiB --max 1GiB --factor 4", cluster);
  th_proc p = th_dlsim(coll);
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert(strstr(p.out, "# Avg bus bandwidth    : "), "%s", p.out);
  g_autofree char *table = th_write("coll.txt", p.out);
  g_autofree char *out = th_write("fitted.yaml", "");
  g_autofree char *cal = g_strdup_printf("calibrate --nccl %s %s --op sendrecv --gpus 8 "
                                         "--fit p2p_efficiency -o %s", table, cluster, out);
  th_proc q = th_dlsim(cal);
  cr_assert_eq(q.status, 0, "%s", q.out);
  g_autofree char *yaml = NULL;
  cr_assert(g_file_get_contents(out, &yaml, NULL, NULL));
  const char *at = strstr(yaml, "p2p_efficiency: ");
  cr_assert_not_null(at, "%s", yaml);
  double fitted = g_ascii_strtod(at + strlen("p2p_efficiency: "), NULL);
  cr_assert(fabs(fitted - 0.5) < 0.01, "fitted p2p_efficiency %g, the table was made with 0.5", fitted);
  th_proc_clear(&p);
  th_proc_clear(&q);
}

/* mpirun --tag-output and srun -l label every line with its rank. */
Test(nccl_tables, launcher_rank_labels_are_dropped)
{
  const char *row = "           8             2     float     sum      -1    25.01    0.00    0.00      0    24.70    0.00    0.00      0\n";
  const char *labels[] = {"[1,0]<stdout>:", " 0: "};
  for (size_t k = 0; k < G_N_ELEMENTS(labels); k++) {
    g_auto(GStrv) header = g_strsplit(nt_header, "\n", -1);
    g_autofree char *separator = g_strconcat("\n", labels[k], NULL);
    g_autofree char *labelled = g_strjoinv(separator, header);
    g_autofree char *text = g_strconcat(labels[k], labelled, row, NULL);
    g_autofree char *path = th_write("table.txt", text);
    calib_columns cols = {.time_column = "oop_time_us|ip_time_us"};
    calib_table t = {0};
    GError *err = NULL;
    cr_assert(calib_table_load(path, &cols, &t, &err), "%s\n%s", err ? err->message : "", text);
    cr_assert_eq(t.points->len, 1);
    calib_table_clear(&t);
  }
  g_autofree char *bad = g_strconcat(nt_header, " 0:          8             2     float     sum      -1    x    0.00    0.00      0    24.70    0.00    0.00      0\n", NULL);
  g_autofree char *m = nt_error(bad, "oop_time_us");
  cr_assert_str_eq(m, ":4:59: oop_time_us: expected a number, got 'x'");
}

/* The message of the issue that asked for this reader: it now says what else was looked for. */
Test(nccl_tables, neither_layout_says_what_was_looked_for)
{
  g_autofree char *m = nt_error("a,b\n1,2\n", "oop_time_us");
  cr_assert_str_eq(m, ":1: no column 'size_bytes' or 'oop_time_us' in the header, and no "
                      "nccl-tests column header ('#  size  count  type ...') in the file");
}
