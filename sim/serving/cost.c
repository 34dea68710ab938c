/* The cost of one engine iteration on one replica, in closed form over the batch's sums.
 *
 * The kernels are those of the training model's transformer layer (workloads/transformer.c):
 * the same GEMM shapes (fused QKV of width h + 2 kv d, output projection, gated or plain MLP),
 * FLOPs 2mnk, bytes of the operands each kernel reads and writes; attention FLOPs 4 d per query-
 * key pair per head, causal. What differs at inference: the weights are read once per iteration
 * whatever the batch (so decode is memory-bound), attention reads the KV cache of every
 * sequence, weights may be quantized (fp8 / int8 / int4, read at their width) and the KV cache
 * too, and only the sequences that sample a token compute logits. Each kernel is timed by
 * hw_kernel_time (roofline with the calibrated efficiencies and launch cost); each layer adds
 * two tensor-parallel all-reduces of its activations, timed by the collectives planner at
 * their (small) size; pipeline stages add a send of the activations between stages. */
#include "collectives/collectives.h"
#include "serving/serving_internal.h"
#include "workloads/workloads.h"

#include <math.h>
#include <string.h>

typedef struct {
  double gemm, attention, other, comm;
} srv_parts;

struct srv_cost {
  hw_cluster *hw;
  coll_planner *planner;
  int tp, pp, layers;
  int stage_layers;     /* layers of the most loaded stage */
  /* one GPU's share of a layer */
  double h, d, heads, kv_heads, qkv, ffn, gate, vocab;
  double wb, ab, kvb;   /* bytes per weight, activation and KV element */
  cfg_dtype gemm_dtype; /* tensor-core dtype of the GEMMs */
  cfg_dtype attn_dtype; /* attention runs in 16 bit */
  /* multi-head latent attention (DeepSeek-V2/V3): query and KV ranks, RoPE width; 0: none */
  double qr, kvr, rd;
  /* mixture of experts: tensor-parallel experts (ep 1) or whole experts over ep GPUs */
  bool moe;
  int experts, top_k, moe_every, moe_layers; /* moe_layers: of the most loaded stage */
  double expert_ffn, shared_ffn;
  bool moe_expand;      /* the engine gathers the copies by expert in a kernel of its own */
  double moe_tile;      /* rows of the grouped GEMM's tile, which each expert's rows fill */
  srv_ep ep;
  double host;          /* serving.iteration_overhead */
  double decode_bw, decode_half; /* serving.decode_attention_bandwidth / _half */
  double mha_bw, mha_half;       /* serving.decode_attention_mha_bandwidth / _half */
  bool kv_per_query_head;        /* serving.decode_attention_per_query_head */
  bool host_hidden;     /* the scheduler runs ahead: host work overlaps the GPUs' */
  double sm_reserved;   /* collectives.sm_reserved */
  int *tp_ranks;        /* the first replica's first stage */
  int pp_pair[2];
  GHashTable *comm_memo;/* (op, tokens) -> seconds */
  cfg_custom_ar custom_ar; /* the engine's own all-reduce kernels */
  /* speculative decoding: the proposer's cost model (on the same GPUs, one stage) */
  srv_cost *draft;
  int spec_k;
  double spec_weights;  /* its weights on one GPU */
};

static double srv_kernel(const srv_cost *c, cfg_kernel_class k, cfg_dtype dt, double flops,
                         double bytes, double inner)
{
  if (flops <= 0 && bytes <= 0)
    return 0;
  hw_kernel kern = {.kclass = k, .dtype = dt, .flops = flops, .bytes = bytes, .inner = inner};
  return hw_kernel_time(c->hw, &kern);
}

/* A GEMM of (tokens x k) by (k x n) weights: weights at their width, activations in 16 bit. */
static double srv_gemm(const srv_cost *c, double tokens, double k, double n, double wb)
{
  if (tokens <= 0)
    return 0;
  hw_kernel kern = {.kclass = CFG_KCLASS_GEMM, .dtype = c->gemm_dtype, .flops = 2 * tokens * k * n,
                    .bytes = wb * k * n + c->ab * tokens * (k + n), .inner = k, .rows = tokens,
                    .cols = n};
  return hw_kernel_time(c->hw, &kern);
}

static double srv_elementwise(const srv_cost *c, double elems, double rw)
{
  return elems > 0 ? srv_kernel(c, CFG_KCLASS_ELEMENTWISE, c->attn_dtype, 4 * elems,
                                c->ab * elems * rw, 0)
                   : 0;
}

/* A collective of n GPUs: the engine's own all-reduce where its size policy picks it (one
 * node's GPUs only), else NCCL's as the planner times it. */
static double srv_comm_time(const srv_cost *c, prog_coll op, int n, double bytes)
{
  srv_ar_kind k = op == PROG_COLL_ALLREDUCE ? srv_ar_choose(&c->custom_ar, n, bytes) : SRV_AR_NCCL;
  if (k != SRV_AR_NCCL && n <= hw_gpus_per_node(c->hw))
    return srv_ar_time(c->hw, k, n, bytes);
  const int *ranks = op == PROG_COLL_SENDRECV ? c->pp_pair : c->tp_ranks;
  const coll_schedule *s = coll_planner_get(c->planner, op, ranks, n,
                                            op == PROG_COLL_SENDRECV ? 1 : 0, bytes, NULL, NULL);
  return s ? s->time : 0;
}

/* A collective of the replica's tensor-parallel group (or the pipeline's send), memoised by its
 * size in tokens: an iteration has at most serving.max_tokens distinct sizes. */
static double srv_comm(srv_cost *c, prog_coll op, double tokens, double bytes_per_token)
{
  int n = op == PROG_COLL_SENDRECV ? 2 : c->tp;
  if (n <= 1 || tokens <= 0)
    return 0;
  gint64 key = (gint64)op << 40 | (gint64)tokens;
  gpointer hit = g_hash_table_lookup(c->comm_memo, &key);
  if (hit)
    return *(double *)hit;
  double t = srv_comm_time(c, op, n, tokens * bytes_per_token);
  gint64 *k = g_new(gint64, 1);
  double *v = g_new(double, 1);
  *k = key;
  *v = t;
  g_hash_table_insert(c->comm_memo, k, v);
  return t;
}

/* The feed-forward part of a dense layer. */
static void srv_mlp_dense(const srv_cost *c, double T, double ffn, srv_parts *p)
{
  p->gemm += srv_gemm(c, T, c->h, c->gate * ffn, c->wb) + srv_gemm(c, T, ffn, c->h, c->wb);
  p->other += srv_elementwise(c, T * ffn, c->gate + 1);
}

/* The router of T tokens (16 bit, every expert's logit). */
static double srv_router(const srv_cost *c, double T)
{
  double E = c->experts;
  return srv_kernel(c, CFG_KCLASS_GEMM, c->attn_dtype, 2 * T * c->h * E,
                    2 * c->h * E + c->ab * T * (c->h + E), c->h);
}

/* Rows a grouped GEMM computes for `routed` copies spread over `touched` experts: each expert's
 * rows run in whole tiles of the engine's tile height, so a decode batch with a few copies per
 * expert pays for a whole tile each. */
static double srv_grouped_rows(const srv_cost *c, double routed, double touched)
{
  if (routed <= 0 || touched <= 0)
    return 0;
  return touched * c->moe_tile * ceil(routed / touched / c->moe_tile - 1e-9);
}

/* The routed experts' GEMMs over `routed` token copies, reading the weights of the `touched`
 * experts that receive one; returns their time. */
static double srv_experts(const srv_cost *c, double routed, double touched, srv_parts *p)
{
  double ef = c->expert_ffn, rows = srv_grouped_rows(c, routed, touched);
  double t = srv_kernel(c, CFG_KCLASS_GEMM, c->gemm_dtype, 2 * rows * c->h * c->gate * ef,
                        c->wb * touched * c->h * c->gate * ef +
                            c->ab * routed * (c->h + c->gate * ef),
                        c->h) +
             srv_kernel(c, CFG_KCLASS_GEMM, c->gemm_dtype, 2 * rows * ef * c->h,
                        c->wb * touched * ef * c->h + c->ab * routed * (ef + c->h), ef);
  p->gemm += t;
  p->other += srv_elementwise(c, routed * ef, c->gate + 1);
  return t;
}

/* The MoE layer's own memory-bound kernels around the grouped GEMMs. TensorRT-LLM's MoE plugin
 * (runMoe, cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu @03cff08f) launches the
 * softmax and top-k over the tokens' fp32 logits, a sort of the copies' (expert, row) pairs
 * (CUB's radix sort: histogram, scan, one sweep) and the experts' first-row offsets, the gather
 * of the copies by expert (expandInputRows: each copy's hidden state read and written), and the
 * weighted sum back in token order (finalizeMoeRouting: every copy read, each token written).
 * vLLM's and SGLang's fused_moe (vllm/model_executor/layers/fused_moe/fused_moe.py @13cb3e44)
 * launch top-k softmax, one moe_align_block_size, gather the rows inside the Triton GEMM (no
 * gather kernel) and reduce the copies in moe_sum. The copies carry the whole hidden size on
 * every tensor-parallel GPU (TP splits the experts' width, not the tokens): this part does not
 * shrink with TP. */
static void srv_moe_routing(const srv_cost *c, double T, double copies, srv_parts *p)
{
  if (T <= 0)
    return;
  double E = c->experts, h = c->h, index_bytes = 16 * copies;
  int index_launches = c->moe_expand ? 4 : 1;
  p->other += srv_kernel(c, CFG_KCLASS_ELEMENTWISE, CFG_FP32, 8 * T * E, 4 * T * E + 8 * copies, 0);
  p->other += index_launches * srv_kernel(c, CFG_KCLASS_ELEMENTWISE, CFG_FP32, 0,
                                          index_bytes / index_launches, 0);
  if (c->moe_expand)
    p->other += srv_kernel(c, CFG_KCLASS_ELEMENTWISE, c->attn_dtype, 0, 2 * c->ab * copies * h, 0);
  p->other += srv_kernel(c, CFG_KCLASS_ELEMENTWISE, c->attn_dtype, 2 * copies * h,
                         c->ab * (copies + T) * h, 0);
}

/* The feed-forward part of a layer with experts: each token goes to top_k of the experts; the
 * weights of every expert that receives a token are read (with uniform routing, an expected
 * E (1 - (1 - k/E)^T) of them), plus the router and any shared experts. */
static void srv_mlp_moe(const srv_cost *c, double T, srv_parts *p)
{
  double E = c->experts, k = c->top_k;
  p->gemm += srv_router(c, T);
  srv_moe_routing(c, T, T * k, p);
  srv_experts(c, T * k, E * (1 - pow(1 - k / E, T)), p);
  if (c->shared_ffn > 0)
    srv_mlp_dense(c, T, c->shared_ffn, p);
}

/* The same under wide expert parallelism, on the busiest GPU: it routes its T / tp tokens and
 * runs `load` times the mean of the group's copies on its experts / ep whole experts (each
 * copy lands on one of them: e (1 - (1 - 1/e)^copies) are read). Shared experts run on the
 * DP rank's tokens, split like attention. Returns the routed experts' time. */
static double srv_mlp_ep(srv_cost *c, double T, srv_parts *p)
{
  double t = T / c->tp, e = c->ep.experts;
  double copies = t * c->top_k * srv_ep_load(&c->ep, t);
  p->gemm += srv_router(c, t);
  double experts = srv_experts(c, copies, e * (1 - pow(1 - 1 / e, copies)), p);
  if (c->shared_ffn > 0)
    srv_mlp_dense(c, T, c->shared_ffn, p);
  return experts;
}

/* Bytes of one token's KV cache in one layer on one GPU: K and V of its KV heads, or MLA's
 * compressed latent and RoPE key (one per token, the same on every tensor-parallel GPU). */
static double srv_kv_token_bytes(const srv_cost *c)
{
  return c->kvr > 0 ? (c->kvr + c->rd) * c->kvb : 2 * c->kv_heads * c->d * c->kvb;
}

/* The query, key and value projections: fused QKV, or MLA's down-projections (whole on every
 * GPU) and up-projections of its heads (at decode the key/value up-projection is absorbed into
 * the query and output: the same weights and FLOPs). */
static void srv_qkv(const srv_cost *c, double T, srv_parts *p)
{
  if (c->kvr <= 0) {
    p->gemm += srv_gemm(c, T, c->h, c->qkv, c->wb);
    return;
  }
  p->gemm += srv_gemm(c, T, c->h, c->qr + c->kvr + c->rd, c->wb);
  p->gemm += srv_gemm(c, T, c->qr, c->heads * (c->d + c->rd), c->wb);
  p->gemm += srv_gemm(c, T, c->kvr, 2 * c->heads * c->d, c->wb);
}

/* The (sequence, KV head) items a decode attention kernel streams at once: one per KV head of
 * every decoding sequence (MLA: one latent per sequence). A kernel short of items splits each
 * one's keys in chunks of 256 (flash-decoding), up to `target` items; with `fa_splits`, as
 * FlashAttention's num_splits_heuristic (flash_api.cpp), not once the items fill 0.8 of the
 * SMs. */
static double srv_decode_items(const srv_cost *c, const srv_batch *b, double target,
                               bool fa_splits)
{
  double heads = c->kvr > 0 ? 1 : c->kv_heads;
  double items = b->decodes * heads;
  if (fa_splits && items >= 0.8 * hw_config(c->hw)->gpu.sms)
    return items;
  double chunks = heads * MAX(b->decode_kv / 256, b->decodes);
  return MAX(items, MIN(chunks, target));
}

/* The engine's paged-kernel figures for this model: under MHA (a KV head per query head, not
 * MLA) FlashAttention-3's decode has no group of query heads to pack into a tile's rows
 * (pack_gqa), so each item's tile computes one row and streams its KV slower per byte, and the
 * kernel splits keys by FlashAttention's own rule (validation/README.md, "Decode attention").
 * False: no figures, the generic roofline. */
static bool srv_decode_figures(const srv_cost *c, double *bw, double *half, bool *fa_splits)
{
  *fa_splits = c->kvr <= 0 && c->kv_heads >= c->heads && c->mha_bw > 0;
  *bw = *fa_splits ? c->mha_bw : c->decode_bw;
  *half = *fa_splits ? c->mha_half : c->decode_half;
  return *bw > 0;
}

/* The decode attention kernel: each item gathers its K and V block by block through the block
 * table, and the KV read, not the FLOPs, sets the time. A paged kernel reaches the engine's
 * fraction of HBM bandwidth only with many items in flight (each one streams at a fraction of
 * an SM's share): rate = bandwidth x items / (items + half). Without the engine's figures, the
 * generic roofline at the GPU's memory efficiency (validation/README.md, "Decode attention"). */
static double srv_decode_attention(const srv_cost *c, const srv_batch *b, double flops,
                                   double bytes)
{
  double bw, half;
  bool fa_splits;
  if (!srv_decode_figures(c, &bw, &half, &fa_splits) || bytes <= 0)
    return srv_kernel(c, CFG_KCLASS_ATTENTION, c->attn_dtype, flops, bytes, 0);
  const cfg_gpu *g = &hw_config(c->hw)->gpu;
  double items = srv_decode_items(c, b, 4 * half, fa_splits);
  double eff = bw * items / (items + half);
  hw_kernel compute = {.kclass = CFG_KCLASS_ATTENTION, .dtype = c->attn_dtype, .flops = flops};
  double launch = g->efficiency.launch_overhead;
  return MAX(hw_kernel_time(c->hw, &compute) - launch, bytes / (g->memory_bandwidth * eff)) +
         launch;
}

/* Times the decode attention kernel reads each cached K and V: once, or, in a kernel of a
 * thread block per query head, once for each query head of a KV head's group (GQA); MLA's
 * latent is shared by all heads either way. Each copy is timed as HBM bytes: the blocks of a
 * group do not share a tile. Their re-reads fit in L2 on the H100 FP8 rows yet cost that much
 * there (suspected: each block's own per-element work binds, not the L2), and less on A100
 * FP16 rows (validation/README.md, "Old TensorRT-LLM decode attention"). */
static double srv_decode_kv_reads(const srv_cost *c)
{
  if (!c->kv_per_query_head || c->kvr > 0)
    return 1;
  return MAX(1.0, c->heads / c->kv_heads);
}

/* Attention over the KV cache: prefill (compute-bound) and decode (reads each sequence's KV)
 * are separate kernels, as serving engines launch them; the new tokens' K and V are written. */
static void srv_attention(const srv_cost *c, const srv_batch *b, srv_parts *p)
{
  double kv_token = srv_kv_token_bytes(c);           /* K and V of one token, one layer */
  double qo = 2 * c->heads * c->d * c->ab;           /* query in, context out */
  double write = b->tokens * kv_token;
  /* FLOPs per query-key pair and head: QK^T and PV over the head dim; with MLA, prefill over
   * the decompressed heads (d + rope, d), decode over the latent (absorbed: kv_rank + rope,
   * kv_rank); verify passes' k + 1 queries are decode queries */
  double pair_p = c->kvr > 0 ? 2 * (2 * c->d + c->rd) : 4 * c->d;
  double pair_d = c->kvr > 0 ? 2 * (2 * c->kvr + c->rd) : 4 * c->d;
  double pflops = pair_p * c->heads * b->prefill_attn;
  double dflops = pair_d * c->heads * (b->decode_kv + b->verify_pairs);
  double dq = b->tokens - b->prefill_tokens; /* decode queries, verify passes' k + 1 each */
  double dkv = b->decode_kv * kv_token * srv_decode_kv_reads(c);
  p->attention += srv_kernel(c, CFG_KCLASS_ATTENTION, c->attn_dtype, pflops,
                             b->prefill_kv * kv_token + b->prefill_tokens * qo +
                                 (b->decodes ? 0 : write),
                             0);
  p->attention += srv_decode_attention(c, b, dflops,
                                       dkv + dq * qo + (b->decodes ? write : 0));
}

/* A layer without its all-to-alls; returns the routed experts' time under wide EP. */
static double srv_layer(srv_cost *c, const srv_batch *b, bool moe, srv_parts *p)
{
  double T = b->tokens, hd = c->heads * c->d, experts = 0;
  p->other += srv_elementwise(c, T * c->h, 2);               /* input norm */
  srv_qkv(c, T, p);
  srv_attention(c, b, p);
  p->gemm += srv_gemm(c, T, hd, c->h, c->wb);                 /* output projection */
  p->other += srv_elementwise(c, T * c->h, 4);               /* residual + norm */
  if (moe && c->ep.n > 1)
    experts = srv_mlp_ep(c, T, p);
  else if (moe)
    srv_mlp_moe(c, T, p);
  else
    srv_mlp_dense(c, T, c->ffn, p);
  p->comm += 2 * srv_comm(c, PROG_COLL_ALLREDUCE, T, c->h * c->ab);
  return experts;
}

static double srv_parts_sum(const srv_parts *p);

static void srv_parts_scale(srv_parts *p, double k)
{
  p->gemm *= k;
  p->attention *= k;
  p->other *= k;
  p->comm *= k;
}

/* One of two micro-batches: half of every sum (the sequences split evenly). */
static srv_batch srv_batch_half(const srv_batch *b)
{
  return (srv_batch){.seqs = (b->seqs + 1) / 2, .tokens = b->tokens / 2,
                     .prefill_tokens = b->prefill_tokens / 2, .prefill_attn = b->prefill_attn / 2,
                     .prefill_kv = b->prefill_kv / 2, .decodes = (b->decodes + 1) / 2,
                     .decode_kv = b->decode_kv / 2, .samples = (b->samples + 1) / 2};
}

bool srv_ep_layer_of(srv_cost *c, const srv_batch *b, srv_ep_layer *out)
{
  *out = (srv_ep_layer){0};
  if (c->ep.n <= 1 || !c->moe)
    return false;
  srv_parts p = {0};
  out->experts = srv_layer(c, b, true, &p);
  out->compute = srv_parts_sum(&p);
  srv_ep_a2a(&c->ep, b->prefill_tokens > 0, b->tokens / c->tp, out);
  return true;
}

/* Compute beside DeepEP's normal kernels (and NCCL's) runs on the SMs they leave and shares
 * HBM with them: a GEMM's interference over 1 - collectives.sm_reserved (an MoE layer's time
 * is mostly its expert GEMMs); the low-latency kernels receive without holding SMs (DeepEP's
 * hook-based overlap). */
static double srv_ep_sm_slowdown(const srv_cost *c, const srv_ep_layer *l)
{
  if (l->kind == CFG_A2A_DEEPEP_LL)
    return 1.0;
  return hw_efficiency(c->hw)->interference[CFG_KCLASS_GEMM] / (1.0 - c->sm_reserved);
}

/* The n MoE layers of a stage: parts summed, comm holding the exposed all-to-all time. Two
 * micro-batches (two_batch_overlap, a batch of 2 or more sequences) hide tbo_overlap of one's
 * dispatch and combine under the other's compute (or of that compute under the all-to-alls),
 * slowed by the SMs the kernels hold; each micro-batch reads the weights again. */
static void srv_moe_layers(srv_cost *c, const srv_batch *b, int n, srv_parts *out)
{
  *out = (srv_parts){0};
  if (n <= 0)
    return;
  srv_ep_layer l;
  bool tbo = c->ep.tbo && b->seqs >= 2;
  srv_batch half = tbo ? srv_batch_half(b) : *b;
  srv_layer(c, &half, true, out);
  if (!srv_ep_layer_of(c, &half, &l)) {
    srv_parts_scale(out, n);
    return;
  }
  double a2a = l.time[0] + l.time[1];
  if (!tbo) {
    out->comm += a2a;
    srv_parts_scale(out, n);
    return;
  }
  double compute = srv_parts_sum(out);
  srv_parts_scale(out, 2.0 * n);
  out->comm += srv_tbo_time(n, compute * srv_ep_sm_slowdown(c, &l), a2a, c->ep.overlap) -
               2.0 * n * compute;
}

/* The embedding lookup (first stage) and the output layer with sampling (last stage). */
static void srv_ends(srv_cost *c, const srv_batch *b, srv_parts *first, srv_parts *last)
{
  first->other += srv_elementwise(c, b->tokens * c->h, 2);
  double S = b->samples;
  if (S <= 0)
    return;
  last->other += srv_elementwise(c, S * c->h, 2);
  /* the output layer stays in 16 bit under fp8 / int quantization (ModelOpt, AWQ) */
  last->gemm += srv_kernel(c, CFG_KCLASS_GEMM, c->attn_dtype, 2 * S * c->h * c->vocab,
                           2 * c->h * c->vocab + c->ab * S * c->h + 4 * S * c->vocab, c->h);
  last->other += srv_kernel(c, CFG_KCLASS_ELEMENTWISE, CFG_FP32, 5 * S * c->vocab,
                            8 * S * c->vocab, 0);
  last->comm += srv_comm(c, PROG_COLL_ALLGATHER, S, c->vocab * c->tp * 4);
}

static double srv_parts_sum(const srv_parts *p)
{
  return p->gemm + p->attention + p->other + p->comm;
}

/* The proposer before a verify pass: its first forward takes the iteration's prompt tokens
 * (it keeps a KV cache of its own) with one token of every verifying sequence, then k - 1 more
 * one-token passes; MTP runs its one layer the same way. */
static double srv_draft_time(srv_cost *c, const srv_batch *b)
{
  if (!c->draft || (b->verifies == 0 && b->prefill_tokens == 0))
    return 0;
  srv_batch step = {.seqs = b->verifies, .tokens = b->verifies, .decodes = b->verifies,
                    .decode_kv = b->verify_kv, .samples = b->verifies};
  srv_batch first = step;
  first.seqs += b->seqs - b->decodes;
  first.tokens += b->prefill_tokens;
  first.prefill_tokens = b->prefill_tokens;
  first.prefill_attn = b->prefill_attn;
  first.prefill_kv = b->prefill_kv;
  srv_time t1, tk = {0};
  srv_iteration_time(c->draft, &first, &t1);
  if (b->verifies > 0 && c->spec_k > 1)
    srv_iteration_time(c->draft, &step, &tk);
  return t1.total + (c->spec_k - 1) * tk.total;
}

/* The iteration with the host's work: after the GPUs' or, when the scheduler runs ahead,
 * beside them (the host prepares the next iteration while the GPUs run this one). */
static double srv_with_host(const srv_cost *c, double gpu)
{
  return c->host_hidden ? MAX(gpu, c->host) : gpu + c->host;
}

void srv_iteration_time(srv_cost *c, const srv_batch *b, srv_time *out)
{
  srv_parts layer = {0}, moe = {0}, first = {0}, last = {0};
  srv_layer(c, b, false, &layer);
  srv_moe_layers(c, b, c->moe_layers, &moe);
  srv_ends(c, b, &first, &last);
  double dense_layers = c->stage_layers - c->moe_layers;
  srv_parts stage = {.gemm = dense_layers * layer.gemm + moe.gemm,
                     .attention = dense_layers * layer.attention + moe.attention,
                     .other = dense_layers * layer.other + moe.other,
                     .comm = dense_layers * layer.comm + moe.comm};
  double body = srv_parts_sum(&stage);
  double send = srv_comm(c, PROG_COLL_SENDRECV, b->tokens, c->h * c->ab);
  /* the pipeline's stages run one after another for one iteration; the slowest one bounds how
   * often iterations can enter it */
  double ends = srv_parts_sum(&first) + srv_parts_sum(&last);
  double gpu = c->pp * body + ends + (c->pp - 1) * send;
  *out = (srv_time){
      .gemm = c->pp * stage.gemm + first.gemm + last.gemm,
      .attention = c->pp * stage.attention,
      .other = c->pp * stage.other + first.other + last.other,
      .comm = c->pp * stage.comm + first.comm + last.comm + (c->pp - 1) * send,
      .total = srv_with_host(c, gpu)};
  out->host = out->total - gpu;
  out->period = c->pp > 1 ? body + MAX(srv_parts_sum(&first), srv_parts_sum(&last)) + send
                          : out->total;
  out->draft = srv_draft_time(c, b);
  out->total += out->draft;
  out->period += out->draft;
}

static bool srv_check_model(const cfg_workload *w, GError **err)
{
  const cfg_model *m = &w->model;
  const cfg_serving *s = &w->serving;
  g_autofree char *where = NULL;
  const char *key = NULL;
  g_autofree char *msg = NULL;
  if (m->kind != CFG_MODEL_TRANSFORMER && m->kind != CFG_MODEL_MOE_TRANSFORMER) {
    key = "model.kind";
    msg = g_strdup("dlsim serve simulates transformers (kind transformer or moe-transformer)");
  } else if (m->heads % s->tp != 0) {
    key = "serving.tp";
    msg = g_strdup_printf("serving.tp = %d does not divide model.heads = %d", s->tp, m->heads);
  } else if (m->kv_heads % s->tp != 0 && s->tp % m->kv_heads != 0) {
    key = "serving.tp";
    msg = g_strdup_printf("serving.tp = %d and model.kv_heads = %d: one must divide the other",
                          s->tp, m->kv_heads);
  } else if (m->ffn_hidden % s->tp != 0) {
    key = "serving.tp";
    msg = g_strdup_printf("serving.tp = %d does not divide model.ffn_hidden = %d", s->tp,
                          m->ffn_hidden);
  } else if (s->pp > m->layers) {
    key = "serving.pp";
    msg = g_strdup_printf("serving.pp = %d exceeds model.layers = %d", s->pp, m->layers);
  }
  if (!key)
    return true;
  where = cfg_doc_where(w->doc, key);
  g_set_error(err, CFG_ERROR, m->kind == CFG_MODEL_TRANSFORMER || m->kind == CFG_MODEL_MOE_TRANSFORMER
                                  ? CFG_ERROR_INPUT
                                  : CFG_ERROR_UNSUPPORTED,
              "%s: %s", where, msg);
  return false;
}

/* The dtype of the tensor cores that run the GEMMs: fp8 and int8 weights with activations of
 * the same width (W8A8), int4 weight-only (dequantized into 16-bit GEMMs). */
static cfg_dtype srv_gemm_dtype(cfg_dtype weights)
{
  switch (weights) {
  case CFG_INT4:
    return CFG_BF16;
  default:
    return weights;
  }
}

static void srv_shape(srv_cost *c, const cfg_model *m, const cfg_serving *s)
{
  double t = s->tp;
  c->tp = s->tp;
  c->pp = s->pp;
  c->layers = m->layers;
  c->stage_layers = (m->layers + s->pp - 1) / s->pp;
  c->d = m->head_dim > 0 ? m->head_dim : (double)m->hidden / m->heads;
  c->h = m->hidden;
  c->heads = m->heads / t;
  c->kv_heads = MAX(1.0, m->kv_heads / t); /* fewer kv heads than GPUs: replicated */
  c->qkv = (c->heads + 2 * c->kv_heads) * c->d;
  c->qr = m->mla.q_rank;
  c->kvr = m->mla.kv_rank;
  c->rd = c->kvr > 0 ? m->mla.rope_dim : 0;
  c->ffn = m->ffn_hidden / t;
  c->gate = m->activation == CFG_ACT_SWIGLU ? 2 : 1;
  c->vocab = m->vocab / t;
  c->wb = cfg_dtype_bytes(s->dtype);
  c->ab = 2;
  c->kvb = cfg_dtype_bytes(s->kv_dtype);
  c->gemm_dtype = srv_gemm_dtype(s->dtype);
  c->attn_dtype = CFG_BF16;
  c->moe = m->kind == CFG_MODEL_MOE_TRANSFORMER;
  if (c->moe) {
    c->experts = m->moe.experts;
    c->top_k = m->moe.top_k;
    c->moe_every = MAX(1, m->moe.every);
    /* the most loaded stage holds as many MoE layers as the model has, or as a stage of
     * stage_layers holds at one in moe_every */
    c->moe_layers = MAX(0, MIN((m->layers - m->moe.first_dense) / c->moe_every,
                               c->stage_layers / c->moe_every));
    /* wide EP keeps experts whole; shared experts are split like attention */
    c->expert_ffn = m->moe.expert_ffn_hidden / (s->ep > 1 ? 1 : t);
    c->shared_ffn = m->moe.shared_experts * m->moe.expert_ffn_hidden / t;
    /* the engine profile says how it routes (configs/engines: TensorRT-LLM expands in kernels
     * of its own, 128-row CUTLASS tiles; vLLM and SGLang fuse, BLOCK_SIZE_M 64) */
    c->moe_expand = s->moe_routing == CFG_MOE_ROUTING_EXPAND;
    c->moe_tile = s->moe_tile;
  }
  c->host = s->iteration_overhead;
  c->decode_bw = s->decode_attention_bandwidth;
  c->decode_half = s->decode_attention_half;
  c->mha_bw = s->decode_attention_mha_bandwidth;
  c->mha_half = s->decode_attention_mha_half;
  c->kv_per_query_head = s->decode_attention_per_query_head;
  c->host_hidden = srv_schedules_ahead(s);
}

static double srv_layers_bytes(const srv_cost *c);

/* The draft model runs with the replica's tensor parallelism: its heads and MLP must split. */
static bool srv_draft_splits(const cfg_workload *w, const cfg_model *m, GError **err)
{
  int tp = w->serving.tp;
  bool kv = m->kv_heads % tp == 0 || tp % m->kv_heads == 0;
  if (m->heads % tp == 0 && kv && m->ffn_hidden % tp == 0)
    return true;
  const char *key = m->heads % tp ? "serving.speculative.draft.heads"
                    : !kv         ? "serving.speculative.draft.kv_heads"
                                  : "serving.speculative.draft.ffn_hidden";
  g_autofree char *where = cfg_doc_where(w->doc, key);
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s: serving.speculative.draft: the draft model %s runs with serving.tp = %d, "
              "which must divide its heads (%d) and MLP width (%d) and divide or be divided by "
              "its KV heads (%d)",
              where, m->name, tp, m->heads, m->ffn_hidden, m->kv_heads);
  return false;
}

/* The proposer: the draft model, or (MTP) one more layer of the model's own shape whose
 * embedding and output layer are the model's, plus its projection of two hidden states. Both
 * run with the replica's tensor parallelism, in one stage, without the host's iteration cost. */
static bool srv_spec_cost_new(const cfg_cluster *cl, const cfg_workload *w, srv_cost *c,
                              GError **err)
{
  const cfg_speculative *sp = &w->serving.speculative;
  if (sp->method == CFG_SPEC_NONE)
    return true;
  cfg_workload dw = *w;
  dw.model = sp->method == CFG_SPEC_DRAFT ? sp->draft : w->model;
  /* DeepSeek-V3's MTP module is one block like the model's last ones: with experts, however
   * many dense layers the model starts with (its checkpoint's layer 61 holds routed experts) */
  if (sp->method == CFG_SPEC_MTP) {
    dw.model.layers = 1;
    dw.model.moe.first_dense = 0;
  }
  dw.serving.pp = 1;
  dw.serving.iteration_overhead = 0;
  dw.serving.speculative.method = CFG_SPEC_NONE;
  if (!srv_draft_splits(w, &dw.model, err) || !srv_cost_new(cl, &dw, &c->draft, err))
    return false;
  c->spec_k = sp->tokens;
  srv_cost *d = c->draft;
  c->spec_weights = sp->method == CFG_SPEC_DRAFT
                        ? srv_stage_weight_bytes(d, &dw.model)
                        : srv_layers_bytes(d) + 2 * d->h * d->h / d->tp * d->wb;
  return true;
}

bool srv_cost_new(const cfg_cluster *cl, const cfg_workload *w, srv_cost **out, GError **err)
{
  *out = NULL;
  if (!srv_check_model(w, err))
    return false;
  srv_cost *c = g_new0(srv_cost, 1);
  srv_shape(c, &w->model, &w->serving);
  c->hw = hw_cluster_new(cl);
  c->sm_reserved = w->collectives.sm_reserved;
  c->custom_ar = w->serving.custom_allreduce;
  coll_algo algo = COLL_ALGO_AUTO;
  int proto = COLL_PROTO_AUTO;
  if (!coll_algo_parse(w->collectives.algorithm, &algo, err) ||
      !coll_proto_parse(w->collectives.protocol, &proto, err)) {
    srv_cost_free(c);
    return false;
  }
  c->planner = coll_planner_new(c->hw, algo, proto, true);
  c->tp_ranks = g_new(int, c->tp);
  for (int i = 0; i < c->tp; i++)
    c->tp_ranks[i] = i;
  c->pp_pair[0] = 0;
  c->pp_pair[1] = c->tp; /* the next stage's first GPU */
  c->comm_memo = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  if (c->moe && !srv_ep_init(&c->ep, w, c->hw, c->planner, err)) {
    srv_cost_free(c);
    return false;
  }
  *out = c;
  if (!srv_spec_cost_new(cl, w, c, err)) {
    srv_cost_free(c);
    *out = NULL;
    return false;
  }
  return true;
}

void srv_cost_free(srv_cost *c)
{
  if (!c)
    return;
  if (c->planner)
    coll_planner_free(c->planner);
  hw_cluster_free(c->hw);
  g_free(c->tp_ranks);
  srv_ep_clear(&c->ep);
  if (c->comm_memo)
    g_hash_table_destroy(c->comm_memo);
  srv_cost_free(c->draft);
  g_free(c);
}

double srv_layer_gemm_flops(const srv_cost *c, double tokens)
{
  double hd = c->heads * c->d;
  return 2 * tokens * (c->h * c->qkv + hd * c->h + (c->gate + 1) * c->h * c->ffn);
}

double srv_copy_time(const srv_cost *c, double bytes)
{
  return srv_kernel(c, CFG_KCLASS_ELEMENTWISE, c->attn_dtype, 0, 2 * bytes, 0);
}

double srv_kv_bytes_per_token(const srv_cost *c)
{
  return c->stage_layers * srv_kv_token_bytes(c);
}

/* Parameters of one layer on one GPU (norms aside). */
static double srv_layer_params(const srv_cost *c, bool moe)
{
  double qkv = c->kvr > 0 ? c->h * (c->qr + c->kvr + c->rd) +
                                c->qr * c->heads * (c->d + c->rd) + c->kvr * 2 * c->heads * c->d
                          : c->h * c->qkv;
  double attn = qkv + c->heads * c->d * c->h;
  if (!moe)
    return attn + (c->gate + 1) * c->h * c->ffn;
  double experts = c->ep.n > 1 ? c->ep.experts : c->experts;
  return attn + experts * (c->gate + 1) * c->h * c->expert_ffn +
         (c->gate + 1) * c->h * c->shared_ffn;
}

/* Weights of the most loaded stage's layers on one GPU: the layers, their norms and routers. */
static double srv_layers_bytes(const srv_cost *c)
{
  int moe_layers = c->moe ? c->moe_layers : 0;
  double params = (c->stage_layers - moe_layers) * srv_layer_params(c, false) +
                  moe_layers * srv_layer_params(c, true);
  return params * c->wb + moe_layers * c->h * c->experts * 2 + c->stage_layers * 2 * c->h * 2;
}

/* The output layer (or embedding table) on one GPU, in 16 bit. */
static double srv_table_bytes(const srv_cost *c)
{
  return 2 * c->h * c->vocab;
}

double srv_weight_bytes(const srv_cost *c)
{
  return c->pp * srv_layers_bytes(c) + srv_table_bytes(c);
}

double srv_stage_weight_bytes(const srv_cost *c, const cfg_model *m)
{
  /* one stage holds the embedding and the output layer (two tables unless tied), else the
   * first and the last each hold one */
  int tables = c->pp == 1 && !m->tied_embeddings ? 2 : 1;
  return srv_layers_bytes(c) + tables * srv_table_bytes(c);
}

double srv_activation_bytes(const srv_cost *c, double tokens, double seqs)
{
  double width = c->moe ? MAX(c->ffn, c->top_k * c->expert_ffn) : c->ffn;
  if (c->moe && c->ep.n > 1) /* the busiest GPU's copies at the most tokens (balanced x 2) */
    width = MAX(c->ffn, 2.0 * c->top_k * c->expert_ffn / c->tp);
  return tokens * c->ab * (c->gate + 1) * width + seqs * c->vocab * 4;
}

double srv_spec_weight_bytes(const srv_cost *c)
{
  return c->draft ? c->spec_weights : 0;
}

double srv_spec_kv_bytes_per_token(const srv_cost *c)
{
  return c->draft ? srv_kv_bytes_per_token(c->draft) : 0;
}
