/* libFuzzer harness for dlsim's readers, one binary per reader (DLSIM_FUZZ_READER): the YAML
 * configuration (a workload on the dgx-h100 preset), --set overrides (one per line), Kineto
 * traces, Chakra ET files (one rank's) and nccl-tests and OMB tables. An input must be read or refused with an error; whatever
 * loads as a training workload must simulate to finite figures or fail with an error.
 * Build and run: tests/README.md. */
#include "calibration/calibration.h"
#include "config/config.h"
#include "run/run.h"
#include "trace/trace.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_YAML 1
#define FUZZ_SET 2
#define FUZZ_KINETO 3
#define FUZZ_NCCL 4
#define FUZZ_CHAKRA 5

/* Loaded configurations are simulated on the analytic engine within a small budget. */
static void fuzz_simulate(const cfg_cluster *c, const cfg_workload *w)
{
  if (!w->has_training)
    return;
  bud_limits small = bud_defaults();
  small.max_bytes = 256.0 * 1048576;
  sim_options o = sim_options_for(ENG_ANALYTIC);
  o.budget = &small;
  sim_result r;
  if (sim_run(c, w, &o, &r, NULL) && !(isfinite(r.step_time) && r.step_time >= 0))
    abort(); /* a non-number reported as a result */
  sim_result_clear(&r);
}

static void fuzz_config(const char *text, bool as_sets)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  GError *err = NULL;
  bool ok;
  if (as_sets) {
    g_auto(GStrv) sets = g_strsplit(text, "\n", 8);
    ok = cfg_load_with("dgx-h100", "gpt3-1.3b-dp", sets, &c, &w, &err);
  } else {
    ok = cfg_load_text("dgx-h100", text, NULL, &c, &w, &err);
  }
  if (ok)
    fuzz_simulate(c, w);
  else if (!err || !err->message[0])
    abort(); /* refused without a message */
  g_clear_error(&err);
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

static void fuzz_kineto(const char *text, size_t len)
{
  GError *err = NULL;
  trc_trace *t = trc_load_text(text, len, "fuzz.json", &err);
  if (!t && (!err || !err->message[0]))
    abort();
  trc_free(t);
  g_clear_error(&err);
}

static void fuzz_nccl(const char *text, size_t len)
{
  char path[] = "/tmp/dlsim-fuzz-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || write(fd, text, len) != (ssize_t)len)
    abort();
  close(fd);
  /* OMB's output gets a time_us column where nccl-tests' has out-of-place and in-place times */
  calib_columns cols = {.time_column = g_strstr_len(text, (gssize)len, "# OSU ")
                                           ? "time_us"
                                           : "oop_time_us|ip_time_us"};
  calib_table t = {0};
  GError *err = NULL;
  if (calib_table_load(path, &cols, &t, &err)) {
    for (guint k = 0; k < t.points->len; k++)
      if (!isfinite(g_array_index(t.points, calib_point, k).size))
        abort();
  }
  g_clear_error(&err);
  calib_table_clear(&t);
  unlink(path);
}

/* One rank's file of a one-rank trace: decoded and turned into a program, or refused. */
static void fuzz_chakra(const uint8_t *data, size_t size)
{
  GError *err = NULL;
  chk_rank rank = {.path = "fuzz.0.et", .nodes = g_array_new(FALSE, FALSE, sizeof(chk_node))};
  chk_trace t = {.name = "fuzz", .nranks = 1, .ranks = &rank};
  chk_options o = {.dtype = CFG_BF16};
  chk_counts c;
  prog_program *p = NULL;
  if (chk_parse(data, size, rank.path, rank.nodes, &err))
    p = chk_program(&t, &o, &c, &err);
  if (!p && (!err || !err->message[0]))
    abort();
  prog_free(p);
  g_clear_error(&err);
  chk_nodes_clear(rank.nodes);
  g_array_free(rank.nodes, TRUE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *text = g_strndup((const char *)data, size);
  switch (DLSIM_FUZZ_READER) {
  case FUZZ_YAML:
    fuzz_config(text, false);
    break;
  case FUZZ_SET:
    fuzz_config(text, true);
    break;
  case FUZZ_KINETO:
    fuzz_kineto(text, strlen(text));
    break;
  case FUZZ_NCCL:
    fuzz_nccl(text, strlen(text));
    break;
  case FUZZ_CHAKRA:
    fuzz_chakra(data, size);
    break;
  }
  return 0;
}
