/* workloads: models (dense transformer, CNN) and parallel strategies, expanded into a program.
 *
 * A model is first expanded into layers of kernels for one micro-batch on one GPU (wl_model);
 * a strategy then lays those kernels, the communication and the memory events out per rank. */
#ifndef DLSIM_WORKLOADS_H
#define DLSIM_WORKLOADS_H

#include "config/config.h"
#include "hardware/hardware.h"
#include "program/program.h"

typedef struct {
  const char *name;
  cfg_kernel_class kclass;
  double flops, bytes;
  double inner;   /* a GEMM's reduction dimension K (its efficiency depends on it), or 0 */
  bool recompute; /* re-runs forward work that activation recomputation dropped */
} wl_kernel;

typedef struct {
  const char *name;
  double params;      /* parameters held by one GPU */
  GArray *fwd, *bwd;  /* wl_kernel */
  double saved_bytes; /* activations kept from forward to backward, one micro-batch */
  double model_flops; /* forward FLOPs by the model-FLOPs convention (MFU) */
  double recompute_flops; /* forward FLOPs run again by recomputation (same convention, HFU) */
} wl_layer;

typedef struct {
  GPtrArray *layers; /* wl_layer*, forward order: embedding, blocks..., output */
  double params;     /* sum over layers */
  double samples;    /* per micro-batch */
  double tokens;     /* per micro-batch */
  int blocks;        /* repeated layers between the first and the last (transformer blocks) */
  double recompute_peak; /* activations alive at once while one block is recomputed */
  cfg_dtype dtype;
  GStringChunk *strings;
} wl_model;

/* How one GPU holds the model: its tensor-parallel share and what it keeps for backward. */
typedef struct {
  int micro_batch;
  int tp;
  int cp;                  /* context parallelism: this GPU's 1/cp of the sequence */
  bool sp;                 /* sequence parallelism */
  cfg_recompute recompute;
} wl_shard;

wl_shard wl_shard_of(const cfg_workload *w);

/* One micro-batch on one GPU of the tensor-parallel group. */
bool wl_model_build(const cfg_model *m, const cfg_training *t, const wl_shard *shard,
                    wl_model **out, GError **err);
void wl_model_free(wl_model *m);
double wl_model_fwd_flops(const wl_model *m);     /* model FLOPs of one forward pass */

/* Bytes per parameter of each model state: weights in the training dtype, gradients in
 * training.grad_dtype, optimizer states in fp32 (Adam: master copy + m + v, or m + v when the
 * weights already are fp32; SGD: momentum, plus the master copy in mixed precision). */
typedef struct {
  double weights, grads, optimizer;
} wl_state_bytes;
wl_state_bytes wl_state_bytes_per_param(const cfg_training *t);

/* Model states of one GPU holding `params` parameters, sharded by ZeRO over the data-parallel
 * group and offloaded as the workload says: bytes on the GPU, in host memory and on NVMe. */
typedef struct {
  double weights, grads, optimizer; /* on the GPU */
  double host, nvme;                /* moved off it */
} wl_states;
wl_states wl_states_of(const cfg_workload *w, double params);

/* Pipeline stages: which layers of a wl_model stage `s` of `pp` holds (blocks split evenly,
 * the embedding on the first, the output layer on the last). */
typedef struct {
  guint first, count; /* range in wl_model.layers */
  bool embedding, output;
} wl_stage;
wl_stage wl_stage_of(const wl_model *m, int pp, int s);
/* Micro-batches whose activations a stage holds at once under a pipeline schedule. */
double wl_inflight(const cfg_parallel *p, int stage, int micro_batches);

/* Builds the program of one training step. */
bool wl_build(const cfg_workload *w, const hw_cluster *hw, prog_program **out, GError **err);
/* Checks that a layout can run: divisibility of heads, layers, sequence, micro-batches. */
bool wl_check_layout(const cfg_workload *w, GError **err);
/* The foundation's data-parallel builder, kept as the reference that TP = PP = 1 must match. */
bool wl_build_reference_dp(const cfg_workload *w, const hw_cluster *hw, prog_program **out,
                           GError **err);

#endif
