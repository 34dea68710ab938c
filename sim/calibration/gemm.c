/* GEMM tables: predicting the time of each shape with the kernel cost model, and fitting the
 * model's GEMM parameters (peak fraction, K ramp, fixed cost per kernel) to a table. */
#include "calibration/calibration_internal.h"

#include <math.h>
#include <string.h>

void calib_gemm_predict(const cfg_cluster *c, cfg_dtype dtype, const calib_table *tab, double *out)
{
  /* a kernel benchmark runs at the clocks a short burst gets, not a training run's */
  cfg_cluster bench = *c;
  bench.gpu.efficiency.sustained = 1.0;
  hw_cluster *hw = hw_cluster_new(&bench);
  double dt = cfg_dtype_bytes(dtype);
  for (guint i = 0; i < tab->points->len; i++) {
    const double *g = g_array_index(tab->points, calib_point, i).gemm;
    double b = g[0], m = g[1], n = g[2], k = g[3];
    hw_kernel kern = {.kclass = CFG_KCLASS_GEMM, .dtype = dtype, .flops = 2 * b * m * n * k,
                      .bytes = dt * b * (m * k + k * n + m * n), .inner = k,
                      .rows = m, .cols = n};
    out[i] = hw_kernel_time(hw, &kern);
  }
  hw_cluster_free(hw);
}

void calib_time_errors(const calib_table *tab, const double *predicted, calib_time_errors_t *e)
{
  int n = (int)tab->points->len;
  g_autofree double *v = g_new(double, MAX(n, 1));
  for (int i = 0; i < n; i++)
    v[i] = predicted[i] / g_array_index(tab->points, calib_point, i).time - 1.0;
  e->signed_median = calib_median(v, n);
  for (int i = 0; i < n; i++)
    v[i] = fabs(v[i]);
  e->n = n;
  e->median = calib_median(v, n); /* sorts v */
  e->p90 = n ? v[(int)(0.9 * (n - 1))] : NAN;
  e->worst = n ? v[n - 1] : NAN;
}

typedef struct {
  cfg_cluster *c;
  cfg_dtype dtype;
  const calib_table *tab;
  double *pred;
} calib_gemm_fit_ctx;

static double calib_gemm_loss(void *ctx)
{
  calib_gemm_fit_ctx *f = ctx;
  calib_gemm_predict(f->c, f->dtype, f->tab, f->pred);
  double sum = 0;
  for (guint i = 0; i < f->tab->points->len; i++)
    sum += fabs(log(f->pred[i] / g_array_index(f->tab->points, calib_point, i).time));
  return sum / f->tab->points->len;
}

void calib_fit_gemm(cfg_cluster *c, cfg_dtype dtype, const calib_table *tab, calib_gemm_report *rep)
{
  cfg_efficiency *e = &c->gpu.efficiency;
  calib_gemm_fit_ctx f = {.c = c, .dtype = dtype, .tab = tab};
  f.pred = g_new(double, tab->points->len);
  calib_gemm_predict(c, dtype, tab, f.pred);
  calib_time_errors(tab, f.pred, &rep->before);
  /* a GEMM table has hundreds of rows for three parameters: a faint prior only breaks ties */
  calib_search s = {.prior_weight = 1e-4, .loss = calib_gemm_loss, .ctx = &f};
  calib_search_add(&s, &e->flops_efficiency[CFG_KCLASS_GEMM], true, 0.2, 0.99, "efficiency.flops.gemm");
  calib_search_add(&s, &e->gemm_k_half, false, 1, 1e5, "efficiency.gemm_k_half");
  calib_search_add(&s, &e->launch_overhead, false, 0.2e-6, 50e-6, "efficiency.launch_overhead");
  /* with the SMs known, which tile a shape runs in depends on what smaller tiles lose */
  if (e->gemm_waves && c->gpu.sms > 0) {
    e->gemm_tile_load = MAX(e->gemm_tile_load, 16); /* the search runs on its logarithm */
    calib_search_add(&s, &e->gemm_tile_load, false, 1, 1024, "efficiency.gemm_tile_load");
  }
  calib_search_run(&s, 4, 600, 1000);
  calib_gemm_loss(&f);
  calib_time_errors(tab, f.pred, &rep->after);
  rep->evaluations = s.evals;
  g_free(f.pred);
}
