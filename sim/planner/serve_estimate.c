/* The serving planner's closed form: the highest request rate a deployment sustains under the
 * SLA, from the cost of the iterations the rate implies (srv_iteration_time, the simulator's
 * own cost model) and a queueing term.
 *
 * At a rate lambda per lane, Little's law gives n = lambda x output x t sequences decoding and
 * lambda x prompt x t prompt tokens per iteration of length t; t is the cost of that batch, a
 * fixed point found by iterating from one decode (the cost grows with the batch, so the
 * iteration climbs to the smallest fixed point, or past a limit when there is none). Chunked
 * prefill mixes the prompt tokens into each iteration (a prompt's chunks follow one another, so
 * the queue in front of a prompt is served a whole prompt at a time); without chunking prompts
 * run in iterations of their own between decodes. TPOT's p90 is taken 10 % over the mean iteration;
 * TTFT is the prefill's iterations plus a Kingman wait (arrivals split round robin over R
 * replicas have a squared coefficient of variation 1/R) whose p90 is ln 10 of its mean. The
 * constants only screen: the best deployments are confirmed by simulation. */
#include "planner/planner_internal.h"

#include <math.h>

#define PLAN_SRV_TAIL 2.3          /* p90 of an exponential wait over its mean */
#define PLAN_SRV_SPREAD 1.1        /* p90 of a request's TPOT over the mean iteration */
#define PLAN_SRV_SERVICE_CV2 0.5   /* of an iteration's length, in the Kingman wait */
#define PLAN_SRV_GRID0 1e-3        /* requests/s: the grid of rates starts here ... */
#define PLAN_SRV_STEP 1.005        /* ... and steps by 0.5 % */
#define PLAN_SRV_KMAX 4200         /* up to about 1e6 requests/s */
#define PLAN_SRV_ITERATIONS 200

typedef struct {
  bool ok;
  double ttft, tpot;
} plan_srv_point;

static const plan_srv_point plan_srv_no = {false, INFINITY, INFINITY};

/* n decoding sequences at the mean context and q prompt tokens (of prompts whose first
 * prompt - computed tokens come from a cache). */
static srv_batch plan_srv_batch(const plan_srv_model *m, double n, double q)
{
  int decodes = n > 0 ? (int)ceil(n) : 0;
  double prompts = q > 0 ? q / m->computed : 0;
  int prefills = q > 0 ? (int)ceil(prompts) : 0;
  double cached = m->prompt - m->computed;
  return (srv_batch){.seqs = decodes + prefills,
                     .tokens = decodes + q,
                     .prefill_tokens = q,
                     .prefill_attn = q * (cached + (m->computed + 1) / 2),
                     .prefill_kv = q + prompts * cached,
                     .decodes = decodes,
                     .decode_kv = decodes * (m->prompt + m->output / 2 + 1),
                     .samples = decodes + prefills};
}

/* How often a lane's iterations follow each other: a pipeline's lanes share its first stage. */
static double plan_srv_cycle(const plan_srv_pool_model *p, const srv_batch *b)
{
  srv_time t;
  srv_iteration_time(p->cost, b, &t);
  return p->lanes > 1 ? MAX(t.total, p->lanes * t.period) : t.total;
}

static double plan_srv_wait(const plan_srv_pool_model *p, double rho, double t)
{
  if (rho >= 1)
    return INFINITY;
  return (1.0 / p->replicas + PLAN_SRV_SERVICE_CV2) / 2 * rho / (1 - rho) * t;
}

static bool plan_srv_holds(const plan_srv_model *m, const plan_srv_pool_model *p, double n)
{
  return n <= p->max_batch && n * (m->prompt + m->output) <= p->kv_tokens;
}

static double plan_srv_binomial(int n, int k, double f)
{
  double c = 1;
  for (int i = 0; i < k; i++)
    c = c * (n - i) / (i + 1);
  return c * pow(f, k) * pow(1 - f, n - k);
}

/* A lane's cycle when a share f of its cycles are of kind t[1] (with a prompt's work) and the
 * rest of kind t[0]. One lane: the mean. A pipeline's L lanes take turns at its first stage, so
 * a lane starts again after its own work and after the first-stage periods of the L - 1 others
 * that entered since: the mean of the larger of the two over which kind each lane's cycle is
 * (the variability makes lanes wait on one another). */
static double plan_srv_lanes(const plan_srv_pool_model *p, const srv_time t[2], double f)
{
  int others = p->lanes - 1;
  double cycle = 0;
  for (int own = 0; own < 2; own++)
    for (int k = 0; k <= others; k++) {
      double w = (own ? f : 1 - f) * plan_srv_binomial(others, k, f);
      double stage0 = t[own].period + k * t[1].period + (others - k) * t[0].period;
      cycle += w * (others ? MAX(t[own].total, stage0) : t[own].total);
    }
  return cycle;
}

static srv_time plan_srv_time_of(const plan_srv_model *m, const plan_srv_pool_model *p, double n,
                                 double q)
{
  srv_batch b = plan_srv_batch(m, n, q);
  srv_time t;
  srv_iteration_time(p->cost, &b, &t);
  return t;
}

/* Chunked prefill: an iteration carries a prompt chunk (q = chunk) or none. */
static double plan_srv_lane_cycle(const plan_srv_model *m, const plan_srv_pool_model *p, double n,
                                  double chunk, double f)
{
  srv_time t[2] = {plan_srv_time_of(m, p, MAX(n, 1), 0), plan_srv_time_of(m, p, MAX(n, 1), chunk)};
  return plan_srv_lanes(p, t, f);
}

/* Chunked prefill: prompt chunks ride in the decode iterations. */
static plan_srv_point plan_srv_mixed(const plan_srv_model *m, const plan_srv_pool_model *p,
                                     double lam)
{
  srv_batch b = plan_srv_batch(m, 1, 0);
  double t = plan_srv_cycle(p, &b), n = 0, q = 0;
  bool settled = false;
  for (int i = 0; i < PLAN_SRV_ITERATIONS && !settled; i++) {
    n = lam * m->output * t;
    q = lam * m->computed * t;
    if (!plan_srv_holds(m, p, n) || n + q > p->max_tokens)
      return plan_srv_no;
    double chunk = MAX(q, MIN(p->max_tokens - n, m->computed));
    double next = plan_srv_lane_cycle(m, p, n, chunk, q / chunk);
    settled = fabs(next - t) <= 1e-4 * next;
    t = next;
  }
  if (!settled)
    return plan_srv_no;
  /* a prompt holds the budget left by the decodes until its last chunk: the queue in front of
   * it is served a prompt (chunks x t) at a time */
  double free = MAX(1.0, p->max_tokens - n);
  double chunks = ceil(m->computed / free);
  double rho = MAX(n / p->max_batch, q / free);
  double wait = plan_srv_wait(p, rho, chunks * t);
  return (plan_srv_point){true, m->overhead + (chunks + 0.5) * t + PLAN_SRV_TAIL * wait,
                          PLAN_SRV_SPREAD * t};
}

/* Prompts in iterations of their own, as many as max_tokens and max_batch take. */
static double plan_srv_prefill_time(const plan_srv_model *m, const plan_srv_pool_model *p,
                                    double prompts)
{
  srv_batch b = plan_srv_batch(m, 0, ceil(prompts) * m->computed);
  return plan_srv_cycle(p, &b);
}

static double plan_srv_per_prefill(const plan_srv_model *m, const plan_srv_pool_model *p)
{
  return CLAMP(floor(p->max_tokens / m->computed), 1.0, (double)p->max_batch);
}

/* Without chunking: a decode iteration, then (in a share f of the cycles) the prefill of what
 * arrived, in iterations of up to kmax prompts. */
static plan_srv_point plan_srv_separate(const plan_srv_model *m, const plan_srv_pool_model *p,
                                        double lam)
{
  double kmax = plan_srv_per_prefill(m, p);
  srv_batch b = plan_srv_batch(m, 1, 0);
  double c = plan_srv_cycle(p, &b), n = 0, prefill = 0, tp = 0;
  bool settled = false;
  for (int i = 0; i < PLAN_SRV_ITERATIONS && !settled; i++) {
    double arrivals = lam * c, k = CLAMP(arrivals, 1.0, kmax), runs = arrivals / k;
    n = lam * m->output * c;
    if (!plan_srv_holds(m, p, n))
      return plan_srv_no;
    srv_time t[2] = {plan_srv_time_of(m, p, MAX(n, 1), 0), plan_srv_time_of(m, p, MAX(n, 1), 0)};
    srv_time pt = plan_srv_time_of(m, p, 0, ceil(k) * m->computed);
    double each = MAX(runs, 1.0); /* prefill iterations in a cycle that has any */
    t[1] = (srv_time){.total = t[0].total + each * pt.total, .period = t[0].period + each * pt.period};
    tp = pt.total;
    prefill = runs * tp;
    double next = plan_srv_lanes(p, t, MIN(runs, 1.0));
    settled = fabs(next - c) <= 1e-4 * next;
    c = next;
    if (c > 3600)
      return plan_srv_no;
  }
  if (!settled)
    return plan_srv_no;
  double rho = MAX(n / p->max_batch, prefill / c);
  double wait = plan_srv_wait(p, rho, c);
  return (plan_srv_point){true, m->overhead + c / 2 + tp + PLAN_SRV_TAIL * wait,
                          PLAN_SRV_SPREAD * c};
}

/* A prefill pool: prompts batched as they queue; then the KV moves to the decode pool. */
static plan_srv_point plan_srv_prefill_pool(const plan_srv_model *m, const plan_srv_pool_model *p,
                                            double lam)
{
  double kmax = plan_srv_per_prefill(m, p), k = 1;
  double tp = plan_srv_prefill_time(m, p, 1);
  for (int i = 0; i < PLAN_SRV_ITERATIONS; i++) {
    double next = CLAMP(lam * tp, 1.0, kmax);
    if (next == k)
      break;
    k = next;
    tp = plan_srv_prefill_time(m, p, k);
  }
  double rho = lam * tp / k;
  if (rho >= 1)
    return plan_srv_no;
  double wait = plan_srv_wait(p, rho, tp);
  return (plan_srv_point){true, m->overhead + 1.5 * tp + PLAN_SRV_TAIL * wait + m->transfer_s, 0};
}

/* A decode pool: every request's decodes, nothing else. */
static plan_srv_point plan_srv_decode_pool(const plan_srv_model *m, const plan_srv_pool_model *p,
                                           double lam)
{
  srv_batch b = plan_srv_batch(m, 1, 0);
  double t = plan_srv_cycle(p, &b);
  bool settled = false;
  for (int i = 0; i < PLAN_SRV_ITERATIONS && !settled; i++) {
    double n = lam * m->output * t;
    if (!plan_srv_holds(m, p, n))
      return plan_srv_no;
    b = plan_srv_batch(m, MAX(n, 1), 0);
    double next = plan_srv_cycle(p, &b);
    settled = fabs(next - t) <= 1e-4 * next;
    t = next;
  }
  return settled ? (plan_srv_point){true, t / 2, PLAN_SRV_SPREAD * t} : plan_srv_no;
}

static plan_srv_point plan_srv_pool_at(const plan_srv_model *m, const plan_srv_pool_model *p,
                                       double rate)
{
  double lam = rate / ((double)p->replicas * p->lanes);
  switch (p->role) {
  case PLAN_SRV_PREFILL:
    return plan_srv_prefill_pool(m, p, lam);
  case PLAN_SRV_DECODE:
    return plan_srv_decode_pool(m, p, lam);
  default:
    return p->scheduler == CFG_SCHEDULER_CHUNKED || p->scheduler == CFG_SCHEDULER_FUSED
               ? plan_srv_mixed(m, p, lam)
               : plan_srv_separate(m, p, lam);
  }
}

/* The deployment at `rate`: its pools' TTFT parts add up, the decoding pool sets TPOT. */
static plan_srv_point plan_srv_at(const plan_srv_model *m, double rate)
{
  plan_srv_point all = {true, 0, 0};
  for (int i = 0; i < m->npools && all.ok; i++) {
    plan_srv_point p = plan_srv_pool_at(m, &m->pool[i], rate);
    all = (plan_srv_point){p.ok, all.ttft + p.ttft, MAX(all.tpot, p.tpot)};
  }
  return all;
}

static double plan_srv_grid(long k)
{
  return PLAN_SRV_GRID0 * pow(PLAN_SRV_STEP, (double)k);
}

static bool plan_srv_meets(const plan_srv_model *m, long k, plan_srv_point *p)
{
  *p = plan_srv_at(m, plan_srv_grid(k));
  return p->ok && p->ttft <= m->ttft && p->tpot <= m->tpot;
}

/* [lo, hi]: lo meets, hi does not (lo = -1: not even the grid's first rate). */
static void plan_srv_bracket(const plan_srv_model *m, long k, long *lo, long *hi)
{
  plan_srv_point p;
  long step = 8;
  if (plan_srv_meets(m, k, &p)) {
    for (*lo = k, *hi = k + step; *hi <= PLAN_SRV_KMAX && plan_srv_meets(m, *hi, &p); step *= 2)
      *lo = *hi, *hi = *lo + step;
    return;
  }
  for (*hi = k, *lo = k - step; *lo >= 0 && !plan_srv_meets(m, *lo, &p); step *= 2)
    *hi = *lo, *lo = *hi - step;
  if (*lo < 0)
    *lo = plan_srv_meets(m, 0, &p) ? 0 : -1;
  if (*lo == 0 && *hi <= 0)
    *hi = 1;
}

double plan_srv_max_rate(const plan_srv_model *m, double start, double *ttft, double *tpot)
{
  long k = start > PLAN_SRV_GRID0 ? lround(log(start / PLAN_SRV_GRID0) / log(PLAN_SRV_STEP)) : 0;
  long lo, hi;
  plan_srv_bracket(m, MIN(k, (long)PLAN_SRV_KMAX), &lo, &hi);
  plan_srv_point p;
  while (lo >= 0 && hi - lo > 1) {
    long mid = lo + (hi - lo) / 2;
    if (plan_srv_meets(m, mid, &p))
      lo = mid;
    else
      hi = mid;
  }
  if (lo < 0 || !plan_srv_meets(m, lo, &p)) {
    *ttft = *tpot = NAN;
    return 0;
  }
  *ttft = p.ttft;
  *tpot = p.tpot;
  return plan_srv_grid(lo);
}
