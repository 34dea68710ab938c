/* Stragglers: what slow GPUs cost a synchronous step. Tensor-parallel collectives, pipeline
 * hand-offs and the data-parallel reduction tie every rank to every other within a step, so the
 * step ends when its slowest rank's compute does: the DES shows it by running each rank's
 * compute at its own factor, the closed form by scaling the critical rank's compute by the
 * expected slowest factor. */
#include "run/run.h"

#include <math.h>

bool sim_stragglers_check(const cfg_cluster *c, GError **err)
{
  if (c->stragglers.slowdown >= 1)
    return true;
  g_autofree char *where = cfg_doc_where(c->doc, "stragglers.slowdown");
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s: stragglers.slowdown = %g: a slow GPU's compute-time factor is at least 1", where,
              c->stragglers.slowdown);
  return false;
}

bool sim_stragglers_wanted(const cfg_stragglers *s, int gpus)
{
  return s->sigma > 0 || s->jitter > 0 || (sim_stragglers_slow(s, gpus) > 0 && s->slowdown > 1);
}

int sim_stragglers_slow(const cfg_stragglers *s, int gpus)
{
  return (int)lround(s->fraction * gpus);
}

/* log P(Z <= z) of a standard normal, finite down to z = -37 (then -inf: probability 0). */
static double sim_log_phi(double z)
{
  return log(0.5 * erfc(-z / G_SQRT2));
}

double sim_stragglers_expected_max(const cfg_stragglers *s, int gpus)
{
  int slow = sim_stragglers_slow(s, gpus);
  double k = slow > 0 ? s->slowdown : 1, sigma = hypot(s->sigma, s->jitter);
  if (sigma == 0)
    return gpus > 0 ? k : 1;
  /* E[max] = integral over x > 0 of 1 - P(max <= x); with x = e^y, of (1 - G(y)) e^y, where
   * log G(y) = (n - slow) log Phi(y / sigma) + slow log Phi((y - log k) / sigma). Below `lo`,
   * G is nil and the integral is e^lo; above `hi`, 1 - G is below 1e-30. */
  double lo = -12 * sigma, hi = log(k) + 12 * sigma, sum = 0;
  const int n = 20000;
  double h = (hi - lo) / n;
  for (int i = 0; i <= n; i++) {
    double y = lo + i * h;
    double log_g = (gpus - slow) * sim_log_phi(y / sigma) + slow * sim_log_phi((y - log(k)) / sigma);
    double v = -expm1(log_g) * exp(y);
    sum += (i == 0 || i == n ? 0.5 : 1) * v;
  }
  return exp(lo) + sum * h;
}

static double sim_normal(GRand *g)
{
  /* Box-Muller: two uniforms in (0, 1] and [0, 1) */
  double u = 1 - g_rand_double(g), v = g_rand_double(g);
  return sqrt(-2 * log(u)) * cos(2 * G_PI * v);
}

void sim_stragglers_lasting(const cfg_stragglers *s, int gpus, GRand *g, double *f)
{
  g_autofree int *order = g_new(int, MAX(gpus, 1));
  for (int i = 0; i < gpus; i++) {
    f[i] = s->sigma > 0 ? exp(s->sigma * sim_normal(g)) : 1;
    order[i] = i;
  }
  /* the slow ones: the first `slow` of a Fisher-Yates shuffle */
  int slow = MIN(sim_stragglers_slow(s, gpus), gpus);
  for (int i = 0; i < slow; i++) {
    int j = g_rand_int_range(g, i, gpus);
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
    f[order[i]] *= s->slowdown;
  }
}

/* `steps` DES steps, each rank at its lasting factor times a fresh jitter. */
static bool sim_stragglers_des(sim_result *r, const cfg_stragglers *s, GError **err)
{
  int n = r->gpus;
  g_autoptr(GRand) g = g_rand_new_with_seed((guint32)s->seed);
  g_autofree double *lasting = g_new(double, n), *f = g_new(double, n);
  sim_stragglers_lasting(s, n, g, lasting);
  eng_options o = r->options;
  o.trace = false;
  o.slowdown = f;
  double sum = 0;
  for (int step = 0; step < s->steps; step++) {
    for (int i = 0; i < n; i++)
      f[i] = lasting[i] * (s->jitter > 0 ? exp(s->jitter * sim_normal(g)) : 1);
    double t = 0;
    if (!sim_step_again(r, &o, &t, err))
      return false;
    sum += t;
  }
  r->stragglers.steps = s->steps;
  r->stragglers.step_time = sum / s->steps;
  return true;
}

bool sim_stragglers_run(sim_result *r, GError **err)
{
  const cfg_stragglers *s = &r->cluster->stragglers;
  sim_stragglers *out = &r->stragglers;
  *out = (sim_stragglers){.on = true, .slow = sim_stragglers_slow(s, r->gpus)};
  out->expected_max = sim_stragglers_expected_max(s, r->gpus);
  if (r->options.kind == ENG_DES) {
    if (!sim_stragglers_des(r, s, err))
      return false;
  } else {
    /* the slowest rank's compute sets the step: the critical rank's, stretched */
    out->step_time = r->step_time + r->eng.compute * (out->expected_max - 1);
  }
  out->cost = out->step_time - r->step_time;
  return true;
}
