/* Eager PyTorch's unfused ops for the parts of a Llama block torch.compile would fuse, as
 * torchtitan's model runs them without it (pytorch/torchtitan @ 9dec370, the commit of its
 * December 2024 H100 benchmark: torchtitan/models/norms.py RMSNorm, torchtitan/models/llama/
 * model.py apply_rotary_emb, repeat_kv and FeedForward). Every op is a kernel of its own, so a
 * launch for the host, and a pass over its tensor: it reads its inputs and writes its output
 * (16-bit, or fp32 where the model upcasts). Backward runs each op's autograd formula. */
#include "workloads/workloads_internal.h"

/* Bytes one op moves per element of its tensor: `wide` 16-bit (the training dtype's) and
 * `f32` fp32 values read or written. */
typedef struct {
  const char *name;
  double wide, f32;
} wl_eager_op;

/* RMSNorm._norm(x.float()).type_as(x) * weight: x.float(), pow(2), mean(-1) (reads the
 * tensor, writes one value per row), + eps and rsqrt on those values, x * rsqrt, type_as,
 * * weight. */
static const wl_eager_op wl_rmsnorm_fwd[] = {
    {"float", 1, 1}, {"pow", 0, 2},     {"mean", 0, 1},    {"add_eps", 0, 0},
    {"rsqrt", 0, 0}, {"mul_rsqrt", 0, 2}, {"type_as", 1, 1}, {"mul_weight", 2, 0}};
/* Its autograd, in reverse: * weight (the input's gradient, and the weight's: a product and
 * a sum over the rows), type_as (a cast back to fp32), x * rsqrt (both factors' gradients, the
 * second summed over the row), rsqrt and mean (one value per row, broadcast back), pow (2x
 * times the gradient), the two gradients of the fp32 input added, and the cast to 16 bits. */
static const wl_eager_op wl_rmsnorm_bwd[] = {
    {"mul_weight.bwd", 2, 0}, {"mul_weight.wgrad", 4, 0}, {"type_as.bwd", 1, 1},
    {"mul_rsqrt.bwd", 0, 2},  {"mul_rsqrt.bwd_rsqrt", 0, 4}, {"rsqrt.bwd", 0, 0},
    {"mean.bwd", 0, 1},       {"pow.bwd", 0, 3},          {"grad_add", 0, 3},
    {"float.bwd", 1, 1}};

/* apply_rotary_emb on queries or keys: x.float(), view_as_complex (no kernel), times the
 * complex frequencies (fp32 in and out; the frequencies are one row per position, shared by
 * the batch and the heads), view_as_real (no kernel), type_as. Backward: the cast back to fp32,
 * the product with the conjugate frequencies, the cast to 16 bits. */
static const wl_eager_op wl_rope_fwd[] = {{"float", 1, 1}, {"mul_freqs", 0, 2}, {"type_as", 1, 1}};
static const wl_eager_op wl_rope_bwd[] = {
    {"type_as.bwd", 1, 1}, {"mul_freqs.bwd", 0, 2}, {"float.bwd", 1, 1}};

/* FeedForward: w2(F.silu(w1(x)) * w3(x)), per element of the hidden width: silu, the product;
 * backward, the product's two gradients and silu's. */
static const wl_eager_op wl_swiglu_fwd[] = {{"silu", 2, 0}, {"mul", 3, 0}};
static const wl_eager_op wl_swiglu_bwd[] = {{"mul.bwd_silu", 3, 0}, {"mul.bwd_up", 3, 0}, {"silu.bwd", 3, 0}};

/* One op's kernel: forward, replayed in backward by recomputation, or its gradient. */
static void wl_eager_kernel(wl_model *m, wl_layer *l, wl_role role, const char *name,
                            double elems, double bytes, bool backward, bool replay)
{
  if (backward || replay)
    wl_bwd(m, l, role, backward ? WL_PHASE_BACKWARD : WL_PHASE_RECOMPUTE, name,
           CFG_KCLASS_ELEMENTWISE, elems, bytes);
  else
    wl_fwd(m, l, role, name, CFG_KCLASS_ELEMENTWISE, elems, bytes);
}

static void wl_eager_emit(wl_model *m, wl_layer *l, wl_role role, const char *what, double elems,
                          double dt, const wl_eager_op *ops, size_t n, bool backward, bool replay)
{
  for (size_t i = 0; i < n; i++) {
    g_autofree char *name = g_strconcat(what, ".", ops[i].name, NULL);
    wl_eager_kernel(m, l, role, name, elems, elems * (ops[i].wide * dt + ops[i].f32 * 4),
                    backward, replay);
  }
}

#define WL_EAGER_LIST(a) (a), G_N_ELEMENTS(a)

/* Each module's ops, forward and backward, and what its kernels are to the strategies. */
typedef struct {
  const wl_eager_op *fwd;
  size_t nfwd;
  const wl_eager_op *bwd;
  size_t nbwd;
  wl_role role;
} wl_eager_def;

static const wl_eager_def wl_eager_modules[] = {
    [WL_EAGER_RMSNORM] = {WL_EAGER_LIST(wl_rmsnorm_fwd), WL_EAGER_LIST(wl_rmsnorm_bwd), WL_ROLE_NORM},
    [WL_EAGER_ROPE] = {WL_EAGER_LIST(wl_rope_fwd), WL_EAGER_LIST(wl_rope_bwd), WL_ROLE_OTHER},
    [WL_EAGER_SWIGLU] = {WL_EAGER_LIST(wl_swiglu_fwd), WL_EAGER_LIST(wl_swiglu_bwd), WL_ROLE_ACT},
};

void wl_eager(wl_model *m, wl_layer *l, wl_eager_module module, const char *what, double elems,
              double dt, bool backward, bool replay)
{
  const wl_eager_def *e = &wl_eager_modules[module];
  if (backward)
    wl_eager_emit(m, l, e->role, what, elems, dt, e->bwd, e->nbwd, true, false);
  else
    wl_eager_emit(m, l, e->role, what, elems, dt, e->fwd, e->nfwd, false, replay);
}

/* repeat_kv: unsqueeze and expand are views, the reshape of the expanded tensor copies it, so
 * keys and values are each written once per query head (read `narrow` elements, write `wide`);
 * backward sums the copies' gradients back (read wide, write narrow). */
void wl_eager_repeat_kv(wl_model *m, wl_layer *l, double narrow, double wide, double dt,
                        bool backward, bool replay)
{
  static const char *const names[2][2] = {{"repeat_k", "repeat_v"}, {"repeat_k.bwd", "repeat_v.bwd"}};
  for (int i = 0; i < 2; i++)
    wl_eager_kernel(m, l, WL_ROLE_OTHER, names[backward][i], wide, (narrow + wide) * dt, backward, replay);
}
