/* The memory-bound kernels PyTorch's context_parallel runs around each ring step's attention
 * (torch/distributed/tensor/experimental/_attention.py, _templated_ring_attention and its
 * backward, read at pytorch 0123248a: the load-balanced ring, _SDPAMerger and the rotaters that
 * torchtitan 9dec370's December 2024 H100 runs set, torch 1963fc8 itself not at hand;
 * parallel.cp_exchange allgather). Transformer Engine's ring merges on a second
 * stream beside the next step; PyTorch's run on the compute stream, in fp32 (convert_to_f32):
 *  - forward: each step's output and logsumexp merged into the running fp32 ones (_SDPAMerger:
 *    out.to(float32), then out - sigmoid(lse_new - lse) * (out - out_new)); the first step's
 *    output cast to fp32 and the result cast back; K and V concatenated into one buffer for
 *    the exchange before every step but the last;
 *  - backward: dQ, dK and dV accumulated in fp32 buffers (zeros_like), each step's bf16
 *    gradients added (a half of dK and dV through _partial_update, which adds into one chunk
 *    and concatenates the two again), the running dK and dV concatenated for the next rank,
 *    and dQ and the dK, dV that come back cast to the training dtype at the end.
 * Eager, every op is a kernel of its own over the whole tensor. torch.compile traces the ring
 * into the block's graph (the ring implementations have compile support since PyTorch #124215):
 * Inductor fuses each step's merge, or each step's additions and the concatenation they feed,
 * into one kernel, and drops the K, V concatenations whose result the all-gather rotater never
 * sends (it gathers once, at the first step).
 * The tensors: the SDPA op PyTorch's ring calls (aten::_scaled_dot_product_flash_attention)
 * takes K and V with one head per query head, so Q, K, V, the output and their gradients have
 * the same `elems` elements; the rank the others wait for is the last, whose later steps use
 * all its queries against the first half of the keys (partial false in forward, the first
 * chunk's _partial_update in backward). Bytes per element: `wide` values of the training dtype
 * and `f32` fp32 values read or written. */
#include "workloads/workloads_internal.h"

typedef struct {
  const char *name;
  double wide, f32;
} wl_tcp_op;

typedef struct {
  const wl_tcp_op *ops;
  size_t n;
} wl_tcp_list;

/* A pass's kernels before its first step, beside each step, and after its last. */
typedef enum { WL_TCP_FIRST, WL_TCP_STEP, WL_TCP_LAST } wl_tcp_edge;

#define WL_TCP_LIST(a) {(a), G_N_ELEMENTS(a)}

/* Forward, eager. */
static const wl_tcp_op wl_tcp_fwd_first[] = {{"merge.float", 1, 1}};
static const wl_tcp_op wl_tcp_fwd_step[] = {
    {"merge.float", 1, 1}, {"merge.sub", 0, 3}, {"merge.mul_sigmoid", 0, 2}, {"merge.sub_out", 0, 3}};
static const wl_tcp_op wl_tcp_fwd_last[] = {{"merge.to_dtype", 1, 1}};
/* Forward, compiled: running fp32 out and the step's 16-bit out in, fp32 out. */
static const wl_tcp_op wl_tcp_fwd_step_fused[] = {{"merge", 1, 2}};

/* Backward, eager: three fp32 zero fills; per step dK and dV added into one half each and
 * concatenated again, the two concatenated for the send, dQ added; the casts at the end. */
static const wl_tcp_op wl_tcp_bwd_first[] = {{"grad.zeros", 0, 3}};
static const wl_tcp_op wl_tcp_bwd_step[] = {
    {"dk_add", 0.5, 1}, {"dk_cat", 0, 2}, {"dv_add", 0.5, 1}, {"dv_cat", 0, 2},
    {"dkv_cat", 0, 4},  {"dq_add", 1, 2}};
static const wl_tcp_op wl_tcp_bwd_last[] = {{"dq.to_dtype", 1, 1}, {"dkv.to_dtype", 2, 2}};
/* Backward, compiled: dQ's addition, and dK, dV added straight into the send buffer. */
static const wl_tcp_op wl_tcp_bwd_step_fused[] = {{"dq_add", 1, 2}, {"dkv_add", 1, 4}};
static const wl_tcp_op wl_tcp_bwd_last_fused[] = {{"dkv.to_dtype", 2, 2}};

/* [backward][eager][edge: 0 first, 1 step, 2 last] */
static const wl_tcp_list wl_tcp_lists[2][2][3] = {
    {{{NULL, 0}, WL_TCP_LIST(wl_tcp_fwd_step_fused), {NULL, 0}},
     {WL_TCP_LIST(wl_tcp_fwd_first), WL_TCP_LIST(wl_tcp_fwd_step), WL_TCP_LIST(wl_tcp_fwd_last)}},
    {{{NULL, 0}, WL_TCP_LIST(wl_tcp_bwd_step_fused), WL_TCP_LIST(wl_tcp_bwd_last_fused)},
     {WL_TCP_LIST(wl_tcp_bwd_first), WL_TCP_LIST(wl_tcp_bwd_step), WL_TCP_LIST(wl_tcp_bwd_last)}},
};

static void wl_tcp_kernel(wl_model *m, wl_layer *l, const wl_tcp *c, const char *what,
                          double bytes_per_elem, bool backward, bool replay)
{
  g_autofree char *name = g_strconcat("attention.", what, NULL);
  double bytes = c->elems * bytes_per_elem;
  if (backward || replay)
    wl_bwd(m, l, WL_ROLE_RING_STEP, backward ? WL_PHASE_BACKWARD : WL_PHASE_RECOMPUTE, name,
           CFG_KCLASS_ELEMENTWISE, c->elems, bytes);
  else
    wl_fwd(m, l, WL_ROLE_RING_STEP, name, CFG_KCLASS_ELEMENTWISE, c->elems, bytes);
}

static void wl_tcp_emit(wl_model *m, wl_layer *l, const wl_tcp *c, wl_tcp_edge edge,
                        bool backward, bool replay)
{
  const wl_tcp_list *list = &wl_tcp_lists[backward][c->eager][edge];
  for (size_t i = 0; i < list->n; i++)
    wl_tcp_kernel(m, l, c, list->ops[i].name, list->ops[i].wide * c->dt + list->ops[i].f32 * 4,
                  backward, replay);
}

/* K and V into one buffer for the exchange (bf16 read and written): eager before every step
 * but the last, compiled only the first step's, which the all-gather sends. */
static void wl_tcp_kv_cat(wl_model *m, wl_layer *l, const wl_tcp *c, int step, bool backward,
                          bool replay)
{
  bool sent = c->eager ? step < c->cp - 1 : step == 0;
  if (sent)
    wl_tcp_kernel(m, l, c, "kv_cat", 4 * c->dt, backward, replay);
}

void wl_torch_cp_before(wl_model *m, wl_layer *l, const wl_tcp *c, int step, bool backward,
                        bool replay)
{
  if (step == 0 && backward)
    wl_tcp_emit(m, l, c, WL_TCP_FIRST, true, false);
  wl_tcp_kv_cat(m, l, c, step, backward, replay);
}

void wl_torch_cp_after(wl_model *m, wl_layer *l, const wl_tcp *c, int step, bool backward,
                       bool replay)
{
  /* forward: the first step's output becomes the running one (cast to fp32 when eager) */
  if (step == 0 && !backward)
    wl_tcp_emit(m, l, c, WL_TCP_FIRST, false, replay);
  else
    wl_tcp_emit(m, l, c, WL_TCP_STEP, backward, replay);
  if (step == c->cp - 1)
    wl_tcp_emit(m, l, c, WL_TCP_LAST, backward, replay);
}
