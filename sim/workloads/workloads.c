/* Entry point: checks what this version can simulate and picks the strategy. */
#include "workloads/workloads_internal.h"

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
  const cfg_parallel *p = &w->parallel;
  const struct {
    const char *path;
    int value;
  } dims[] = {{"parallel.tp", p->tp}, {"parallel.pp", p->pp}, {"parallel.cp", p->cp},
              {"parallel.ep", p->ep}};
  if (!w->has_training)
    return wl_fail(err, w, "serving", CFG_ERROR_UNSUPPORTED,
                   "serving workloads run with `dlsim serve`, not `dlsim run`");
  for (size_t i = 0; i < G_N_ELEMENTS(dims); i++)
    if (dims[i].value > 1)
      return wl_fail(err, w, dims[i].path, CFG_ERROR_UNSUPPORTED,
                     "%s = %d: only data parallelism is simulated by this version", dims[i].path,
                     dims[i].value);
  if (p->zero > 0)
    return wl_fail(err, w, "parallel.zero", CFG_ERROR_UNSUPPORTED,
                   "parallel.zero = %d: ZeRO is not simulated by this version", p->zero);
  if (p->offload != CFG_OFFLOAD_NONE)
    return wl_fail(err, w, "parallel.offload", CFG_ERROR_UNSUPPORTED,
                   "parallel.offload: offload is not simulated by this version");
  if (w->model.kind == CFG_MODEL_GENERIC)
    return wl_fail(err, w, "model.kind", CFG_ERROR_UNSUPPORTED,
                   "model.kind = generic: a parameter count alone gives memory estimates (dlsim "
                   "memory), not step times");
  if (w->model.kind == CFG_MODEL_MOE_TRANSFORMER)
    return wl_fail(err, w, "model.kind", CFG_ERROR_UNSUPPORTED,
                   "model.kind = moe-transformer: mixture-of-experts is not simulated by this version");
  if (w->training.recompute != CFG_RECOMPUTE_NONE)
    return wl_fail(err, w, "training.recompute", CFG_ERROR_UNSUPPORTED,
                   "training.recompute: activation recomputation is not simulated by this version");
  return true;
}

bool wl_build(const cfg_workload *w, const hw_cluster *hw, prog_program **out, GError **err)
{
  *out = NULL;
  if (!wl_check_supported(w, err))
    return false;
  wl_model *m = NULL;
  wl_shard shard = wl_shard_of(w);
  if (!wl_model_build(&w->model, &w->training, &shard, &m, err))
    return false;
  prog_program *p = prog_new(w->parallel.dp);
  bool ok = wl_build_data_parallel(w, hw, m, p, err);
  if (ok)
    p->meta.description = g_strdup_printf("%s, data parallel x%d, micro-batch %d, %s",
                                          w->model.name, w->parallel.dp, w->training.micro_batch,
                                          cfg_dtype_name(w->training.dtype));
  wl_model_free(m);
  if (!ok) {
    prog_free(p);
    return false;
  }
  *out = p;
  return true;
}
