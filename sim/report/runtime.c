/* What the communication runtime made of a run's collectives: for each distinct collective of
 * the critical rank (dimension, op, group, size), the algorithm it ran, its time alone and
 * why that algorithm (a size rule of the runtime's profile, or NCCL's tuner). */
#include "report/report.h"
#include "units/units.h"

#include <string.h>

typedef struct {
  prog_dim dim;
  prog_coll coll;
  int family;
  double bytes;
} rep_coll_key;

/* The distinct collectives of class `cls` and the templates its macro ops run. */
static void rep_collect(const prog_program *p, int cls, GArray *seen, int depth)
{
  const prog_class *k = prog_class_at(p, cls);
  for (guint i = 0; i < k->ops->len; i++) {
    const prog_op *op = &g_array_index(k->ops, prog_op, i);
    if (op->kind == PROG_COMPUTE && op->tmpl >= 0 && depth < 4)
      rep_collect(p, op->tmpl, seen, depth + 1);
    if (op->kind != PROG_COMM || op->comm_bytes <= 0)
      continue;
    bool dup = false;
    for (guint j = 0; j < seen->len && !dup; j++) {
      const rep_coll_key *s = &g_array_index(seen, rep_coll_key, j);
      dup = s->dim == op->dim && s->coll == op->coll && s->bytes == op->comm_bytes;
    }
    if (!dup) {
      rep_coll_key key = {op->dim, op->coll, op->family, op->comm_bytes};
      g_array_append_val(seen, key);
    }
  }
}

/* What the runtime ran for one distinct collective. */
typedef struct {
  rep_coll_key key;
  int n;
  coll_algo algo;
  double time;
  char *why;
} rep_coll_choice;

static void rep_choice_clear(gpointer p)
{
  g_free(((rep_coll_choice *)p)->why);
}

/* The runtime's choice for each distinct collective of the critical rank, in step order; NULL
 * when the workload names no runtime (the default NCCL is not worth a section). */
static GArray *rep_runtime_choices(const sim_result *r)
{
  if (!r->runtime || !cfg_doc_has(r->workload->doc, "collectives.runtime"))
    return NULL;
  int rank = r->eng.critical_rank;
  GArray *seen = g_array_new(FALSE, FALSE, sizeof(rep_coll_key));
  rep_collect(r->program, r->program->class_of[rank], seen, 0);
  coll_planner *pl = coll_planner_new(r->hw, r->options.algo, r->options.proto, true);
  coll_planner_set_runtime(pl, r->runtime);
  GArray *out = g_array_new(FALSE, FALSE, sizeof(rep_coll_choice));
  g_array_set_clear_func(out, rep_choice_clear);
  for (guint i = 0; i < seen->len; i++) {
    const rep_coll_key *c = &g_array_index(seen, rep_coll_key, i);
    const prog_group *g = prog_group_of(r->program, c->family, rank);
    const coll_schedule *s = g ? coll_planner_get(pl, c->coll, g->ranks, g->n, c->family,
                                                  c->bytes, NULL, NULL)
                               : NULL;
    if (!s || !s->plan)
      continue;
    rep_coll_choice ch = {*c, g->n, s->plan->algo, s->time,
                          coll_runtime_why(r->runtime, c->coll, c->bytes, s->plan->algo)};
    g_array_append_val(out, ch);
  }
  coll_planner_free(pl);
  g_array_free(seen, TRUE);
  return out;
}

/* At most this many lines: the first collectives of the step. */
#define REP_RUNTIME_LINES 6

void rep_runtime_text(FILE *out, const sim_result *r)
{
  GArray *choices = rep_runtime_choices(r);
  if (!choices)
    return;
  bool cpu = coll_runtime_cpu(r->runtime);
  fprintf(out, "  collectives on %s (%s progress%s, %s)\n", coll_runtime_name(r->runtime),
          cpu ? "cpu" : "kernel", cpu ? ": no SMs held" : "",
          r->workload->collectives.transport == CFG_TRANSPORT_HOST_STAGED ? "through host memory"
                                                                           : "GPU-direct");
  for (guint i = 0; i < MIN(choices->len, REP_RUNTIME_LINES); i++) {
    const rep_coll_choice *c = &g_array_index(choices, rep_coll_choice, i);
    g_autofree char *size = units_format_bytes(c->key.bytes);
    g_autofree char *t = units_format_seconds(c->time);
    fprintf(out, "    %-2s %-13s %10s x %-4d %-12s %10s  (%s)\n", prog_dim_name(c->key.dim),
            prog_coll_name(c->key.coll), size, c->n, coll_algo_name(c->algo), t, c->why);
  }
  if (choices->len > REP_RUNTIME_LINES)
    fprintf(out, "    ... and %u more\n", choices->len - REP_RUNTIME_LINES);
  g_array_free(choices, TRUE);
}

cJSON *rep_runtime_json(const sim_result *r)
{
  GArray *choices = rep_runtime_choices(r);
  if (!choices)
    return NULL;
  cJSON *a = cJSON_CreateArray();
  for (guint i = 0; i < choices->len; i++) {
    const rep_coll_choice *c = &g_array_index(choices, rep_coll_choice, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dim", prog_dim_name(c->key.dim));
    cJSON_AddStringToObject(o, "op", prog_coll_name(c->key.coll));
    cJSON_AddNumberToObject(o, "bytes", c->key.bytes);
    cJSON_AddNumberToObject(o, "ranks", c->n);
    cJSON_AddStringToObject(o, "algorithm", coll_algo_name(c->algo));
    cJSON_AddNumberToObject(o, "time_alone_s", c->time);
    cJSON_AddStringToObject(o, "why", c->why);
    cJSON_AddItemToArray(a, o);
  }
  g_array_free(choices, TRUE);
  return a;
}

void rep_mps_text(FILE *out, const sim_result *r)
{
  int k = r->mps_cluster ? r->workload->parallel.processes_per_gpu : 1;
  if (k <= 1)
    return;
  g_autofree char *each = units_format_bytes(r->peak_bytes);
  g_autofree char *all = units_format_bytes(k * r->peak_bytes);
  g_autofree char *gpu = units_format_bytes(k * r->capacity_bytes);
  fprintf(out, "  MPS: %d processes on each GPU, %d ranks in all, each with 1/%d of its GPU; the "
               "figures below are per process (memory: %d x %s = %s of the GPU's %s)\n",
          k, r->gpus, k, k, each, all, gpu);
}
