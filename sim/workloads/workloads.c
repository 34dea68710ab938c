/* Entry point: checks what can run, builds the model for one GPU's shard, lays it out. */
#include "workloads/workloads_internal.h"

#include <string.h>

#include <stdarg.h>

bool wl_fail(GError **err, const cfg_workload *w, const char *path, cfg_error_code code,
             const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_autofree char *where = cfg_doc_where(w->doc, path);
  g_set_error(err, CFG_ERROR, code, "%s: %s", where, msg);
  return false;
}

static bool wl_check_supported(const cfg_workload *w, GError **err)
{
  if (!w->has_training)
    return wl_fail(err, w, "serving", CFG_ERROR_UNSUPPORTED,
                   "serving workloads run with `dlsim serve`, not `dlsim run`");
  if (w->model.kind == CFG_MODEL_GENERIC)
    return wl_fail(err, w, "model.kind", CFG_ERROR_UNSUPPORTED,
                   "model.kind = generic: a parameter count alone gives memory estimates (dlsim "
                   "memory), not step times");
  return true;
}

/* Expert parallelism: experts split over ep ranks of the data-parallel dimension. */
static bool wl_check_experts(const cfg_workload *w, GError **err)
{
  const cfg_parallel *p = &w->parallel;
  const cfg_model *m = &w->model;
  if (m->kind != CFG_MODEL_MOE_TRANSFORMER)
    return p->ep == 1 || wl_fail(err, w, "parallel.ep", CFG_ERROR_INPUT,
                                 "parallel.ep = %d needs a mixture-of-experts model "
                                 "(model.kind: moe-transformer)", p->ep);
  if (p->dp % p->ep != 0)
    return wl_fail(err, w, "parallel.ep", CFG_ERROR_INPUT,
                   "parallel.ep = %d does not divide parallel.dp = %d (expert-parallel groups are "
                   "carved out of the data-parallel ranks)", p->ep, p->dp);
  if (m->moe.experts % p->ep != 0)
    return wl_fail(err, w, "parallel.ep", CFG_ERROR_INPUT,
                   "parallel.ep = %d does not divide model.moe.experts = %d", p->ep, m->moe.experts);
  double load, dropped;
  GError *inner = NULL;
  if (!wl_moe_load(&m->moe, p->ep, 1, &load, &dropped, &inner)) {
    wl_fail(err, w, "model.moe.histogram", CFG_ERROR_INPUT, "%s", inner->message);
    g_error_free(inner);
    return false;
  }
  return true;
}

/* DualPipe sends half the micro-batches each way through pp stages paired from both ends
 * (deepseek-ai/DualPipe asserts an even rank count and at least 2 pp micro-batches). */
static bool wl_check_dualpipe(const cfg_workload *w, int micro, GError **err)
{
  const cfg_parallel *p = &w->parallel;
  if (p->schedule != CFG_SCHED_DUALPIPE || p->pp == 1)
    return true;
  if (p->pp % 2 != 0)
    return wl_fail(err, w, "parallel.schedule", CFG_ERROR_INPUT,
                   "dualpipe pairs stage s with stage pp - 1 - s: it needs an even parallel.pp "
                   "(got %d)", p->pp);
  if (micro < 2 * p->pp || micro % 2 != 0)
    return wl_fail(err, w, "training.global_batch", CFG_ERROR_INPUT,
                   "dualpipe sends half the micro-batches each way: it needs an even number of "
                   "at least 2 pp = %d per replica (got %d)", 2 * p->pp, micro);
  return true;
}

bool wl_check_layout(const cfg_workload *w, GError **err)
{
  const cfg_parallel *p = &w->parallel;
  const cfg_model *m = &w->model;
  bool chunked = p->schedule == CFG_SCHED_INTERLEAVED || p->schedule == CFG_SCHED_ZB_V;
  int v = chunked ? p->virtual_stages : 1;
  if (m->kind == CFG_MODEL_CNN && (p->tp > 1 || p->pp > 1 || p->cp > 1))
    return wl_fail(err, w, "parallel", CFG_ERROR_UNSUPPORTED,
                   "a cnn runs data parallel only (parallel.tp, pp and cp must be 1)");
  if (m->kind == CFG_MODEL_CNN || m->kind == CFG_MODEL_GENERIC)
    return p->ep == 1 || wl_fail(err, w, "parallel.ep", CFG_ERROR_INPUT,
                                 "parallel.ep = %d needs a mixture-of-experts model", p->ep);
  if (!wl_check_experts(w, err))
    return false;
  if (m->heads % p->tp != 0)
    return wl_fail(err, w, "parallel.tp", CFG_ERROR_INPUT,
                   "parallel.tp = %d does not divide model.heads = %d", p->tp, m->heads);
  if (m->kv_heads % p->tp != 0 && p->tp % m->kv_heads != 0)
    return wl_fail(err, w, "parallel.tp", CFG_ERROR_INPUT,
                   "parallel.tp = %d and model.kv_heads = %d: one must divide the other", p->tp,
                   m->kv_heads);
  if (m->ffn_hidden % p->tp != 0)
    return wl_fail(err, w, "parallel.tp", CFG_ERROR_INPUT,
                   "parallel.tp = %d does not divide model.ffn_hidden = %d", p->tp, m->ffn_hidden);
  if (p->virtual_stages > 1 && !chunked)
    return wl_fail(err, w, "parallel.virtual_stages", CFG_ERROR_INPUT,
                   "parallel.virtual_stages = %d needs parallel.schedule: interleaved (or zb-v)",
                   p->virtual_stages);
  if (p->pipeline_engine == CFG_PIPE_DEEPSPEED && p->pp > 1 && p->schedule != CFG_SCHED_1F1B)
    return wl_fail(err, w, "parallel.schedule", CFG_ERROR_INPUT,
                   "parallel.pipeline_engine: deepspeed runs DeepSpeed's TrainSchedule, 1F1B: it "
                   "needs parallel.schedule: 1f1b (parallel.pipeline_engine: megatron runs the "
                   "other schedules)");
  if (p->schedule == CFG_SCHED_ZB_V && p->pp > 1 && p->virtual_stages != 2)
    return wl_fail(err, w, "parallel.schedule", CFG_ERROR_INPUT,
                   "zb-v runs two chunks per pipeline rank in a V: it needs "
                   "parallel.virtual_stages: 2 (got %d)", p->virtual_stages);
  if (v > 64)
    return wl_fail(err, w, "parallel.virtual_stages", CFG_ERROR_INPUT,
                   "parallel.virtual_stages = %d: at most 64", v);
  if (!p->uneven_stages && m->layers % (p->pp * v) != 0)
    return wl_fail(err, w, "parallel.pp", CFG_ERROR_INPUT,
                   "model.layers = %d is not divisible by pp x virtual_stages = %d x %d "
                   "(parallel.uneven_stages: true splits them as evenly as possible)",
                   m->layers, p->pp, v);
  if (m->layers < p->pp * v)
    return wl_fail(err, w, "parallel.pp", CFG_ERROR_INPUT,
                   "model.layers = %d: fewer than pp x virtual_stages = %d x %d chunks",
                   m->layers, p->pp, v);
  int micro = w->training.global_batch / (p->dp * w->training.micro_batch);
  if (!wl_check_dualpipe(w, micro, err))
    return false;
  if (v > 1 && p->schedule == CFG_SCHED_INTERLEAVED && micro % p->pp != 0)
    return wl_fail(err, w, "training.global_batch", CFG_ERROR_INPUT,
                   "interleaved 1F1B needs the micro-batches per replica (%d) to be a multiple of "
                   "pp = %d (Megatron's rule)",
                   micro, p->pp);
  if (m->seq_len % p->cp != 0)
    return wl_fail(err, w, "parallel.cp", CFG_ERROR_INPUT,
                   "parallel.cp = %d does not divide model.seq_len = %d", p->cp, m->seq_len);
  if (p->cp > 1 && !w->training.flash_attention)
    return wl_fail(err, w, "parallel.cp", CFG_ERROR_UNSUPPORTED,
                   "context parallelism runs ring attention on FlashAttention "
                   "(training.flash_attention: true)");
  return true;
}

void wl_step_flops(const cfg_workload *w, const wl_model *m, double *model_flops,
                   double *hardware_flops)
{
  double fwd = 0, again = 0;
  for (guint i = 0; i < m->layers->len; i++) {
    const wl_layer *l = g_ptr_array_index(m->layers, i);
    fwd += l->model_flops;
    again += l->recompute_flops;
  }
  /* a model built for one GPU's shard: times tp x cp for the whole model, per micro-batch */
  double shard = (double)w->parallel.tp * w->parallel.cp;
  double micro_batches = (double)w->training.global_batch / w->training.micro_batch;
  *model_flops = 3 * fwd * shard * micro_batches;
  *hardware_flops = *model_flops + again * shard * micro_batches;
}

/* What a step achieves: samples, tokens, and FLOPs by Megatron's MFU / HFU conventions. */
static void wl_meta(const cfg_workload *w, const wl_model *m, prog_program *p)
{
  p->meta.samples = w->training.global_batch;
  p->meta.tokens = w->model.kind == CFG_MODEL_CNN ? 0 : (double)w->training.global_batch * w->model.seq_len;
  wl_step_flops(w, m, &p->meta.model_flops, &p->meta.hardware_flops);
  p->meta.dtype = w->training.dtype;
}

static char *wl_describe(const cfg_workload *w)
{
  const cfg_parallel *p = &w->parallel;
  GString *d = g_string_new(w->model.name);
  if (p->tp > 1 || p->pp > 1 || p->cp > 1) {
    g_string_append_printf(d, ", TP %d", p->tp);
    if (p->cp > 1)
      g_string_append_printf(d, " x CP %d", p->cp);
    g_string_append_printf(d, " x PP %d", p->pp);
    if (p->pp > 1 && p->schedule == CFG_SCHED_INTERLEAVED && p->virtual_stages > 1)
      g_string_append_printf(d, " (interleaved x%d)", p->virtual_stages);
    if (p->pp > 1 && p->schedule >= CFG_SCHED_ZB_H1)
      g_string_append_printf(d, " (%s)", p->schedule == CFG_SCHED_ZB_H1  ? "zb-h1"
                                         : p->schedule == CFG_SCHED_ZB_V ? "zb-v"
                                                                         : "dualpipe");
    g_string_append_printf(d, " x DP %d", p->dp);
    if (p->ep > 1)
      g_string_append_printf(d, " (EP %d)", p->ep);
  } else {
    g_string_append_printf(d, ", data parallel x%d", p->dp);
    if (p->ep > 1)
      g_string_append_printf(d, " (EP %d)", p->ep);
  }
  if (p->zero > 0)
    g_string_append_printf(d, ", ZeRO-%d", p->zero);
  g_string_append_printf(d, ", micro-batch %d, %s", w->training.micro_batch,
                         cfg_dtype_name(w->training.dtype));
  if (w->training.framework && strcmp(w->training.framework, "none") != 0)
    g_string_append_printf(d, ", %s", w->training.framework);
  return g_string_free(d, FALSE);
}

/* What the program achieves and says it is. */
static void wl_program_meta(const cfg_workload *w, const wl_model *m, prog_program *p)
{
  wl_meta(w, m, p);
  p->meta.description = wl_describe(w);
}

void wl_notes(const cfg_workload *w, GPtrArray *out)
{
  const cfg_parallel *p = &w->parallel;
  /* ZeRO partitions over the data- and context-parallel ranks (the expert-data-parallel ones
   * are a subset): with one of each, every GPU keeps whole states */
  if (p->zero > 0 && p->dp * p->cp == 1)
    g_ptr_array_add(out, g_strdup_printf(
        "ZeRO-%d with DP 1 and CP 1 shards nothing (one data-parallel rank): states and time "
        "as ZeRO 0, plus ZeRO's buffers", p->zero));
}

/* Builds the program of `w` with model `m`; `like` (or NULL) a program of the same layout
 * whose groups it shares; `record` (or NULL) as wl_build_parallel's. */
static prog_program *wl_build_program(const cfg_workload *w, const hw_cluster *hw,
                                      const wl_model *m, const prog_program *like, bool reference,
                                      wl_passes_at **record, GError **err)
{
  int gpus = w->parallel.tp * w->parallel.cp * w->parallel.pp * w->parallel.dp;
  prog_program *p = like ? prog_new_sharing_groups(like) : prog_new(gpus);
  bool ok = reference ? wl_build_data_parallel(w, hw, m, p, err)
                      : wl_build_parallel(w, hw, m, p, like != NULL, record, err);
  if (!ok) {
    prog_free(p);
    return NULL;
  }
  wl_program_meta(w, m, p);
  return p;
}

/* The program of `w` sharing the groups its layout has in `cache` (NULL: none), else building
 * them and leaving them there; `record` as wl_build_parallel's. */
static prog_program *wl_build_first(const cfg_workload *w, const hw_cluster *hw,
                                    const wl_model *m, wl_cache *cache, wl_passes_at **record,
                                    GError **err)
{
  wl_groups_key key;
  wl_groups_key_of(w, m, &key);
  const prog_program *like = wl_cache_groups(cache, &key);
  prog_program *p = wl_build_program(w, hw, m, like, false, record, err);
  if (p && !like)
    wl_cache_keep(cache, &key, p);
  return p;
}

static bool wl_build_with(const cfg_workload *w, const hw_cluster *hw, wl_cache *cache,
                          prog_program **out, bool reference, GError **err)
{
  *out = NULL;
  if (!wl_check_supported(w, err) || !wl_check_layout(w, err))
    return false;
  const wl_model *m = NULL;
  wl_model *own = NULL;
  wl_shard shard = wl_shard_of(w);
  if (!wl_cache_model(cache, w, &shard, &m, &own, err))
    return false;
  *out = reference ? wl_build_program(w, hw, m, NULL, true, NULL, err)
                   : wl_build_first(w, hw, m, cache, NULL, err);
  wl_model_free(own);
  return *out != NULL;
}

/* The second program: derived from the first's ops where the schedules allow, else built.
 * With `later`, where every pass it inserts is a copy of the first's, it is left to make in
 * place of the first (*later set, NULL returned). */
static prog_program *wl_second_program(const cfg_workload *w, const hw_cluster *hw,
                                       const wl_model *m, const prog_program *first,
                                       const wl_passes_at *at, bool *derived, wl_inserts **later,
                                       GError **err)
{
  if (later && (*later = wl_inserts_of(w, hw, m, first, at))) {
    if (derived)
      *derived = true;
    return NULL;
  }
  prog_program *p = wl_derive_parallel(w, hw, m, first, at);
  if (derived)
    *derived = p != NULL;
  if (!p)
    return wl_build_program(w, hw, m, first, false, NULL, err);
  wl_program_meta(w, m, p);
  return p;
}

struct wl_later {
  wl_inserts *inserts;
  const cfg_workload *w; /* the second's */
  const wl_model *m;
  wl_model *own;  /* the model, when no cache keeps it */
};

static bool wl_build_two_with(const cfg_workload *const w[2], const hw_cluster *hw,
                              wl_cache *cache, prog_program *out[2], bool *derived,
                              wl_later **later, GError **err)
{
  out[0] = out[1] = NULL;
  if (derived)
    *derived = false;
  if (later)
    *later = NULL;
  for (int i = 0; i < 2; i++)
    if (!wl_check_supported(w[i], err) || !wl_check_layout(w[i], err))
      return false;
  /* the model does not depend on the batch: built once */
  const wl_model *m = NULL;
  wl_model *own = NULL;
  wl_shard shard = wl_shard_of(w[0]);
  if (!wl_cache_model(cache, w[0], &shard, &m, &own, err))
    return false;
  wl_passes_at *at = NULL;
  wl_inserts *inserts = NULL;
  out[0] = wl_build_first(w[0], hw, m, cache, &at, err);
  if (out[0])
    out[1] = wl_second_program(w[1], hw, m, out[0], at, derived, later ? &inserts : NULL, err);
  wl_passes_at_free(at);
  if (inserts) {
    *later = g_new(wl_later, 1);
    **later = (wl_later){.inserts = inserts, .w = w[1], .m = m, .own = own};
    return true;
  }
  wl_model_free(own);
  if (out[1])
    return true;
  g_clear_pointer(&out[0], prog_free);
  return false;
}

bool wl_build_two_cached(const cfg_workload *const w[2], const hw_cluster *hw, wl_cache *cache,
                         prog_program *out[2], bool *derived, GError **err)
{
  return wl_build_two_with(w, hw, cache, out, derived, NULL, err);
}

bool wl_build_two_later(const cfg_workload *const w[2], const hw_cluster *hw, wl_cache *cache,
                        prog_program *out[2], wl_later **later, GError **err)
{
  return wl_build_two_with(w, hw, cache, out, NULL, later, err);
}

prog_program *wl_later_make(wl_later *later, prog_program *first)
{
  wl_inserts_apply(later->inserts, first);
  /* the description does not name the batch: the first's is the second's */
  wl_meta(later->w, later->m, first);
  wl_later_free(later);
  return first;
}

int wl_later_splice(const wl_later *later, const prog_program *first, guint **at, guint **n,
                    unsigned **streams)
{
  int pp = wl_inserts_stages(later->inserts);
  *at = g_new(guint, pp);
  *n = g_new(guint, pp);
  *streams = g_new(unsigned, pp);
  wl_inserts_splice(later->inserts, first, *at, *n, *streams);
  return pp;
}

void wl_later_free(wl_later *later)
{
  if (!later)
    return;
  wl_inserts_free(later->inserts);
  wl_model_free(later->own);
  g_free(later);
}

bool wl_build_two(const cfg_workload *const w[2], const hw_cluster *hw, prog_program *out[2],
                  bool *derived, GError **err)
{
  return wl_build_two_cached(w, hw, NULL, out, derived, err);
}

bool wl_build_cached(const cfg_workload *w, const hw_cluster *hw, wl_cache *cache,
                     prog_program **out, GError **err)
{
  return wl_build_with(w, hw, cache, out, false, err);
}

bool wl_build(const cfg_workload *w, const hw_cluster *hw, prog_program **out, GError **err)
{
  return wl_build_with(w, hw, NULL, out, false, err);
}

bool wl_build_reference_dp(const cfg_workload *w, const hw_cluster *hw, prog_program **out,
                           GError **err)
{
  if (w->parallel.tp * w->parallel.pp * w->parallel.cp > 1 || w->parallel.zero > 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "the reference builder is data parallel only");
    return false;
  }
  return wl_build_with(w, hw, NULL, out, true, err);
}
