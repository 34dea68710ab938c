/* The search: enumeration, validity, memory, and the closed-form step estimate.
 *
 * The estimate takes each layer pass's time from the same templates the engines run (one
 * transformer block's kernels with its tensor / context / expert-parallel collectives,
 * evaluated by the engine: first run's makespan, then its period), so it sees what the
 * engines see of a layer; it only replaces the pipeline's list scheduling by a closed form:
 * m periods of a micro-batch (each round of chunks at the pace of its slowest stage) plus the
 * fill and drain of the other stages' work, a chunk at a time with interleaving (Megatron's
 * (p - 1) / v bubble), plus the stage-boundary transfers, the exposed tail of the gradient
 * reduction, the optimizer and ZeRO's parameter all-gather.
 * Everything it needs is cached per distinct layer shape, so a layout costs microseconds. */
#include "planner/planner_internal.h"

#include "collectives/collectives.h"
#include "memory/memory.h"

#include <math.h>
#include <string.h>

/* ---- setup -------------------------------------------------------------------------------- */

static void plan_skel_free(gpointer p)
{
  plan_skel *k = p;
  eng_evaluator_free(k->eval);
  wl_skeleton_free(&k->sk);
  g_free(k);
}

plan_setup *plan_setup_new(cfg_cluster *c, cfg_workload *w, int global_batch, GError **err)
{
  plan_setup *s = g_new0(plan_setup, 1);
  s->batch = global_batch;
  s->c = c;
  s->w = w;
  if (!w->has_training) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "dlsim plan takes a training workload");
    plan_setup_free(s);
    return NULL;
  }
  /* as sim_run (sim_mps_cluster): the workload's host launch time floors every kernel, so the
   * closed form ranks host-bound layouts as the engine runs them */
  s->c->gpu.efficiency.host_dispatch = cfg_host_dispatch(s->c, w);
  s->hw = hw_cluster_new(s->c);
  s->gpus = cfg_cluster_gpus(s->c);
  s->opt.kind = ENG_ANALYTIC;
  s->runtime = coll_runtime_with_choices(&s->w->collectives, s->w->doc, &s->opt.algo,
                                         &s->opt.proto, err);
  if (!s->runtime) {
    plan_setup_free(s);
    return NULL;
  }
  /* as dlsim run: a host-driven runtime holds no SMs */
  s->opt.sm_reserved = coll_runtime_cpu(s->runtime) ? 0 : s->w->collectives.sm_reserved;
  s->opt.runtime = s->runtime;
  s->pl = coll_planner_new(s->hw, s->opt.algo, s->opt.proto, true);
  coll_planner_set_runtime(s->pl, s->runtime);
  s->models = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)wl_model_free);
  s->skels = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, plan_skel_free);
  s->colls = plan_coll_cache_new();
  s->groups = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  s->crowds = plan_crowd_cache_new();
  return s;
}

void plan_setup_free(plan_setup *s)
{
  if (!s)
    return;
  if (s->models)
    g_hash_table_destroy(s->models);
  if (s->skels)
    g_hash_table_destroy(s->skels);
  if (s->colls)
    g_hash_table_destroy(s->colls);
  if (s->groups)
    g_hash_table_destroy(s->groups);
  if (s->crowds)
    g_hash_table_destroy(s->crowds);
  sim_cache_free(s->runs);
  coll_planner_free(s->pl);
  coll_runtime_free(s->runtime);
  hw_cluster_free(s->hw);
  cfg_workload_free(s->w);
  cfg_cluster_free(s->c);
  g_free(s);
}

int plan_setup_gpus(const plan_setup *s)
{
  return s->gpus;
}

const cfg_workload *plan_setup_workload(const plan_setup *s)
{
  return s->w;
}

/* ---- layouts ------------------------------------------------------------------------------ */

void plan_apply(const plan_setup *s, const plan_layout *l, cfg_workload *w)
{
  *w = *s->w;
  cfg_parallel *p = &w->parallel;
  p->tp = l->tp;
  p->cp = l->cp;
  p->pp = l->pp;
  p->dp = l->dp;
  p->ep = l->ep;
  p->zero = l->zero;
  p->virtual_stages = l->virtual_stages;
  cfg_schedule want = s->w->parallel.schedule;
  /* ZB-V is the two-chunk layout of a workload that asks for it (priced as interleaving) */
  if (want == CFG_SCHED_ZB_V)
    want = l->virtual_stages == 2 ? CFG_SCHED_ZB_V : CFG_SCHED_1F1B;
  p->schedule = l->virtual_stages > 1 && want != CFG_SCHED_ZB_V ? CFG_SCHED_INTERLEAVED
                : want == CFG_SCHED_INTERLEAVED                 ? CFG_SCHED_1F1B
                                                                : want;
  p->sequence_parallel = l->sequence_parallel;
  p->uneven_stages = 1; /* any pipeline depth: layers need not divide evenly */
  const cfg_dim inner[] = {CFG_DIM_TP, CFG_DIM_CP, CFG_DIM_PP, CFG_DIM_DP};
  const cfg_dim outer[] = {CFG_DIM_TP, CFG_DIM_CP, CFG_DIM_DP, CFG_DIM_PP};
  memcpy(p->placement, l->pipeline_outer ? outer : inner, sizeof inner);
  p->nplacement = CFG_NDIMS;
  w->training.micro_batch = l->micro_batch;
  w->training.recompute = l->recompute;
  w->training.global_batch = s->batch;
}

char *plan_layout_describe(const plan_layout *l)
{
  static const char *const rc[] = {"no recompute", "selective", "full recompute"};
  GString *d = g_string_new(NULL);
  g_string_append_printf(d, "TP %d", l->tp);
  if (l->cp > 1)
    g_string_append_printf(d, " x CP %d", l->cp);
  g_string_append_printf(d, " x PP %d", l->pp);
  if (l->virtual_stages > 1)
    g_string_append_printf(d, " (x%d)", l->virtual_stages);
  g_string_append_printf(d, " x DP %d", l->dp);
  if (l->ep > 1)
    g_string_append_printf(d, " (EP %d)", l->ep);
  g_string_append_printf(d, ", mb %d, ZeRO-%d, %s%s%s", l->micro_batch, l->zero, rc[l->recompute],
                         l->sequence_parallel ? ", SP" : "", l->pipeline_outer ? ", PP outer" : "");
  return g_string_free(d, FALSE);
}

/* The cheap checks wl_check_layout makes, without building messages. */
bool plan_valid(const plan_setup *s, const plan_layout *l)
{
  const cfg_model *m = &s->w->model;
  const cfg_training *t = &s->w->training;
  int v = l->virtual_stages, batch = s->batch;
  if (m->heads % l->tp || (m->kv_heads % l->tp && l->tp % m->kv_heads) || m->ffn_hidden % l->tp)
    return false;
  if (m->seq_len % l->cp || (l->cp > 1 && !t->flash_attention))
    return false;
  if (m->layers < l->pp * v)
    return false;
  if (batch % (l->dp * l->micro_batch))
    return false;
  int micro = batch / (l->dp * l->micro_batch);
  if (v > 1 && micro % l->pp)
    return false;
  if (v > 1 && s->w->parallel.pipeline_engine == CFG_PIPE_DEEPSPEED) /* TrainSchedule: 1F1B */
    return false;
  /* DualPipe's rules (wl_check_layout): an even pp, an even count of at least 2 pp */
  bool dual = l->pp > 1 && v == 1 && s->w->parallel.schedule == CFG_SCHED_DUALPIPE;
  if (dual && (l->pp % 2 || micro < 2 * l->pp || micro % 2))
    return false;
  if (l->ep > 1 && (l->dp % l->ep || m->moe.experts % l->ep))
    return false;
  return true;
}

/* ---- caches ------------------------------------------------------------------------------- */

static gint64 *plan_key(gint64 v)
{
  return g_memdup2(&v, sizeof v);
}

/* The shape of a GPU's shard: what the kernels of a layer depend on. */
static gint64 plan_shard_key(const plan_layout *l)
{
  return (gint64)l->tp | (gint64)l->cp << 8 | (gint64)l->sequence_parallel << 16 |
         (gint64)l->micro_batch << 17 | (gint64)l->recompute << 27 | (gint64)l->ep << 29;
}

const wl_model *plan_model(plan_setup *s, const cfg_workload *w, const plan_layout *l)
{
  gint64 key = plan_shard_key(l);
  wl_model *m = g_hash_table_lookup(s->models, &key);
  if (m)
    return m;
  wl_shard shard = wl_shard_of(w);
  if (!wl_model_build(&w->model, &w->training, &shard, &m, NULL))
    return NULL;
  g_hash_table_insert(s->models, plan_key(key), m);
  return m;
}

/* The stride of the data-parallel coordinate: what an expert-parallel group's span depends on. */
static int plan_dp_stride(const plan_layout *l)
{
  return l->tp * l->cp * (l->pipeline_outer ? 1 : l->pp);
}

const plan_skel *plan_skeleton(plan_setup *s, const cfg_workload *w, const plan_layout *l,
                               const wl_model *m)
{
  gint64 key = plan_shard_key(l) | (l->ep > 1 ? (gint64)plan_dp_stride(l) << 40 : 0);
  plan_skel *k = g_hash_table_lookup(s->skels, &key);
  if (k)
    return k;
  k = g_new0(plan_skel, 1);
  cfg_workload flat = *w; /* ZeRO-3's per-layer collectives are the estimate's to add */
  flat.parallel.zero = MIN(flat.parallel.zero, 2);
  wl_skeleton_build(&flat, s->hw, m, &k->sk);
  k->eval = eng_evaluator_new(k->sk.p, s->hw, &s->opt);
  g_hash_table_insert(s->skels, plan_key(key), k);
  return k;
}

typedef struct {
  gint64 group;
  int op, nsib, ssib;
  double bytes;
  double time;
} plan_coll_entry;

static guint plan_coll_hash(gconstpointer k)
{
  const plan_coll_entry *e = k;
  return g_int64_hash(&e->group) * 31u + (guint)e->op * 7u + (guint)e->nsib * 131u +
         (guint)e->ssib * 524287u + g_double_hash(&e->bytes);
}

static gboolean plan_coll_equal(gconstpointer a, gconstpointer b)
{
  const plan_coll_entry *x = a, *y = b;
  return x->group == y->group && x->op == y->op && x->nsib == y->nsib && x->ssib == y->ssib &&
         x->bytes == y->bytes;
}

GHashTable *plan_coll_cache_new(void)
{
  return g_hash_table_new_full(plan_coll_hash, plan_coll_equal, g_free, NULL);
}

typedef struct {
  gint64 group;
  int nsib, ssib;
  const coll_plan *plan;
} plan_crowd_key;

static guint plan_crowd_hash(gconstpointer k)
{
  const plan_crowd_key *x = k;
  return g_int64_hash(&x->group) ^ (guint)x->nsib * 131u ^ (guint)x->ssib * 524287u ^
         g_direct_hash(x->plan);
}

static gboolean plan_crowd_equal(gconstpointer a, gconstpointer b)
{
  const plan_crowd_key *x = a, *y = b;
  return x->group == y->group && x->nsib == y->nsib && x->ssib == y->ssib && x->plan == y->plan;
}

GHashTable *plan_crowd_cache_new(void)
{
  return g_hash_table_new_full(plan_crowd_hash, plan_crowd_equal, g_free,
                               (GDestroyNotify)coll_crowd_free);
}

/* The time of `sch` (a plan of the group whose ranks come first in `ranks`) beside the
 * siblings that follow; the fair shares are worked out once per plan, whatever the size. */
static double plan_crowded(plan_setup *s, gint64 group, int nsib, int ssib, const int *ranks,
                           const coll_schedule *sch)
{
  if (nsib <= 1 || !sch->plan->nphases)
    return sch->time;
  plan_crowd_key key = {.group = group, .nsib = nsib, .ssib = ssib, .plan = sch->plan};
  coll_crowd *c = g_hash_table_lookup(s->crowds, &key);
  if (!c) {
    c = coll_crowd_new(sch->plan, s->hw, true, ranks + sch->plan->n, nsib - 1);
    g_hash_table_insert(s->crowds, g_memdup2(&key, sizeof key), c);
  }
  return coll_crowd_time(c, sch, s->hw);
}

double plan_coll(plan_setup *s, prog_coll op, int n1, int s1, int n2, int s2, int nsib, int ssib,
                 double bytes)
{
  int n = n1 * n2;
  if (n <= 1 || bytes <= 0)
    return 0;
  gint64 group = (gint64)n1 | (gint64)s1 << 16 | (gint64)n2 << 36 | (gint64)s2 << 46;
  plan_coll_entry probe = {.group = group, .op = op, .nsib = nsib, .ssib = ssib, .bytes = bytes};
  plan_coll_entry *hit = g_hash_table_lookup(s->colls, &probe);
  if (hit)
    return hit->time;
  int id = GPOINTER_TO_INT(g_hash_table_lookup(s->groups, &group));
  if (!id) {
    id = (int)g_hash_table_size(s->groups) + 1;
    g_hash_table_insert(s->groups, plan_key(group), GINT_TO_POINTER(id));
  }
  g_autofree int *ranks = g_new(int, (gsize)n * MAX(nsib, 1));
  for (int a = 0; a < n1; a++)
    for (int b = 0; b < n2; b++)
      ranks[a * n2 + b] = a * s1 + b * s2;
  for (int k = 1; k < nsib; k++)
    for (int i = 0; i < n; i++)
      ranks[k * n + i] = ranks[i] + k * ssib;
  const coll_schedule *sch = coll_planner_get(s->pl, op, ranks, n, id, bytes, NULL, NULL);
  plan_coll_entry *e = g_memdup2(&probe, sizeof probe);
  e->time = sch ? plan_crowded(s, group, nsib, ssib, ranks, sch) : INFINITY;
  g_hash_table_add(s->colls, e);
  return e->time;
}
