/* Predicting a table and fitting the NCCL parameters to it.
 *
 * The fit minimises the mean absolute log error of time over the rows (robust to the odd
 * warm-up row that nccl-tests tables carry) with Nelder-Mead, in a
 * space where every parameter is free (logit of efficiencies, log of latencies and chunks), and
 * only over the parameters the table constrains: a one-node table says nothing about the
 * network, a table without NVLS nothing about NVLS. One table cannot pin a dozen parameters
 * down, so each is held near its starting value (the documented prior) by a penalty on its log
 * ratio: the fit moves a parameter only as far as the data asks, which keeps the values
 * physical and lets them carry over to other tables. */
#include "calibration/calibration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool calib_predict(const cfg_cluster *c, const calib_target *t, const calib_table *tab,
                   double *out, GError **err)
{
  hw_cluster *hw = hw_cluster_new(c);
  eng_options opt = {.kind = t->engine, .algo = t->algo, .proto = t->proto};
  bool ok = true;
  coll_planner *pl = t->engine == ENG_ANALYTIC ? coll_planner_new(hw, t->algo, t->proto, true) : NULL;
  g_autofree int *ranks = g_new(int, MAX(t->group, 2));
  int n = t->op == PROG_COLL_SENDRECV ? 2 : t->group;
  for (int i = 0; i < n; i++)
    ranks[i] = i;
  for (guint i = 0; ok && i < tab->points->len; i++) {
    double size = g_array_index(tab->points, calib_point, i).size;
    if (pl) {
      const coll_schedule *s = coll_planner_get(pl, t->op, ranks, n, 0, size, NULL, err);
      ok = s != NULL;
      out[i] = s ? s->time : 0;
    } else {
      eng_coll_result r;
      ok = eng_collective_time(hw, &opt, t->op, t->gpus, t->group, size, &r, err);
      out[i] = r.time;
    }
  }
  coll_planner_free(pl);
  hw_cluster_free(hw);
  return ok;
}

static int calib_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double calib_median(double *v, int n)
{
  if (n == 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, calib_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void calib_errors_of(const calib_table *tab, const double *predicted, calib_errors *e)
{
  int n = (int)tab->points->len;
  g_autofree double *all = g_new(double, n), *large = g_new(double, n), *small = g_new(double, n);
  memset(e, 0, sizeof *e);
  for (int i = 0; i < n; i++) {
    const calib_point *p = &g_array_index(tab->points, calib_point, i);
    double err = fabs(p->time / predicted[i] - 1.0); /* busbw error */
    all[e->n++] = err;
    if (p->size >= 1048576) {
      large[e->n_large++] = err;
      e->worst_large = MAX(e->worst_large, err);
    } else if (p->size < 65536) {
      small[e->n_small++] = err;
      e->worst_small = MAX(e->worst_small, err);
    }
  }
  e->median_all = calib_median(all, e->n);
  e->median_large = calib_median(large, e->n_large);
  e->median_small = calib_median(small, e->n_small);
}

/* ---- the fit ------------------------------------------------------------------------------ */

typedef struct {
  double *slot;
  bool fraction; /* logit transform, else log */
  double lo, hi; /* physical bounds */
  double prior;  /* the starting value the fit is held near */
  char name[48];
} calib_param;

/* Weight of the prior: moving one parameter by a factor 2 costs as much as 5 % more error on
 * every row. */
#define CALIB_PRIOR_WEIGHT 0.02

typedef struct {
  cfg_cluster *c;
  const calib_target *t;
  const calib_table *tab;
  calib_param params[16];
  int nparams;
  double *pred;
  int evals;
} calib_problem;

static double calib_to_free(const calib_param *p, double v)
{
  return p->fraction ? log(v / (1 - v)) : log(v);
}

static double calib_from_free(const calib_param *p, double x)
{
  return p->fraction ? 1 / (1 + exp(-x)) : exp(x);
}

static double calib_objective(calib_problem *pb, const double *x)
{
  double penalty = 0;
  for (int i = 0; i < pb->nparams; i++) {
    const calib_param *p = &pb->params[i];
    double v = calib_from_free(p, x[i]);
    /* outside its physical range a parameter is clamped and the excursion penalised */
    if (v < p->lo || v > p->hi) {
      penalty += log(v < p->lo ? p->lo / v : v / p->hi);
      v = CLAMP(v, p->lo, p->hi);
    }
    double drift = log(v / p->prior);
    penalty += CALIB_PRIOR_WEIGHT * drift * drift;
    *p->slot = v;
  }
  pb->evals++;
  if (!calib_predict(pb->c, pb->t, pb->tab, pb->pred, NULL))
    return INFINITY;
  double sum = 0;
  for (guint i = 0; i < pb->tab->points->len; i++) {
    sum += fabs(log(pb->pred[i] / g_array_index(pb->tab->points, calib_point, i).time));
  }
  return sum / pb->tab->points->len + penalty;
}

static bool calib_wanted(char *const *fit, const char *name)
{
  static const char *const latencies[] = {"base_latency", "hop_latency", NULL};
  char *const *list = fit ? fit : (char *const *)latencies;
  for (int i = 0; list[i]; i++)
    if (g_str_has_prefix(name, list[i]))
      return true;
  return false;
}

static void calib_add(calib_problem *pb, char *const *fit, double *slot, bool fraction, double lo,
                      double hi, const char *name)
{
  if (!calib_wanted(fit, name))
    return;
  calib_param *p = &pb->params[pb->nparams++];
  p->slot = slot;
  p->fraction = fraction;
  p->lo = lo;
  p->hi = hi;
  p->prior = *slot;
  g_strlcpy(p->name, name, sizeof p->name);
}

static void calib_candidates(calib_problem *pb, char *const *fit)
{
  cfg_nccl *n = &pb->c->nccl;
  const char *proto[] = {"ll", "ll128", "simple"};
  char name[48];
  calib_add(pb, fit, &n->link_efficiency[CFG_LINK_INTRA], true, 0.3, 0.99, "link_efficiency.intra");
  calib_add(pb, fit, &n->link_efficiency[CFG_LINK_NETWORK], true, 0.3, 0.99, "link_efficiency.network");
  calib_add(pb, fit, &n->nvls_efficiency, true, 0.3, 0.99, "nvls_efficiency");
  calib_add(pb, fit, &n->p2p_efficiency, true, 0.3, 0.99, "p2p_efficiency");
  for (int p = 0; p < CFG_NPROTOS; p++) {
    g_snprintf(name, sizeof name, "base_latency.%s", proto[p]);
    calib_add(pb, fit, &n->base_latency[p], false, 1e-6, 100e-6, name);
  }
  for (int cl = 0; cl < CFG_NLINKCLASSES; cl++)
    for (int p = 0; p < CFG_NPROTOS; p++) {
      g_snprintf(name, sizeof name, "hop_latency.%s.%s", cl ? "network" : "intra", proto[p]);
      calib_add(pb, fit, &n->hop_latency[cl][p], false, 0.05e-6, 30e-6, name);
    }
  for (int p = 0; p < CFG_NPROTOS; p++) {
    g_snprintf(name, sizeof name, "chunk.%s", proto[p]);
    calib_add(pb, fit, &n->chunk[p], false, 4096, 8 << 20, name);
  }
}

/* Keeps the parameters that move the objective when nudged. */
static void calib_keep_sensitive(calib_problem *pb)
{
  int kept = 0;
  double x0[16];
  for (int i = 0; i < pb->nparams; i++)
    x0[i] = calib_to_free(&pb->params[i], *pb->params[i].slot);
  double f0 = calib_objective(pb, x0);
  for (int i = 0; i < pb->nparams; i++) {
    double x[16];
    memcpy(x, x0, sizeof x);
    x[i] += 0.5;
    double up = calib_objective(pb, x);
    x[i] -= 1.0;
    double down = calib_objective(pb, x);
    if (fabs(up - f0) > 1e-9 * MAX(f0, 1e-12) || fabs(down - f0) > 1e-9 * MAX(f0, 1e-12))
      pb->params[kept++] = pb->params[i];
  }
  calib_objective(pb, x0);
  pb->nparams = kept;
}

/* Nelder-Mead over the free parameters; returns the best value found. */
static double calib_nelder_mead(calib_problem *pb, double *best, int max_evals)
{
  int n = pb->nparams;
  double simplex[17][16], f[17];
  for (int i = 0; i <= n; i++) {
    memcpy(simplex[i], best, sizeof(double) * (size_t)n);
    if (i > 0)
      simplex[i][i - 1] += 0.7;
    f[i] = calib_objective(pb, simplex[i]);
  }
  while (pb->evals < max_evals) {
    int lo = 0, hi = 0, nh = 0;
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
    double centre[16] = {0}, xr[16], xe[16], xc[16];
    for (int i = 0; i <= n; i++)
      for (int k = 0; k < n && i != hi; k++)
        centre[k] += simplex[i][k] / n;
    for (int k = 0; k < n; k++)
      xr[k] = centre[k] + (centre[k] - simplex[hi][k]);
    double fr = calib_objective(pb, xr);
    if (fr < f[lo]) {
      for (int k = 0; k < n; k++)
        xe[k] = centre[k] + 2 * (centre[k] - simplex[hi][k]);
      double fe = calib_objective(pb, xe);
      memcpy(simplex[hi], fe < fr ? xe : xr, sizeof(double) * (size_t)n);
      f[hi] = MIN(fe, fr);
    } else if (fr < f[nh]) {
      memcpy(simplex[hi], xr, sizeof(double) * (size_t)n);
      f[hi] = fr;
    } else {
      for (int k = 0; k < n; k++)
        xc[k] = centre[k] + 0.5 * (simplex[hi][k] - centre[k]);
      double fc = calib_objective(pb, xc);
      if (fc < f[hi]) {
        memcpy(simplex[hi], xc, sizeof(double) * (size_t)n);
        f[hi] = fc;
      } else {
        for (int i = 0; i <= n; i++)
          if (i != lo) {
            for (int k = 0; k < n; k++)
              simplex[i][k] = simplex[lo][k] + 0.5 * (simplex[i][k] - simplex[lo][k]);
            f[i] = calib_objective(pb, simplex[i]);
          }
      }
    }
  }
  int lo = 0;
  for (int i = 1; i <= n; i++)
    if (f[i] < f[lo])
      lo = i;
  memcpy(best, simplex[lo], sizeof(double) * (size_t)n);
  return f[lo];
}

bool calib_fit_nccl(cfg_cluster *c, const calib_target *t, const calib_table *tab,
                    char *const *fit, calib_fit_report *rep, GError **err)
{
  calib_target analytic = *t;
  analytic.engine = ENG_ANALYTIC; /* the fit runs thousands of predictions */
  calib_problem pb = {.c = c, .t = &analytic, .tab = tab};
  pb.pred = g_new(double, tab->points->len);
  memset(rep, 0, sizeof *rep);
  bool ok = calib_predict(c, &analytic, tab, pb.pred, err);
  if (ok) {
    calib_errors_of(tab, pb.pred, &rep->before);
    calib_candidates(&pb, fit);
    calib_keep_sensitive(&pb);
    double start[16], x[16], best[16], fbest = INFINITY;
    for (int i = 0; i < pb.nparams; i++)
      start[i] = calib_to_free(&pb.params[i], *pb.params[i].slot);
    /* The tuner's choice among algorithms makes the error surface rugged: start from the given
     * values and from a dozen deterministic perturbations of them, keep the best. */
    GRand *rng = g_rand_new_with_seed(2024);
    for (int s = 0; s < 12 && pb.nparams > 0; s++) {
      for (int i = 0; i < pb.nparams; i++)
        x[i] = start[i] + (s ? g_rand_double_range(rng, -1.5, 1.5) : 0);
      double f = calib_nelder_mead(&pb, x, pb.evals + 600);
      if (f < fbest) {
        fbest = f;
        memcpy(best, x, sizeof best);
      }
    }
    g_rand_free(rng);
    for (int round = 0; round < 3 && pb.nparams > 0; round++) /* polish the winner */
      calib_nelder_mead(&pb, best, pb.evals + 1000);
    calib_objective(&pb, best); /* leave the best values in place */
    calib_errors_of(tab, pb.pred, &rep->after);
    rep->nparams = pb.nparams;
    for (int i = 0; i < pb.nparams; i++)
      g_strlcpy(rep->names[i], pb.params[i].name, sizeof rep->names[i]);
    rep->evaluations = pb.evals;
  }
  g_free(pb.pred);
  return ok;
}

static void calib_write_by_proto(GString *o, const char *key, const double *v, bool seconds)
{
  const char *proto[] = {"ll", "ll128", "simple"};
  g_string_append_printf(o, "  %s: {", key);
  for (int p = 0; p < CFG_NPROTOS; p++) {
    if (seconds)
      g_string_append_printf(o, "%s%s: %.4gus", p ? ", " : "", proto[p], v[p] * 1e6);
    else
      g_string_append_printf(o, "%s%s: %.0f", p ? ", " : "", proto[p], v[p]);
  }
  g_string_append(o, "}\n");
}

bool calib_write_nccl(const char *path, const cfg_cluster *c, const char *notes, GError **err)
{
  const cfg_nccl *n = &c->nccl;
  GString *o = g_string_new(NULL);
  g_string_append_printf(o, "# Written by dlsim calibrate. %s\n", notes);
  g_string_append_printf(o, "gpu: %s\nnotes: \"%s\"\nnccl:\n", c->gpu.name, notes);
  g_string_append_printf(o, "  link_efficiency: {intra: %.4f, network: %.4f}\n",
                         n->link_efficiency[CFG_LINK_INTRA], n->link_efficiency[CFG_LINK_NETWORK]);
  g_string_append_printf(o, "  nvls_efficiency: %.4f\n", n->nvls_efficiency);
  g_string_append_printf(o, "  p2p_efficiency: %.4f\n", n->p2p_efficiency);
  calib_write_by_proto(o, "base_latency", n->base_latency, true);
  g_string_append(o, "  hop_latency:\n");
  g_string_append(o, "  ");
  calib_write_by_proto(o, "intra", n->hop_latency[CFG_LINK_INTRA], true);
  g_string_append(o, "  ");
  calib_write_by_proto(o, "network", n->hop_latency[CFG_LINK_NETWORK], true);
  calib_write_by_proto(o, "chunk", n->chunk, false);
  g_string_append_printf(o, "  max_channels: %d\n", n->max_channels);
  g_string_append_printf(o, "  source: \"%s\"\n", notes);
  GError *io = NULL;
  bool ok = g_file_set_contents(path, o->str, (gssize)o->len, &io);
  if (!ok) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "-o %s: %s", path, io->message);
    g_error_free(io);
  }
  g_string_free(o, TRUE);
  return ok;
}
