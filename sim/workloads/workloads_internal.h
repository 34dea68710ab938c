/* Private to workloads. */
#ifndef DLSIM_WORKLOADS_INTERNAL_H
#define DLSIM_WORKLOADS_INTERNAL_H

#include "workloads/workloads.h"

wl_model *wl_model_new(cfg_dtype dtype);
/* `v` in decimal, in `buf` (16 bytes): names are made by the thousand, and printf's
 * formatting was a twentieth of a build. */
const char *wl_number(char *buf, guint v);
wl_layer *wl_layer_add(wl_model *m, const char *name, double params);
/* A kernel of layer `l` into its forward list, or into its backward list with its phase
 * (recomputation, a GEMM's input or weight gradient, or another backward kernel). */
void wl_fwd(wl_model *m, wl_layer *l, wl_role role, const char *what, cfg_kernel_class k,
            double flops, double bytes);
void wl_bwd(wl_model *m, wl_layer *l, wl_role role, wl_phase phase, const char *what,
            cfg_kernel_class k, double flops, double bytes);
/* The compute op of kernel `k` in class `cls`. */
uint32_t wl_emit_kernel(prog_program *p, int cls, const wl_kernel *k,
                        const uint32_t *deps, uint32_t ndeps);
/* The optimizer step of one GPU's `shard` parameters after `deps`: on the GPU, or on the host
 * CPUs when parallel.offload is cpu. */
uint32_t wl_emit_optimizer_step(prog_program *p, int cls, const cfg_workload *w,
                                const hw_cluster *hw, double shard, double flops,
                                const uint32_t *deps, uint32_t ndeps);
/* Per-tensor fp8's once-a-step cast of the linear weights among `block_params` (model.c), after
 * `after`; nothing under other dtypes. */
void wl_emit_fp8_weight_casts(prog_program *p, int cls, const cfg_workload *w, const wl_model *m,
                              double block_params, const uint32_t *after);
/* Layer `l` runs the same kernels as `like` (identical transformer blocks share one list). */
void wl_layer_share_kernels(wl_layer *l, const wl_layer *like);
/* Records the GEMM shape of the last kernel of a list: its output rows x cols and its reduction
 * dimension (of each matrix of a batched GEMM). */
void wl_set_gemm(GArray *kernels, double rows, double cols, double inner);
/* The dtype a kernel of `role` and class `k` computes in when training in `training`. */
cfg_dtype wl_kernel_dtype(cfg_dtype training, wl_role role, cfg_kernel_class k);
/* The kernel as the cost model takes it. */
hw_kernel wl_hw_kernel(const wl_kernel *k);

/* Eager PyTorch's unfused ops (eager.c) of one module over `elems` elements in 16-bit `dt`:
 * forward (or replayed by recomputation) or backward. */
typedef enum { WL_EAGER_RMSNORM, WL_EAGER_ROPE, WL_EAGER_SWIGLU } wl_eager_module;
void wl_eager(wl_model *m, wl_layer *l, wl_eager_module module, const char *what, double elems,
              double dt, bool backward, bool replay);
void wl_eager_repeat_kv(wl_model *m, wl_layer *l, double narrow, double wide, double dt,
                        bool backward, bool replay);

/* PyTorch context_parallel's memory-bound kernels around ring step `step` of `cp` (torchcp.c),
 * over tensors of `elems` elements in 16-bit `dt`, unfused when `eager`: before the step's
 * attention, and after it. */
typedef struct {
  double elems, dt;
  int cp;
  bool eager;
} wl_tcp;
void wl_torch_cp_before(wl_model *m, wl_layer *l, const wl_tcp *c, int step, bool backward,
                        bool replay);
void wl_torch_cp_after(wl_model *m, wl_layer *l, const wl_tcp *c, int step, bool backward,
                       bool replay);

bool wl_transformer_build(wl_model *m, const cfg_model *cm, const cfg_training *t,
                          const wl_shard *sh, GError **err);
bool wl_cnn_build(wl_model *m, const cfg_model *cm, const cfg_training *t, int micro_batch,
                  GError **err);
bool wl_generic_build(wl_model *m, const cfg_model *cm, const cfg_training *t, GError **err);

bool wl_build_data_parallel(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                            prog_program *p, GError **err);
/* Where each pass of each pipeline stage of a program begins in its op list. */
typedef struct wl_passes_at wl_passes_at;
void wl_passes_at_free(wl_passes_at *a);
/* `shared`: p came from prog_new_sharing_groups, with the groups this layout has. With
 * `record`, *record gets where each pass of p begins (wl_passes_at_free frees it). */
bool wl_build_parallel(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                       prog_program *p, bool shared, wl_passes_at **record, GError **err);
/* The program of `w`, which differs from `like`'s workload only in its global batch, made of
 * `like`'s ops (`at`: where its passes begin) rather than built: op for op what
 * wl_build_parallel gives, sharing like's groups and names. NULL where the schedule does not
 * grow by passes inserted at one point (DualPipe's pairs): then build it. */
prog_program *wl_derive_parallel(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                                 const prog_program *like, const wl_passes_at *at);
/* The same made in place of `like` once it is no longer needed: where each stage's passes go
 * and which of like's they copy (`w`, `hw` and `m` must outlive it). NULL where wl_derive_parallel
 * would give NULL or would build some inserted pass. */
typedef struct wl_inserts wl_inserts;
wl_inserts *wl_inserts_of(const cfg_workload *w, const hw_cluster *hw, const wl_model *m,
                          const prog_program *like, const wl_passes_at *at);
/* Turns `p`, the program `like` was, into the second: its stages' ops and the all-to-all
 * sizes (not the rest of its meta). */
void wl_inserts_apply(const wl_inserts *ins, prog_program *p);
void wl_inserts_free(wl_inserts *ins);
/* The stage classes `ins` changes, and per stage s: the op the inserts go before, how many ops
 * they are and a bit per stream they use (p: the first program). */
int wl_inserts_stages(const wl_inserts *ins);
void wl_inserts_splice(const wl_inserts *ins, const prog_program *p, guint *at, guint *n,
                       unsigned *streams);

/* Everything wl_groups reads, which alone decides a program's ranks, classes, families and
 * process groups: programs of two workloads with equal keys may share one group store. */
typedef struct {
  int tp, cp, pp, dp, ep; /* ep: 0 without experts */
  cfg_dim placement[CFG_NDIMS];
  bool moe, reverse;      /* expert families; DualPipe's or ZB-V's reverse channels */
} wl_groups_key;
void wl_groups_key_of(const cfg_workload *w, const wl_model *m, wl_groups_key *k);
bool wl_groups_key_equal(const wl_groups_key *a, const wl_groups_key *b);

/* The groups of a layout built before (a program to pass as prog_new_sharing_groups' `like`),
 * or NULL (a NULL cache: never). */
const prog_program *wl_cache_groups(const wl_cache *c, const wl_groups_key *key);
/* Remembers the groups of `built`, a program of that layout, for the next builds. */
void wl_cache_keep(wl_cache *c, const wl_groups_key *key, const prog_program *built);
/* The model of `w`'s shard: the one built before for the same model, training settings and
 * shard, else built (and kept). `*own` is what the caller frees: the model when there is no
 * cache (NULL: none). */
bool wl_cache_model(wl_cache *c, const cfg_workload *w, const wl_shard *shard,
                    const wl_model **out, wl_model **own, GError **err);

/* Error at a workload key, with its file:line:column. */
bool wl_fail(GError **err, const cfg_workload *w, const char *path, cfg_error_code code,
             const char *fmt, ...) G_GNUC_PRINTF(5, 6);

#endif
