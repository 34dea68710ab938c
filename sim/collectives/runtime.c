/* Communication runtimes: the size rules that pick an algorithm per op, and what a runtime adds
 * to the fabric's costs (see collectives.h). */
#include "collectives/collectives_internal.h"

#include <math.h>
#include <string.h>

static void coll_rules_free(GArray *rules)
{
  if (!rules)
    return;
  for (guint i = 0; i < rules->len; i++)
    g_free(g_array_index(rules, coll_rule, i).text);
  g_array_free(rules, TRUE);
}

static bool coll_rule_fail(GError **err, const cfg_doc *doc, const char *key, const char *fmt,
                           ...) G_GNUC_PRINTF(4, 5);
static bool coll_rule_fail(GError **err, const cfg_doc *doc, const char *key, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_autofree char *where = doc ? cfg_doc_where(doc, key) : g_strdup(key);
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s: %s", where, key, msg);
  return false;
}

/* An algorithm name of a rule, with a "did you mean" when it is none. */
static bool coll_rule_algo(const char *name, coll_algo *out, const cfg_doc *doc, const char *key,
                           GError **err)
{
  const char *names[COLL_NALGOS];
  for (int a = 0; a < COLL_NALGOS; a++) {
    names[a] = coll_algo_name((coll_algo)a);
    if (a > 0 && strcmp(name, names[a]) == 0) {
      *out = (coll_algo)a;
      return true;
    }
  }
  const char *near = cfg_closest(name, names + 1, COLL_NALGOS - 1);
  return coll_rule_fail(err, doc, key, "unknown algorithm '%s'%s%s%s", name,
                        near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
}

/* "ALGO < SIZE, ALGO < SIZE, ALGO": each algorithm below its size, the last one above. */
static bool coll_rules_parse(const char *text, const cfg_doc *doc, const char *key, GArray **out,
                             GError **err)
{
  *out = NULL;
  if (!text || strcmp(text, "auto") == 0)
    return true;
  GArray *rules = g_array_new(FALSE, TRUE, sizeof(coll_rule));
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  bool ok = true;
  for (int i = 0; parts[i] && ok; i++) {
    g_auto(GStrv) lt = g_strsplit(parts[i], "<", 2);
    coll_rule r = {.below = INFINITY};
    g_autofree char *why = NULL;
    ok = coll_rule_algo(g_strstrip(lt[0]), &r.algo, doc, key, err);
    if (ok && lt[1] && !units_parse(g_strstrip(lt[1]), UNITS_BYTES, &r.below, &why))
      ok = coll_rule_fail(err, doc, key, "'%s': %s", parts[i], why);
    if (ok && !lt[1] && parts[i + 1])
      ok = coll_rule_fail(err, doc, key, "'%s' has no '< SIZE' but is not the last rule",
                          g_strstrip(parts[i]));
    if (ok) {
      r.text = g_strdup(g_strstrip(parts[i]));
      g_array_append_val(rules, r);
    }
  }
  if (!ok) {
    coll_rules_free(rules);
    return false;
  }
  *out = rules;
  return true;
}

coll_runtime *coll_runtime_new(const cfg_collectives *c, const cfg_doc *doc, GError **err)
{
  coll_runtime *rt = g_new0(coll_runtime, 1);
  rt->name = g_strdup(c->runtime ? c->runtime : "nccl");
  rt->cpu = c->progress == CFG_PROGRESS_CPU && c->ucc_tl != CFG_UCC_TL_NCCL;
  rt->host_staged = c->transport == CFG_TRANSPORT_HOST_STAGED;
  rt->call_latency = isnan(c->call_latency) ? 0 : c->call_latency;
  rt->step_latency = c->step_latency;
  rt->eager_limit = c->eager_limit;
  rt->rendezvous_latency = c->rendezvous_latency;
  rt->leaders = c->leaders_per_node > 0 ? c->leaders_per_node : 1;
  rt->cycle_wait = c->cycle_time > 0 ? c->cycle_time / 2 : 0;
  rt->reduce_pass = c->reduce_pass;
  rt->nccl_a2a = c->a2a == CFG_A2A_NCCL;
  const struct {
    prog_coll op;
    const char *key, *text;
  } keys[] = {{PROG_COLL_ALLREDUCE, "collectives.allreduce", c->allreduce},
              {PROG_COLL_ALLGATHER, "collectives.allgather", c->allgather},
              {PROG_COLL_REDUCESCATTER, "collectives.reducescatter", c->reducescatter},
              {PROG_COLL_ALLTOALL, "collectives.alltoall", c->alltoall}};
  for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
    rt->keys[keys[i].op] = keys[i].key;
    if (!coll_rules_parse(keys[i].text, doc, keys[i].key, &rt->rules[keys[i].op], err)) {
      coll_runtime_free(rt);
      return NULL;
    }
  }
  return rt;
}

coll_runtime *coll_runtime_with_choices(const cfg_collectives *c, const cfg_doc *doc,
                                        coll_algo *algo, int *proto, GError **err)
{
  coll_runtime *rt = coll_runtime_new(c, doc, err);
  if (rt && !(coll_algo_parse(c->algorithm, algo, err) && coll_proto_parse(c->protocol, proto, err))) {
    coll_runtime_free(rt);
    return NULL;
  }
  return rt;
}

void coll_runtime_free(coll_runtime *rt)
{
  if (!rt)
    return;
  for (int op = 0; op < PROG_NCOLLS; op++)
    coll_rules_free(rt->rules[op]);
  g_free(rt->name);
  g_free(rt);
}

const char *coll_runtime_name(const coll_runtime *rt)
{
  return rt ? rt->name : "nccl";
}

bool coll_runtime_cpu(const coll_runtime *rt)
{
  return rt && rt->cpu;
}

coll_algo coll_runtime_pick(const coll_runtime *rt, const hw_cluster *hw, prog_coll op,
                            const int *ranks, int n, double bytes, int *rule)
{
  *rule = -1;
  const GArray *rules = rt && rt->cpu ? rt->rules[op] : NULL;
  if (!rules)
    return COLL_ALGO_AUTO;
  /* the first rule whose size bound holds; one that cannot run on this group (rd on 6 ranks,
   * multi-leader on uneven nodes) hands over to the next, as MPI's tuning tables fall back;
   * sizes above a bounded last rule go to the tuner */
  for (guint i = 0; i < rules->len; i++) {
    const coll_rule *r = &g_array_index(rules, coll_rule, i);
    if (bytes < r->below && coll_algo_applies(hw, op, ranks, n, r->algo)) {
      *rule = (int)i;
      return r->algo;
    }
  }
  return COLL_ALGO_AUTO;
}

double coll_schedule_streamed(const coll_schedule *s, const coll_runtime *rt, int window)
{
  if (window <= 1 || !s->plan)
    return s->time;
  double latency = s->base;
  for (int i = 0; i < s->plan->nphases; i++)
    latency += s->pre[i] + s->post[i];
  double wire = MAX(s->time - latency, 0.0);
  double posting = rt && rt->cpu ? rt->step_latency : 0;
  return MAX(wire, posting) + latency / window;
}

char *coll_runtime_why(const coll_runtime *rt, prog_coll op, double bytes, coll_algo algo)
{
  const GArray *rules = rt && rt->cpu ? rt->rules[op] : NULL;
  if (rules)
    for (guint i = 0; i < rules->len; i++) {
      const coll_rule *r = &g_array_index(rules, coll_rule, i);
      if (r->algo == algo && bytes < r->below)
        return g_strdup_printf("%s: '%s' of %s", coll_runtime_name(rt), r->text, rt->keys[op]);
    }
  if (rt && rt->cpu)
    return g_strdup_printf("%s: the fastest by its costs (no rule for %s)", coll_runtime_name(rt),
                           prog_coll_name(op));
  return g_strdup_printf("%s: NCCL's tuner, the fastest", coll_runtime_name(rt));
}
