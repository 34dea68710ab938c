/* memory: how many bytes each GPU needs, per pipeline stage, in closed form: model states under
 * ZeRO and offload, activations per Korthikanti et al. 2022 times the micro-batches a stage
 * holds under its pipeline schedule, the KV cache of serving, and the named allowances that
 * also make jobs run out of memory. The engines read the peak off the program's alloc/free
 * timeline; the two agree (a test holds them together). */
#ifndef DLSIM_MEMORY_H
#define DLSIM_MEMORY_H

#include "config/config.h"
#include "program/program.h"
#include "workloads/workloads.h"

typedef enum {
  MEM_CUDA_CONTEXT,  /* memory.cuda_context: the CUDA context and library workspaces */
  MEM_NCCL,          /* memory.nccl_buffers, per process group the GPU is in */
  MEM_COMM_BUCKETS,  /* two memory.comm_bucket: gradient buckets, ZeRO reduce / gather buffers */
  MEM_ZERO3_LIVE,    /* ZeRO-3: the largest layer gathered, plus memory.zero3_prefetch */
  MEM_RECOMPUTE,     /* backward's working set: one block's dropped activations, alive again
                      * while it is recomputed, or (on the output stage, if larger) an eager
                      * fp32 loss's gradients */
  MEM_MOE_BUFFERS,   /* MoE dispatch / combine: the token copies sent and received */
  MEM_PIPE_BUFFERS,  /* the pipeline engine's own: DeepSpeed's stage outputs and inputs and its
                      * last stage's fp32 logits in both of its buffers; torch.distributed.
                      * pipelining's receive buffers per micro-batch and kept outputs */
  MEM_GRAD_CAST,     /* BF16 optimizer: its whole accumulation buffer cast to grad_dtype for
                      * the reduce, one contiguous block the allocator keeps reserved beside
                      * the activations' */
  MEM_ZERO_STEP_GRADS, /* DeepSpeed's ZeRO 1/2 step: the gradient partition flattened, and cast
                        * to fp32, two more blocks the allocator keeps reserved */
  MEM_FRAGMENTATION, /* memory.fragmentation of everything else: the caching allocator's waste */
  MEM_NEXTRA
} mem_extra;
const char *mem_extra_name(mem_extra e);

typedef struct {
  int stage;
  double params, grads, optimizer, activations, kv_cache;
  double extra[MEM_NEXTRA];
  double other;        /* sum of extra */
  double model_states; /* params + grads + optimizer */
  double total;        /* on the GPU */
  double host, nvme;   /* offloaded, per GPU */
  double inflight;     /* micro-batches whose activations the stage holds */
  double activations_per_micro_batch;
  double unsharded;    /* in params and grads: the whole stage's weights and gradients that
                        * pipeline stages not resharded keep (mem_pp_unsharded_states); the
                        * engines' programs allocate only the shards, so it is base memory */
} mem_stage;

typedef struct {
  int nstages;
  mem_stage *stages;
  int worst;            /* the stage that needs the most */
  double capacity;      /* per GPU */
  double host_per_node, nvme_per_node;
  double host_capacity, nvme_capacity; /* per node; 0: the cluster does not state it */
  bool gpu_fits;                 /* the worst stage within the GPU's memory */
  bool host_fits, nvme_fits;     /* what is offloaded within the node's (true if not stated) */
  bool fits;                     /* all three: the job fits */
  int max_micro_batch;  /* the largest micro-batch that still fits (0: none) */
  bool states_only;
} mem_report;

typedef struct {
  bool states_only; /* model states only, as DeepSpeed's estimators count */
  bool search;      /* also find the largest micro-batch that fits */
  /* the model of the workload's shard (wl_shard_of(w)), built already (NULL: build it) */
  const wl_model *model;
} mem_options;

bool mem_estimate(const cfg_workload *w, const cfg_cluster *c, const mem_options *o,
                  mem_report *out, GError **err);
void mem_report_clear(mem_report *r);
/* The worst stage's total bytes per GPU, from a model already built for the workload's shard
 * (wl_shard_of(w)): what a planner checks for each of thousands of layouts. */
double mem_peak_with_model(const cfg_workload *w, const wl_model *m);
const mem_stage *mem_worst(const mem_report *r);

/* Static memory of each program class (what is not allocated op by op): the engines start the
 * class's timeline from it, so that timeline peak and closed form are comparable. */
void mem_annotate_program(prog_program *p, const mem_report *r);

/* KV cache per token on one GPU: K and V of every layer's kv heads (split by TP). */
double mem_kv_bytes_per_token(const cfg_model *m, cfg_dtype dtype, int tp);

/* DeepSpeed's documented estimators (estimate_zero2/zero3_model_states_mem_needs, "all live"),
 * for comparison: bytes per GPU and per node's CPU. */
typedef struct {
  double gpu, cpu;
} mem_deepspeed;
/* The whole model's parameters and its largest layer's, unsharded: what DeepSpeed's estimators
 * take (a generic model states them; a transformer or CNN is built to count them). */
bool mem_model_params(const cfg_workload *w, double *params, double *largest_layer, GError **err);
mem_deepspeed mem_deepspeed_estimate(double params, double largest_layer, int gpus_per_node,
                                     int nodes, int zero, bool offload, bool offload_params,
                                     bool zero_init);

#endif
