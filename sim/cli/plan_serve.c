/* dlsim plan -c CLUSTER -w SERVING --gpus N [--ttft S] [--tpot S] [--top K] [--json | --csv]
 * Which deployment serves the workload best on N GPUs: the planner's serving search
 * (planner/serve*.c) screened in closed form, shared over MPI ranks like the training plan,
 * its best confirmed by simulation on rank 0, printed with the engines' command lines. */
#include "cli/cli_internal.h"
#include "planner/planner.h"
#include "report/report.h"
#include "units/units.h"

#include <math.h>
#include <string.h>

/* ---- MPI: a rank's screening as bytes ------------------------------------------------------ */

typedef struct {
  long candidates, valid, fits;
  double elapsed_s;
  int nkept;
} plan_srv_share_head;

static GBytes *plan_srv_pack(const plan_srv_result *r)
{
  plan_srv_share_head h = {r->candidates, r->valid, r->fits, r->elapsed_s, (int)r->kept->len};
  GByteArray *b = g_byte_array_new();
  g_byte_array_append(b, (const guint8 *)&h, sizeof h);
  g_byte_array_append(b, (const guint8 *)r->kept->data,
                      r->kept->len * (guint)sizeof(plan_srv_candidate));
  return g_byte_array_free_to_bytes(b);
}

/* Every rank's candidates at rank 0, merged as one process would have screened them (the
 * estimates do not depend on the order: each is found on a fixed grid of rates). */
static void plan_srv_share(const cli_mpi *m, plan_srv_result *r)
{
  if (m->size == 1)
    return;
  GBytes *mine = plan_srv_pack(r);
  GPtrArray *all = cli_mpi_gather(m, mine);
  g_bytes_unref(mine);
  for (int i = 1; all && i < m->size; i++) {
    gsize n = 0;
    const char *p = g_bytes_get_data(all->pdata[i], &n);
    plan_srv_share_head h;
    memcpy(&h, p, sizeof h);
    plan_srv_result other = {.candidates = h.candidates, .valid = h.valid, .fits = h.fits,
                             .elapsed_s = h.elapsed_s,
                             .kept = g_array_new(FALSE, FALSE, sizeof(plan_srv_candidate))};
    g_array_append_vals(other.kept, p + sizeof h, (guint)h.nkept);
    plan_srv_merge(r, &other);
    plan_srv_result_clear(&other);
  }
  if (all)
    g_ptr_array_free(all, TRUE);
}

/* ---- output -------------------------------------------------------------------------------- */

static const char *plan_srv_model_name(const plan_srv_setup *s)
{
  const char *name = plan_srv_setup_workload(s)->model.name;
  return name ? name : "MODEL";
}

static char *plan_srv_rerun_command(const cli_plan_serve_args *a, const plan_srv_setup *s,
                                    const plan_srv_candidate *c)
{
  g_auto(GStrv) sets = plan_srv_rerun_sets(s, c);
  GString *t = g_string_new(NULL);
  g_string_append_printf(t, "dlsim serve -c %s -w %s", a->cluster, a->workload);
  for (int i = 0; sets[i]; i++)
    g_string_append_printf(t, " --set %s", sets[i]);
  return g_string_free(t, FALSE);
}

static double plan_srv_per_gpu(const plan_srv_candidate *c)
{
  return (isnan(c->rate) ? c->est_rate : c->rate) / c->gpus;
}

static cJSON *plan_srv_candidate_json(const plan_srv_candidate *c)
{
  cJSON *o = cJSON_CreateObject();
  g_autofree char *d = plan_srv_describe(c);
  cJSON_AddStringToObject(o, "deployment", d);
  cJSON_AddBoolToObject(o, "disaggregated", c->npools > 1);
  cJSON *pools = cJSON_AddArrayToObject(o, "pools");
  for (int i = 0; i < c->npools; i++) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "role", c->npools == 1 ? "both" : i == 0 ? "prefill" : "decode");
    cJSON_AddNumberToObject(p, "tp", c->pool[i].tp);
    cJSON_AddNumberToObject(p, "pp", c->pool[i].pp);
    cJSON_AddNumberToObject(p, "ep", c->pool[i].ep);
    cJSON_AddNumberToObject(p, "replicas", c->pool[i].replicas);
    if (c->pool[i].max_batch > 0)
      cJSON_AddNumberToObject(p, "max_batch", c->pool[i].max_batch);
    cJSON_AddItemToArray(pools, p);
  }
  cJSON_AddNumberToObject(o, "max_tokens", c->max_tokens);
  cJSON_AddNumberToObject(o, "gpus", c->gpus);
  cJSON_AddNumberToObject(o, "estimate_rate_per_s", c->est_rate);
  cJSON_AddNumberToObject(o, "estimate_ttft_p90_s", c->est_ttft);
  cJSON_AddNumberToObject(o, "estimate_tpot_p90_s", c->est_tpot);
  if (!isnan(c->rate)) {
    cJSON_AddNumberToObject(o, "max_rate_per_s", c->rate);
    if (c->rate > 0) {
      cJSON_AddNumberToObject(o, "ttft_p90_s", c->ttft_p90);
      cJSON_AddNumberToObject(o, "tpot_p90_s", c->tpot_p90);
      cJSON_AddNumberToObject(o, "slo_attainment", c->attainment);
    }
  }
  cJSON_AddNumberToObject(o, "goodput_per_gpu", plan_srv_per_gpu(c));
  g_auto(GStrv) overlay = plan_srv_overlay(c);
  cJSON_AddItemToObject(o, "set", cJSON_CreateStringArray((const char *const *)overlay,
                                                          (int)g_strv_length(overlay)));
  if (c->same > 0)
    cJSON_AddNumberToObject(o, "same_estimate", c->same);
  return o;
}

static cJSON *plan_srv_json(const cli_plan_serve_args *a, const plan_srv_setup *s,
                            const plan_srv_result *r)
{
  const cfg_slo *slo = &plan_srv_setup_workload(s)->serving.slo;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "gpus", a->gpus);
  cJSON *o = cJSON_AddObjectToObject(j, "slo");
  cJSON_AddNumberToObject(o, "ttft_s", slo->ttft);
  cJSON_AddNumberToObject(o, "tpot_s", slo->tbt);
  cJSON_AddNumberToObject(o, "attainment", slo->attainment);
  cJSON_AddNumberToObject(j, "candidates", (double)r->candidates);
  cJSON_AddNumberToObject(j, "valid", (double)r->valid);
  cJSON_AddNumberToObject(j, "fits", (double)r->fits);
  cJSON_AddNumberToObject(j, "elapsed_s", r->elapsed_s);
  cJSON *top = cJSON_AddArrayToObject(j, "top");
  for (guint i = 0; i < r->kept->len; i++)
    cJSON_AddItemToArray(top, plan_srv_candidate_json(&g_array_index(r->kept, plan_srv_candidate, i)));
  if (r->kept->len == 0)
    return j;
  const plan_srv_candidate *best = &g_array_index(r->kept, plan_srv_candidate, 0);
  cJSON *e = cJSON_AddObjectToObject(j, "engines");
  static const char *const keys[] = {"vllm", "sglang", "trtllm"};
  for (int k = 0; k < PLAN_SRV_NENGINES; k++) {
    g_autofree char *f = plan_srv_flags(best, (plan_srv_engine)k, plan_srv_model_name(s));
    cJSON_AddStringToObject(e, keys[k], f);
  }
  g_autofree char *rerun = plan_srv_rerun_command(a, s, best);
  cJSON_AddStringToObject(j, "rerun", rerun);
  return j;
}

static void plan_srv_csv(const plan_srv_result *r)
{
  printf("rank,deployment,disaggregated,tp,pp,replicas,max_batch,max_tokens,gpus,"
         "estimate_rate_per_s,max_rate_per_s,goodput_per_gpu,ttft_p90_s,tpot_p90_s\n");
  for (guint i = 0; i < r->kept->len; i++) {
    const plan_srv_candidate *c = &g_array_index(r->kept, plan_srv_candidate, i);
    const plan_srv_pool *p = &c->pool[c->npools - 1];
    g_autofree char *d = plan_srv_describe(c);
    printf("%u,\"%s\",%d,%d,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g\n", i + 1, d, c->npools > 1,
           p->tp, p->pp, p->replicas, p->max_batch, c->max_tokens, c->gpus, c->est_rate, c->rate,
           plan_srv_per_gpu(c), c->ttft_p90, c->tpot_p90);
  }
}

static char *plan_srv_seconds(double s)
{
  return isnan(s) ? g_strdup("-") : units_format_seconds(s);
}

static void plan_srv_row(guint i, int width, const plan_srv_candidate *c)
{
  g_autofree char *d = plan_srv_describe(c);
  g_autofree char *ttft = plan_srv_seconds(c->ttft_p90);
  g_autofree char *tpot = plan_srv_seconds(c->tpot_p90);
  char confirmed[32] = "-", per_gpu[32];
  if (!isnan(c->rate))
    g_snprintf(confirmed, sizeof confirmed, "%.2f/s", c->rate);
  g_snprintf(per_gpu, sizeof per_gpu, isnan(c->rate) ? "(%.3f/s)" : "%.3f/s", plan_srv_per_gpu(c));
  printf("  %2u  %-*s %5d %10.2f/s %11s %12s %10s %10s\n", i + 1, width, d, c->gpus, c->est_rate,
         confirmed, per_gpu, ttft, tpot);
  if (c->same > 0)
    printf("      and %d more of this shape within 1 %% of its estimate per GPU\n", c->same);
}

static void plan_srv_engines(const plan_srv_setup *s, const plan_srv_candidate *best)
{
  printf("  engine flags for #1 (the model as the engine names it):\n");
  for (int k = 0; k < PLAN_SRV_NENGINES; k++) {
    g_autofree char *f = plan_srv_flags(best, (plan_srv_engine)k, plan_srv_model_name(s));
    g_auto(GStrv) lines = g_strsplit(f, "\n", -1);
    for (int l = 0; lines[l]; l++)
      printf("    %-13s %s\n", l == 0 ? plan_srv_engine_name((plan_srv_engine)k) : "", lines[l]);
  }
}

static void plan_srv_text(const cli_plan_serve_args *a, const plan_srv_setup *s,
                          const plan_srv_result *r, int confirmed)
{
  const cfg_slo *slo = &plan_srv_setup_workload(s)->serving.slo;
  g_autofree char *ttft = units_format_seconds(slo->ttft);
  g_autofree char *tpot = units_format_seconds(slo->tbt);
  printf("dlsim plan: %s on %s, %d GPUs, serving with TTFT <= %s and TPOT <= %s for %.0f %% of "
         "the requests\n", plan_srv_model_name(s), a->cluster, a->gpus, ttft, tpot,
         100 * slo->attainment);
  printf("  %ld deployments, %ld valid, %ld fit in memory; top %d confirmed by simulation\n",
         r->candidates, r->valid, r->fits, confirmed);
  if (r->kept->len == 0) {
    printf("  no deployment meets the SLA at any rate\n");
    return;
  }
  int width = (int)strlen("deployment");
  for (guint i = 0; i < r->kept->len; i++) {
    g_autofree char *d = plan_srv_describe(&g_array_index(r->kept, plan_srv_candidate, i));
    width = MAX(width, (int)strlen(d));
  }
  printf("  %2s  %-*s %5s %12s %11s %12s %10s %10s\n", "#", width, "deployment", "GPUs",
         "estimate", "max rate", "goodput/GPU", "TTFT p90", "TPOT p90");
  for (guint i = 0; i < r->kept->len; i++)
    plan_srv_row(i, width, &g_array_index(r->kept, plan_srv_candidate, i));
  const plan_srv_candidate *best = &g_array_index(r->kept, plan_srv_candidate, 0);
  plan_srv_engines(s, best);
  g_autofree char *rerun = plan_srv_rerun_command(a, s, best);
  printf("  re-run #1: %s\n", rerun);
}

int cli_plan_serve(const cli_plan_serve_args *a)
{
  GError *err = NULL;
  cli_mpi mpi;
  cli_mpi_init(&mpi);
  plan_srv_setup *s = plan_srv_setup_new(a->cluster, a->workload, a->sets, a->gpus, a->ttft,
                                         a->tpot, &err);
  plan_srv_result r = {0};
  bool ok = s && plan_srv_screen(s, mpi.rank, mpi.size, &r, &err);
  if (ok)
    plan_srv_share(&mpi, &r);
  if (ok && mpi.rank == 0) {
    int rows = MAX(a->top, 10);
    ok = plan_srv_rank(s, &r, rows, a->top, &err);
    int confirmed = MIN(a->top, (int)r.kept->len);
    if (ok && a->json) {
      cJSON *j = plan_srv_json(a, s, &r);
      rep_json_print(stdout, j);
      cJSON_Delete(j);
    } else if (ok && a->csv) {
      plan_srv_csv(&r);
    } else if (ok) {
      plan_srv_text(a, s, &r, confirmed);
    }
  }
  plan_srv_result_clear(&r);
  plan_srv_setup_free(s);
  return cli_mpi_finish(&mpi, 0, ok ? NULL : err);
}
