/* The closed-form step estimate of one layout (see planner.c for the model). */
#include "planner/planner_internal.h"

#include <math.h>

typedef struct {
  plan_setup *s;
  const cfg_workload *w;
  const plan_layout *l;
  const wl_model *m;
  const plan_skel *k;
  wl_state_bytes sb;
  bool zero_bubble; /* ZB-H1 or DualPipe: the stages' weight-gradient share is needed */
} plan_est;

static const wl_layer *plan_layer(const plan_est *e, guint i)
{
  return g_ptr_array_index(e->m->layers, i);
}

/* ZeRO-3 gathers a layer's parameters before each pass and reduce-scatters its gradients
 * after the backward one, prefetched: a pass takes at least as long as its collectives. */
static void plan_zero3(const plan_est *e, const wl_layer *layer, double *ag, double *rs)
{
  const plan_layout *l = e->l;
  int sdp = l->tp * l->cp * (l->pipeline_outer ? 1 : l->pp);
  double dense = layer->params - layer->expert_params;
  *ag = plan_coll(e->s, PROG_COLL_ALLGATHER, l->dp, sdp, l->cp, l->tp, l->tp, 1,
                  dense * e->sb.weights) +
        plan_coll(e->s, PROG_COLL_ALLGATHER, l->dp / l->ep, sdp * l->ep, l->cp, l->tp, l->tp, 1,
                  layer->expert_params * e->sb.weights);
  *rs = plan_coll(e->s, PROG_COLL_REDUCESCATTER, l->dp, sdp, l->cp, l->tp, l->tp, 1,
                  dense * e->sb.grads) +
        plan_coll(e->s, PROG_COLL_REDUCESCATTER, l->dp / l->ep, sdp * l->ep, l->cp, l->tp, l->tp, 1,
                  layer->expert_params * e->sb.grads);
}

typedef struct {
  double fwd, bwd;      /* per micro-batch */
  double wgrad;         /* of bwd, the weight-gradient GEMMs (zero-bubble schedules' W) */
  double params, experts;
  /* fwd and bwd, each second times the extra a collective beside it costs (interference):
   * divided by them, the stage's mean rates */
  double fwd_interf, bwd_interf;
} plan_stage;

/* Forward and backward time of `count` identical layers from layer i on. */
static void plan_run(const plan_est *e, guint i, guint count, plan_stage *st)
{
  eng_evaluator *ev = e->k->eval;
  double rf, rb;
  double tf = eng_evaluate_macro_rate(ev, e->k->sk.fwd[i], count, 0, &rf);
  double tb = eng_evaluate_macro_rate(ev, e->k->sk.bwd[i], count, 0, &rb);
  if (e->l->zero >= 3 && e->l->dp * e->l->cp > 1) {
    double ag, rs;
    plan_zero3(e, plan_layer(e, i), &ag, &rs);
    tf = MAX(tf, count * ag);
    tb = MAX(tb, count * (ag + rs));
  }
  st->fwd += tf;
  st->bwd += tb;
  st->fwd_interf += tf * rf;
  st->bwd_interf += tb * rb;
  /* only the zero-bubble schedules use it, and it times every backward kernel of the layer
   * (two thirds of a Llama 3 405B search's screening when every layout paid it) */
  if (e->zero_bubble)
    st->wgrad += tb * wl_layer_wgrad_share(plan_layer(e, i), e->s->hw);
}

/* DeepSpeed's BF16 optimizer's pass over a chunk's `params` after each backward, one kernel
 * per layer, as the programs run it (wl_grad_accum). */
static void plan_grad_accum(const plan_est *e, double params, int layers, plan_stage *st)
{
  double per_param = wl_grad_accum_bytes(&e->w->training);
  if (!(per_param > 0) || layers <= 0)
    return;
  hw_kernel k = {.kclass = CFG_KCLASS_ELEMENTWISE, .dtype = CFG_FP32, .flops = params / layers,
                 .bytes = params * per_param / layers};
  st->bwd += layers * hw_kernel_time(e->s->hw, &k);
}

/* Chunk g of the pipeline: its layers, as runs of identical ones. */
static void plan_chunk(const plan_est *e, int g, plan_stage *st)
{
  const wl_model *m = e->m;
  int chunks = e->l->pp * e->l->virtual_stages, first, count;
  guint last = m->layers->len - 1;
  wl_chunk_blocks(m->blocks, chunks, g, &first, &count);
  double before = st->params;
  if (g == 0) {
    plan_run(e, 0, 1, st);
    st->params += plan_layer(e, 0)->params;
  }
  for (int i = 1 + first; i < 1 + first + count;) {
    int run = 1;
    while (i + run < 1 + first + count && e->k->sk.fwd[i + run] == e->k->sk.fwd[i])
      run++;
    plan_run(e, (guint)i, (guint)run, st);
    for (int j = i; j < i + run; j++) {
      st->params += plan_layer(e, (guint)j)->params;
      st->experts += plan_layer(e, (guint)j)->expert_params;
    }
    i += run;
  }
  if (g == chunks - 1) {
    plan_run(e, last, 1, st);
    st->params += plan_layer(e, last)->params;
  }
  plan_grad_accum(e, st->params - before, count + (g == 0) + (g == chunks - 1), st);
}

static double plan_rate(double weighted, double time)
{
  return time > 0 ? weighted / time : 0;
}

/* After the last backward: the exposed tail of the gradient reduction (bucketed under the last
 * micro-batch's backward), the optimizer, and ZeRO-1/2's all-gather of the updated parameters. */
static double plan_tail(const plan_est *e, const plan_stage *st)
{
  const plan_layout *l = e->l;
  int sdp = l->tp * l->cp * (l->pipeline_outer ? 1 : l->pp);
  double dense = st->params - st->experts, tail = 0;
  if (l->dp * l->cp > 1 && l->zero <= 2) {
    prog_coll op = l->zero ? PROG_COLL_REDUCESCATTER : PROG_COLL_ALLREDUCE;
    double bytes = dense * e->sb.reduced, ebytes = st->experts * e->sb.reduced;
    double r = plan_coll(e->s, op, l->dp, sdp, l->cp, l->tp, l->tp, 1, bytes) +
               plan_coll(e->s, op, l->dp / l->ep, sdp * l->ep, l->cp, l->tp, l->tp, 1, ebytes);
    double buckets = MAX(1.0, (bytes + ebytes) / e->w->parallel.gradient_bucket);
    double exposed = MAX(r - st->bwd, r / buckets);
    /* what runs under the backward slows it by the backward's interference rate */
    tail += exposed + plan_rate(st->bwd_interf, st->bwd) * (r - exposed);
  }
  double shard = l->zero >= 1 ? dense / (l->dp * l->cp) + st->experts * l->ep / (l->dp * l->cp)
                              : st->params;
  hw_kernel opt = {.kclass = CFG_KCLASS_OPTIMIZER, .dtype = CFG_FP32, .flops = 12 * shard,
                   .bytes = shard * (2 * e->sb.weights + e->sb.grads + 2 * e->sb.optimizer)};
  /* ZeRO-Offload steps on the host, as the programs do (wl_emit_optimizer_step) */
  tail += e->w->parallel.offload == CFG_OFFLOAD_CPU
              ? hw_host_optimizer_time(e->s->hw, opt.flops, opt.bytes,
                                       shard * (e->sb.grads + e->sb.weights))
              : hw_kernel_time(e->s->hw, &opt);
  if (l->zero >= 1 && l->zero <= 2 && l->dp * l->cp > 1)
    tail += plan_coll(e->s, PROG_COLL_ALLGATHER, l->dp, sdp, l->cp, l->tp, l->tp, 1,
                      dense * e->sb.weights) +
            plan_coll(e->s, PROG_COLL_ALLGATHER, l->dp / l->ep, sdp * l->ep, l->cp, l->tp, l->tp, 1,
                      st->experts * e->sb.weights);
  return tail;
}

/* ZB-H1 (Qi et al., ICLR 2024, Table 2): 1F1B's fill and drain, (p - 1)(F + B) on even stages,
 * with B's weight gradients run in the bubbles: (p - 1)(F + B - 2W), their (p - 1)(T_F + T_B -
 * T_W) with T_B the input gradient alone. The pipe's time; `slowest` its period. */
static double plan_zb_h1(const plan_stage *st, int p, double micro, double *slowest)
{
  int k = 0;
  for (int i = 1; i < p; i++)
    if (st[i].fwd + st[i].bwd > st[k].fwd + st[k].bwd)
      k = i;
  double fill = 0;
  for (int i = 0; i < p; i++)
    fill += i == k ? 0 : st[i].fwd + st[i].bwd - 2 * st[i].wgrad;
  *slowest = st[k].fwd + st[k].bwd;
  return micro * *slowest + MAX(fill, 0);
}

/* DualPipe (DeepSeek-V3 report, Table 2): rank r runs stages r and p - 1 - r, half the
 * micro-batches each, and its bubble is (p/2 - 1)(F&B + B - 3W), B the whole backward and F&B
 * taken as F + B (the all-to-alls each hides are not priced apart here). */
static double plan_dualpipe(const plan_stage *st, int p, double micro, double *slowest)
{
  double f = 0, b = 0, w = 0;
  *slowest = 0;
  for (int r = 0; r < p; r++) {
    f += st[r].fwd / p;
    b += st[r].bwd / p;
    w += st[r].wgrad / p;
    *slowest = MAX(*slowest, (st[r].fwd + st[r].bwd + st[p - 1 - r].fwd + st[p - 1 - r].bwd) / 2);
  }
  return micro * *slowest + (p / 2 - 1) * MAX(f + 2 * b - 3 * w, 0);
}

/* In the steady state each micro-batch's activation and gradient transfers of every chunk
 * (a send and a receive at once, counted once) run beside the stage's compute, which they slow
 * by its interference rate: the pipe's pace is the slowest stage's. */
static double plan_p2p_beside(const plan_stage *st, int p, int v, double micro, double one)
{
  double rate = 0;
  for (int r = 0; r < p; r++)
    rate = MAX(rate, plan_rate(st[r].fwd_interf + st[r].bwd_interf, st[r].fwd + st[r].bwd));
  return rate * micro * 2 * v * one;
}

void plan_estimate(plan_setup *s, const cfg_workload *w, const plan_layout *l, const wl_model *m,
                   plan_candidate *c)
{
  plan_est e = {.s = s, .w = w, .l = l, .m = m, .k = plan_skeleton(s, w, l, m),
                .sb = wl_state_bytes_per_param(&w->training)};
  int p = l->pp, v = l->virtual_stages;
  e.zero_bubble = p > 1 && v == 1 && (w->parallel.schedule == CFG_SCHED_ZB_H1 ||
                                      w->parallel.schedule == CFG_SCHED_DUALPIPE);
  double micro = (double)w->training.global_batch / (l->dp * l->micro_batch);
  double sum = 0, tail = 0;
  g_autofree double *round = g_new0(double, v); /* per chunk index: its slowest stage */
  g_autofree plan_stage *stages = g_new0(plan_stage, p);
  for (int st_i = 0; st_i < p; st_i++) {
    plan_stage *st = &stages[st_i];
    for (int ch = 0; ch < v; ch++) {
      double before = st->fwd + st->bwd;
      plan_chunk(&e, ch * p + st_i, st);
      round[ch] = MAX(round[ch], st->fwd + st->bwd - before);
    }
    sum += st->fwd + st->bwd;
  }
  bool dual = p > 1 && v == 1 && w->parallel.schedule == CFG_SCHED_DUALPIPE;
  for (int r = 0; r < p; r++) {
    plan_stage t = stages[r];
    if (dual) { /* DualPipe: a rank holds two stages' parameters */
      t.bwd += stages[p - 1 - r].bwd;
      t.bwd_interf += stages[p - 1 - r].bwd_interf;
      t.params += stages[p - 1 - r].params;
      t.experts += stages[p - 1 - r].experts;
    }
    tail = MAX(tail, plan_tail(&e, &t));
  }
  /* a micro-batch passes the stages chunk by chunk: each round of chunks goes at the pace of
   * its slowest stage, so uneven chunks cost more than the stages' totals show */
  double slowest = 0;
  for (int ch = 0; ch < v; ch++)
    slowest += round[ch];
  double p2p = 0;
  if (p > 1) {
    int spp = l->tp * l->cp * (l->pipeline_outer ? l->dp : 1);
    double one = plan_coll(s, PROG_COLL_SENDRECV, 2, spp, 1, 0, 1, 0, e.k->sk.act_bytes);
    p2p = 2 * (p - 1) * one + plan_p2p_beside(stages, p, v, micro, one);
  }
  /* the slowest stage runs every micro-batch; the others' share of one micro-batch is the
   * fill and drain, a chunk at a time with interleaving (Megatron's bubble, (p - 1) / v of a
   * stage's time on even stages) */
  double pipe = micro * slowest + (sum - slowest) / v + p2p;
  if (p > 1 && v == 1 && w->parallel.schedule == CFG_SCHED_ZB_H1)
    pipe = plan_zb_h1(stages, p, micro, &slowest) + p2p;
  if (dual)
    pipe = plan_dualpipe(stages, p, micro, &slowest) + p2p;
  c->estimate_s = pipe + tail;
  double model_flops, hw_flops;
  wl_step_flops(w, m, &model_flops, &hw_flops);
  c->mfu = model_flops / (c->estimate_s * s->gpus * hw_peak_flops(s->hw, w->training.dtype));
  c->tokens_per_s = (double)w->training.global_batch * w->model.seq_len / c->estimate_s;
  c->bubble_s = pipe - micro * slowest;
}
