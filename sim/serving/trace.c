/* Chrome trace (Perfetto-loadable) of a serving run: one process per replica with a row per lane
 * of iterations and counters of batch size and KV occupancy, and one process of requests with a
 * row each: queued until first admitted, prefill until the first token, decode until the last
 * (a preempted request's recomputation shows inside those). A disaggregated run numbers its
 * replicas prefill first, and a request whose KV moved shows the wait for room on its decode
 * replica and the transfer between its prefill and its decode. */
#include "serving/serving_internal.h"

#include <math.h>

static void srv_meta(GString *o, int pid, int tid, const char *what, const char *name)
{
  g_string_append_printf(o, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":\"%s\"}}",
                         pid, tid, what, name);
}

static void srv_span(GString *o, int pid, int tid, double start, double end, const char *name,
                     const char *cat, const char *args)
{
  if (!(end > start) || !isfinite(start))
    return;
  g_string_append_printf(o,
                         ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                         "\"name\":\"%s\",\"cat\":\"%s\",\"args\":{%s}}",
                         pid, tid, start * 1e6, (end - start) * 1e6, name, cat, args);
}

/* Replicas of every pool. */
static int srv_trace_replicas(const srv_result *r)
{
  const cfg_serving *s = &r->workload->serving;
  /* DP attention (wide EP): an engine per DP rank */
  return r->npools ? r->pools[0].replicas + r->pools[1].replicas
                   : s->replicas * srv_attention_dp(s);
}

/* The pipeline depth of replica `rep` and the first lane of its pool. */
static int srv_trace_pp(const srv_result *r, int rep, int *lane0)
{
  *lane0 = 0;
  if (!r->npools)
    return r->workload->serving.pp;
  if (rep < r->pools[0].replicas)
    return r->pools[0].pp;
  *lane0 = r->pools[0].replicas * r->pools[0].pp;
  return r->pools[1].pp;
}

static char *srv_trace_name(const srv_result *r, int rep)
{
  if (!r->npools)
    return g_strdup_printf("replica %d", rep);
  bool decode = rep >= r->pools[0].replicas;
  return g_strdup_printf("%s %d", decode ? "decode" : "prefill",
                         decode ? rep - r->pools[0].replicas : rep);
}

static void srv_trace_iterations(GString *o, const srv_result *r)
{
  for (int rep = 0; rep < srv_trace_replicas(r); rep++) {
    g_autofree char *name = srv_trace_name(r, rep);
    int lane0, pp = srv_trace_pp(r, rep, &lane0);
    srv_meta(o, rep, 0, "process_name", name);
    for (int l = 0; l < pp; l++) {
      g_autofree char *lane = g_strdup_printf("iterations (lane %d)", l);
      srv_meta(o, rep, l, "thread_name", lane);
    }
  }
  for (guint i = 0; i < r->iters->len; i++) {
    const srv_iter_record *it = &g_array_index(r->iters, srv_iter_record, i);
    g_autofree char *args = g_strdup_printf(
        "\"sequences\":%d,\"prefills\":%d,\"tokens\":%.0f,\"prefill_tokens\":%.0f", it->seqs,
        it->prefill_seqs, it->tokens, it->prefill_tokens);
    int lane0, pp = srv_trace_pp(r, it->replica, &lane0);
    srv_span(o, it->replica, (it->lane - lane0) % pp, it->start, it->end,
             it->prefill_seqs ? "prefill+decode" : "decode", "iteration", args);
    g_string_append_printf(o,
                           ",\n{\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,\"name\":\"batch\",\"args\":"
                           "{\"sequences\":%d}},\n{\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,\"name\":"
                           "\"kv cache\",\"args\":{\"occupancy\":%.4f}}",
                           it->replica, it->start * 1e6, it->seqs, it->replica, it->start * 1e6,
                           it->kv_occupancy);
  }
}

static void srv_trace_requests(GString *o, const srv_result *r)
{
  int pid = srv_trace_replicas(r);
  srv_meta(o, pid, 0, "process_name", "requests");
  for (guint i = 0; i < r->reqs->len; i++) {
    const srv_request_record *q = &g_array_index(r->reqs, srv_request_record, i);
    g_autofree char *row = g_strdup_printf("request %d", q->id);
    srv_meta(o, pid, q->id + 1, "thread_name", row);
    g_autofree char *args = g_strdup_printf(
        "\"replica\":%d,\"prompt_tokens\":%d,\"output_tokens\":%d,\"preemptions\":%d", q->replica,
        q->prompt, q->output, q->preemptions);
    srv_span(o, pid, q->id + 1, q->arrival, q->admitted, "queued", "request", args);
    if (isfinite(q->transfer_end)) {
      srv_span(o, pid, q->id + 1, q->admitted, q->prefill_end, "prefill", "request", args);
      srv_span(o, pid, q->id + 1, q->prefill_end, q->transfer_start, "decode wait", "request", args);
      srv_span(o, pid, q->id + 1, q->transfer_start, q->transfer_end, "KV transfer", "request", args);
    } else {
      srv_span(o, pid, q->id + 1, q->admitted, q->first_token, "prefill", "request", args);
    }
    srv_span(o, pid, q->id + 1, q->first_token, q->finish, "decode", "request", args);
  }
}

bool srv_trace_write(const char *path, const srv_result *r, GError **err)
{
  GString *o = g_string_new("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
                            "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":0}}");
  if (r->iters)
    srv_trace_iterations(o, r);
  if (r->reqs)
    srv_trace_requests(o, r);
  g_string_append(o, "\n]}\n");
  bool ok = cfg_write_text("--trace", path, o, err);
  g_string_free(o, TRUE);
  return ok;
}
