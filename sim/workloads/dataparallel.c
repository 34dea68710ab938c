/* Data parallelism as DDP and Horovod run it: every replica runs forward and backward; as
 * backward produces gradients (last layer first) they are packed into buckets of
 * parallel.gradient_bucket bytes, and each full bucket is all-reduced on a communication
 * stream while backward goes on; the optimizer step waits for the last bucket.
 * With gradient accumulation the first (m - 1) micro-batches are identical and communicate
 * nothing, so they are folded into one op whose time is the sum of their kernels. */
#include "workloads/workloads_internal.h"

typedef struct {
  const cfg_workload *w;
  const hw_cluster *hw;
  const wl_model *m;
  prog_program *p;
  int cls, dp_family;
  wl_state_bytes state;
} wl_dp;

static double wl_kernels_time(const wl_dp *x, const GArray *ks)
{
  double t = 0;
  for (guint i = 0; i < ks->len; i++) {
    const wl_kernel *k = &g_array_index(ks, wl_kernel, i);
    hw_kernel hk = wl_hw_kernel(k);
    t += hw_kernel_time(x->hw, &hk);
  }
  return t;
}

static double wl_kernels_flops(const GArray *ks)
{
  double f = 0;
  for (guint i = 0; i < ks->len; i++)
    f += g_array_index(ks, wl_kernel, i).flops;
  return f;
}

static uint32_t wl_emit_kernels(wl_dp *x, const GArray *ks, uint32_t last)
{
  for (guint i = 0; i < ks->len; i++) {
    const wl_kernel *k = &g_array_index(ks, wl_kernel, i);
    last = wl_emit_kernel(x->p, x->cls, k, NULL, 0);
  }
  return last;
}

static double wl_saved_total(const wl_model *m)
{
  double s = 0;
  for (guint i = 0; i < m->layers->len; i++)
    s += ((const wl_layer *)g_ptr_array_index(m->layers, i))->saved_bytes;
  return s;
}

/* The (m - 1) micro-batches that only accumulate gradients. */
static void wl_emit_accumulation(wl_dp *x, int micro_steps)
{
  double t = 0, flops = 0;
  for (guint i = 0; i < x->m->layers->len; i++) {
    const wl_layer *l = g_ptr_array_index(x->m->layers, i);
    t += wl_kernels_time(x, l->fwd) + wl_kernels_time(x, l->bwd);
    flops += wl_kernels_flops(l->fwd) + wl_kernels_flops(l->bwd);
  }
  g_autofree char *name = g_strdup_printf("micro-batches 1..%d (forward+backward, no sync)", micro_steps);
  double saved = wl_saved_total(x->m);
  prog_mem(x->p, x->cls, "activations (accumulation)", PROG_MEM_ACTIVATIONS, saved, NULL, 0);
  uint32_t op = prog_compute(x->p, x->cls, name, CFG_KCLASS_OTHER, x->m->dtype, micro_steps * flops, 0,
                             NULL, 0);
  prog_op_at(x->p, x->cls, op)->fixed_time = micro_steps * t;
  prog_mem(x->p, x->cls, "activations (accumulation) freed", PROG_MEM_ACTIVATIONS, -saved, NULL, 0);
}

static uint32_t wl_emit_allreduce(wl_dp *x, double params, uint32_t after, int bucket)
{
  g_autofree char *name = g_strdup_printf("allreduce grads bucket %d", bucket);
  return prog_comm(x->p, x->cls, PROG_STREAM_DP, name, PROG_COLL_ALLREDUCE, x->dp_family,
                   params * x->state.reduced, &after, 1);
}

/* The last micro-batch: forward, then backward with bucketed all-reduces. */
static uint32_t wl_emit_synced_step(wl_dp *x, int dp, bool *has_comm)
{
  const wl_model *m = x->m;
  uint32_t last = 0;
  for (guint i = 0; i < m->layers->len; i++) {
    const wl_layer *l = g_ptr_array_index(m->layers, i);
    last = wl_emit_kernels(x, l->fwd, last);
    if (l->saved_bytes > 0)
      prog_mem(x->p, x->cls, l->name, PROG_MEM_ACTIVATIONS, l->saved_bytes, NULL, 0);
  }
  double bucket_cap = x->w->parallel.gradient_bucket / x->state.reduced; /* in parameters */
  double pending = 0;
  int buckets = 0;
  uint32_t last_comm = 0;
  *has_comm = false;
  for (guint i = m->layers->len; i-- > 0;) {
    const wl_layer *l = g_ptr_array_index(m->layers, i);
    last = wl_emit_kernels(x, l->bwd, last);
    if (l->saved_bytes > 0)
      prog_mem(x->p, x->cls, l->name, PROG_MEM_ACTIVATIONS, -l->saved_bytes, NULL, 0);
    pending += l->params;
    if (dp > 1 && pending > 0 && (pending >= bucket_cap || i == 0)) {
      last_comm = wl_emit_allreduce(x, pending, last, buckets++);
      pending = 0;
      *has_comm = true;
    }
  }
  return last_comm;
}

/* The transformer blocks' parameters: all but the embedding (first) and output (last) layers. */
static double wl_block_params(const wl_model *m)
{
  double sum = 0;
  for (guint i = 1; m->blocks > 0 && i + 1 < m->layers->len; i++)
    sum += ((const wl_layer *)g_ptr_array_index(m->layers, i))->params;
  return sum;
}

static void wl_emit_optimizer(wl_dp *x, uint32_t last_comm, bool has_comm)
{
  const cfg_training *t = &x->w->training;
  double params = x->m->params;
  double flops = params * (t->optimizer == CFG_OPT_ADAM ? 12 : 4);
  uint32_t opt = wl_emit_optimizer_step(x->p, x->cls, x->w, x->hw, params, flops,
                                        has_comm ? &last_comm : NULL, has_comm ? 1 : 0);
  wl_emit_fp8_weight_casts(x->p, x->cls, x->w, x->m, wl_block_params(x->m), &opt);
}

bool wl_build_data_parallel(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                            prog_program *p, GError **err)
{
  (void)err;
  int dp = w->parallel.dp;
  wl_dp x = {.w = w, .hw = hw, .m = m, .p = p, .state = wl_state_bytes_per_param(&w->training)};
  x.cls = prog_class_add(p, "replica");
  x.dp_family = prog_family_add(p, "dp", PROG_DIM_DP);
  g_autofree int *all = g_new(int, dp);
  for (int r = 0; r < dp; r++)
    all[r] = r;
  int group = prog_group_add(p, all, dp);
  for (int r = 0; r < dp; r++) {
    prog_rank_set_class(p, r, x.cls);
    prog_family_set(p, x.dp_family, r, group);
  }
  prog_finalize(p);

  wl_states states = wl_states_of(w, m->params);
  prog_mem(p, x.cls, "weights", PROG_MEM_PARAMS, states.weights, NULL, 0);
  prog_mem(p, x.cls, "gradients", PROG_MEM_GRADS, states.grads, NULL, 0);
  prog_mem(p, x.cls, "optimizer states", PROG_MEM_OPTIMIZER, states.optimizer, NULL, 0);
  int micro_steps = w->training.global_batch / (dp * w->training.micro_batch);
  if (micro_steps > 1)
    wl_emit_accumulation(&x, micro_steps - 1);
  bool has_comm = false;
  uint32_t last_comm = wl_emit_synced_step(&x, dp, &has_comm);
  wl_emit_optimizer(&x, last_comm, has_comm);

  return true;
}
