/* Chrome trace (Perfetto-loadable): one process per simulated GPU, one thread per stream,
 * and a memory counter per GPU. */
#include "report/report.h"

#include <errno.h>
#include <string.h>

static const char *rep_stream_name(int s)
{
  static const char *const names[] = {"compute", "dp comm", "tp comm", "pp send", "ep comm", "pp recv", "cp comm"};
  return s >= 0 && s < PROG_NSTREAMS ? names[s] : "stream";
}

static void rep_meta(GString *o, bool *first, int pid, int tid, const char *what, const char *name)
{
  g_string_append_printf(o, "%s\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":",
                         *first ? "" : ",", pid, tid, what);
  cJSON *n = cJSON_CreateString(name);
  char *s = cJSON_PrintUnformatted(n);
  g_string_append(o, s);
  cJSON_free(s);
  cJSON_Delete(n);
  g_string_append(o, "}}");
  *first = false;
}

bool rep_trace_write(const char *path, const prog_program *p, const eng_result *res, GError **err)
{
  GString *o = g_string_new("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
  bool first = true;
  for (int r = 0; r < p->nranks; r++) {
    char name[32];
    g_snprintf(name, sizeof name, "GPU %d", r);
    rep_meta(o, &first, r, 0, "process_name", name);
    for (int s = 0; s < PROG_NSTREAMS; s++)
      rep_meta(o, &first, r, s, "thread_name", rep_stream_name(s));
  }
  for (guint i = 0; res->events && i < res->events->len; i++) {
    const eng_event *e = &g_array_index(res->events, eng_event, i);
    if (e->kind == PROG_MEM)
      continue;
    cJSON *n = cJSON_CreateString(e->name);
    char *s = cJSON_PrintUnformatted(n);
    g_string_append_printf(o,
                           ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                           "\"name\":%s,\"cat\":\"%s\"}",
                           e->rank, e->stream, e->start * 1e6, (e->end - e->start) * 1e6, s,
                           e->kind == PROG_COMM ? prog_dim_name((prog_dim)e->dim) : "compute");
    cJSON_free(s);
    cJSON_Delete(n);
  }
  for (guint i = 0; res->mem_samples && i < res->mem_samples->len; i++) {
    const eng_mem_sample *m = &g_array_index(res->mem_samples, eng_mem_sample, i);
    g_string_append_printf(o,
                           ",\n{\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,\"name\":\"memory\","
                           "\"args\":{\"GiB\":%.6f}}",
                           m->rank, m->time * 1e6, m->bytes / 1073741824.0);
  }
  g_string_append(o, "\n]}\n");
  bool ok = cfg_write_text("--trace", path, o, err);
  g_string_free(o, TRUE);
  return ok;
}
