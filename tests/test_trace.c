/* Real kernel traces: the Kineto parser (one event kind at a time, gzip, malformed input), the
 * kernel classification table, the per-step summary, the lower envelope of collective times,
 * and replays with a known critical path. */
#include "calibration/calibration.h"
#include "engine/engine.h"
#include "helpers.h"
#include "trace/trace.h"

#include <criterion/criterion.h>
#include <gio/gio.h>
#include <math.h>
#include <string.h>

#define TRACE_SMALL DLSIM_SOURCE_DIR "/tests/data/trace_small.json"
#define TRACES DLSIM_SOURCE_DIR "/traces/data/"

static trc_trace *load_ok(const char *path)
{
  GError *err = NULL;
  trc_trace *t = trc_load(path, &err);
  cr_assert(t, "%s", err ? err->message : "");
  return t;
}

static trc_trace *text_ok(const char *text)
{
  GError *err = NULL;
  trc_trace *t = trc_load_text(text, strlen(text), "test", &err);
  cr_assert(t, "%s", err ? err->message : "");
  return t;
}

/* The error message of loading `text`, which must fail as bad input. */
static char *text_error(const char *text, gsize len)
{
  GError *err = NULL;
  trc_trace *t = trc_load_text(text, len, "bad.json", &err);
  cr_assert_null(t, "loaded: %.60s", text);
  cr_assert(err && err->domain == CFG_ERROR && err->code == CFG_ERROR_INPUT);
  char *msg = g_strdup(err->message);
  g_error_free(err);
  return msg;
}

static const trc_gpu_op *op_named(const trc_trace *t, const char *prefix)
{
  for (guint i = 0; i < t->ops->len; i++) {
    const trc_gpu_op *op = &g_array_index(t->ops, trc_gpu_op, i);
    if (g_str_has_prefix(op->name, prefix))
      return op;
  }
  cr_assert_fail("no op named %s", prefix);
  return NULL;
}

/* ---- parser: one event kind at a time ---------------------------------------------------- */

Test(trace, metadata_device_and_distributed_info)
{
  trc_trace *t = load_ok(TRACE_SMALL);
  cr_expect_str_eq(t->gpu_name, "NVIDIA A100-SXM4-80GB");
  cr_expect_eq(t->num_sms, 108);
  cr_expect_eq(t->cc_major, 8);
  cr_expect_eq(t->rank, 0);
  cr_expect_eq(t->world_size, 2);
  cr_expect_eq(t->pg_size, 2);
  cr_expect_str_eq(t->nccl_version, "2.18.1");
  cr_expect_str_eq(t->backend, "nccl");
  cr_expect_eq(t->events, 20);
  cr_expect_eq(t->nstreams, 2);
  trc_free(t);
}

Test(trace, profiler_steps_runtime_calls_and_cpu_ops)
{
  trc_trace *t = load_ok(TRACE_SMALL);
  cr_assert_eq(t->steps->len, 1);
  const trc_step *s = &g_array_index(t->steps, trc_step, 0);
  cr_expect_eq(s->number, 1);
  cr_expect_float_eq(s->ts, 1000, 1e-9);
  cr_expect_float_eq(s->dur, 600, 1e-9);
  cr_expect_eq(t->calls->len, 6);
  cr_expect_eq(t->cpu_ops->len, 4); /* the step annotation, mm, add, nccl:all_reduce */
  /* every call knows the CPU op around it */
  const trc_call *launch = &g_array_index(t->calls, trc_call, 0);
  cr_expect_str_eq(launch->name, "cudaLaunchKernel");
  cr_expect_str_eq(g_array_index(t->cpu_ops, trc_cpu_op, launch->cpu_op).name, "aten::mm");
  trc_free(t);
}

Test(trace, kernels_link_to_their_launch_and_shapes)
{
  trc_trace *t = load_ok(TRACE_SMALL);
  const trc_gpu_op *gemm = op_named(t, "ampere_sgemm");
  cr_expect_eq(gemm->kind, TRC_OP_KERNEL);
  cr_expect_eq(gemm->kclass, TRC_GEMM);
  cr_expect_eq(gemm->stream, 7);
  cr_expect_float_eq(gemm->dur, 100, 1e-9);
  cr_assert_geq(gemm->call, 0);
  cr_expect_float_eq(g_array_index(t->calls, trc_call, gemm->call).ts, 1010, 1e-9);
  cr_expect_float_eq(gemm->flops, 2.0 * 512 * 256 * 1024, 1); /* aten::mm [512,1024] x [1024,256] */
  cr_expect_float_eq(gemm->gemm[3], 1024, 1e-9);
  cr_expect_eq(gemm->dtype, CFG_FP32); /* "sgemm" */
  const trc_gpu_op *add = op_named(t, "void at::native::vectorized_elementwise_kernel");
  cr_expect_eq(add->kclass, TRC_ELEMENTWISE);
  cr_expect_float_eq(add->bytes, 3 * 4.0 * 1048576, 1); /* two inputs read, one output written */
  trc_free(t);
}

Test(trace, memcpy_and_memset)
{
  trc_trace *t = load_ok(TRACE_SMALL);
  const trc_gpu_op *cp = op_named(t, "Memcpy");
  cr_expect_eq(cp->kind, TRC_OP_MEMCPY);
  cr_expect_eq(cp->kclass, TRC_MEMCPY);
  cr_expect_eq(cp->copy, TRC_COPY_HTOD);
  cr_expect_float_eq(cp->bytes, 65536, 1e-9);
  const trc_gpu_op *set = op_named(t, "Memset");
  cr_expect_eq(set->kind, TRC_OP_MEMSET);
  cr_expect_float_eq(set->bytes, 1048576, 1e-9);
  trc_free(t);
}

Test(trace, nccl_kernel_size_from_its_cpu_op)
{
  trc_trace *t = load_ok(TRACE_SMALL);
  const trc_gpu_op *ar = op_named(t, "ncclKernel_AllReduce");
  cr_expect_eq(ar->kclass, TRC_NCCL);
  cr_expect_eq(ar->coll, TRC_NCCL_ALLREDUCE);
  cr_expect_float_eq(ar->comm_bytes, 262144 * 4.0, 1e-9); /* nccl:all_reduce [[262144]] float */
  cr_expect_eq(ar->group_size, 2);                          /* the default group of pg_config */
  trc_free(t);
}

Test(trace, nccl_kernel_args_win_over_the_kernel_name)
{
  trc_trace *t = text_ok(
      "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
      "\"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)\", \"ts\": 5, \"dur\": 9, "
      "\"args\": {\"stream\": 20, \"correlation\": 3, \"Collective name\": \"allgather\", "
      "\"In msg nelems\": 1024, \"Out msg nelems\": 8192, \"Group size\": 8, \"dtype\": \"BFloat16\"}}]}");
  const trc_gpu_op *op = op_named(t, "ncclKernel");
  cr_expect_eq(op->coll, TRC_NCCL_ALLGATHER);
  cr_expect_eq(op->group_size, 8);
  cr_expect_float_eq(op->comm_bytes, 8192 * 2.0, 1e-9); /* an all-gather's size is its output */
  cr_expect_eq(op->call, -1);
  trc_free(t);
}

Test(trace, gather_group_size_from_c10d_shapes)
{
  /* c10d::_allgather_base_ lists output then input: their ratio is the group */
  trc_trace *t = text_ok(
      "{\"traceEvents\": ["
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"c10d::_allgather_base_\", \"tid\": 1, \"ts\": 0, "
      "\"dur\": 50, \"args\": {\"Input Dims\": [[4096], [1024]], \"Input type\": [\"float\", \"float\"]}},"
      "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"nccl:_all_gather_base\", \"tid\": 1, \"ts\": 1, "
      "\"dur\": 40, \"args\": {\"Input Dims\": [[1024]], \"Input type\": [\"float\"]}},"
      "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"tid\": 1, \"ts\": 2, "
      "\"dur\": 3, \"args\": {\"correlation\": 9}},"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)\","
      " \"ts\": 10, \"dur\": 20, \"args\": {\"stream\": 21, \"correlation\": 9}}]}");
  const trc_gpu_op *op = op_named(t, "ncclDevKernel");
  cr_expect_eq(op->coll, TRC_NCCL_ALLGATHER);
  cr_expect_eq(op->group_size, 4);
  cr_expect_float_eq(op->comm_bytes, 4096 * 4.0, 1e-9);
  trc_free(t);
}

Test(trace, gzip_and_top_level_arrays)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  cr_assert(g_file_get_contents(TRACE_SMALL, &text, &len, NULL));
  GZlibCompressor *z = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 6);
  GOutputStream *mem = g_memory_output_stream_new_resizable();
  GOutputStream *out = g_converter_output_stream_new(mem, G_CONVERTER(z));
  g_output_stream_write_all(out, text, len, NULL, NULL, NULL);
  g_output_stream_close(out, NULL, NULL);
  GMemoryOutputStream *m = G_MEMORY_OUTPUT_STREAM(mem);
  GError *err = NULL;
  trc_trace *t = trc_load_text(g_memory_output_stream_get_data(m),
                               g_memory_output_stream_get_data_size(m), "small.json.gz", &err);
  cr_assert(t, "%s", err ? err->message : "");
  cr_expect_eq(t->ops->len, 5);
  cr_expect_eq(t->events, 20);
  trc_free(t);
  /* the same stream cut short */
  g_autofree char *msg = text_error(g_memory_output_stream_get_data(m),
                                    g_memory_output_stream_get_data_size(m) / 2);
  cr_expect(strstr(msg, "truncated: its gzip stream ends early"), "%s", msg);
  g_object_unref(out);
  g_object_unref(mem);
  g_object_unref(z);
  /* Chrome's array format, its closing bracket optional */
  trc_trace *a = text_ok("[{\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"volta_sgemm_128x64_nn\", "
                         "\"ts\": 1, \"dur\": 2, \"tid\": 7}");
  cr_expect_eq(a->ops->len, 1);
  cr_expect_eq(g_array_index(a->ops, trc_gpu_op, 0).kclass, TRC_GEMM);
  trc_free(a);
}

/* ---- parser: malformed input -------------------------------------------------------------- */

Test(trace, truncated_traces_are_clear_errors)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  cr_assert(g_file_get_contents(TRACE_SMALL, &text, &len, NULL));
  /* cut everywhere in the events: never a crash, always an error naming where */
  for (gsize cut = 100; cut < len - 8; cut += 97) {
    g_autofree char *msg = text_error(text, cut);
    cr_expect(strstr(msg, "bad.json:"), "%s", msg);
  }
  g_autofree char *msg = text_error(text, len / 2);
  cr_expect(strstr(msg, "truncated"), "%s", msg);
}

Test(trace, malformed_traces_name_line_column_and_what_was_expected)
{
  const struct {
    const char *text, *expect;
  } bad[] = {
      {"", "bad.json: the file is empty"},
      {"hello", "expected a JSON object"},
      {"{\"traceEvents\": 3}", "expected '[' opening traceEvents"},
      {"{\"traceEvents\": [1, 2]}", "expected an event object"},
      {"{\"traceEvents\": [{\"ph\": \"X\",}]}", "bad.json:1:18: event 1 is not valid JSON"},
      {"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": \"soon\"}]}",
       "needs a numeric \"ts\""},
      {"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": -4}]}",
       "non-negative numeric \"dur\""},
      {"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"ts\": 1, \"dur\": 4}]}", "a \"name\" string"},
      {"{\"traceEvents\": [{\"ph\": \"M\", \"name\": \"process_name\"}]}", "no GPU kernels and no CPU ops"},
      {"{\"traceEvents\": []} trailing", "expected the end of the document"},
      {"{\"traceEvents\": [{\"ph\": \"X\"} {\"ph\": \"X\"}]}", "expected ',' or ']' after an event"},
      {"{\"a\": [1, 2}", "the trace is truncated"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *msg = text_error(bad[i].text, strlen(bad[i].text));
    cr_expect(strstr(msg, bad[i].expect), "case %zu: '%s' does not say '%s'", i, msg, bad[i].expect);
  }
  /* a gzip header over data that is not deflate */
  static const char gz[] = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage-that-is-not-deflate";
  g_autofree char *msg = text_error(gz, sizeof gz - 1);
  cr_expect(strstr(msg, "cannot read"), "%s", msg);
}

Test(trace, missing_file_is_an_input_error)
{
  GError *err = NULL;
  cr_expect_null(trc_load("/no/such/trace.json.gz", &err));
  cr_assert(err);
  cr_expect(strstr(err->message, "/no/such/trace.json.gz"), "%s", err->message);
  g_clear_error(&err);
  cr_expect_null(trc_load(g_get_tmp_dir(), &err)); /* a directory is not a trace */
  cr_assert(err);
  cr_expect(strstr(err->message, "not a regular file"), "%s", err->message);
  g_error_free(err);
}

/* ---- classification ----------------------------------------------------------------------- */

Test(trace, kernel_classification_table)
{
  const struct {
    const char *name;
    trc_class cls;
  } table[] = {
      {"ampere_sgemm_128x64_nn", TRC_GEMM},
      {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>(Params)", TRC_GEMM},
      {"sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4", TRC_GEMM},
      {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", TRC_GEMM},
      {"void splitKreduce_kernel<32, 16, int, float, float>(cublasSplitKParams<float>)", TRC_GEMM},
      {"sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", TRC_CONV},
      {"void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false>(int)", TRC_CONV},
      {"cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", TRC_CONV},
      {"void fft2d_r2c_32x32<float, false, 1u, false>(float2*)", TRC_CONV},
      {"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Flash_fwd_params)", TRC_ATTENTION},
      {"fmha_cutlassF_f16_aligned_64x64_rf_sm80", TRC_ATTENTION},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)", TRC_ELEMENTWISE},
      {"void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3>", TRC_ELEMENTWISE},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(float)", TRC_REDUCTION},
      {"void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float)", TRC_REDUCTION},
      {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", TRC_REDUCTION},
      {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", TRC_REDUCTION},
      {"void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, normal>",
       TRC_ELEMENTWISE},
      {"split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1", TRC_EMBEDDING},
      {"void fbgemm_gpu::permute_2D_data_kernel<float>(int)", TRC_EMBEDDING},
      {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor>",
       TRC_OPTIMIZER},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::launch_lambda()::{lambda(float)#1}>",
       TRC_ELEMENTWISE},
      {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", TRC_NCCL},
      {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", TRC_NCCL},
      {"triton_poi_fused_add_mul_0", TRC_ELEMENTWISE},
      {"triton_red_fused_sum_1", TRC_REDUCTION},
      {"triton_tem_fused_mm_2", TRC_GEMM},
      {"some_custom_kernel", TRC_OTHER},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(table); i++)
    cr_expect_eq(trc_classify(table[i].name), table[i].cls, "%s: %s, expected %s", table[i].name,
                 trc_class_name(trc_classify(table[i].name)), trc_class_name(table[i].cls));
}

Test(trace, nccl_names_give_collective_algorithm_protocol)
{
  const struct {
    const char *name, *algo, *proto;
    trc_nccl_coll coll;
  } table[] = {
      {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "RING", "LL",
       TRC_NCCL_ALLREDUCE},
      {"ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)", "RING", "LL", TRC_NCCL_BROADCAST},
      {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "RING", "SIMPLE", TRC_NCCL_SENDRECV},
      {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "RING", "LL", TRC_NCCL_ALLGATHER},
      {"ncclDevKernel_AllReduce_Sum_bf16_TREE_LL128(ncclDevKernelArgsStorage<4096ul>)", "TREE", "LL128",
       TRC_NCCL_ALLREDUCE},
      {"ncclDevKernel_ReduceScatter_Sum_f32_NVLS_TREE_SIMPLE(x)", "NVLS_TREE", "SIMPLE", TRC_NCCL_REDUCESCATTER},
      {"ncclDevKernel_AllReduce_Sum_f16_COLLNET_DIRECT_SIMPLE(x)", "COLLNET_DIRECT", "SIMPLE", TRC_NCCL_ALLREDUCE},
      {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "", "", TRC_NCCL_SENDRECV},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(table); i++) {
    trc_nccl_name n;
    cr_assert(trc_nccl_parse_name(table[i].name, &n));
    cr_expect_eq(n.coll, table[i].coll, "%s", table[i].name);
    cr_expect_str_eq(n.algo, table[i].algo, "%s", table[i].name);
    cr_expect_str_eq(n.proto, table[i].proto, "%s", table[i].name);
  }
  trc_nccl_name n;
  cr_expect_not(trc_nccl_parse_name("ampere_sgemm_128x64_nn", &n));
}

Test(trace, kernel_dtypes_and_short_names)
{
  cr_expect_eq(trc_kernel_dtype("cutlass_80_tensorop_s1688gemm_256x128", CFG_FP32), CFG_TF32);
  cr_expect_eq(trc_kernel_dtype("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn", CFG_FP32), CFG_BF16);
  cr_expect_eq(trc_kernel_dtype("ampere_h16816gemm_256x128_ldg8_stages_32x3_nn", CFG_FP32), CFG_FP16);
  cr_expect_eq(trc_kernel_dtype("ampere_sgemm_128x64_nn", CFG_BF16), CFG_FP32);
  cr_expect_eq(trc_kernel_dtype("mystery", CFG_BF16), CFG_BF16);
  /* TensorRT-LLM's Blackwell GEMMs (the B200 trace of TraceLens): GEMMs, at the FP8 rate when
   * one operand is FP8, at FP4's when both are E2M1 */
  const char *mixed = "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_";
  cr_expect_eq(trc_classify(mixed), TRC_GEMM);
  cr_expect_eq(trc_kernel_dtype(mixed, CFG_BF16), CFG_FP8);
  cr_expect_eq(trc_kernel_dtype("bmm_E2m1_E2m1E2m1_Fp32_t128x8x512u2", CFG_BF16), CFG_FP4);
  const struct {
    const char *name, *want;
  } shorts[] = {
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, F)",
       "at::native::vectorized_elementwise_kernel"},
      {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>(Params)",
       "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>"},
      {"void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, 3>(x)", "at::native::CatArrayBatchedCopy"},
      {"Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(shorts); i++) {
    g_autofree char *s = trc_short_name(shorts[i].name);
    cr_expect_str_eq(s, shorts[i].want);
  }
}

Test(trace, step_ranges)
{
  int a, b;
  GError *err = NULL;
  cr_expect(trc_parse_steps("550-552", &a, &b, NULL) && a == 550 && b == 552);
  cr_expect(trc_parse_steps("551", &a, &b, NULL) && a == 551 && b == 551);
  cr_expect(trc_parse_steps("-4", &a, &b, NULL) && a == -1 && b == 4);
  cr_expect(trc_parse_steps("7-", &a, &b, NULL) && a == 7 && b == -1);
  cr_expect(trc_parse_steps(NULL, &a, &b, NULL) && a == -1 && b == -1);
  const char *bad[] = {"", "-", "a-b", "5-3", "1-2-3", "12x"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    cr_expect_not(trc_parse_steps(bad[i], &a, &b, &err), "%s", bad[i]);
    g_clear_error(&err);
  }
}

/* ---- summary ------------------------------------------------------------------------------ */

Test(trace, summary_of_the_small_trace)
{
  trc_trace *t = load_ok(TRACE_SMALL);
  trc_summary s;
  trc_summarize(t, &s);
  cr_assert_eq(s.steps->len, 1);
  const trc_step_summary *w = &g_array_index(s.steps, trc_step_summary, 0);
  /* gemm 100 + add 10 + copy 4 + memset 2; the all-reduce 200, 6 of it under the copy/memset */
  cr_expect_float_eq(w->duration, 600e-6, 1e-12);
  cr_expect_float_eq(w->compute, 116e-6, 1e-12);
  cr_expect_float_eq(w->comm, 200e-6, 1e-12);
  cr_expect_float_eq(w->overlap, 6e-6, 1e-12);
  cr_expect_float_eq(w->exposed_comm, 194e-6, 1e-12);
  cr_expect_float_eq(w->idle, 290e-6, 1e-12);
  cr_expect_float_eq(w->memcpy, 6e-6, 1e-12);
  cr_expect_float_eq(w->by_class[TRC_GEMM], 100e-6, 1e-12);
  cr_expect_float_eq(s.by_class[TRC_NCCL], 200e-6, 1e-12);
  cr_expect_eq(s.nccl_counts[TRC_NCCL_ALLREDUCE], 1);
  cr_expect_str_eq(g_array_index(s.kernels, trc_kernel_stat, 0).name,
                   "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)");
  trc_summary_clear(&s);
  trc_free(t);
}

Test(trace, every_real_trace_parses_and_its_steps_add_up, .timeout = 600)
{
  const char *files[] = {"critical_path_alexnet_benchmark_result_2869224_1695835535_trace",
                         "nccl_parser_config_nccl_data", "negative_queue_length_values_check_rank0",
                         "trace_diff_control_control", "trace_diff_test_test",
                         "trace_filter_sampled_rank-0", "trace_filter_sampled_rank-1"};
  for (size_t f = 0; f < G_N_ELEMENTS(files); f++) {
    g_autofree char *path = g_strdup_printf(TRACES "%s.json.gz", files[f]);
    trc_trace *t = load_ok(path);
    trc_summary s;
    trc_summarize(t, &s);
    cr_expect_eq(s.profiler_steps, t->steps->len > 0);
    for (guint i = 0; i < t->steps->len; i++) {
      const trc_step_summary *w = &g_array_index(s.steps, trc_step_summary, i);
      double dur = g_array_index(t->steps, trc_step, i).dur * 1e-6;
      cr_expect_float_eq(w->duration, dur, 1e-12, "%s step %u", files[f], i);
      cr_expect_float_eq(w->compute + w->exposed_comm + w->idle, dur, 1e-9 * dur, "%s step %u",
                         files[f], i);
    }
    trc_summary_clear(&s);
    trc_free(t);
  }
}

/* ---- the lower envelope ------------------------------------------------------------------- */

Test(trace, lower_envelope_recovers_latency_and_bandwidth_under_waits)
{
  /* t = 20 us + size / 50 GB/s, plus waiting for peers: never negative, zero for a few */
  const double a = 20e-6, b = 1 / 50e9;
  GRand *rng = g_rand_new_with_seed(7);
  double size[200], time[200];
  int n = 0;
  for (int k = 10; k <= 28; k++)
    for (int rep = 0; rep < 10; rep++, n++) {
      size[n] = ldexp(1, k);
      double wait = rep == 0 && (k == 10 || k == 28) ? 0 : g_rand_double_range(rng, 0, 3e-3);
      time[n] = a + b * size[n] + wait;
    }
  g_rand_free(rng);
  double la = 0, lb = 0;
  cr_assert(calib_lower_envelope(size, time, n, &la, &lb));
  cr_expect_float_eq(la, a, 1e-12);
  cr_expect_float_eq(lb, b, 1e-9 * b);
  /* a least-squares line through the same points would be far off: waits bias it up */
  for (int i = 0; i < n; i++)
    cr_expect_leq(la + lb * size[i], time[i] * (1 + 1e-12));
}

Test(trace, lower_envelope_edge_cases)
{
  double la = 1, lb = 1;
  cr_expect_not(calib_lower_envelope(NULL, NULL, 0, &la, &lb));
  /* one size: no bandwidth, the fastest time */
  double s1[] = {1e6, 1e6, 1e6}, t1[] = {3e-4, 1e-4, 2e-4};
  cr_assert(calib_lower_envelope(s1, t1, 3, &la, &lb));
  cr_expect_float_eq(la, 1e-4, 1e-15);
  cr_expect_float_eq(lb, 0, 1e-20);
  /* bigger messages faster (waits): no negative bandwidth, the flat line */
  double s2[] = {1e3, 1e6}, t2[] = {5e-4, 1e-4};
  cr_assert(calib_lower_envelope(s2, t2, 2, &la, &lb));
  cr_expect_float_eq(la, 1e-4, 1e-15);
  cr_expect_float_eq(lb, 0, 1e-20);
  /* no latency: the line through the origin */
  double s3[] = {1e6, 2e6, 4e6}, t3[] = {1e-4, 2e-4, 4.5e-4};
  cr_assert(calib_lower_envelope(s3, t3, 3, &la, &lb));
  cr_expect_float_eq(la, 0, 1e-15);
  cr_expect_float_eq(lb, 1e-10, 1e-22);
}

/* ---- replay ------------------------------------------------------------------------------- */

typedef struct {
  cfg_cluster *cfg;
  hw_cluster *hw;
} test_hw;

static test_hw hw_of(const char *cluster)
{
  test_hw h = {0};
  cr_assert(th_load(cluster, NULL, NULL, &h.cfg, NULL));
  h.hw = hw_cluster_new(h.cfg);
  return h;
}

static void hw_clear(test_hw *h)
{
  hw_cluster_free(h->hw);
  cfg_cluster_free(h->cfg);
}

/* Mean predicted step of a replay of `traces`. */
static double replay_step(trc_trace **traces, int n, const trc_replay_options *o, eng_kind kind)
{
  trc_replay r;
  GError *err = NULL;
  cr_assert(trc_replay_build(traces, n, o, &r, &err), "%s", err ? err->message : "");
  eng_options eo = {.kind = kind, .trace = true, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_result res;
  cr_assert(eng_run(r.program, o->target ? o->target : o->base, &eo, &res, &err), "%s",
            err ? err->message : "");
  double *steps = g_new(double, r.nsteps), mean = 0;
  cr_assert(trc_replay_step_times(&r, &res, steps, &err), "%s", err ? err->message : "");
  for (int k = 0; k < r.nsteps; k++)
    mean += steps[k] / r.nsteps;
  g_free(steps);
  eng_result_clear(&res);
  trc_replay_clear(&r);
  return mean;
}

static double allreduce_time(const hw_cluster *hw, double bytes)
{
  eng_options eo = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_coll_result c;
  cr_assert(eng_collective_time(hw, &eo, PROG_COLL_ALLREDUCE, 2, 2, bytes, &c, NULL));
  return c.time;
}

Test(trace, replay_of_the_small_trace_follows_its_critical_path)
{
  test_hw h = hw_of("dgx-a100");
  trc_trace *t = load_ok(TRACE_SMALL);
  trc_replay_options o = {.first_step = -1, .last_step = -1, .base = h.hw, .comm_measured = true};
  /* as measured: the step comes back exactly */
  cr_expect_float_eq(replay_step(&t, 1, &o, ENG_ANALYTIC), 600e-6, 1e-12);
  cr_expect_float_eq(replay_step(&t, 1, &o, ENG_DES), 600e-6, 1e-10);
  /* the all-reduce modelled: gemm launched at 10, starts at 20 (measured launch delay), add until
   * 130, the all-reduce waits for it (+2), the host waits for the all-reduce, then 268 us to the
   * step's end */
  o.comm_measured = false;
  double ar = allreduce_time(h.hw, 262144 * 4.0);
  cr_expect_float_eq(replay_step(&t, 1, &o, ENG_ANALYTIC), 132e-6 + ar + 268e-6, 1e-12);
  cr_expect_float_eq(replay_step(&t, 1, &o, ENG_DES), 132e-6 + ar + 268e-6, 1e-10);
  /* the host alone */
  o.host_only = true;
  cr_expect_float_eq(replay_step(&t, 1, &o, ENG_ANALYTIC), 358e-6, 1e-12);
  trc_free(t);
  hw_clear(&h);
}

/* Rank r of a two-rank job: a GEMM of `gemm_us`, then an all-reduce that waits for it; the host
 * waits for the all-reduce, then works 50 us. The slow rank's peer waits in the all-reduce. */
static char *two_rank_trace(int rank, int gemm_us, int wait_us)
{
  int nccl_start = 1020 + gemm_us + 2, ar = 100 + wait_us, end = nccl_start + ar + 3 + 50;
  return g_strdup_printf(
      "{\"distributedInfo\": {\"rank\": %d, \"world_size\": 2}, \"traceEvents\": ["
      "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", \"tid\": 1, \"ts\": 1000, \"dur\": %d},"
      "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"tid\": 1, \"ts\": 1010, \"dur\": 5, \"args\": {\"correlation\": 1}},"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ampere_sgemm_64x64_nn\", \"ts\": 1020, \"dur\": %d, \"args\": {\"stream\": 7, \"correlation\": 1}},"
      "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"tid\": 1, \"ts\": 1020, \"dur\": 5, \"args\": {\"correlation\": 2}},"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce_RING_LL_Sum_float(x)\", \"ts\": %d, \"dur\": %d,"
      " \"args\": {\"stream\": 13, \"correlation\": 2, \"Collective name\": \"allreduce\", \"In msg nelems\": 1048576,"
      " \"Out msg nelems\": 1048576, \"Group size\": 2, \"dtype\": \"Float\"}},"
      "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", \"tid\": 1, \"ts\": 1030, \"dur\": %d, \"args\": {\"correlation\": 3}}"
      "]}",
      rank, end - 1000, gemm_us, nccl_start, ar, nccl_start + ar + 3 - 1030);
}

Test(trace, replay_of_two_ranks_waits_for_the_slow_one)
{
  test_hw h = hw_of("dgx-a100");
  g_autofree char *fast_text = two_rank_trace(0, 100, 300), *slow_text = two_rank_trace(1, 400, 0);
  trc_trace *fast = text_ok(fast_text), *slow = text_ok(slow_text);
  double ar = allreduce_time(h.hw, 1048576 * 4.0);
  trc_replay_options o = {.first_step = -1, .last_step = -1, .base = h.hw};
  /* each alone (its peer a copy of itself): no one to wait for */
  trc_trace *one[] = {fast};
  cr_expect_float_eq(replay_step(one, 1, &o, ENG_ANALYTIC), 122e-6 + ar + 53e-6, 1e-12);
  one[0] = slow;
  cr_expect_float_eq(replay_step(one, 1, &o, ENG_ANALYTIC), 422e-6 + ar + 53e-6, 1e-12);
  /* together: the all-reduce starts when the slow rank's GEMM ends; the fast rank's step is the
   * slow rank's critical path, on both engines */
  trc_trace *both[] = {fast, slow};
  cr_expect_float_eq(replay_step(both, 2, &o, ENG_ANALYTIC), 422e-6 + ar + 53e-6, 1e-12);
  cr_expect_float_eq(replay_step(both, 2, &o, ENG_DES), 422e-6 + ar + 53e-6, 1e-10);
  /* what-if: a GPU twice as fast at FP32 halves the GEMMs (less the fixed cost per kernel) */
  cfg_cluster *fast_cfg = NULL;
  const char *sets[] = {"gpu.flops.fp32=39TFLOPS", NULL};
  cr_assert(th_load("dgx-a100", NULL, sets, &fast_cfg, NULL));
  hw_cluster *fast_hw = hw_cluster_new(fast_cfg);
  o.target = fast_hw;
  double lo = hw_efficiency(h.hw)->launch_overhead;
  double gemm = (400e-6 - lo) / 2 + lo;
  cr_expect_float_eq(replay_step(both, 2, &o, ENG_ANALYTIC), 22e-6 + gemm + ar + 53e-6, 1e-12);
  hw_cluster_free(fast_hw);
  cfg_cluster_free(fast_cfg);
  /* ranks whose collectives do not match cannot be replayed together: said, not deadlocked */
  g_autofree char *odd_text = g_strdup(slow_text);
  char *coll = strstr(odd_text, "allreduce\"");
  memcpy(coll, "broadcast", 9);
  trc_trace *odd = text_ok(odd_text);
  trc_trace *mismatch[] = {fast, odd};
  trc_replay r;
  GError *err = NULL;
  o.target = NULL;
  cr_expect_not(trc_replay_build(mismatch, 2, &o, &r, &err));
  cr_assert(err);
  cr_expect(strstr(err->message, "collective 1: allreduce vs broadcast"), "%s", err->message);
  g_error_free(err);
  trc_free(odd);
  trc_free(fast);
  trc_free(slow);
  hw_clear(&h);
}

Test(trace, replays_of_real_traces_come_back_as_measured, .timeout = 900)
{
  const struct {
    const char *file, *cluster;
  } runs[] = {
      {"nccl_parser_config_nccl_data", "traces/clusters/zionex-a100-40gb.yaml"},
      {"trace_diff_control_control", "traces/clusters/zionex-a100-40gb.yaml"},
      {"negative_queue_length_values_check_rank0", "traces/clusters/zionex-a100-80gb.yaml"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
    g_autofree char *path = g_strdup_printf(TRACES "%s.json.gz", runs[i].file);
    g_autofree char *cluster = g_build_filename(DLSIM_SOURCE_DIR, runs[i].cluster, NULL);
    test_hw h = hw_of(cluster);
    trc_trace *t = load_ok(path);
    double measured = 0;
    for (guint k = 0; k < t->steps->len; k++)
      measured += g_array_index(t->steps, trc_step, k).dur * 1e-6 / t->steps->len;
    /* with every kernel, collective included, at its measured duration, the replay's own error */
    trc_replay_options o = {.first_step = -1, .last_step = -1, .base = h.hw, .comm_measured = true};
    double p = replay_step(&t, 1, &o, ENG_ANALYTIC);
    cr_expect_float_eq(p, measured, 0.002 * measured, "%s: %g vs %g", runs[i].file, p, measured);
    trc_free(t);
    hw_clear(&h);
  }
}
