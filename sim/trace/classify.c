/* Kernel classification by name. Vendor libraries name their kernels consistently enough that
 * a table of substrings, tried in order, sorts them: convolutions before GEMMs (cuDNN's
 * implicit-GEMM convolutions contain "gemm"), embeddings and optimizers before elementwise
 * (their fused kernels contain "kernel" words of every kind). The table is the one place to
 * extend; tests/test_trace.c holds one example per row. */
#include "trace/trace_internal.h"

#include <string.h>

const char *trc_class_name(trc_class c)
{
  static const char *const names[] = {"gemm",      "conv",      "attention", "elementwise",
                                      "reduction", "embedding", "optimizer", "memcpy",
                                      "memset",    "nccl",      "other"};
  return c < TRC_NCLASSES ? names[c] : "?";
}

typedef struct {
  const char *pattern; /* lower-case substring of the lower-cased name */
  trc_class cls;
} trc_rule;

static const trc_rule trc_rules[] = {
    {"nccl", TRC_NCCL},
    /* attention: FlashAttention, xFormers/CUTLASS fMHA, cuDNN and PyTorch SDPA kernels */
    {"flash", TRC_ATTENTION},
    {"fmha", TRC_ATTENTION},
    {"attention", TRC_ATTENTION},
    {"_attn", TRC_ATTENTION},
    {"sdpa", TRC_ATTENTION},
    /* convolutions: cuDNN (implicit GEMM, Winograd, FFT), xmma fprop/dgrad/wgrad */
    {"conv", TRC_CONV},
    {"scudnn", TRC_CONV},
    {"hcudnn", TRC_CONV},
    {"implicit_gemm", TRC_CONV},
    {"winograd", TRC_CONV},
    {"fprop", TRC_CONV},
    {"dgrad", TRC_CONV},
    {"wgrad", TRC_CONV},
    {"fft2d", TRC_CONV},
    {"fft3d", TRC_CONV},
    /* embeddings (DLRM-style tables: fbgemm's split embeddings, embedding_bag) and FBGEMM's
     * sparse-feature kernels around them (permute, bucketize, bounds checks: no GEMMs) */
    {"embedding", TRC_EMBEDDING},
    {"fbgemm_gpu::", TRC_EMBEDDING},
    {"bounds_check_indices", TRC_EMBEDDING},
    {"embedding_bag", TRC_EMBEDDING},
    /* optimizers: fused Adam/LAMB/Adagrad/SGD and the multi-tensor-apply kernels they run on */
    {"multi_tensor_apply", TRC_OPTIMIZER},
    {"adam", TRC_OPTIMIZER},
    {"lamb_", TRC_OPTIMIZER}, /* not "lambda" */
    {"adagrad", TRC_OPTIMIZER},
    {"sgd_", TRC_OPTIMIZER},
    {"fused_optim", TRC_OPTIMIZER},
    {"shampoo", TRC_OPTIMIZER},
    /* matrix products: cuBLAS, cuBLASLt, CUTLASS, xmma, Hopper nvjet */
    {"gemm", TRC_GEMM},
    {"gemv", TRC_GEMM},
    {"cutlass", TRC_GEMM},
    {"cublas", TRC_GEMM},
    {"matmul", TRC_GEMM},
    {"nvjet", TRC_GEMM},
    {"s1688", TRC_GEMM},
    {"h1688", TRC_GEMM},
    {"16816", TRC_GEMM},
    {"splitkreduce", TRC_GEMM},
    {"triton_mm", TRC_GEMM},
    {"triton_tem", TRC_GEMM},
    {"bmm_", TRC_GEMM}, /* TensorRT-LLM's Blackwell GEMMs (trtllm-gen: bmm_MxE4m3_MxE2m1...) */
    /* random numbers ("normal" is no normalisation) */
    {"distribution", TRC_ELEMENTWISE},
    /* reductions, normalisations, softmax, sorting and scans */
    {"reduce", TRC_REDUCTION},
    {"triton_red", TRC_REDUCTION},
    {"triton_per", TRC_REDUCTION},
    {"softmax", TRC_REDUCTION},
    {"norm", TRC_REDUCTION},
    {"bn_fw", TRC_REDUCTION},
    {"bn_bw", TRC_REDUCTION},
    {"cub::", TRC_REDUCTION},
    {"radixsort", TRC_REDUCTION},
    {"sort", TRC_REDUCTION},
    {"scan", TRC_REDUCTION},
    {"cross_entropy", TRC_REDUCTION},
    {"nll_loss", TRC_REDUCTION},
    /* elementwise and data movement inside the GPU */
    {"elementwise", TRC_ELEMENTWISE},
    {"nchwtonhwc", TRC_ELEMENTWISE},
    {"nhwctonchw", TRC_ELEMENTWISE},
    {"triton", TRC_ELEMENTWISE},
    {"copy", TRC_ELEMENTWISE},
    {"fill", TRC_ELEMENTWISE},
    {"cat", TRC_ELEMENTWISE},
    {"index", TRC_ELEMENTWISE},
    {"gather", TRC_ELEMENTWISE},
    {"scatter", TRC_ELEMENTWISE},
    {"transpose", TRC_ELEMENTWISE},
    {"permute", TRC_ELEMENTWISE},
    {"pool", TRC_ELEMENTWISE},
    {"relu", TRC_ELEMENTWISE},
    {"gelu", TRC_ELEMENTWISE},
    {"silu", TRC_ELEMENTWISE},
    {"dropout", TRC_ELEMENTWISE},
    {"activation", TRC_ELEMENTWISE},
    {"pointwise", TRC_ELEMENTWISE},
};

trc_class trc_classify(const char *kernel_name)
{
  if (!kernel_name)
    return TRC_OTHER;
  g_autofree char *low = g_ascii_strdown(kernel_name, -1);
  for (size_t i = 0; i < G_N_ELEMENTS(trc_rules); i++)
    if (strstr(low, trc_rules[i].pattern))
      return trc_rules[i].cls;
  return TRC_OTHER;
}

cfg_kernel_class trc_class_model(trc_class c)
{
  switch (c) {
  case TRC_GEMM:
    return CFG_KCLASS_GEMM;
  case TRC_CONV:
    return CFG_KCLASS_CONV;
  case TRC_ATTENTION:
    return CFG_KCLASS_ATTENTION;
  case TRC_OPTIMIZER:
    return CFG_KCLASS_OPTIMIZER;
  case TRC_OTHER:
    return CFG_KCLASS_OTHER;
  default:
    return CFG_KCLASS_ELEMENTWISE;
  }
}

bool trc_class_compute_bound(trc_class c)
{
  return c == TRC_GEMM || c == TRC_CONV || c == TRC_ATTENTION;
}

cfg_dtype trc_kernel_dtype(const char *kernel_name, cfg_dtype fallback)
{
  static const struct {
    const char *pattern;
    cfg_dtype dtype;
  } hints[] = {
      {"bf16", CFG_BF16},   {"bfloat16", CFG_BF16}, {"e4m3", CFG_FP8},    {"e5m2", CFG_FP8},
      {"fp8", CFG_FP8},     {"tf32", CFG_TF32},     {"s1688", CFG_TF32},  {"s16816", CFG_TF32},
      {"h1688", CFG_FP16},  {"h16816", CFG_FP16},   {"h884", CFG_FP16},   {"fp16", CFG_FP16},
      {"f16", CFG_FP16},    {"half", CFG_FP16},     {"sgemm", CFG_FP32},  {"f32f32_f32", CFG_FP32},
      {"_f32", CFG_FP32},   {"float", CFG_FP32},
      /* after e4m3: an FP8 x FP4 GEMM runs at Blackwell's FP8 rate, only FP4 x FP4 at FP4's */
      {"e2m1", CFG_FP4},
  };
  if (!kernel_name)
    return fallback;
  g_autofree char *low = g_ascii_strdown(kernel_name, -1);
  for (size_t i = 0; i < G_N_ELEMENTS(hints); i++)
    if (strstr(low, hints[i].pattern))
      return hints[i].dtype;
  return fallback;
}

/* Wrappers whose template argument is the real kernel's name. */
static bool trc_generic_wrapper(const char *name, gsize len)
{
  static const char *const generic[] = {"cutlass::Kernel", "cutlass::Kernel2", "cutlass::device_kernel"};
  for (size_t i = 0; i < G_N_ELEMENTS(generic); i++)
    if (len == strlen(generic[i]) && strncmp(name, generic[i], len) == 0)
      return true;
  return false;
}

char *trc_short_name(const char *kernel_name)
{
  g_autoptr(GString) clean = g_string_new(kernel_name ? kernel_name : "?");
  g_string_replace(clean, "(anonymous namespace)::", "", 0);
  const char *s = clean->str;
  if (g_str_has_prefix(s, "void "))
    s += 5;
  gsize paren = strcspn(s, "(");
  gsize angle = strcspn(s, "<");
  if (angle < paren && trc_generic_wrapper(s, angle)) {
    const char *arg = s + angle + 1;
    gsize end = strcspn(arg, ",<>(");
    return g_strdup_printf("%.*s<%.*s>", (int)angle, s, (int)end, arg);
  }
  return g_strstrip(g_strndup(s, MIN(paren, angle)));
}

/* ---- NCCL kernel names --------------------------------------------------------------------- */

const char *trc_nccl_coll_name(trc_nccl_coll c)
{
  static const char *const names[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                      "reduce",    "alltoall",  "sendrecv",      "send",
                                      "recv",      "unknown"};
  return c <= TRC_NCCL_UNKNOWN ? names[c] : "?";
}

bool trc_nccl_coll_prog(trc_nccl_coll c, prog_coll *out)
{
  static const int map[] = {PROG_COLL_ALLREDUCE, PROG_COLL_ALLGATHER, PROG_COLL_REDUCESCATTER,
                            PROG_COLL_BROADCAST, PROG_COLL_REDUCE, PROG_COLL_ALLTOALL};
  if (c >= G_N_ELEMENTS(map))
    return false;
  *out = (prog_coll)map[c];
  return true;
}

bool trc_nccl_parse_name(const char *kernel_name, trc_nccl_name *out)
{
  static const struct {
    const char *token;
    trc_nccl_coll coll;
  } colls[] = {{"AllReduce", TRC_NCCL_ALLREDUCE},         {"AllGather", TRC_NCCL_ALLGATHER},
               {"ReduceScatter", TRC_NCCL_REDUCESCATTER}, {"Broadcast", TRC_NCCL_BROADCAST},
               {"Reduce", TRC_NCCL_REDUCE},               {"AllToAll", TRC_NCCL_ALLTOALL},
               {"SendRecv", TRC_NCCL_SENDRECV},           {"Send", TRC_NCCL_SEND},
               {"Recv", TRC_NCCL_RECV}};
  static const char *const algos[] = {"RING", "TREE", "COLLNET", "NVLS", "PAT", NULL};
  static const char *const protos[] = {"LL128", "LL", "SIMPLE", NULL};
  memset(out, 0, sizeof *out);
  out->coll = TRC_NCCL_UNKNOWN;
  const char *s = kernel_name ? strstr(kernel_name, "nccl") : NULL;
  if (!s)
    return false;
  g_autofree char *base = g_strndup(s, strcspn(s, "(<"));
  g_auto(GStrv) tok = g_strsplit(base, "_", -1);
  for (int i = 1; tok[i]; i++) {
    for (size_t k = 0; out->coll == TRC_NCCL_UNKNOWN && k < G_N_ELEMENTS(colls); k++)
      if (strcmp(tok[i], colls[k].token) == 0)
        out->coll = colls[k].coll;
    for (int k = 0; algos[k] && !out->algo[0]; k++)
      if (strcmp(tok[i], algos[k]) == 0) {
        /* two-word algorithms: COLLNET_DIRECT, COLLNET_CHAIN, NVLS_TREE */
        bool two = tok[i + 1] && (strcmp(tok[i + 1], "DIRECT") == 0 ||
                                  strcmp(tok[i + 1], "CHAIN") == 0 || strcmp(tok[i + 1], "TREE") == 0);
        g_snprintf(out->algo, sizeof out->algo, "%s%s%s", tok[i], two ? "_" : "", two ? tok[i + 1] : "");
        i += two;
      }
    for (int k = 0; protos[k]; k++)
      if (strcmp(tok[i], protos[k]) == 0)
        g_strlcpy(out->proto, tok[i], sizeof out->proto);
  }
  return true;
}
