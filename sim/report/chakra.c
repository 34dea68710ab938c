/* dlsim replay --chakra's report: the simulated time of a Chakra trace and where it went. */
#include "report/report.h"
#include "units/units.h"

cJSON *rep_chakra_json(const sim_chakra *r)
{
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "trace", r->trace->name);
  cJSON_AddNumberToObject(j, "ranks", r->trace->nranks);
  cJSON_AddStringToObject(j, "cluster", r->cfg->name);
  cJSON_AddStringToObject(j, "engine", eng_kind_name(r->engine));
  cJSON_AddNumberToObject(j, "compute_nodes", r->counts.compute);
  cJSON_AddNumberToObject(j, "collective_nodes", r->counts.collectives);
  cJSON_AddNumberToObject(j, "p2p_nodes", r->counts.p2p);
  cJSON_AddNumberToObject(j, "other_nodes", r->counts.other);
  cJSON_AddNumberToObject(j, "recosted_nodes", r->counts.recosted);
  cJSON_AddNumberToObject(j, "cpu_nodes", r->counts.cpu);
  cJSON_AddNumberToObject(j, "grouped_collectives", r->counts.grouped);
  cJSON_AddNumberToObject(j, "absent_deps", r->counts.absent_deps);
  cJSON_AddNumberToObject(j, "step_time_s", r->res.step_time);
  cJSON_AddNumberToObject(j, "critical_rank", r->res.critical_rank);
  cJSON *b = cJSON_AddObjectToObject(j, "breakdown_s");
  cJSON_AddNumberToObject(b, "compute", r->res.compute);
  cJSON_AddNumberToObject(b, "exposed_comm", r->res.exposed_comm);
  cJSON_AddNumberToObject(b, "other", r->res.other + r->res.bubble);
  return j;
}

static void rep_chakra_line(FILE *out, const char *what, double t, double total)
{
  g_autofree char *s = units_format_seconds(t);
  fprintf(out, "    %-14s %12s %6.1f %%\n", what, s, total > 0 ? 100 * t / total : 0);
}

void rep_chakra_text(FILE *out, const sim_chakra *r)
{
  const chk_counts *c = &r->counts;
  fprintf(out, "dlsim replay: chakra trace %s (%d rank%s) on %s, engine %s\n", r->trace->name,
          r->trace->nranks, r->trace->nranks == 1 ? "" : "s", r->cfg->name, eng_kind_name(r->engine));
  fprintf(out, "  nodes: %d compute (%d re-costed, %d on the host), %d collective, %d send/recv, %d other",
          c->compute, c->recosted, c->cpu, c->collectives, c->p2p, c->other);
  if (c->grouped)
    fprintf(out, "; %d collectives over their communicator group", c->grouped);
  if (c->absent_deps)
    fprintf(out, "; %d dependencies on nodes not in the trace ignored", c->absent_deps);
  g_autofree char *t = units_format_seconds(r->res.step_time);
  fprintf(out, "\n  simulated time       %s\n", t);
  fprintf(out, "  breakdown (rank %d, the last to finish)\n", r->res.critical_rank);
  double total = r->res.step_time;
  rep_chakra_line(out, "compute", r->res.compute, total);
  rep_chakra_line(out, "exposed comm", r->res.exposed_comm, total);
  rep_chakra_line(out, "other", r->res.other + r->res.bubble, total);
}
