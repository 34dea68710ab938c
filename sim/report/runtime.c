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

/* A line per distinct collective, at most `limit` of them (the first ones of the step). */
static void rep_runtime_lines(FILE *out, const sim_result *r, coll_planner *pl, GArray *seen,
                              guint limit)
{
  int rank = r->eng.critical_rank;
  for (guint i = 0; i < MIN(seen->len, limit); i++) {
    const rep_coll_key *c = &g_array_index(seen, rep_coll_key, i);
    const prog_group *g = prog_group_of(r->program, c->family, rank);
    if (!g)
      continue;
    const coll_schedule *s = coll_planner_get(pl, c->coll, g->ranks, g->n, c->family, c->bytes,
                                              NULL, NULL);
    if (!s || !s->plan)
      continue;
    g_autofree char *size = units_format_bytes(c->bytes);
    g_autofree char *t = units_format_seconds(s->time);
    g_autofree char *why = coll_runtime_why(r->runtime, c->coll, c->bytes, s->plan->algo);
    fprintf(out, "    %-2s %-13s %10s x %-4d %-12s %10s  (%s)\n", prog_dim_name(c->dim),
            prog_coll_name(c->coll), size, g->n, coll_algo_name(s->plan->algo), t, why);
  }
  if (seen->len > limit)
    fprintf(out, "    ... and %u more\n", seen->len - limit);
}

void rep_runtime_text(FILE *out, const sim_result *r)
{
  const cfg_collectives *k = &r->workload->collectives;
  if (!r->runtime || !cfg_doc_has(r->workload->doc, "collectives.runtime"))
    return;
  bool cpu = coll_runtime_cpu(r->runtime);
  fprintf(out, "  collectives on %s (%s progress%s, %s)\n", coll_runtime_name(r->runtime),
          cpu ? "cpu" : "kernel", cpu ? ": no SMs held" : "",
          k->transport == CFG_TRANSPORT_HOST_STAGED ? "through host memory" : "GPU-direct");
  GArray *seen = g_array_new(FALSE, FALSE, sizeof(rep_coll_key));
  rep_collect(r->program, r->program->class_of[r->eng.critical_rank], seen, 0);
  coll_planner *pl = coll_planner_new(r->hw, r->options.algo, r->options.proto, true);
  coll_planner_set_runtime(pl, r->runtime);
  rep_runtime_lines(out, r, pl, seen, 6);
  coll_planner_free(pl);
  g_array_free(seen, TRUE);
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
