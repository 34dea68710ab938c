/* Tensor, context, pipeline and data parallelism with ZeRO, as Megatron-LM and DeepSpeed run
 * them, laid out as a program: one class per pipeline stage (every tensor / context / data
 * parallel rank of a stage does the same thing), one template per kind of layer pass.
 *
 * Tensor parallelism (Megatron): column- then row-parallel linears, an all-reduce after each
 * row-parallel one in forward (attention projection, MLP down) and after each column-parallel
 * input gradient in backward, overlapped with the weight gradient; with sequence parallelism an
 * all-gather before and a reduce-scatter after instead. Pipeline: GPipe, 1F1B or interleaved
 * 1F1B, activations sent forward and gradients back, receives posted ahead. Data parallelism:
 * gradients reduced in buckets as the last micro-batch's backward produces them (all-reduce
 * without ZeRO, reduce-scatter with ZeRO 1-2, then an all-gather of the updated parameters);
 * ZeRO-3 gathers each layer's parameters in forward and again in backward and reduce-scatters
 * its gradients. Mixture of experts: the experts are split over an expert-parallel group of ep
 * data-parallel ranks; an all-to-all dispatches each MoE layer's token copies to their experts
 * and another combines them back (and both again in backward); expert gradients are reduced
 * over the expert-data-parallel group (the dp / ep ranks that hold the same experts). */
#include "workloads/workloads_internal.h"

#include <math.h>
#include <string.h>

/* What a template runs of a layer: its forward, its whole backward, or the backward split into
 * the input-gradient pass (B, on the pipeline's critical path) and the weight-gradient pass (W,
 * which zero-bubble schedules defer into the bubbles; Qi et al., ICLR 2024, Sec. 2). */
typedef enum { WL_PASS_F, WL_PASS_BW, WL_PASS_B, WL_PASS_W, WL_NPASSES } wl_pass_kind;

typedef struct {
  int t[WL_NPASSES]; /* template classes (B and W: -1 unless the schedule splits backward) */
  int paired[2];     /* forward and backward with the all-to-alls beside the compute, as
                      * DualPipe's forward-backward pairs run them (or the plain ones) */
} wl_pass;

typedef struct {
  const cfg_workload *w;
  const hw_cluster *hw;
  const wl_model *m;
  prog_program *p;
  int tp, cp, pp, dp, v, micro, ep;
  int stride[CFG_NDIMS];
  int fam_tp, fam_cp, fam_dp, fam_emb, fam_ep, fam_edp;
  double a2a[4];     /* bytes per GPU of a MoE layer's all-to-alls: dispatch, combine, and
                      * their backward passes */
  int fam_fsend, fam_frecv, fam_bsend, fam_brecv;
  int fam_rsend, fam_rrecv, fam_rbsend, fam_rbrecv; /* DualPipe's reverse direction, ZB-V's
                                                     * way back */
  bool split; /* backward runs as B and W passes (zb-h1, zb-v, dualpipe) */
  bool vshape; /* ZB-V: chunk 0 is chunk s of 2p, chunk 1 chunk 2p - 1 - s (the V's way back) */
  bool dual;  /* DualPipe: chunk 0 is stage s of the forward direction, chunk 1 stage pp - 1 - s
               * of the reverse one (a second copy of the parameters) */
  bool shared; /* the program shares its groups with one built before (prog_new_sharing_groups) */
  bool ds;    /* DeepSpeed's PipelineEngine runs the stages (parallel.pipeline_engine) */
  wl_pass *passes; /* per wl_model layer (blocks share one) */
  GHashTable *names; /* (layer, count, pass) -> macro name, interned in the program */
  /* per (layer, pass): the count last named there and its name, looked at first (a layer
   * starts runs of one length but where gradients are bucketed; the table's lookup per macro
   * was a fiftieth of a configuration) */
  struct wl_name_slot *name_slots;
  wl_state_bytes sb;
  double act_bytes;  /* one micro-batch's activation sent between stages */
  struct wl_passes_at *record; /* where each stage's passes begin, when asked (NULL: not) */
} wl_par;

/* ---- rank layout ---------------------------------------------------------------------------- */

static int wl_size(const wl_par *x, cfg_dim d)
{
  const int sizes[CFG_NDIMS] = {[CFG_DIM_TP] = x->tp, [CFG_DIM_CP] = x->cp, [CFG_DIM_PP] = x->pp,
                                [CFG_DIM_DP] = x->dp};
  return sizes[d];
}

static void wl_strides(wl_par *x)
{
  int s = 1;
  for (int i = 0; i < CFG_NDIMS; i++) {
    cfg_dim d = x->w->parallel.placement[i];
    x->stride[d] = s;
    s *= wl_size(x, d);
  }
}

static int wl_coord(const wl_par *x, int rank, cfg_dim d)
{
  return rank / x->stride[d] % wl_size(x, d);
}

static int wl_rank_with(const wl_par *x, int rank, cfg_dim d, int value)
{
  return rank + (value - wl_coord(x, rank, d)) * x->stride[d];
}

/* Puts every rank in its group of `family`: the ranks that differ only along `dims`. Each group
 * is built once, from its member with coordinate 0 along those dimensions. */
static void wl_group_family(wl_par *x, int family, const cfg_dim *dims, int ndims)
{
  int n = 1;
  for (int i = 0; i < ndims; i++)
    n *= wl_size(x, dims[i]);
  g_autofree int *ranks = g_new(int, n);
  for (int rank = 0; rank < x->p->nranks; rank++) {
    bool leader = true;
    for (int i = 0; i < ndims && leader; i++)
      leader = wl_coord(x, rank, dims[i]) == 0;
    if (!leader)
      continue;
    /* the leader's coordinates along `dims` are 0: a member is the leader plus its own
     * coordinates times the strides (wl_rank_with's divisions per member were 0.4 % of
     * a configuration) */
    for (int k = 0; k < n; k++) {
      int r = rank, rest = k;
      for (int i = 0; i < ndims; i++) {
        r += rest % wl_size(x, dims[i]) * x->stride[dims[i]];
        rest /= wl_size(x, dims[i]);
      }
      ranks[k] = r;
    }
    int g = prog_group_add(x->p, ranks, n);
    for (int k = 0; k < n; k++)
      prog_family_set(x->p, family, ranks[k], g);
  }
}

static int wl_pair(wl_par *x, int a, int b)
{
  int r[2] = {a, b};
  return prog_group_add(x->p, r, 2);
}

/* Expert parallelism splits the data-parallel coordinate d into d / ep (which group) and
 * d % ep (which experts): the ep group runs consecutive coordinates, the expert-data-parallel
 * group the ones that hold the same experts (with every context-parallel rank). */
static void wl_expert_groups(wl_par *x)
{
  int edp = x->dp / x->ep;
  g_autofree int *ranks = g_new(int, MAX(x->ep, edp * x->cp));
  for (int r = 0; r < x->p->nranks; r++) {
    int d = wl_coord(x, r, CFG_DIM_DP);
    if (d % x->ep == 0) { /* the first rank of its expert-parallel group */
      for (int k = 0; k < x->ep; k++)
        ranks[k] = wl_rank_with(x, r, CFG_DIM_DP, d + k);
      int g = prog_group_add(x->p, ranks, x->ep);
      for (int k = 0; k < x->ep; k++)
        prog_family_set(x->p, x->fam_ep, ranks[k], g);
    }
    if (d < x->ep && wl_coord(x, r, CFG_DIM_CP) == 0) {
      int n = 0;
      for (int c = 0; c < x->cp; c++)
        for (int k = 0; k < edp; k++)
          ranks[n++] = wl_rank_with(x, wl_rank_with(x, r, CFG_DIM_CP, c), CFG_DIM_DP, d + k * x->ep);
      int g = prog_group_add(x->p, ranks, n);
      for (int k = 0; k < n; k++)
        prog_family_set(x->p, x->fam_edp, ranks[k], g);
    }
  }
}

/* DualPipe's reverse direction and ZB-V's way back flow from stage s to s - 1: their own groups
 * (never shared with the forward direction's, whose transfers between the same two ranks come
 * in another order), each registered once from its sender. */
static void wl_reverse_channels(wl_par *x, int r, int s)
{
  if (s > 0) {
    int prev = wl_rank_with(x, r, CFG_DIM_PP, s - 1), pair[2] = {r, prev};
    int g = prog_group_add_private(x->p, pair, 2);
    prog_family_set(x->p, x->fam_rsend, r, g);
    prog_family_set(x->p, x->fam_rrecv, prev, g);
  }
  if (s < x->pp - 1) {
    int next = wl_rank_with(x, r, CFG_DIM_PP, s + 1), pair[2] = {r, next};
    int g = prog_group_add_private(x->p, pair, 2);
    prog_family_set(x->p, x->fam_rbsend, r, g);
    prog_family_set(x->p, x->fam_rbrecv, next, g);
  }
}

/* A family of the program: new, or the one of that name when the groups are shared. */
static int wl_family(wl_par *x, const char *name, prog_dim dim)
{
  return x->shared ? prog_family_find(x->p, name) : prog_family_add(x->p, name, dim);
}

static void wl_families(wl_par *x)
{
  x->fam_tp = wl_family(x, "tp", PROG_DIM_TP);
  x->fam_cp = wl_family(x, "cp", PROG_DIM_CP);
  x->fam_dp = wl_family(x, "dp", PROG_DIM_DP);
  if (x->m->moe_tokens > 0) {
    x->fam_ep = wl_family(x, "ep", PROG_DIM_EP);
    x->fam_edp = wl_family(x, "edp", PROG_DIM_DP);
  }
  x->fam_emb = wl_family(x, "embedding", PROG_DIM_DP);
  x->fam_fsend = wl_family(x, "pp-send-next", PROG_DIM_PP);
  x->fam_frecv = wl_family(x, "pp-recv-prev", PROG_DIM_PP);
  x->fam_bsend = wl_family(x, "pp-send-prev", PROG_DIM_PP);
  x->fam_brecv = wl_family(x, "pp-recv-next", PROG_DIM_PP);
  if (x->dual || x->vshape) {
    x->fam_rsend = wl_family(x, "pp-reverse-send-prev", PROG_DIM_PP);
    x->fam_rrecv = wl_family(x, "pp-reverse-recv-next", PROG_DIM_PP);
    x->fam_rbsend = wl_family(x, "pp-reverse-send-next", PROG_DIM_PP);
    x->fam_rbrecv = wl_family(x, "pp-reverse-recv-prev", PROG_DIM_PP);
  }
}

/* The pipeline pairs of rank a: (a, its next stage's rank) and (a, its previous stage's), each
 * made when first named; `made` holds their ids (-1: not yet). Every other pair of the program
 * differs along another dimension than the pipeline's, so a pair first named here is new: no
 * search for it (a quarter of making the groups). */
static int wl_pp_pair(wl_par *x, int *made, int a, int b)
{
  if (made[a] < 0)
    made[a] = prog_pair_add_new(x->p, (const int[]){a, b});
  return made[a];
}

/* Each rank's sends and receives to the neighbouring stages (the last stage feeds the first
 * stage's next chunk when interleaving), and the embedding's pair of first and last stage, in
 * the order rank by rank that decides the groups' ids. */
static void wl_pipeline_groups(wl_par *x)
{
  prog_program *p = x->p;
  int n = p->nranks, step = x->stride[CFG_DIM_PP];
  /* per rank, its pair with the next stage and with the previous one (the same pair when pp
   * is 2) */
  g_autofree int *made = g_new(int, 2 * (gsize)n);
  for (int r = 0; r < 2 * n; r++)
    made[r] = -1;
  int *to_next = made, *to_prev = x->pp > 2 ? made + n : made;
  int *fsend = prog_family_groups(p, x->fam_fsend), *frecv = prog_family_groups(p, x->fam_frecv);
  int *bsend = prog_family_groups(p, x->fam_bsend), *brecv = prog_family_groups(p, x->fam_brecv);
  int *emb = prog_family_groups(p, x->fam_emb);
  for (int r = 0; r < n; r++) {
    int s = wl_coord(x, r, CFG_DIM_PP), first = r - s * step;
    int next = first + (s + 1) % x->pp * step, prev = first + (s + x->pp - 1) % x->pp * step;
    fsend[r] = wl_pp_pair(x, to_next, r, next);
    frecv[r] = wl_pp_pair(x, to_next, prev, r);
    bsend[r] = wl_pp_pair(x, to_prev, r, prev);
    brecv[r] = wl_pp_pair(x, to_prev, next, r);
    if (x->dual || x->vshape)
      wl_reverse_channels(x, r, s);
    if (s == 0 || s == x->pp - 1) /* (first, last): the first stage's previous */
      emb[r] = wl_pp_pair(x, to_prev, first, first + (x->pp - 1) * step);
  }
}

static void wl_groups(wl_par *x)
{
  prog_program *p = x->p;
  const cfg_dim tp[] = {CFG_DIM_TP}, cp[] = {CFG_DIM_CP}, dp[] = {CFG_DIM_DP, CFG_DIM_CP};
  wl_families(x);
  if (x->shared) /* ranks, classes and groups came with the program */
    return;
  if (x->m->moe_tokens > 0)
    wl_expert_groups(x);
  wl_group_family(x, x->fam_tp, tp, 1);
  wl_group_family(x, x->fam_cp, cp, 1);
  wl_group_family(x, x->fam_dp, dp, 2);
  for (int r = 0; r < p->nranks; r++)
    prog_rank_set_class(p, r, wl_coord(x, r, CFG_DIM_PP));
  if (x->pp > 1)
    wl_pipeline_groups(x);
}

void wl_groups_key_of(const cfg_workload *w, const wl_model *m, wl_groups_key *k)
{
  const cfg_parallel *par = &w->parallel;
  bool moe = m->moe_tokens > 0;
  *k = (wl_groups_key){.tp = par->tp, .cp = par->cp, .pp = par->pp, .dp = par->dp,
                       .ep = moe ? MAX(par->ep, 1) : 0, .moe = moe,
                       .reverse = par->pp > 1 && (par->schedule == CFG_SCHED_DUALPIPE ||
                                                  par->schedule == CFG_SCHED_ZB_V)};
  memcpy(k->placement, par->placement, sizeof k->placement);
}

bool wl_groups_key_equal(const wl_groups_key *a, const wl_groups_key *b)
{
  return a->tp == b->tp && a->cp == b->cp && a->pp == b->pp && a->dp == b->dp &&
         a->ep == b->ep && a->moe == b->moe && a->reverse == b->reverse &&
         memcmp(a->placement, b->placement, sizeof a->placement) == 0;
}

/* ---- templates -------------------------------------------------------------------------------- */

/* A kernel by what it is and whether it is forward work (forward or recomputed). */
typedef struct {
  wl_role role;
  bool forward;
} wl_until;

typedef struct {
  wl_par *x;
  int t;             /* template class */
  uint32_t last;     /* last op on the compute chain */
  bool has_last;
  uint32_t before_last; /* the compute op before it (what `last` waited for on the chain) */
  bool has_before_last;
  uint32_t beside;   /* a collective that runs beside the next compute op: the one after waits */
  bool has_beside;
  uint32_t pending;  /* a collective the next compute op waits for */
  bool has_pending;
  uint32_t gather;   /* ZeRO-3 parameter all-gather every compute op waits for */
  bool has_gather;
  uint32_t deferred; /* a collective a later kernel waits for: the next weight gradient, or
                      * with until_role the next kernel that is `until` */
  bool has_deferred;
  bool until_role;
  wl_until until;
  wl_pass_kind pass;
  bool paired; /* the all-to-alls run beside the compute (DualPipe's forward-backward pairs) */
  int ring_step; /* context parallelism: the ring attention steps emitted so far */
} wl_tb;

/* Whether kernel `k` is the one a deferred collective waits for. */
static bool wl_tb_waits_for(const wl_tb *b, const wl_kernel *k)
{
  if (!b->until_role)
    return k->phase == WL_PHASE_WGRAD;
  return k->role == b->until.role && wl_is_forward(k) == b->until.forward;
}

static uint32_t wl_tb_compute(wl_tb *b, const wl_kernel *k)
{
  uint32_t deps[3];
  uint32_t n = 0;
  if (b->has_pending)
    deps[n++] = b->pending;
  if (b->has_deferred && wl_tb_waits_for(b, k)) {
    deps[n++] = b->deferred;
    b->has_deferred = false;
  }
  if (b->has_gather && !b->has_last)
    deps[n++] = b->gather;
  uint32_t op = wl_emit_kernel(b->x->p, b->t, k, deps, n);
  b->before_last = b->last;
  b->has_before_last = b->has_last;
  b->last = op;
  b->has_last = true;
  b->has_pending = false;
  if (b->has_beside) { /* it ran beside this op: the next one waits for both */
    b->pending = b->beside;
    b->has_pending = true;
    b->has_beside = false;
  }
  return op;
}

typedef enum {
  WL_ASYNC,
  WL_BLOCKING,
  WL_BEFORE_WGRAD,
  WL_BESIDE_NEXT, /* pipelined with the next compute op (the op after both waits) */
  WL_BESIDE_LAST, /* pipelined with the last compute op (the next op waits for both) */
} wl_wait;

/* A collective after the last compute op, that the next compute op waits for (WL_BLOCKING),
 * the next weight-gradient kernel waits for, or nothing in the template does; or one that
 * runs beside a GEMM in chunks, as Transformer Engine's userbuffers overlap does. */
/* parallel.tp_sync: before a blocking tensor-parallel collective, the GPU waits this long per
 * rank of the group beyond the first (a fitted cost per collective, not bandwidth: see the
 * key's doc). An op of fixed time on the compute stream, no kernel launch; it becomes `last`. */
static void wl_tb_tp_sync(wl_tb *b, uint32_t *dep, bool *has_dep)
{
  double wait = b->x->w->parallel.tp_sync * (b->x->tp - 1);
  if (!(wait > 0))
    return;
  uint32_t op = prog_compute(b->x->p, b->t, "tp sync", CFG_KCLASS_OTHER, b->x->m->dtype, 0, 0, dep,
                             *has_dep ? 1 : 0);
  prog_op_at(b->x->p, b->t, op)->fixed_time = wait;
  b->last = *dep = op;
  b->has_last = *has_dep = true;
}

/* training.tp_coll_host: the calls from Python that issue a tensor-parallel collective, counted
 * from Transformer Engine v2.12's transformer_engine/pytorch/distributed.py: allreduce is
 * get_distributed_world_size and torch.distributed.all_reduce; gather_along_first_dim adds
 * torch.empty and inp.contiguous() to the all_gather_into_tensor, reduce_scatter_along_first_dim
 * also torch.cuda.current_device(); one asynchronous (the input gradient's, the re-gathered input
 * of a weight gradient) is waited for later, one call more. Userbuffers' overlapped collectives
 * are issued from C++ inside the GEMM's call. */
static uint8_t wl_tp_host_ops(const wl_par *x, prog_coll coll, wl_wait wait)
{
  const cfg_workload *w = x->w;
  if (!w->training.tp_coll_host)
    return 0;
  bool ub = w->parallel.tp_comm_overlap && w->parallel.sequence_parallel;
  if (ub && coll != PROG_COLL_ALLREDUCE)
    return 0;
  uint8_t later_wait = wait == WL_BESIDE_NEXT || wait == WL_BEFORE_WGRAD || wait == WL_ASYNC;
  switch (coll) {
  case PROG_COLL_ALLREDUCE:
    return 2 + later_wait;
  case PROG_COLL_ALLGATHER:
    return 4 + later_wait;
  case PROG_COLL_REDUCESCATTER:
    return 5 + later_wait;
  default:
    return 0;
  }
}

static void wl_tb_comm(wl_tb *b, prog_stream stream, int family, prog_coll coll, double bytes,
                       const char *name, wl_wait wait)
{
  uint32_t deps[1] = {b->last};
  bool has_dep = b->has_last;
  if (wait == WL_BESIDE_LAST) {
    deps[0] = b->before_last;
    has_dep = b->has_before_last;
  }
  if (stream == PROG_STREAM_TP && wait == WL_BLOCKING)
    wl_tb_tp_sync(b, deps, &has_dep);
  uint32_t op = prog_comm(b->x->p, b->t, stream, name, coll, family, bytes, deps, has_dep ? 1 : 0);
  if (stream == PROG_STREAM_TP)
    prog_op_at(b->x->p, b->t, op)->host_ops = wl_tp_host_ops(b->x, coll, wait);
  if (wait == WL_BESIDE_NEXT) {
    b->beside = op;
    b->has_beside = true;
  } else if (wait == WL_BLOCKING || wait == WL_BESIDE_LAST) {
    b->pending = op;
    b->has_pending = true;
  } else if (wait == WL_BEFORE_WGRAD) {
    b->deferred = op;
    b->has_deferred = true;
    b->until_role = false;
  }
}


/* Megatron's split of a transformer layer's GEMMs over the tensor-parallel group: column-
 * parallel ones take the whole input and produce a shard of the output, row-parallel ones (and
 * the vocabulary-parallel embedding) produce partial sums of the whole output. Only the GEMM
 * itself: the fp8 cast before it shares its role, and the collective runs once. */
static bool wl_column_parallel(const wl_kernel *k)
{
  return k->kclass == CFG_KCLASS_GEMM &&
         (k->role == WL_ROLE_QKV || k->role == WL_ROLE_MLP_UP || k->role == WL_ROLE_LOGITS);
}

/* Bytes per element of an activation between kernels: 8-bit training keeps them in 16 bits
 * (Transformer Engine's GEMMs write bf16; Megatron's pipeline sends its pipeline_dtype, bf16;
 * attention's K and V stay bf16). */
static double wl_activation_bytes(const wl_model *m)
{
  return MAX(2.0, cfg_dtype_bytes(m->dtype));
}

static bool wl_row_parallel(const wl_kernel *k)
{
  return k->kclass == CFG_KCLASS_GEMM && (k->role == WL_ROLE_ATTN_OUT || k->role == WL_ROLE_MLP_DOWN);
}

/* Tensor-parallel collectives around the kernel `k` of a transformer layer (Megatron). */
static void wl_tp_before(wl_tb *b, const wl_kernel *k, double act)
{
  wl_par *x = b->x;
  if (x->tp == 1 || !x->w->parallel.sequence_parallel)
    return;
  /* sequence parallel: gather the sequence before a column-parallel GEMM; in backward, gather
   * the output gradient of a row-parallel one before its input gradient, and re-gather a
   * column-parallel GEMM's input for its weight gradient while its input gradient runs */
  wl_wait gemm = x->w->parallel.tp_comm_overlap ? WL_BESIDE_NEXT : WL_BLOCKING;
  if (wl_is_forward(k) && wl_column_parallel(k))
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, PROG_COLL_ALLGATHER, act, "tp allgather", gemm);
  if (k->phase == WL_PHASE_DGRAD && wl_row_parallel(k))
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, PROG_COLL_ALLGATHER, act, "tp allgather grads", gemm);
  if (k->phase == WL_PHASE_DGRAD && wl_column_parallel(k) && b->pass == WL_PASS_BW)
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, PROG_COLL_ALLGATHER, act, "tp allgather input",
               WL_BEFORE_WGRAD);
}

/* A weight-gradient pass on its own: a column-parallel GEMM's input is gathered again before
 * its weight gradient (sequence parallelism), with no input gradient to hide it under. */
static void wl_tp_weight_input(wl_tb *b, const wl_kernel *k, double act)
{
  wl_par *x = b->x;
  if (x->tp > 1 && x->w->parallel.sequence_parallel && wl_column_parallel(k))
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, PROG_COLL_ALLGATHER, act, "tp allgather input",
               WL_BLOCKING);
}

/* The reduction of a row-parallel GEMM's partial sums. Overlapped, it runs beside the GEMM; a
 * GEMM in pieces (Transformer Engine's pipeline) reduce-scatters each piece once it is done, so
 * the last piece's waits for the GEMM's end, and the next kernel for it. */
static void wl_tp_reduce_output(wl_tb *b, const wl_kernel *k, prog_coll reduce, double act,
                                bool beside)
{
  wl_par *x = b->x;
  const char *name = x->w->parallel.sequence_parallel ? "tp reducescatter" : "tp allreduce";
  if (!beside) {
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, reduce, act, name, WL_BLOCKING);
    return;
  }
  if (k->split_cols <= 1) {
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, reduce, act, name, WL_BESIDE_LAST);
    return;
  }
  double last = act / k->split_cols;
  wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, reduce, act - last, name, WL_BESIDE_LAST);
  wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, reduce, last, "tp reducescatter (last piece)",
             WL_BLOCKING);
}

static void wl_tp_after(wl_tb *b, const wl_kernel *k, double act)
{
  wl_par *x = b->x;
  if (x->tp == 1)
    return;
  bool sp = x->w->parallel.sequence_parallel;
  prog_coll reduce = sp ? PROG_COLL_REDUCESCATTER : PROG_COLL_ALLREDUCE;
  bool partial_sums = wl_row_parallel(k) || k->role == WL_ROLE_LOOKUP;
  /* overlapped, a row-parallel GEMM's output is reduce-scattered chunk by chunk as it comes */
  bool beside = x->w->parallel.tp_comm_overlap && sp && wl_row_parallel(k);
  if (wl_is_forward(k) && partial_sums)
    wl_tp_reduce_output(b, k, reduce, act, beside);
  if (wl_is_forward(k) && k->role == WL_ROLE_LOSS) /* max, sum and target logit over the vocabulary */
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, PROG_COLL_ALLREDUCE, 3.0 * x->m->tokens * 4,
               "tp allreduce (loss)", WL_BLOCKING);
  /* backward: the input gradient of a column-parallel GEMM is reduced while its weight
   * gradient is computed (Megatron's asynchronous all-reduce), and the layer's backward goes
   * on only once it is done: Megatron's LinearWithGradAccumulationAndAsyncCommunication
   * waits on the handle before returning the input gradient, and Transformer Engine's
   * LayerNormLinear before its norm's backward (dgrad_work.wait()); or, as an autograd op of
   * its own, after it: a serial stream takes the same time with it right after the input
   * gradient, which keeps it in the B pass of the zero-bubble schedules */
  if (k->phase == WL_PHASE_DGRAD && wl_column_parallel(k))
    wl_tb_comm(b, PROG_STREAM_TP, x->fam_tp, reduce, act, sp ? "tp reducescatter" : "tp allreduce",
               x->w->parallel.tp_async_dgrad ? WL_BESIDE_NEXT : WL_BLOCKING);
}

/* Chunks of K and V (or their gradients) a rank passes on beside ring step `step` of `cp`
 * (Transformer Engine's AttnFuncWithCP @ v1.4: forward sends the next step's K and V beside
 * each step but the last; backward sends K and V beside the first, K, V and the running dK, dV
 * beside the middle ones, and the gradients alone beside the last). */
static int wl_ring_chunks(int step, int cp, bool forward)
{
  if (forward)
    return step < cp - 1;
  return (step < cp - 1) + (step > 0);
}

/* Elements of K and V a rank holds for its share of the micro-batch's tokens. PyTorch's ring
 * passes them as its SDPA op takes them, one head per query head (aten's flash and efficient
 * attention ops have no grouped-query form; torchtitan repeats K and V before SDPA, repeat_kv
 * in models/llama/model.py @ 9dec370 and 820504e). */
static double wl_cp_chunk(const wl_par *x)
{
  const cfg_model *cm = &x->w->model;
  double heads = x->w->parallel.cp_exchange == CFG_CP_ALLGATHER ? cm->heads : cm->kv_heads;
  return 2.0 * x->m->tokens * heads * (cm->hidden / cm->heads) / x->tp;
}

/* Bytes of a gather over the CP group that moves one `bytes` buffer to each neighbour. */
static double wl_cp_hop(const wl_par *x, double bytes)
{
  return bytes * x->cp / (x->cp - 1);
}

/* PyTorch's context_parallel with rotate method allgather (_AllGatherRotater, torch/distributed/
 * tensor/experimental/_attention.py): forward and backward each gather all ranks' K and V once,
 * beside the first step (it needs only the local chunk; the next steps wait). Backward passes
 * the running dK, dV on to the next rank after every step (its dkv rotater is always the
 * all-to-all ring), in fp32 (convert_to_f32): the one after step i runs beside step i + 1. */
static void wl_cp_allgather_before(wl_tb *b, const wl_kernel *k, int step, double chunk)
{
  wl_par *x = b->x;
  if (step == 0)
    wl_tb_comm(b, PROG_STREAM_CP, x->fam_cp, PROG_COLL_ALLGATHER, chunk * x->cp,
               "cp allgather kv", WL_BESIDE_NEXT);
  else if (!wl_is_forward(k))
    wl_tb_comm(b, PROG_STREAM_CP, x->fam_cp, PROG_COLL_ALLGATHER,
               wl_cp_hop(x, wl_cp_chunk(x) * 4.0), "cp ring dkv", WL_BESIDE_NEXT);
}

/* The last step's dK, dV reach their owner before the layer's input gradient can use them. */
static void wl_cp_allgather_after(wl_tb *b, const wl_kernel *k)
{
  wl_par *x = b->x;
  if (x->cp == 1 || x->w->parallel.cp_exchange != CFG_CP_ALLGATHER || wl_is_forward(k) ||
      k->kclass != CFG_KCLASS_ATTENTION || k->role != WL_ROLE_ATTENTION)
    return;
  wl_tb_comm(b, PROG_STREAM_CP, x->fam_cp, PROG_COLL_ALLGATHER, wl_cp_hop(x, wl_cp_chunk(x) * 4.0),
             "cp ring dkv", WL_BLOCKING);
}

/* Context parallelism: a ring (Transformer Engine's P2P exchange) that passes one chunk of K
 * and V to the next rank beside each attention step, so a step waits only for the chunk its
 * predecessor brought. Each hop is a gather over the CP group of one chunk per rank: the
 * same bytes on the same neighbour links as the ring's send and receive. */
static void wl_cp_around(wl_tb *b, const wl_kernel *k)
{
  wl_par *x = b->x;
  if (x->cp == 1 || k->kclass != CFG_KCLASS_ATTENTION ||
      (k->role != WL_ROLE_ATTENTION && k->role != WL_ROLE_RING_STEP))
    return;
  double chunk = wl_cp_chunk(x) * wl_activation_bytes(x->m);
  int step = b->ring_step++ % x->cp;
  if (x->w->parallel.cp_exchange == CFG_CP_ALLGATHER) {
    wl_cp_allgather_before(b, k, step, chunk);
    return;
  }
  int chunks = wl_ring_chunks(step, x->cp, wl_is_forward(k));
  if (chunks == 0)
    return;
  /* a gather of n chunks moves (n - 1) of them to each rank: this many bytes move `chunks` */
  double bytes = chunks * wl_cp_hop(x, chunk);
  wl_tb_comm(b, PROG_STREAM_CP, x->fam_cp, PROG_COLL_ALLGATHER, bytes,
             wl_is_forward(k) ? "cp ring kv" : "cp ring kv dkv", WL_BESIDE_NEXT);
}

/* A collective after the last compute op that the next kernel of `until` waits for. */
static void wl_tb_comm_until(wl_tb *b, prog_stream stream, int family, prog_coll coll,
                             double bytes, const char *name, wl_until until)
{
  wl_tb_comm(b, stream, family, coll, bytes, name, WL_ASYNC);
  prog_class *t = prog_class_at(b->x->p, b->t);
  b->deferred = t->ops->len - 1;
  b->has_deferred = true;
  b->until_role = true;
  b->until = until;
}

/* The four all-to-alls of a MoE layer, in the order of the all-to-all model's byte counts. */
typedef enum { WL_A2A_DISPATCH, WL_A2A_COMBINE, WL_A2A_COMBINE_BWD, WL_A2A_DISPATCH_BWD, WL_A2A_NONE } wl_a2a;

/* Which all-to-all follows kernel `k`: the dispatch after the copies are gathered by expert,
 * the combine after the experts; in backward, the combine's after the gradients are scattered
 * back to the copies, the dispatch's after the experts' input gradient. */
static wl_a2a wl_a2a_after(const wl_kernel *k)
{
  if (wl_is_forward(k))
    return k->role == WL_ROLE_PERMUTE       ? WL_A2A_DISPATCH
           : k->role == WL_ROLE_EXPERT_DOWN ? WL_A2A_COMBINE
                                            : WL_A2A_NONE;
  if (k->role == WL_ROLE_UNPERMUTE && k->phase == WL_PHASE_BACKWARD)
    return WL_A2A_COMBINE_BWD;
  if (k->role == WL_ROLE_EXPERT_UP && k->phase == WL_PHASE_DGRAD)
    return WL_A2A_DISPATCH_BWD;
  return WL_A2A_NONE;
}

/* Mixture of experts: the dispatch all-to-all after the token copies are gathered by expert
 * (the shared experts run while it is in flight; the routed experts wait for it), the combine
 * after the experts; in backward, the combine's gradients to the experts and the dispatch's
 * back. With moe_overlap the two half batches hide each other's all-to-alls: nothing in the
 * layer waits for them, the layer takes the longer of its compute and its all-to-alls. */
static void wl_ep_after(wl_tb *b, const wl_kernel *k)
{
  static const char *const names[] = {"ep alltoall dispatch", "ep alltoall combine",
                                      "ep alltoall combine.bwd", "ep alltoall dispatch.bwd"};
  wl_par *x = b->x;
  wl_a2a i = wl_a2a_after(k);
  if (x->m->moe_tokens <= 0 || x->ep == 1 || i == WL_A2A_NONE)
    return;
  if (x->w->parallel.moe_overlap || b->paired)
    wl_tb_comm(b, PROG_STREAM_EP, x->fam_ep, PROG_COLL_ALLTOALL, x->a2a[i], names[i], WL_ASYNC);
  else if (i == WL_A2A_DISPATCH) /* the shared experts need not wait: the routed ones do */
    wl_tb_comm_until(b, PROG_STREAM_EP, x->fam_ep, PROG_COLL_ALLTOALL, x->a2a[i], names[i],
                     (wl_until){WL_ROLE_EXPERT_UP, true});
  else if (i == WL_A2A_DISPATCH_BWD) /* the weight gradients need not wait: the
                                      * permutation's backward does */
    wl_tb_comm_until(b, PROG_STREAM_EP, x->fam_ep, PROG_COLL_ALLTOALL, x->a2a[i], names[i],
                     (wl_until){WL_ROLE_PERMUTE, false});
  else
    wl_tb_comm(b, PROG_STREAM_EP, x->fam_ep, PROG_COLL_ALLTOALL, x->a2a[i], names[i], WL_BLOCKING);
}

/* The data-parallel collective of a layer's states: the dense part over the data-parallel
 * group, the routed experts over the expert-data-parallel one. */
static void wl_tb_states(wl_tb *b, const wl_layer *l, prog_coll coll, double bytes_per_param,
                         const char *name, bool gather)
{
  wl_par *x = b->x;
  double dense = l->params - l->expert_params;
  uint32_t first = 0;
  bool has_first = false;
  for (int part = 0; part < 2; part++) {
    double params = part ? l->expert_params : dense;
    if (params <= 0)
      continue;
    int fam = part ? x->fam_edp : x->fam_dp;
    if (gather) {
      uint32_t op = prog_comm(x->p, b->t, PROG_STREAM_DP, name, coll, fam, params * bytes_per_param,
                              NULL, 0);
      /* BACKWARD_POST: FSDP issues it from the later layer's post-backward hook, after that
       * layer's gradients, so it cannot run under them */
      prog_op_at(x->p, b->t, op)->on_chain =
          b->pass != WL_PASS_F && x->w->parallel.zero3_backward_post;
      if (!has_first) {
        first = op;
        has_first = true;
      }
    } else {
      wl_tb_comm(b, PROG_STREAM_DP, fam, coll, params * bytes_per_param, name, WL_ASYNC);
    }
  }
  if (gather && has_first) {
    b->gather = first;
    b->has_gather = true;
  }
}

/* DeepSpeed's ZeRO stage 3 (deepspeed/runtime/zero/ @ v0.14.0), bytes per parameter. After a
 * coalesced all-gather, AllGatherCoalescedHandle.wait cats each parameter out of the flat
 * buffer (2p; the rank's shard was catted in before it, 2p/N). Each gradient is copied into the
 * IPG bucket (contiguous_gradients: 2p); reduce_scatter_coalesced casts the bucket if the
 * reduction dtype differs (p + g), interleaves the ranks' chunks with a cat (2g) and divides it in
 * place by the world size (2g); the reduced shard is added into the gradient partition (3g/N).
 * Upper bound: a gather of a single tensor (one of stage3_prefetch_bucket_size elements or more
 * that opens a prefetch) is a view with no cat, and so is a bucket of one tensor that splits
 * evenly. */
static double wl_zero3_deepspeed_bytes(const wl_par *x, bool gather)
{
  double p = x->sb.weights, g = x->sb.grads, n = x->dp * x->cp;
  if (gather)
    return 2 * p + 2 * p / n;
  return 2 * p + (g != p ? p + g : 0) + 4 * g + 3 * g / n;
}

/* Bytes per parameter that a ZeRO-3 framework's copies stream through HBM after each
 * parameter all-gather (`gather`) or before each gradient reduce-scatter: PyTorch FSDP1 builds
 * the flat gradient from the views' gradients (autograd's cat), casts it to the reduction dtype
 * and divides it by its pre-divide factor (above 1 on 2 or more ranks) in place; FSDP2 splits
 * the gathered buffer into the parameters and copies the gradients into the reduce-scatter's
 * input, casting there, and lets NCCL average. DeepSpeed: wl_zero3_deepspeed_bytes. */
static double wl_zero3_copy_bytes(const wl_par *x, bool gather)
{
  double p = x->sb.weights, g = x->sb.grads;
  switch (x->w->parallel.zero3_copies) {
  case CFG_ZERO3_COPIES_FSDP1:
    return gather ? 0 : 2 * p + (g != p ? p + g : 0) + 2 * g;
  case CFG_ZERO3_COPIES_FSDP2:
    return gather ? 2 * p : p + g;
  case CFG_ZERO3_COPIES_DEEPSPEED:
    return wl_zero3_deepspeed_bytes(x, gather);
  default:
    return 0;
  }
}

/* ZeRO-3's copies of a layer's parameters or gradients: one memory-bound kernel on the compute
 * stream (the first op after a gather waits for it; a reduce-scatter waits for the copy). */
static void wl_tb_zero3_copy(wl_tb *b, const wl_layer *l, bool gather)
{
  double per_param = wl_zero3_copy_bytes(b->x, gather);
  if (!(per_param > 0) || !(l->params > 0))
    return;
  wl_kernel k = {.name = gather ? "zero3 param copy-out" : "zero3 grad copies",
                 .role = WL_ROLE_OTHER,
                 .phase = b->pass == WL_PASS_F ? WL_PHASE_FORWARD : WL_PHASE_BACKWARD,
                 .kclass = CFG_KCLASS_ELEMENTWISE,
                 .dtype = b->x->m->dtype,
                 .bytes = l->params * per_param};
  wl_tb_compute(b, &k);
}

/* Whether kernel `k` of a layer runs in pass `pass`. */
static bool wl_in_pass(const wl_kernel *k, wl_pass_kind pass)
{
  if (pass == WL_PASS_B)
    return k->phase != WL_PHASE_WGRAD;
  if (pass == WL_PASS_W)
    return k->phase == WL_PHASE_WGRAD;
  return true;
}

static const char *const wl_pass_names[WL_NPASSES] = {"fwd", "bwd", "bwd-input", "bwd-weight"};

static int wl_template(wl_par *x, const wl_layer *l, wl_pass_kind pass, bool paired)
{
  g_autofree char *name = g_strdup_printf("%s.%s%s", l->name, wl_pass_names[pass],
                                          paired ? "-paired" : "");
  wl_tb b = {.x = x, .t = prog_template_add(x->p, name), .pass = pass, .paired = paired};
  /* gathered GEMM inputs travel in the training dtype (Transformer Engine casts to fp8
   * before the gather); GEMM outputs are reduced in 16 bits */
  double act = x->m->tokens * x->w->model.hidden * (x->w->model.kind == CFG_MODEL_CNN ? 0 : 1);
  double gathered = act * cfg_dtype_bytes(x->m->dtype);
  act *= wl_activation_bytes(x->m);
  bool backward = pass != WL_PASS_F;
  bool zero3 = x->w->parallel.zero >= 3 && x->dp * x->cp > 1;
  if (zero3 && pass != WL_PASS_W) { /* gather this layer's parameters (prefetched) */
    wl_tb_states(&b, l, PROG_COLL_ALLGATHER, x->sb.weights, "zero3 allgather params", true);
    wl_tb_zero3_copy(&b, l, true);
  }
  const GArray *ks = backward ? l->bwd : l->fwd;
  for (guint i = 0; i < ks->len; i++) {
    const wl_kernel *k = &g_array_index(ks, wl_kernel, i);
    if (!wl_in_pass(k, pass))
      continue;
    if (pass == WL_PASS_W) {
      wl_tp_weight_input(&b, k, gathered);
      wl_tb_compute(&b, k);
      continue;
    }
    /* recomputation replays the forward, collectives included (wl_is_forward) */
    wl_tp_before(&b, k, gathered);
    wl_cp_around(&b, k);
    wl_tb_compute(&b, k);
    wl_cp_allgather_after(&b, k);
    wl_tp_after(&b, k, act);
    wl_ep_after(&b, k);
  }
  if (zero3 && (pass == WL_PASS_BW || pass == WL_PASS_W)) {
    wl_tb_zero3_copy(&b, l, false);
    wl_tb_states(&b, l, PROG_COLL_REDUCESCATTER, x->sb.grads, "zero3 reducescatter grads", false);
  }
  return b.t;
}

/* The templates of one layer: forward and backward, and what the schedule needs besides. */
static void wl_layer_templates(wl_par *x, const wl_layer *l, wl_pass *out)
{
  out->t[WL_PASS_F] = wl_template(x, l, WL_PASS_F, false);
  out->t[WL_PASS_BW] = wl_template(x, l, WL_PASS_BW, false);
  out->t[WL_PASS_B] = x->split ? wl_template(x, l, WL_PASS_B, false) : -1;
  out->t[WL_PASS_W] = x->split ? wl_template(x, l, WL_PASS_W, false) : -1;
  /* only a MoE layer's all-to-alls change when paired (moe_overlap already hides them) */
  bool pair = x->dual && l->moe && x->ep > 1 && !x->w->parallel.moe_overlap;
  out->paired[0] = pair ? wl_template(x, l, WL_PASS_F, true) : out->t[WL_PASS_F];
  out->paired[1] = pair ? wl_template(x, l, WL_PASS_BW, true) : out->t[WL_PASS_BW];
}

static void wl_templates(wl_par *x)
{
  const wl_model *m = x->m;
  x->passes = g_new0(wl_pass, m->layers->len);
  for (guint i = 0; i < m->layers->len; i++) {
    const wl_layer *l = g_ptr_array_index(m->layers, i);
    guint same = i;
    for (guint j = 1; j < i && same == i; j++) /* blocks of one kind run one kernel list */
      if (((const wl_layer *)g_ptr_array_index(m->layers, j))->fwd == l->fwd)
        same = j;
    if (same != i) {
      x->passes[i] = x->passes[same];
      continue;
    }
    wl_layer_templates(x, l, &x->passes[i]);
  }
}

/* ---- pipeline schedules ---------------------------------------------------------------------- */

typedef struct {
  wl_pass_kind pass;
  int chunk, mb;
  bool paired; /* DualPipe: half of a forward-backward pair (all-to-alls beside the other's compute) */
} wl_step;

/* A stage's passes, sized for the most any schedule runs: F, B and W of every micro-batch in
 * every chunk. */
static GArray *wl_order_new(const wl_par *x)
{
  return g_array_sized_new(FALSE, FALSE, sizeof(wl_step), (guint)(3 * x->micro * x->v));
}

static void wl_push(GArray *order, wl_pass_kind pass, int chunk, int mb, bool paired)
{
  wl_step st = {.pass = pass, .chunk = chunk, .mb = mb, .paired = paired};
  g_array_append_val(order, st);
}

/* The k-th forward (or backward) pass of a stage: which chunk, which micro-batch. */
static void wl_push_step(GArray *order, const wl_par *x, bool backward, int k)
{
  int p = x->pp, v = x->v, group = k % (p * v);
  int chunk = v > 1 ? (backward ? v - 1 - group / p : group / p) : 0;
  int mb = v > 1 ? (k / (p * v)) * p + k % p : k;
  wl_push(order, backward ? WL_PASS_BW : WL_PASS_F, chunk, mb, false);
}

/* ZB-H1 (Qi et al., ICLR 2024, Sec. 2.1): 1F1B's warm-up and steady state with each backward
 * split in B and W, stage s running W s micro-batches behind its B. Stage s then holds p - s
 * micro-batches awaiting B and s awaiting W (their Table 2: 1F1B's peak pM_B), and since B alone
 * is on the critical path the bubble shrinks to (p - 1)(T_F + T_B - T_W). */
static GArray *wl_schedule_zb_h1(const wl_par *x, int s)
{
  GArray *order = wl_order_new(x);
  int m = x->micro, warm = MIN(x->pp - s - 1, m), f = 0, b = 0, w = 0;
  while (f < warm)
    wl_push(order, WL_PASS_F, 0, f++, false);
  for (; b < m; b++) {
    if (f < m)
      wl_push(order, WL_PASS_F, 0, f++, false);
    wl_push(order, WL_PASS_B, 0, b, false);
    if (b >= s)
      wl_push(order, WL_PASS_W, 0, w++, false);
  }
  while (w < m)
    wl_push(order, WL_PASS_W, 0, w++, false);
  return order;
}

/* DualPipe's passes on one rank. Phase 0 is the direction whose start is nearer the rank (its
 * stage is min(s, pp - 1 - s) there), phase 1 the other; deferred weight passes run in order. */
typedef struct {
  GArray *order;
  int chunk[2];     /* chunk of each phase */
  int f[2], b[2];   /* passes issued per phase */
  GArray *pending;  /* wl_step of deferred W passes */
  guint next_w;
} wl_dual;

static void wl_dual_f(wl_dual *d, int ph, bool paired)
{
  wl_push(d->order, WL_PASS_F, d->chunk[ph], d->f[ph]++, paired);
}

/* A backward of phase `ph`: whole, or (zero bubble) its B now and its W when wl_dual_w says. */
static void wl_dual_b(wl_dual *d, int ph, bool zb, bool paired)
{
  int mb = d->b[ph]++;
  wl_push(d->order, zb ? WL_PASS_B : WL_PASS_BW, d->chunk[ph], mb, paired);
  if (zb)
    wl_push(d->pending, WL_PASS_W, d->chunk[ph], mb, false);
}

static void wl_dual_w(wl_dual *d)
{
  if (d->next_w < d->pending->len)
    g_array_append_val(d->order, g_array_index(d->pending, wl_step, d->next_w++));
}

/* DualPipe (DeepSeek-V3 report, Sec. 3.2.1; the order of deepseek-ai/DualPipe's eight steps):
 * micro-batches enter from both ends, half each way; rank s runs stage s of one direction and
 * stage pp - 1 - s of the other, so in the steady state a forward of one direction pairs with a
 * backward of the other and each hides the other's all-to-alls. */
static GArray *wl_schedule_dualpipe(const wl_par *x, int s)
{
  int n = x->pp, half = n / 2, hr = MIN(s, n - 1 - s), chunks = x->micro / 2;
  bool second = s >= half;
  wl_dual d = {.order = wl_order_new(x),
               .chunk = {second ? 1 : 0, second ? 0 : 1},
               .pending = g_array_new(FALSE, FALSE, sizeof(wl_step))};
  for (int i = 0; i < (half - hr - 1) * 2; i++) /* 1: forwards of phase 0 */
    wl_dual_f(&d, 0, false);
  for (int i = 0; i < hr + 1; i++) { /* 2: forwards of both */
    wl_dual_f(&d, 0, false);
    wl_dual_f(&d, 1, false);
  }
  for (int i = 0; i < half - hr - 1; i++) { /* 3: B, W, F of phase 1 */
    wl_dual_b(&d, 1, true, false);
    wl_dual_w(&d);
    wl_dual_f(&d, 1, false);
  }
  /* 4: the steady state, in pairs (the repository runs the middle ranks' first two apart,
   * which saves at most B - F once; the report's bubble is that of pairs throughout) */
  for (int i = 0; i < chunks - n + hr + 1; i++) {
    wl_dual_f(&d, 0, true);
    wl_dual_b(&d, 1, false, true);
    wl_dual_f(&d, 1, true);
    wl_dual_b(&d, 0, false, true);
  }
  for (int i = 0; i < half - hr - 1; i++) { /* 5: B of phase 1, then a pair */
    wl_dual_b(&d, 1, false, false);
    wl_dual_f(&d, 1, true);
    wl_dual_b(&d, 0, false, true);
  }
  bool zb = false;
  for (int i = 0, n6 = hr + 1; i < n6; i++) { /* 6: backwards, the second half split */
    zb = zb || (i == n6 / 2 && hr % 2 == 1);
    wl_dual_b(&d, 1, zb, false);
    zb = zb || (i == n6 / 2 && hr % 2 == 0);
    wl_dual_b(&d, 0, zb, false);
  }
  for (int i = 0; i < half - hr - 1; i++) { /* 7: W, then B of phase 0 */
    wl_dual_w(&d);
    wl_dual_b(&d, 0, true, false);
  }
  while (d.next_w < d.pending->len) /* 8: the remaining W */
    wl_dual_w(&d);
  g_array_free(d.pending, TRUE);
  return d.order;
}

/* ZB-V's passes on one rank: how many of each kind each chunk has issued. */
typedef struct {
  GArray *order;
  int m;
  int done[WL_NPASSES][2];
} wl_vee;

static void wl_vee_push(wl_vee *z, wl_pass_kind pass, int c)
{
  if (z->done[pass][c] < z->m)
    wl_push(z->order, pass, c, z->done[pass][c]++, false);
}

static void wl_vee_group(wl_vee *z, int c)
{
  wl_vee_push(z, WL_PASS_F, c);
  wl_vee_push(z, WL_PASS_B, c);
  wl_vee_push(z, WL_PASS_W, c);
}

/* ZB-V (Qi et al., ICLR 2024, Sec. 6): rank s holds chunks s and 2p - 1 - s of 2p, so a
 * micro-batch goes down the ranks and back up. Warm-up: 2p - 1 - s forwards of the first chunk
 * and s of the second, the second's interleaved as they arrive; then p - 1 - s groups F, B, W
 * of the second chunk, then groups of the two in turn until the forwards are done; then the
 * remaining B (the critical path) and last the remaining W. */
static GArray *wl_schedule_zb_v(const wl_par *x, int s)
{
  int p = x->pp;
  wl_vee z = {.order = wl_order_new(x), .m = x->micro};
  for (int i = 0; i < 2 * p - 2 * s - 1; i++)
    wl_vee_push(&z, WL_PASS_F, 0);
  for (int i = 0; i < s; i++) {
    wl_vee_push(&z, WL_PASS_F, 1);
    wl_vee_push(&z, WL_PASS_F, 0);
  }
  for (int i = 0; i < p - 1 - s; i++)
    wl_vee_group(&z, 1);
  for (int c = 1; z.done[WL_PASS_F][0] < z.m || z.done[WL_PASS_F][1] < z.m; c = 1 - c)
    wl_vee_group(&z, c);
  while (z.done[WL_PASS_B][0] < z.m || z.done[WL_PASS_B][1] < z.m) {
    wl_vee_push(&z, WL_PASS_B, 1);
    wl_vee_push(&z, WL_PASS_B, 0);
  }
  while (z.done[WL_PASS_W][0] < z.m || z.done[WL_PASS_W][1] < z.m) {
    wl_vee_push(&z, WL_PASS_W, 1);
    wl_vee_push(&z, WL_PASS_W, 0);
  }
  return z.order;
}

/* The order in which stage s runs its forward and backward chunk passes: `warm` forwards, then
 * one forward and one backward in turn, then the remaining backwards (GPipe: all forwards
 * first). Interleaved 1F1B walks the chunks p micro-batches at a time (Megatron). */
static GArray *wl_schedule(const wl_par *x, int s)
{
  int p = x->pp, m = x->micro, v = x->v, total = m * v;
  cfg_schedule kind = p == 1 ? CFG_SCHED_1F1B : x->w->parallel.schedule;
  if (kind == CFG_SCHED_DUALPIPE)
    return wl_schedule_dualpipe(x, s);
  if (kind == CFG_SCHED_ZB_H1)
    return wl_schedule_zb_h1(x, s);
  if (kind == CFG_SCHED_ZB_V)
    return wl_schedule_zb_v(x, s);
  GArray *order = wl_order_new(x);
  int warm = kind == CFG_SCHED_GPIPE ? total
             : v > 1                 ? MIN((p - s - 1) * 2 + (v - 1) * p, total)
                                     : MIN(p - s - 1, total);
  int f = 0, b = 0;
  while (f < warm)
    wl_push_step(order, x, false, f++);
  while (f < total) {
    wl_push_step(order, x, false, f++);
    wl_push_step(order, x, true, b++);
  }
  while (b < total)
    wl_push_step(order, x, true, b++);
  return order;
}

/* ---- the stages ------------------------------------------------------------------------------ */

/* The micro-batch whose backward completes the step's weight gradients. */
static int wl_last_mb(const wl_par *x)
{
  return (x->dual ? x->micro / 2 : x->micro) - 1;
}

/* A stage's passes in the order it runs them and the op each begins at (start[order->len]: the
 * end of the step, the optimizer's ops, begins there). */
typedef struct {
  GArray *order; /* wl_step */
  guint *start;
} wl_stage_at;

struct wl_passes_at {
  int nstages;
  int last_mb; /* wl_last_mb of the program */
  wl_stage_at *stages;
  wl_pass *passes; /* the templates of each layer (wl_par's) */
};

void wl_passes_at_free(wl_passes_at *a)
{
  if (!a)
    return;
  for (int s = 0; s < a->nstages; s++) {
    if (a->stages[s].order)
      g_array_free(a->stages[s].order, TRUE);
    g_free(a->stages[s].start);
  }
  g_free(a->stages);
  g_free(a->passes);
  g_free(a);
}

typedef struct {
  wl_par *x;
  int cls, stage;
  double chunk_act[64]; /* activations one micro-batch leaves behind, per chunk (v <= 64) */
  uint32_t last_dp;     /* the last data-parallel collective */
  bool has_dp;
  double bucket;        /* parameters waiting in the current gradient bucket */
  double expert_bucket; /* ... of them, routed experts' */
  int buckets;
  uint32_t paired_recv; /* the gradients a paired backward receives, posted before its forward */
  bool has_paired_recv;
  /* DeepSpeed: the stage's last instruction, and the transfers its next step still owes */
  uint32_t ds_last;
  bool has_ds_last, ds_send_act, ds_send_grad;
  double block_params;  /* the stage's transformer blocks' (their linear weights cast to fp8) */
  double params;        /* the stage's, tied embedding copy included */
  double chunk_dense[64];    /* per chunk: its parameters but the routed experts' */
  uint32_t chunk_gather[64]; /* per chunk: the all-gather its first forward waits for */
  bool gated[64];            /* chunk_gather[c] holds one its first forward has not met yet */
  /* without virtual stages, per layer (by model index): the all-gather of the bucket whose
   * layers the first forward reaches at this one (WL_NO_GATHER elsewhere); NULL without */
  uint32_t *bucket_gather;
  bool buckets_gated; /* the first forward has not met bucket_gather yet */
} wl_st;

#define WL_NO_GATHER UINT32_MAX

/* Which of the pipeline's chunks chunk c of stage s is, and how many there are: interleaving
 * gives stage s chunks s, s + p, ...; DualPipe stage s of the forward direction and stage
 * p - 1 - s of the reverse one (both directions run the whole model, split in p). */
static int wl_chunk_index(const wl_par *x, int s, int c, int *chunks)
{
  *chunks = x->dual ? x->pp : x->pp * x->v;
  if (x->vshape)
    return c == 0 ? s : 2 * x->pp - 1 - s;
  return x->dual ? (c == 0 ? s : x->pp - 1 - s) : c * x->pp + s;
}

/* ZB-V's turn: the last rank passes its first chunk's output to its own second chunk, and its
 * second chunk's input gradient back to its first, without a transfer. */
static bool wl_next_here(const wl_par *x, int s, int c)
{
  return x->vshape && s == x->pp - 1 && c == 0;
}

static bool wl_prev_here(const wl_par *x, int s, int c)
{
  return x->vshape && s == x->pp - 1 && c == 1;
}

/* Layers of chunk c on stage s: chunk g of the blocks split into as many chunks as there are. */
static void wl_chunk_layers(const wl_par *x, int s, int c, guint *first, guint *count, bool *emb,
                            bool *out)
{
  int chunks, g = wl_chunk_index(x, s, c, &chunks);
  *emb = g == 0;
  *out = g == chunks - 1;
  if (x->m->blocks == 0) { /* a CNN: everything on the one stage */
    *first = 0;
    *count = x->m->layers->len;
    return;
  }
  int f, n;
  wl_chunk_blocks(x->m->blocks, chunks, g, &f, &n);
  *first = 1 + (guint)f;
  *count = (guint)n;
}

static double wl_chunk_activations(const wl_par *x, int s, int c)
{
  guint first, count;
  bool emb, out;
  wl_chunk_layers(x, s, c, &first, &count, &emb, &out);
  double a = 0;
  for (guint i = first; i < first + count; i++)
    a += ((const wl_layer *)g_ptr_array_index(x->m->layers, i))->saved_bytes;
  if (x->m->blocks > 0) {
    if (emb)
      a += ((const wl_layer *)g_ptr_array_index(x->m->layers, 0))->saved_bytes;
    if (out)
      a += ((const wl_layer *)g_ptr_array_index(x->m->layers, x->m->layers->len - 1))->saved_bytes;
  }
  return a;
}

/* Gradient bucket of `params` parameters is full after `after`: reduce it. */
static void wl_flush_bucket(wl_st *st, uint32_t after)
{
  wl_par *x = st->x;
  int zero = x->w->parallel.zero;
  for (int part = 0; part < 2; part++) {
    /* dense gradients over the data-parallel group, the experts' over the expert one */
    double *bucket = part ? &st->expert_bucket : &st->bucket;
    if (*bucket <= 0 || (part && x->dp * x->cp / x->ep == 1)) {
      *bucket = 0;
      continue;
    }
    char num[16];
    g_autofree char *name = g_strconcat(zero ? "reducescatter " : "allreduce ",
                                        part ? "expert " : "", "grads bucket ",
                                        wl_number(num, (guint)st->buckets++), NULL);
    st->last_dp = prog_comm(x->p, st->cls, PROG_STREAM_DP, name,
                            zero ? PROG_COLL_REDUCESCATTER : PROG_COLL_ALLREDUCE,
                            part ? x->fam_edp : x->fam_dp, *bucket * x->sb.reduced, &after, 1);
    st->has_dp = true;
    *bucket = 0;
  }
}

struct wl_name_slot {
  uint32_t count;
  const char *name;
};

static void wl_names_new(wl_par *x)
{
  x->names = g_hash_table_new(g_direct_hash, g_direct_equal);
  x->name_slots = g_new0(struct wl_name_slot, (gsize)x->m->layers->len * WL_NPASSES);
}

static void wl_names_free(wl_par *x)
{
  g_hash_table_destroy(x->names);
  g_free(x->name_slots);
}

static uint32_t wl_run_layer(wl_st *st, guint i, wl_pass_kind pass, bool paired, uint32_t count,
                             uint32_t *dep, bool has_dep)
{
  wl_par *x = st->x;
  const wl_layer *l = g_ptr_array_index(x->m->layers, i);
  bool pairable = pass == WL_PASS_F || pass == WL_PASS_BW;
  int t = paired && pairable ? x->passes[i].paired[pass] : x->passes[i].t[pass];
  /* every micro-batch runs the same passes: format each name once */
  gpointer key = GSIZE_TO_POINTER(((gsize)i << 24 | (gsize)count << 2 | (gsize)pass) + 1);
  struct wl_name_slot *slot = &x->name_slots[i * WL_NPASSES + pass];
  const char *name = slot->name && slot->count == count ? slot->name
                                                        : g_hash_table_lookup(x->names, key);
  if (!name) {
    char num[16];
    g_autofree char *s = count > 1 ? g_strconcat(l->name, " x", wl_number(num, count), " ",
                                                 wl_pass_names[pass], NULL)
                                   : g_strconcat(l->name, " ", wl_pass_names[pass], NULL);
    name = g_string_chunk_insert_const(x->p->strings, s);
    g_hash_table_insert(x->names, key, (gpointer)name);
  }
  *slot = (struct wl_name_slot){.count = count, .name = name};
  return prog_macro(x->p, st->cls, name, t, count, dep, has_dep ? 1 : 0);
}

/* A chunk's layers in the order a pass runs them: the embedding (with the first chunk), the
 * blocks, the output layer (with the last); reversed in backward. */
typedef struct {
  guint first, count, nlayers;
  bool emb, out, backward;
} wl_chunk_seq;

static guint wl_chunk_seq_at(const wl_chunk_seq *q, guint k)
{
  guint n = q->count + q->emb + q->out;
  if (q->backward)
    k = n - 1 - k;
  if (q->emb && k == 0)
    return 0;
  k -= q->emb;
  return k < q->count ? q->first + k : q->nlayers - 1;
}

/* DeepSpeed's BF16 optimizer adds the gradients a backward left into its buffer before the
 * stage's next instruction (update_hp_grads, called by the pipeline engine's backward): a
 * memory-bound pass over the chunk's parameters, one modelled kernel per layer as the host's
 * loop over each layer's tensors launches them. */
static uint32_t wl_grad_accum(wl_st *st, guint layers, uint32_t last)
{
  const cfg_training *t = &st->x->w->training;
  double per_param = wl_grad_accum_bytes(t);
  if (!(per_param > 0) || layers == 0)
    return last;
  double params = st->params / st->x->v;
  uint32_t op = prog_compute(st->x->p, st->cls, "grad accumulation", CFG_KCLASS_ELEMENTWISE,
                             CFG_FP32, params / layers, params * per_param / layers, &last, 1);
  prog_op_at(st->x->p, st->cls, op)->count = layers;
  return op;
}

/* One pass of a chunk for one micro-batch; `last_mb`: the pass that completes the chunk's
 * weight gradients for the step (they are reduced in buckets as it produces them). */
static uint32_t wl_pass_ops(wl_st *st, int c, const wl_step *step, bool last_mb, uint32_t dep,
                            bool has_dep)
{
  wl_par *x = st->x;
  guint first, count;
  bool emb, out;
  wl_chunk_layers(x, st->stage, c, &first, &count, &emb, &out);
  bool backward = step->pass != WL_PASS_F;
  /* the layers in execution order: embedding, blocks, output (reversed in backward) */
  wl_chunk_seq seq = {.first = first, .count = count, .emb = x->m->blocks > 0 && emb,
                      .out = x->m->blocks > 0 && out, .nlayers = x->m->layers->len,
                      .backward = backward};
  bool weights = step->pass == WL_PASS_BW || step->pass == WL_PASS_W;
  bool reduce = last_mb && weights && x->dp * x->cp > 1 && x->w->parallel.zero <= 2 && !x->ds;
  uint32_t last = dep;
  bool has = has_dep;
  const uint32_t *gates = step->pass == WL_PASS_F && st->buckets_gated ? st->bucket_gather : NULL;
  if (gates)
    st->buckets_gated = false;
  guint n = seq.count + seq.emb + seq.out;
  for (guint k = 0; k < n;) {
    guint i = wl_chunk_seq_at(&seq, k);
    bool block = x->m->blocks > 0 && i >= 1 && i <= (guint)x->m->blocks;
    /* identical blocks run as one macro, unless gradients must be bucketed as they come or a
     * bucket's parameters are awaited within the run */
    guint run = 1;
    while (block && !reduce && k + run < n) {
      guint j = wl_chunk_seq_at(&seq, k + run);
      if (x->passes[j].t[WL_PASS_F] != x->passes[i].t[WL_PASS_F] ||
          (gates && gates[j] != WL_NO_GATHER))
        break;
      run++;
    }
    if (gates && gates[i] != WL_NO_GATHER) { /* Megatron's forward pre-hook: finish_param_sync */
      uint32_t both[2] = {gates[i], last};
      last = prog_mem(x->p, st->cls, "bucket params gathered", PROG_MEM_PARAMS, 0, both,
                      has ? 2 : 1);
      has = true;
    }
    last = wl_run_layer(st, i, step->pass, step->paired, run, &last, has);
    has = true;
    if (reduce) {
      const wl_layer *l = g_ptr_array_index(x->m->layers, i);
      st->bucket += l->params - l->expert_params;
      st->expert_bucket += l->expert_params;
      double cap = x->w->parallel.gradient_bucket / x->sb.reduced;
      if (st->bucket + st->expert_bucket >= cap)
        wl_flush_bucket(st, last);
    }
    k += run;
  }
  if (weights)
    last = wl_grad_accum(st, n, last);
  if (reduce)
    wl_flush_bucket(st, last);
  return last;
}

static bool wl_first_chunk(const wl_par *x, int s, int c)
{
  int chunks;
  return wl_chunk_index(x, s, c, &chunks) == 0;
}

static bool wl_last_chunk(const wl_par *x, int s, int c)
{
  int chunks;
  return wl_chunk_index(x, s, c, &chunks) == chunks - 1;
}

/* Where a chunk's activations go and its gradients come from: DualPipe's reverse direction
 * (chunk 1) on its own channels and streams, everything else on the forward ones. */
typedef struct {
  int fsend, frecv, bsend, brecv;
  prog_stream send, recv;
} wl_links;

static wl_links wl_links_of(const wl_par *x, int c)
{
  if ((x->dual || x->vshape) && c == 1)
    return (wl_links){x->fam_rsend, x->fam_rrecv, x->fam_rbsend, x->fam_rbrecv,
                      PROG_STREAM_PP_REV, PROG_STREAM_PP_REV_RECV};
  return (wl_links){x->fam_fsend, x->fam_frecv, x->fam_bsend, x->fam_brecv, PROG_STREAM_PP,
                    PROG_STREAM_PP_RECV};
}

/* Of a micro-batch's activations, what its weight-gradient pass still needs once B has run:
 * Qi et al.'s Table 1 keeps 32sbh of a layer's sb(34h + 5as) for W; with FlashAttention (no
 * 5as term stored) that is 32/34. */
#define WL_W_ACTIVATIONS (32.0 / 34.0)

static uint32_t wl_recv_gradients(wl_st *st, int c)
{
  wl_links lk = wl_links_of(st->x, c);
  return prog_comm(st->x->p, st->cls, lk.recv, "recv gradients", PROG_COLL_SENDRECV, lk.brecv,
                   st->x->act_bytes, NULL, 0);
}

/* A forward; when it opens a DualPipe pair (`next` is the paired backward) the pair starts once
 * both its inputs are in, as deepseek-ai/DualPipe receives both before running the two. */
static void wl_stage_forward(wl_st *st, const wl_step *step, const wl_step *next, wl_links lk)
{
  wl_par *x = st->x;
  prog_program *p = x->p;
  int s = st->stage, c = step->chunk;
  uint32_t dep = 0;
  bool has = false;
  if (step->paired && next && next->paired && next->pass != WL_PASS_F &&
      !wl_last_chunk(x, s, next->chunk)) {
    dep = st->paired_recv = wl_recv_gradients(st, next->chunk);
    has = st->has_paired_recv = true;
  }
  if (!wl_first_chunk(x, s, c) && !wl_prev_here(x, s, c)) {
    dep = prog_comm(p, st->cls, lk.recv, "recv activations", PROG_COLL_SENDRECV, lk.frecv,
                    x->act_bytes, &dep, has ? 1 : 0);
    has = true;
  }
  if (st->gated[c]) { /* the chunk's first forward: its parameters must be gathered */
    uint32_t both[2] = {st->chunk_gather[c], dep};
    dep = prog_mem(p, st->cls, "chunk params gathered", PROG_MEM_PARAMS, 0, both, has ? 2 : 1);
    has = true;
    st->gated[c] = false;
  }
  uint32_t last = wl_pass_ops(st, c, step, false, dep, has);
  prog_mem(p, st->cls, "activations", PROG_MEM_ACTIVATIONS, st->chunk_act[c], NULL, 0);
  if (!wl_last_chunk(x, s, c) && !wl_next_here(x, s, c))
    prog_comm(p, st->cls, lk.send, "send activations", PROG_COLL_SENDRECV, lk.fsend, x->act_bytes,
              &last, 1);
}

/* One of DeepSpeed's blocking p2p.send / p2p.recv: after the stage's previous instruction, and
 * (a rendezvous in both engines) once its peer has reached the matching one. */
static void wl_ds_transfer(wl_st *st, const char *name, int family)
{
  st->ds_last = prog_comm(st->x->p, st->cls, PROG_STREAM_PP, name, PROG_COLL_SENDRECV, family,
                          st->x->act_bytes, &st->ds_last, st->has_ds_last ? 1 : 0);
  st->has_ds_last = true;
}

/* A backward pass's ops, with the recomputation's working set held while they run. */
static uint32_t wl_backward_ops(wl_st *st, int c, const wl_step *step, bool last_mb, uint32_t dep,
                                bool has)
{
  double peak = st->x->m->recompute_peak + st->x->m->ring_peak;
  if (peak > 0)
    prog_mem(st->x->p, st->cls, "recompute working set", PROG_MEM_ACTIVATIONS, peak, NULL, 0);
  uint32_t last = wl_pass_ops(st, c, step, last_mb, dep, has);
  if (peak > 0)
    prog_mem(st->x->p, st->cls, "recompute working set", PROG_MEM_ACTIVATIONS, -peak, NULL, 0);
  return last;
}

/* PartitionedTensor.full() (deepspeed/runtime/utils.py): each tensor-parallel rank sent its
 * 1/t of the tensor; the stage all-gathers it before the pass that needs it. */
static void wl_ds_gather(wl_st *st, const char *name)
{
  wl_par *x = st->x;
  if (x->tp == 1)
    return;
  st->ds_last = prog_comm(x->p, st->cls, PROG_STREAM_TP, name, PROG_COLL_ALLGATHER, x->fam_tp,
                          x->act_bytes * x->tp, &st->ds_last, st->has_ds_last ? 1 : 0);
}

static void wl_ds_send_owed(wl_st *st, bool grad)
{
  bool *owed = grad ? &st->ds_send_grad : &st->ds_send_act;
  if (*owed)
    wl_ds_transfer(st, grad ? "send gradients" : "send activations",
                   grad ? st->x->fam_bsend : st->x->fam_fsend);
  *owed = false;
}

/* A step of DeepSpeed's TrainSchedule (microsoft/DeepSpeed@30965ea, deepspeed/runtime/pipe/
 * schedule.py, TrainSchedule.steps; engine.py _exec_schedule runs each step's instructions in
 * order). Its stages alternate forward and backward slots in lockstep; per stage that is
 * Megatron's 1F1B order, but a pass's output leaves only at the start of the next slot: a
 * forward slot receives its input, then sends the gradient of the backward before; a backward
 * slot sends the activation of the forward before, then receives its gradient; a slot with no
 * pass (warm-up, cool-down) still sends what is owed. Every transfer blocks the stage. Sends
 * are split over the tensor-parallel ranks (is_pipe_partitioned, is_grad_partitioned): a
 * forward gathers its input, a backward its output (whose data the send freed) and its
 * gradient (engine.py _exec_forward_pass, _exec_backward_pass). */
static void wl_ds_step(wl_st *st, const wl_step *step, int last_mb)
{
  wl_par *x = st->x;
  prog_program *p = x->p;
  bool fwd = step->pass == WL_PASS_F, first = st->stage == 0, last = st->stage == x->pp - 1;
  if (!fwd)
    wl_ds_send_owed(st, true);
  wl_ds_send_owed(st, false);
  if (fwd && !first)
    wl_ds_transfer(st, "recv activations", x->fam_frecv);
  if (!fwd && !last)
    wl_ds_transfer(st, "recv gradients", x->fam_brecv);
  wl_ds_send_owed(st, true);
  if (fwd && !first)
    wl_ds_gather(st, "allgather activations");
  if (!fwd && !last) {
    wl_ds_gather(st, "allgather outputs");
    wl_ds_gather(st, "allgather gradients");
  }
  st->ds_last = fwd ? wl_pass_ops(st, 0, step, false, st->ds_last, st->has_ds_last)
                    : wl_backward_ops(st, 0, step, step->mb == last_mb, st->ds_last,
                                      st->has_ds_last);
  st->has_ds_last = true;
  prog_mem(p, st->cls, "activations", PROG_MEM_ACTIVATIONS, fwd ? st->chunk_act[0] : -st->chunk_act[0],
           NULL, 0);
  st->ds_send_act = fwd && !last;
  st->ds_send_grad = !fwd && !first;
}

/* DeepSpeed's ReduceGrads after the last step (engine.py _exec_reduce_grads: the pipeline
 * engine turns off the reduction in backward hooks): every gradient of the stage, in buckets. */
static void wl_ds_reduce_grads(wl_st *st, double params, double experts)
{
  wl_par *x = st->x;
  if (x->dp * x->cp == 1 || x->w->parallel.zero > 2)
    return;
  double cap = x->w->parallel.gradient_bucket / x->sb.reduced;
  double dense = params - experts;
  while (dense > 0 || experts > 0) {
    st->bucket = MIN(dense, cap);
    st->expert_bucket = MIN(experts, cap - st->bucket);
    dense -= st->bucket;
    experts -= st->expert_bucket;
    wl_flush_bucket(st, st->has_dp ? st->last_dp : st->ds_last);
  }
}

static void wl_stage_step(wl_st *st, const wl_step *step, const wl_step *next, int last_mb)
{
  wl_par *x = st->x;
  prog_program *p = x->p;
  int s = st->stage, c = step->chunk;
  wl_links lk = wl_links_of(x, c);
  double act = st->chunk_act[c], act_w = x->split ? WL_W_ACTIVATIONS * act : 0;
  if (x->ds) {
    wl_ds_step(st, step, last_mb);
    return;
  }
  if (step->pass == WL_PASS_F) {
    wl_stage_forward(st, step, next, lk);
    return;
  }
  if (step->pass == WL_PASS_W) {
    wl_pass_ops(st, c, step, step->mb == last_mb, 0, false);
    prog_mem(p, st->cls, "activations", PROG_MEM_ACTIVATIONS, -act_w, NULL, 0);
    return;
  }
  uint32_t dep = 0;
  bool has = false;
  if (!wl_last_chunk(x, s, c) && !wl_next_here(x, s, c)) {
    dep = st->has_paired_recv ? st->paired_recv : wl_recv_gradients(st, c);
    has = true;
    st->has_paired_recv = false;
  }
  uint32_t last = wl_backward_ops(st, c, step, step->mb == last_mb, dep, has);
  /* a whole backward frees the micro-batch; B keeps what W needs */
  prog_mem(p, st->cls, "activations", PROG_MEM_ACTIVATIONS,
           step->pass == WL_PASS_B ? -(act - act_w) : -act, NULL, 0);
  if (!wl_first_chunk(x, s, c) && !wl_prev_here(x, s, c))
    prog_comm(p, st->cls, lk.send, "send gradients", PROG_COLL_SENDRECV, lk.bsend, x->act_bytes,
              &last, 1);
}

/* The routed experts' share of ZeRO-1/2's parameter all-gather (after `dep`, or none), over
 * the expert-data-parallel group: the op it issued, or `last` when there is none. */
static uint32_t wl_expert_param_gather(wl_st *st, double experts, const uint32_t *dep,
                                       uint32_t last)
{
  wl_par *x = st->x;
  if (!(experts > 0) || x->dp * x->cp / x->ep <= 1)
    return last;
  return prog_comm(x->p, st->cls, PROG_STREAM_DP, "allgather updated expert params",
                   PROG_COLL_ALLGATHER, x->fam_edp, experts * x->sb.weights, dep, dep ? 1 : 0);
}

/* ZeRO-1/2's all-gather of the updated parameters (after `dep`, or none): the last op it
 * issued, or `dep` itself (*dep; UINT32_MAX without one) when there is no gather. */
static uint32_t wl_param_gather(wl_st *st, double params, double experts, const uint32_t *dep)
{
  wl_par *x = st->x;
  prog_program *p = x->p;
  const cfg_workload *w = x->w;
  uint32_t last = dep ? *dep : UINT32_MAX;
  if (w->parallel.zero < 1 || w->parallel.zero > 2 || x->dp * x->cp == 1)
    return last;
  double dense = params - experts;
  last = prog_comm(p, st->cls, PROG_STREAM_DP, "allgather updated params", PROG_COLL_ALLGATHER,
                   x->fam_dp, dense * x->sb.weights, dep, dep ? 1 : 0);
  return wl_expert_param_gather(st, experts, dep, last);
}

/* Whether the overlapped gather of the dense parameters gates the forwards that use them
 * (Megatron's schedules; DualPipe, ZB-V and DeepSpeed's engine keep one gather beside the
 * step, a lower bound): then it is issued per chunk or per bucket. */
static bool wl_param_gather_gates(const wl_par *x)
{
  const cfg_workload *w = x->w;
  return !x->dual && !x->vshape && !x->ds && w->parallel.overlap_param_gather &&
         w->parallel.zero >= 1 && w->parallel.zero <= 2 && x->dp * x->cp > 1;
}

/* Megatron's interleaved schedule with --overlap-param-gather: each model chunk's parameters
 * are all-gathered on their own, the first two at the step's start and chunk c + 1's when chunk
 * c's first micro-batch begins (megatron/core/pipeline_parallel/schedules.py,
 * forward_backward_pipelining_with_interleaving: config.param_sync_func per chunk), and a
 * chunk's forward pre-hooks wait for its gather (megatron/core/distributed, finish_param_sync).
 * On the one data-parallel stream the gathers run back to back in chunk order; the first
 * forward of chunk c waits for the c-th: where a chunk's gather outlasts the previous chunk's
 * forwards of the warm-up, the difference is exposed. */
static void wl_param_gather_chunks(wl_st *st)
{
  wl_par *x = st->x;
  for (int c = 0; c < x->v; c++) {
    st->chunk_gather[c] = prog_comm(x->p, st->cls, PROG_STREAM_DP, "allgather chunk params",
                                    PROG_COLL_ALLGATHER, x->fam_dp,
                                    st->chunk_dense[c] * x->sb.weights, NULL, 0);
    st->gated[c] = true;
  }
}

/* Megatron's DistributedDataParallel with --overlap-param-gather and no virtual stages
 * (NVIDIA/Megatron-LM@d98e8a64, megatron/core/distributed/distributed_data_parallel.py
 * _make_forward_pre_hook, param_and_grad_buffer.py finish_param_sync): the parameters sit in
 * buckets of gradient_bucket, filled from the last layer back; a module's forward pre-hook
 * waits for its bucket's all-gather, dispatching it first if nobody has, then dispatches the
 * next bucket's (the one holding the layers before it in backward order, next in forward).
 * The host runs ahead of the GPU, so on the data-parallel stream the gathers run back to back
 * in forward order, the first exposed whole; the first micro-batch's forward of each bucket's
 * first layer waits for its gather. The routed experts' buckets gate nothing here: one
 * gather beside the step, a lower bound. */
static void wl_param_gather_buckets(wl_st *st)
{
  wl_par *x = st->x;
  const cfg_workload *w = x->w;
  guint first, count, nlayers = x->m->layers->len;
  bool emb, out;
  wl_chunk_layers(x, st->stage, 0, &first, &count, &emb, &out);
  wl_chunk_seq seq = {.first = first, .count = count, .emb = x->m->blocks > 0 && emb,
                      .out = x->m->blocks > 0 && out, .nlayers = nlayers, .backward = true};
  guint n = seq.count + seq.emb + seq.out;
  /* in backward order: where each bucket ends (its first layer forward) and its parameters */
  g_autofree guint *opens = g_new(guint, n);
  g_autofree double *bytes = g_new(double, n);
  guint nb = 0;
  double cap = w->parallel.gradient_bucket / x->sb.reduced;
  g_autofree double *dense = g_new(double, n); /* per layer, in backward order */
  double listed = 0;
  for (guint k = 0; k < n; k++) {
    const wl_layer *l = g_ptr_array_index(x->m->layers, wl_chunk_seq_at(&seq, k));
    dense[k] = l->params - l->expert_params;
    listed += dense[k];
  }
  /* what the layers do not hold: the last stage's tied embedding copy, beside the output */
  double fill = st->chunk_dense[0] - listed;
  for (guint k = 0; k < n; k++) {
    guint i = wl_chunk_seq_at(&seq, k);
    fill += dense[k];
    if (fill >= cap || k == n - 1) {
      opens[nb] = i;
      bytes[nb++] = fill * x->sb.weights;
      fill = 0;
    }
  }
  st->bucket_gather = g_new(uint32_t, nlayers);
  for (guint i = 0; i < nlayers; i++)
    st->bucket_gather[i] = WL_NO_GATHER;
  for (guint b = nb; b-- > 0;)
    st->bucket_gather[opens[b]] = prog_comm(x->p, st->cls, PROG_STREAM_DP,
                                            "allgather bucket params", PROG_COLL_ALLGATHER,
                                            x->fam_dp, bytes[b], NULL, 0);
  st->buckets_gated = true;
}

/* After the last backward: tied embedding gradients, the optimizer, ZeRO's parameter gather
 * (unless it overlaps the next step's forward: then wl_build_stage issued it first). */
static void wl_stage_finish(wl_st *st, double params, double experts)
{
  wl_par *x = st->x;
  prog_program *p = x->p;
  const cfg_workload *w = x->w;
  bool first = st->stage == 0, last = st->stage == x->pp - 1;
  if (x->pp > 1 && w->model.tied_embeddings && x->m->blocks > 0 && (first || last) &&
      !x->vshape) { /* ZB-V: rank 0 holds the embedding and the output layer */
    const wl_layer *emb = g_ptr_array_index(x->m->layers, 0);
    /* in grads, not reduced: DeepSpeed's pipeline engine all-reduces the BF16 optimizer's fp32
     * buffer of the tied weight (_hp_grad) itself, uncast */
    st->last_dp = prog_comm(p, st->cls, PROG_STREAM_DP, "allreduce tied embedding grads",
                            PROG_COLL_ALLREDUCE, x->fam_emb, emb->params * x->sb.grads,
                            &st->ds_last, x->ds ? 1 : 0);
    st->has_dp = true;
  }
  if (x->ds)
    wl_ds_reduce_grads(st, params, experts);
  double dense = params - experts;
  double shard = w->parallel.zero >= 1 ? dense / (x->dp * x->cp) + experts * x->ep / (x->dp * x->cp)
                                       : params;
  uint32_t deps[1] = {st->last_dp};
  uint32_t opt = wl_emit_optimizer_step(p, st->cls, w, x->hw, shard, shard * 12, deps,
                                        st->has_dp ? 1 : 0);
  /* the weights are cast once gathered (overlapped, the gather runs beside the next forward,
   * whose first micro-batch casts them: its compute is the same) */
  uint32_t ready = w->parallel.overlap_param_gather ? opt : wl_param_gather(st, params, experts, &opt);
  wl_emit_fp8_weight_casts(p, st->cls, w, x->m, st->block_params, &ready);
}

/* Sets st's chunk activations and the stage's parameters (st->params, st->block_params); the
 * routed experts' among them in *experts. */
static void wl_stage_init(wl_st *st, double *experts)
{
  const wl_par *x = st->x;
  int s = st->stage;
  double params = 0;
  *experts = 0;
  for (int c = 0; c < x->v; c++) {
    st->chunk_act[c] = wl_chunk_activations(x, s, c);
    guint first, count;
    bool emb, out;
    wl_chunk_layers(x, s, c, &first, &count, &emb, &out);
    double before = params, experts_before = *experts;
    for (guint i = first; i < first + count; i++) {
      const wl_layer *l = g_ptr_array_index(x->m->layers, i);
      params += l->params;
      *experts += l->expert_params;
      st->block_params += x->m->blocks > 0 ? l->params : 0;
    }
    if (x->m->blocks > 0 && emb)
      params += ((const wl_layer *)g_ptr_array_index(x->m->layers, 0))->params;
    if (x->m->blocks > 0 && out)
      params += ((const wl_layer *)g_ptr_array_index(x->m->layers, x->m->layers->len - 1))->params;
    st->chunk_dense[c] = (params - before) - (*experts - experts_before);
  }
  if (x->pp > 1 && s == x->pp - 1 && x->w->model.tied_embeddings && x->m->blocks > 0 && !x->dual &&
      !x->vshape) { /* the tied copy sits beside the output layer, in the last chunk */
    double tied = ((const wl_layer *)g_ptr_array_index(x->m->layers, 0))->params;
    params += tied;
    st->chunk_dense[x->v - 1] += tied;
  }
  st->params = params;
}

static void wl_build_stage(wl_par *x, int s)
{
  prog_program *p = x->p;
  wl_st st = {.x = x, .cls = s, .stage = s};
  prog_class_at(p, s)->stage = s;
  double experts, params;
  wl_stage_init(&st, &experts);
  params = st.params;
  wl_states states = wl_states_of_split(x->w, params, experts);
  prog_mem(p, s, "weights", PROG_MEM_PARAMS, states.weights, NULL, 0);
  prog_mem(p, s, "gradients", PROG_MEM_GRADS, states.grads, NULL, 0);
  prog_mem(p, s, "optimizer states", PROG_MEM_OPTIMIZER, states.optimizer, NULL, 0);
  /* Megatron's --overlap-param-gather: the last step's updated parameters are gathered while
   * this step's forward runs (in the steady state one gather per step, beside the compute) */
  if (wl_param_gather_gates(x)) {
    if (x->v > 1)
      wl_param_gather_chunks(&st);
    else
      wl_param_gather_buckets(&st);
    wl_expert_param_gather(&st, experts, NULL, UINT32_MAX);
  } else if (x->w->parallel.overlap_param_gather) {
    wl_param_gather(&st, params, experts, NULL);
  }
  GArray *order = wl_schedule(x, s);
  /* about five ops a pass (its macro, transfers, memory) and two per layer where gradients are
   * bucketed: the stage's op list grows no more */
  guint layers = x->m->layers->len;
  prog_class_reserve(p, s, 6 * order->len + 3 * layers + 16, 3 * order->len + 2 * layers + 16);
  guint *start = x->record ? g_new(guint, order->len + 1) : NULL;
  const GArray *ops = prog_class_at(p, s)->ops;
  for (guint i = 0; i < order->len; i++) {
    if (start)
      start[i] = ops->len;
    wl_stage_step(&st, &g_array_index(order, wl_step, i),
                  i + 1 < order->len ? &g_array_index(order, wl_step, i + 1) : NULL,
                  wl_last_mb(x));
  }
  if (start) {
    start[order->len] = ops->len;
    x->record->stages[s] = (wl_stage_at){.order = order, .start = start};
  } else {
    g_array_free(order, TRUE);
  }
  wl_ds_send_owed(&st, true); /* the last backward's gradient, in the slot after it */
  wl_stage_finish(&st, params, experts);
  g_free(st.bucket_gather);
}

/* The all-to-all byte counts of a MoE layer (see wl_moe_a2a in moe.c). */
static void wl_a2a_bytes(wl_par *x)
{
  const prog_group *g = prog_group_of(x->p, x->fam_ep, 0);
  int nodes = 1;
  for (int i = 1; i < g->n; i++)
    nodes += hw_node_of(x->hw, g->ranks[i]) != hw_node_of(x->hw, g->ranks[i - 1]);
  double link[4];
  wl_moe_a2a(x->w, x->m->moe_tokens, x->m->moe_load, x->ep, nodes, &hw_config(x->hw)->nccl,
             x->a2a, link);
  /* per step on the stage with the most MoE layers (full recomputation replays the forward's) */
  int most = 0;
  for (int s = 0; s < x->pp; s++) {
    int n = 0;
    for (int c = 0; c < x->v; c++) {
      guint first, count;
      bool emb, out;
      wl_chunk_layers(x, s, c, &first, &count, &emb, &out);
      for (guint i = first; i < first + count; i++)
        n += ((const wl_layer *)g_ptr_array_index(x->m->layers, i))->moe;
    }
    most = MAX(most, x->dual ? n / 2 : n); /* DualPipe: a micro-batch runs one of the two */
  }
  bool replay = x->w->training.recompute == CFG_RECOMPUTE_FULL;
  double layer = link[0] + link[1] + link[2] + link[3] + (replay ? link[0] + link[1] : 0);
  x->p->meta.a2a_bytes = layer * most * x->micro;
  x->p->meta.moe_load = x->m->moe_load;
  x->p->meta.moe_dropped = x->m->moe_dropped;
}

/* The layout of `w` as the builder reads it (sizes, micro-batches, schedule, strides), for
 * program `p`, which it does not touch. */
static void wl_par_layout(wl_par *x, const cfg_workload *w, const hw_cluster *hw,
                          const wl_model *m, prog_program *p, bool shared)
{
  const cfg_parallel *par = &w->parallel;
  *x = (wl_par){.w = w, .hw = hw, .m = m, .p = p, .shared = shared, .tp = par->tp, .cp = par->cp,
                .pp = par->pp, .dp = par->dp, .ep = MAX(par->ep, 1),
                .v = par->pp > 1 ? par->virtual_stages : 1,
                .sb = wl_state_bytes_per_param(&w->training)};
  x->micro = w->training.global_batch / (par->dp * w->training.micro_batch);
  x->split = par->pp > 1 && par->schedule >= CFG_SCHED_ZB_H1;
  x->dual = par->pp > 1 && par->schedule == CFG_SCHED_DUALPIPE;
  x->vshape = par->pp > 1 && par->schedule == CFG_SCHED_ZB_V;
  x->ds = par->pp > 1 && par->pipeline_engine == CFG_PIPE_DEEPSPEED;
  if (x->dual)
    x->v = 2;
  /* Megatron sends 1/t of the activation and gathers it on arrival (scatter-gather) */
  x->act_bytes = m->tokens * w->model.hidden * wl_activation_bytes(m) / x->tp;
  wl_strides(x);
}

/* The layout of `w` on `p`, its stage classes, groups and all-to-all sizes: what comes before
 * the templates. */
static void wl_par_init(wl_par *x, const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                        prog_program *p, bool shared)
{
  wl_par_layout(x, w, hw, m, p, shared);
  for (int s = 0; s < x->pp; s++)
    prog_class_add(p, "stage");
  wl_groups(x);
  prog_finalize(p);
  if (m->moe_tokens > 0 && x->ep > 1)
    wl_a2a_bytes(x);
}

bool wl_build_parallel(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                       prog_program *p, bool shared, wl_passes_at **record, GError **err)
{
  (void)err;
  wl_par x;
  wl_par_init(&x, w, hw, m, p, shared);
  if (record) {
    x.record = *record = g_new0(wl_passes_at, 1);
    x.record->nstages = x.pp;
    x.record->last_mb = wl_last_mb(&x);
    x.record->stages = g_new0(wl_stage_at, x.pp);
  }
  wl_templates(&x);
  if (record)
    x.record->passes = g_memdup2(x.passes, sizeof(wl_pass) * m->layers->len);
  wl_names_new(&x);
  for (int s = 0; s < x.pp; s++)
    wl_build_stage(&x, s);
  wl_names_free(&x);
  g_free(x.passes);
  return true;
}

/* ---- the fold's second program, derived from the first ------------------------------------- */

/* What a pass's ops depend on besides the state a stage carries from pass to pass: which pass
 * of which chunk, and whether it reduces the step's gradients (the last micro-batch's backward
 * or weight pass). Not its micro-batch otherwise: passes of one key are the same ops. */
static int wl_step_key(const wl_step *st, int last_mb)
{
  bool reduces = (st->pass == WL_PASS_BW || st->pass == WL_PASS_W) && st->mb == last_mb;
  return (st->chunk * WL_NPASSES + (int)st->pass) * 2 + reduces;
}

/* How stage s of the second program is made of the first's ops: the first's passes before `at`
 * as they are, then the second's passes at..at + n - 1 (`order`), each a copy of the first's
 * pass src[k] or, where the first has none alike (WL_BUILT), built, then the first's passes
 * from `at` on (and the step's end), moved. */
typedef struct {
  guint at, n;
  guint *src;
  GArray *order; /* wl_step */
} wl_splice;

#define WL_BUILT G_MAXUINT

/* Whether the ops of pass i of `a` (class s of `p`) depend only on ops of the same pass (from
 * `i` on, when `to_end`: on the passes from i and the step's end). */
static bool wl_pass_contained(const prog_program *p, int s, const wl_stage_at *a, guint i,
                              bool to_end)
{
  const prog_class *k = prog_class_at(p, s);
  guint lo = a->start[i], hi = to_end ? k->ops->len : a->start[i + 1];
  for (guint o = lo; o < hi; o++) {
    const prog_op *op = prog_op_at(p, s, o);
    const uint32_t *deps = prog_op_deps(p, s, op);
    for (uint32_t d = 0; d < op->ndeps; d++)
      if (deps[d] < lo)
        return false;
  }
  return true;
}

/* The splice of stage s, when the second schedule is the first with passes inserted at one
 * point (1F1B, interleaved 1F1B, ZB-H1, ZB-V and GPipe grow so), none of them paired or
 * reducing gradients, and no pass of the first depends on ops across that point or (those
 * copied) outside itself. */
static bool wl_splice_of(const wl_par *x, const prog_program *like, int s, const wl_stage_at *a,
                         int a_last_mb, wl_splice *out)
{
  GArray *order = wl_schedule(x, s);
  const wl_step *o2 = (const wl_step *)(void *)order->data;
  const wl_step *o1 = (const wl_step *)(void *)a->order->data;
  guint n1 = a->order->len, n2 = order->len, pre = 0, post = 0;
  int last1 = a_last_mb, last2 = wl_last_mb(x);
  /* DeepSpeed's engine sends a pass's output in the next pass's slot: what a pass emits depends
   * on the pass before */
  bool ok = n2 >= n1 && !x->ds;
  for (guint i = 0; ok && i < n1; i++)
    ok = !o1[i].paired;
  for (guint i = 0; ok && i < n2; i++)
    ok = !o2[i].paired;
  while (ok && pre < n1 && wl_step_key(&o1[pre], last1) == wl_step_key(&o2[pre], last2))
    pre++;
  while (ok && post < n1 &&
         wl_step_key(&o1[n1 - 1 - post], last1) == wl_step_key(&o2[n2 - 1 - post], last2))
    post++;
  ok = ok && pre + post >= n1 && wl_pass_contained(like, s, a, pre, true);
  *out = (wl_splice){.at = pre, .n = n2 - n1, .src = g_new(guint, MAX(n2 - n1, 1u)),
                     .order = order};
  /* the first pass of each key that depends only on itself, looked for once per key; a pass
   * that does not reduce gradients depends on nothing a stage carries from pass to pass (no
   * pass is paired), so one the first program lacks is built as it is */
  int nkeys = x->v * WL_NPASSES * 2;
  g_autofree guint *src_of = g_new(guint, nkeys);
  g_autofree bool *looked = g_new0(bool, nkeys);
  for (guint k = 0; ok && k < out->n; k++) {
    int key = wl_step_key(&o2[pre + k], last2);
    if (!looked[key]) {
      guint i = 0;
      while (i < n1 && (wl_step_key(&o1[i], last1) != key ||
                        !wl_pass_contained(like, s, a, i, false)))
        i++;
      src_of[key] = i < n1 ? i : WL_BUILT;
      looked[key] = true;
    }
    out->src[k] = src_of[key];
    ok = key % 2 == 0;
  }
  if (!ok) {
    g_free(out->src);
    g_array_free(order, TRUE);
  }
  return ok;
}

static void wl_splice_clear(wl_splice *sp)
{
  g_free(sp->src);
  g_array_free(sp->order, TRUE);
}

static void wl_splice_stage(wl_par *x, const prog_program *like, int s, const wl_stage_at *a,
                            const wl_splice *sp)
{
  prog_program *p = x->p;
  const prog_class *k = prog_class_at(like, s);
  guint at = a->start[sp->at];
  prog_class_reserve(p, s, k->ops->len * 2, k->deps->len * 2);
  prog_ops_append(p, s, like, s, 0, at);
  wl_st st = {.x = x, .cls = s, .stage = s};
  double experts;
  wl_stage_init(&st, &experts);
  for (guint i = 0; i < sp->n; i++) {
    guint src = sp->src[i];
    if (src == WL_BUILT)
      wl_stage_step(&st, &g_array_index(sp->order, wl_step, sp->at + i), NULL, wl_last_mb(x));
    else
      prog_ops_append(p, s, like, s, a->start[src], a->start[src + 1] - a->start[src]);
  }
  prog_ops_append(p, s, like, s, at, k->ops->len - at);
  prog_class_at(p, s)->stage = k->stage;
}

static void wl_splices_free(wl_splice *sp, int n)
{
  for (int s = 0; s < n; s++)
    wl_splice_clear(&sp[s]);
  g_free(sp);
}

/* Every stage's splice, or NULL when some stage's second schedule is not its first's with
 * passes inserted at one point. */
static wl_splice *wl_splices(const wl_par *x, const prog_program *like, const wl_passes_at *a)
{
  wl_splice *sp = g_new0(wl_splice, x->pp);
  int ready = 0;
  while (ready < x->pp && wl_splice_of(x, like, ready, &a->stages[ready], a->last_mb, &sp[ready]))
    ready++;
  if (ready == x->pp)
    return sp;
  wl_splices_free(sp, ready);
  return NULL;
}

prog_program *wl_derive_parallel(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                                 const prog_program *like, const wl_passes_at *a)
{
  prog_program *p = prog_new_deriving(like);
  wl_par x;
  wl_par_init(&x, w, hw, m, p, true);
  wl_splice *sp = wl_splices(&x, like, a);
  if (!sp) {
    prog_free(p);
    return NULL;
  }
  /* the templates do not depend on the batch */
  for (guint c = (guint)x.pp; c < like->classes->len; c++)
    prog_class_copy(p, like, (int)c);
  x.passes = a->passes;
  wl_names_new(&x);
  for (int s = 0; s < x.pp; s++)
    wl_splice_stage(&x, like, s, &a->stages[s], &sp[s]);
  wl_names_free(&x);
  wl_splices_free(sp, x.pp);
  return p;
}

/* ---- the same in place of the first, once it has run ------------------------------------- */

/* A stage of the second program as the first's ops with `n` of its passes copied in at op
 * `at`: pass k is the first's ops first[k]..first[k] + len[k] - 1. */
typedef struct {
  guint at, n;
  guint *first, *len;
} wl_stage_inserts;

struct wl_inserts {
  const cfg_workload *w; /* the second's */
  const hw_cluster *hw;
  const wl_model *m;
  int pp;
  wl_stage_inserts *stages;
};

void wl_inserts_free(wl_inserts *ins)
{
  if (!ins)
    return;
  for (int s = 0; s < ins->pp; s++) {
    g_free(ins->stages[s].first);
    g_free(ins->stages[s].len);
  }
  g_free(ins->stages);
  g_free(ins);
}

/* Whether every pass the splices insert is a copy of one the first program has. */
static bool wl_splices_all_copied(const wl_splice *sp, int pp)
{
  for (int s = 0; s < pp; s++)
    for (guint k = 0; k < sp[s].n; k++)
      if (sp[s].src[k] == WL_BUILT)
        return false;
  return true;
}

static void wl_stage_inserts_of(const wl_splice *sp, const wl_stage_at *a, wl_stage_inserts *out)
{
  out->at = a->start[sp->at];
  out->n = sp->n;
  out->first = g_new(guint, MAX(sp->n, 1u));
  out->len = g_new(guint, MAX(sp->n, 1u));
  for (guint k = 0; k < sp->n; k++) {
    out->first[k] = a->start[sp->src[k]];
    out->len[k] = a->start[sp->src[k] + 1] - out->first[k];
  }
}

wl_inserts *wl_inserts_of(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                          const prog_program *like, const wl_passes_at *a)
{
  wl_par x;
  wl_par_layout(&x, w, hw, m, NULL, true);
  wl_splice *sp = wl_splices(&x, like, a);
  if (!sp)
    return NULL;
  wl_inserts *ins = NULL;
  if (wl_splices_all_copied(sp, x.pp)) {
    ins = g_new0(wl_inserts, 1);
    *ins = (wl_inserts){.w = w, .hw = hw, .m = m, .pp = x.pp,
                        .stages = g_new0(wl_stage_inserts, x.pp)};
    for (int s = 0; s < x.pp; s++)
      wl_stage_inserts_of(&sp[s], &a->stages[s], &ins->stages[s]);
  }
  wl_splices_free(sp, x.pp);
  return ins;
}

int wl_inserts_stages(const wl_inserts *ins)
{
  return ins->pp;
}

void wl_inserts_splice(const wl_inserts *ins, const prog_program *p, guint *at, guint *n,
                       unsigned *streams)
{
  for (int s = 0; s < ins->pp; s++) {
    const wl_stage_inserts *si = &ins->stages[s];
    at[s] = si->at;
    n[s] = 0;
    streams[s] = 0;
    for (guint k = 0; k < si->n; k++)
      for (guint o = si->first[k]; o < si->first[k] + si->len[k]; o++) {
        streams[s] |= 1u << prog_op_at(p, s, (int)o)->stream;
        n[s]++;
      }
  }
}

/* Where op `i` of the first program's class is once `ins` ops were inserted at `at`. */
static guint wl_moved(guint i, guint at, guint ins)
{
  return i >= at ? i + ins : i;
}

/* The dependencies of ops first..first + n - 1 (n > 0): prog_push appends them in op order. */
static guint wl_deps_end(const prog_op *ops, guint first, guint n)
{
  return ops[first + n - 1].dep_start + ops[first + n - 1].ndeps;
}

/* Opens a gap of `ins` ops and `ins_deps` dependencies at op `at`: the ops from there on, and
 * their dependencies, which name only ops from `at` on (wl_pass_contained), move past it. */
static void wl_class_open(prog_class *k, guint at, guint ins, guint ins_deps)
{
  guint nops = k->ops->len, ndeps = k->deps->len;
  guint dep_at = at < nops ? g_array_index(k->ops, prog_op, at).dep_start : ndeps;
  g_array_set_size(k->ops, nops + ins);
  g_array_set_size(k->deps, ndeps + ins_deps);
  prog_op *ops = (prog_op *)(void *)k->ops->data;
  uint32_t *deps = (uint32_t *)(void *)k->deps->data;
  memmove(ops + at + ins, ops + at, sizeof *ops * (nops - at));
  memmove(deps + dep_at + ins_deps, deps + dep_at, sizeof *deps * (ndeps - dep_at));
  for (guint i = at + ins; i < nops + ins; i++)
    ops[i].dep_start += ins_deps;
  for (guint d = dep_at + ins_deps; d < ndeps + ins_deps; d++)
    deps[d] += ins;
}

/* Copies ops from..from + n - 1 (n > 0) of the class to `to` (a gap), their dependencies to
 * `dep_to`, each moved by as many ops as the pass moved (they name ops of the pass only).
 * Returns how many dependencies it copied. */
static guint wl_class_copy_pass(prog_class *k, guint from, guint n, guint to, guint dep_to)
{
  prog_op *ops = (prog_op *)(void *)k->ops->data;
  uint32_t *deps = (uint32_t *)(void *)k->deps->data;
  guint dep_from = ops[from].dep_start, ndeps = wl_deps_end(ops, from, n) - dep_from;
  memcpy(ops + to, ops + from, sizeof *ops * n);
  memcpy(deps + dep_to, deps + dep_from, sizeof *deps * ndeps);
  for (guint i = to; i < to + n; i++)
    ops[i].dep_start += dep_to - dep_from;
  for (guint d = dep_to; d < dep_to + ndeps; d++)
    deps[d] += to - from; /* modulo 2^32: a pass may move back */
  return ndeps;
}

/* Stage class `k` of the first program becomes the second's: its passes from `at` on move
 * past the copies, which fill the gap in order (what wl_splice_stage appends, op for op). */
static void wl_stage_insert(prog_class *k, const wl_stage_inserts *si)
{
  const prog_op *ops = (const prog_op *)(void *)k->ops->data;
  guint ins = 0, ins_deps = 0;
  for (guint j = 0; j < si->n; j++) {
    ins += si->len[j];
    ins_deps += si->len[j] ? wl_deps_end(ops, si->first[j], si->len[j]) -
                                 ops[si->first[j]].dep_start
                           : 0;
  }
  guint dep_at = si->at < k->ops->len ? ops[si->at].dep_start : k->deps->len;
  wl_class_open(k, si->at, ins, ins_deps);
  guint to = si->at, dep_to = dep_at;
  for (guint j = 0; j < si->n; j++) {
    if (!si->len[j])
      continue;
    guint from = wl_moved(si->first[j], si->at, ins);
    dep_to += wl_class_copy_pass(k, from, si->len[j], to, dep_to);
    to += si->len[j];
  }
}

void wl_inserts_apply(const wl_inserts *ins, prog_program *p)
{
  for (int s = 0; s < ins->pp; s++)
    wl_stage_insert(prog_class_at(p, s), &ins->stages[s]);
  /* the all-to-all sizes grow with the micro-batches (wl_par_init's, for the second) */
  wl_par x;
  wl_par_layout(&x, ins->w, ins->hw, ins->m, p, true);
  wl_families(&x);
  if (ins->m->moe_tokens > 0 && x.ep > 1)
    wl_a2a_bytes(&x);
}

/* ---- the skeleton: rank 0's groups and the layer templates, for closed-form estimates ---- */

/* Rank 0's group along `dims`. */
static int wl_group0(wl_par *x, const cfg_dim *dims, int ndims)
{
  int n = 1;
  for (int i = 0; i < ndims; i++)
    n *= wl_size(x, dims[i]);
  g_autofree int *ranks = g_new(int, n);
  for (int k = 0; k < n; k++) {
    int r = 0, rest = k;
    for (int i = 0; i < ndims; i++) {
      r = wl_rank_with(x, r, dims[i], rest % wl_size(x, dims[i]));
      rest /= wl_size(x, dims[i]);
    }
    ranks[k] = r;
  }
  return prog_group_add(x->p, ranks, n);
}

static void wl_skeleton_groups(wl_par *x)
{
  prog_program *p = x->p;
  const cfg_dim tp[] = {CFG_DIM_TP}, cp[] = {CFG_DIM_CP}, dp[] = {CFG_DIM_DP, CFG_DIM_CP};
  x->fam_tp = prog_family_add(p, "tp", PROG_DIM_TP);
  x->fam_cp = prog_family_add(p, "cp", PROG_DIM_CP);
  x->fam_dp = prog_family_add(p, "dp", PROG_DIM_DP);
  prog_family_set(p, x->fam_tp, 0, wl_group0(x, tp, 1));
  prog_family_set(p, x->fam_cp, 0, wl_group0(x, cp, 1));
  prog_family_set(p, x->fam_dp, 0, wl_group0(x, dp, 2));
  x->fam_ep = prog_family_add(p, "ep", PROG_DIM_EP);
  x->fam_edp = prog_family_add(p, "edp", PROG_DIM_DP);
  g_autofree int *ranks = g_new(int, MAX(x->ep, x->dp * x->cp));
  for (int k = 0; k < x->ep; k++)
    ranks[k] = wl_rank_with(x, 0, CFG_DIM_DP, k);
  prog_family_set(p, x->fam_ep, 0, prog_group_add(p, ranks, x->ep));
  int n = 0;
  for (int c = 0; c < x->cp; c++)
    for (int k = 0; k < x->dp / x->ep; k++)
      ranks[n++] = wl_rank_with(x, wl_rank_with(x, 0, CFG_DIM_CP, c), CFG_DIM_DP, k * x->ep);
  prog_family_set(p, x->fam_edp, 0, prog_group_add(p, ranks, n));
  x->fam_fsend = prog_family_add(p, "pp-send-next", PROG_DIM_PP);
  if (x->pp > 1)
    prog_family_set(p, x->fam_fsend, 0, wl_pair(x, 0, wl_rank_with(x, 0, CFG_DIM_PP, 1)));
}

bool wl_skeleton_build(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                       wl_skeleton *out)
{
  const cfg_parallel *par = &w->parallel;
  memset(out, 0, sizeof *out);
  int gpus = par->tp * par->cp * par->pp * par->dp;
  wl_par x = {.w = w, .hw = hw, .m = m, .p = prog_new(gpus), .tp = par->tp, .cp = par->cp,
              .pp = par->pp, .dp = par->dp, .ep = MAX(par->ep, 1), .v = 1, .micro = 1,
              .sb = wl_state_bytes_per_param(&w->training)};
  x.act_bytes = m->tokens * w->model.hidden * wl_activation_bytes(m) / x.tp;
  wl_strides(&x);
  prog_class_add(x.p, "rank 0");
  wl_skeleton_groups(&x);
  prog_finalize(x.p);
  if (m->moe_tokens > 0 && x.ep > 1)
    wl_a2a_bytes(&x);
  wl_templates(&x);
  out->p = x.p;
  out->fwd = g_new(int, m->layers->len);
  out->bwd = g_new(int, m->layers->len);
  for (guint i = 0; i < m->layers->len; i++) {
    out->fwd[i] = x.passes[i].t[WL_PASS_F];
    out->bwd[i] = x.passes[i].t[WL_PASS_BW];
  }
  out->fam_dp = x.fam_dp;
  out->fam_edp = x.fam_edp;
  out->fam_pp = x.fam_fsend;
  out->act_bytes = x.act_bytes;
  out->a2a_bytes = x.p->meta.a2a_bytes / MAX(x.micro, 1);
  g_free(x.passes);
  return true;
}

void wl_skeleton_free(wl_skeleton *s)
{
  prog_free(s->p);
  g_free(s->fwd);
  g_free(s->bwd);
  memset(s, 0, sizeof *s);
}
