/* The report of `dlsim run`: step time, throughput, MFU/HFU, breakdown, communication, memory
 * (the figures themselves are sim_run's). */
#include "report/report.h"
#include "units/units.h"
#include "workloads/workloads.h"

#include <math.h>

static void rep_line(FILE *out, const char *label, double seconds, double step)
{
  g_autofree char *t = units_format_seconds(seconds);
  fprintf(out, "    %-16s %12s  %5.1f %%\n", label, t, step > 0 ? 100 * seconds / step : 0);
}

/* The highest tier the critical rank's groups of dimension `d` reach (hw_route's `tier`). */
static int rep_dim_tier(const sim_result *r, prog_dim d)
{
  const prog_program *p = r->program;
  int rank = r->eng.critical_rank, top = -1;
  for (guint f = 0; f < p->families->len; f++) {
    const prog_family *fam = g_ptr_array_index(p->families, f);
    if (fam->dim != d || fam->group_of[rank] < 0)
      continue;
    const prog_group *g = g_ptr_array_index(p->groups, fam->group_of[rank]);
    top = MAX(top, hw_group_tier(r->hw, g->ranks, g->n));
  }
  return top;
}

static const char *rep_tier_name(const cfg_cluster *c, int tier)
{
  return tier < 0 ? "gpu" : tier == 0 ? "node" : c->network.tiers[tier - 1].name;
}

/* The lowest network tier whose uplinks are oversubscribed, or -1. */
static int rep_oversubscribed_tier(const cfg_cluster *c)
{
  for (int t = 0; t < c->network.ntiers; t++)
    if (c->network.tiers[t].oversubscription > 1)
      return t;
  return -1;
}

/* On an oversubscribed fabric, whether a dimension's traffic meets the oversubscription: the
 * step changes with it only if it does. */
static void rep_tier_suffix(FILE *out, const sim_result *r, prog_dim d)
{
  const cfg_network *net = &r->cluster->network;
  int o = rep_oversubscribed_tier(r->cluster);
  if (o < 0)
    return;
  int reach = rep_dim_tier(r, d) - 1; /* network tier index, -1 inside a node */
  if (reach >= o)
    fprintf(out, ", crosses the %g:1 %s", net->tiers[o].oversubscription, net->tiers[o].name);
  else if (reach < 0)
    fprintf(out, ", inside a node: below the %g:1 %s", net->tiers[o].oversubscription,
            net->tiers[o].name);
  else
    fprintf(out, ", up to the %s: below the %g:1 %s", net->tiers[reach].name,
            net->tiers[o].oversubscription, net->tiers[o].name);
}

/* Other tenants' traffic (network.background): what loads which links, and whether this
 * engine saw it. */
static void rep_background_text(FILE *out, const sim_result *r)
{
  const cfg_network *net = &r->cluster->network;
  for (int i = 0; i < net->nbackground; i++) {
    const cfg_background *b = &net->background[i];
    g_autofree char *rate = isnan(b->fraction) ? units_format_rate(b->bandwidth)
                                               : g_strdup_printf("%g %% of each link", 100 * b->fraction);
    g_autofree char *from = units_format_seconds(b->start);
    g_autofree char *d = b->duration > 0 ? units_format_seconds(b->duration) : NULL;
    g_autofree char *len = d ? g_strdup_printf("for %s", d) : g_strdup("to the end of the step");
    fprintf(out, "  background       %s (%s): up to %s from %s %s%s\n", b->links, b->direction,
            rate, from, len,
            r->options.kind == ENG_DES ? "" : "; ignored by the analytic engine (-e des shares the links)");
  }
}

/* The DES's busiest links: mean use over the step and the rate it means. */
static void rep_links_text(FILE *out, const sim_result *r)
{
  const GArray *loads = r->eng.link_loads;
  if (!loads || !loads->len || r->step_time <= 0)
    return;
  fprintf(out, "  busiest links (the flows the DES ran, mean over the step)\n");
  for (guint i = 0; i < MIN(loads->len, 3u); i++) {
    const eng_link_load *l = &g_array_index(loads, eng_link_load, i);
    char name[96];
    hw_link_describe(r->hw, l->link, l->down, name, sizeof name);
    g_autofree char *rate = units_format_rate(l->utilisation * hw_link_get(r->hw, l->link)->bandwidth);
    g_autofree char *bw = units_format_rate(hw_link_get(r->hw, l->link)->bandwidth);
    fprintf(out, "    %-28s %6.1f %%   (%s of %s)\n", name, 100 * l->utilisation, rate, bw);
  }
}

/* The dimensions of a bit set (1 << prog_dim), space-separated. */
static char *rep_dims_list(unsigned dims)
{
  GString *s = g_string_new(NULL);
  for (int d = 0; d < PROG_NDIMS; d++)
    if (dims & (1u << d))
      g_string_append_printf(s, "%s%s", s->len ? " " : "", prog_dim_name((prog_dim)d));
  return g_string_free(s, FALSE);
}

/* The dimensions of a bit set (1 << prog_dim) as a JSON array of their names. */
static cJSON *rep_dims_array(unsigned dims)
{
  cJSON *a = cJSON_CreateArray();
  for (int d = 0; d < PROG_NDIMS; d++)
    if (dims & (1u << d))
      cJSON_AddItemToArray(a, cJSON_CreateString(prog_dim_name((prog_dim)d)));
  return a;
}

/* Which collectives the DES ran as flows, and which in-layer ones kept the closed form because
 * nothing else crosses their links. */
static void rep_flows_text(FILE *out, const sim_result *r)
{
  if (r->options.kind != ENG_DES || !(r->eng.flow_dims | r->eng.closed_dims))
    return;
  g_autofree char *flows = rep_dims_list(r->eng.flow_dims);
  fprintf(out, "  as flows         %s", *flows ? flows : "none");
  unsigned quiet = r->eng.closed_dims & ~r->eng.capped_dims;
  g_autofree char *alone = rep_dims_list(quiet);
  if (*alone)
    fprintf(out, "   (in layers, closed form: %s, on links nothing else crosses)", alone);
  fputc('\n', out);
  if (r->eng.capped_dims) {
    g_autofree char *capped = rep_dims_list(r->eng.capped_dims);
    fprintf(out, "  closed form      %s in layers, although their links carry other traffic: as flows "
                 "they would be %.1f M transfers (collectives.layer_flows=always runs them)\n",
            capped, r->eng.capped_messages / 1e6);
  }
}

/* Why the DES simulated ranks that symmetric siblings could have stood for: "cp siblings
 * apart (a dp collective outside the layer passes joins them)". */
static char *rep_fold_note(const eng_fold_info *f)
{
  GString *s = g_string_new(NULL);
  for (int d = 0; d < PROG_NDIMS; d++)
    if (f->unfolded_dims >> d & 1)
      g_string_append_printf(s, "%s%s", s->len ? "+" : "", prog_dim_name((prog_dim)d));
  if (f->why == ENG_FOLD_JOINED && f->joined_dim >= 0)
    g_string_append_printf(s, " siblings apart: a %s collective outside the layer passes joins them",
                           prog_dim_name((prog_dim)f->joined_dim));
  else if ((f->why == ENG_FOLD_CROSSED || f->why == ENG_FOLD_UNEVEN) && f->joined_dim >= 0)
    g_string_append_printf(s, " siblings apart: a %s collective outside the layer passes joins them %s",
                           prog_dim_name((prog_dim)f->joined_dim),
                           f->why == ENG_FOLD_CROSSED
                               ? "over links that ranks not simulated also use"
                               : "and its members' transfers differ (amounts or links)");
  else
    g_string_append_printf(s, " siblings apart: %s", eng_fold_why_text(f->why));
  return g_string_free(s, FALSE);
}

/* A line when the DES could not fold ranks away, and why. */
static void rep_fold_text(FILE *out, const sim_result *r)
{
  const eng_fold_info *f = &r->eng.fold;
  if (r->options.kind != ENG_DES || !f->unfolded_dims)
    return;
  g_autofree char *note = rep_fold_note(f);
  fprintf(out, "  simulated        %d of %d GPUs (%s)\n", f->ranks, r->gpus, note);
}

/* What the slowest rank adds to each step (cluster.stragglers). */
static void rep_stragglers_text(FILE *out, const sim_result *r)
{
  const sim_stragglers *s = &r->stragglers;
  g_autofree char *cost = units_format_seconds(fabs(s->cost));
  g_autofree char *mean = units_format_seconds(s->step_time);
  g_autofree char *signed_cost = g_strdup_printf("%c%s", s->cost < 0 ? '-' : '+', cost);
  fprintf(out, "  stragglers       %12s   (mean step %s ", signed_cost, mean);
  if (s->steps > 0)
    fprintf(out, "over %d DES steps, seed %d; the slowest of %d GPUs: %.3fx expected)\n",
            s->steps, r->cluster->stragglers.seed, r->gpus, s->expected_max);
  else
    fprintf(out, "in closed form: compute x %.3f, the expected slowest of %d GPUs)\n",
            s->expected_max, r->gpus);
}

void rep_run_text(FILE *out, const sim_result *r)
{
  const eng_result *res = &r->eng;
  g_autofree char *step = units_format_seconds(r->step_time);
  int k = r->mps_cluster ? r->workload->parallel.processes_per_gpu : 1; /* MPS: the real GPUs */
  int gpus = r->gpus / k;
  fprintf(out, "dlsim run: %s on %s (%d GPU%s: %d node%s x %d%s), engine %s\n",
          r->program->meta.description, r->cluster->name, gpus, gpus == 1 ? "" : "s",
          r->cluster->node.count, r->cluster->node.count == 1 ? "" : "s",
          r->cluster->node.gpus_per_node / k,
          r->cluster->sized_to_job ? ", preset sized to the job" : "", eng_kind_name(r->options.kind));
  rep_notes_text(out, r->workload);
  rep_background_text(out, r);
  rep_mps_text(out, r);
  fprintf(out, "  step time        %12s\n", step);
  if (r->interval.set) {
    g_autofree char *lo = units_format_seconds(r->interval.step_time[0]);
    g_autofree char *hi = units_format_seconds(r->interval.step_time[1]);
    fprintf(out, "  80 %% interval    %12s - %s  (errors on %d real %s runs, validation/intervals.tsv)\n",
            lo, hi, r->interval.cases, r->interval.kind);
  }
  if (r->stragglers.on)
    rep_stragglers_text(out, r);
  fprintf(out, "  throughput       %12.1f samples/s", r->samples_per_s);
  if (r->tokens_per_s > 0)
    fprintf(out, ", %.0f tokens/s", r->tokens_per_s);
  fprintf(out, "\n");
  fprintf(out, "  MFU              %12.1f %%   (%.1f model TFLOP/s per GPU of %.1f peak %s)\n",
          100 * r->mfu, r->model_tflops_per_gpu, r->peak_flops / 1e12,
          cfg_dtype_name(r->program->meta.dtype));
  fprintf(out, "  HFU              %12.1f %%\n", 100 * r->hfu);
  fprintf(out, "  breakdown (rank %d, the last to finish)\n", res->critical_rank);
  rep_line(out, "compute", res->compute, r->step_time);
  rep_line(out, "exposed comm", res->exposed_comm, r->step_time);
  rep_line(out, "pipeline bubble", res->bubble, r->step_time);
  rep_line(out, "other", res->other, r->step_time);
  bool any = false;
  for (int d = 0; d < PROG_NDIMS; d++)
    any |= res->comm[d] > 0;
  if (any) {
    fprintf(out, "  communication in flight (overlapped or not)\n");
    for (int d = 0; d < PROG_NDIMS; d++)
      if (res->comm[d] > 0) {
        g_autofree char *a = units_format_seconds(res->comm[d]);
        g_autofree char *b = units_format_seconds(res->exposed[d]);
        fprintf(out, "    %-16s %12s  (exposed %s)", prog_dim_name((prog_dim)d), a, b);
        rep_tier_suffix(out, r, (prog_dim)d);
        fprintf(out, "\n");
      }
  }
  rep_links_text(out, r);
  rep_flows_text(out, r);
  rep_fold_text(out, r);
  rep_runtime_text(out, r);
  const prog_meta *meta = &r->program->meta;
  if (meta->a2a_bytes > 0) {
    g_autofree char *bytes = units_format_bytes(meta->a2a_bytes);
    fprintf(out, "  mixture of experts: all-to-alls move %s per GPU per step; busiest expert rank "
                 "%.3fx the mean", bytes, meta->moe_load);
    if (meta->moe_dropped > 0)
      fprintf(out, ", %.1f %% of token copies dropped", 100 * meta->moe_dropped);
    fprintf(out, "\n");
  }
  g_autofree char *peak = units_format_bytes(r->peak_bytes);
  g_autofree char *cap = units_format_bytes(r->capacity_bytes);
  fprintf(out, "  memory per GPU   %12s of %s: %s\n", peak, cap,
          r->fits ? "fits" : "OUT OF MEMORY");
  {
    const mem_stage *m = mem_worst(&r->memory);
    g_autofree char *ms = units_format_bytes(m->model_states);
    g_autofree char *ac = units_format_bytes(m->activations);
    g_autofree char *ot = units_format_bytes(m->other);
    fprintf(out, "    model states   %12s   activations %s   other %s\n", ms, ac, ot);
  }
}

static cJSON *rep_dims_json(const double *v)
{
  cJSON *o = cJSON_CreateObject();
  for (int d = 0; d < PROG_NDIMS; d++)
    cJSON_AddNumberToObject(o, prog_dim_name((prog_dim)d), v[d]);
  return o;
}

static void rep_pair(cJSON *o, const char *key, const double *v)
{
  cJSON_AddItemToObject(o, key, cJSON_CreateDoubleArray(v, 2));
}

static cJSON *rep_interval_json(const sim_interval *i)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "level", 0.8);
  cJSON_AddStringToObject(o, "kind", i->kind);
  cJSON_AddNumberToObject(o, "cases", i->cases);
  cJSON_AddNumberToObject(o, "cv_coverage", i->cv_coverage);
  rep_pair(o, "step_time_s", i->step_time);
  rep_pair(o, "tokens_per_s", i->tokens_per_s);
  rep_pair(o, "mfu", i->mfu);
  return o;
}

void rep_notes_text(FILE *out, const cfg_workload *w)
{
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
  wl_notes(w, notes);
  for (guint i = 0; i < notes->len; i++)
    fprintf(out, "  note: %s\n", (const char *)g_ptr_array_index(notes, i));
}

cJSON *rep_notes_json(const cfg_workload *w)
{
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
  wl_notes(w, notes);
  cJSON *a = cJSON_CreateArray();
  for (guint i = 0; i < notes->len; i++)
    cJSON_AddItemToArray(a, cJSON_CreateString(g_ptr_array_index(notes, i)));
  return a;
}

cJSON *rep_run_json(const sim_result *r)
{
  const eng_result *res = &r->eng;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "step_time_s", r->step_time);
  if (r->stragglers.on) {
    cJSON_AddNumberToObject(j, "straggler_s", r->stragglers.cost);
    cJSON *st = cJSON_AddObjectToObject(j, "stragglers");
    cJSON_AddNumberToObject(st, "step_time_s", r->stragglers.step_time);
    cJSON_AddNumberToObject(st, "steps", r->stragglers.steps);
    cJSON_AddNumberToObject(st, "slow_gpus", r->stragglers.slow);
    cJSON_AddNumberToObject(st, "expected_slowest", r->stragglers.expected_max);
  }
  if (r->interval.set)
    cJSON_AddItemToObject(j, "intervals", rep_interval_json(&r->interval));
  cJSON_AddNumberToObject(j, "mfu", r->mfu);
  cJSON_AddNumberToObject(j, "hfu", r->hfu);
  cJSON_AddNumberToObject(j, "model_tflops_per_gpu", r->model_tflops_per_gpu);
  cJSON_AddNumberToObject(j, "samples_per_s", r->samples_per_s);
  cJSON_AddNumberToObject(j, "tokens_per_s", r->tokens_per_s);
  cJSON *b = cJSON_AddObjectToObject(j, "breakdown_s");
  cJSON_AddNumberToObject(b, "compute", res->compute);
  cJSON_AddNumberToObject(b, "exposed_comm", res->exposed_comm);
  cJSON_AddNumberToObject(b, "bubble", res->bubble);
  cJSON_AddNumberToObject(b, "other", res->other);
  cJSON_AddItemToObject(j, "comm_s", rep_dims_json(res->comm));
  cJSON_AddItemToObject(j, "exposed_comm_s", rep_dims_json(res->exposed));
  cJSON *tiers = cJSON_AddObjectToObject(j, "comm_tier");
  for (int d = 0; d < PROG_NDIMS; d++)
    if (res->comm[d] > 0)
      cJSON_AddStringToObject(tiers, prog_dim_name((prog_dim)d),
                              rep_tier_name(r->cluster, rep_dim_tier(r, (prog_dim)d)));
  cJSON_AddItemToObject(j, "notes", rep_notes_json(r->workload));
  if (r->program->meta.a2a_bytes > 0) {
    cJSON *moe = cJSON_AddObjectToObject(j, "moe");
    cJSON_AddNumberToObject(moe, "a2a_bytes_per_gpu", r->program->meta.a2a_bytes);
    cJSON_AddNumberToObject(moe, "exposed_a2a_s", res->exposed[PROG_DIM_EP]);
    cJSON_AddNumberToObject(moe, "load_factor", r->program->meta.moe_load);
    cJSON_AddNumberToObject(moe, "dropped_fraction", r->program->meta.moe_dropped);
  }
  for (guint i = 0; res->link_loads && i < res->link_loads->len; i++) {
    const eng_link_load *l = &g_array_index(res->link_loads, eng_link_load, i);
    cJSON *arr = cJSON_GetObjectItem(j, "busiest_links");
    if (!arr)
      arr = cJSON_AddArrayToObject(j, "busiest_links");
    char name[96];
    hw_link_describe(r->hw, l->link, l->down, name, sizeof name);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "link", name);
    cJSON_AddNumberToObject(o, "utilisation", l->utilisation);
    cJSON_AddNumberToObject(o, "bytes", l->bytes);
    cJSON_AddItemToArray(arr, o);
  }
  cJSON *m = cJSON_AddObjectToObject(j, "memory");
  cJSON_AddNumberToObject(m, "peak_bytes", r->peak_bytes);
  cJSON_AddNumberToObject(m, "capacity_bytes", r->capacity_bytes);
  cJSON_AddBoolToObject(m, "fits", r->fits);
  cJSON_AddStringToObject(j, "engine", eng_kind_name(r->options.kind));
  cJSON_AddStringToObject(j, "framework", r->workload->training.framework ? r->workload->training.framework : "none");
  cJSON_AddStringToObject(j, "runtime", coll_runtime_name(r->runtime));
  cJSON *colls = rep_runtime_json(r);
  if (colls)
    cJSON_AddItemToObject(j, "collectives", colls);
  cJSON_AddNumberToObject(j, "gpus", r->gpus);
  cJSON_AddNumberToObject(j, "critical_rank", res->critical_rank);
  cJSON *s = cJSON_AddObjectToObject(j, "simulator");
  cJSON_AddNumberToObject(s, "wall_s", res->wall_time);
  cJSON_AddNumberToObject(s, "messages", (double)res->messages);
  if (r->options.kind == ENG_DES) {
    cJSON_AddItemToObject(s, "flows", rep_dims_array(res->flow_dims));
    cJSON_AddItemToObject(s, "closed_form", rep_dims_array(res->closed_dims));
    cJSON_AddItemToObject(s, "closed_form_over_budget", rep_dims_array(res->capped_dims));
    cJSON_AddNumberToObject(s, "simulated_gpus", res->fold.ranks);
  }
  if (r->options.kind == ENG_DES && res->fold.unfolded_dims) {
    g_autofree char *note = rep_fold_note(&res->fold);
    cJSON_AddStringToObject(s, "not_folded", note);
  }
  return j;
}

void rep_json_print(FILE *out, cJSON *json)
{
  char *text = cJSON_Print(json);
  fprintf(out, "%s\n", text);
  cJSON_free(text);
}
