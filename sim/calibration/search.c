/* The parameter search of every fit: multi-start Nelder-Mead in a free space, with bounds and
 * priors (see calibration_internal.h). */
#include "calibration/calibration_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double calib_to_free(const calib_param *p, double v)
{
  return p->fraction ? log(v / (1 - v)) : log(v);
}

static double calib_from_free(const calib_param *p, double x)
{
  return p->fraction ? 1 / (1 + exp(-x)) : exp(x);
}

void calib_search_add(calib_search *s, double *slot, bool fraction, double lo, double hi,
                      const char *name)
{
  g_assert(s->nparams < CALIB_MAX_PARAMS);
  calib_param *p = &s->params[s->nparams++];
  p->slot = slot;
  p->fraction = fraction;
  p->lo = lo;
  p->hi = hi;
  p->prior = *slot;
  g_strlcpy(p->name, name, sizeof p->name);
}

double calib_search_eval(calib_search *s, const double *x)
{
  double penalty = 0;
  for (int i = 0; i < s->nparams; i++) {
    const calib_param *p = &s->params[i];
    double v = calib_from_free(p, x[i]);
    /* outside its physical range a parameter is clamped and the excursion penalised */
    if (v < p->lo || v > p->hi) {
      penalty += log(v < p->lo ? p->lo / v : v / p->hi);
      v = CLAMP(v, p->lo, p->hi);
    }
    double drift = log(v / p->prior);
    penalty += s->prior_weight * drift * drift;
    *p->slot = v;
  }
  s->evals++;
  return s->loss(s->ctx) + penalty;
}

static void calib_search_point(const calib_search *s, double *x)
{
  for (int i = 0; i < s->nparams; i++)
    x[i] = calib_to_free(&s->params[i], *s->params[i].slot);
}

void calib_search_keep_sensitive(calib_search *s)
{
  int kept = 0;
  double x0[CALIB_MAX_PARAMS];
  calib_search_point(s, x0);
  double f0 = calib_search_eval(s, x0);
  for (int i = 0; i < s->nparams; i++) {
    double x[CALIB_MAX_PARAMS];
    memcpy(x, x0, sizeof x);
    x[i] += 0.5;
    double up = calib_search_eval(s, x);
    x[i] -= 1.0;
    double down = calib_search_eval(s, x);
    if (fabs(up - f0) > 1e-9 * MAX(f0, 1e-12) || fabs(down - f0) > 1e-9 * MAX(f0, 1e-12))
      s->params[kept++] = s->params[i];
  }
  calib_search_eval(s, x0);
  s->nparams = kept;
}

/* Nelder-Mead from `best`; returns the best value found and leaves its point in `best`. */
static double calib_nelder_mead(calib_search *s, double *best, int max_evals)
{
  int n = s->nparams;
  double simplex[CALIB_MAX_PARAMS + 1][CALIB_MAX_PARAMS], f[CALIB_MAX_PARAMS + 1];
  size_t row = sizeof(double) * (size_t)n;
  for (int i = 0; i <= n; i++) {
    memcpy(simplex[i], best, row);
    if (i > 0)
      simplex[i][i - 1] += 0.7;
    f[i] = calib_search_eval(s, simplex[i]);
  }
  while (s->evals < max_evals) {
    int lo = 0, hi = 0, nh;
    for (int i = 1; i <= n; i++) {
      if (f[i] < f[lo])
        lo = i;
      if (f[i] > f[hi])
        hi = i;
    }
    nh = lo;
    for (int i = 0; i <= n; i++)
      if (i != hi && f[i] > f[nh])
        nh = i;
    if (f[hi] - f[lo] < 1e-10)
      break;
    double centre[CALIB_MAX_PARAMS] = {0}, xr[CALIB_MAX_PARAMS], xe[CALIB_MAX_PARAMS];
    for (int i = 0; i <= n; i++)
      for (int k = 0; k < n && i != hi; k++)
        centre[k] += simplex[i][k] / n;
    for (int k = 0; k < n; k++)
      xr[k] = centre[k] + (centre[k] - simplex[hi][k]);
    double fr = calib_search_eval(s, xr);
    if (fr < f[lo]) {
      for (int k = 0; k < n; k++)
        xe[k] = centre[k] + 2 * (centre[k] - simplex[hi][k]);
      double fe = calib_search_eval(s, xe);
      memcpy(simplex[hi], fe < fr ? xe : xr, row);
      f[hi] = MIN(fe, fr);
    } else if (fr < f[nh]) {
      memcpy(simplex[hi], xr, row);
      f[hi] = fr;
    } else {
      double xc[CALIB_MAX_PARAMS];
      for (int k = 0; k < n; k++)
        xc[k] = centre[k] + 0.5 * (simplex[hi][k] - centre[k]);
      double fc = calib_search_eval(s, xc);
      if (fc < f[hi]) {
        memcpy(simplex[hi], xc, row);
        f[hi] = fc;
      } else {
        for (int i = 0; i <= n; i++)
          if (i != lo) {
            for (int k = 0; k < n; k++)
              simplex[i][k] = simplex[lo][k] + 0.5 * (simplex[i][k] - simplex[lo][k]);
            f[i] = calib_search_eval(s, simplex[i]);
          }
      }
    }
  }
  int lo = 0;
  for (int i = 1; i <= n; i++)
    if (f[i] < f[lo])
      lo = i;
  memcpy(best, simplex[lo], row);
  return f[lo];
}

double calib_search_run(calib_search *s, int starts, int evals_per_start, int polish_evals)
{
  double start[CALIB_MAX_PARAMS], x[CALIB_MAX_PARAMS], best[CALIB_MAX_PARAMS];
  calib_search_point(s, start);
  memcpy(best, start, sizeof best);
  double fbest = calib_search_eval(s, start);
  /* rugged error surfaces (a tuner switching algorithms): start from the given values and from
   * deterministic perturbations of them, keep the best, polish it */
  GRand *rng = g_rand_new_with_seed(2024);
  for (int k = 0; k < starts && s->nparams > 0; k++) {
    for (int i = 0; i < s->nparams; i++)
      x[i] = start[i] + (k ? g_rand_double_range(rng, -1.5, 1.5) : 0);
    double f = calib_nelder_mead(s, x, s->evals + evals_per_start);
    if (f < fbest) {
      fbest = f;
      memcpy(best, x, sizeof best);
    }
  }
  g_rand_free(rng);
  for (int round = 0; round < 3 && s->nparams > 0; round++)
    fbest = MIN(fbest, calib_nelder_mead(s, best, s->evals + polish_evals));
  calib_search_eval(s, best);
  return fbest;
}

static int calib_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double calib_median(double *v, int n)
{
  if (n == 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, calib_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
