/* Latency statistics: exact percentiles of per-request figures, and a log-spaced histogram for
 * the inter-token gaps (there are as many of those as generated tokens). */
#include "serving/serving_internal.h"

#include <math.h>
#include <stdlib.h>

#define SRV_HIST_LO 1e-6
#define SRV_HIST_DECADES 10
#define SRV_HIST_PER_DECADE 1000

void srv_hist_init(srv_hist *h)
{
  h->nbins = SRV_HIST_DECADES * SRV_HIST_PER_DECADE + 2;
  h->bins = g_new0(guint32, h->nbins);
  h->n = 0;
  h->sum = h->max = 0;
  h->last_x = -1;
  h->last_bin = 0;
}

static int srv_hist_bin(const srv_hist *h, double x)
{
  if (x < SRV_HIST_LO)
    return 0;
  int b = 1 + (int)floor(log10(x / SRV_HIST_LO) * SRV_HIST_PER_DECADE);
  return MIN(b, h->nbins - 1);
}

/* The middle of a bin (geometric), the value a quantile falling in it takes. */
static double srv_hist_value(int b)
{
  if (b == 0)
    return SRV_HIST_LO / 2;
  return SRV_HIST_LO * pow(10, (b - 0.5) / SRV_HIST_PER_DECADE);
}

void srv_hist_add(srv_hist *h, double x)
{
  if (x != h->last_x) {
    h->last_x = x;
    h->last_bin = srv_hist_bin(h, x);
  }
  h->bins[h->last_bin]++;
  h->n++;
  h->sum += x;
  h->max = MAX(h->max, x);
}

double srv_hist_quantile(const srv_hist *h, double q)
{
  if (h->n == 0)
    return 0;
  /* the nearest-rank quantile, as for the exact distributions */
  long rank = (long)ceil(q * h->n);
  rank = CLAMP(rank, 1, h->n);
  long seen = 0;
  for (int b = 0; b < h->nbins; b++) {
    seen += h->bins[b];
    if (seen >= rank)
      return MIN(srv_hist_value(b), h->max);
  }
  return h->max;
}

void srv_hist_clear(srv_hist *h)
{
  g_free(h->bins);
  h->bins = NULL;
}

static int srv_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double srv_quantile(const double *sorted, int n, double q)
{
  int rank = (int)ceil(q * n);
  return sorted[CLAMP(rank, 1, n) - 1];
}

void srv_dist_of(double *v, int n, srv_dist *out)
{
  *out = (srv_dist){.n = n};
  if (n == 0)
    return;
  qsort(v, (size_t)n, sizeof *v, srv_cmp_double);
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += v[i];
  out->mean = sum / n;
  out->p50 = srv_quantile(v, n, 0.50);
  out->p90 = srv_quantile(v, n, 0.90);
  out->p99 = srv_quantile(v, n, 0.99);
  out->max = v[n - 1];
}
