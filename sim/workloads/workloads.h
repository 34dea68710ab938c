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
} wl_kernel;

typedef struct {
  const char *name;
  double params;      /* parameters held by one GPU */
  GArray *fwd, *bwd;  /* wl_kernel */
  double saved_bytes; /* activations kept from forward to backward, one micro-batch */
  double model_flops; /* forward FLOPs by the model-FLOPs convention (MFU) */
} wl_layer;

typedef struct {
  GPtrArray *layers; /* wl_layer*, forward order */
  double params;     /* sum over layers */
  double samples;    /* per micro-batch */
  double tokens;     /* per micro-batch */
  cfg_dtype dtype;
  GStringChunk *strings;
} wl_model;

/* One micro-batch of `micro_batch` samples on one GPU (no model parallelism yet). */
bool wl_model_build(const cfg_model *m, const cfg_training *t, int micro_batch, wl_model **out,
                    GError **err);
void wl_model_free(wl_model *m);
double wl_model_fwd_flops(const wl_model *m);     /* model FLOPs of one forward pass */

/* Bytes per parameter of each model state under mixed precision (ZeRO paper convention). */
typedef struct {
  double weights, grads, optimizer;
} wl_state_bytes;
wl_state_bytes wl_state_bytes_per_param(const cfg_training *t);

/* Builds the program of one training step. */
bool wl_build(const cfg_workload *w, const hw_cluster *hw, prog_program **out, GError **err);

#endif
