/* Trace ingestion speed: a synthetic Kineto trace of a given size (the event mix of a real
 * one: CPU ops with shapes, runtime calls, kernels with their args, flow events, NCCL kernels,
 * ProfilerSteps), written plain and gzip-compressed, then loaded, summarised and turned into a
 * replay program, each in a fresh process so that its peak RSS is its own.
 *
 *   dlsim_bench_trace [MB...]   (default 10 100) */
#include "bench_util.h"
#include "trace/trace.h"

#include <gio/gio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* One launch: the aten op, the runtime call, the kernel and the flow pair (~1.3 kB). */
static void bt_launch(GString *o, long i, double *t, bool nccl)
{
  double ts = *t;
  const char *kernel = nccl ? "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
                            : "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>"
                              "(cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4::Params)";
  g_string_append_printf(o,
      "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 7, \"tid\": 7, \"ts\": %.3f, "
      "\"dur\": 30.0, \"args\": {\"External id\": %ld, \"Ev Idx\": %ld, \"Input Dims\": [[512, 1024], "
      "[1024, 4096]], \"Input type\": [\"float\", \"float\"]}},\n",
      nccl ? "nccl:all_reduce" : "aten::mm", ts, i, i);
  g_string_append_printf(o,
      "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 7, "
      "\"tid\": 7, \"ts\": %.3f, \"dur\": 6.0, \"args\": {\"External id\": %ld, \"cbid\": 211, "
      "\"correlation\": %ld}},\n",
      ts + 10, i, i);
  g_string_append_printf(o,
      "  {\"ph\": \"s\", \"id\": %ld, \"pid\": 7, \"tid\": 7, \"ts\": %.3f, \"cat\": \"ac2g\", "
      "\"name\": \"ac2g\"},\n",
      i, ts + 10);
  g_string_append_printf(o,
      "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, \"ts\": "
      "%.3f, \"dur\": 25.0, \"args\": {\"External id\": %ld, \"queued\": 0, \"device\": 0, "
      "\"context\": 1, \"stream\": %d, \"correlation\": %ld, \"registers per thread\": 168, "
      "\"shared memory\": 73728, \"blocks per SM\": 1.185185, \"warps per SM\": 9.481482, "
      "\"grid\": [128, 1, 1], \"block\": [256, 1, 1], \"est. achieved occupancy %%\": 12}},\n",
      kernel, nccl ? 20 : 7, ts + 20, i, nccl ? 20 : 7, i);
  g_string_append_printf(o,
      "  {\"ph\": \"f\", \"id\": %ld, \"pid\": 0, \"tid\": 7, \"ts\": %.3f, \"cat\": \"ac2g\", "
      "\"name\": \"ac2g\", \"bp\": \"e\"},\n",
      i, ts + 20);
  *t += 31;
}

static char *bt_write(double mb)
{
  GString *o = g_string_sized_new((gsize)(mb * 1.05e6));
  g_string_append(o, "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, "
                     "\"world_size\": 8}, \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA "
                     "A100-SXM4-80GB\", \"totalGlobalMem\": 85899345920, \"numSms\": 108}],\n"
                     "\"traceEvents\": [\n");
  double t = 1e12, step_start = t;
  long i = 0;
  int step = 1;
  while (o->len < mb * 1e6) {
    bt_launch(o, i, &t, i % 50 == 49);
    if (++i % 2000 == 0) {
      g_string_append_printf(o, "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
                                "\"ProfilerStep#%d\", \"pid\": 7, \"tid\": 7, \"ts\": %.3f, \"dur\": %.3f},\n",
                             step++, step_start, t - step_start);
      step_start = t;
    }
  }
  g_string_append(o, "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 7, \"tid\": 0, \"args\": "
                     "{\"name\": \"python\"}}\n]}\n");
  char *path = NULL;
  int fd = g_file_open_tmp("dlsim-bench-trace-XXXXXX.json", &path, NULL);
  close(fd);
  g_file_set_contents(path, o->str, (gssize)o->len, NULL);
  g_string_free(o, TRUE);
  return path;
}

/* The same file gzip-compressed with GIO. */
static char *bt_gzip(const char *path)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  g_file_get_contents(path, &text, &len, NULL);
  GZlibCompressor *z = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 6);
  GOutputStream *mem = g_memory_output_stream_new_resizable();
  GOutputStream *out = g_converter_output_stream_new(mem, G_CONVERTER(z));
  g_output_stream_write_all(out, text, len, NULL, NULL, NULL);
  g_output_stream_close(out, NULL, NULL);
  char *gz = g_strdup_printf("%s.gz", path);
  g_file_set_contents(gz, g_memory_output_stream_get_data(G_MEMORY_OUTPUT_STREAM(mem)),
                      (gssize)g_memory_output_stream_get_data_size(G_MEMORY_OUTPUT_STREAM(mem)), NULL);
  g_object_unref(out);
  g_object_unref(mem);
  g_object_unref(z);
  return gz;
}

static const char *bt_path;

/* sim = seconds to load, wall = seconds to load + summarise (+ build the replay program),
 * messages = events read. */
static bench_row bt_run(int unused, bool replay)
{
  (void)unused;
  bench_row row = {0};
  gint64 t0 = g_get_monotonic_time();
  trc_trace *t = trc_load(bt_path, NULL);
  row.sim = (double)(g_get_monotonic_time() - t0) / 1e6;
  if (!t)
    return row;
  trc_summary s;
  trc_summarize(t, &s);
  trc_summary_clear(&s);
  if (replay) {
    trc_replay r;
    trc_replay_options o = {.first_step = -1, .last_step = -1, .comm_measured = true};
    trc_trace *list[] = {t};
    if (trc_replay_build(list, 1, &o, &r, NULL))
      trc_replay_clear(&r);
  }
  row.wall = (double)(g_get_monotonic_time() - t0) / 1e6;
  row.messages = (long)t->events;
  row.ok = 1;
  trc_free(t);
  return row;
}

static const char bench_usage[] =
    "usage: dlsim_bench_trace [MB...]\n"
    "Trace ingestion speed: a synthetic Kineto trace of each size (a real trace's event mix),\n"
    "written as JSON and as gzip, then loaded, and loaded + summarised + turned into a replay\n"
    "program, each in a fresh process: events, seconds and peak RSS.\n"
    "  MB...  sizes of JSON to write, up to 8 (default 10 100: the README's figures)\n";

int main(int argc, char **argv)
{
  bench_args(argc, argv, bench_usage, 8);
  double sizes[8] = {10, 100};
  int n = argc > 1 ? MIN(argc - 1, 8) : 2;
  for (int i = 0; i < n && argc > 1; i++)
    sizes[i] = atof(argv[i + 1]);
  printf("dlsim bench: Kineto trace ingestion (synthetic trace with a real trace's event mix)\n");
  printf("%8s %8s %10s %8s %12s %16s %12s\n", "JSON_MB", "format", "events", "load_s",
         "load_rss_MB", "+summary+replay_s", "replay_rss_MB");
  for (int i = 0; i < n; i++) {
    char *json = bt_write(sizes[i]);
    char *gz = bt_gzip(json);
    malloc_trim(0); /* the children below inherit this process: let them inherit no garbage */
    const char *paths[] = {json, gz};
    for (int f = 0; f < 2; f++) {
      bt_path = paths[f];
      bench_row l = bench_isolated(bt_run, 0, false), r = bench_isolated(bt_run, 0, true);
      printf("%8.0f %8s %10ld %8.2f %12.1f %16.2f %12.1f\n", sizes[i], f ? "json.gz" : "json",
             r.messages, l.sim, l.rss_mb, r.wall, r.rss_mb);
    }
    unlink(json);
    unlink(gz);
    g_free(json);
    g_free(gz);
  }
  return 0;
}
