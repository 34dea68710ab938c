/* Kernel roles: the parallel strategies place their collectives by what a kernel is (its role
 * and phase), never by its name. Each test reads a block's templates as a sequence of kernel
 * roles and collectives (".re": recomputed in backward), and the first holds that renaming
 * every kernel changes nothing. */
#include "helpers.h"
#include "workloads/workloads.h"

#include <criterion/criterion.h>
#include <string.h>

typedef struct {
  cfg_cluster *c;
  cfg_workload *w;
  hw_cluster *hw;
  wl_model *m;
  wl_skeleton sk;
} roles_setup;

static void roles_build(roles_setup *r, const char *workload, const char *const *sets)
{
  memset(r, 0, sizeof *r);
  cr_assert(th_load("dgx-h100", workload, sets, &r->c, &r->w));
  r->hw = hw_cluster_new(r->c);
  wl_shard shard = wl_shard_of(r->w);
  cr_assert(wl_model_build(&r->w->model, &r->w->training, &shard, &r->m, NULL));
  cr_assert(wl_skeleton_build(r->w, r->hw, r->m, &r->sk));
}

static void roles_clear(roles_setup *r)
{
  wl_skeleton_free(&r->sk);
  wl_model_free(r->m);
  hw_cluster_free(r->hw);
  cfg_workload_free(r->w);
  cfg_cluster_free(r->c);
}

static const char *roles_name(const wl_kernel *k)
{
  static const struct {
    wl_role role;
    const char *name;
  } names[] = {{WL_ROLE_QKV, "QKV"},           {WL_ROLE_ATTENTION, "ATT"},
               {WL_ROLE_ATTN_OUT, "OUT"},      {WL_ROLE_MLP_UP, "UP"},
               {WL_ROLE_MLP_DOWN, "DOWN"},     {WL_ROLE_PERMUTE, "PERM"},
               {WL_ROLE_EXPERT_UP, "EUP"},     {WL_ROLE_EXPERT_DOWN, "EDOWN"},
               {WL_ROLE_UNPERMUTE, "UNPERM"},  {WL_ROLE_SHARED_UP, "SUP"},
               {WL_ROLE_RING_STEP, "RING"}};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    if (names[i].role == k->role)
      return names[i].name;
  return NULL;
}

/* A template as text: the kernels that matter for placement ("UP", "DOWN.dgrad", ...) and
 * every collective ("allreduce"), in op order, space-separated. */
static char *roles_sequence(const roles_setup *r, int tmpl, const GArray *kernels)
{
  const prog_class *t = prog_class_at(r->sk.p, tmpl);
  GString *s = g_string_new(NULL);
  guint k = 0;
  for (guint i = 0; i < t->ops->len; i++) {
    const prog_op *op = &g_array_index(t->ops, prog_op, i);
    if (op->kind == PROG_COMM) {
      g_string_append_printf(s, "%s ", prog_coll_name(op->coll));
      continue;
    }
    if (op->kind != PROG_COMPUTE)
      continue;
    cr_assert(k < kernels->len, "more compute ops than kernels");
    const wl_kernel *kn = &g_array_index(kernels, wl_kernel, k++);
    const char *name = roles_name(kn);
    if (name)
      g_string_append_printf(s, "%s%s ", name,
                             kn->phase == WL_PHASE_DGRAD       ? ".dgrad"
                             : kn->phase == WL_PHASE_WGRAD     ? ".wgrad"
                             : kn->phase == WL_PHASE_RECOMPUTE ? ".re"
                                                               : "");
  }
  return g_string_free(s, FALSE);
}

/* The first transformer block (layer 1: layer 0 is the embedding). */
static const wl_layer *roles_block(const roles_setup *r)
{
  return g_ptr_array_index(r->m->layers, 1);
}

Test(roles, renaming_every_kernel_changes_no_collective)
{
  const char *sets[] = {"node.count=1", "parallel.tp=4", "parallel.dp=2",
                        "parallel.sequence_parallel=true", "training.recompute=full", NULL};
  roles_setup a, b;
  roles_build(&a, "gpt3-1.3b-dp", sets);
  roles_build(&b, "gpt3-1.3b-dp", sets);
  wl_skeleton_free(&b.sk);
  for (guint l = 0; l < b.m->layers->len; l++) { /* shared lists are renamed more than once */
    const wl_layer *layer = g_ptr_array_index(b.m->layers, l);
    for (guint i = 0; i < layer->fwd->len; i++)
      g_array_index(layer->fwd, wl_kernel, i).name = "k";
    for (guint i = 0; i < layer->bwd->len; i++)
      g_array_index(layer->bwd, wl_kernel, i).name = "k";
  }
  cr_assert(wl_skeleton_build(b.w, b.hw, b.m, &b.sk));
  cr_assert_eq(a.sk.p->classes->len, b.sk.p->classes->len);
  guint comms = 0;
  for (guint c = 0; c < a.sk.p->classes->len; c++) {
    const prog_class *x = prog_class_at(a.sk.p, (int)c), *y = prog_class_at(b.sk.p, (int)c);
    cr_assert_eq(x->ops->len, y->ops->len, "class %u", c);
    for (guint i = 0; i < x->ops->len; i++) {
      const prog_op *p = &g_array_index(x->ops, prog_op, i), *q = &g_array_index(y->ops, prog_op, i);
      cr_assert(p->kind == q->kind && p->stream == q->stream && p->coll == q->coll &&
                p->comm_bytes == q->comm_bytes && p->flops == q->flops && p->ndeps == q->ndeps,
                "class %u op %u differs", c, i);
      comms += p->kind == PROG_COMM;
    }
  }
  cr_assert(comms > 10, "the templates have their tensor-parallel collectives (%u)", comms);
  roles_clear(&a);
  roles_clear(&b);
}

Test(roles, tensor_parallel_reduces_after_row_parallel_and_input_gradients)
{
  const char *sets[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  const wl_layer *l = roles_block(&r);
  g_autofree char *fwd = roles_sequence(&r, r.sk.fwd[1], l->fwd);
  g_autofree char *bwd = roles_sequence(&r, r.sk.bwd[1], l->bwd);
  cr_assert_str_eq(fwd, "QKV ATT OUT allreduce UP DOWN allreduce ", "forward: %s", fwd);
  /* the input gradient of a column-parallel GEMM is reduced while its weight gradient runs */
  cr_assert_str_eq(bwd, "DOWN.dgrad DOWN.wgrad UP.dgrad allreduce UP.wgrad OUT.dgrad OUT.wgrad "
                        "ATT QKV.dgrad allreduce QKV.wgrad ", "backward: %s", bwd);
  roles_clear(&r);
}

Test(roles, sequence_parallel_gathers_before_column_and_scatters_after_row)
{
  const char *sets[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1",
                        "parallel.sequence_parallel=true", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  const wl_layer *l = roles_block(&r);
  g_autofree char *fwd = roles_sequence(&r, r.sk.fwd[1], l->fwd);
  g_autofree char *bwd = roles_sequence(&r, r.sk.bwd[1], l->bwd);
  cr_assert_str_eq(fwd, "allgather QKV ATT OUT reducescatter allgather UP DOWN reducescatter ",
                   "forward: %s", fwd);
  cr_assert_str_eq(bwd, "allgather DOWN.dgrad DOWN.wgrad allgather UP.dgrad reducescatter UP.wgrad "
                        "allgather OUT.dgrad OUT.wgrad ATT allgather QKV.dgrad reducescatter "
                        "QKV.wgrad ", "backward: %s", bwd);
  roles_clear(&r);
}

Test(roles, context_parallel_passes_kv_beside_each_ring_step)
{
  const char *sets[] = {"node.count=1", "parallel.cp=4", "parallel.dp=2", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  const wl_layer *l = roles_block(&r);
  g_autofree char *fwd = roles_sequence(&r, r.sk.fwd[1], l->fwd);
  g_autofree char *bwd = roles_sequence(&r, r.sk.bwd[1], l->bwd);
  /* forward: the next step's K and V travel beside every step but the last (each step but the
   * first followed by its merge); backward: beside every step, the last one's gradients going
   * back after it */
  cr_assert_str_eq(fwd, "QKV allgather ATT allgather RING RING allgather RING RING RING RING OUT "
                        "UP DOWN ",
                   "forward: %s", fwd);
  cr_assert_str_eq(bwd, "DOWN.dgrad DOWN.wgrad UP.dgrad UP.wgrad OUT.dgrad OUT.wgrad allgather RING "
                        "RING allgather RING RING allgather RING RING allgather ATT QKV.dgrad "
                        "QKV.wgrad ",
                   "backward: %s", bwd);
  roles_clear(&r);
}

/* The bytes of a template's CP transfers, in op order. */
static int roles_cp_bytes(const roles_setup *r, int tmpl, double *bytes, int max)
{
  const prog_class *t = prog_class_at(r->sk.p, tmpl);
  int n = 0;
  for (guint i = 0; i < t->ops->len && n < max; i++) {
    const prog_op *op = &g_array_index(t->ops, prog_op, i);
    if (op->kind == PROG_COMM && op->stream == PROG_STREAM_CP)
      bytes[n++] = op->comm_bytes;
  }
  return n;
}

/* Transformer Engine's ring (AttnFuncWithCP @ v1.4) passes one chunk of K and V per step: GPT-3
 * 1.3B at CP 4, micro-batch 8 of 2048 tokens, holds 8 x 512 tokens of 16 heads of 128, so a
 * chunk is 2 (K, V) x 4096 x 2048 x 2 bytes = 32 MiB. Each hop is a gather of one chunk from
 * each of 4 ranks, which moves 3/4 of its 4/3 x 32 MiB: one chunk. Backward sends K and V,
 * then K, V, dK and dV twice, then dK and dV. */
Test(roles, context_parallel_ring_moves_one_chunk_per_step)
{
  const char *sets[] = {"node.count=1", "parallel.cp=4", "parallel.dp=2", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  double chunk = 2.0 * 4096 * 2048 * 2, gather = chunk * 4 / 3, b[8];
  cr_assert_eq(roles_cp_bytes(&r, r.sk.fwd[1], b, 8), 3);
  for (int i = 0; i < 3; i++)
    cr_assert_float_eq(b[i], gather, 1e-3, "forward hop %d: %g", i, b[i]);
  cr_assert_eq(roles_cp_bytes(&r, r.sk.bwd[1], b, 8), 4);
  const double chunks[] = {1, 2, 2, 1};
  for (int i = 0; i < 4; i++)
    cr_assert_float_eq(b[i], chunks[i] * gather, 1e-3, "backward hop %d: %g", i, b[i]);
  roles_clear(&r);
}

/* The fused attention calls of a layer's list as the hardware model takes them. */
static hw_kernel roles_hw_attention(const GArray *ks, int nth)
{
  for (guint i = 0; i < ks->len; i++) {
    const wl_kernel *k = &g_array_index(ks, wl_kernel, i);
    if (k->kclass == CFG_KCLASS_ATTENTION && nth-- == 0)
      return (hw_kernel){.kclass = k->kclass, .dtype = k->dtype, .flops = k->flops,
                         .bytes = k->bytes, .attn = k->attn};
  }
  cr_assert_fail("no such attention call");
  return (hw_kernel){0};
}

/* Only the ring's diagonal step is causal (the first forward, the last backward); the others
 * run unmasked on the last rank's shape, all 8 x 512 queries against half the 512 keys. Both
 * see 256 keys a row on average and do the same work, so by hw_attention_efficiency the
 * diagonal takes (1 + 128 / 512) / causal of an unmasked step's time. */
Test(roles, context_parallel_ring_masks_only_its_diagonal_step)
{
  const char *sets[] = {"node.count=1", "parallel.cp=4", "parallel.dp=2", "model.seq_len=2048",
                        NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  const wl_layer *l = roles_block(&r);
  const cfg_efficiency *e = hw_efficiency(r.hw);
  for (int pass = 0; pass < 2; pass++) {
    const GArray *ks = pass ? l->bwd : l->fwd;
    int diagonal = pass ? 3 : 0;
    for (int i = 0; i < 4; i++) {
      hw_kernel k = roles_hw_attention(ks, i);
      cr_assert_eq(k.attn.causal, i == diagonal, "pass %d step %d", pass, i);
      cr_assert_float_eq(k.attn.keys, i == diagonal ? 512 : 256, 1e-9);
    }
    hw_kernel d = roles_hw_attention(ks, diagonal), u = roles_hw_attention(ks, 1);
    double ratio = (hw_kernel_time(r.hw, &d) - e->launch_overhead) /
                   (hw_kernel_time(r.hw, &u) - e->launch_overhead);
    cr_assert_float_eq(ratio, (1 + 128.0 / 512) / e->attention.causal, 1e-9, "pass %d: %g", pass,
                       ratio);
  }
  roles_clear(&r);
}

static bool roles_depends_on(const roles_setup *r, int tmpl, guint op, guint on)
{
  const prog_op *o = &g_array_index(prog_class_at(r->sk.p, tmpl)->ops, prog_op, op);
  const uint32_t *deps = prog_op_deps(r->sk.p, tmpl, o);
  for (uint32_t d = 0; d < o->ndeps; d++)
    if (deps[d] == on)
      return true;
  return false;
}

/* In fp8 (Transformer Engine's delayed scaling) a row-parallel GEMM's input is cast in a kernel
 * of its own that shares the GEMM's role (the first OUT and DOWN below; QKV's and UP's norms
 * write fp8 themselves), yet sequence parallelism reduce-scatters the GEMM's output once,
 * after the GEMM, and gathers a column-parallel GEMM's input once: not around the casts too. */
Test(roles, fp8_casts_take_no_collective_of_their_gemm)
{
  const char *sets[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1",
                        "parallel.sequence_parallel=true", "training.dtype=fp8", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  g_autofree char *fwd = roles_sequence(&r, r.sk.fwd[1], roles_block(&r)->fwd);
  cr_assert_str_eq(fwd, "allgather QKV ATT OUT OUT reducescatter allgather UP DOWN DOWN "
                        "reducescatter ", "forward: %s", fwd);
  roles_clear(&r);
}

/* Each step needs only the chunk its predecessor brought: every hop runs beside the step after
 * it (which does not wait for it), and the compute op after that step waits for it. CP 4, both passes:
 * three hops forward, four backward. */
Test(roles, context_parallel_hops_run_beside_their_ring_step)
{
  const char *sets[] = {"node.count=1", "parallel.cp=4", "parallel.dp=2", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  const int tmpls[] = {r.sk.fwd[1], r.sk.bwd[1]}, hops[] = {3, 4};
  for (int p = 0; p < 2; p++) {
    const prog_class *t = prog_class_at(r.sk.p, tmpls[p]);
    int n = 0;
    for (guint i = 0; i < t->ops->len; i++) {
      const prog_op *op = &g_array_index(t->ops, prog_op, i);
      if (op->kind != PROG_COMM || op->stream != PROG_STREAM_CP)
        continue;
      n++;
      guint next = i + 2; /* the compute op after the step (the next hop may come first) */
      while (next < t->ops->len && g_array_index(t->ops, prog_op, next).kind != PROG_COMPUTE)
        next++;
      cr_assert_lt(next, t->ops->len);
      const prog_op *step = &g_array_index(t->ops, prog_op, i + 1);
      cr_assert_eq(step->kind, PROG_COMPUTE);
      cr_assert_eq(step->kclass, CFG_KCLASS_ATTENTION, "pass %d: a hop beside %s", p, step->name);
      cr_assert_not(roles_depends_on(&r, tmpls[p], i + 1, i), "pass %d: the step waits", p);
      cr_assert(roles_depends_on(&r, tmpls[p], next, i), "pass %d hop %d: %s does not wait", p, n,
                g_array_index(t->ops, prog_op, next).name);
    }
    cr_assert_eq(n, hops[p], "pass %d: %d hops", p, n);
  }
  roles_clear(&r);
}

/* PyTorch's allgather rotation (torchtitan's default): GPT-3 1.3B at CP 4, micro-batch 8 of 2048
 * tokens, holds a 32 MiB chunk of K and V (see above). Forward gathers the 4 chunks once (128
 * MiB) beside the first step; backward gathers them again beside its first step, then passes
 * the fp32 dK, dV (64 MiB, a gather of 4/3 x 64 MiB) beside steps 2-4 and once more after the
 * last, which the input gradient's GEMM waits for. */
Test(roles, context_parallel_allgather_gathers_once_and_rings_the_gradients)
{
  const char *sets[] = {"node.count=1", "parallel.cp=4", "parallel.dp=2",
                        "parallel.cp_exchange=allgather", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  const wl_layer *l = roles_block(&r);
  g_autofree char *fwd = roles_sequence(&r, r.sk.fwd[1], l->fwd);
  g_autofree char *bwd = roles_sequence(&r, r.sk.bwd[1], l->bwd);
  cr_assert_str_eq(fwd, "QKV RING allgather ATT RING RING RING RING RING RING OUT UP DOWN ",
                   "forward: %s", fwd);
  /* each step's SDPA call, then its dQ and its dK, dV added in fp32 (torchcp.c, compiled);
   * the dK, dV that come back after the last cast to 16 bits */
  cr_assert_str_eq(bwd, "DOWN.dgrad DOWN.wgrad UP.dgrad UP.wgrad OUT.dgrad OUT.wgrad RING allgather "
                        "RING RING RING allgather RING RING RING allgather RING RING RING "
                        "allgather ATT allgather RING RING RING QKV.dgrad QKV.wgrad ",
                   "backward: %s", bwd);
  double chunk = 2.0 * 4096 * 2048 * 2, b[8];
  cr_assert_eq(roles_cp_bytes(&r, r.sk.fwd[1], b, 8), 1);
  cr_assert_float_eq(b[0], 4 * chunk, 1e-3, "forward gather: %g", b[0]);
  cr_assert_eq(roles_cp_bytes(&r, r.sk.bwd[1], b, 8), 5);
  cr_assert_float_eq(b[0], 4 * chunk, 1e-3, "backward gather: %g", b[0]);
  for (int i = 1; i < 5; i++)
    cr_assert_float_eq(b[i], 2 * chunk * 4 / 3, 1e-3, "dkv hop %d: %g", i, b[i]);
  roles_clear(&r);
}

/* Index of the `nth` op of template `tmpl` named `name`. */
static guint roles_op_named(const roles_setup *r, int tmpl, const char *name, int nth)
{
  const prog_class *t = prog_class_at(r->sk.p, tmpl);
  for (guint i = 0; i < t->ops->len; i++)
    if (strcmp(g_array_index(t->ops, prog_op, i).name, name) == 0 && nth-- == 0)
      return i;
  cr_assert_fail("no op %s", name);
  return 0;
}

/* The gather runs beside the first step only (the second waits for it); the input gradient's
 * GEMM waits for the last dK, dV hop. */
Test(roles, context_parallel_allgather_exposes_after_the_first_step)
{
  const char *sets[] = {"node.count=1", "parallel.cp=4", "parallel.dp=2",
                        "parallel.cp_exchange=allgather", NULL};
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", sets);
  int f = r.sk.fwd[1], bw = r.sk.bwd[1];
  guint gather = roles_op_named(&r, f, "cp allgather kv", 0);
  cr_assert_not(roles_depends_on(&r, f, gather + 1, gather), "the first step waits");
  cr_assert(roles_depends_on(&r, f, gather + 2, gather), "the second step does not wait");
  guint last = roles_op_named(&r, bw, "cp ring dkv", 3);
  /* the last step's fp32 additions, the cast of what came back, then the input gradient */
  guint dgrad = last + 4;
  cr_assert(g_str_has_suffix(g_array_index(prog_class_at(r.sk.p, bw)->ops, prog_op, dgrad).name,
                             ".qkv.dgrad"));
  cr_assert(roles_depends_on(&r, bw, last + 1, last), "the kernel after the hop does not wait");
  roles_clear(&r);
}

/* Bytes of a list's ring kernels that are not attention (merges, additions, casts), over `elems`. */
static double roles_ring_bytes(const GArray *ks, double elems)
{
  double bytes = 0;
  for (guint i = 0; i < ks->len; i++) {
    const wl_kernel *k = &g_array_index(ks, wl_kernel, i);
    if (k->role == WL_ROLE_RING_STEP && k->kclass == CFG_KCLASS_ELEMENTWISE)
      bytes += k->bytes;
  }
  return bytes / elems;
}

/* PyTorch's context_parallel (parallel.cp_exchange allgather) on Llama 3 405B at TP 8 x CP 2,
 * one sequence of 8192: a GPU holds 4096 tokens of 16 query heads of 128, E = 2^23 elements a
 * tensor. Its SDPA op takes K and V per query head, so the forward gather moves 2 ranks x 2 (K,
 * V) x E x 2 bytes, 16 times the GPU's one K/V head. Per element, compiled: forward, the first
 * step's K, V concatenation for the gather (8) and the second step's merge (2 + 4 + 4);
 * backward, that concatenation again, and per step dQ's fp32 addition (2 + 4 + 4) and dK, dV's
 * into the send buffer (half of them 2, 4 + 4 each), then the cast of dK, dV (2 x 6). Eager:
 * forward 8 + 6 (the first output to fp32) + 38 (the cast and three fp32 ops) + 6 (back to
 * bf16); backward 12 (three fp32 zero fills) + 8 + 2 x 52 (dK, dV each added into a half and
 * concatenated again: 2 x (5 + 8), concatenated for the send: 16, dQ: 10) + 6 + 12 (the casts).
 * Transformer Engine's ring merges beside the next step: nothing. A block's backward holds the
 * ring's buffers: the gathered K, V (2 ranks x 2 x 2 bytes), fp32 dQ, dK, dV (12), the fp32
 * dK, dV sent and received (16), the step's bf16 gradients (6), the flash kernel's fp32 dQ
 * accumulator (4). */
Test(roles, context_parallel_torch_merges_cost_their_fp32_bytes)
{
  const char *te[] = {TH_405B_TP8_CP2, NULL};
  const char *fused[] = {TH_405B_TP8_CP2, "parallel.cp_exchange=allgather", NULL};
  const char *eager[] = {TH_405B_TP8_CP2, "parallel.cp_exchange=allgather",
                         "training.eager_ops=true", NULL};
  const double e = 4096.0 * 16 * 128;
  roles_setup r;
  roles_build(&r, "llama3-405b", te);
  cr_assert_float_eq(roles_ring_bytes(roles_block(&r)->fwd, e), 0, 1e-12);
  cr_assert_float_eq(roles_ring_bytes(roles_block(&r)->bwd, e), 0, 1e-12);
  cr_assert_float_eq(r.m->ring_peak, 0, 1e-12);
  roles_clear(&r);
  roles_build(&r, "llama3-405b", fused);
  double b[8];
  cr_assert_eq(roles_cp_bytes(&r, r.sk.fwd[1], b, 8), 1);
  cr_assert_float_eq(b[0], 2 * 2 * e * 2, 1e-3, "forward gather: %g", b[0]);
  cr_assert_float_eq(roles_ring_bytes(roles_block(&r)->fwd, e), 8 + 10, 1e-9);
  cr_assert_float_eq(roles_ring_bytes(roles_block(&r)->bwd, e), 8 + 2 * (10 + 18) + 12, 1e-9);
  cr_assert_float_eq(r.m->ring_peak / e, 8 + 12 + 16 + 6 + 4, 1e-9);
  roles_clear(&r);
  roles_build(&r, "llama3-405b", eager);
  cr_assert_float_eq(roles_ring_bytes(roles_block(&r)->fwd, e), 8 + 6 + 38 + 6, 1e-9);
  cr_assert_float_eq(roles_ring_bytes(roles_block(&r)->bwd, e), 12 + 8 + 2 * 52 + 6 + 12, 1e-9);
  roles_clear(&r);
}

/* Sums a block's fused-attention kernels (class attention) and counts them and the others of
 * the ring. */
static double roles_attention_flops(const GArray *ks, int *calls, int *ring_others)
{
  double flops = 0;
  *calls = *ring_others = 0;
  for (guint i = 0; i < ks->len; i++) {
    const wl_kernel *k = &g_array_index(ks, wl_kernel, i);
    if (k->kclass == CFG_KCLASS_ATTENTION) {
      flops += k->flops;
      (*calls)++;
    } else if (k->role == WL_ROLE_RING_STEP) {
      (*ring_others)++;
    }
  }
  return flops;
}

/* Transformer Engine's ring (AttnFuncWithCPAndKVP2P) calls the fused attention once per step:
 * CP 4 makes four calls and three merges each way, and the calls share the work of one GPU's
 * queries (a quarter of the whole sequence's) equally. */
Test(roles, context_parallel_attention_is_one_call_per_ring_step)
{
  const char *one[] = {"node.count=1", "parallel.cp=1", "parallel.dp=8", NULL};
  const char *four[] = {"node.count=1", "parallel.cp=4", "parallel.dp=2", NULL};
  roles_setup a, b;
  roles_build(&a, "gpt3-1.3b-dp", one);
  roles_build(&b, "gpt3-1.3b-dp", four);
  int calls, others;
  double whole = roles_attention_flops(roles_block(&a)->fwd, &calls, &others);
  cr_assert_eq(calls, 1);
  cr_assert_eq(others, 0);
  const wl_layer *l = roles_block(&b);
  cr_assert_float_eq(roles_attention_flops(l->fwd, &calls, &others), whole / 4, whole * 1e-9);
  cr_assert_eq(calls, 4);
  cr_assert_eq(others, 3);
  const wl_kernel *first = &g_array_index(l->fwd, wl_kernel, 2);
  cr_assert_eq(first->kclass, CFG_KCLASS_ATTENTION);
  cr_assert_float_eq(first->flops, whole / 16, whole * 1e-9);
  double bwd = roles_attention_flops(l->bwd, &calls, &others);
  cr_assert_float_eq(bwd, 2.5 * whole / 4, whole * 1e-9);
  cr_assert_eq(calls, 4);
  cr_assert_eq(others, 3);
  roles_clear(&a);
  roles_clear(&b);
}

Test(roles, expert_parallel_dispatches_after_permute_and_combines_after_experts)
{
  const char *sets[] = {"node.count=1", "parallel.dp=8", "parallel.ep=8", "parallel.zero=0",
                        "training.global_batch=8", NULL};
  roles_setup r;
  roles_build(&r, "mixtral-8x7b-train", sets);
  const wl_layer *l = roles_block(&r);
  g_autofree char *fwd = roles_sequence(&r, r.sk.fwd[1], l->fwd);
  g_autofree char *bwd = roles_sequence(&r, r.sk.bwd[1], l->bwd);
  cr_assert_str_eq(fwd, "QKV ATT OUT PERM alltoall EUP EDOWN alltoall UNPERM ", "forward: %s", fwd);
  /* the preset recomputes each block in full: its forward, all-to-alls included, comes first */
  cr_assert_str_eq(bwd, "QKV.re ATT.re OUT.re PERM.re alltoall EUP.re EDOWN.re alltoall UNPERM.re "
                        "UNPERM alltoall EDOWN.dgrad EDOWN.wgrad EUP.dgrad alltoall EUP.wgrad "
                        "PERM OUT.dgrad OUT.wgrad ATT QKV.dgrad QKV.wgrad ", "backward: %s", bwd);
  roles_clear(&r);
}

/* The kernels of `list` named `name` within their layer, and the index of the first (-1: none). */
static int roles_find(const GArray *list, const char *name, int *count)
{
  int first = -1;
  g_autofree char *suffix = g_strconcat(".", name, NULL);
  *count = 0;
  for (guint i = 0; i < list->len; i++)
    if (g_str_has_suffix(g_array_index(list, wl_kernel, i).name, suffix)) {
      first = first < 0 ? (int)i : first;
      ++*count;
    }
  return first;
}

/* qk-layernorm and the rotary embedding: a kernel per query and key tensor between the
 * projection and attention, forward and backward, that move no collective; unfused rotary
 * passes over the tensors 7.5 times as often as Transformer Engine's fused kernel. */
Test(roles, rotary_and_qk_norm_run_between_projection_and_attention)
{
  const char *plain[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1",
                         "parallel.sequence_parallel=true", NULL};
  const char *fused[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1",
                         "parallel.sequence_parallel=true", "model.rotary=fused",
                         "model.qk_norm=true", NULL};
  const char *unfused[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1",
                           "parallel.sequence_parallel=true", "model.rotary=unfused", NULL};
  roles_setup p, f, u;
  roles_build(&p, "gpt3-1.3b-dp", plain);
  roles_build(&f, "gpt3-1.3b-dp", fused);
  roles_build(&u, "gpt3-1.3b-dp", unfused);
  const wl_layer *lp = roles_block(&p), *lf = roles_block(&f), *lu = roles_block(&u);
  cr_assert_eq(lf->fwd->len, lp->fwd->len + 4);
  cr_assert_eq(lf->bwd->len, lp->bwd->len + 4);
  const char *names[] = {"q_norm", "k_norm", "rope_q", "rope_k"};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    int n = 0, at = roles_find(lf->fwd, names[i], &n);
    cr_assert_eq(n, 1, "%s forward", names[i]);
    cr_assert(at > roles_find(lf->fwd, "qkv", &n), "%s after the projection", names[i]);
    g_autofree char *bwd = g_strconcat(names[i], ".bwd", NULL);
    at = roles_find(lf->bwd, bwd, &n);
    cr_assert_eq(n, 1, "%s backward", names[i]);
    cr_assert(at > roles_find(lf->bwd, "attention.bwd", &n) && at < roles_find(lf->bwd, "qkv.dgrad", &n),
              "%s backward between attention's and the projection's", names[i]);
  }
  int n = 0, qkv = roles_find(lf->fwd, "qkv", &n), att = roles_find(lf->fwd, "attention", &n);
  cr_assert_eq(att - qkv, 5, "the four kernels sit between qkv and attention");
  int rf = roles_find(lf->fwd, "rope_q", &n), ru = roles_find(lu->fwd, "rope_q", &n);
  cr_assert_float_eq(g_array_index(lu->fwd, wl_kernel, ru).bytes,
                     7.5 * g_array_index(lf->fwd, wl_kernel, rf).bytes, 1e-6);
  g_autofree char *sp = roles_sequence(&p, p.sk.fwd[1], lp->fwd);
  g_autofree char *sf = roles_sequence(&f, f.sk.fwd[1], lf->fwd);
  g_autofree char *bp = roles_sequence(&p, p.sk.bwd[1], lp->bwd);
  g_autofree char *bf = roles_sequence(&f, f.sk.bwd[1], lf->bwd);
  cr_assert_str_eq(sf, sp);
  cr_assert_str_eq(bf, bp);
  roles_clear(&p);
  roles_clear(&f);
  roles_clear(&u);
}

/* Megatron-LM's --test-mode (training.test_mode) with qk-layernorm: run_realtime_tests' host
 * ops in every block's forward, after the q/k norms and before attention, in modelled kernels:
 * (5 + (18 dp + 1) + (18 tp + 1)) / 14, rounded (8 at TP 4 x DP 2, 12 at TP 8 x DP 1); nothing in
 * backward, and nothing without qk-layernorm (the function returns before its checks). */
Test(roles, test_mode_checks_run_after_the_qk_norms_in_forward_only)
{
  const char *tp4[] = {"node.count=1", "parallel.tp=4", "parallel.dp=2", "model.qk_norm=true",
                       "training.test_mode=true", NULL};
  const char *tp8[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1", "model.qk_norm=true",
                       "training.test_mode=true", NULL};
  const char *no_norm[] = {"node.count=1", "parallel.tp=4", "parallel.dp=2",
                           "training.test_mode=true", NULL};
  roles_setup a, b, c;
  roles_build(&a, "gpt3-1.3b-dp", tp4);
  roles_build(&b, "gpt3-1.3b-dp", tp8);
  roles_build(&c, "gpt3-1.3b-dp", no_norm);
  int n = 0, at = roles_find(roles_block(&a)->fwd, "qk_norm.checks", &n);
  cr_expect_eq(n, 8);
  cr_expect(at > roles_find(roles_block(&a)->fwd, "k_norm", &(int){0}), "after the norms");
  cr_expect(at < roles_find(roles_block(&a)->fwd, "attention", &(int){0}), "before attention");
  roles_find(roles_block(&a)->bwd, "qk_norm.checks", &n);
  cr_expect_eq(n, 0, "none in backward");
  roles_find(roles_block(&b)->fwd, "qk_norm.checks", &n);
  cr_expect_eq(n, 12);
  roles_find(roles_block(&c)->fwd, "qk_norm.checks", &n);
  cr_expect_eq(n, 0, "none without qk-layernorm");
  roles_clear(&a);
  roles_clear(&b);
  roles_clear(&c);
}

/* Knowledge distillation: the teacher's forward runs before the student's in every block with
 * the same tensor-parallel collectives, adds nothing to backward (nor to what full
 * recomputation replays), and the output layer gains the teacher's logits and the KL loss,
 * reduced over the vocabulary shards like the cross-entropy. */
Test(roles, distillation_runs_the_teachers_forward_before_the_students)
{
  const char *plain[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1",
                         "training.recompute=full", NULL};
  const char *kd[] = {"node.count=1", "parallel.tp=8", "parallel.dp=1",
                      "training.recompute=full", "training.distill=true", NULL};
  roles_setup p, d;
  roles_build(&p, "gpt3-1.3b-dp", plain);
  roles_build(&d, "gpt3-1.3b-dp", kd);
  const wl_layer *lp = roles_block(&p), *ld = roles_block(&d);
  cr_assert_eq(ld->fwd->len, 2 * lp->fwd->len);
  cr_assert_eq(ld->bwd->len, lp->bwd->len);
  for (guint i = 0; i < ld->fwd->len; i++) /* the teacher's half first */
    cr_assert_eq(strstr(g_array_index(ld->fwd, wl_kernel, i).name, ".teacher.") != NULL,
                 i < lp->fwd->len, "kernel %u: %s", i, g_array_index(ld->fwd, wl_kernel, i).name);
  int n = 0;
  g_autofree char *fp = roles_sequence(&p, p.sk.fwd[1], lp->fwd);
  g_autofree char *fd = roles_sequence(&d, d.sk.fwd[1], ld->fwd);
  g_autofree char *twice = g_strconcat(fp, fp, NULL);
  cr_assert_str_eq(fd, twice);
  const wl_layer *out = g_ptr_array_index(d.m->layers, d.m->layers->len - 1);
  cr_assert(roles_find(out->fwd, "teacher.logits", &n) >= 0 && roles_find(out->fwd, "kd_loss", &n) >= 0);
  cr_assert(roles_find(out->bwd, "kd_loss.bwd", &n) >= 0);
  roles_clear(&p);
  roles_clear(&d);
}

/* torchtitan's Llama 3.1 8B run (local batch 2 of 8192 tokens: T = 16384 per GPU). */
static void roles_titan(roles_setup *r, const char *extra)
{
  const char *sets[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16",
                        "model.rotary=unfused", extra, NULL};
  roles_build(r, "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", sets);
}

/* Sum of the bytes and count of the kernels of `list` whose name has `part` after the layer's
 * name ("layer1.ln1.pow": part "ln1."), in `phase` (-1: any). */
static double roles_bytes(const GArray *list, const char *part, int phase, int *count)
{
  double bytes = 0;
  *count = 0;
  for (guint i = 0; i < list->len; i++) {
    const wl_kernel *k = &g_array_index(list, wl_kernel, i);
    const char *dot = strchr(k->name, '.');
    if (dot && g_str_has_prefix(dot + 1, part) && (phase < 0 || (int)k->phase == phase)) {
      bytes += k->bytes;
      ++*count;
    }
  }
  return bytes;
}

/* torchtitan's per-op policy (parallelize_llama.py @ 9dec370) on a Llama 3 8B block (h 4096,
 * 8 of 32 heads of 128 for keys and values, ffn 14336): of the mms wq, wk, wv, wo, w1, w3, w2
 * it keeps the odd ones, so backward recomputes wk (T x 1024 x 4096), wo (T x 4096 x 4096) and
 * w3 (T x 14336 x 4096) and nothing else that is a GEMM or attention. It keeps per token: the
 * block input (4096), wq (4096), wv (1024), attention's output (4096), w1 (14336) and w2
 * (4096) in bf16, and attention's 32 fp32 softmax statistics: 63616 bytes. */
Test(roles, torchtitan_op_policy_recomputes_every_other_matmul)
{
  roles_setup r;
  roles_titan(&r, "training.eager_ops=true");
  const wl_layer *l = roles_block(&r);
  double T = 16384, flops = 0;
  int gemms = 0;
  for (guint i = 0; i < l->bwd->len; i++) {
    const wl_kernel *k = &g_array_index(l->bwd, wl_kernel, i);
    cr_assert(k->phase != WL_PHASE_RECOMPUTE || k->kclass != CFG_KCLASS_ATTENTION, "%s", k->name);
    if (k->phase == WL_PHASE_RECOMPUTE && k->kclass == CFG_KCLASS_GEMM) {
      gemms++;
      flops += k->flops;
    }
  }
  cr_assert_eq(gemms, 3);
  cr_assert_float_eq(flops, 2 * T * 4096 * (1024 + 4096 + 14336), 1);
  cr_assert_float_eq(l->recompute_flops, flops, 1);
  cr_assert_float_eq(l->saved_bytes, T * 63616, 1);
  int n;
  roles_bytes(l->bwd, "w3", WL_PHASE_RECOMPUTE, &n);
  cr_assert_eq(n, 1);
  roles_bytes(l->bwd, "residual2", WL_PHASE_RECOMPUTE, &n);
  cr_assert_eq(n, 0, "checkpointing stops early: the last add is not rerun");
  roles_bytes(l->bwd, "ln2.", WL_PHASE_RECOMPUTE, &n);
  cr_assert_eq(n, 8, "the second RMSNorm's eight ops run again");
  roles_clear(&r);
  /* Megatron's selective recomputation drops nothing FlashAttention keeps */
  roles_titan(&r, "training.selective=megatron");
  l = roles_block(&r);
  for (guint i = 0; i < l->bwd->len; i++)
    cr_assert_neq(g_array_index(l->bwd, wl_kernel, i).phase, WL_PHASE_RECOMPUTE);
  roles_clear(&r);
}

/* Eager PyTorch's ops, per element, in bytes (bf16 = 2, fp32 = 4): RMSNorm forward
 * float 2+4, pow 4+4, mean 4, add_eps and rsqrt ~0, mul 4+4, type_as 4+2, * weight 2+2 = 36
 * in 8 kernels; its backward 76 in 10; rotary float 6, complex product 8, type_as 6 = 20;
 * SwiGLU silu 2+2, product 2+2+2 = 10; repeat_kv reads 1024 and writes 4096 values a token;
 * the loss's fp32 gradients 2 x 4 bytes per logit, and its backward nll_loss 4 (an fp32
 * gradient written), log_softmax 4 + 4 + 4, the cast to bf16 4 + 2: 22 bytes per logit. */
Test(roles, torchtitan_eager_ops_by_hand)
{
  roles_setup r;
  roles_titan(&r, "training.eager_ops=true");
  const wl_layer *l = roles_block(&r);
  double T = 16384, h = 4096;
  int n;
  cr_assert_float_eq(roles_bytes(l->fwd, "ln1.", WL_PHASE_FORWARD, &n), 36 * T * h, 1);
  cr_assert_eq(n, 8);
  cr_assert_float_eq(roles_bytes(l->bwd, "ln1.", WL_PHASE_BACKWARD, &n), 76 * T * h, 1);
  cr_assert_eq(n, 10);
  cr_assert_float_eq(roles_bytes(l->fwd, "rope_q.", WL_PHASE_FORWARD, &n), 20 * T * h, 1);
  cr_assert_eq(n, 3);
  cr_assert_float_eq(roles_bytes(l->fwd, "rope_k.", WL_PHASE_FORWARD, &n), 20 * T * 1024, 1);
  cr_assert_float_eq(roles_bytes(l->fwd, "act.", WL_PHASE_FORWARD, &n), 10 * T * 14336, 1);
  cr_assert_eq(n, 2);
  cr_assert_float_eq(roles_bytes(l->fwd, "repeat_k", WL_PHASE_FORWARD, &n), 2 * T * (1024 + 4096), 1);
  cr_assert_eq(n, 1);
  cr_assert_float_eq(r.m->loss_peak, 8 * T * 128256, 1);
  const wl_layer *out = g_ptr_array_index(r.m->layers, r.m->layers->len - 1);
  cr_assert_float_eq(roles_bytes(out->bwd, "cross_entropy.bwd", -1, &n), 22 * T * 128256, 1);
  roles_clear(&r);
  roles_titan(&r, "training.eager_ops=false");
  l = roles_block(&r);
  cr_assert_float_eq(roles_bytes(l->fwd, "ln1", WL_PHASE_FORWARD, &n), 4 * T * h, 1);
  cr_assert_eq(n, 1);
  roles_bytes(l->fwd, "repeat_k", -1, &n);
  cr_assert_eq(n, 0);
  cr_assert_float_eq(r.m->loss_peak, 0, 1e-9);
  roles_clear(&r);
}

/* torchtitan's compiled blocks with its eager loss (train.py @ 9dec370 leaves loss_fn
 * uncompiled): the blocks' fused ops, the eager loss's fp32 gradients and 22-byte backward. */
Test(roles, torchtitan_eager_loss_beside_compiled_blocks)
{
  roles_setup r;
  roles_titan(&r, "training.eager_ops=false");
  double T = 16384, V = 128256;
  int n;
  const wl_layer *out = g_ptr_array_index(r.m->layers, r.m->layers->len - 1);
  double fused_bwd = roles_bytes(out->bwd, "cross_entropy.bwd", -1, &n);
  roles_clear(&r);
  const char *sets[] = {"node.count=1", "parallel.dp=8", "training.global_batch=16",
                        "training.eager_ops=false", "training.eager_loss=true", NULL};
  roles_build(&r, "validation/torchtitan/workloads/llama3.1-8b-fsdp.yaml", sets);
  const wl_layer *l = roles_block(&r);
  cr_assert_float_eq(roles_bytes(l->fwd, "ln1", WL_PHASE_FORWARD, &n), 4 * T * 4096, 1);
  cr_assert_eq(n, 1, "the blocks stay compiled");
  cr_assert_float_eq(r.m->loss_peak, 8 * T * V, 1);
  out = g_ptr_array_index(r.m->layers, r.m->layers->len - 1);
  cr_assert_float_eq(roles_bytes(out->bwd, "cross_entropy.bwd", -1, &n), 22 * T * V, 1);
  cr_assert_float_eq(fused_bwd, 6 * T * V, 1);
  roles_clear(&r);
}

/* The first kernel of `role` and `phase` in a list. */
static const wl_kernel *roles_of_role(const GArray *kernels, wl_role role, wl_phase phase)
{
  for (guint i = 0; i < kernels->len; i++) {
    const wl_kernel *k = &g_array_index(kernels, wl_kernel, i);
    if (k->role == role && k->phase == phase)
      return k;
  }
  return NULL;
}

/* A linear layer's GEMMs carry their output shape for the cost model's tiles and waves: the
 * QKV projection of GPT-3 1.3B (hidden 2048) over 8 x 2048 tokens is 16384 x 6144 reducing
 * 2048 forward, its input gradient 16384 x 2048 reducing 6144, its weight gradient 2048 x
 * 6144 reducing the 16384 tokens; with TP 2 the column-parallel output halves. */
Test(roles, linear_gemms_carry_their_output_shape)
{
  roles_setup r;
  roles_build(&r, "gpt3-1.3b-dp", NULL);
  const wl_layer *l = g_ptr_array_index(r.m->layers, 1);
  const wl_kernel *f = roles_of_role(l->fwd, WL_ROLE_QKV, WL_PHASE_FORWARD);
  const wl_kernel *d = roles_of_role(l->bwd, WL_ROLE_QKV, WL_PHASE_DGRAD);
  const wl_kernel *w = roles_of_role(l->bwd, WL_ROLE_QKV, WL_PHASE_WGRAD);
  cr_assert(f && d && w);
  cr_expect(f->rows == 16384 && f->cols == 6144 && f->inner == 2048, "%g %g", f->rows, f->cols);
  cr_expect(d->rows == 16384 && d->cols == 2048 && d->inner == 6144, "%g %g", d->rows, d->cols);
  cr_expect(w->rows == 2048 && w->cols == 6144 && w->inner == 16384, "%g %g", w->rows, w->cols);
  roles_clear(&r);
  const char *tp2[] = {"parallel.tp=2", NULL};
  roles_build(&r, "gpt3-1.3b-dp", tp2);
  l = g_ptr_array_index(r.m->layers, 1);
  f = roles_of_role(l->fwd, WL_ROLE_QKV, WL_PHASE_FORWARD);
  cr_assert(f);
  cr_expect(f->rows == 16384 && f->cols == 3072, "%g %g", f->rows, f->cols);
  roles_clear(&r);
}
