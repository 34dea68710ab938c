/* The memory model: ZeRO sharding, offload checks, activations, pipelines, micro-batch search,
 * KV cache, and the closed form against the engines' timeline. */
#include "helpers.h"
#include "memory/memory.h"
#include "report/report.h"
#include "run/run.h"
#include "serving/serving.h"
#include "workloads/workloads.h"

#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static mem_report estimate(const char *cluster, const char *workload, const char *const *sets,
                           bool states_only)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load(cluster, workload, sets, &c, &w));
  mem_options o = {.states_only = states_only, .search = true};
  mem_report r;
  GError *err = NULL;
  cr_assert(mem_estimate(w, c, &o, &r, &err), "%s", err ? err->message : "");
  cfg_cluster_free(c);
  cfg_workload_free(w);
  return r;
}

Test(memory, zero_stages_on_one_gpu_equal_stage_0)
{
  const char *s0[] = {"node.count=1", "node.gpus_per_node=1", "parallel.dp=1", "parallel.zero=0", NULL};
  mem_report r0 = estimate("dgx-a100", "zero-7.5b", s0, true);
  for (int z = 1; z <= 3; z++) {
    char zs[32];
    g_snprintf(zs, sizeof zs, "parallel.zero=%d", z);
    const char *sz[] = {"node.count=1", "node.gpus_per_node=1", "parallel.dp=1", zs, NULL};
    mem_report r = estimate("dgx-a100", "zero-7.5b", sz, true);
    cr_assert_float_eq(r.stages[0].total, r0.stages[0].total, 1, "stage %d", z);
    mem_report_clear(&r);
  }
  mem_report_clear(&r0);
}

Test(memory, zero_memory_falls_with_dp)
{
  for (int z = 1; z <= 3; z++) {
    double prev = INFINITY;
    for (int nodes = 1; nodes <= 16; nodes *= 2) {
      char zs[32], ns[32], dp[32];
      g_snprintf(zs, sizeof zs, "parallel.zero=%d", z);
      g_snprintf(ns, sizeof ns, "node.count=%d", nodes);
      g_snprintf(dp, sizeof dp, "parallel.dp=%d", nodes * 8);
      const char *sets[] = {zs, ns, dp, "training.global_batch=128", NULL};
      mem_report r = estimate("dgx-a100", "zero-7.5b", sets, true);
      cr_assert(r.stages[0].total < prev, "zero %d: %d nodes %g >= %g", z, nodes, r.stages[0].total, prev);
      prev = r.stages[0].total;
      mem_report_clear(&r);
    }
  }
}

Test(memory, zero_paper_figure_1)
{
  const double expect[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int z = 0; z <= 3; z++) {
    char zs[32];
    g_snprintf(zs, sizeof zs, "parallel.zero=%d", z);
    const char *sets[] = {"node.count=8", zs, NULL};
    mem_report r = estimate("dgx-a100", "zero-7.5b", sets, true);
    cr_assert_float_eq(r.stages[0].model_states, expect[z], expect[z] * 1e-9, "stage %d: %g", z,
                       r.stages[0].model_states);
    mem_report_clear(&r);
  }
}

Test(memory, offload_moves_states_and_checks_host_and_nvme)
{
  const char *cpu[] = {"node.count=1", "parallel.zero=3", "parallel.offload=cpu",
                       "parallel.offload_params=true", NULL};
  mem_report r = estimate("dgx-a100", "t5-3b-deepspeed", cpu, true);
  cr_assert_eq(r.stages[0].model_states, 0);
  cr_assert(r.stages[0].host > 0 && r.host_per_node == r.stages[0].host * 8);
  cr_assert(r.host_fits);
  mem_report_clear(&r);
  /* 2 TiB of host memory per DGX is not enough for 7.5B x 16 bytes x 8 GPUs unsharded? it is;
   * a 1 GiB host is not */
  const char *small[] = {"node.count=1", "parallel.zero=2", "parallel.offload=cpu",
                         "node.host_memory=1GiB", NULL};
  r = estimate("dgx-a100", "t5-3b-deepspeed", small, true);
  cr_assert_not(r.host_fits);
  mem_report_clear(&r);
}

Test(memory, cpu_offload_frees_the_gradient_and_optimizer_partitions_by_hand)
{
  /* ZeRO-2 over 64 GPUs, 7.5B fp16 parameters: 2 bytes of weights stay whole on the GPU; the
   * 2-byte gradient and 12-byte Adam partitions (7.5e9 x 14 / 64) move to host memory */
  const char *gpu[] = {"node.count=8", "parallel.zero=2", NULL};
  const char *cpu[] = {"node.count=8", "parallel.zero=2", "parallel.offload=cpu", NULL};
  mem_report rg = estimate("dgx-a100", "zero-7.5b", gpu, true);
  mem_report rc = estimate("dgx-a100", "zero-7.5b", cpu, true);
  double freed = 7.5e9 * 14 / 64;
  cr_assert_float_eq(rg.stages[0].model_states - rc.stages[0].model_states, freed, 1);
  cr_assert_float_eq(rc.stages[0].model_states, 15e9, 1);
  cr_assert_float_eq(rc.stages[0].host, freed, 1);
  mem_report_clear(&rg);
  mem_report_clear(&rc);
}

Test(memory, bad_combinations_are_clear_errors)
{
  const char *nvme[] = {"parallel.zero=3", "parallel.offload=nvme", "node.nvme=0", NULL};
  g_autofree char *m1 = th_load_error("dgx-a100", "zero-7.5b", nvme);
  cr_assert(m1 && strstr(m1, "parallel.offload = nvme, but the cluster's nodes have no NVMe"), "%s", m1);
  const char *nozero[] = {"parallel.zero=0", "parallel.offload=cpu", NULL};
  g_autofree char *m2 = th_load_error("dgx-a100", "zero-7.5b", nozero);
  cr_assert(m2 && strstr(m2, "parallel.offload = cpu needs ZeRO"), "%s", m2);
  const char *params[] = {"parallel.zero=2", "parallel.offload=cpu", "parallel.offload_params=true", NULL};
  g_autofree char *m3 = th_load_error("dgx-a100", "zero-7.5b", params);
  cr_assert(m3 && strstr(m3, "parallel.offload_params needs parallel.zero 3"), "%s", m3);
}

Test(memory, korthikanti_activations_per_layer)
{
  /* GPT-3 175B, s=2048, b=1, t=8: per layer 552 MiB (tensor parallel) and 102 MiB (sequence
   * parallel + selective), Korthikanti et al. Table 2 as worked out in the data's README */
  const char *tp[] = {"node.count=8", "training.recompute=none", "parallel.sequence_parallel=false", NULL};
  mem_report r = estimate("dgx-a100", "megatron-175b", tp, false);
  /* stage 1 holds 12 blocks; interleaved 1F1B runs 2 x 6 + 2 x 8 warm-up chunks there and one
   * more before its first backward (Megatron-LM's num_warmup_microbatches): 29 of 3 chunks */
  double per_layer = r.stages[1].activations_per_micro_batch / 12;
  cr_assert(fabs(per_layer / (552.0 * 1048576) - 1) < 0.01, "%g MiB", per_layer / 1048576);
  cr_assert_float_eq(r.stages[1].inflight, 29.0 / 3, 1e-12);
  mem_report_clear(&r);
  const char *ss[] = {"node.count=8", NULL};
  r = estimate("dgx-a100", "megatron-175b", ss, false);
  per_layer = r.stages[1].activations_per_micro_batch / 12;
  cr_assert(fabs(per_layer / (102.0 * 1048576) - 1) < 0.01, "%g MiB", per_layer / 1048576);
  /* the first stage holds the most */
  for (int s = 1; s < r.nstages; s++)
    cr_assert(r.stages[0].activations >= r.stages[s].activations);
  mem_report_clear(&r);
}

/* The same layer trained in fp8: Transformer Engine keeps the linear layers' inputs in fp8 for
 * wgrad, so the two norms' outputs (2 sbh each, replicated) and the second MLP GEMM's input
 * (8 sbh / t) halve, and the attention output is kept once more in fp8 (+1 sbh / t): sbh (10 -
 * 2 + (24 - 4 + 1) / t + 5as/(ht)) = 20.625 sbh at t 8, against 23 sbh in bf16. */
Test(memory, fp8_keeps_the_linear_layers_inputs_in_8_bits)
{
  const char *tp[] = {"node.count=8", "training.recompute=none", "parallel.sequence_parallel=false",
                      "training.dtype=fp8", NULL};
  mem_report r = estimate("dgx-h100", "megatron-175b", tp, false);
  double per_layer = r.stages[1].activations_per_micro_batch / 12;
  double sbh = 2048.0 * 12288;
  cr_assert(fabs(per_layer / (20.625 * sbh) - 1) < 0.01, "%g sbh", per_layer / sbh);
  mem_report_clear(&r);
}

Test(memory, recomputation_and_schedules_order_as_expected)
{
  const char *none[] = {"node.count=8", "training.recompute=none", NULL};
  const char *sel[] = {"node.count=8", "training.recompute=selective", NULL};
  const char *full[] = {"node.count=8", "training.recompute=full", NULL};
  const char *gpipe[] = {"node.count=8", "parallel.schedule=gpipe", NULL};
  mem_report a = estimate("dgx-a100", "megatron-175b", none, false);
  mem_report b = estimate("dgx-a100", "megatron-175b", sel, false);
  mem_report c = estimate("dgx-a100", "megatron-175b", full, false);
  mem_report g = estimate("dgx-a100", "megatron-175b", gpipe, false);
  cr_assert(a.stages[0].activations > b.stages[0].activations);
  cr_assert(b.stages[0].activations > c.stages[0].activations);
  cr_assert(c.stages[0].extra[MEM_RECOMPUTE] > 0);
  cr_assert_float_eq(g.stages[0].inflight, 64, 0); /* GPipe keeps every micro-batch */
  cr_assert(g.stages[0].activations > b.stages[0].activations);
  mem_report_clear(&a), mem_report_clear(&b), mem_report_clear(&c), mem_report_clear(&g);
}

static double worst_total(int micro_batch, int global)
{
  char mb[32], gb[32];
  g_snprintf(mb, sizeof mb, "training.micro_batch=%d", micro_batch);
  g_snprintf(gb, sizeof gb, "training.global_batch=%d", global);
  const char *sets[] = {"node.count=1", "parallel.dp=8", gb, mb, NULL};
  mem_report r = estimate("dgx-a100", "gpt3-1.3b-dp", sets, false);
  double t = mem_worst(&r)->total;
  mem_report_clear(&r);
  return t;
}

Test(memory, largest_micro_batch_is_the_largest_that_fits)
{
  const char *sets[] = {"node.count=1", "parallel.dp=8", "training.global_batch=512", NULL};
  mem_report r = estimate("dgx-a100", "gpt3-1.3b-dp", sets, false);
  int mb = r.max_micro_batch;
  double cap = r.capacity;
  mem_report_clear(&r);
  cr_assert(mb >= 1 && mb < 64, "max micro-batch %d", mb);
  int global = 8 * mb * (mb + 1);
  cr_assert(worst_total(mb, global) <= cap);
  cr_assert(worst_total(mb + 1, global) > cap);
}

Test(memory, kv_cache_per_token)
{
  cfg_model m = {.kind = CFG_MODEL_TRANSFORMER, .layers = 80, .hidden = 8192, .heads = 64, .kv_heads = 8};
  /* Llama-2/3 70B: 2 x 80 layers x 8 kv heads x 128 x 2 bytes = 320 KiB per token */
  cr_assert_float_eq(mem_kv_bytes_per_token(&m, CFG_BF16, 1), 327680, 0);
  cr_assert_float_eq(mem_kv_bytes_per_token(&m, CFG_BF16, 8), 40960, 0);
  cr_assert_float_eq(mem_kv_bytes_per_token(&m, CFG_FP8, 8), 20480, 0);
  /* more GPUs than kv heads: each still holds a whole head */
  cr_assert_float_eq(mem_kv_bytes_per_token(&m, CFG_BF16, 16), 40960, 0);
}

Test(memory, run_reports_out_of_memory_as_a_result)
{
  th_proc p = th_dlsim("run -c v100-edr -w resnet50-horovod --set gpu.memory=4GiB --json");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert(strstr(p.out, "\"fits\":\tfalse"), "%s", p.out);
  th_proc_clear(&p);
}

/* Llama 2 7B's weights at NVFP4: each linear layer's parameter 4 bits plus an E4M3 scale per 16
 * (0.5625 bytes); its KV cache at fp8 (ModelOpt's FP4 checkpoints keep one). */
Test(memory, nvfp4_weights_with_block_scales_by_hand)
{
  double bytes[2];
  const char *dtypes[] = {"serving.dtype=fp16", "serving.dtype=nvfp4"};
  for (int i = 0; i < 2; i++) {
    const char *sets[] = {dtypes[i], NULL};
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    cr_assert(th_load("dgx-b200", "llama2-7b-vllm", sets, &c, &w));
    srv_cost *cost = NULL;
    GError *err = NULL;
    cr_assert(srv_cost_new(c, w, &cost, &err), "%s", err ? err->message : "");
    bytes[i] = srv_weight_bytes(cost);
    if (i == 1)
      cr_expect_eq(w->serving.kv_dtype, CFG_FP8);
    srv_cost_free(cost);
    cfg_cluster_free(c);
    cfg_workload_free(w);
  }
  /* 32 layers of 4 h^2 attention and 3 h f MLP weights (h 4096, f 11008) at 0.5625 bytes; the
   * norms (2 h per layer) and the embedding table (32000 x h) stay 16-bit, as in ModelOpt's
   * checkpoints */
  double h = 4096, f = 11008, linear = 32 * (4 * h * h + 3 * h * f), kept = 32 * 2 * h + 32000 * h;
  cr_expect(fabs(bytes[1] - (linear * 0.5625 + kept * 2)) < 1, "%.0f", bytes[1]);
  cr_expect(fabs(bytes[0] - (linear + kept) * 2) < 1, "%.0f", bytes[0]);
}

/* Zero-bubble schedules on GPT-3 175B (PP 8, 64 micro-batches): ZB-H1's stage s holds p - s
 * micro-batches awaiting B and s awaiting W (32/34 of theirs; Qi et al. Sec. 2.3); ZB-V every
 * rank p, its two chunks s and 2p - 1 - s (rank 0 the embedding and the output layer); DualPipe
 * p + 1 and a second copy of the parameters (DeepSeek-V3 report, Table 2). */
Test(memory, zero_bubble_schedules_hold_their_papers_micro_batches)
{
  const char *one[] = {"node.count=8", "parallel.virtual_stages=1", "parallel.schedule=1f1b", NULL};
  const char *h1[] = {"node.count=8", "parallel.virtual_stages=1", "parallel.schedule=zb-h1", NULL};
  const char *vee[] = {"node.count=8", "parallel.virtual_stages=2", "parallel.schedule=zb-v", NULL};
  const char *dual[] = {"node.count=8", "parallel.virtual_stages=1", "parallel.schedule=dualpipe",
                        NULL};
  mem_report a = estimate("dgx-a100", "megatron-175b", one, false);
  mem_report h = estimate("dgx-a100", "megatron-175b", h1, false);
  mem_report v = estimate("dgx-a100", "megatron-175b", vee, false);
  mem_report d = estimate("dgx-a100", "megatron-175b", dual, false);
  for (int s = 0; s < 8; s++) {
    cr_assert_float_eq(h.stages[s].inflight, (8 - s) + s * 32.0 / 34, 1e-9);
    cr_assert_float_eq(v.stages[s].inflight, 8, 0);
    cr_assert_float_eq(d.stages[s].inflight, 9, 0);
    /* the twin stages' parameters together (the end ranks without a tied copy of the embedding) */
    double twins = a.stages[s].params + a.stages[7 - s].params;
    cr_assert(fabs(d.stages[s].params - twins) <= 0.02 * twins, "stage %d: %g vs %g", s,
              d.stages[s].params, twins);
  }
  cr_assert_float_eq(h.stages[0].activations, a.stages[0].activations, 1e-6 * a.stages[0].activations);
  /* ZB-V's rank 0: the embedding and the output layer, half the blocks of a stage on each side */
  cr_assert_float_eq(v.stages[0].params, a.stages[0].params, 0.01 * a.stages[0].params);
  cr_assert(v.stages[7].params < a.stages[7].params);
  mem_report_clear(&a), mem_report_clear(&h), mem_report_clear(&v), mem_report_clear(&d);
}

/* torchtitan's Llama 3.1 8B on 8 GPUs, per-op selective checkpointing and eager ops (local
 * batch 2 of 8192 tokens, T = 16384): 32 blocks keep 63616 bytes a token each
 * (test_roles.c), the output layer its fp32 log-probabilities (vocabulary 128256) and the
 * final norm's bf16 input, the embedding a byte a value; and the largest working set of
 * backward is the eager loss's two fp32 gradients of the logits (16 GB), not a recomputed
 * block's. torchtitan reported 82.4 GiB reserved on this run (validation/torchtitan). */
Test(memory, torchtitan_op_checkpointing_and_eager_loss_by_hand)
{
  const char *sets[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16",
                        "gpu.memory=96GiB", "model.rotary=unfused", NULL};
  mem_report r = estimate("dgx-h100", "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", sets, false);
  double T = 16384, h = 4096, V = 128256;
  double act = 32 * T * 63616 + T * V * 4 + T * h * 2 + T * h;
  cr_assert_float_eq(r.stages[0].activations, act, 1);
  cr_assert_float_eq(r.stages[0].extra[MEM_RECOMPUTE], 8 * T * V, 1);
  cr_assert(r.stages[0].total < 96.0 * 1073741824, "%g GiB", r.stages[0].total / 1073741824);
  mem_report_clear(&r);
}

/* FP8 parameters keep each weight in one byte (the fp32 master copy is the optimizer's 12): a
 * 16-bit weight's 2 bytes become 1, gradients and optimizer states unchanged. */
Test(memory, fp8_parameters_take_one_byte_a_weight)
{
  cfg_training t = {.dtype = CFG_FP8, .grad_dtype = CFG_FP32, .optimizer = CFG_OPT_ADAM};
  wl_state_bytes two = wl_state_bytes_per_param(&t);
  t.fp8_params = 1;
  wl_state_bytes one = wl_state_bytes_per_param(&t);
  cr_expect_eq(two.weights, 2);
  cr_expect_eq(one.weights, 1);
  cr_expect_eq(one.grads, two.grads);
  cr_expect_eq(one.optimizer, 12);
}

/* DeepSpeed's BF16 optimizer keeps the backward's bf16 gradients (2 bytes a parameter) beside
 * its fp32 buffer (4), both whole under ZeRO-1 (bf16_optimizer.py: zeros_like the flat weights;
 * the pipeline engine's clear_lp_grads=False): gradients take 3x the bf16 weights' bytes, where
 * fp32 main gradients alone take 2x. */
Test(memory, the_bf16_optimizer_keeps_bf16_gradients_beside_its_whole_fp32_buffer)
{
  const char *on[] = {"node.count=1", "parallel.dp=8", "parallel.zero=1",
                      "training.grad_accum_dtype=fp32", NULL};
  const char *off[] = {"node.count=1", "parallel.dp=8", "parallel.zero=1", NULL};
  mem_report a = estimate("dgx-h100", "gpt3-1.3b-dp", on, true);
  mem_report b = estimate("dgx-h100", "gpt3-1.3b-dp", off, true);
  cr_expect_float_eq(a.stages[0].grads, 3 * a.stages[0].params, 1);
  cr_expect_float_eq(b.stages[0].grads, 2 * b.stages[0].params, 1);
  cr_expect_float_eq(a.stages[0].optimizer, b.stages[0].optimizer, 1);
  mem_report_clear(&a);
  mem_report_clear(&b);
}

/* BigScience's 02-28 layout (hidden 13312, 82 layers, TP 4 x PP 12 x DP 8, BF16 optimizer):
 * stage 0 holds the embedding (V h / 4) and 6 blocks (3 h^2 + 4 h each: the TP shard of 12 h^2
 * and the norms whole), the last stage the same and the final norm (2 h). DeepSpeed casts the whole fp32 buffer to bf16 for the reduce: 2 bytes a
 * parameter of the stage, a segment of its own (no fragmentation on it); none when the reduce
 * runs in the buffer's own dtype or without the BF16 optimizer. */
Test(memory, the_bf16_optimizers_reduce_casts_the_whole_buffer_by_hand)
{
  const char *base[] = {"node.count=48", "model.hidden=13312", "model.layers=82", "model.heads=64",
                        "parallel.tp=4", "parallel.pp=12", "parallel.dp=8",
                        "training.micro_batch=2", NULL, NULL};
  const char *wl = "validation/a100_unseen/workloads/bloom-176b.yaml";
  double h = 13312, V = 250880, P0 = 6 * (3 * h * h + 4 * h) + V * h / 4;
  mem_report bf = estimate("dgx-a100", wl, base, false);
  base[8] = "training.grad_dtype=fp32";
  mem_report fp = estimate("dgx-a100", wl, base, false);
  base[8] = "training.grad_accum_dtype=none";
  mem_report none = estimate("dgx-a100", wl, base, false);
  cr_expect_float_eq(bf.stages[0].extra[MEM_GRAD_CAST], 2 * P0, 1);
  cr_expect_float_eq(bf.stages[11].extra[MEM_GRAD_CAST], 2 * (P0 + 2 * h), 1); /* tied copy */
  cr_expect_float_eq(bf.stages[0].total - fp.stages[0].total, 2 * P0, 1);
  cr_expect_eq(fp.stages[0].extra[MEM_GRAD_CAST], 0);
  cr_expect_eq(none.stages[0].extra[MEM_GRAD_CAST], 0);
  mem_report_clear(&bf), mem_report_clear(&fp), mem_report_clear(&none);
}

/* The same layout under DeepSpeed's pipeline engine (T = 2 x 2048 tokens a micro-batch, bf16):
 * stage 0 keeps its 12 micro-batches' outputs, a quarter each at TP 4; stage 5 its 7 and one
 * whole input more than it has in flight; the last stage that input and the fp32 logits of its
 * vocabulary shard (250880 / 4) in both its buffers. Megatron's engine keeps none of them. */
Test(memory, deepspeeds_pipeline_buffers_by_hand)
{
  const char *sets[] = {"node.count=48", "model.hidden=13312", "model.layers=82", "model.heads=64",
                        "parallel.tp=4", "parallel.pp=12", "parallel.dp=8",
                        "training.micro_batch=2", NULL, NULL};
  const char *wl = "validation/a100_unseen/workloads/bloom-176b.yaml";
  double T = 4096, h = 13312, V = 250880, out = T * h * 2;
  mem_report ds = estimate("dgx-a100", wl, sets, false);
  sets[8] = "parallel.pipeline_engine=megatron";
  mem_report mg = estimate("dgx-a100", wl, sets, false);
  cr_expect_float_eq(ds.stages[0].extra[MEM_PIPE_BUFFERS], 12 * out / 4, 1);
  cr_expect_float_eq(ds.stages[5].extra[MEM_PIPE_BUFFERS], 7 * out / 4 + out, 1);
  cr_expect_float_eq(ds.stages[11].extra[MEM_PIPE_BUFFERS], out + 2 * T * V / 4 * 4, 1);
  for (int s = 0; s < 12; s++)
    cr_expect_eq(mg.stages[s].extra[MEM_PIPE_BUFFERS], 0, "stage %d", s);
  mem_report_clear(&ds), mem_report_clear(&mg);
}

/* NCCL communicators, 256 MiB each by default: Megatron's engine counts one a parallel
 * dimension (DP, TP, PP: 3 here). DeepSpeed's pipeline engine also has its slice group (TP > 1),
 * the model group of the gradient norm, a pair per neighbouring stage and, on the first and last
 * stage, the tied embedding's group: 7 on stages 0, 5 and 11; at TP 1 without tied
 * embeddings, 4 on stage 0 (DP, PP, model, one neighbour) and 5 on stage 5 (two). */
Test(memory, deepspeeds_pipeline_communicators_by_hand)
{
  const char *sets[] = {"node.count=48", "model.hidden=13312", "model.layers=82", "model.heads=64",
                        "parallel.tp=4", "parallel.pp=12", "parallel.dp=8",
                        "training.micro_batch=2", NULL, NULL, NULL, NULL};
  const char *wl = "validation/a100_unseen/workloads/bloom-176b.yaml";
  double comm = 256.0 * 1048576;
  mem_report ds = estimate("dgx-a100", wl, sets, false);
  sets[8] = "parallel.pipeline_engine=megatron";
  mem_report mg = estimate("dgx-a100", wl, sets, false);
  sets[0] = "node.count=12";
  sets[8] = "parallel.tp=1", sets[9] = "model.tied_embeddings=false";
  mem_report t1 = estimate("dgx-a100", wl, sets, false);
  int stages[] = {0, 5, 11};
  for (int i = 0; i < 3; i++) {
    cr_expect_float_eq(ds.stages[stages[i]].extra[MEM_NCCL], 7 * comm, 1, "stage %d", stages[i]);
    cr_expect_float_eq(mg.stages[stages[i]].extra[MEM_NCCL], 3 * comm, 1, "stage %d", stages[i]);
  }
  cr_expect_float_eq(t1.stages[0].extra[MEM_NCCL], 4 * comm, 1);
  cr_expect_float_eq(t1.stages[5].extra[MEM_NCCL], 5 * comm, 1);
  mem_report_clear(&ds), mem_report_clear(&mg), mem_report_clear(&t1);
}

/* torchtitan with pipeline parallelism keeps a stage's FSDP2 units whole for the step
 * (parallelize_llama.py @ 9dec370: reshard_after_forward=False with PP) and accumulates whole
 * fp32 gradients until the last micro-batch's reduce-scatter (torch.distributed.pipelining's
 * backward_maybe_with_nosync). Llama 3 8B, PP 2 x FSDP 4, stage 0's P parameters (counted from
 * its optimizer shard, 12 bytes a parameter over 4 ranks): bf16 weights 2P/4 + 2P, fp32
 * gradients 4P/4 + 4P, optimizer 12P/4 unchanged, and no per-layer gather on top. */
Test(memory, torchtitan_pipeline_stages_keep_whole_weights_and_gradients_by_hand)
{
  const char *sets[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2",
                        "training.global_batch=16", NULL};
  mem_report r = estimate("dgx-h100", "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", sets, false);
  const mem_stage *s = &r.stages[0];
  double P = s->optimizer * 4 / 12;
  /* the embedding (128256 x 4096) and 16 of 32 blocks of about 218.1 M parameters */
  cr_expect(fabs(P - 4.0151e9) < 1e6, "P %g", P);
  cr_expect_float_eq(s->params, 2 * P / 4 + 2 * P, 1);
  cr_expect_float_eq(s->grads, 4 * P / 4 + 4 * P, 1);
  cr_expect_float_eq(s->unsharded, 6 * P, 1);
  cr_expect_eq(s->extra[MEM_ZERO3_LIVE], 0);
  mem_report_clear(&r);
}

/* The rule is the profile's (torchtitan's says parallel.pp_reshard_after_forward: false): FSDP
 * alone, or the fsdp profile's pipeline with ZeRO-3, keep the shards and gather one layer at a
 * time. */
Test(memory, only_torchtitan_pipeline_stages_keep_whole_states)
{
  const char *alone[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16", NULL};
  const char *other[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2",
                         "training.global_batch=16", "training.framework=fsdp", NULL};
  const char *const *cases[] = {alone, other};
  for (int i = 0; i < 2; i++) {
    mem_report r = estimate("dgx-h100", "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", cases[i], false);
    const mem_stage *s = &r.stages[0];
    cr_expect_eq(s->unsharded, 0, "case %d", i);
    cr_expect_float_eq(s->grads, s->optimizer / 3, 1, "case %d", i);
    cr_expect(s->extra[MEM_ZERO3_LIVE] > 0, "case %d", i);
    mem_report_clear(&r);
  }
}

/* FSDP2 does not reshard its root unit after forward (_fsdp_state.py, _lazy_init), and
 * torchtitan's root owns the embedding, final norm and output projection: Llama 3 8B, FSDP 8,
 * 2 x 128256 x 4096 + 2 x 4096 parameters gathered in bf16, even with the float8 all-gather
 * (torchao's Float8 converts neither). While the eager fp32 loss runs backward (the larger
 * moment here) no block is gathered; with a vocabulary of 1024 a block's backward is the larger,
 * and it holds its unit and the next one prefetched: 2 x 218,120,192 parameters in bf16. The
 * fsdp profile keeps DeepSpeed's count: the largest layer (the output projection with the final
 * norm) and memory.zero3_prefetch. */
Test(memory, torchtitan_fsdp_root_unit_stays_gathered_by_hand)
{
  const char *loss[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16", NULL};
  const char *fp8[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16",
                       "training.dtype=fp8", "training.fp8_params=true", NULL};
  const char *small[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16",
                         "model.vocab=1024", NULL};
  const char *fsdp[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16",
                        "training.framework=fsdp", NULL};
  const char *wl = "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml";
  mem_report a = estimate("dgx-h100", wl, loss, false), b = estimate("dgx-h100", wl, fp8, false);
  mem_report c = estimate("dgx-h100", wl, small, false), d = estimate("dgx-h100", wl, fsdp, false);
  double block = 218120192.0, root = 2.0 * 128256 * 4096 + 2 * 4096;
  cr_expect_float_eq(a.stages[0].extra[MEM_ZERO3_LIVE], 2 * root, 1);
  cr_expect_float_eq(b.stages[0].extra[MEM_ZERO3_LIVE], 2 * root, 1);
  double small_root = 2.0 * 1024 * 4096 + 2 * 4096;
  cr_expect_float_eq(c.stages[0].extra[MEM_ZERO3_LIVE], 2 * small_root + 2 * 2 * block, 1);
  cr_expect_float_eq(d.stages[0].extra[MEM_ZERO3_LIVE], 2.0 * (128256 * 4096 + 2 * 4096) + 1e8, 1);
  mem_report_clear(&a), mem_report_clear(&b), mem_report_clear(&c), mem_report_clear(&d);
}

/* A pipeline stage kept whole gathers its embedding or output projection in bf16 even with the
 * float8 all-gather: Llama 3 8B, PP 2 x FSDP 4, fp8 parameters, stage 0's P parameters of
 * which the embedding's 128256 x 4096 take 2 bytes gathered and the blocks' 1. */
Test(memory, pipeline_stage_gathers_its_embedding_in_bf16_under_fp8_params)
{
  const char *sets[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2", "training.global_batch=16",
                        "training.dtype=fp8", "training.fp8_params=true", NULL};
  mem_report r = estimate("dgx-h100", "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", sets, false);
  const mem_stage *s = &r.stages[0];
  double P = s->optimizer * 4 / 12, emb = 128256.0 * 4096;
  cr_expect_float_eq(s->params, P / 4 + P + emb, 1, "%g", s->params);
  mem_report_clear(&r);
}

/* The whole stage's states are base memory of the engines' programs (they allocate only the
 * shards): the timeline's peak is still the closed form's. A small vocabulary keeps the output
 * stage's eager fp32 loss, which this timeline does not hold, from setting the peak. */
Test(memory, torchtitan_pipeline_timeline_peak_matches_closed_form)
{
  char *sets[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2", "model.layers=4",
                  "model.vocab=1024", "training.global_batch=16", NULL};
  sim_options o = {.engine = ENG_DES, .trace = true};
  sim_result run;
  GError *err = NULL;
  cr_assert(sim_run_files("dgx-h100", "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", sets,
                          &o, &run, &err), "%s", err ? err->message : "");
  const mem_stage *worst = mem_worst(&run.memory);
  cr_assert(worst->unsharded > 0);
  cr_assert_float_eq(run.eng.peak_memory, worst->total, worst->total * 1e-9, "%g %g",
                     run.eng.peak_memory, worst->total);
  sim_result_clear(&run);
}

/* torchtitan's loss_parallel (on with TP) runs DTensor's cross-entropy handlers, whose backward
 * holds three fp32 copies of the vocabulary shard beside the saved log-probabilities (zeros,
 * their sum with exp, the product: torch/distributed/tensor/parallel/loss.py) where aten's
 * eager loss holds two, and its output projection keeps its whole all-gathered bf16 input.
 * Llama 3 8B, TP 2, micro-batch 2 x 8192 tokens, vocabulary 128256, hidden 4096:
 * 3 x 4 bytes x 16384 x 64128 + 2 bytes x 16384 x 4096 = 12.74 GB; the same run under another
 * framework keeps the two fp32 copies only. */
Test(memory, torchtitan_loss_parallel_backward_holds_three_fp32_shards_by_hand)
{
  const char *tt[] = {"node.count=1", "parallel.dp=4", "parallel.tp=2", "model.seq_len=8192",
                      "training.eager_loss=true", NULL};
  const char *fsdp[] = {"node.count=1", "parallel.dp=4", "parallel.tp=2", "model.seq_len=8192",
                        "training.eager_loss=true", "training.framework=fsdp", NULL};
  const char *wl = "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml";
  mem_report a = estimate("dgx-h100", wl, tt, false), b = estimate("dgx-h100", wl, fsdp, false);
  double shard = 4.0 * 16384 * 128256 / 2;
  cr_expect_float_eq(a.stages[0].extra[MEM_RECOMPUTE], 3 * shard + 2.0 * 16384 * 4096, 1, "%g",
                     a.stages[0].extra[MEM_RECOMPUTE]);
  cr_expect_float_eq(b.stages[0].extra[MEM_RECOMPUTE], 2 * shard, 1, "%g",
                     b.stages[0].extra[MEM_RECOMPUTE]);
  mem_report_clear(&a);
  mem_report_clear(&b);
}

/* The two rules are keys a profile states, not the name torchtitan: a user's own profile file
 * with parallel.pp_reshard_after_forward false and training.loss_parallel true gets the
 * torchtitan numbers above (6P of whole states on stage 0; three fp32 vocabulary shards and the
 * gathered head input), and the fsdp profile with the keys --set gets them too. */
Test(memory, custom_profile_states_the_pipeline_and_loss_rules)
{
  g_autofree char *dir = g_dir_make_tmp("dlsim-fw-XXXXXX", NULL);
  g_autofree char *fw = g_build_filename(dir, "myfsdp.yaml", NULL);
  cr_assert(g_file_set_contents(fw,
                                "training:\n  grad_dtype: fp32\n  loss_parallel: true\n"
                                "parallel:\n  zero: 3\n  pp_reshard_after_forward: false\n",
                                -1, NULL));
  g_autofree char *set_fw = g_strdup_printf("training.framework=%s", fw);
  const char *wl = "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml";
  const char *pp[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2", "training.global_batch=16",
                      set_fw, NULL};
  const char *pp_set[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2",
                          "training.global_batch=16", "training.framework=fsdp",
                          "parallel.pp_reshard_after_forward=false", NULL};
  const char *tp[] = {"node.count=1", "parallel.dp=4", "parallel.tp=2", "model.seq_len=8192",
                      "training.eager_loss=true", set_fw, NULL};
  const char *const *pps[] = {pp, pp_set};
  for (int i = 0; i < 2; i++) {
    mem_report r = estimate("dgx-h100", wl, pps[i], false);
    double P = r.stages[0].optimizer * 4 / 12;
    cr_expect_float_eq(r.stages[0].unsharded, 6 * P, 1, "case %d", i);
    cr_expect_eq(r.stages[0].extra[MEM_ZERO3_LIVE], 0, "case %d", i);
    mem_report_clear(&r);
  }
  mem_report t = estimate("dgx-h100", wl, tp, false);
  double shard = 4.0 * 16384 * 128256 / 2;
  cr_expect_float_eq(t.stages[0].extra[MEM_RECOMPUTE], 3 * shard + 2.0 * 16384 * 4096, 1, "%g",
                     t.stages[0].extra[MEM_RECOMPUTE]);
  mem_report_clear(&t);
  g_unlink(fw);
  g_rmdir(dir);
}

/* torch.distributed.pipelining (parallel.pipeline_engine: torch, torchtitan's) allocates a
 * receive buffer per micro-batch for each stage's input and its output's gradient, and keeps
 * every micro-batch's output until the next step (stage.py of torch 1963fc8). Llama 3 8B,
 * PP 2 x FSDP 4, 2 micro-batches of 2 x 8192 tokens, hidden 4096, 16-bit: stage 0 (both in
 * flight) holds 2 gradient buffers and its 2 outputs of 16384 x 4096 x 2 bytes; stage 1 (one in
 * flight) one input buffer beyond the saved input of the micro-batch in flight, the input
 * gradient of the micro-batch done, and both micro-batches' logits, 16384 x 128256 x 2 bytes
 * (no TP: not a shard). Megatron's engine: none. */
Test(memory, torch_pipeline_receive_buffers_and_kept_logits_by_hand)
{
  const char *sets[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2",
                        "training.global_batch=16", NULL, NULL};
  const char *wl = "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml";
  mem_report t = estimate("dgx-h100", wl, sets, false);
  double act = 16384.0 * 4096 * 2;
  cr_expect_float_eq(t.stages[0].inflight, 2, 1e-9);
  cr_expect_float_eq(t.stages[1].inflight, 1, 1e-9);
  cr_expect_float_eq(t.stages[0].extra[MEM_PIPE_BUFFERS], 4 * act, 1, "%g",
                     t.stages[0].extra[MEM_PIPE_BUFFERS]);
  cr_expect_float_eq(t.stages[1].extra[MEM_PIPE_BUFFERS], 2 * act + 2 * 16384.0 * 128256 * 2, 1, "%g",
                     t.stages[1].extra[MEM_PIPE_BUFFERS]);
  sets[4] = "parallel.pipeline_engine=megatron";
  mem_report m = estimate("dgx-h100", wl, sets, false);
  cr_expect_eq(m.stages[0].extra[MEM_PIPE_BUFFERS], 0);
  cr_expect_eq(m.stages[1].extra[MEM_PIPE_BUFFERS], 0);
  mem_report_clear(&t);
  mem_report_clear(&m);
}

/* `dlsim memory --json` names the busiest stage and its total (what torchtitan's maximum over the
 * GPUs is compared with): here the last, which holds both micro-batches' logits. */
Test(memory, json_peak_is_the_busiest_stage)
{
  const char *sets[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2",
                        "training.global_batch=16", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *wl = "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml";
  cr_assert(th_load("dgx-h100", wl, sets, &c, &w));
  mem_report r;
  cr_assert(mem_estimate(w, c, &(mem_options){0}, &r, NULL));
  cr_assert(r.stages[1].total > r.stages[0].total);
  cJSON *j = rep_memory_json(&(rep_memory){.cluster = c, .workload = w, .memory = &r});
  cr_expect_float_eq(cJSON_GetObjectItem(j, "peak_bytes")->valuedouble, r.stages[1].total, 1);
  cr_expect_eq(cJSON_GetObjectItem(j, "peak_stage")->valueint, 1);
  cJSON_Delete(j);
  mem_report_clear(&r);
  cfg_cluster_free(c);
  cfg_workload_free(w);
}

/* memory.unit_buckets (torchtitan's: FSDP2 reduce-scatters per block). Llama 3 8B on FSDP 8: a
 * block's bf16 gradients beside the previous block's fp32 reduce-scatter input, 6 bytes a
 * parameter of a block (4096 x 4096 x 2 + 4096 x 1024 x 2 + 3 x 4096 x 14336, and 4 x 4096 that
 * dlsim's blocks count for their norms = 218.12 M), and the output layer's bf16 gradients
 * (4096 x 128256 and 2 x 4096 for the final norm), which the root unit reduces last. Under PP with
 * the stage unsharded, only the block's bf16 gradients (stage 0 has no output layer). Without
 * the key: two memory.comm_bucket. */
Test(memory, fsdp2_unit_buckets_by_hand)
{
  const char *wl = "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml";
  const char *dp[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16", NULL, NULL};
  const char *pp[] = {"node.count=1", "parallel.dp=4", "parallel.pp=2",
                      "training.global_batch=16", NULL};
  double block = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 4 * 4096;
  mem_report a = estimate("dgx-h100", wl, dp, false), b = estimate("dgx-h100", wl, pp, false);
  double head = 4096.0 * 128256 + 2 * 4096;
  cr_expect_float_eq(a.stages[0].extra[MEM_COMM_BUCKETS], 6 * block + 2 * head, 1, "%g",
                     a.stages[0].extra[MEM_COMM_BUCKETS]);
  cr_expect_float_eq(b.stages[0].extra[MEM_COMM_BUCKETS], 2 * block, 1, "%g",
                     b.stages[0].extra[MEM_COMM_BUCKETS]);
  dp[3] = "memory.unit_buckets=false";
  mem_report c = estimate("dgx-h100", wl, dp, false);
  cr_expect_float_eq(c.stages[0].extra[MEM_COMM_BUCKETS], 2 * 25e6 * 1.048576, 1e3, "%g",
                     c.stages[0].extra[MEM_COMM_BUCKETS]);
  mem_report_clear(&a), mem_report_clear(&b), mem_report_clear(&c);
}

/* Without tensor parallelism torchtitan's loss is aten's: two fp32 copies, as before. */
Test(memory, torchtitan_without_tp_keeps_aten_loss_working_set)
{
  const char *sets[] = {"node.count=1", "parallel.dp=8", "model.seq_len=8192",
                        "training.eager_loss=true", NULL};
  mem_report r = estimate("dgx-h100", "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", sets, false);
  cr_expect_float_eq(r.stages[0].extra[MEM_RECOMPUTE], 2 * 4.0 * 16384 * 128256, 1, "%g",
                     r.stages[0].extra[MEM_RECOMPUTE]);
  mem_report_clear(&r);
}

/* PyTorch's CP ring holds its buffers through a block's backward, beside what recomputation
 * brought back: Llama 3 405B at TP 8 x CP 2, one sequence of 8192, recomputed in full, has
 * 4096 tokens of 16 query heads of 128 a GPU (E = 2^23 elements a tensor), and its ring 46
 * bytes an element (2 ranks' K, V gathered: 8; fp32 dQ, dK, dV: 12; fp32 dK, dV sent and
 * received: 16; the step's bf16 gradients: 6; the flash kernel's dQ accumulator: 4), which
 * Transformer Engine's ring (the default) does not hold. */
Test(memory, torch_cp_ring_buffers_join_the_backward_working_set)
{
  const char *te[] = {TH_405B_TP8_CP2, "training.recompute=full", NULL};
  const char *torch[] = {TH_405B_TP8_CP2, "training.recompute=full",
                         "parallel.cp_exchange=allgather", NULL};
  mem_report a = estimate("dgx-h100", "llama3-405b", te, false);
  mem_report b = estimate("dgx-h100", "llama3-405b", torch, false);
  double ring = 46.0 * 4096 * 16 * 128;
  double ra = a.stages[0].extra[MEM_RECOMPUTE], rb = b.stages[0].extra[MEM_RECOMPUTE];
  cr_assert(ra > 0);
  cr_assert_float_eq(rb - ra, ring, 1, "ring buffers: %g of %g", rb - ra, ring);
  mem_report_clear(&a);
  mem_report_clear(&b);
}

/* BigScience's 02-20 fp16 layout (hidden 13824, 80 layers, TP 8 x PP 10 x DP 4, DeepSpeed's
 * ZeRO-1 optimizer): stage 0 holds the embedding (V h / 8) and 8 blocks (1.5 h^2 + 4 h each).
 * At the step the optimizer flattens its partition's fp16 gradients (2 bytes a parameter of the
 * quarter) and casts them to fp32 (4): segments of their own, no fragmentation on them. Not with
 * the BF16 optimizer, ZeRO 0 or 3, or the key off. */
Test(memory, deepspeeds_zero1_step_copies_the_gradient_partition_by_hand)
{
  const char *sets[] = {"node.count=40", "model.hidden=13824", "model.layers=80", "model.heads=64",
                        "parallel.tp=8", "parallel.pp=10", "parallel.dp=4",
                        "training.micro_batch=1", "training.dtype=fp16",
                        "training.grad_dtype=fp16", "training.grad_accum_dtype=none", NULL, NULL};
  const char *wl = "validation/a100_unseen/workloads/bloom-176b.yaml";
  double h = 13824, V = 250880, P0 = 8 * (1.5 * h * h + 4 * h) + V * h / 8;
  /* as measured, then each variant set over it: the key off, ZeRO 0 and 3, the BF16 optimizer */
  const char *variant[] = {NULL, "memory.zero_step_grads=false", "parallel.zero=0",
                           "parallel.zero=3", "training.grad_accum_dtype=fp32"};
  double copies[5], total[5];
  for (int v = 0; v < 5; v++) {
    sets[11] = variant[v];
    mem_report r = estimate("dgx-a100", wl, sets, false);
    copies[v] = r.stages[0].extra[MEM_ZERO_STEP_GRADS];
    total[v] = r.stages[0].total;
    mem_report_clear(&r);
  }
  cr_expect_float_eq(copies[0], 6 * P0 / 4, 1);
  cr_expect_float_eq(total[0] - total[1], 6 * P0 / 4, 1);
  for (int v = 1; v < 5; v++)
    cr_expect_eq(copies[v], 0, "%s", variant[v]);
}
