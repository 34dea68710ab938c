/* The closed-form memory model. */
#include "memory/memory.h"

#include <math.h>
#include <string.h>

const char *mem_extra_name(mem_extra e)
{
  static const char *const names[] = {"cuda_context", "nccl_buffers", "comm_buckets",
                                      "zero3_live_params", "recompute", "moe_buffers",
                                      "pipe_buffers", "grad_cast", "zero_step_grads",
                                      "fragmentation"};
  return e < MEM_NEXTRA ? names[e] : "?";
}

static int mem_groups(const cfg_parallel *p)
{
  return (p->dp > 1) + (p->tp > 1) + (p->pp > 1) + (p->cp > 1) + (p->ep > 1);
}

/* The process groups a GPU of stage `stage` communicates in, each an NCCL communicator with its
 * own buffers. DeepSpeed's pipeline engine (runtime/pipe/topology.py, p2p.py @ 15293139f) adds its
 * own beside Megatron's tensor-parallel group: the slice group its partitioned sends gather in,
 * the whole model's group (TP x PP) the gradient norm is reduced in, the tied embedding's
 * (first and last stage), and a pair per neighbouring stage (dist.send / recv: PyTorch builds a
 * communicator for each pair of ranks). */
static int mem_stage_groups(const cfg_workload *w, int stage)
{
  const cfg_parallel *p = &w->parallel;
  int n = mem_groups(p);
  if (p->pp <= 1 || p->pipeline_engine != CFG_PIPE_DEEPSPEED)
    return n;
  bool end = stage == 0 || stage == p->pp - 1;
  int peers = end ? 1 : 2;
  return n + (p->tp > 1) + 1 + peers + (end && w->model.tied_embeddings);
}

/* Parameters held by a stage (tied embeddings: the last stage keeps its own copy). */
static double mem_stage_params(const wl_model *m, const cfg_workload *w, const wl_stage *st,
                               double *largest, double *experts)
{
  double params = 0;
  *largest = *experts = 0;
  for (guint i = st->first; i < st->first + st->count; i++) {
    const wl_layer *l = g_ptr_array_index(m->layers, i);
    params += l->params;
    *experts += l->expert_params;
    *largest = MAX(*largest, l->params);
  }
  const wl_layer *emb = g_ptr_array_index(m->layers, 0);
  if (w->parallel.pp > 1 && st->output && w->model.tied_embeddings && m->blocks > 0)
    params += emb->params;
  return params;
}

static double mem_stage_activations(const wl_model *m, const wl_stage *st)
{
  double a = 0;
  for (guint i = st->first; i < st->first + st->count; i++)
    a += ((const wl_layer *)g_ptr_array_index(m->layers, i))->saved_bytes;
  return a;
}

/* What a stage's in-flight micro-batches hold. The output layer's saved fp32 log-probabilities
 * live from a micro-batch's forward to its backward, which on the last stage follow each other
 * under 1F1B and interleaved 1F1B: one micro-batch's, however many of the rank's other chunks'
 * the interleaved warm-up holds (wl_inflight). */
static double mem_held_activations(const cfg_workload *w, const wl_model *m, const wl_stage *st,
                                   double act, double inflight)
{
  cfg_schedule sched = w->parallel.schedule;
  double head = 0;
  if (st->output && m->blocks > 0 && (sched == CFG_SCHED_1F1B || sched == CFG_SCHED_INTERLEAVED))
    head = ((const wl_layer *)g_ptr_array_index(m->layers, m->layers->len - 1))->saved_bytes;
  return (act - head) * inflight + head * MIN(1.0, inflight);
}

/* DualPipe: stage s also holds stage pp - 1 - s of the reverse direction (the second copy of
 * the parameters, DeepSeek-V3 report Sec. 3.2.1); its micro-batches are either stage's. */
static void mem_add_mirror(const cfg_workload *w, const wl_model *m, int stage, double *params,
                           double *largest, double *experts, double *act)
{
  wl_stage mirror = wl_stage_of(m, w->parallel.pp, w->parallel.pp - 1 - stage);
  double big, exp;
  *params += mem_stage_params(m, w, &mirror, &big, &exp);
  /* the end ranks hold the embedding itself: no tied copy */
  bool end = stage == 0 || stage == w->parallel.pp - 1;
  if (end && w->model.tied_embeddings && m->blocks > 0)
    *params -= ((const wl_layer *)g_ptr_array_index(m->layers, 0))->params;
  *largest = MAX(*largest, big);
  *experts += exp;
  *act = MAX(*act, mem_stage_activations(m, &mirror));
}

/* ZB-V: rank s holds chunks s and 2p - 1 - s of 2p (rank 0 the embedding and the output layer,
 * so no tied copy); a micro-batch leaves both chunks' activations. Returns the parameters. */
static double mem_vee_chunks(const cfg_workload *w, const wl_model *m, int stage, double *largest,
                             double *experts, double *act)
{
  int chunks = 2 * w->parallel.pp;
  double params = 0;
  *largest = *experts = *act = 0;
  for (int c = 0; c < 2; c++) {
    wl_stage ch = wl_chunk_of(m, chunks, c ? chunks - 1 - stage : stage);
    double big, exp;
    params += mem_stage_params(m, w, &ch, &big, &exp);
    *largest = MAX(*largest, big);
    *experts += exp;
    *act += mem_stage_activations(m, &ch);
  }
  if (stage == 0 && w->model.tied_embeddings && m->blocks > 0)
    params -= ((const wl_layer *)g_ptr_array_index(m->layers, 0))->params;
  return params;
}

/* DeepSpeed's BF16 optimizer hands the engine its whole fp32 buffer as one flat tensor, larger
 * than the engine's 5e8-element bucket, and allreduce_bucket casts it to communication_data_type
 * (the training dtype unless set: engine.py, microsoft/DeepSpeed@15293139f of 2022-02-28, the
 * bf16 branch BigScience ran) before the all-reduce: a copy of every gradient of the stage at
 * once, after the last backward. No block the activations freed is that large, so the caching
 * allocator reserves a segment for it, which stays reserved beside theirs. */
static double mem_grad_cast(const cfg_training *t, double params)
{
  if (!t->grad_accum_dtype)
    return 0;
  double accum = cfg_dtype_bytes((cfg_dtype)(t->grad_accum_dtype - 1));
  double comm = cfg_dtype_bytes(t->grad_dtype);
  return comm < accum ? params * comm : 0;
}

/* DeepSpeedZeroOptimizer.step (deepspeed/runtime/zero/stage_1_and_2.py, microsoft/DeepSpeed
 * @ 2151c787a of 2022-02-18, the same in the bf16 branch's 15293139f): the partition's gradients,
 * views of the weights' .grad, are flattened into one tensor of their dtype and that is cast
 * .to() fp32 (single_grad_partition), both alive at once; the fp32 copy stays until the
 * optimizer has stepped. Each is the whole partition, larger than any block the activations
 * free, so the caching allocator reserves a segment for each and keeps it beside theirs. The
 * BF16 optimizer steps on views of its own fp32 buffer instead (grad_accum_dtype), and on fp32
 * gradients .to() returns the flat tensor itself. Offloaded, the step copies to the host. */
static double mem_zero_step_grads(const cfg_workload *w, const mem_stage *s)
{
  const cfg_parallel *p = &w->parallel;
  if (!w->memory.zero_step_grads || p->zero < 1 || p->zero > 2 || w->training.grad_accum_dtype)
    return 0;
  wl_state_bytes b = wl_state_bytes_per_param(&w->training);
  /* the optimizer's states are those of the partition's parameters, ZeRO's share of this rank */
  double partition = s->optimizer / b.optimizer;
  return partition * (b.grads + (b.grads < 4 ? 4 : 0));
}

/* One micro-batch's hidden states, whole: between stages and into the output projection they
 * travel in 16 bits at least (parallel.c's act_bytes). */
static double mem_hidden_states(const cfg_workload *w, const wl_model *m)
{
  return m->tokens * w->model.hidden * MAX(2.0, cfg_dtype_bytes(m->dtype));
}

/* DeepSpeed's PipelineEngine (deepspeed/runtime/pipe/engine.py and schedule.py @ 15293139f) keeps
 * each micro-batch's stage output in pipe_buffers until its backward (with TP, only this rank's
 * 1/TP partition: the rest is freed once sent), and reserves one buffer more than the
 * micro-batches in flight (TrainSchedule.num_pipe_buffers, at least 2), each holding the input it
 * last received, whole, until reused. The last stage returns from its backward without clearing
 * its buffer, and its outputs are Megatron-DeepSpeed's fp32 logits (GPTModelPipe's last spec,
 * float16_to_fp32): both buffers still hold theirs while a forward computes the next. */
static double mem_deepspeed_pipe_buffers(const cfg_workload *w, const wl_model *m, int stage,
                                         double inflight, bool output)
{
  const cfg_parallel *p = &w->parallel;
  double hidden = mem_hidden_states(w, m);
  double b = stage > 0 ? hidden : 0;
  if (output)
    return b + 2 * m->tokens * w->model.vocab / p->tp * 4;
  return b + inflight * hidden / p->tp;
}

/* torch.distributed.pipelining as torch 1963fc8 (Dec. 2024) has it (stage.py): a stage allocates
 * up front one buffer per micro-batch for the input it receives (_prepare_forward_infra) and one
 * for the gradient of its output (_prepare_backward_infra), kept for the whole run; a buffer of
 * a chunk in flight is its first block's saved input, counted with the activations. Every
 * stage's forward_one_chunk appends the micro-batch's output to output_chunks, cleared only by
 * the next step's clear_runtime_states (the last stage's alone since pytorch/pytorch#153383,
 * May 2025). An output is no block's saved input, so none is among the activations, and the
 * list reaches every micro-batch by the last forward, while the schedule still holds its
 * in-flight ones: each chunk's hidden states, and on the last stage the logits, 16 bits
 * (torchtitan's float8 leaves the output projection alone), a vocabulary shard under
 * loss_parallel, the current one's too while its loss runs backward. And stage_backward leaves
 * each micro-batch's input gradient in its receive buffer's .grad, also until
 * clear_runtime_states (released after its send only since pytorch/pytorch#164329, Oct. 2025):
 * by the last forward, one for each chunk whose backward is done, but the first stage's, whose
 * input is the tokens. Each of a rank's virtual stages has its own buffers and list. */
static double mem_torch_pipe_buffers(const cfg_workload *w, const wl_model *m, int stage,
                                     double inflight, int micro, bool output)
{
  const cfg_parallel *p = &w->parallel;
  double bytes = MAX(2.0, cfg_dtype_bytes(m->dtype));
  double act = mem_hidden_states(w, m) / (p->sequence_parallel ? p->tp : 1);
  int v = MAX(1, p->virtual_stages);
  double chunks = (double)v * micro;
  double received = chunks - (stage == 0 ? micro : 0);
  double grads = chunks - (stage == p->pp - 1 ? micro : 0);
  double hidden_outputs = chunks - (output ? micro : 0);
  double done = MAX(0.0, chunks - inflight * v) * (stage == 0 ? (v - 1.0) / v : 1);
  double b = (MAX(0.0, received - inflight * v) + grads + hidden_outputs + done) * act;
  if (output) {
    int shard = w->training.loss_parallel && p->tp > 1 ? p->tp : 1;
    b += micro * m->tokens * w->model.vocab / shard * bytes;
  }
  return b;
}

/* What the pipeline engine keeps beside the schedule's activations. */
static double mem_pipe_buffers(const cfg_workload *w, const wl_model *m, int stage,
                               double inflight, int micro, bool output)
{
  const cfg_parallel *p = &w->parallel;
  if (p->pp <= 1 || m->blocks <= 0)
    return 0;
  if (p->pipeline_engine == CFG_PIPE_DEEPSPEED)
    return mem_deepspeed_pipe_buffers(w, m, stage, inflight, output);
  if (p->pipeline_engine == CFG_PIPE_TORCH)
    return mem_torch_pipe_buffers(w, m, stage, inflight, micro, output);
  return 0;
}

/* parallel.pp_reshard_after_forward false keeps every FSDP2 unit of a stage unsharded for the
 * whole step: torchtitan's apply_fsdp sets reshard_after_forward=False when PP is on "to avoid
 * per-microbatch all-gathers" (torchtitan/parallelisms/parallelize_llama.py @ 9dec370, lines
 * 326-329), and torch.distributed.pipelining's stage (backward_maybe_with_nosync) runs every
 * micro-batch's backward with set_reshard_after_backward(False) and
 * set_requires_gradient_sync(False),
 * reduce-scattering only after the last one; until then FSDP2 accumulates the unsharded
 * gradients in its reduce dtype (FSDPParam.to_accumulated_grad_if_needed). Without FSDP
 * (one data-parallel and context-parallel rank) nothing is sharded to begin with. */
static bool mem_pp_keeps_unsharded(const cfg_workload *w)
{
  const cfg_parallel *p = &w->parallel;
  return !p->pp_reshard_after_forward && p->pp > 1 && p->zero >= 3 && p->dp * p->cp > 1;
}

/* The stage's parameters outside its transformer blocks: the embedding on the first stage, the
 * final norm and output projection on the last (FSDP2's root unit in torchtitan, where each
 * block is a fully_shard unit of its own). */
static double mem_root_params(const wl_model *m, const wl_stage *st)
{
  if (m->blocks <= 0)
    return 0;
  double p = 0;
  if (st->first == 0)
    p += ((const wl_layer *)g_ptr_array_index(m->layers, 0))->params;
  if (st->output)
    p += ((const wl_layer *)g_ptr_array_index(m->layers, m->layers->len - 1))->params;
  return p;
}

/* The bytes a parameter outside the blocks takes gathered: the 16-bit param_dtype whatever
 * training.fp8_params says, as torchao's Float8 converts only nn.Linear and torchtitan leaves
 * out the output projection (torchtitan/float8.py @ 9dec370, module_filter_fn: fqn != "output"),
 * so the FSDP float8 all-gather gathers the embedding and the output in bf16. */
static double mem_root_weight_bytes(const wl_state_bytes *b)
{
  return MAX(b->weights, 2.0);
}

/* The stage's whole weights (as all-gathered: 16 bits, or fp8 with fp8 all-gather, but for the
 * root's, mem_root_weight_bytes) and its accumulated gradients (the reduce dtype,
 * training.grad_dtype), beside the shards. */
static void mem_pp_unsharded_states(const cfg_workload *w, double params, double root,
                                    mem_stage *s)
{
  wl_state_bytes b = wl_state_bytes_per_param(&w->training);
  double weights = params * b.weights + root * (mem_root_weight_bytes(&b) - b.weights);
  double grads = params * b.grads;
  s->params += weights;
  s->grads += grads;
  s->model_states += weights + grads;
  s->unsharded = weights + grads;
}

/* training.loss_parallel (torchtitan's with TP, unless training.disable_loss_parallel:
 * torchtitan/parallelisms/parallel_dims.py @ 9dec370, loss_parallel_enabled): DTensor's own
 * cross-entropy handlers run instead of aten's fused kernels. */
static bool mem_loss_parallel(const cfg_workload *w)
{
  return w->training.loss_parallel && w->parallel.tp > 1;
}

/* The output projection is a ColwiseParallel with input_layouts=Shard(1) (parallelize_llama.py
 * @ 9dec370, apply_tp): the final norm's sequence shard is all-gathered and nn.Linear keeps the
 * whole gathered input for its weight gradient until the output's backward, after the loss's.
 * The output stays in 16 bits (torchtitan's float8 conversion skips it). */
static double mem_head_gathered_input(const cfg_workload *w, const wl_model *m)
{
  return mem_hidden_states(w, m);
}

/* What the loss's backward holds beside every block's activations on the output stage. Under
 * loss_parallel, _nll_loss_and_log_softmax_backward (torch/distributed/tensor/parallel/loss.py,
 * the late-2024 version) computes (zeros_like(x) + exp(x)) * grad_output on the fp32
 * log-probabilities x of the vocabulary shard: the zeros, their sum with exp(x) and the
 * product are alive at once beside the saved x, three fp32 copies where aten's nll_loss and
 * log_softmax backward hold two (loss_peak); the head's gathered input is still alive. */
static double mem_loss_working_set(const cfg_workload *w, const wl_model *m, bool output)
{
  if (!output)
    return 0;
  if (!mem_loss_parallel(w))
    return m->loss_peak;
  return 1.5 * m->loss_peak + mem_head_gathered_input(w, m);
}

/* The largest transformer block of the stage: a fully_shard unit of its own. */
static double mem_largest_block(const wl_model *m, const wl_stage *st)
{
  double big = 0;
  for (guint i = st->first; i < st->first + st->count; i++)
    if (i >= 1 && (int)i <= m->blocks)
      big = MAX(big, ((const wl_layer *)g_ptr_array_index(m->layers, i))->params);
  return big;
}

/* memory.unit_buckets: FSDP2 reduce-scatters per fully_shard unit (torch/distributed/fsdp/
 * _fully_shard/_fsdp_collectives.py, foreach_reduce, torch 1963fc8): once a block's backward is
 * done, its gradients (in the parameters' compute dtype) are copied into a reduce-scatter input
 * of reduce_dtype, which stays alive until the next unit's post_backward waits on it, so a
 * block's backward runs beside the previous block's input and its own growing gradients. With
 * the stage kept unsharded nothing is reduced until the last micro-batch: the block's gradients
 * live until added into the accumulator. The root unit (embedding, final norm, output) is
 * reduced after the whole backward: the output projection's gradients, made first, stay. */
static double mem_unit_buckets(const cfg_workload *w, const wl_model *m, const wl_stage *st)
{
  wl_state_bytes b = wl_state_bytes_per_param(&w->training);
  double autograd = b.weights >= 4 ? 4 : 2;
  double per_param = mem_pp_keeps_unsharded(w) ? autograd : autograd + b.grads;
  double bytes = mem_largest_block(m, st) * per_param;
  if (st->output && m->blocks > 0)
    bytes += ((const wl_layer *)g_ptr_array_index(m->layers, m->layers->len - 1))->params *
             autograd;
  return bytes;
}

static double mem_comm_buckets(const cfg_workload *w, const wl_model *m, const wl_stage *st)
{
  const cfg_parallel *p = &w->parallel;
  if (w->memory.unit_buckets && p->zero >= 3 && p->dp * p->cp > 1)
    return mem_unit_buckets(w, m, st);
  return p->dp > 1 || p->zero > 0 ? 2 * w->memory.comm_bucket : 0;
}

/* memory.root_gathered: FSDP2 does not reshard its root unit after forward ("the parameters
 * would be freed and all-gathered immediately": _fsdp_state.py, _lazy_init, torch 1963fc8), and
 * torchtitan's root is the model, whose own parameters are those outside the per-block units
 * (mem_root_params), gathered from the first forward to the end of backward. Beside them, while
 * a block's backward runs, that block's unit and the one FSDP2's backward prefetch gathers next
 * (FSDPParamGroup._backward_prefetch), whole; while the loss's backward runs, before the root's
 * pre-backward hook, no block is gathered (each was resharded after its forward). The larger of
 * the two moments is the stage's. */
static void mem_root_gathered(const cfg_workload *w, const wl_model *m, const wl_stage *st,
                              mem_stage *s)
{
  wl_state_bytes b = wl_state_bytes_per_param(&w->training);
  double root = mem_root_params(m, st) * mem_root_weight_bytes(&b);
  double blocks = 2 * mem_largest_block(m, st) * b.weights;
  double block_bwd = m->recompute_peak + m->ring_peak;
  double loss = mem_loss_working_set(w, m, st->output);
  bool block_moment = block_bwd + blocks >= loss;
  s->extra[MEM_ZERO3_LIVE] = root + (block_moment ? blocks : 0);
  s->extra[MEM_RECOMPUTE] = block_moment ? block_bwd : loss;
}

static void mem_extras(const cfg_workload *w, const wl_model *m, const wl_stage *st,
                       double largest, double params, int micro, mem_stage *s)
{
  const cfg_memory *mm = &w->memory;
  const cfg_parallel *p = &w->parallel;
  wl_state_bytes b = wl_state_bytes_per_param(&w->training);
  s->extra[MEM_CUDA_CONTEXT] = mm->cuda_context;
  s->extra[MEM_NCCL] = mm->nccl_buffers * mem_stage_groups(w, s->stage);
  s->extra[MEM_COMM_BUCKETS] = mem_comm_buckets(w, m, st);
  /* a stage kept whole gathers nothing more (mem_pp_keeps_unsharded) */
  s->extra[MEM_ZERO3_LIVE] =
      p->zero >= 3 && !mem_pp_keeps_unsharded(w) ? largest * b.weights + mm->zero3_prefetch : 0;
  /* the loss's working set is gone before the first block is recomputed; a block's backward
   * holds what recomputation brought back beside its attention's ring buffers */
  s->extra[MEM_RECOMPUTE] =
      MAX(m->recompute_peak + m->ring_peak, mem_loss_working_set(w, m, st->output));
  if (mm->root_gathered && p->zero >= 3 && !mem_pp_keeps_unsharded(w) && p->dp * p->cp > 1)
    mem_root_gathered(w, m, st, s);
  /* the copies this GPU sends and the busiest rank receives, in 16 bits (DeepEP, Megatron) */
  s->extra[MEM_MOE_BUFFERS] = p->ep > 1 ? m->moe_copies * w->model.hidden * 2 * (1 + m->moe_load) : 0;
  s->extra[MEM_PIPE_BUFFERS] = mem_pipe_buffers(w, m, s->stage, s->inflight, micro, st->output);
  s->extra[MEM_GRAD_CAST] = mem_grad_cast(&w->training, params);
  s->extra[MEM_ZERO_STEP_GRADS] = mem_zero_step_grads(w, s);
  double rest = s->model_states + s->activations + s->kv_cache;
  /* a whole segment of its own is not split, so it loses nothing to fragmentation */
  for (int e = 0; e < MEM_FRAGMENTATION; e++)
    rest += e == MEM_GRAD_CAST || e == MEM_ZERO_STEP_GRADS ? 0 : s->extra[e];
  s->extra[MEM_FRAGMENTATION] = mm->fragmentation * rest;
  s->other = 0;
  for (int e = 0; e < MEM_NEXTRA; e++)
    s->other += s->extra[e];
}

static void mem_fill_stage(const cfg_workload *w, const wl_model *m, int stage, bool states_only,
                           mem_stage *s)
{
  const cfg_parallel *p = &w->parallel;
  wl_stage st = wl_stage_of(m, p->pp, stage);
  double largest = 0, experts = 0;
  double params = mem_stage_params(m, w, &st, &largest, &experts);
  double act = mem_stage_activations(m, &st);
  if (p->pp > 1 && p->schedule == CFG_SCHED_DUALPIPE)
    mem_add_mirror(w, m, stage, &params, &largest, &experts, &act);
  if (p->pp > 1 && p->schedule == CFG_SCHED_ZB_V)
    params = mem_vee_chunks(w, m, stage, &largest, &experts, &act);
  wl_states states = wl_states_of_split(w, params, experts);
  memset(s, 0, sizeof *s);
  s->stage = stage;
  s->params = states.weights;
  s->grads = states.grads;
  s->optimizer = states.optimizer;
  s->host = states.host;
  s->nvme = states.nvme;
  s->model_states = s->params + s->grads + s->optimizer;
  if (mem_pp_keeps_unsharded(w))
    mem_pp_unsharded_states(w, params, mem_root_params(m, &st), s);
  int micro = w->training.global_batch / (p->dp * w->training.micro_batch);
  s->inflight = wl_inflight(p, stage, micro);
  s->activations_per_micro_batch = act;
  if (!states_only) {
    s->activations = mem_held_activations(w, m, &st, act, s->inflight);
    mem_extras(w, m, &st, largest, params, micro, s);
  }
  s->total = s->model_states + s->activations + s->kv_cache + s->other;
}

/* The stages of one micro-batch size, with `built` (NULL: none) the model of that shard; false
 * if the model cannot be built. */
static bool mem_stages(const cfg_workload *w, int micro_batch, bool states_only,
                       const wl_model *built, mem_stage *out, GError **err)
{
  cfg_workload shaped = *w;
  shaped.training.micro_batch = micro_batch;
  wl_shard shard = wl_shard_of(&shaped);
  wl_model *m = NULL;
  if (!built && !wl_model_build(&w->model, &w->training, &shard, &m, err))
    return false;
  for (int s = 0; s < w->parallel.pp; s++)
    mem_fill_stage(&shaped, built ? built : m, s, states_only, &out[s]);
  wl_model_free(m);
  return true;
}

double mem_peak_with_model(const cfg_workload *w, const wl_model *m)
{
  double worst = 0;
  for (int s = 0; s < w->parallel.pp; s++) {
    mem_stage st;
    mem_fill_stage(w, m, s, false, &st);
    worst = MAX(worst, st.total);
  }
  return worst;
}

static double mem_worst_total(const mem_stage *s, int n)
{
  double t = 0;
  for (int i = 0; i < n; i++)
    t = MAX(t, s[i].total);
  return t;
}

/* The largest micro-batch (up to the per-replica batch) whose worst stage fits. */
static int mem_max_micro_batch(const cfg_workload *w, double capacity)
{
  int hi = w->training.global_batch / w->parallel.dp, lo = 0;
  g_autofree mem_stage *tmp = g_new(mem_stage, w->parallel.pp);
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (mem_stages(w, mid, false, NULL, tmp, NULL) && mem_worst_total(tmp, w->parallel.pp) <= capacity)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

bool mem_estimate(const cfg_workload *w, const cfg_cluster *c, const mem_options *o,
                  mem_report *out, GError **err)
{
  memset(out, 0, sizeof *out);
  out->states_only = o && o->states_only;
  out->nstages = w->parallel.pp;
  out->stages = g_new0(mem_stage, out->nstages);
  if (!mem_stages(w, w->training.micro_batch, out->states_only, o ? o->model : NULL, out->stages,
                  err))
    return false;
  out->capacity = c->gpu.memory;
  for (int s = 0; s < out->nstages; s++)
    if (out->stages[s].total > out->stages[out->worst].total)
      out->worst = s;
  out->gpu_fits = out->stages[out->worst].total <= out->capacity;
  int gpn = c->node.gpus_per_node;
  for (int s = 0; s < out->nstages; s++) {
    out->host_per_node = MAX(out->host_per_node, out->stages[s].host * gpn);
    out->nvme_per_node = MAX(out->nvme_per_node, out->stages[s].nvme * gpn);
  }
  out->host_capacity = c->node.host_memory;
  out->nvme_capacity = c->node.nvme;
  /* a capacity the cluster does not state cannot be checked: not a failure, but said so */
  out->host_fits = out->host_per_node <= 0 || !(out->host_capacity > 0) ||
                   out->host_per_node <= out->host_capacity;
  out->nvme_fits = out->nvme_per_node <= 0 || out->nvme_per_node <= out->nvme_capacity;
  out->fits = out->gpu_fits && out->host_fits && out->nvme_fits;
  if (o && o->search && !out->states_only && w->model.kind != CFG_MODEL_GENERIC)
    out->max_micro_batch = mem_max_micro_batch(w, out->capacity);
  return true;
}

void mem_report_clear(mem_report *r)
{
  g_free(r->stages);
  memset(r, 0, sizeof *r);
}

const mem_stage *mem_worst(const mem_report *r)
{
  return &r->stages[r->worst];
}

void mem_annotate_program(prog_program *p, const mem_report *r)
{
  /* a class runs one stage: the data-parallel program has one class, stage 0 */
  for (guint c = 0; c < p->classes->len; c++) {
    prog_class *k = prog_class_at(p, (int)c);
    int stage = MIN((int)k->stage, r->nstages - 1);
    const mem_stage *s = &r->stages[stage];
    k->base_memory = s->other - s->extra[MEM_RECOMPUTE] + s->unsharded;
  }
}

double mem_kv_bytes_per_token(const cfg_model *m, cfg_dtype dtype, int tp)
{
  if (m->kind == CFG_MODEL_CNN || m->kind == CFG_MODEL_GENERIC)
    return 0;
  /* multi-head latent attention caches one compressed latent and the rope key per token,
   * replicated on every tensor-parallel GPU */
  if (m->mla.kv_rank > 0)
    return (double)m->layers * (m->mla.kv_rank + m->mla.rope_dim) * cfg_dtype_bytes(dtype);
  double d = m->head_dim > 0 ? m->head_dim : (double)m->hidden / m->heads;
  /* with more GPUs than kv heads, each GPU still holds at least one head */
  double heads = MAX(1.0, (double)m->kv_heads / tp);
  return 2.0 * m->layers * heads * d * cfg_dtype_bytes(dtype);
}

bool mem_model_params(const cfg_workload *w, double *params, double *largest_layer, GError **err)
{
  if (w->model.kind == CFG_MODEL_GENERIC) {
    *params = w->model.params;
    *largest_layer = w->model.largest_layer_params;
    return true;
  }
  /* one GPU holding everything: no tensor, context or expert split */
  wl_shard whole = {.micro_batch = 1, .tp = 1, .cp = 1, .ep = 1, .moe_load = 1,
                    .recompute = CFG_RECOMPUTE_NONE};
  wl_model *m = NULL;
  if (!wl_model_build(&w->model, &w->training, &whole, &m, err))
    return false;
  *params = m->params;
  *largest_layer = 0;
  for (guint i = 0; i < m->layers->len; i++)
    *largest_layer = MAX(*largest_layer, ((const wl_layer *)g_ptr_array_index(m->layers, i))->params);
  wl_model_free(m);
  return true;
}

mem_deepspeed mem_deepspeed_estimate(double params, double largest_layer, int gpus_per_node,
                                     int nodes, int zero, bool offload, bool offload_params,
                                     bool zero_init)
{
  /* The formulas of DeepSpeed's documentation (memory.rst), "all live" variants, buffer
   * factor 1.5 on the CPU side. */
  const double buffer = 1.5;
  double gpus = (double)gpus_per_node * nodes;
  mem_deepspeed e = {0};
  if (zero <= 2) {
    if (offload) {
      e.gpu = 2 * params;
      e.cpu = params * MAX(4 * gpus, 16.0) * buffer;
    } else {
      e.gpu = 4 * params + floor(16 * params / gpus);
      e.cpu = params * 4 * gpus_per_node * buffer;
    }
    return e;
  }
  double layer = 4 * largest_layer;
  if (offload && offload_params) {
    e.gpu = layer;
    e.cpu = zero_init ? params * 18 * gpus_per_node * buffer
                      : params * MAX(4.0 * gpus_per_node, 18) * buffer;
  } else if (offload) {
    e.gpu = layer + floor(2 * params / gpus);
    e.cpu = zero_init ? params * 16 * gpus_per_node * buffer
                      : params * MAX(4.0 * gpus_per_node, 16) * buffer;
  } else {
    e.gpu = layer + floor(18 * params / gpus);
    e.cpu = zero_init ? largest_layer * 4 * gpus_per_node * buffer
                      : params * 4 * gpus_per_node * buffer;
  }
  return e;
}
