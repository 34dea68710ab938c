/* The key tables of SCHEMA.md and the generic decoder that applies them to a YAML tree. */
#include "config/config_internal.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

const char *const cfg_dtype_names[] = {"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", NULL};

bool cfg_dtype_parse(const char *name, cfg_dtype *out, GError **err)
{
  for (int d = 0; cfg_dtype_names[d]; d++)
    if (strcmp(name, cfg_dtype_names[d]) == 0) {
      *out = (cfg_dtype)d;
      return true;
    }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "'%s' is not a data type (fp32, tf32, bf16, fp16, fp8, int8, int4)", name);
  return false;
}
static const char *const cfg_intra_names[] = {"nvswitch", "nvlink-ring", "pcie", NULL};
static const char *const cfg_topology_names[] = {"fat-tree", "rail-optimized", NULL};
static const char *const cfg_model_kind_names[] = {"transformer", "moe-transformer", "cnn", "generic", NULL};
static const char *const cfg_activation_names[] = {"gelu", "swiglu", NULL};
static const char *const cfg_optimizer_names[] = {"adam", "sgd", NULL};
static const char *const cfg_recompute_names[] = {"none", "selective", "full", NULL};
static const char *const cfg_schedule_names[] = {"gpipe", "1f1b", "interleaved", NULL};
static const char *const cfg_a2a_names[] = {"nccl", "deepep", "deepep-ll", NULL};
static const char *const cfg_offload_names[] = {"none", "cpu", "nvme", NULL};
static const char *const cfg_dim_names[] = {"tp", "cp", "pp", "dp", NULL};
static const char *const cfg_scheduler_names[] = {"continuous", "static", "chunked", "fused", NULL};
static const char *const cfg_arrival_names[] = {"poisson", "gamma", "uniform", "burst", NULL};
static const char *const cfg_lengths_names[] = {"fixed", "uniform", "file", NULL};
static const char *const cfg_preemption_names[] = {"recompute", "none", NULL};
static const char *const cfg_router_names[] = {"round-robin", "least-loaded", NULL};
static const char *const cfg_proto_names[] = {"ll", "ll128", "simple", NULL};
static const char *const cfg_link_class_names[] = {"intra", "network", NULL};
static const char *const cfg_kclass_names[] = {"gemm",      "conv",      "attention",
                                               "elementwise", "optimizer", "other", NULL};

const char *cfg_dtype_name(cfg_dtype d)
{
  return d < CFG_NDTYPES ? cfg_dtype_names[d] : "?";
}

double cfg_dtype_bytes(cfg_dtype d)
{
  static const double bytes[] = {4, 4, 2, 2, 1, 1, 0.5};
  return d < CFG_NDTYPES ? bytes[d] : 0;
}

const char *cfg_proto_name(cfg_proto p)
{
  return p < CFG_NPROTOS ? cfg_proto_names[p] : "?";
}

const char *cfg_kernel_class_name(cfg_kernel_class k)
{
  return k < CFG_NKCLASSES ? cfg_kclass_names[k] : "?";
}

/* Shorthands so each table row reads like the YAML it accepts. */
#define F_INT(s, k, m, lo) {.key = k, .type = CFG_T_INT, .offset = offsetof(s, m), .min = lo}
#define F_QTY(s, k, m, u) {.key = k, .type = CFG_T_QTY, .offset = offsetof(s, m), .unit = u}
#define F_BOOL(s, k, m) {.key = k, .type = CFG_T_BOOL, .offset = offsetof(s, m)}
#define F_STR(s, k, m) {.key = k, .type = CFG_T_STRING, .offset = offsetof(s, m)}
#define F_PATH(s, k, m) {.key = k, .type = CFG_T_PATH, .offset = offsetof(s, m)}
#define F_ENUM(s, k, m, n) {.key = k, .type = CFG_T_ENUM, .offset = offsetof(s, m), .names = n}
#define F_MAP(s, k, m, sch) {.key = k, .type = CFG_T_MAP, .offset = offsetof(s, m), .sub = &sch}
#define SCHEMA(name, type, fields, initfn)                                                      \
  {name, fields, G_N_ELEMENTS(fields), sizeof(type), initfn}

static void cfg_init_int(int *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    v[i] = CFG_UNSET_INT;
}

/* ---- efficiency / calibration ------------------------------------------------------------ */

static void cfg_efficiency_init(void *p)
{
  cfg_efficiency *e = p;
  for (int k = 0; k < CFG_NKCLASSES; k++)
    e->flops_efficiency[k] = NAN;
  e->memory_efficiency = e->launch_overhead = e->gemm_k_half = NAN;
  e->sustained = e->fp8_scale = NAN;
  e->source = NULL;
}

static const cfg_field cfg_efficiency_fields[] = {
    {.key = "flops", .type = CFG_T_QTY_BY_ENUM, .offset = offsetof(cfg_efficiency, flops_efficiency),
     .unit = UNITS_FRACTION, .names = cfg_kclass_names, .max = 1.0},
    {.key = "memory", .type = CFG_T_QTY, .offset = offsetof(cfg_efficiency, memory_efficiency),
     .unit = UNITS_FRACTION, .max = 1.0},
    F_QTY(cfg_efficiency, "gemm_k_half", gemm_k_half, UNITS_NUMBER),
    F_QTY(cfg_efficiency, "sustained", sustained, UNITS_FRACTION),
    F_QTY(cfg_efficiency, "fp8_scale", fp8_scale, UNITS_FRACTION),
    F_QTY(cfg_efficiency, "launch_overhead", launch_overhead, UNITS_SECONDS),
    F_STR(cfg_efficiency, "source", source),
};
const cfg_schema cfg_schema_efficiency =
    SCHEMA("efficiency", cfg_efficiency, cfg_efficiency_fields, cfg_efficiency_init);

static void cfg_nan(double *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    v[i] = NAN;
}

static const cfg_field cfg_hop_fields[] = {
    {.key = "intra", .type = CFG_T_QTY_BY_ENUM, .offset = offsetof(cfg_nccl, hop_latency[CFG_LINK_INTRA]),
     .unit = UNITS_SECONDS, .names = cfg_proto_names},
    {.key = "network", .type = CFG_T_QTY_BY_ENUM,
     .offset = offsetof(cfg_nccl, hop_latency[CFG_LINK_NETWORK]), .unit = UNITS_SECONDS,
     .names = cfg_proto_names},
};
/* hop_latency decodes straight into cfg_nccl (offsets are from the cfg_nccl start). */
static const cfg_schema cfg_schema_hop = {"nccl.hop_latency", cfg_hop_fields,
                                          G_N_ELEMENTS(cfg_hop_fields), sizeof(cfg_nccl), NULL};

void cfg_nccl_init(void *p)
{
  cfg_nccl *n = p;
  cfg_nan(n->link_efficiency, CFG_NLINKCLASSES);
  n->nvls_efficiency = n->p2p_efficiency = n->deepep_efficiency = NAN;
  cfg_nan(n->base_latency, CFG_NPROTOS);
  cfg_nan(&n->hop_latency[0][0], CFG_NLINKCLASSES * CFG_NPROTOS);
  cfg_nan(n->chunk, CFG_NPROTOS);
  cfg_nan(n->protocol_efficiency, CFG_NPROTOS);
  n->max_channels = CFG_UNSET_INT;
  n->source = NULL;
}

static const cfg_field cfg_nccl_fields[] = {
    {.key = "link_efficiency", .type = CFG_T_QTY_BY_ENUM, .offset = offsetof(cfg_nccl, link_efficiency),
     .unit = UNITS_FRACTION, .names = cfg_link_class_names, .max = 1.0},
    {.key = "nvls_efficiency", .type = CFG_T_QTY, .offset = offsetof(cfg_nccl, nvls_efficiency),
     .unit = UNITS_FRACTION, .max = 1.0},
    {.key = "p2p_efficiency", .type = CFG_T_QTY, .offset = offsetof(cfg_nccl, p2p_efficiency),
     .unit = UNITS_FRACTION, .max = 1.0},
    {.key = "deepep_efficiency", .type = CFG_T_QTY, .offset = offsetof(cfg_nccl, deepep_efficiency),
     .unit = UNITS_FRACTION, .max = 1.0},
    {.key = "base_latency", .type = CFG_T_QTY_BY_ENUM, .offset = offsetof(cfg_nccl, base_latency),
     .unit = UNITS_SECONDS, .names = cfg_proto_names},
    {.key = "hop_latency", .type = CFG_T_MAP, .offset = 0, .sub = &cfg_schema_hop},
    {.key = "chunk", .type = CFG_T_QTY_BY_ENUM, .offset = offsetof(cfg_nccl, chunk),
     .unit = UNITS_BYTES, .names = cfg_proto_names},
    {.key = "protocol_efficiency", .type = CFG_T_QTY_BY_ENUM,
     .offset = offsetof(cfg_nccl, protocol_efficiency), .unit = UNITS_FRACTION,
     .names = cfg_proto_names, .max = 1.0},
    F_INT(cfg_nccl, "max_channels", max_channels, 1),
    F_STR(cfg_nccl, "source", source),
};
const cfg_schema cfg_schema_nccl = SCHEMA("nccl", cfg_nccl, cfg_nccl_fields, cfg_nccl_init);

static void cfg_calibration_init(void *p)
{
  cfg_calibration *c = p;
  c->gpu = c->notes = NULL;
  cfg_efficiency_init(&c->efficiency);
  cfg_nccl_init(&c->nccl);
}

static const cfg_field cfg_calibration_fields[] = {
    F_STR(cfg_calibration, "gpu", gpu),
    F_STR(cfg_calibration, "notes", notes),
    F_MAP(cfg_calibration, "efficiency", efficiency, cfg_schema_efficiency),
    F_MAP(cfg_calibration, "nccl", nccl, cfg_schema_nccl),
};
const cfg_schema cfg_schema_calibration =
    SCHEMA("calibration", cfg_calibration, cfg_calibration_fields, cfg_calibration_init);

/* ---- cluster ------------------------------------------------------------------------------ */

static void cfg_gpu_init(void *p)
{
  cfg_gpu *g = p;
  g->name = NULL;
  g->memory = g->memory_bandwidth = NAN;
  for (int d = 0; d < CFG_NDTYPES; d++)
    g->flops[d] = NAN;
  g->calibration = NULL;
  cfg_efficiency_init(&g->efficiency);
}

static const cfg_field cfg_gpu_fields[] = {
    F_STR(cfg_gpu, "name", name),
    F_QTY(cfg_gpu, "memory", memory, UNITS_BYTES),
    F_QTY(cfg_gpu, "memory_bandwidth", memory_bandwidth, UNITS_BYTES_PER_S),
    {.key = "flops", .type = CFG_T_QTY_BY_ENUM, .offset = offsetof(cfg_gpu, flops),
     .unit = UNITS_FLOPS, .names = cfg_dtype_names},
    F_PATH(cfg_gpu, "calibration", calibration),
    F_MAP(cfg_gpu, "efficiency", efficiency, cfg_schema_efficiency),
};
static const cfg_schema cfg_schema_gpu = SCHEMA("gpu", cfg_gpu, cfg_gpu_fields, cfg_gpu_init);

static void cfg_intra_init(void *p)
{
  cfg_intra *i = p;
  i->kind = (cfg_intra_kind)CFG_UNSET_INT;
  i->bandwidth = i->latency = NAN;
  i->nvls = CFG_UNSET_INT;
}

static const cfg_field cfg_intra_fields[] = {
    F_ENUM(cfg_intra, "kind", kind, cfg_intra_names),
    F_QTY(cfg_intra, "bandwidth", bandwidth, UNITS_BYTES_PER_S),
    F_QTY(cfg_intra, "latency", latency, UNITS_SECONDS),
    F_BOOL(cfg_intra, "nvls", nvls),
};
static const cfg_schema cfg_schema_intra =
    SCHEMA("node.intra", cfg_intra, cfg_intra_fields, cfg_intra_init);

static void cfg_node_spec_init(void *p)
{
  cfg_node_spec *n = p;
  n->count = n->gpus_per_node = n->nics_per_node = CFG_UNSET_INT;
  cfg_intra_init(&n->intra);
  n->host_memory = n->nvme = NAN;
}

static const cfg_field cfg_node_fields[] = {
    F_INT(cfg_node_spec, "count", count, 1),
    F_INT(cfg_node_spec, "gpus_per_node", gpus_per_node, 1),
    F_MAP(cfg_node_spec, "intra", intra, cfg_schema_intra),
    F_INT(cfg_node_spec, "nics_per_node", nics_per_node, 0),
    F_QTY(cfg_node_spec, "host_memory", host_memory, UNITS_BYTES),
    F_QTY(cfg_node_spec, "nvme", nvme, UNITS_BYTES),
};
static const cfg_schema cfg_schema_node =
    SCHEMA("node", cfg_node_spec, cfg_node_fields, cfg_node_spec_init);

static void cfg_tier_init(void *p)
{
  cfg_tier *t = p;
  t->name = NULL;
  t->latency = t->oversubscription = NAN;
  t->nodes_per_switch = CFG_UNSET_INT;
}

static const cfg_field cfg_tier_fields[] = {
    F_STR(cfg_tier, "name", name),
    F_QTY(cfg_tier, "latency", latency, UNITS_SECONDS),
    F_INT(cfg_tier, "nodes_per_switch", nodes_per_switch, 1),
    F_QTY(cfg_tier, "oversubscription", oversubscription, UNITS_NUMBER),
};
static const cfg_schema cfg_schema_tier =
    SCHEMA("network.tiers", cfg_tier, cfg_tier_fields, cfg_tier_init);

static void cfg_network_init(void *p)
{
  cfg_network *n = p;
  n->topology = (cfg_topology)CFG_UNSET_INT;
  n->nic_bandwidth = NAN;
  n->tiers = NULL;
  n->ntiers = 0;
  n->sharp = CFG_UNSET_INT;
}

static const cfg_field cfg_network_fields[] = {
    F_ENUM(cfg_network, "topology", topology, cfg_topology_names),
    F_BOOL(cfg_network, "sharp", sharp),
    F_QTY(cfg_network, "nic_bandwidth", nic_bandwidth, UNITS_BYTES_PER_S),
    {.key = "tiers", .type = CFG_T_SEQ_MAP, .offset = offsetof(cfg_network, tiers),
     .count_offset = offsetof(cfg_network, ntiers), .sub = &cfg_schema_tier},
};
static const cfg_schema cfg_schema_network =
    SCHEMA("network", cfg_network, cfg_network_fields, cfg_network_init);

static void cfg_cluster_init(void *p)
{
  cfg_cluster *c = p;
  c->name = NULL;
  cfg_gpu_init(&c->gpu);
  cfg_node_spec_init(&c->node);
  cfg_network_init(&c->network);
  cfg_nccl_init(&c->nccl);
  c->doc = NULL;
}

static const cfg_field cfg_cluster_fields[] = {
    F_STR(cfg_cluster, "name", name),
    F_MAP(cfg_cluster, "gpu", gpu, cfg_schema_gpu),
    F_MAP(cfg_cluster, "node", node, cfg_schema_node),
    F_MAP(cfg_cluster, "network", network, cfg_schema_network),
    F_MAP(cfg_cluster, "nccl", nccl, cfg_schema_nccl),
};
const cfg_schema cfg_schema_cluster =
    SCHEMA("cluster", cfg_cluster, cfg_cluster_fields, cfg_cluster_init);

/* ---- model -------------------------------------------------------------------------------- */

static const char *const cfg_routing_names[] = {"uniform", "zipf", "histogram", NULL};

static void cfg_moe_init(void *p)
{
  cfg_moe *m = p;
  cfg_init_int(&m->experts, 5);
  m->first_dense = m->drop_tokens = m->max_nodes = CFG_UNSET_INT;
  m->routing = (cfg_routing)CFG_UNSET_INT;
  m->zipf_s = m->capacity_factor = NAN;
  m->histogram = NULL;
}

static const cfg_field cfg_moe_fields[] = {
    F_INT(cfg_moe, "experts", experts, 1),
    F_INT(cfg_moe, "top_k", top_k, 1),
    F_INT(cfg_moe, "expert_ffn_hidden", expert_ffn_hidden, 1),
    F_INT(cfg_moe, "shared_experts", shared_experts, 0),
    F_INT(cfg_moe, "every", every, 1),
    F_INT(cfg_moe, "first_dense", first_dense, 0),
    F_ENUM(cfg_moe, "routing", routing, cfg_routing_names),
    F_QTY(cfg_moe, "zipf_s", zipf_s, UNITS_NUMBER),
    F_PATH(cfg_moe, "histogram", histogram),
    F_QTY(cfg_moe, "capacity_factor", capacity_factor, UNITS_NUMBER),
    F_BOOL(cfg_moe, "drop_tokens", drop_tokens),
    F_INT(cfg_moe, "max_nodes", max_nodes, 0),
};
static const cfg_schema cfg_schema_moe = SCHEMA("model.moe", cfg_moe, cfg_moe_fields, cfg_moe_init);

static void cfg_mla_init(void *p)
{
  cfg_mla *m = p;
  m->q_rank = m->kv_rank = m->rope_dim = CFG_UNSET_INT;
}

static const cfg_field cfg_mla_fields[] = {
    F_INT(cfg_mla, "q_rank", q_rank, 1),
    F_INT(cfg_mla, "kv_rank", kv_rank, 1),
    F_INT(cfg_mla, "rope_dim", rope_dim, 0),
};
static const cfg_schema cfg_schema_mla = SCHEMA("model.mla", cfg_mla, cfg_mla_fields, cfg_mla_init);

static void cfg_model_init(void *p)
{
  cfg_model *m = p;
  m->kind = (cfg_model_kind)CFG_UNSET_INT;
  m->name = NULL;
  cfg_init_int(&m->layers, 7);
  m->activation = (cfg_activation)CFG_UNSET_INT;
  m->tied_embeddings = CFG_UNSET_INT;
  cfg_moe_init(&m->moe);
  cfg_mla_init(&m->mla);
  m->head_dim = CFG_UNSET_INT;
  m->preset = NULL;
  m->image_size = m->num_classes = CFG_UNSET_INT;
  m->params = m->largest_layer_params = NAN;
}

static const cfg_field cfg_model_fields[] = {
    F_ENUM(cfg_model, "kind", kind, cfg_model_kind_names),
    F_STR(cfg_model, "name", name),
    F_INT(cfg_model, "layers", layers, 1),
    F_INT(cfg_model, "hidden", hidden, 1),
    F_INT(cfg_model, "heads", heads, 1),
    F_INT(cfg_model, "kv_heads", kv_heads, 1),
    F_INT(cfg_model, "ffn_hidden", ffn_hidden, 1),
    F_INT(cfg_model, "vocab", vocab, 1),
    F_INT(cfg_model, "seq_len", seq_len, 1),
    F_ENUM(cfg_model, "activation", activation, cfg_activation_names),
    F_BOOL(cfg_model, "tied_embeddings", tied_embeddings),
    F_MAP(cfg_model, "moe", moe, cfg_schema_moe),
    F_INT(cfg_model, "head_dim", head_dim, 1),
    F_MAP(cfg_model, "mla", mla, cfg_schema_mla),
    F_STR(cfg_model, "preset", preset),
    F_INT(cfg_model, "image_size", image_size, 1),
    F_INT(cfg_model, "num_classes", num_classes, 1),
    F_QTY(cfg_model, "params", params, UNITS_NUMBER),
    F_QTY(cfg_model, "largest_layer_params", largest_layer_params, UNITS_NUMBER),
};
const cfg_schema cfg_schema_model = SCHEMA("model", cfg_model, cfg_model_fields, cfg_model_init);

/* ---- workloads ----------------------------------------------------------------------------- */

static void cfg_training_init(void *p)
{
  cfg_training *t = p;
  t->global_batch = t->micro_batch = CFG_UNSET_INT;
  t->dtype = (cfg_dtype)CFG_UNSET_INT;
  t->optimizer = (cfg_optimizer)CFG_UNSET_INT;
  t->recompute = (cfg_recompute)CFG_UNSET_INT;
  t->flash_attention = CFG_UNSET_INT;
  t->grad_dtype = (cfg_dtype)CFG_UNSET_INT;
}

static const cfg_field cfg_training_fields[] = {
    F_INT(cfg_training, "global_batch", global_batch, 1),
    F_INT(cfg_training, "micro_batch", micro_batch, 1),
    F_ENUM(cfg_training, "dtype", dtype, cfg_dtype_names),
    F_ENUM(cfg_training, "optimizer", optimizer, cfg_optimizer_names),
    F_ENUM(cfg_training, "recompute", recompute, cfg_recompute_names),
    F_BOOL(cfg_training, "flash_attention", flash_attention),
    F_ENUM(cfg_training, "grad_dtype", grad_dtype, cfg_dtype_names),
};
static const cfg_schema cfg_schema_training =
    SCHEMA("training", cfg_training, cfg_training_fields, cfg_training_init);

static void cfg_parallel_init(void *p)
{
  cfg_parallel *x = p;
  cfg_init_int(&x->tp, 6);
  x->schedule = (cfg_schedule)CFG_UNSET_INT;
  x->virtual_stages = x->zero = CFG_UNSET_INT;
  x->offload = (cfg_offload)CFG_UNSET_INT;
  x->offload_params = CFG_UNSET_INT;
  x->nplacement = 0;
  x->gradient_bucket = NAN;
  x->uneven_stages = x->moe_overlap = CFG_UNSET_INT;
}

static const cfg_field cfg_parallel_fields[] = {
    F_INT(cfg_parallel, "tp", tp, 1),
    F_INT(cfg_parallel, "pp", pp, 1),
    F_INT(cfg_parallel, "dp", dp, 1),
    F_INT(cfg_parallel, "cp", cp, 1),
    F_INT(cfg_parallel, "ep", ep, 1),
    F_BOOL(cfg_parallel, "sequence_parallel", sequence_parallel),
    F_ENUM(cfg_parallel, "schedule", schedule, cfg_schedule_names),
    F_INT(cfg_parallel, "virtual_stages", virtual_stages, 1),
    {.key = "zero", .type = CFG_T_INT, .offset = offsetof(cfg_parallel, zero), .min = 0, .max = 3},
    F_ENUM(cfg_parallel, "offload", offload, cfg_offload_names),
    F_BOOL(cfg_parallel, "offload_params", offload_params),
    {.key = "placement", .type = CFG_T_SEQ_ENUM, .offset = offsetof(cfg_parallel, placement),
     .count_offset = offsetof(cfg_parallel, nplacement), .names = cfg_dim_names, .max = CFG_NDIMS},
    F_QTY(cfg_parallel, "gradient_bucket", gradient_bucket, UNITS_BYTES),
    F_BOOL(cfg_parallel, "uneven_stages", uneven_stages),
    F_BOOL(cfg_parallel, "moe_overlap", moe_overlap),
};
static const cfg_schema cfg_schema_parallel =
    SCHEMA("parallel", cfg_parallel, cfg_parallel_fields, cfg_parallel_init);

static void cfg_requests_init(void *p)
{
  cfg_requests *r = p;
  r->rate = NAN;
  r->arrival = (cfg_arrival)CFG_UNSET_INT;
  cfg_init_int(&r->count, 4);
  r->burstiness = r->spread = NAN;
  r->distribution = (cfg_lengths)CFG_UNSET_INT;
  r->lengths_file = r->trace = NULL;
  r->concurrency = r->prefix_tokens = r->prefix_groups = CFG_UNSET_INT;
}

static const cfg_field cfg_requests_fields[] = {
    F_QTY(cfg_requests, "rate", rate, UNITS_PER_SECOND),
    F_ENUM(cfg_requests, "arrival", arrival, cfg_arrival_names),
    F_INT(cfg_requests, "count", count, 1),
    F_INT(cfg_requests, "prompt_tokens", prompt_tokens, 1),
    F_INT(cfg_requests, "output_tokens", output_tokens, 1),
    F_INT(cfg_requests, "seed", seed, 0),
    F_QTY(cfg_requests, "burstiness", burstiness, UNITS_NUMBER),
    F_ENUM(cfg_requests, "distribution", distribution, cfg_lengths_names),
    {.key = "spread", .type = CFG_T_QTY, .offset = offsetof(cfg_requests, spread),
     .unit = UNITS_FRACTION, .max = 1.0},
    F_PATH(cfg_requests, "lengths_file", lengths_file),
    F_PATH(cfg_requests, "trace", trace),
    F_INT(cfg_requests, "concurrency", concurrency, 0),
    F_INT(cfg_requests, "prefix_tokens", prefix_tokens, 0),
    F_INT(cfg_requests, "prefix_groups", prefix_groups, 1),
};
static const cfg_schema cfg_schema_requests =
    SCHEMA("serving.requests", cfg_requests, cfg_requests_fields, cfg_requests_init);

static void cfg_slo_init(void *p)
{
  cfg_slo *s = p;
  s->ttft = s->tbt = s->attainment = NAN;
}

static const cfg_field cfg_slo_fields[] = {
    F_QTY(cfg_slo, "ttft", ttft, UNITS_SECONDS),
    F_QTY(cfg_slo, "tbt", tbt, UNITS_SECONDS),
    {.key = "attainment", .type = CFG_T_QTY, .offset = offsetof(cfg_slo, attainment),
     .unit = UNITS_FRACTION, .max = 1.0},
};
static const cfg_schema cfg_schema_slo = SCHEMA("serving.slo", cfg_slo, cfg_slo_fields, cfg_slo_init);

static void cfg_serving_init(void *p)
{
  cfg_serving *s = p;
  s->dtype = s->kv_dtype = (cfg_dtype)CFG_UNSET_INT;
  cfg_init_int(&s->tp, 4);
  s->scheduler = (cfg_scheduler)CFG_UNSET_INT;
  cfg_requests_init(&s->requests);
  s->replicas = s->max_tokens = s->max_model_len = s->block_size = s->kv_blocks = CFG_UNSET_INT;
  s->router = (cfg_router)CFG_UNSET_INT;
  s->preemption = (cfg_preemption)CFG_UNSET_INT;
  s->prefix_caching = CFG_UNSET_INT;
  s->gpu_memory_utilization = s->iteration_overhead = s->request_overhead = NAN;
  s->kv_cache_free_fraction = NAN;
  cfg_slo_init(&s->slo);
}

static const cfg_field cfg_serving_fields[] = {
    F_ENUM(cfg_serving, "dtype", dtype, cfg_dtype_names),
    F_INT(cfg_serving, "tp", tp, 1),
    F_INT(cfg_serving, "pp", pp, 1),
    F_INT(cfg_serving, "ep", ep, 1),
    F_INT(cfg_serving, "max_batch", max_batch, 1),
    F_ENUM(cfg_serving, "scheduler", scheduler, cfg_scheduler_names),
    F_MAP(cfg_serving, "requests", requests, cfg_schema_requests),
    F_ENUM(cfg_serving, "kv_dtype", kv_dtype, cfg_dtype_names),
    F_INT(cfg_serving, "replicas", replicas, 1),
    F_ENUM(cfg_serving, "router", router, cfg_router_names),
    F_INT(cfg_serving, "max_tokens", max_tokens, 1),
    F_INT(cfg_serving, "max_model_len", max_model_len, 1),
    F_INT(cfg_serving, "block_size", block_size, 1),
    F_INT(cfg_serving, "kv_blocks", kv_blocks, 1),
    {.key = "gpu_memory_utilization", .type = CFG_T_QTY,
     .offset = offsetof(cfg_serving, gpu_memory_utilization), .unit = UNITS_FRACTION, .max = 1.0},
    {.key = "kv_cache_free_fraction", .type = CFG_T_QTY,
     .offset = offsetof(cfg_serving, kv_cache_free_fraction), .unit = UNITS_FRACTION, .max = 1.0},
    F_ENUM(cfg_serving, "preemption", preemption, cfg_preemption_names),
    F_BOOL(cfg_serving, "prefix_caching", prefix_caching),
    F_QTY(cfg_serving, "iteration_overhead", iteration_overhead, UNITS_SECONDS),
    F_QTY(cfg_serving, "request_overhead", request_overhead, UNITS_SECONDS),
    F_MAP(cfg_serving, "slo", slo, cfg_schema_slo),
};
static const cfg_schema cfg_schema_serving =
    SCHEMA("serving", cfg_serving, cfg_serving_fields, cfg_serving_init);

static void cfg_collectives_init(void *p)
{
  cfg_collectives *c = p;
  c->algorithm = c->protocol = NULL;
  c->a2a = (cfg_a2a)CFG_UNSET_INT;
  c->sm_reserved = NAN;
}

static const cfg_field cfg_collectives_fields[] = {
    F_STR(cfg_collectives, "algorithm", algorithm),
    F_STR(cfg_collectives, "protocol", protocol),
    F_ENUM(cfg_collectives, "a2a", a2a, cfg_a2a_names),
    F_QTY(cfg_collectives, "sm_reserved", sm_reserved, UNITS_FRACTION),
};
static const cfg_schema cfg_schema_collectives =
    SCHEMA("collectives", cfg_collectives, cfg_collectives_fields, cfg_collectives_init);

static void cfg_memory_init(void *p)
{
  cfg_memory *m = p;
  m->cuda_context = m->nccl_buffers = m->fragmentation = m->zero3_prefetch = m->comm_bucket = NAN;
}

static const cfg_field cfg_memory_fields[] = {
    F_QTY(cfg_memory, "cuda_context", cuda_context, UNITS_BYTES),
    F_QTY(cfg_memory, "nccl_buffers", nccl_buffers, UNITS_BYTES),
    {.key = "fragmentation", .type = CFG_T_QTY, .offset = offsetof(cfg_memory, fragmentation),
     .unit = UNITS_FRACTION, .max = 1.0},
    F_QTY(cfg_memory, "zero3_prefetch", zero3_prefetch, UNITS_BYTES),
    F_QTY(cfg_memory, "comm_bucket", comm_bucket, UNITS_BYTES),
};
static const cfg_schema cfg_schema_memory =
    SCHEMA("memory", cfg_memory, cfg_memory_fields, cfg_memory_init);

static void cfg_workload_init(void *p)
{
  cfg_workload *w = p;
  cfg_model_init(&w->model);
  cfg_training_init(&w->training);
  cfg_parallel_init(&w->parallel);
  cfg_serving_init(&w->serving);
  cfg_collectives_init(&w->collectives);
  cfg_memory_init(&w->memory);
  w->has_training = w->has_serving = 0;
  w->doc = NULL;
}

static const cfg_field cfg_workload_fields[] = {
    F_MAP(cfg_workload, "model", model, cfg_schema_model),
    F_MAP(cfg_workload, "training", training, cfg_schema_training),
    F_MAP(cfg_workload, "parallel", parallel, cfg_schema_parallel),
    F_MAP(cfg_workload, "serving", serving, cfg_schema_serving),
    F_MAP(cfg_workload, "collectives", collectives, cfg_schema_collectives),
    F_MAP(cfg_workload, "memory", memory, cfg_schema_memory),
};
const cfg_schema cfg_schema_workload =
    SCHEMA("workload", cfg_workload, cfg_workload_fields, cfg_workload_init);

/* ---- validation cases --------------------------------------------------------------------- */

static const char *const cfg_role_names[] = {"fit", "check", "reference", NULL};
static const char *const cfg_engine_names[] = {"analytic", "des", NULL};

static void cfg_case_init(void *p)
{
  cfg_case *c = p;
  memset(c, 0, sizeof *c);
  c->role = (cfg_case_role)CFG_UNSET_INT;
  c->engine = CFG_UNSET_INT;
  c->measured = c->tolerance = c->tolerance_small = NAN;
  c->gpus = c->group_size = CFG_UNSET_INT;
  c->dtype = CFG_UNSET_INT;
}

static const cfg_field cfg_case_fields[] = {
    F_STR(cfg_case, "name", name),
    F_ENUM(cfg_case, "role", role, cfg_role_names),
    F_STR(cfg_case, "source", source),
    F_STR(cfg_case, "command", command),
    F_STR(cfg_case, "unit", unit),
    F_STR(cfg_case, "notes", notes),
    F_PATH(cfg_case, "cluster", cluster),
    F_PATH(cfg_case, "workload", workload),
    {.key = "set", .type = CFG_T_SEQ_STRING, .offset = offsetof(cfg_case, set)},
    {.key = "ratio_to", .type = CFG_T_SEQ_STRING, .offset = offsetof(cfg_case, ratio_to)},
    F_ENUM(cfg_case, "engine", engine, cfg_engine_names),
    F_STR(cfg_case, "metric", metric),
    {.key = "measured", .type = CFG_T_NUMBER, .offset = offsetof(cfg_case, measured)},
    F_QTY(cfg_case, "tolerance", tolerance, UNITS_FRACTION),
    F_PATH(cfg_case, "table", table),
    F_STR(cfg_case, "op", op),
    F_INT(cfg_case, "gpus", gpus, 1),
    F_INT(cfg_case, "group_size", group_size, 1),
    F_STR(cfg_case, "size_column", size_column),
    F_STR(cfg_case, "time_column", time_column),
    F_STR(cfg_case, "time_unit", time_unit),
    {.key = "filter", .type = CFG_T_SEQ_STRING, .offset = offsetof(cfg_case, filter)},
    F_QTY(cfg_case, "tolerance_small", tolerance_small, UNITS_FRACTION),
    F_ENUM(cfg_case, "dtype", dtype, cfg_dtype_names),
    F_PATH(cfg_case, "trace", trace),
    F_STR(cfg_case, "steps", steps),
};
const cfg_schema cfg_schema_case = SCHEMA("case", cfg_case, cfg_case_fields, cfg_case_init);

/* ---- decoder ------------------------------------------------------------------------------ */

static const cfg_field *cfg_schema_field(const cfg_schema *s, const char *key)
{
  for (size_t i = 0; i < s->nfields; i++)
    if (strcmp(s->fields[i].key, key) == 0)
      return &s->fields[i];
  return NULL;
}

bool cfg_schema_has_key(const cfg_schema *schema, const char *key)
{
  return cfg_schema_field(schema, key) != NULL;
}

static size_t cfg_names_count(const char *const *names)
{
  size_t n = 0;
  while (names[n])
    n++;
  return n;
}

static int cfg_names_index(const char *const *names, const char *word)
{
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], word) == 0)
      return i;
  return -1;
}

static char *cfg_names_join(const char *const *names)
{
  return g_strjoinv(" | ", (char **)names);
}

static char *cfg_schema_keys(const cfg_schema *s)
{
  GString *out = g_string_new(NULL);
  for (size_t i = 0; i < s->nfields; i++)
    g_string_append_printf(out, "%s%s", i ? ", " : "", s->fields[i].key);
  return g_string_free(out, FALSE);
}

static void cfg_unknown_key(GError **err, const char *file, int line, int col, const char *key,
                            const char *where, const cfg_schema *s)
{
  g_autofree const char **keys = g_new(const char *, s->nfields);
  for (size_t i = 0; i < s->nfields; i++)
    keys[i] = s->fields[i].key;
  const char *near = cfg_closest(key, keys, s->nfields);
  g_autofree char *all = cfg_schema_keys(s);
  if (near)
    cfg_set_error_at(err, file, line, col, "unknown key '%s' in %s (did you mean '%s'?)", key,
                     where, near);
  else
    cfg_set_error_at(err, file, line, col, "unknown key '%s' in %s (known keys: %s)", key, where,
                     all);
}

static const char *cfg_kind_name(const cfg_node *n)
{
  return n->kind == CFG_NODE_MAP ? "a mapping" : n->kind == CFG_NODE_SEQ ? "a list" : "a value";
}

static bool cfg_want_scalar(const cfg_node *n, const char *path, const char *what, GError **err)
{
  if (n->kind == CFG_NODE_SCALAR)
    return true;
  cfg_set_error_node(err, n, "%s: expected %s, found %s", path, what, cfg_kind_name(n));
  return false;
}

static bool cfg_decode_int(const cfg_node *n, const cfg_field *f, const char *path, int *out,
                           GError **err)
{
  if (!cfg_want_scalar(n, path, "an integer", err))
    return false;
  char *end = NULL;
  gint64 v = g_ascii_strtoll(n->scalar, &end, 10);
  if (end == n->scalar || *end != '\0' || v > G_MAXINT || v < G_MININT + 1) {
    /* accept 1e3-style integers that are exact */
    double d = g_ascii_strtod(n->scalar, &end);
    if (end == n->scalar || *end != '\0' || d != floor(d) || fabs(d) > G_MAXINT) {
      cfg_set_error_node(err, n, "%s: expected an integer, got '%s'", path, n->scalar);
      return false;
    }
    v = (gint64)d;
  }
  if (v < (gint64)f->min || (f->max > 0 && v > (gint64)f->max)) {
    if (f->max > 0)
      cfg_set_error_node(err, n, "%s: expected an integer from %g to %g, got %" G_GINT64_FORMAT,
                         path, f->min, f->max, v);
    else
      cfg_set_error_node(err, n, "%s: expected an integer >= %g, got %" G_GINT64_FORMAT, path,
                         f->min, v);
    return false;
  }
  *out = (int)v;
  return true;
}

static bool cfg_decode_qty(const cfg_node *n, units_kind unit, double max, const char *path,
                           double *out, GError **err)
{
  if (!cfg_want_scalar(n, path, units_describe(unit), err))
    return false;
  g_autofree char *why = NULL;
  double v = 0;
  if (!units_parse(n->scalar, unit, &v, &why)) {
    cfg_set_error_node(err, n, "%s: expected %s, got '%s' (%s)", path, units_describe(unit),
                       n->scalar, why);
    return false;
  }
  if (v < 0 || (max > 0 && v > max)) {
    if (max > 0)
      cfg_set_error_node(err, n, "%s: expected a value from 0 to %g, got '%s'", path, max,
                         n->scalar);
    else
      cfg_set_error_node(err, n, "%s: expected a value >= 0, got '%s'", path, n->scalar);
    return false;
  }
  *out = v;
  return true;
}

static bool cfg_decode_enum(const cfg_node *n, const char *const *names, const char *path,
                            int *out, GError **err)
{
  g_autofree char *all = cfg_names_join(names);
  if (!cfg_want_scalar(n, path, all, err))
    return false;
  int idx = cfg_names_index(names, n->scalar);
  if (idx >= 0) {
    *out = idx;
    return true;
  }
  const char *near = cfg_closest(n->scalar, names, cfg_names_count(names));
  if (near)
    cfg_set_error_node(err, n, "%s: expected one of %s, got '%s' (did you mean '%s'?)", path, all,
                       n->scalar, near);
  else
    cfg_set_error_node(err, n, "%s: expected one of %s, got '%s'", path, all, n->scalar);
  return false;
}

static bool cfg_decode_bool(const cfg_node *n, const char *path, int *out, GError **err)
{
  static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On", NULL};
  static const char *const no[] = {"false", "False", "FALSE", "no", "No", "off", "Off", NULL};
  if (!cfg_want_scalar(n, path, "true or false", err))
    return false;
  if (cfg_names_index(yes, n->scalar) >= 0 || cfg_names_index(no, n->scalar) >= 0) {
    *out = cfg_names_index(yes, n->scalar) >= 0;
    return true;
  }
  cfg_set_error_node(err, n, "%s: expected true or false, got '%s'", path, n->scalar);
  return false;
}

static bool cfg_decode_path(const cfg_node *n, const char *path, char **out, GError **err)
{
  if (!cfg_want_scalar(n, path, "a file path", err))
    return false;
  g_free(*out);
  if (g_path_is_absolute(n->scalar)) {
    *out = g_strdup(n->scalar);
  } else if (n->line == 0) { /* --set: relative to here, or to the data directory */
    *out = g_file_test(n->scalar, G_FILE_TEST_EXISTS)
               ? g_strdup(n->scalar)
               : g_build_filename(cfg_data_dir(), n->scalar, NULL);
  } else {
    g_autofree char *dir = g_path_get_dirname(n->file);
    *out = g_build_filename(dir, n->scalar, NULL);
  }
  return true;
}

static bool cfg_decode_qty_by_enum(const cfg_node *n, const cfg_field *f, const char *path,
                                   double *out, GError **err)
{
  if (n->kind != CFG_NODE_MAP) {
    cfg_set_error_node(err, n, "%s: expected a mapping such as {%s: ...}, found %s", path,
                       f->names[0], cfg_kind_name(n));
    return false;
  }
  for (guint i = 0; i < n->items->len; i++) {
    cfg_pair *p = g_ptr_array_index(n->items, i);
    g_autofree char *sub = g_strdup_printf("%s.%s", path, p->key);
    int idx = cfg_names_index(f->names, p->key);
    if (idx < 0) {
      const char *near = cfg_closest(p->key, f->names, cfg_names_count(f->names));
      g_autofree char *all = cfg_names_join(f->names);
      if (near)
        cfg_set_error_at(err, p->value->file, p->line, p->col,
                         "unknown key '%s' in %s (did you mean '%s'?)", p->key, path, near);
      else
        cfg_set_error_at(err, p->value->file, p->line, p->col,
                         "unknown key '%s' in %s (expected one of %s)", p->key, path, all);
      return false;
    }
    if (cfg_node_is_null(p->value))
      continue;
    if (!cfg_decode_qty(p->value, f->unit, f->max, sub, &out[idx], err))
      return false;
  }
  return true;
}

static bool cfg_decode_seq_map(const cfg_node *n, const cfg_field *f, const char *path, void *base,
                               GError **err)
{
  if (n->kind != CFG_NODE_SEQ) {
    cfg_set_error_node(err, n, "%s: expected a list, found %s", path, cfg_kind_name(n));
    return false;
  }
  void **slot = (void **)((char *)base + f->offset);
  int *count = (int *)((char *)base + f->count_offset);
  const cfg_schema *s = f->sub;
  char *items = g_malloc0(s->size * MAX(n->items->len, 1u));
  *slot = items;
  *count = 0;
  for (guint i = 0; i < n->items->len; i++) {
    void *elem = items + i * s->size;
    s->init(elem);
    *count = (int)i + 1;
    g_autofree char *sub = g_strdup_printf("%s[%u]", path, i);
    if (!cfg_decode(g_ptr_array_index(n->items, i), s, elem, sub, err))
      return false;
  }
  return true;
}

static bool cfg_decode_seq_enum(const cfg_node *n, const cfg_field *f, const char *path,
                                void *base, GError **err)
{
  if (n->kind != CFG_NODE_SEQ) {
    cfg_set_error_node(err, n, "%s: expected a list such as [%s, ...], found %s", path,
                       f->names[0], cfg_kind_name(n));
    return false;
  }
  int *vals = (int *)((char *)base + f->offset);
  int *count = (int *)((char *)base + f->count_offset);
  if (n->items->len > (guint)f->max) {
    cfg_set_error_node(err, n, "%s: at most %g entries", path, f->max);
    return false;
  }
  for (guint i = 0; i < n->items->len; i++) {
    g_autofree char *sub = g_strdup_printf("%s[%u]", path, i);
    if (!cfg_decode_enum(g_ptr_array_index(n->items, i), f->names, sub, &vals[i], err))
      return false;
  }
  *count = (int)n->items->len;
  return true;
}

static bool cfg_decode_seq_string(const cfg_node *n, const char *path, char ***out, GError **err)
{
  if (n->kind != CFG_NODE_SEQ) {
    cfg_set_error_node(err, n, "%s: expected a list of strings, found %s", path, cfg_kind_name(n));
    return false;
  }
  g_strfreev(*out);
  *out = g_new0(char *, n->items->len + 1);
  for (guint i = 0; i < n->items->len; i++) {
    const cfg_node *item = g_ptr_array_index(n->items, i);
    g_autofree char *sub = g_strdup_printf("%s[%u]", path, i);
    if (!cfg_want_scalar(item, sub, "a string", err))
      return false;
    (*out)[i] = g_strdup(item->scalar);
  }
  return true;
}

static bool cfg_decode_number(const cfg_node *n, const char *path, double *out, GError **err)
{
  if (!cfg_want_scalar(n, path, "a number", err))
    return false;
  char *end = NULL;
  double v = g_ascii_strtod(n->scalar, &end);
  if (end == n->scalar || *end != '\0' || !isfinite(v)) {
    cfg_set_error_node(err, n, "%s: expected a number, got '%s'", path, n->scalar);
    return false;
  }
  *out = v;
  return true;
}

static bool cfg_decode_field(const cfg_node *v, const cfg_field *f, const char *path, void *base,
                             GError **err)
{
  void *slot = (char *)base + f->offset;
  switch (f->type) {
  case CFG_T_INT:
    return cfg_decode_int(v, f, path, slot, err);
  case CFG_T_QTY:
    return cfg_decode_qty(v, f->unit, f->max, path, slot, err);
  case CFG_T_BOOL:
    return cfg_decode_bool(v, path, slot, err);
  case CFG_T_STRING:
    if (!cfg_want_scalar(v, path, "a string", err))
      return false;
    g_free(*(char **)slot);
    *(char **)slot = g_strdup(v->scalar);
    return true;
  case CFG_T_PATH:
    return cfg_decode_path(v, path, slot, err);
  case CFG_T_ENUM:
    return cfg_decode_enum(v, f->names, path, slot, err);
  case CFG_T_MAP:
    return cfg_decode(v, f->sub, slot, path, err);
  case CFG_T_SEQ_MAP:
    return cfg_decode_seq_map(v, f, path, base, err);
  case CFG_T_SEQ_ENUM:
    return cfg_decode_seq_enum(v, f, path, base, err);
  case CFG_T_QTY_BY_ENUM:
    return cfg_decode_qty_by_enum(v, f, path, slot, err);
  case CFG_T_SEQ_STRING:
    return cfg_decode_seq_string(v, path, slot, err);
  case CFG_T_NUMBER:
    return cfg_decode_number(v, path, slot, err);
  }
  return false;
}

bool cfg_decode(const cfg_node *node, const cfg_schema *schema, void *out, const char *path,
                GError **err)
{
  const char *where = path && *path ? path : schema->what;
  if (node->kind != CFG_NODE_MAP) {
    cfg_set_error_node(err, node, "%s: expected a mapping, found %s", where, cfg_kind_name(node));
    return false;
  }
  for (guint i = 0; i < node->items->len; i++) {
    cfg_pair *p = g_ptr_array_index(node->items, i);
    const cfg_field *f = cfg_schema_field(schema, p->key);
    if (!f) {
      cfg_unknown_key(err, p->value->file, p->line, p->col, p->key, where, schema);
      return false;
    }
    if (cfg_node_is_null(p->value))
      continue;
    g_autofree char *sub = path && *path ? g_strdup_printf("%s.%s", path, p->key) : g_strdup(p->key);
    if (!cfg_decode_field(p->value, f, sub, out, err))
      return false;
  }
  return true;
}

bool cfg_schema_check_path(const cfg_schema *schema, const char *path, GError **err)
{
  g_autofree char *norm = g_strdup(path);
  for (char *c = norm; *c; c++)
    if (*c == '[' || *c == ']')
      *c = '.';
  g_auto(GStrv) parts = g_strsplit(norm, ".", -1);
  const cfg_schema *s = schema;
  GString *sofar = g_string_new(NULL);
  bool ok = false;
  for (char **p = parts; *p; p++) {
    if (**p == '\0')
      continue;
    if (!s) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: '%s' has no sub-keys", path,
                  sofar->str);
      goto done;
    }
    const cfg_field *f = cfg_schema_field(s, *p);
    if (!f) {
      g_autofree const char **keys = g_new(const char *, s->nfields);
      for (size_t i = 0; i < s->nfields; i++)
        keys[i] = s->fields[i].key;
      const char *near = cfg_closest(*p, keys, s->nfields);
      g_autofree char *all = cfg_schema_keys(s);
      if (near)
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                    "--set %s: unknown key '%s' in %s (did you mean '%s'?)", path, *p,
                    sofar->len ? sofar->str : s->what, near);
      else
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: unknown key '%s' in %s (known keys: %s)",
                    path, *p, sofar->len ? sofar->str : s->what, all);
      goto done;
    }
    g_string_append_printf(sofar, "%s%s", sofar->len ? "." : "", *p);
    if (f->type == CFG_T_MAP) {
      s = f->sub;
    } else if (f->type == CFG_T_SEQ_MAP) {
      if (!p[1]) { /* the whole list, as a flow sequence */
        ok = true;
        goto done;
      }
      if (!g_ascii_isdigit(p[1][0])) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                    "--set %s: '%s' is a list; give an index, as in %s.0.KEY", path, sofar->str,
                    sofar->str);
        goto done;
      }
      p++;
      s = f->sub;
    } else if (f->type == CFG_T_QTY_BY_ENUM) {
      if (!p[1] || cfg_names_index(f->names, p[1]) < 0 || p[2]) {
        g_autofree char *all = cfg_names_join(f->names);
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: expected %s.(%s)", path,
                    sofar->str, all);
        goto done;
      }
      ok = true;
      goto done;
    } else {
      s = NULL;
    }
  }
  if (s) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--set %s: '%s' is a mapping; set one of its keys instead", path, sofar->str);
    goto done;
  }
  ok = true;
done:
  g_string_free(sofar, TRUE);
  return ok;
}
