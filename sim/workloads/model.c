/* wl_model: layers of kernels for one micro-batch, shared by every strategy. */
#include "workloads/workloads_internal.h"

#include <string.h>

wl_model *wl_model_new(cfg_dtype dtype)
{
  wl_model *m = g_new0(wl_model, 1);
  m->layers = g_ptr_array_new();
  m->strings = g_string_chunk_new(4096);
  m->dtype = dtype;
  return m;
}

void wl_model_free(wl_model *m)
{
  if (!m)
    return;
  for (guint i = 0; i < m->layers->len; i++) {
    wl_layer *l = g_ptr_array_index(m->layers, i);
    g_array_unref(l->fwd);
    g_array_unref(l->bwd);
    g_free(l);
  }
  g_ptr_array_free(m->layers, TRUE);
  g_string_chunk_free(m->strings);
  g_free(m);
}

const char *wl_number(char *buf, guint v)
{
  char *at = buf + 15;
  *at = '\0';
  do
    *--at = (char)('0' + v % 10);
  while ((v /= 10) > 0);
  return at;
}

wl_layer *wl_layer_add(wl_model *m, const char *name, double params)
{
  wl_layer *l = g_new0(wl_layer, 1);
  /* stored as it is: nothing looks a layer's name up by address, and the chunk's search for an
   * equal name was half of adding a layer */
  l->name = g_string_chunk_insert(m->strings, name);
  l->params = params;
  l->fwd = g_array_new(FALSE, FALSE, sizeof(wl_kernel));
  l->bwd = g_array_new(FALSE, FALSE, sizeof(wl_kernel));
  g_ptr_array_add(m->layers, l);
  m->params += params;
  return l;
}

/* Whether a kernel is a linear layer's GEMM (or its gradient): the only kernels that 8-bit
 * training runs in 8 bits. */
static bool wl_is_linear(wl_role role, cfg_kernel_class k)
{
  if (k != CFG_KCLASS_GEMM)
    return false;
  switch (role) {
  case WL_ROLE_QKV: case WL_ROLE_MLA_DOWN: case WL_ROLE_MLA_UP: case WL_ROLE_ATTN_OUT:
  case WL_ROLE_MLP_UP: case WL_ROLE_MLP_DOWN: case WL_ROLE_SHARED_UP: case WL_ROLE_SHARED_DOWN:
  case WL_ROLE_EXPERT_UP: case WL_ROLE_EXPERT_DOWN: case WL_ROLE_CONV: case WL_ROLE_LINEAR:
  case WL_ROLE_OTHER:
    return true;
  default:
    return false;
  }
}

cfg_dtype wl_kernel_dtype(cfg_dtype training, wl_role role, cfg_kernel_class k)
{
  /* Transformer Engine (fp8, mxfp8, nvfp4) and DeepSeek-V3 (fp8-block) quantize only the
   * linear layers' GEMMs: attention, norms, activations, the router and the output layer
   * stay in bf16 */
  if (cfg_dtype_bytes(training) >= 2 || wl_is_linear(role, k))
    return training;
  return CFG_BF16;
}

static void wl_kernel_push(wl_model *m, GArray *to, const wl_layer *l, wl_role role,
                           wl_phase phase, const char *what, cfg_kernel_class k, double flops,
                           double bytes)
{
  g_autofree char *name = g_strconcat(l->name, ".", what, NULL);
  wl_kernel x = {.name = g_string_chunk_insert_const(m->strings, name), .role = role,
                 .phase = phase, .kclass = k, .dtype = wl_kernel_dtype(m->dtype, role, k),
                 .flops = flops, .bytes = bytes};
  g_array_append_val(to, x);
}

void wl_fwd(wl_model *m, wl_layer *l, wl_role role, const char *what, cfg_kernel_class k,
            double flops, double bytes)
{
  wl_kernel_push(m, l->fwd, l, role, WL_PHASE_FORWARD, what, k, flops, bytes);
}

void wl_bwd(wl_model *m, wl_layer *l, wl_role role, wl_phase phase, const char *what,
            cfg_kernel_class k, double flops, double bytes)
{
  wl_kernel_push(m, l->bwd, l, role, phase, what, k, flops, bytes);
}

uint32_t wl_emit_kernel(prog_program *p, int cls, const wl_kernel *k,
                        const uint32_t *deps, uint32_t ndeps)
{
  uint32_t op = prog_compute(p, cls, k->name, k->kclass, k->dtype, k->flops, k->bytes, deps, ndeps);
  prog_op *o = prog_op_at(p, cls, op);
  o->recompute = k->phase == WL_PHASE_RECOMPUTE;
  o->inner = k->inner;
  o->rows = k->rows;
  o->cols = k->cols;
  o->attn = k->attn;
  o->hostless = k->hostless;
  o->split_rows = k->split_rows;
  o->split_cols = k->split_cols;
  o->sms_held = k->sms_held;
  return op;
}

hw_kernel wl_hw_kernel(const wl_kernel *k)
{
  return (hw_kernel){.kclass = k->kclass, .dtype = k->dtype, .flops = k->flops, .bytes = k->bytes,
                     .inner = k->inner, .rows = k->rows, .cols = k->cols, .attn = k->attn,
                     .split_rows = k->split_rows, .split_cols = k->split_cols,
                     .sms_held = k->sms_held};
}

double wl_layer_wgrad_share(const wl_layer *l, const hw_cluster *hw)
{
  double all = 0, w = 0;
  for (guint i = 0; i < l->bwd->len; i++) {
    const wl_kernel *k = &g_array_index(l->bwd, wl_kernel, i);
    hw_kernel hk = wl_hw_kernel(k);
    double t = hw_kernel_time(hw, &hk);
    all += t;
    w += k->phase == WL_PHASE_WGRAD ? t : 0;
  }
  return all > 0 ? w / all : 0;
}

void wl_layer_share_kernels(wl_layer *l, const wl_layer *like)
{
  g_array_unref(l->fwd);
  g_array_unref(l->bwd);
  l->fwd = g_array_ref(like->fwd);
  l->bwd = g_array_ref(like->bwd);
}

void wl_set_gemm(GArray *kernels, double rows, double cols, double inner)
{
  wl_kernel *k = &g_array_index(kernels, wl_kernel, kernels->len - 1);
  k->rows = rows;
  k->cols = cols;
  k->inner = inner;
}

double wl_model_fwd_flops(const wl_model *m)
{
  double f = 0;
  for (guint i = 0; i < m->layers->len; i++)
    f += ((const wl_layer *)g_ptr_array_index(m->layers, i))->model_flops;
  return f;
}

/* Megatron-LM's --test-mode gathers qk-layernorm's weights over the data-parallel group. */
static int wl_checks_dp(const cfg_workload *w)
{
  return w->training.test_mode && w->model.qk_norm ? MAX(w->parallel.dp, 1) : 1;
}

wl_shard wl_shard_of(const cfg_workload *w)
{
  wl_shard s = {.micro_batch = w->training.micro_batch, .tp = w->parallel.tp, .cp = w->parallel.cp,
                .cp_exchange = w->parallel.cp_exchange, .sp = w->parallel.sequence_parallel != 0, .recompute = w->training.recompute,
                .ep = MAX(w->parallel.ep, 1), .moe_load = 1,
                .checks_dp = wl_checks_dp(w)};
  s.tp_overlap = s.sp && s.tp > 1 && w->parallel.tp_comm_overlap;
  if (w->model.kind == CFG_MODEL_MOE_TRANSFORMER) {
    double tokens = (double)s.micro_batch * w->model.seq_len / (MAX(s.cp, 1) * MAX(s.tp, 1));
    /* the routing file was read when the workload was checked: this cannot fail now */
    if (!wl_moe_load(&w->model.moe, s.ep, tokens, &s.moe_load, &s.moe_dropped, NULL))
      s.moe_load = 1;
  }
  return s;
}

bool wl_model_build(const cfg_model *cm, const cfg_training *t, const wl_shard *shard,
                    wl_model **out, GError **err)
{
  wl_model *m = wl_model_new(t->dtype);
  bool ok = false;
  switch (cm->kind) {
  case CFG_MODEL_TRANSFORMER:
  case CFG_MODEL_MOE_TRANSFORMER:
    ok = wl_transformer_build(m, cm, t, shard, err);
    break;
  case CFG_MODEL_CNN:
    ok = wl_cnn_build(m, cm, t, shard->micro_batch, err);
    break;
  case CFG_MODEL_GENERIC:
    ok = wl_generic_build(m, cm, t, err);
    break;
  }
  if (!ok) {
    wl_model_free(m);
    return false;
  }
  *out = m;
  return true;
}

wl_state_bytes wl_state_bytes_per_param(const cfg_training *t)
{
  bool full = t->dtype == CFG_FP32 || t->dtype == CFG_TF32;
  wl_state_bytes s;
  /* fp8 training keeps 16-bit weights and casts them per GEMM, unless the weights themselves
   * are fp8 tensors (their fp32 master copy is the optimizer's) */
  s.weights = full ? 4 : t->fp8_params ? 1 : 2;
  s.grads = MAX(cfg_dtype_bytes(t->grad_dtype), full ? 4 : 2);
  s.lp_grads = 0;
  s.reduced = s.grads;
  if (t->grad_accum_dtype) {
    /* BF16_Optimizer (microsoft/DeepSpeed deepspeed/runtime/bf16_optimizer.py): the buffer it
     * reduces, fp32_groups_gradients_flat, is zeros_like the flat weights (whole, not a
     * partition), and the pipeline engine keeps the weights' own .grad (update_hp_grads with
     * clear_lp_grads=False) until the next backward replaces them */
    s.grads = cfg_dtype_bytes((cfg_dtype)(t->grad_accum_dtype - 1));
    /* a hook that adds each tensor as the backward makes it frees it there (NeMo 1.x's O2
     * optimizers): no whole copy stays */
    s.lp_grads = t->grad_accum_pass == CFG_GRAD_ACCUM_ADD ? 0 : full ? 4 : 2;
    /* the engine's allreduce_bucket casts that buffer to communication_data_type, the training
     * dtype unless set, before reducing it (engine.py @ 15293139f, memory.c's mem_grad_cast) */
    s.reduced = MIN(s.grads, cfg_dtype_bytes(t->grad_dtype));
  }
  if (full)
    s.optimizer = t->optimizer == CFG_OPT_ADAM ? 8 : 4; /* m, v | momentum */
  else
    s.optimizer = t->optimizer == CFG_OPT_ADAM ? 12 : 8; /* + fp32 master weights */
  return s;
}

double wl_grad_accum_bytes(const cfg_training *t)
{
  if (!t->grad_accum_dtype)
    return 0;
  wl_state_bytes sb = wl_state_bytes_per_param(t);
  bool full = t->dtype == CFG_FP32 || t->dtype == CFG_TF32;
  /* MainParamsOptimizerWrapper's param_hook (NVIDIA/NeMo nemo/core/optim/
   * optimizer_with_main_params.py @ v1.11.0: main_param.grad.add_(param.grad.data)) and apex's
   * DistributedFusedAdam._grad_copy (grad_out.add_(grad_in), apex @ a0f5f3ac): one add_ that
   * reads the 16-bit gradient and the buffer and writes the buffer */
  if (t->grad_accum_pass == CFG_GRAD_ACCUM_ADD)
    return (full ? 4 : 2) + 2 * sb.grads;
  /* update_hp_grads: hp_grad.add_(lp.grad.to(hp_grad.dtype)), two kernels a tensor: the cast
   * reads the gradient and writes a copy in the buffer's dtype, the add reads that copy and the
   * buffer and writes the buffer */
  return sb.lp_grads + sb.grads + 3 * sb.grads;
}

/* A model known only by its parameter count: memory estimates of model states. */
bool wl_generic_build(wl_model *m, const cfg_model *cm, const cfg_training *t, GError **err)
{
  (void)t, (void)err;
  wl_layer *l = wl_layer_add(m, "parameters", cm->params);
  (void)l;
  m->samples = 1;
  return true;
}

void wl_chunk_blocks(int blocks, int chunks, int g, int *first, int *count)
{
  /* the blocks that do not divide evenly go to the middle chunks: the first and the last also
   * run the embedding and the output layer */
  int base = blocks / chunks, extra = blocks % chunks, lo = (chunks - extra) / 2;
  *first = g * base + CLAMP(g - lo, 0, extra);
  *count = base + (g >= lo && g < lo + extra ? 1 : 0);
}

wl_stage wl_stage_of(const wl_model *m, int pp, int s)
{
  return wl_chunk_of(m, pp, s);
}

wl_stage wl_chunk_of(const wl_model *m, int chunks, int g)
{
  int pp = chunks, s = g;
  wl_stage st = {0};
  guint n = m->layers->len;
  if (pp <= 1 || m->blocks <= 0) {
    st.first = 0;
    st.count = n;
    st.embedding = st.output = true;
    return st;
  }
  /* layers: [embedding, blocks..., output] */
  int first, count;
  wl_chunk_blocks(m->blocks, pp, s, &first, &count);
  st.embedding = s == 0;
  st.output = s == pp - 1;
  st.first = 1 + (guint)first - (st.embedding ? 1 : 0);
  st.count = (guint)count + (st.embedding ? 1 : 0) + (st.output ? n - 1 - (guint)m->blocks : 0);
  return st;
}

double wl_inflight(const cfg_parallel *p, int stage, int micro_batches)
{
  int pp = p->pp;
  if (pp <= 1)
    return 1;
  switch (p->schedule) {
  case CFG_SCHED_GPIPE:
    return micro_batches;
  case CFG_SCHED_1F1B:
    return MIN(micro_batches, pp - stage);
  case CFG_SCHED_INTERLEAVED: {
    /* Rank s runs 2 (p - 1 - s) + (v - 1) p chunk forwards before its steady state, whose
     * first forward comes before its first backward (Megatron-LM's interleaved schedule,
     * num_warmup_microbatches; torch.distributed.pipelining's ScheduleInterleaved1F1B,
     * get_rank_warmup_ops, the same count), all of them if the step has no more: v chunks are
     * one stage's worth. On the first stage this is Korthikanti et al.'s p (1 + (p - 1) / (p
     * v)); the last still holds (v - 1) p + 1 chunks, not one stage's. */
    int v = MAX(1, p->virtual_stages);
    double chunks = 2.0 * (pp - 1 - stage) + (double)(v - 1) * pp + 1;
    return MIN((double)micro_batches * v, chunks) / v;
  }
  case CFG_SCHED_ZB_H1:
    /* Qi et al., Sec. 2.3: (p - s) micro-batches awaiting B and s awaiting W, which keeps 32/34
     * of them (their Table 1, without the attention scores FlashAttention does not store) */
    return MIN(micro_batches, pp - stage) + MIN(micro_batches, stage) * 32.0 / 34.0;
  case CFG_SCHED_ZB_V:
    /* Qi et al., Sec. 6: every worker peaks at 1F1B's first stage, p M_B (2p half-stage
     * chunks) */
    return MIN(micro_batches, pp);
  case CFG_SCHED_DUALPIPE:
    /* DeepSeek-V3 report, Table 2: PP + 1 micro-batches of one stage's activations */
    return MIN(micro_batches, pp + 1);
  }
  return pp - stage;
}

wl_states wl_states_of(const cfg_workload *w, double params)
{
  return wl_states_of_split(w, params, 0);
}

/* One state of `params` parameters, `experts` of them routed experts' : ZeRO partitions the
 * dense ones over the data-parallel ranks, the experts over the ranks that hold the same ones. */
static double wl_sharded(double params, double experts, double bytes, const cfg_parallel *p, int stage)
{
  double dp = (double)p->dp * p->cp, edp = dp / MAX(p->ep, 1);
  if (p->zero < stage)
    return params * bytes;
  return ((params - experts) / dp + experts / edp) * bytes;
}

wl_states wl_states_of_split(const cfg_workload *w, double params, double experts)
{
  wl_state_bytes b = wl_state_bytes_per_param(&w->training);
  const cfg_parallel *p = &w->parallel;
  wl_states s = {.weights = wl_sharded(params, experts, b.weights, p, 3),
                 .grads = wl_sharded(params, experts, b.grads, p, 2) + params * b.lp_grads,
                 .optimizer = wl_sharded(params, experts, b.optimizer, p, 1)};
  double moved = 0;
  if (p->offload != CFG_OFFLOAD_NONE) {
    /* ZeRO-Offload: the optimizer steps on the CPU, so its states and the gradient partition
     * it reads leave the GPU; ZeRO-Infinity may also move the parameters */
    moved = s.optimizer + s.grads;
    s.optimizer = s.grads = 0;
    if (p->offload_params) {
      moved += s.weights;
      s.weights = 0;
    }
  }
  if (p->offload == CFG_OFFLOAD_NVME)
    s.nvme = moved;
  else
    s.host = moved;
  return s;
}

uint32_t wl_emit_optimizer_step(prog_program *p, int cls, const cfg_workload *w,
                                const hw_cluster *hw, double shard, double flops,
                                const uint32_t *deps, uint32_t ndeps)
{
  wl_state_bytes sb = wl_state_bytes_per_param(&w->training);
  cfg_offload where = w->parallel.offload;
  /* streams weights, gradients and optimizer states: read all, write back all but the
   * gradients (through HBM, or through DDR when offloaded) */
  double bytes = shard * (2 * sb.weights + sb.grads + 2 * sb.optimizer);
  const char *name = w->training.optimizer == CFG_OPT_ADAM ? "optimizer.adam" : "optimizer.sgd";
  uint32_t op = prog_compute(p, cls, name, CFG_KCLASS_OPTIMIZER, CFG_FP32, flops,
                             where == CFG_OFFLOAD_NONE ? bytes : 0, deps, ndeps);
  /* ZeRO-Offload: the gradients go down and the updated parameters come back up */
  if (where == CFG_OFFLOAD_CPU)
    prog_op_at(p, cls, op)->fixed_time =
        hw_host_optimizer_time(hw, flops, bytes, shard * (sb.grads + sb.weights));
  return op;
}

/* Transformer Engine casts a linear module's weight to fp8 on the first micro-batch of a step
 * and caches it (module/linear.py: update_ws = is_first_microbatch; Megatron-Core's TE wrappers
 * pass is_first_microbatch, True once a step): one cast-transpose per weight and step, reading
 * its 16 bits and writing fp8 and fp8 transposed (2 + 1 + 1 bytes). FP8 parameters are already
 * fp8: the distributed optimizer's gather is followed by the transpose Hopper's GEMMs need
 * (tensor/utils.py post_all_gather_processing -> _create_transpose: 1 + 1 bytes). A block's
 * weights are nearly all linear (its norms are 2h of 12h^2). Block-scaled formats quantize their
 * weights every micro-batch instead (transformer.c). */
void wl_emit_fp8_weight_casts(prog_program *p, int cls, const cfg_workload *w, const wl_model *m,
                              double block_params, const uint32_t *after)
{
  if (m->dtype != CFG_FP8 || block_params <= 0)
    return;
  double bytes = block_params * (w->training.fp8_params ? 2 : 4);
  prog_compute(p, cls, "fp8 weight casts", CFG_KCLASS_ELEMENTWISE, CFG_BF16, 0, bytes, after,
               after ? 1 : 0);
}
