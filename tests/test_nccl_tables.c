/* nccl-tests tables in every layout users have: what all_reduce_perf & co. print (current and
 * older columns), CSV, and what dlsim coll prints, which must read back to the parameters that
 * made it. */
#include "calibration/calibration.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static calib_table nt_load_with(const char *relative, const char *time_column)
{
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, relative, NULL);
  calib_columns cols = {.time_column = time_column};
  calib_table t = {0};
  GError *err = NULL;
  cr_assert(calib_table_load(path, &cols, &t, &err), "%s", err ? err->message : "");
  return t;
}

static calib_table nt_load(const char *relative)
{
  return nt_load_with(relative, "oop_time_us|ip_time_us");
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

/* `dlsim coll` with nccl.p2p_efficiency 0.5 (its output must hold `mark`), then `dlsim
 * calibrate` with `reader` (--nccl, --omb) on what it printed: the p2p_efficiency it fits. */
static double nt_fit_back(const char *op, const char *format, const char *mark, const char *reader)
{
  const char *cluster = "-c dgx-a100 --set node.count=1 --set gpu.calibration=none";
  g_autofree char *coll = g_strdup_printf("coll %s --set nccl.p2p_efficiency=0.5 --op %s --gpus 8 "
                                          "--min 1KiB --max %s --factor 4 %s", cluster, op,
                                          *format ? "64MiB" : "1GiB", format);
  th_proc p = th_dlsim(coll);
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert(strstr(p.out, mark), "%s", p.out);
  g_autofree char *table = th_write("coll.txt", p.out);
  g_autofree char *out = th_write("fitted.yaml", "");
  g_autofree char *cal = g_strdup_printf("calibrate %s %s %s --op %s --gpus 8 "
                                         "--fit p2p_efficiency -o %s", reader, table, cluster, op, out);
  th_proc q = th_dlsim(cal);
  cr_assert_eq(q.status, 0, "%s", q.out);
  g_autofree char *yaml = NULL;
  cr_assert(g_file_get_contents(out, &yaml, NULL, NULL));
  const char *at = strstr(yaml, "p2p_efficiency: ");
  cr_assert_not_null(at, "%s", yaml);
  th_proc_clear(&p);
  th_proc_clear(&q);
  return g_ascii_strtod(at + strlen("p2p_efficiency: "), NULL);
}

/* dlsim coll prints nccl-tests' layout: calibrating on it finds the parameter it was made with. */
Test(nccl_tables, coll_output_round_trips_through_calibrate, .timeout = 60)
{
  double fitted = nt_fit_back("sendrecv", "", "# Avg bus bandwidth    : ", "--nccl");
  cr_assert(fabs(fitted - 0.5) < 0.01, "fitted p2p_efficiency %g, the table was made with 0.5", fitted);
}

/* A calibration written with ceilings set for more nodes only loads back: the unset two-node
 * figures (NAN, as the loader leaves them) are written as 0 (no ceiling), not as "nan", which
 * the loader refused (validation/fit-h100.sh's step 1 wrote that). */
Test(nccl_tables, calibration_with_one_ceiling_set_loads_back)
{
  const char *const sets[] = {"gpu.calibration=none", "nccl.ll_max_bandwidth.more_nodes=20.4GB/s",
                              "nccl.nvls_tree_channel.more_nodes=45.5GB/s", NULL};
  cfg_cluster *c = NULL;
  const char *preset = "dgx-h100";
  cr_assert(th_load(preset, NULL, sets, &c, NULL));
  g_autofree char *yaml = NULL;
  g_autofree char *out = th_write_calibration(c, "ceiling.yaml", &yaml);
  cr_assert(out);
  cr_assert(strstr(yaml, "ll_max_bandwidth: {two_nodes: 0GB/s, more_nodes: 20.4GB/s}"), "%s", yaml);
  cr_assert(strstr(yaml, "nvls_tree_channel: {two_nodes: 0GB/s, more_nodes: 45.5GB/s}"), "%s", yaml);
  cr_assert_null(strstr(yaml, "nan"), "%s", yaml);
  g_autofree char *set_cal = g_strdup_printf("gpu.calibration=%s", out);
  const char *const back[] = {set_cal, NULL};
  cfg_cluster *d = NULL;
  cr_assert(th_load(preset, NULL, back, &d, NULL));
  cr_assert_float_eq(d->nccl.ll_max_bandwidth[CFG_SCALE_MORE_NODES], 20.4e9, 1e3);
  cr_assert_float_eq(d->nccl.ll_max_bandwidth[CFG_SCALE_TWO_NODES], 0, 1e-9);
  cfg_cluster_free(c);
  cfg_cluster_free(d);
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

/* ---- OSU Micro-Benchmarks output ------------------------------------------------------------ */

static calib_table omb_load(const char *relative)
{
  return nt_load_with(relative, "time_us");
}

static const calib_point *omb_point(const calib_table *t, guint i)
{
  return &g_array_index(t->points, calib_point, i);
}

Test(omb_tables, real_outputs_read_with_a_time_per_row)
{
  calib_table bw = omb_load("validation/omb/alps_gh200_osu_bw_dd_internode.txt");
  cr_assert_eq(bw.points->len, 23);
  /* osu_bw: MB/s is bytes per microsecond, the time of a message is size / bandwidth */
  cr_assert_float_eq(omb_point(&bw, 22)->time, 4194304 / 23989.54 * 1e-6, 1e-12);
  cr_assert_eq(omb_point(&bw, 0)->size, 1);
  cr_assert_eq(bw.window, 64, "osu_bw streams OMB's window of 64 messages");
  calib_table a2a = omb_load("validation/omb/alps_gh200_osu_alltoall_cuda_2x4.txt");
  cr_assert_eq(a2a.points->len, 21);
  cr_assert_eq(a2a.window, 0, "a latency test times one collective at a time");
  cr_assert_float_eq(omb_point(&a2a, 0)->time, 22.26e-6, 1e-12);
  /* osu_alltoall's size is per rank pair: the model's is 8 times that over 8 ranks */
  calib_table_model_sizes(&a2a, PROG_COLL_ALLTOALL, 8);
  cr_assert_eq(omb_point(&a2a, 20)->size, 8.0 * 1048576);
  calib_table full = omb_load("validation/omb/jsc_a100_osu_allreduce_4gpu_1gib_ucc_cuda.txt");
  calib_table_model_sizes(&full, PROG_COLL_ALLREDUCE, 4);
  calib_table nccl = nt_load("tests/data/nccl_issue309_all_reduce_perf.txt");
  calib_table_model_sizes(&nccl, PROG_COLL_ALLTOALL, 16); /* nccl-tests' sizes are the model's */
  cr_assert_eq(omb_point(&nccl, 0)->size, 8);
  calib_table_clear(&nccl);
  cr_assert_eq(full.points->len, 1);
  cr_assert_eq(omb_point(&full, 0)->size, 1073741824.0);
  cr_assert_float_eq(omb_point(&full, 0)->time, 7327.25e-6, 1e-12);
  calib_table_clear(&bw);
  calib_table_clear(&a2a);
  calib_table_clear(&full);
}

/* OMB 5's osu_latency (its own column label, a size-0 row), UCX's log in the table, rank
 * labels, and a second benchmark after the first: the first table is read. */
Test(omb_tables, older_layout_logs_labels_and_a_second_table)
{
  const char *text =
      "srun: job 1 has been allocated resources\n"
      "# OSU MPI-CUDA Latency Test v5.6.3\n"
      "# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)\n"
      "# Size          Latency (us)\n"
      "0                       0.95\n"
      "[1645203303.805848] [host2:43:0]      ucp_worker.c:1877 UCX  INFO  ep_cfg[3]: tag(rc_mlx5/mlx5_0:1)\n"
      "0: 1                    21.07\n"
      "[1,0]<stdout>:2                       21.74\n"
      "\n"
      "# OSU MPI-CUDA Bandwidth Test v5.6.3\n"
      "# Size      Bandwidth (MB/s)\n"
      "1                       0.41\n";
  g_autofree char *path = th_write("omb.txt", text);
  calib_columns cols = {.time_column = "time_us"};
  calib_table t = {0};
  GError *err = NULL;
  cr_assert(calib_table_load(path, &cols, &t, &err), "%s", err ? err->message : "");
  cr_assert_eq(t.points->len, 2);
  cr_assert_eq(omb_point(&t, 1)->size, 2);
  cr_assert_float_eq(omb_point(&t, 1)->time, 21.74e-6, 1e-12);
  calib_table_clear(&t);
}

Test(omb_tables, malformed_lines_say_where_and_what)
{
  const char *head = "# OSU MPI-CUDA Bandwidth Test v7.5\n# Datatype: MPI_CHAR.\n"
                     "# Size      Bandwidth (MB/s)        Validation\n";
  g_autofree char *short_row = g_strconcat(head, "1                       0.90\n", NULL);
  g_autofree char *m1 = nt_error(short_row, "time_us");
  cr_assert_str_eq(m1, ":4: expected an OMB row of 3 columns (size_bytes bandwidth_MBps validation), "
                       "got 2: '1                       0.90'");
  g_autofree char *bad_bw = g_strconcat(head, "1                       0.9O              Pass\n", NULL);
  g_autofree char *m2 = nt_error(bad_bw, "time_us");
  cr_assert_str_eq(m2, ":4:25: bandwidth_MBps: expected a number, got '0.9O'");
  g_autofree char *zero_bw = g_strconcat(head, "1                       0.00              Pass\n", NULL);
  g_autofree char *m3 = nt_error(zero_bw, "time_us");
  cr_assert_str_eq(m3, ":4: bandwidth_MBps: expected a bandwidth above 0, got '0.00'");
  g_autofree char *m4 = nt_error("# OSU MPI Allreduce Latency Test v7.5\n4  1.0\n", "time_us");
  cr_assert_str_eq(m4, ": an OMB title ('# OSU ...') but no column header ('# Size ...') under it");
  g_autofree char *m5 = nt_error("# OSU MPI Multi Latency Test v7.5\n# Size  Messages/s\n4  1.0\n", "time_us");
  cr_assert(g_str_has_prefix(m5, ":2: expected an OMB column header with 'Avg Latency(us)'"), "%s", m5);
  g_autofree char *good = g_strconcat(head, "1                       0.90              Pass\n", NULL);
  g_autofree char *m6 = nt_error(good, "oop_time_us");
  cr_assert(strstr(m6, "(OMB output has time_us: dlsim calibrate --omb"), "%s", m6);
}

/* The column where each row's number ends, after the size: OMB prints %-10d%18.2f. */
static void omb_assert_lines_up(const char *printed, const char *relative, const char *header)
{
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, relative, NULL);
  g_autofree char *real = NULL;
  cr_assert(g_file_get_contents(path, &real, NULL, NULL));
  g_auto(GStrv) ours = g_strsplit(printed, "\n", -1);
  g_auto(GStrv) theirs = g_strsplit(real, "\n", -1);
  cr_assert_str_eq(ours[1], theirs[0], "the title");
  cr_assert(g_str_has_prefix(ours[2], header) && g_str_has_prefix(theirs[2], header),
            "'%s' and '%s' against '%s'", ours[2], theirs[2], header);
  for (int i = 3; ours[i] && *ours[i]; i++) {
    cr_assert(strlen(ours[i]) >= 28 && ours[i][27] != ' ' && ours[i][28 - 3] == '.', "%s", ours[i]);
    cr_assert(strlen(theirs[i]) >= 28 && theirs[i][27] != ' ' && theirs[i][25] == '.', "%s", theirs[i]);
    cr_assert(strcspn(ours[i], " ") == strcspn(theirs[i], " "), "'%s' against '%s'", ours[i], theirs[i]);
  }
}

/* dlsim coll --format omb against the real tables of validation/omb/: the same title and
 * header, the same sizes and the same columns. */
Test(omb_tables, coll_lines_up_with_real_omb_tables, .timeout = 60)
{
  th_proc bw = th_dlsim("coll -c gh200 --set network.nic_bandwidth=200Gb/s --op sendrecv --gpus 2 --format omb");
  cr_assert_eq(bw.status, 0, "%s", bw.out);
  omb_assert_lines_up(bw.out, "validation/omb/alps_gh200_osu_bw_dd_internode.txt", "# Size      Bandwidth (MB/s)");
  th_proc a2a = th_dlsim("coll -c gh200 --set node.gpus_per_node=4 --set node.nics_per_node=4 --set node.intra.bandwidth=150GB/s --op alltoall --gpus 8 --format omb");
  cr_assert_eq(a2a.status, 0, "%s", a2a.out);
  omb_assert_lines_up(a2a.out, "validation/omb/alps_gh200_osu_alltoall_cuda_2x4.txt", "# Size       Avg Latency(us)");
  th_proc_clear(&bw);
  th_proc_clear(&a2a);
}

/* A table dlsim coll prints in OMB's layout from a known parameter fits back to it: osu_bw
 * (time = size / bandwidth) and osu_alltoall (sizes per rank pair, 8 times smaller than the
 * model's). */
Test(omb_tables, coll_output_round_trips_through_calibrate_omb, .timeout = 60)
{
  double bw = nt_fit_back("sendrecv", "--format omb", "# OSU MPI-CUDA Bandwidth Test", "--omb");
  cr_assert(fabs(bw - 0.5) < 0.01, "osu_bw: fitted p2p_efficiency %g, the table was made with 0.5", bw);
  double a2a = nt_fit_back("alltoall", "--format omb", "# OSU MPI-CUDA All-to-All", "--omb");
  cr_assert(fabs(a2a - 0.5) < 0.01, "osu_alltoall: fitted p2p_efficiency %g, made with 0.5", a2a);
}
