/* The serving planner's search: every candidate loaded through the config module with its
 * overlays (as `dlsim serve --set` would load it), its memory checked (srv_capacity_of), its
 * highest rate under the SLA estimated in closed form; the best confirmed with
 * srv_find_max_rate. */
#include "planner/planner_internal.h"

#include <math.h>
#include <string.h>

/* A replica shape (TP, PP, EP): its workload and cost model, shared by every candidate of it. */
typedef struct {
  cfg_workload *w;
  srv_cost *cost;
} plan_srv_shape;

struct plan_srv_setup {
  char *cluster, *workload;
  GPtrArray *base;   /* char*: the search's base overlays, NULL-terminated */
  GPtrArray *shown;  /* char*: those a re-run needs (node.count, the user's, the SLA) */
  cfg_cluster *c;
  cfg_workload *w;
  plan_srv_space space;
  plan_srv_model model; /* request means and the SLA (pools filled per candidate) */
  double longest;       /* tokens of the longest request: a replica's KV must hold it */
  GHashTable *shapes;   /* "tp pp ep" -> plan_srv_shape (invalid shapes: no cost) */
};

static void plan_srv_shape_free(gpointer p)
{
  plan_srv_shape *s = p;
  srv_cost_free(s->cost);
  cfg_workload_free(s->w);
  g_free(s);
}

static char **plan_srv_join(GPtrArray *base, char **more)
{
  GPtrArray *a = g_ptr_array_new();
  for (guint i = 0; i + 1 < base->len; i++)
    g_ptr_array_add(a, g_strdup(base->pdata[i]));
  for (int i = 0; more && more[i]; i++)
    g_ptr_array_add(a, g_strdup(more[i]));
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}

/* Loads the workload with the base and `more`, on the cluster (which is dropped). */
static cfg_workload *plan_srv_load(const plan_srv_setup *s, char **more, GError **err)
{
  g_auto(GStrv) sets = plan_srv_join(s->base, more);
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  bool ok = cfg_load_with(s->cluster, s->workload, sets, &c, &w, err);
  cfg_cluster_free(c);
  return ok ? w : NULL;
}

static const plan_srv_shape *plan_srv_shape_of(plan_srv_setup *s, const plan_srv_pool *p)
{
  g_autofree char *key = g_strdup_printf("%d %d %d", p->tp, p->pp, p->ep);
  plan_srv_shape *sh = g_hash_table_lookup(s->shapes, key);
  if (sh)
    return sh;
  sh = g_new0(plan_srv_shape, 1);
  g_autofree char *tp = g_strdup_printf("serving.tp=%d", p->tp);
  g_autofree char *pp = g_strdup_printf("serving.pp=%d", p->pp);
  g_autofree char *ep = g_strdup_printf("serving.ep=%d", p->ep);
  char *more[] = {tp, pp, ep, NULL};
  GError *e = NULL;
  sh->w = plan_srv_load(s, more, &e);
  if (!sh->w || !srv_cost_new(s->c, sh->w, &sh->cost, &e))
    g_clear_error(&e); /* a shape the model does not divide into: not a valid candidate */
  g_hash_table_insert(s->shapes, g_steal_pointer(&key), sh);
  return sh;
}

/* ---- the setup ----------------------------------------------------------------------------- */

static bool plan_srv_check_stream(const cfg_workload *w, GError **err)
{
  const cfg_requests *q = &w->serving.requests;
  const char *why = NULL;
  if (q->trace || q->concurrency > 0 || q->arrival == CFG_ARRIVAL_BURST)
    why = "it varies the arrival rate: it needs serving.requests.arrival poisson, gamma or "
          "uniform (not a trace, a closed loop or a burst)";
  else if (q->prompt_tokens < 1 || q->output_tokens < 1)
    why = "its estimate starts from the mean lengths: give serving.requests.prompt_tokens and "
          "output_tokens";
  if (!why)
    return true;
  g_autofree char *where = cfg_doc_where(w->doc, "serving.requests");
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: dlsim plan for serving: %s", where, why);
  return false;
}

static void plan_srv_model_init(plan_srv_setup *s)
{
  const cfg_serving *v = &s->w->serving;
  const cfg_requests *q = &v->requests;
  double cached = v->prefix_caching && q->prefix_tokens > 0
                      ? (double)(q->prefix_tokens / v->block_size * v->block_size)
                      : 0;
  s->model = (plan_srv_model){.prompt = q->prompt_tokens,
                              .computed = MAX(1.0, q->prompt_tokens - cached),
                              .output = q->output_tokens,
                              .ttft = v->slo.ttft,
                              .tpot = v->slo.tbt,
                              .overhead = v->request_overhead};
  double total = q->prompt_tokens + q->output_tokens;
  s->longest = q->distribution == CFG_LENGTHS_FIXED     ? total
               : q->distribution == CFG_LENGTHS_UNIFORM ? ceil(total * (1 + q->spread))
                                                        : v->max_model_len;
  s->space.chunked = v->scheduler == CFG_SCHEDULER_CHUNKED;
  s->space.fixed_tokens = v->scheduler == CFG_SCHEDULER_STATIC;
  s->space.min_tokens = MAX(2048, v->max_model_len);
  s->space.pools = plan_srv_pools_known();
}

static void plan_srv_add_sla(plan_srv_setup *s, const char *key, double seconds)
{
  if (!(seconds > 0))
    return;
  char *set = g_strdup_printf("serving.slo.%s=%.9gs", key, seconds);
  g_ptr_array_add(s->base, set);
  g_ptr_array_add(s->shown, g_strdup(set));
}

static void plan_srv_base_sets(plan_srv_setup *s, char *const *sets, int gpn, double ttft,
                               double tpot)
{
  char *nodes = g_strdup_printf("node.count=%d", (s->space.gpus + gpn - 1) / gpn);
  g_ptr_array_add(s->base, nodes);
  g_ptr_array_add(s->shown, g_strdup(nodes));
  g_ptr_array_add(s->base, g_strdup("serving.tp=1"));
  g_ptr_array_add(s->base, g_strdup("serving.pp=1"));
  g_ptr_array_add(s->base, g_strdup("serving.replicas=1"));
  for (int i = 0; sets && sets[i]; i++) {
    g_ptr_array_add(s->base, g_strdup(sets[i]));
    g_ptr_array_add(s->shown, g_strdup(sets[i]));
  }
  plan_srv_add_sla(s, "ttft", ttft);
  plan_srv_add_sla(s, "tbt", tpot);
  g_ptr_array_add(s->base, NULL);
  g_ptr_array_add(s->shown, NULL);
}

plan_srv_setup *plan_srv_setup_new(const char *cluster, const char *workload, char *const *sets,
                                   int gpus, double ttft, double tpot, GError **err)
{
  cfg_cluster *c = NULL;
  if (!cfg_load_with(cluster, NULL, NULL, &c, NULL, err))
    return NULL;
  int gpn = c->node.gpus_per_node;
  cfg_cluster_free(c);
  plan_srv_setup *s = g_new0(plan_srv_setup, 1);
  s->cluster = g_strdup(cluster);
  s->workload = g_strdup(workload);
  s->base = g_ptr_array_new_with_free_func(g_free);
  s->shown = g_ptr_array_new_with_free_func(g_free);
  s->shapes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, plan_srv_shape_free);
  s->space = (plan_srv_space){.gpus = gpus, .gpus_per_node = gpn};
  plan_srv_base_sets(s, sets, gpn, ttft, tpot);
  bool ok = cfg_load_with(cluster, workload, (char **)s->base->pdata, &s->c, &s->w, err);
  if (ok && !s->w->has_serving) {
    g_autofree char *where = cfg_doc_where(s->w->doc, "");
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: the workload has no 'serving' section",
                where);
    ok = false;
  }
  ok = ok && plan_srv_check_stream(s->w, err);
  if (!ok) {
    plan_srv_setup_free(s);
    return NULL;
  }
  plan_srv_model_init(s);
  return s;
}

void plan_srv_setup_free(plan_srv_setup *s)
{
  if (!s)
    return;
  g_hash_table_destroy(s->shapes);
  cfg_workload_free(s->w);
  cfg_cluster_free(s->c);
  g_ptr_array_free(s->base, TRUE);
  g_ptr_array_free(s->shown, TRUE);
  g_free(s->cluster);
  g_free(s->workload);
  g_free(s);
}

const plan_srv_space *plan_srv_setup_space(const plan_srv_setup *s)
{
  return &s->space;
}

const cfg_workload *plan_srv_setup_workload(const plan_srv_setup *s)
{
  return s->w;
}

/* ---- one candidate ------------------------------------------------------------------------- */

typedef enum { PLAN_SRV_INVALID, PLAN_SRV_TOO_BIG, PLAN_SRV_FITS } plan_srv_status;

/* The pool's model; false when its replica's memory cannot hold the longest request. */
static bool plan_srv_pool_fits(plan_srv_setup *s, const plan_srv_shape *sh, const plan_srv_pool *p,
                               int max_tokens, plan_srv_pool_model *pm)
{
  cfg_workload w = *sh->w; /* shallow: only read by the capacity */
  if (p->max_batch > 0)
    w.serving.max_batch = p->max_batch;
  w.serving.max_tokens = max_tokens;
  srv_capacity cap;
  GError *e = NULL;
  if (!srv_capacity_of(s->c, &w, sh->cost, &cap, &e)) {
    g_clear_error(&e);
    return false;
  }
  *pm = (plan_srv_pool_model){.cost = sh->cost, .kv_tokens = cap.tokens,
                              .scheduler = w.serving.scheduler, .lanes = p->pp,
                              .replicas = p->replicas, .max_batch = w.serving.max_batch,
                              .max_tokens = max_tokens};
  return cap.tokens >= s->longest;
}

/* Moving a prompt's KV from a prefill GPU to a decode GPU: NVLink inside a node, else the NIC. */
static double plan_srv_transfer(const plan_srv_setup *s, const plan_srv_shape *prefill)
{
  double bw = s->space.gpus <= s->c->node.gpus_per_node ? s->c->node.intra.bandwidth
                                                        : s->c->network.nic_bandwidth;
  return s->model.prompt * srv_kv_bytes_per_token(prefill->cost) / bw;
}

static plan_srv_status plan_srv_model_of(plan_srv_setup *s, const plan_srv_candidate *c,
                                         plan_srv_model *m)
{
  *m = s->model;
  m->npools = c->npools;
  const plan_srv_shape *shapes[PLAN_SRV_MAX_POOLS];
  for (int i = 0; i < c->npools; i++) {
    shapes[i] = plan_srv_shape_of(s, &c->pool[i]);
    if (!shapes[i]->cost)
      return PLAN_SRV_INVALID;
  }
  /* the candidate as `dlsim serve --set` loads it: keys the config refuses make it invalid */
  g_auto(GStrv) overlay = plan_srv_overlay(c);
  GError *e = NULL;
  cfg_workload *w = plan_srv_load(s, overlay, &e);
  g_clear_error(&e);
  cfg_workload_free(w);
  if (!w)
    return PLAN_SRV_INVALID;
  for (int i = 0; i < c->npools; i++) {
    if (!plan_srv_pool_fits(s, shapes[i], &c->pool[i], c->max_tokens, &m->pool[i]))
      return PLAN_SRV_TOO_BIG;
    m->pool[i].role = c->npools == 1 ? PLAN_SRV_BOTH : i == 0 ? PLAN_SRV_PREFILL : PLAN_SRV_DECODE;
  }
  if (c->npools > 1)
    m->transfer_s = plan_srv_transfer(s, shapes[0]);
  return PLAN_SRV_FITS;
}

bool plan_srv_estimate(plan_srv_setup *s, plan_srv_candidate *c, GError **err)
{
  plan_srv_model m;
  plan_srv_status st = plan_srv_model_of(s, c, &m);
  if (st != PLAN_SRV_FITS) {
    g_autofree char *d = plan_srv_describe(c);
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s", d,
                st == PLAN_SRV_INVALID ? "not a valid deployment of the model"
                                       : "does not fit in memory");
    return false;
  }
  c->est_rate = plan_srv_max_rate(&m, c->gpus, &c->est_ttft, &c->est_tpot);
  return true;
}

/* ---- the search ---------------------------------------------------------------------------- */

bool plan_srv_screen(plan_srv_setup *s, int shard, int nshards, plan_srv_result *out,
                     GError **err)
{
  (void)err;
  *out = (plan_srv_result){.kept = g_array_new(FALSE, FALSE, sizeof(plan_srv_candidate))};
  gint64 t0 = g_get_monotonic_time();
  GArray *all = g_array_new(FALSE, FALSE, sizeof(plan_srv_candidate));
  plan_srv_enumerate(&s->space, all);
  for (guint i = (guint)shard; i < all->len; i += (guint)nshards) {
    plan_srv_candidate *c = &g_array_index(all, plan_srv_candidate, i);
    plan_srv_model m;
    out->candidates++;
    plan_srv_status st = plan_srv_model_of(s, c, &m);
    out->valid += st != PLAN_SRV_INVALID;
    if (st != PLAN_SRV_FITS)
      continue;
    out->fits++;
    c->est_rate = plan_srv_max_rate(&m, c->gpus, &c->est_ttft, &c->est_tpot);
    if (c->est_rate > 0)
      g_array_append_val(out->kept, *c);
  }
  g_array_free(all, TRUE);
  out->elapsed_s = (double)(g_get_monotonic_time() - t0) / 1e6;
  return true;
}

void plan_srv_merge(plan_srv_result *into, const plan_srv_result *other)
{
  into->candidates += other->candidates;
  into->valid += other->valid;
  into->fits += other->fits;
  into->elapsed_s = MAX(into->elapsed_s, other->elapsed_s);
  g_array_append_vals(into->kept, other->kept->data, other->kept->len);
}

void plan_srv_result_clear(plan_srv_result *r)
{
  if (r->kept)
    g_array_free(r->kept, TRUE);
  r->kept = NULL;
}

/* ---- confirmation by simulation ------------------------------------------------------------ */

/* Three significant digits, rounded down, as the text a re-run's --set carries. */
static char *plan_srv_rate_text(double rate)
{
  int decimals = MAX(0, 2 - (int)floor(log10(rate)));
  double scale = pow(10, decimals);
  return g_strdup_printf("%.*f", decimals, floor(rate * scale) / scale);
}

/* Requests a confirmation simulates: a stream shorter than a few times what the deployment
 * holds at once (every replica's lanes full) ends before any queue can build, so that the
 * search would find "no growing queue" at any rate. */
static int plan_srv_count(const plan_srv_setup *s, const plan_srv_candidate *c)
{
  const plan_srv_pool *p = &c->pool[c->npools - 1];
  int batch = p->max_batch > 0 ? p->max_batch : s->w->serving.max_batch;
  return MAX(s->w->serving.requests.count, 5 * p->replicas * p->pp * batch);
}

/* The overlays of a confirmation: the candidate's, and its stream's length when longer. */
static void plan_srv_confirm_sets(const plan_srv_setup *s, const plan_srv_candidate *c,
                                  GPtrArray *a)
{
  g_auto(GStrv) overlay = plan_srv_overlay(c);
  for (int i = 0; overlay[i]; i++)
    g_ptr_array_add(a, g_strdup(overlay[i]));
  int count = plan_srv_count(s, c);
  if (count > s->w->serving.requests.count)
    g_ptr_array_add(a, g_strdup_printf("serving.requests.count=%d", count));
}

static char *plan_srv_rate_set(double rate)
{
  g_autofree char *t = plan_srv_rate_text(rate);
  return g_strdup_printf("serving.requests.rate=%s/s", t);
}

char **plan_srv_rerun_sets(const plan_srv_setup *s, const plan_srv_candidate *c)
{
  GPtrArray *a = g_ptr_array_new();
  for (guint i = 0; i + 1 < s->shown->len; i++)
    g_ptr_array_add(a, g_strdup(s->shown->pdata[i]));
  plan_srv_confirm_sets(s, c, a);
  if (c->rate > 0)
    g_ptr_array_add(a, plan_srv_rate_set(c->rate));
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}

/* Simulates at `rate` as given by its text: whether the SLA holds there. */
static bool plan_srv_check_at(const cfg_cluster *cl, const cfg_workload *w, double rate,
                              plan_srv_candidate *c, bool *meets, GError **err)
{
  g_autofree char *text = plan_srv_rate_text(rate);
  srv_options o = {.rate = g_ascii_strtod(text, NULL)};
  srv_result r;
  if (!srv_simulate(cl, w, &o, &r, err)) {
    srv_result_clear(&r);
    return false;
  }
  *meets = r.slo_attainment >= w->serving.slo.attainment && !r.saturated;
  if (*meets) {
    c->rate = o.rate;
    c->ttft_p90 = r.ttft.p90;
    c->tpot_p90 = r.tpot.p90;
    c->attainment = r.slo_attainment;
  }
  srv_result_clear(&r);
  return true;
}

bool plan_srv_confirm(plan_srv_setup *s, plan_srv_candidate *c, GError **err)
{
  GPtrArray *more = g_ptr_array_new_with_free_func(g_free);
  plan_srv_confirm_sets(s, c, more);
  if (c->est_rate > 0) /* the search starts at the estimate */
    g_ptr_array_add(more, plan_srv_rate_set(c->est_rate));
  g_ptr_array_add(more, NULL);
  g_auto(GStrv) sets = plan_srv_join(s->base, (char **)more->pdata);
  g_ptr_array_free(more, TRUE);
  cfg_cluster *cl = NULL;
  cfg_workload *w = NULL;
  srv_max_rate m = {0};
  c->rate = 0;
  bool ok = cfg_load_with(s->cluster, s->workload, sets, &cl, &w, err) &&
            srv_find_max_rate(cl, w, &m, err);
  /* rounded down, the rate may fall where attainment dips: step down until it holds */
  bool meets = false;
  for (double r = m.max_rate; ok && r > 0 && !meets && r > 0.9 * m.max_rate; r *= 0.99)
    ok = plan_srv_check_at(cl, w, r, c, &meets, err);
  srv_max_rate_clear(&m);
  cfg_workload_free(w);
  cfg_cluster_free(cl);
  return ok;
}

/* ---- ranking ------------------------------------------------------------------------------- */

/* More per GPU first, then more in all; 0 on a tie. */
static int plan_srv_more_first(double a, int gpus_a, double b, int gpus_b)
{
  double ga = a / gpus_a, gb = b / gpus_b;
  if (ga != gb)
    return ga > gb ? -1 : 1;
  return a != b ? (a > b ? -1 : 1) : 0;
}

static int plan_srv_by_estimate(gconstpointer pa, gconstpointer pb)
{
  const plan_srv_candidate *a = pa, *b = pb;
  int by = plan_srv_more_first(a->est_rate, a->gpus, b->est_rate, b->gpus);
  return by ? by : (a->index > b->index) - (a->index < b->index);
}

static int plan_srv_by_rate(gconstpointer pa, gconstpointer pb)
{
  const plan_srv_candidate *a = pa, *b = pb;
  int by = plan_srv_more_first(a->rate, a->gpus, b->rate, b->gpus);
  return by ? by : plan_srv_by_estimate(pa, pb);
}

static bool plan_srv_same_shape(const plan_srv_candidate *a, const plan_srv_candidate *b)
{
  if (a->npools != b->npools)
    return false;
  for (int i = 0; i < a->npools; i++)
    if (a->pool[i].tp != b->pool[i].tp || a->pool[i].pp != b->pool[i].pp ||
        a->pool[i].ep != b->pool[i].ep)
      return false;
  return true;
}

/* What becomes of `x` against a row led by `lead` (the better estimate per GPU) and showing
 * `shown` (the member that serves the most): merged into
 * it when of the same shape and within 1 % per GPU (replica counts and limits the closed form
 * does not feel); dropped when of the same shape, worse per GPU and serving no more in all (a
 * shape shows again only where it trades goodput per GPU for more requests). */
typedef enum { PLAN_SRV_OWN_ROW, PLAN_SRV_MERGED, PLAN_SRV_DOMINATED } plan_srv_fate;

static plan_srv_fate plan_srv_fate_of(const plan_srv_candidate *lead,
                                      const plan_srv_candidate *shown, const plan_srv_candidate *x)
{
  bool close = x->est_rate / x->gpus >= 0.99 * (lead->est_rate / lead->gpus);
  if (plan_srv_same_shape(lead, x) && close)
    return PLAN_SRV_MERGED;
  return plan_srv_same_shape(lead, x) && x->est_rate <= shown->est_rate ? PLAN_SRV_DOMINATED
                                                                        : PLAN_SRV_OWN_ROW;
}

/* One row per group, showing the member that serves the most requests (the budget used
 * rather than left idle). */
static GArray *plan_srv_collapse(const GArray *sorted, int rows)
{
  GArray *leads = g_array_new(FALSE, FALSE, sizeof(plan_srv_candidate));
  GArray *shown = g_array_new(FALSE, FALSE, sizeof(plan_srv_candidate));
  for (guint i = 0; i < sorted->len; i++) {
    const plan_srv_candidate *x = &g_array_index(sorted, plan_srv_candidate, i);
    plan_srv_fate fate = PLAN_SRV_OWN_ROW;
    guint j = 0;
    for (; j < leads->len && fate == PLAN_SRV_OWN_ROW; j++)
      fate = plan_srv_fate_of(&g_array_index(leads, plan_srv_candidate, j),
                              &g_array_index(shown, plan_srv_candidate, j), x);
    if (fate == PLAN_SRV_OWN_ROW && (int)leads->len < rows) {
      g_array_append_val(leads, *x);
      g_array_append_val(shown, *x);
    } else if (fate == PLAN_SRV_MERGED) {
      plan_srv_candidate *y = &g_array_index(shown, plan_srv_candidate, j - 1);
      int same = y->same + 1;
      if (x->est_rate > y->est_rate)
        *y = *x;
      y->same = same;
    }
  }
  g_array_free(leads, TRUE);
  return shown;
}

/* No candidate fits: say how far the budget is from one copy of the model. */
static bool plan_srv_too_small(plan_srv_setup *s, GError **err)
{
  plan_srv_pool one = {1, 1, 1, 1, 0};
  const plan_srv_shape *sh = plan_srv_shape_of(s, &one);
  double weights = sh->cost ? srv_weight_bytes(sh->cost) : 0;
  double usable = s->c->gpu.memory * s->w->serving.gpu_memory_utilization;
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "--gpus %d: no deployment of %s fits: its weights alone take %.1f GiB, and one "
              "GPU gives the engine %.1f GiB (gpu.memory x serving.gpu_memory_utilization); "
              "give --gpus at least %d",
              s->space.gpus, s->w->model.name ? s->w->model.name : "the model",
              weights / 1073741824.0, usable / 1073741824.0,
              MAX(s->space.gpus + 1, (int)ceil(weights / usable)));
  return false;
}

bool plan_srv_rank(plan_srv_setup *s, plan_srv_result *r, int rows, int top_k, GError **err)
{
  if (r->fits == 0)
    return plan_srv_too_small(s, err);
  g_array_sort(r->kept, plan_srv_by_estimate);
  GArray *shown = plan_srv_collapse(r->kept, MAX(rows, top_k));
  g_array_free(r->kept, TRUE);
  r->kept = shown;
  int k = MIN(top_k, (int)shown->len);
  for (int i = 0; i < k; i++)
    if (!plan_srv_confirm(s, &g_array_index(shown, plan_srv_candidate, i), err))
      return false;
  if (k > 0) {
    /* the confirmed ones first, by their figure; the rest by the estimate */
    GArray *head = g_array_sized_new(FALSE, FALSE, sizeof(plan_srv_candidate), (guint)k);
    g_array_append_vals(head, shown->data, (guint)k);
    g_array_sort(head, plan_srv_by_rate);
    memcpy(shown->data, head->data, (size_t)k * sizeof(plan_srv_candidate));
    g_array_free(head, TRUE);
  }
  return true;
}
