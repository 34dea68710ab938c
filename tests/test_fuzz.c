/* Seeded mutation of every reader: the YAML configuration (files and --set), Kineto traces,
 * Chakra execution traces, nccl-tests tables (CSV and raw output) and OSU Micro-Benchmarks output. Each mutated input
 * must be read or refused with an error, never crash, hang or leak (the suite runs under ASan
 * and UBSan), and a configuration that loads must simulate to finite, non-negative figures or
 * fail with an error. DLSIM_FUZZ_ITERATIONS scales the runs (default: a few thousand inputs in
 * all, for CI); the seed is fixed, so a failure reproduces. Deeper runs: the libFuzzer harness
 * in tests/fuzz (tests/README.md). */
#include "calibration/calibration.h"
#include "helpers.h"
#include "run/run.h"
#include "trace/trace.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int fuzz_iterations(int base)
{
  const char *env = g_getenv("DLSIM_FUZZ_ITERATIONS");
  return env ? MAX(atoi(env), 1) : base;
}

static char *fuzz_read(const char *relative, gsize *len)
{
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, relative, NULL);
  char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, len, NULL), "cannot read %s", path);
  return text;
}

/* Flips, deletes, duplicates or inserts a few bytes (and sometimes a YAML-ish token). */
static char *fuzz_mutate(GRand *r, const char *text, gsize len, gsize *out_len)
{
  static const char *const tokens[] = {"[", "]", "{", "}", ":", ",", "\n", "-", " ", "'", "\"",
                                       "1e308", "-1", "nan", "inf", "0", "99999999999", "\t",
                                       "&a", "*a", "!!map", "GiB", "TB/s", "%"};
  GString *s = g_string_new_len(text, (gssize)len);
  int edits = g_rand_int_range(r, 1, 4);
  for (int e = 0; e < edits && s->len > 0; e++) {
    gsize at = (gsize)g_rand_int_range(r, 0, (gint32)s->len);
    gsize span = (gsize)g_rand_int_range(r, 1, 64);
    switch (g_rand_int_range(r, 0, 10)) {
    case 0:
    case 1:
      s->str[at] = (char)g_rand_int_range(r, 1, 256);
      break;
    case 2:
    case 3:
      g_string_erase(s, (gssize)at, (gssize)MIN(span, s->len - at));
      break;
    case 4:
    case 5: {
      gsize n = MIN(span, s->len - at);
      g_autofree char *piece = g_strndup(s->str + at, n);
      g_string_insert(s, (gssize)at, piece);
      break;
    }
    case 9:
      g_string_truncate(s, at);
      break;
    default:
      g_string_insert(s, (gssize)at, tokens[g_rand_int_range(r, 0, G_N_ELEMENTS(tokens))]);
      break;
    }
  }
  *out_len = s->len;
  return g_string_free(s, FALSE);
}

/* A configuration that loads must give a finite, non-negative step, or an error. */
static void fuzz_simulate(const cfg_cluster *c, const cfg_workload *w)
{
  if (!w->has_training)
    return;
  bud_limits small = bud_defaults();
  small.max_bytes = 512.0 * 1048576; /* keep CI fast: big jobs are refused, not run */
  sim_options o = sim_options_for(ENG_ANALYTIC);
  o.budget = &small;
  sim_result r;
  GError *err = NULL;
  if (sim_run(c, w, &o, &r, &err)) {
    cr_assert(isfinite(r.step_time) && r.step_time >= 0 && isfinite(r.mfu) && r.mfu >= 0,
              "step %g, MFU %g reported", r.step_time, r.mfu);
  } else {
    cr_assert(err && err->message[0], "a failure without a message");
    g_error_free(err);
  }
  sim_result_clear(&r);
}

Test(fuzz, mutated_cluster_and_workload_files, .timeout = 600)
{
  const char *files[][2] = {{"configs/clusters/dgx-h100.yaml", "cluster.yaml"},
                            {"configs/workloads/gpt3-1.3b-dp.yaml", "workload.yaml"}};
  GRand *r = g_rand_new_with_seed(20261124);
  int n = fuzz_iterations(600), loaded = 0;
  for (int which = 0; which < 2; which++) {
    gsize len = 0;
    g_autofree char *text = fuzz_read(files[which][0], &len);
    for (int i = 0; i < n; i++) {
      gsize mlen = 0;
      g_autofree char *m = fuzz_mutate(r, text, len, &mlen);
      g_autofree char *path = th_write(files[which][1], m);
      const char *cluster = which == 0 ? path : "dgx-h100";
      const char *workload = which == 1 ? path : "gpt3-1.3b-dp";
      cfg_cluster *c = NULL;
      cfg_workload *w = NULL;
      GError *err = NULL;
      if (cfg_load_with(cluster, workload, NULL, &c, &w, &err)) {
        loaded++;
        if (loaded % 8 == 0) /* simulating every one would take minutes under ASan */
          fuzz_simulate(c, w);
      } else {
        cr_assert(err && strlen(err->message) > 0, "a refusal without a message");
        g_error_free(err);
      }
      cfg_workload_free(w);
      cfg_cluster_free(c);
    }
  }
  cr_assert(loaded > 3, "some mutations are harmless and must load (%d did)", loaded);
  g_rand_free(r);
}

static const char *const fuzz_keys[] = {
    "node.count", "node.gpus_per_node", "node.nics_per_node", "node.intra.bandwidth",
    "node.intra.latency", "network.nic_bandwidth", "network.tiers", "gpu.memory",
    "gpu.memory_bandwidth", "gpu.flops.bf16", "gpu.efficiency.sustained", "nccl.chunk.ll",
    "parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "parallel.zero",
    "parallel.placement", "training.global_batch", "training.micro_batch", "training.dtype",
    "model.layers", "model.hidden", "model.heads", "model.seq_len", "model.vocab",
    "memory.fragmentation", "collectives.algorithm", "parallel.schedule", "model"};
static const char *const fuzz_values[] = {
    "0", "1", "-1", "2", "8", "1e9", "1e-308", "1e308", "nan", "inf", "-inf", "3.5", "400",
    "400Gb/s", "1TB/s", "1GiB", "0GiB", "-5GiB", "1us", "1e-12s", "80GiB", "989TFLOPS", "90%",
    "150%", "bf16", "fp99", "[tp, cp, pp, dp]", "[tp, tp]", "[]", "{}", "true", "",
    "gpt3-175b", "none", "ring", "interleaved", "536870913", "2147483648", "1e7"};

Test(fuzz, random_overrides, .timeout = 600)
{
  GRand *r = g_rand_new_with_seed(1124);
  int n = fuzz_iterations(1200), loaded = 0;
  for (int i = 0; i < n; i++) {
    int k = g_rand_int_range(r, 1, 4);
    GPtrArray *sets = g_ptr_array_new_with_free_func(g_free);
    for (int j = 0; j < k; j++)
      g_ptr_array_add(sets, g_strdup_printf(
                                "%s=%s", fuzz_keys[g_rand_int_range(r, 0, G_N_ELEMENTS(fuzz_keys))],
                                fuzz_values[g_rand_int_range(r, 0, G_N_ELEMENTS(fuzz_values))]));
    g_ptr_array_add(sets, NULL);
    cfg_cluster *c = NULL;
    cfg_workload *w = NULL;
    GError *err = NULL;
    if (cfg_load_with("dgx-h100", "gpt3-1.3b-dp", (char *const *)sets->pdata, &c, &w, &err)) {
      if (loaded++ % 4 == 0)
        fuzz_simulate(c, w);
    } else {
      cr_assert(err && strlen(err->message) > 0);
      g_error_free(err);
    }
    cfg_workload_free(w);
    cfg_cluster_free(c);
    g_ptr_array_free(sets, TRUE);
  }
  g_rand_free(r);
}

Test(fuzz, mutated_kineto_traces, .timeout = 600)
{
  gsize len = 0;
  g_autofree char *text = fuzz_read("tests/data/trace_small.json", &len);
  GRand *r = g_rand_new_with_seed(7);
  int n = fuzz_iterations(1500), parsed = 0;
  for (int i = 0; i < n; i++) {
    gsize mlen = 0;
    g_autofree char *m = fuzz_mutate(r, text, len, &mlen);
    GError *err = NULL;
    trc_trace *t = trc_load_text(m, mlen, "fuzz.json", &err);
    if (t) {
      parsed++;
      trc_free(t);
    } else {
      cr_assert(err && strlen(err->message) > 0);
      g_error_free(err);
    }
  }
  cr_assert(parsed > 0);
  g_rand_free(r);
}

/* Chakra: rank 0 of ASTRA-sim's send/receive ring mutated, the other seven as published; the
 * mutated rank parses and the trace becomes a program, or either is refused with a message. */
Test(fuzz, mutated_chakra_traces, .timeout = 600)
{
  const char *dir = "validation/chakra/custom_ring_allreduce_8npus_1MB";
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, dir, NULL);
  GError *err = NULL;
  chk_trace *t = chk_load(path, &err);
  cr_assert_not_null(t, "%s", err ? err->message : "");
  gsize len = 0;
  g_autofree char *rel = g_strdup_printf("%s/custom_allreduce.0.et", dir);
  g_autofree char *text = fuzz_read(rel, &len);
  GArray *original = t->ranks[0].nodes;
  GRand *r = g_rand_new_with_seed(19);
  int n = fuzz_iterations(1500), built = 0;
  for (int i = 0; i < n; i++) {
    gsize mlen = 0;
    g_autofree char *m = fuzz_mutate(r, text, len, &mlen);
    g_autoptr(GArray) nodes = g_array_new(FALSE, FALSE, sizeof(chk_node));
    t->ranks[0].nodes = nodes;
    chk_options o = {.dtype = CFG_BF16};
    chk_counts c;
    prog_program *p = NULL;
    if (chk_parse((const uint8_t *)m, mlen, "fuzz.0.et", nodes, &err))
      p = chk_program(t, &o, &c, &err);
    if (p) {
      built++;
      prog_free(p);
    } else {
      cr_assert(err && strlen(err->message) > 0);
      g_clear_error(&err);
    }
    chk_nodes_clear(nodes);
  }
  t->ranks[0].nodes = original;
  chk_free(t);
  cr_assert(built > 0);
  g_rand_free(r);
}

/* Mutations of one benchmark table (nccl-tests, OMB): read to finite rows, or refused with a
 * message. */
static void fuzz_table(const char *relative, const char *time_column, guint32 seed)
{
  gsize len = 0;
  g_autofree char *text = fuzz_read(relative, &len);
  GRand *r = g_rand_new_with_seed(seed);
  int n = fuzz_iterations(1500), parsed = 0;
  calib_columns cols = {.time_column = time_column};
  for (int i = 0; i < n; i++) {
    gsize mlen = 0;
    g_autofree char *m = fuzz_mutate(r, text, len, &mlen);
    g_autofree char *path = th_write("table.csv", m);
    calib_table t = {0};
    GError *err = NULL;
    if (calib_table_load(path, &cols, &t, &err)) {
      parsed++;
      for (guint k = 0; k < t.points->len; k++) {
        const calib_point *p = &g_array_index(t.points, calib_point, k);
        cr_assert(isfinite(p->size) && isfinite(p->time), "row %u: %g B in %g s", k, p->size, p->time);
      }
    } else {
      cr_assert(err && strlen(err->message) > 0);
      g_error_free(err);
    }
    calib_table_clear(&t);
  }
  cr_assert(parsed > 0);
  g_rand_free(r);
}

Test(fuzz, mutated_nccl_tests_tables, .timeout = 600)
{
  fuzz_table("validation/nccl/issue309_h100_16gpu_2node_allreduce.csv", "oop_time_us|ip_time_us", 309);
}

/* What all_reduce_perf prints, as users paste it. */
Test(fuzz, mutated_nccl_tests_output, .timeout = 600)
{
  fuzz_table("tests/data/nccl_issue309_all_reduce_perf.txt", "oop_time_us|ip_time_us", 310);
}

/* What osu_bw prints (its bandwidth becomes a time, the one step the latency layouts lack). */
Test(fuzz, mutated_omb_output, .timeout = 600)
{
  fuzz_table("validation/omb/alps_gh200_osu_bw_dd_internode.txt", "time_us", 20);
}
