/* The command line, end to end: golden files (tests/cli/NAME.tesh, SimGrid's tesh syntax:
 * "$ command", "> expected output line", "! expect return N"), JSON fields, and bad input
 * that must end with exit code 2 and a message, never a crash. */
#include "helpers.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *cmd;
  GString *expect;
  int status;
  int line;
} tesh_block;

static void tesh_check(const char *file, tesh_block *b)
{
  th_proc p = th_dlsim(b->cmd + strlen("dlsim "));
  /* paths under the checkout print relative to it: golden files hold no machine's path */
  g_autoptr(GString) out = g_string_new(p.out);
  g_string_replace(out, DLSIM_SOURCE_DIR "/", "", 0);
  g_free(p.out);
  p.out = g_strdup(out->str);
  cr_expect_eq(p.status, b->status, "%s:%d: `%s` returned %d, expected %d\n%s", file, b->line,
               b->cmd, p.status, b->status, p.out);
  cr_expect_str_eq(p.out, b->expect->str, "%s:%d: `%s` printed:\n%s\nexpected:\n%s", file, b->line,
                   b->cmd, p.out, b->expect->str);
  th_proc_clear(&p);
}

/* What a command prints, as the golden file's "> " lines. */
static void tesh_append_output(GString *to, const char *cmd)
{
  th_proc p = th_dlsim(cmd + strlen("dlsim "));
  g_autoptr(GString) out = g_string_new(p.out);
  g_string_replace(out, DLSIM_SOURCE_DIR "/", "", 0);
  g_auto(GStrv) lines = g_strsplit(out->str, "\n", -1);
  for (int i = 0; lines[i] && (lines[i][0] || lines[i + 1]); i++)
    g_string_append_printf(to, lines[i][0] ? "> %s\n" : ">\n", lines[i]);
  th_proc_clear(&p);
}

/* DLSIM_UPDATE_GOLDEN=1: rewrite a golden file with what each command prints now (a change
 * to the model's numbers is then reviewed as a diff of the .tesh files). */
static void tesh_update_file(const char *path)
{
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "cannot read %s", path);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  g_autoptr(GString) out = g_string_new(NULL);
  for (int i = 0; lines[i]; i++) {
    const char *l = lines[i];
    if (g_str_has_prefix(l, "> ") || strcmp(l, ">") == 0)
      continue;
    if (lines[i + 1] || l[0])
      g_string_append_printf(out, "%s\n", l);
    if (g_str_has_prefix(l, "$ "))
      tesh_append_output(out, l + 2);
  }
  cr_assert(g_file_set_contents(path, out->str, -1, NULL), "cannot write %s", path);
}

static void tesh_run_file(const char *path)
{
  if (g_getenv("DLSIM_UPDATE_GOLDEN")) {
    tesh_update_file(path);
    return;
  }
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "cannot read %s", path);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  tesh_block b = {0};
  int expect_status = 0;
  for (int i = 0; lines[i]; i++) {
    const char *l = lines[i];
    if (g_str_has_prefix(l, "$ ")) {
      if (b.cmd) {
        tesh_check(path, &b);
        g_free(b.cmd);
        g_string_free(b.expect, TRUE);
      }
      b = (tesh_block){.cmd = g_strdup(l + 2), .expect = g_string_new(NULL), .status = expect_status,
                       .line = i + 1};
      expect_status = 0;
    } else if (g_str_has_prefix(l, "> ") || strcmp(l, ">") == 0) {
      cr_assert(b.cmd, "%s:%d: output line before any command", path, i + 1);
      g_string_append_printf(b.expect, "%s\n", l[1] ? l + 2 : "");
    } else if (g_str_has_prefix(l, "! expect return ")) {
      expect_status = atoi(l + strlen("! expect return "));
    }
  }
  if (b.cmd) {
    tesh_check(path, &b);
    g_free(b.cmd);
    g_string_free(b.expect, TRUE);
  }
}

Test(cli, golden_files, .timeout = 120)
{
  g_autofree char *dir = g_build_filename(DLSIM_SOURCE_DIR, "tests", "cli", NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  cr_assert_not_null(d);
  const char *e;
  int n = 0;
  while ((e = g_dir_read_name(d))) {
    if (!g_str_has_suffix(e, ".tesh"))
      continue;
    g_autofree char *path = g_build_filename(dir, e, NULL);
    tesh_run_file(path);
    n++;
  }
  g_dir_close(d);
  cr_assert(n > 0, "no golden files found");
}

/* The DES says in --json how many GPUs it simulated, and why siblings did not fold when they
 * could have: on an 8:1 spine every rank runs; on a full-bisection one, one per TP group. */
Test(cli, run_json_says_which_ranks_the_des_simulated)
{
  const char *base = "run -c dgx-h100 -w gpt3-1.3b-dp --set node.count=4 --set parallel.tp=8 "
                     "--set parallel.dp=4 --set training.global_batch=32 --json";
  const struct {
    const char *extra;
    int gpus;
    const char *note;
  } cases[] = {{"", 4, NULL},
               {" --set network.tiers[1].oversubscription=8", 32,
                "tp siblings apart: an oversubscribed tier, where siblings' flows meet"}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *cmd = g_strconcat(base, cases[i].extra, NULL);
    th_proc p = th_dlsim(cmd);
    cr_assert_eq(p.status, 0, "%s", p.out);
    cJSON *j = cJSON_Parse(p.out);
    cJSON *s = cJSON_GetObjectItem(j, "simulator");
    cr_assert_eq(cJSON_GetObjectItem(s, "simulated_gpus")->valueint, cases[i].gpus, "%s", cmd);
    cJSON *note = cJSON_GetObjectItem(s, "not_folded");
    if (cases[i].note)
      cr_assert_str_eq(cJSON_GetStringValue(note), cases[i].note);
    else
      cr_assert_null(note, "%s", cmd);
    cJSON_Delete(j);
    th_proc_clear(&p);
  }
}

/* The runtime in --json: its name always, what it ran for each collective when one is named. */
Test(cli, run_json_names_the_runtime_and_its_choices)
{
  const char *const runs[] = {"run -c v100-edr -w resnet50-horovod -e analytic --json",
                              "run -c v100-edr -w resnet50-horovod -e analytic --json "
                              "--set collectives.runtime=mpi-mvapich"};
  for (int i = 0; i < 2; i++) {
    th_proc p = th_dlsim(runs[i]);
    cr_assert_eq(p.status, 0, "%s", p.out);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "not JSON: %s", p.out);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "runtime")),
                     i ? "mpi-mvapich" : "nccl");
    cJSON *colls = cJSON_GetObjectItem(j, "collectives");
    cr_assert(i ? cJSON_GetArraySize(colls) == 2 : colls == NULL);
    if (i) {
      cJSON *c = cJSON_GetArrayItem(colls, 0);
      cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c, "algorithm")), "multi-leader");
      cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c, "why")),
                       "mpi-mvapich: 'multi-leader' of collectives.allreduce");
      cr_assert(cJSON_GetObjectItem(c, "time_alone_s")->valuedouble > 0);
    }
    cJSON_Delete(j);
    th_proc_clear(&p);
  }
}

Test(cli, run_json_has_the_schema_fields)
{
  th_proc p = th_dlsim("run -c v100-edr -w resnet50-horovod --json");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cJSON *j = cJSON_Parse(p.out);
  cr_assert_not_null(j, "not JSON: %s", p.out);
  const char *numbers[] = {"step_time_s", "mfu", "hfu", "model_tflops_per_gpu", "samples_per_s",
                           "tokens_per_s"};
  for (size_t i = 0; i < G_N_ELEMENTS(numbers); i++)
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, numbers[i])), "missing %s", numbers[i]);
  const char *parts[] = {"compute", "exposed_comm", "bubble", "other"};
  cJSON *b = cJSON_GetObjectItem(j, "breakdown_s");
  double sum = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
    cJSON *x = cJSON_GetObjectItem(b, parts[i]);
    cr_assert(cJSON_IsNumber(x), "missing breakdown_s.%s", parts[i]);
    sum += x->valuedouble;
  }
  double step = cJSON_GetObjectItem(j, "step_time_s")->valuedouble;
  cr_assert_float_eq(sum, step, step * 1e-9);
  /* the DES's busiest link: the data-parallel ring leaves node 0 through its one NIC */
  cJSON *busiest = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "busiest_links"), 0);
  cr_assert(busiest, "missing busiest_links");
  cr_assert_str_eq(cJSON_GetObjectItem(busiest, "link")->valuestring, "NIC 0 of node 0, out");
  double use = cJSON_GetObjectItem(busiest, "utilisation")->valuedouble;
  cr_assert(use > 0 && use < 1, "utilisation %g", use);
  cJSON *comm = cJSON_GetObjectItem(j, "comm_s");
  const char *dims[] = {"tp", "pp", "dp", "ep"};
  for (size_t i = 0; i < G_N_ELEMENTS(dims); i++)
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(comm, dims[i])), "missing comm_s.%s", dims[i]);
  cJSON *m = cJSON_GetObjectItem(j, "memory");
  cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(m, "peak_bytes")));
  cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(m, "capacity_bytes")));
  cr_assert(cJSON_IsBool(cJSON_GetObjectItem(m, "fits")));
  double samples = cJSON_GetObjectItem(j, "samples_per_s")->valuedouble;
  cr_assert_float_eq(samples * step, 128, 1e-6);
  cJSON_Delete(j);
  th_proc_clear(&p);
}

/* The notes of a layout that asks for something that changes nothing, in run and memory. */
Test(cli, zero_with_one_data_parallel_rank_is_a_note_not_an_error)
{
  const char *cmds[] = {"run", "memory"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autofree char *args = g_strdup_printf(
        "%s -c dgx-h100 -w gpt3-1.3b-dp --set node.count=1 --set parallel.tp=8 --set parallel.dp=1 "
        "--set parallel.zero=2 --set training.global_batch=8 --json", cmds[i]);
    th_proc p = th_dlsim(args);
    cr_assert_eq(p.status, 0, "%s", p.out);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "not JSON: %s", p.out);
    cJSON *notes = cJSON_GetObjectItem(j, "notes");
    cr_assert(cJSON_IsArray(notes) && cJSON_GetArraySize(notes) == 1, "%s: %s", cmds[i], p.out);
    cr_assert(strstr(cJSON_GetArrayItem(notes, 0)->valuestring, "ZeRO-2 with DP 1"));
    cJSON_Delete(j);
    th_proc_clear(&p);
  }
  /* with two data-parallel ranks ZeRO shards: nothing to say */
  th_proc p = th_dlsim("run -c dgx-h100 -w gpt3-1.3b-dp --set node.count=1 --set parallel.tp=4 "
                       "--set parallel.dp=2 --set parallel.zero=2 --set training.global_batch=16 --json");
  cJSON *j = cJSON_Parse(p.out);
  cr_assert_not_null(j, "not JSON: %s", p.out);
  cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "notes")), 0);
  cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "comm_tier"), "dp")->valuestring, "node");
  cJSON_Delete(j);
  th_proc_clear(&p);
}

/* Runs `dlsim run JOB --trace FILE`; returns the trace's text (and what dlsim printed). */
static char *trace_of(const char *job, char **printed)
{
  g_autofree char *out = th_write("trace.json", "");
  g_autofree char *args = g_strdup_printf("run %s --trace %s", job, out);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 0, "%s", p.out);
  if (printed)
    *printed = g_strdup(p.out);
  th_proc_clear(&p);
  char *text = NULL;
  cr_assert(g_file_get_contents(out, &text, NULL, NULL));
  return text;
}

Test(cli, trace_is_chrome_json)
{
  g_autofree char *text = trace_of("-c v100-edr -w resnet50-horovod", NULL);
  cJSON *j = cJSON_Parse(text);
  cr_assert_not_null(j);
  cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
  cr_assert(cJSON_IsArray(ev) && cJSON_GetArraySize(ev) > 100);
  int complete = 0, counters = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, ev)
  {
    const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
    complete += strcmp(ph, "X") == 0;
    counters += strcmp(ph, "C") == 0;
  }
  cr_assert(complete > 100 && counters >= 4, "%d complete events, %d counter samples", complete, counters);
  cJSON_Delete(j);
}

/* A `dlsim run` trace of megatron-22b on one DGX A100 (TP 8), parsed; `extra` more options. */
static cJSON *trace_22b(const char *extra, char **report)
{
  g_autofree char *job = g_strdup_printf("-c dgx-a100 -w megatron-22b -q --json %s", extra);
  g_autofree char *text = trace_of(job, report);
  cJSON *j = cJSON_Parse(text);
  cr_assert_not_null(j, "the trace is not JSON");
  return j;
}

static const char *trace_str(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItem(o, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* Per GPU (pid < 64): processes, layer passes by direction and micro-batch, and the
 * tensor-parallel collectives that say their group, size and algorithm. */
typedef struct {
  int processes, fwd[64][4], bwd[64][4], tp[64];
} trace_counts;

static void trace_count_pass(trace_counts *c, int pid, const cJSON *e)
{
  const cJSON *args = cJSON_GetObjectItem(e, "args");
  int mb = cJSON_GetObjectItem(args, "micro_batch")->valueint;
  const char *pass = trace_str(args, "pass");
  cr_assert(mb >= 0 && mb < 4, "micro-batch %d", mb);
  /* the block stacks' passes: layer0 ... layer47 */
  if (!g_str_has_prefix(trace_str(args, "layer"), "layer"))
    return;
  if (strcmp(pass, "fwd") == 0)
    c->fwd[pid][mb]++;
  else if (strcmp(pass, "bwd") == 0)
    c->bwd[pid][mb]++;
}

static void trace_count_tp(trace_counts *c, int pid, const cJSON *e)
{
  const cJSON *args = cJSON_GetObjectItem(e, "args");
  cr_assert_str_eq(trace_str(args, "group"), "0-7");
  cr_assert_str_eq(trace_str(args, "dimension"), "tp");
  cr_assert(cJSON_GetObjectItem(args, "bytes")->valuedouble > 0);
  cr_assert(*trace_str(args, "algorithm") && *trace_str(args, "protocol"), "%s", cJSON_PrintUnformatted(e));
  c->tp[pid]++;
}

static trace_counts trace_count(const cJSON *j)
{
  trace_counts c = {0};
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents"))
  {
    int pid = cJSON_GetObjectItem(e, "pid")->valueint;
    cr_assert(pid >= 0 && pid < 64);
    const char *ph = trace_str(e, "ph"), *cat = trace_str(e, "cat");
    if (strcmp(ph, "M") == 0 && strcmp(trace_str(e, "name"), "process_name") == 0)
      c.processes++;
    else if (strcmp(ph, "X") == 0 && strcmp(cat, "layer") == 0)
      trace_count_pass(&c, pid, e);
    else if (strcmp(ph, "X") == 0 && strcmp(cat, "tp") == 0)
      trace_count_tp(&c, pid, e);
  }
  return c;
}

/* The issue's test: every GPU of the TP group shows every layer's forward and backward for
 * every micro-batch (48 layers x 2 micro-batches), each with its tensor-parallel collectives. */
Test(cli, trace_shows_every_layer_pass_on_every_gpu)
{
  cJSON *j = trace_22b("--set training.global_batch=8", NULL);
  trace_counts c = trace_count(j);
  cr_assert_eq(c.processes, 8);
  for (int pid = 0; pid < 8; pid++) {
    for (int mb = 0; mb < 2; mb++) {
      cr_assert_eq(c.fwd[pid][mb], 48, "GPU %d micro-batch %d: %d forward passes", pid, mb, c.fwd[pid][mb]);
      cr_assert_eq(c.bwd[pid][mb], 48, "GPU %d micro-batch %d: %d backward passes", pid, mb, c.bwd[pid][mb]);
    }
    cr_assert_eq(c.fwd[pid][2], 0);
    /* sequence parallel: 4 collectives a layer forward, 4 backward, and the embedding's */
    cr_assert(c.tp[pid] >= 2 * 48 * 8, "GPU %d: %d tp collectives", pid, c.tp[pid]);
  }
  cJSON_Delete(j);
}

/* The name of process `pid` in a parsed trace ("" when it has none). */
static const char *trace_process_name(const cJSON *j, int pid)
{
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents"))
  {
    if (cJSON_GetObjectItem(e, "pid")->valueint == pid && strcmp(trace_str(e, "ph"), "M") == 0 &&
        strcmp(trace_str(e, "name"), "process_name") == 0)
      return trace_str(cJSON_GetObjectItem(e, "args"), "name");
  }
  return "";
}

/* CP 4 x DP 2 over two nodes of four GPUs: the DES folds the context-parallel siblings, one
 * rank per block (data-parallel replica); a sibling in the second replica shows its block's
 * lead, GPU 4, not GPU 0 (same class, but not the rank it runs in step with). */
Test(cli, trace_names_the_folded_block_lead)
{
  g_autofree char *text = trace_of(
      "-c dgx-h100 -w megatron-22b -q --trace-steps 1 --set node.count=2 "
      "--set node.gpus_per_node=4 --set parallel.tp=1 --set parallel.cp=4 --set parallel.pp=1 "
      "--set parallel.dp=2 --set training.global_batch=8 --set training.flash_attention=true "
      "--set collectives.layer_flows=never",
      NULL);
  cJSON *j = cJSON_Parse(text);
  cr_assert_not_null(j, "the trace is not JSON");
  cr_assert(g_str_has_prefix(trace_process_name(j, 5), "GPU 5 (as GPU 4:"), "%s", trace_process_name(j, 5));
  cr_assert(g_str_has_prefix(trace_process_name(j, 1), "GPU 1 (as GPU 0:"), "%s", trace_process_name(j, 1));
  cr_assert_str_eq(trace_process_name(j, 4), "GPU 4 (simulated; stands for GPUs 5-7)");
  cr_assert_str_eq(trace_process_name(j, 0), "GPU 0 (simulated; stands for GPUs 1-3)");
  cJSON_Delete(j);
}

Test(cli, trace_ranks_and_steps_cap_the_trace)
{
  cJSON *j = trace_22b("--set training.global_batch=8 --trace-ranks 0,3-4 --trace-steps 1", NULL);
  trace_counts c = trace_count(j);
  cr_assert_eq(c.processes, 3);
  int pids[] = {0, 3, 4};
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(c.fwd[pids[i]][0], 48);
    cr_assert_eq(c.fwd[pids[i]][1], 0, "--trace-steps 1 still shows micro-batch 1");
  }
  cr_assert_eq(c.fwd[1][0] + c.fwd[2][0] + c.fwd[5][0], 0);
  cJSON_Delete(j);
  const char *bad[][2] = {{"--trace-ranks 8", "rank 8 is not in this job (ranks 0-7)"},
                          {"--trace-ranks 3-1", "range 3-1 runs backwards"},
                          {"--trace-ranks 0,x", "expected ranks like 0-7,64, got '0,x'"},
                          {"--trace-steps 0", "--trace-steps: expected"}};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *args = g_strdup_printf("run -c dgx-a100 -w megatron-22b -q --trace /dev/null %s", bad[i][0]);
    th_proc p = th_dlsim(args);
    cr_assert_eq(p.status, 2, "%s: %s", bad[i][0], p.out);
    cr_assert(strstr(p.out, bad[i][1]), "%s: %s", bad[i][0], p.out);
    th_proc_clear(&p);
  }
  th_proc p = th_dlsim("run -c dgx-a100 -w megatron-22b -q --trace-ranks 0");
  cr_assert_eq(p.status, 2);
  cr_assert(strstr(p.out, "add --trace FILE"), "%s", p.out);
  th_proc_clear(&p);
}

static double trace_step_time(const char *json)
{
  cJSON *j = cJSON_Parse(json);
  cr_assert_not_null(j, "%s", json);
  double t = cJSON_GetObjectItem(j, "step_time_s")->valuedouble;
  cJSON_Delete(j);
  return t;
}

/* The trace explains the step, it does not change it. A folded run (two small micro-batch
 * counts, extended) and the full one a trace needs differ only by rounding. */
Test(cli, trace_leaves_the_step_time_unchanged)
{
  g_autofree char *traced = NULL;
  cJSON_Delete(trace_22b("", &traced));
  th_proc p = th_dlsim("run -c dgx-a100 -w megatron-22b -q --json");
  cr_assert_eq(p.status, 0);
  /* the full run sums its micro-batches' charges in another order: the last bits may differ */
  double plain = trace_step_time(p.out), with_trace = trace_step_time(traced);
  cr_assert(fabs(plain - with_trace) <= 1e-12 * plain, "%.17g vs %.17g", plain, with_trace);
  th_proc_clear(&p);
  g_autofree char *out = th_write("trace-175b.json", "");
  const char *job = "run -c dgx-a100 -w megatron-175b --set node.count=8 -q --json";
  g_autofree char *args = g_strdup_printf("%s --trace %s --trace-ranks 0 --trace-steps 1", job, out);
  th_proc folded = th_dlsim(job), full = th_dlsim(args);
  double a = trace_step_time(folded.out), b = trace_step_time(full.out);
  cr_assert_float_eq(a, b, a * 1e-12);
  th_proc_clear(&folded);
  th_proc_clear(&full);
}

/* The first lines of the 22B trace, as the README shows them (tests/data/trace-22b-head.txt;
 * to renew it: dlsim run -c dgx-a100 -w megatron-22b -q --trace t.json; head -16 t.json). */
Test(cli, trace_first_lines_are_pinned)
{
  g_autofree char *text = trace_of("-c dgx-a100 -w megatron-22b -q", NULL), *golden = NULL;
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, "tests/data/trace-22b-head.txt", NULL);
  cr_assert(g_file_get_contents(path, &golden, NULL, NULL));
  cr_assert(g_str_has_prefix(text, golden), "the trace begins:\n%.3000s", text);
}

/* Runs `dlsim run JOB --timeline FILE`; returns the SVG's text. */
static char *timeline_of(const char *job)
{
  g_autofree char *out = th_write("timeline.svg", "");
  g_autofree char *args = g_strdup_printf("run %s -q --timeline %s", job, out);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 0, "%s", p.out);
  th_proc_clear(&p);
  char *text = NULL;
  cr_assert(g_file_get_contents(out, &text, NULL, NULL));
  return text;
}

/* Well-formed XML: xmllint when Debian's libxml2-utils is there, else elements balanced. */
static void timeline_check_xml(const char *svg)
{
  cr_assert(g_str_has_prefix(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
  cr_assert(g_str_has_suffix(svg, "</svg>\n"));
  int open = 0;
  for (const char *c = strchr(svg, '<'); c; c = strchr(c + 1, '<'))
    open += c[1] == '/' ? -1 : c[1] == '?' || c[1] == '!' ? 0 : 1;
  int closed = 0;
  for (const char *c = strstr(svg, "/>"); c; c = strstr(c + 2, "/>"))
    closed++;
  cr_assert_eq(open, closed, "%d elements left open", open - closed);
  g_autofree char *xmllint = g_find_program_in_path("xmllint");
  if (!xmllint)
    return;
  g_autofree char *path = th_write("check.svg", svg), *err = NULL;
  const char *argv[] = {xmllint, "--noout", path, NULL};
  int status = -1;
  cr_assert(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                         &err, &status, NULL));
  cr_assert(g_spawn_check_wait_status(status, NULL), "xmllint: %s", err);
}

/* A tiny job (2 layers, TP 2) whose cluster's name needs escaping, against
 * tests/data/timeline-tiny.svg (DLSIM_UPDATE_GOLDEN=1 rewrites it). */
Test(cli, timeline_tiny_is_pinned_and_escaped, .timeout = 60)
{
  g_autofree char *svg = timeline_of("-c dgx-a100 -w megatron-22b --set parallel.tp=2 --set model.layers=2 "
                                     "--set node.count=1 --set node.gpus_per_node=2 "
                                     "--set 'name=<tiny & \"quoted\">'");
  timeline_check_xml(svg);
  cr_assert_not_null(strstr(svg, "on &lt;tiny &amp; &quot;quoted&quot;&gt;</text>"));
  cr_assert_null(strstr(svg, "<tiny"));
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, "tests/data/timeline-tiny.svg", NULL), *golden = NULL;
  if (getenv("DLSIM_UPDATE_GOLDEN"))
    cr_assert(g_file_set_contents(path, svg, -1, NULL));
  cr_assert(g_file_get_contents(path, &golden, NULL, NULL));
  cr_assert_str_eq(svg, golden, "the timeline differs from tests/data/timeline-tiny.svg (DLSIM_UPDATE_GOLDEN=1 renews it)");
}

/* The README's picture: all 8 GPUs of the 22B's TP group, each with a forward and a backward
 * pass and tensor-parallel collectives, in the window of one layer; a window in ms. */
Test(cli, timeline_22b_shows_every_gpu_with_its_passes, .timeout = 60)
{
  g_autofree char *svg = timeline_of("-c dgx-a100 -w megatron-22b --timeline-window layer47");
  timeline_check_xml(svg);
  g_auto(GStrv) bands = g_strsplit(svg, "class=\"gpu\">", -1);
  cr_assert_eq(g_strv_length(bands), 9, "%u bands", g_strv_length(bands) - 1);
  for (int g = 1; g <= 8; g++) {
    g_autofree char *head = g_strdup_printf("GPU %d ", g - 1);
    cr_assert(g_str_has_prefix(bands[g], head), "%.80s", bands[g]);
    cr_assert_not_null(strstr(bands[g], ">layer47 fwd mb0</text>"), "GPU %d", g - 1);
    cr_assert_not_null(strstr(bands[g], ">layer47 bwd mb0</text>"), "GPU %d", g - 1);
    cr_assert_not_null(strstr(bands[g], "<title>tp "), "GPU %d: no TP collective", g - 1);
  }
  cr_assert_not_null(strstr(bands[2], "(as GPU 0: not simulated on its own"));
  cr_assert_null(strstr(svg, ">layer46 fwd mb0<"));
  g_autofree char *ms = timeline_of("-c dgx-a100 -w megatron-22b --timeline-window 100:200.5");
  cr_assert_not_null(strstr(ms, ">100.000 ms to 200.500 ms of a "));
  cr_assert_not_null(strstr(ms, ">100 ms</text>") && strstr(ms, ">200 ms</text>"), "no ticks at 100 and 200 ms");
}

/* A layer the drawn GPUs do not run: exit 2, said after the report (the layers are known once
 * simulated). */
Test(cli, timeline_window_of_a_missing_layer_fails, .timeout = 60)
{
  g_autofree char *out = th_write("missing.svg", "");
  g_autofree char *args = g_strdup_printf("run -c dgx-a100 -w megatron-22b -q --timeline %s "
                                          "--timeline-window layer99", out);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 2, "%s", p.out);
  cr_assert_not_null(strstr(p.out, "dlsim: error: --timeline-window: no pass of a layer named 'layer99'"), "%s", p.out);
  th_proc_clear(&p);
}

/* --trace-ranks and --trace-steps pick the bands and micro-batches; a whole step stays small,
 * its sub-pixel boxes merged (and said so). */
Test(cli, timeline_follows_trace_options_and_stays_bounded, .timeout = 60)
{
  g_autofree char *two = timeline_of("-c dgx-a100 -w megatron-22b --trace-ranks 2,5");
  g_auto(GStrv) bands = g_strsplit(two, "class=\"gpu\">", -1);
  cr_assert_eq(g_strv_length(bands), 3);
  cr_assert(g_str_has_prefix(bands[1], "GPU 2 ") && g_str_has_prefix(bands[2], "GPU 5 "));
  const char *merged = strstr(two, "merged into one (");
  cr_assert(merged && atoi(merged + strlen("merged into one (")) > 0, "%.400s", two);
  cr_assert_lt(strlen(two), 1000000, "%zu bytes for two GPUs", strlen(two));
  g_autofree char *svg = timeline_of("-c dgx-a100 -w megatron-175b --set node.count=8 --trace-steps 1");
  timeline_check_xml(svg);
  g_auto(GStrv) stages = g_strsplit(svg, "class=\"gpu\">", -1);
  /* a big job: one simulated GPU per pipeline stage */
  cr_assert_eq(g_strv_length(stages), 9, "%u bands", g_strv_length(stages) - 1);
  cr_assert(g_str_has_prefix(stages[8], "GPU 56 (simulated"), "%.80s", stages[8]);
  cr_assert_not_null(strstr(svg, "first 1 micro-batch;"));
  cr_assert_null(strstr(svg, ">layer0 fwd mb1<"));
}

/* A zero-bubble schedule's weight-gradient passes get a colour and a legend entry of their own. */
Test(cli, timeline_tells_weight_gradient_passes_apart, .timeout = 60)
{
  g_autofree char *svg = timeline_of("-c dgx-a100 -w megatron-175b --set node.count=8 "
                                     "--set parallel.schedule=zb-h1 --set parallel.virtual_stages=1 "
                                     "--trace-ranks 0 --trace-steps 1");
  cr_assert_not_null(strstr(svg, ">weight-gradient pass</text>"));
  cr_assert_not_null(strstr(svg, "fill=\"#c46a12\"><title>layer11 bwd-weight mb0:"));
  cr_assert_not_null(strstr(svg, "fill=\"#f28e2b\"><title>layer11 bwd-input mb0:"));
}

/* Every prefix of a real preset and deterministic garbage: an error or a result, never a crash. */
Test(cli, truncated_and_garbage_files_never_crash)
{
  const char *presets[] = {"configs/clusters/dgx-h100.yaml", "configs/workloads/resnet50-horovod.yaml",
                           "configs/models/llama3-8b.yaml"};
  for (size_t f = 0; f < G_N_ELEMENTS(presets); f++) {
    g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, presets[f], NULL);
    g_autofree char *text = NULL;
    gsize len = 0;
    cr_assert(g_file_get_contents(path, &text, &len, NULL));
    for (gsize cut = 0; cut < len; cut += 7) {
      g_autofree char *part = g_strndup(text, cut);
      GError *err = NULL;
      cfg_doc *d = cfg_doc_parse(part, "cut.yaml", &err);
      cr_assert(d || (err && strstr(err->message, "cut.yaml")), "cut %zu of %s", cut, presets[f]);
      cfg_doc_free(d);
      g_clear_error(&err);
    }
  }
  GRand *rng = g_rand_new_with_seed(42);
  for (int i = 0; i < 300; i++) {
    char buf[200];
    int n = g_rand_int_range(rng, 1, (int)sizeof buf);
    for (int k = 0; k < n - 1; k++)
      buf[k] = (char)g_rand_int_range(rng, 1, 256);
    buf[n - 1] = '\0';
    GError *err = NULL;
    cfg_doc *d = cfg_doc_parse(buf, "garbage.yaml", &err);
    cr_assert(d || err);
    cfg_doc_free(d);
    g_clear_error(&err);
  }
  g_rand_free(rng);
}

Test(cli, bad_files_exit_2_with_a_message)
{
  g_autofree char *cluster = g_build_filename(DLSIM_SOURCE_DIR, "configs/clusters/dgx-h100.yaml", NULL);
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(cluster, &text, NULL, NULL));
  text[strlen(text) / 2] = '\0';
  g_autofree char *cut = th_write("cut.yaml", text);
  g_autofree char *garbage = th_write("garbage.yaml", "\x7f\x45\x4c\x46 {{{ ::: ]]\n\t- [\n");
  g_autofree char *binary = th_write("binary.yaml", "\xff\xfe\xfd not utf-8\n");
  const char *files[] = {cut, garbage, binary};
  for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
    g_autofree char *args = g_strdup_printf("run -c %s -w resnet50-horovod", files[i]);
    th_proc p = th_dlsim(args);
    cr_assert_eq(p.status, 2, "%s -> %d: %s", files[i], p.status, p.out);
    cr_assert(g_str_has_prefix(p.out, "dlsim: error: "), "%s", p.out);
    cr_assert(strstr(p.out, files[i]), "message should name the file: %s", p.out);
    th_proc_clear(&p);
  }
}

/* Every <text> of a PLplot SVG (labels, ticks, and the series' marks): near-white ones would
 * vanish on the white page. */
static int svg_text_fills(const char *svg, int *dark, int *light)
{
  int n = 0;
  for (const char *p = strstr(svg, "<text"); p; p = strstr(p + 5, "<text")) {
    const char *fill = strstr(p, "fill=\"#");
    const char *end = strchr(p, '>');
    if (!fill || (end && fill > end))
      continue;
    unsigned rgb = (unsigned)strtoul(fill + 7, NULL, 16);
    int sum = (int)((rgb >> 16) & 0xff) + (int)((rgb >> 8) & 0xff) + (int)(rgb & 0xff);
    (sum > 600 ? light : dark)[0]++;
    n++;
  }
  return n;
}

Test(cli, a_sweep_plot_has_dark_ink_on_white_with_units_and_a_legend, .timeout = 120)
{
  g_autofree char *path = th_write("sweep.svg", "");
  g_autofree char *args = g_strdup_printf(
      "whatif -c dgx-a100 -w megatron-175b --base node.count=8 --engine analytic "
      "--sweep network.nic_bandwidth=50Gb/s,100Gb/s,200Gb/s,400Gb/s --plot %s", path);
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, 0, "%s", p.out);
  th_proc_clear(&p);
  g_autofree char *svg = NULL;
  cr_assert(g_file_get_contents(path, &svg, NULL, NULL));
  int dark = 0, light = 0;
  int texts = svg_text_fills(svg, &dark, &light);
  /* title, two axis titles, the x label, ticks on three axes, the legend's two entries */
  cr_assert(texts >= 15 && light == 0, "%d texts, %d light", texts, light);
  cr_assert(strstr(svg, "&#x42;&#x2f;&#x73;"), "the x axis names its unit (B/s)");
  cr_assert(strstr(svg, "&#x6c;&#x6f;&#x67;&#x20;&#x73;&#x63;&#x61;&#x6c;&#x65;"),
            "a geometric sweep is on a log axis");
  cr_assert(strstr(svg, "&#x4d;&#x46;&#x55;"), "the legend and right axis name MFU");
}

Test(cli, a_plot_format_is_checked_before_the_sweep_runs)
{
  th_proc p = th_dlsim("whatif -c dgx-a100 -w megatron-175b --base node.count=8 "
                       "--sweep network.nic_bandwidth=50Gb/s,100Gb/s --plot out.png");
  cr_assert_eq(p.status, 2, "%s", p.out);
  cr_assert(strstr(p.out, "--plot out.png: expected a .svg, .pdf or .ps file"), "%s", p.out);
  cr_assert_null(strstr(p.out, "sweep of"), "nothing ran: %s", p.out);
  th_proc_clear(&p);
}

/* ---- one option convention for every command ---------------------------------------------- */

/* The commands `dlsim --help` lists, plus trace's subcommand. */
static GPtrArray *cli_commands(void)
{
  th_proc p = th_dlsim("--help");
  cr_assert_eq(p.status, 0, "%s", p.out);
  GPtrArray *cmds = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) lines = g_strsplit(p.out, "\n", -1);
  bool in_list = false;
  for (int i = 0; lines[i]; i++) {
    if (strcmp(lines[i], "commands:") == 0)
      in_list = true;
    else if (in_list && g_str_has_prefix(lines[i], "  "))
      g_ptr_array_add(cmds, g_strndup(lines[i] + 2, strcspn(lines[i] + 2, " ")));
    else if (in_list)
      break;
  }
  g_ptr_array_add(cmds, g_strdup("trace summary"));
  th_proc_clear(&p);
  return cmds;
}

/* Records "-x, --long" and "--long" lines of a --help text into letter -> long name and long
 * name -> letter, failing on the first letter or name that means two things. */
static void cli_check_help(const char *cmd, const char *help, GHashTable *by_letter,
                           GHashTable *by_name)
{
  g_auto(GStrv) lines = g_strsplit(help, "\n", -1);
  for (int i = 0; lines[i]; i++) {
    const char *l = lines[i] + strspn(lines[i], " ");
    char letter[2] = "";
    if (l[0] == '-' && l[1] != '-' && l[1] && l[2] == ',') {
      letter[0] = l[1];
      l += 4;
    }
    if (!g_str_has_prefix(l, "--") || g_str_has_prefix(l, "--help"))
      continue;
    g_autofree char *name = g_strndup(l + 2, strcspn(l + 2, "= "));
    g_autofree char *where = g_strdup_printf("%s: %s", cmd, lines[i]);
    if (letter[0]) {
      const char *seen = g_hash_table_lookup(by_letter, letter);
      if (seen) {
        g_autofree char *seen_name = g_strndup(seen, strcspn(seen, " "));
        cr_assert_str_eq(seen_name, name, "-%s means --%s (%s) and --%s (%s)", letter, seen_name,
                         seen, name, where);
      } else {
        g_hash_table_insert(by_letter, g_strdup(letter), g_strdup_printf("%s (%s)", name, cmd));
      }
    }
    const char *had = g_hash_table_lookup(by_name, name);
    if (had && *had && letter[0])
      cr_assert_eq(had[0], letter[0], "--%s is -%c in one command and -%s in %s", name, had[0],
                   letter, where);
    if (!had || (!*had && letter[0]))
      g_hash_table_insert(by_name, g_strdup(name), g_strdup(letter));
  }
}

Test(cli, a_short_option_means_one_long_option_in_every_command)
{
  g_autoptr(GPtrArray) cmds = cli_commands();
  cr_assert(cmds->len >= 12, "%u commands", cmds->len);
  GHashTable *by_letter = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  GHashTable *by_name = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  for (guint i = 0; i < cmds->len; i++) {
    g_autofree char *args = g_strdup_printf("%s --help", (char *)cmds->pdata[i]);
    th_proc p = th_dlsim(args);
    cr_assert_eq(p.status, 0, "dlsim %s: %s", args, p.out);
    cli_check_help(cmds->pdata[i], p.out, by_letter, by_name);
    th_proc_clear(&p);
  }
  /* the convention the README states */
  const char *expect[][2] = {{"c", "cluster"}, {"w", "workload"}, {"s", "set"}, {"e", "engine"},
                             {"o", "output"}, {"n", "gpus"}};
  for (size_t i = 0; i < G_N_ELEMENTS(expect); i++) {
    const char *seen = g_hash_table_lookup(by_letter, expect[i][0]);
    cr_assert(seen && g_str_has_prefix(seen, expect[i][1]), "-%s is %s", expect[i][0], seen);
  }
  cr_assert_null(g_hash_table_lookup(by_letter, "f"), "-f was --fix and --factor: now neither");
  g_hash_table_destroy(by_letter);
  g_hash_table_destroy(by_name);
}

Test(cli, help_command_prints_the_commands_own_help)
{
  th_proc a = th_dlsim("help run"), b = th_dlsim("run --help");
  cr_assert_eq(a.status, 0, "%s", a.out);
  cr_assert_str_eq(a.out, b.out);
  cr_assert(strstr(a.out, "--workload"), "%s", a.out);
  th_proc_clear(&a);
  th_proc_clear(&b);
  th_proc p = th_dlsim("help rnu");
  cr_assert_eq(p.status, 2, "%s", p.out);
  cr_assert(g_str_has_prefix(p.out, "dlsim: error: unknown command 'rnu' (did you mean 'run'?)"), "%s", p.out);
  th_proc_clear(&p);
  p = th_dlsim("help nosuch");
  cr_assert_eq(p.status, 2, "%s", p.out);
  cr_assert(g_str_has_prefix(p.out, "dlsim: error: unknown command 'nosuch'"), "%s", p.out);
  th_proc_clear(&p);
  p = th_dlsim("trace --help");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert(strstr(p.out, "  summary ") && strstr(p.out, "--top") && strstr(p.out, "--csv"), "%s", p.out);
  th_proc_clear(&p);
  p = th_dlsim("help trace");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert(strstr(p.out, "  summary "), "%s", p.out);
  th_proc_clear(&p);
}

/* One rule: every command that takes --engine runs the DES unless told otherwise, and says so. */
Test(cli, the_default_engine_is_des_in_every_command, .timeout = 60)
{
  const char *cmds[] = {"run", "whatif", "coll", "replay"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autofree char *args = g_strdup_printf("help %s", cmds[i]);
    th_proc p = th_dlsim(args);
    cr_assert(strstr(p.out, "--engine=ENGINE") && strstr(p.out, "des (default"), "%s: %s", cmds[i], p.out);
    th_proc_clear(&p);
  }
  const char *runs[][2] = {
      {"run -c v100-edr -w resnet50-horovod", "engine des"},
      {"whatif -c v100-edr -w resnet50-horovod --set network.nic_bandwidth=200Gb/s", "(engine des)"},
      {"coll -c dgx-h100 --op allreduce --gpus 8 --min 1MiB --max 1MiB", "engine des"},
      {"replay tests/data/trace_small.json -c dgx-a100", "engine des"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(runs); i++) {
    th_proc p = th_dlsim(runs[i][0]);
    cr_assert_eq(p.status, 0, "%s: %s", runs[i][0], p.out);
    cr_assert(strstr(p.out, runs[i][1]), "%s: %s", runs[i][0], p.out);
    th_proc_clear(&p);
  }
}

Test(cli, validate_csv_has_a_header_and_one_row_per_case)
{
  th_proc p = th_dlsim("validate --csv korthikanti-22b-step-full nccl-a100-8gpu-sendrecv");
  cr_assert_eq(p.status, 0, "%s", p.out);
  g_auto(GStrv) lines = g_strsplit(p.out, "\n", -1);
  cr_assert_eq(g_strv_length(lines), 4, "%s", p.out); /* header, two rows, the final newline */
  cr_assert(g_str_has_prefix(lines[0], "name,role,metric,measured,predicted,error,tolerance,pass,"
                                       "source,category,optimism"), "%s", lines[0]);
  cr_assert(g_str_has_prefix(lines[1], "korthikanti-22b-step-full,check,step_time_s,1.42,"), "%s", lines[1]);
  cr_assert(g_str_has_prefix(lines[2], "nccl-a100-8gpu-sendrecv,fit,busbw,,"), "%s", lines[2]);
  th_proc_clear(&p);
}

/* ---- dlsim batch ----------------------------------------------------------------------------- */

/* A command's JSON without the simulator's own figures (wall time), which differ run to run. */
static cJSON *cli_system_json(const char *text)
{
  cJSON *j = cJSON_Parse(text);
  if (cJSON_IsObject(j))
    cJSON_DeleteItemFromObjectCaseSensitive(j, "simulator");
  return j;
}

/* The batch's records, one per line (the last line ends with a newline). */
static cJSON **cli_batch_records(const char *out, int expected)
{
  g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
  cr_assert_eq((int)g_strv_length(lines), expected + 1, "%d records expected:\n%s", expected, out);
  cr_assert_str_empty(lines[expected]);
  cJSON **recs = g_new0(cJSON *, expected);
  for (int i = 0; i < expected; i++) {
    recs[i] = cJSON_Parse(lines[i]);
    cr_assert(cJSON_IsObject(recs[i]), "not a JSON object: %s", lines[i]);
  }
  return recs;
}

static void cli_batch_records_free(cJSON **recs, int n)
{
  for (int i = 0; i < n; i++)
    cJSON_Delete(recs[i]);
  g_free(recs);
}

static int cli_int(const cJSON *o, const char *key)
{
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  cr_assert(cJSON_IsNumber(x), "no number '%s'", key);
  return x->valueint;
}

static const char *cli_str(const cJSON *o, const char *key)
{
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  cr_assert(cJSON_IsString(x), "no string '%s'", key);
  return x->valuestring;
}

Test(cli, batch_gives_one_record_per_job_in_order_each_what_the_command_prints_alone, .timeout = 120)
{
  const char *jobs[] = {"memory -c dgx-a100 -w megatron-175b --set node.count=8",
                        "run -c v100-edr -w resnet50-horovod --engine analytic",
                        "run -c v100-edr -w resnet50-horovod --set gpu.memroy=1GiB"};
  g_autofree char *text = g_strdup_printf("# two good jobs and a bad one\n\n%s\n  %s\n%s\n", jobs[0],
                                          jobs[1], jobs[2]);
  g_autofree char *file = th_write("jobs.txt", text);
  g_autofree char *args = g_strdup_printf("batch %s", file);
  th_proc p = th_dlsim_ranks(args, 0);
  cr_assert_eq(p.status, 2, "the worst job's exit code, got %d: %s", p.status, p.err);
  cr_assert(strstr(p.err, "1 of 3 jobs failed"), "%s", p.err);
  cJSON **recs = cli_batch_records(p.out, 3);
  const int lines[] = {3, 4, 5}, exits[] = {0, 0, 2};
  for (int i = 0; i < 3; i++) {
    cr_expect_eq(cli_int(recs[i], "line"), lines[i]);
    cr_expect_eq(cli_int(recs[i], "exit"), exits[i]);
    cr_expect_str_eq(cli_str(recs[i], "command"), jobs[i]);
  }
  for (int i = 0; i < 2; i++) {
    g_autofree char *alone_args = g_strdup_printf("%s --json", jobs[i]);
    th_proc alone = th_dlsim_ranks(alone_args, 0);
    cr_assert_eq(alone.status, 0, "%s", alone.err);
    cJSON *want = cli_system_json(alone.out);
    g_autofree char *got_text = cJSON_Print(cJSON_GetObjectItemCaseSensitive(recs[i], "result"));
    cJSON *got = cli_system_json(got_text);
    cr_expect(cJSON_Compare(got, want, true), "job %d: %s\nalone: %s", i + 1, got_text, alone.out);
    cJSON_Delete(want);
    cJSON_Delete(got);
    th_proc_clear(&alone);
  }
  cr_expect(!cJSON_GetObjectItemCaseSensitive(recs[2], "result"));
  cr_expect(strstr(cli_str(recs[2], "error"), "unknown key 'memroy'"), "%s",
            cli_str(recs[2], "error"));
  cli_batch_records_free(recs, 3);
  th_proc_clear(&p);
}

Test(cli, batch_records_a_malformed_line_with_file_and_line_and_goes_on, .timeout = 60)
{
  const char *coll = "coll -c dgx-h100 --op allreduce --gpus 8 --factor 1024 --engine analytic";
  g_autofree char *text = g_strdup_printf("%s\nrun -c 'v100-edr\nbatch other.txt\ndlsim %s --json\n"
                                          "schema\n", coll, coll);
  g_autofree char *file = th_write("odd-jobs.txt", text);
  g_autofree char *out = th_write("odd-jobs.out", "");
  g_autofree char *args = g_strdup_printf("batch %s -o %s", file, out);
  th_proc p = th_dlsim_ranks(args, 0);
  cr_assert_eq(p.status, 2, "%s", p.err);
  cr_expect_str_empty(p.out, "-o: nothing on stdout");
  g_autofree char *written = NULL;
  cr_assert(g_file_get_contents(out, &written, NULL, NULL));
  cJSON **recs = cli_batch_records(written, 5);
  g_autofree char *where = g_strdup_printf("%s:2: ", file);
  cr_expect(g_str_has_prefix(cli_str(recs[1], "error"), where), "%s", cli_str(recs[1], "error"));
  cr_expect(strstr(cli_str(recs[2], "error"), "cannot be a batch"));
  const int exits[] = {0, 2, 2, 0, 0};
  for (int i = 0; i < 5; i++)
    cr_expect_eq(cli_int(recs[i], "exit"), exits[i], "record %d", i + 1);
  /* --json given or not, a pasted `dlsim` or not: the same result */
  cr_expect(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(recs[0], "result"),
                          cJSON_GetObjectItemCaseSensitive(recs[3], "result"), true));
  /* a command without --json: its text */
  cr_expect(g_str_has_prefix(cli_str(recs[4], "output"), "dlsim configuration reference"));
  cli_batch_records_free(recs, 5);
  th_proc_clear(&p);
}

/* ---- commands shared over MPI ranks ----------------------------------------------------------- */

/* One process and `ranks` MPI ranks print the same bytes on stdout and exit alike. */
static void cli_same_on_ranks(const char *args, int ranks)
{
  th_proc one = th_dlsim_ranks(args, 0), many = th_dlsim_ranks(args, ranks);
  cr_expect_eq(many.status, one.status, "`%s`: %d ranks exit %d, one process %d\n%s", args, ranks,
               many.status, one.status, many.err);
  cr_expect_str_eq(many.out, one.out, "`%s` on %d ranks printed:\n%s\none process:\n%s", args,
                   ranks, many.out, one.out);
  th_proc_clear(&one);
  th_proc_clear(&many);
}

Test(cli, mpirun_shares_a_sweep_and_prints_what_one_process_prints, .timeout = 120)
{
  if (!th_have_mpirun())
    cr_skip_test("built without MPI, or no mpirun");
  const char *sweep = "whatif -c dgx-a100 -w megatron-22b --base node.count=1 --sweep "
                      "gpu.memory_bandwidth=1TB/s,2TB/s,3TB/s,4TB/s,5TB/s";
  g_autofree char *svg = th_write("mpi-sweep.svg", "");
  g_autofree char *plot = g_strdup_printf("--plot %s", svg);
  const char *outputs[] = {"", "--json", "--csv", plot};
  for (size_t i = 0; i < G_N_ELEMENTS(outputs); i++) {
    g_autofree char *args = g_strdup_printf("%s %s", sweep, outputs[i]);
    cli_same_on_ranks(args, 2);
  }
  /* the second point is rank 1's: its error travels to rank 0, which reports it */
  const char *bad = "whatif -c dgx-a100 -w megatron-22b --base node.count=1 --sweep "
                    "gpu.memory_bandwidth=1TB/s,bogus,3TB/s";
  cli_same_on_ranks(bad, 2);
  th_proc p = th_dlsim_ranks(bad, 2);
  cr_expect_eq(p.status, 2);
  cr_expect(strstr(p.err, "got 'bogus'"), "%s", p.err);
  th_proc_clear(&p);
}

Test(cli, mpirun_shares_validation_cases_and_prints_what_one_process_prints, .timeout = 120)
{
  if (!th_have_mpirun())
    cr_skip_test("built without MPI, or no mpirun");
  /* a case whose prediction fails, so that a failure travels between ranks too */
  g_autofree char *broken_text = g_strdup_printf(
      "name: broken-case\nrole: check\nsource: test\ncluster: %s/configs/clusters/v100-edr.yaml\n"
      "workload: %s/configs/workloads/resnet50-horovod.yaml\nset: [node.count=3]\n"
      "metric: samples_per_s\nmeasured: 650.3\ntolerance: 0.05\n",
      DLSIM_SOURCE_DIR, DLSIM_SOURCE_DIR);
  g_autofree char *broken = th_write("broken-case.yaml", broken_text);
  g_autofree char *cases = g_strdup_printf("validate gemm-h100-bf16-batch1 %s "
                                           "nccl-h100-2node-allreduce horovod-resnet50-v100-2node "
                                           "korthikanti-22b-states", broken);
  cli_same_on_ranks(cases, 2);
  g_autofree char *json = g_strdup_printf("%s --json", cases);
  cli_same_on_ranks(json, 3);
}

Test(cli, mpirun_shares_a_batch_and_writes_the_records_in_file_order, .timeout = 120)
{
  if (!th_have_mpirun())
    cr_skip_test("built without MPI, or no mpirun");
  /* jobs whose JSON has no wall time in it, so that the bytes compare */
  g_autofree char *file = th_write(
      "mpi-jobs.txt",
      "memory -c dgx-a100 -w megatron-175b --set node.count=8\n"
      "coll -c dgx-h100 --op allreduce --gpus 8 --factor 1024 --engine analytic\n"
      "# a comment\n"
      "memory -c dgx-a100 -w megatron-175b --set node.count=8 --set training.micro_batch=5\n"
      "whatif -c dgx-a100 -w megatron-22b --base node.count=1 -e analytic --sweep gpu.memory_bandwidth=1TB/s,2TB/s\n"
      "coll -c dgx-h100 --op allgather --gpus 16 'unbalanced\n");
  g_autofree char *args = g_strdup_printf("batch %s", file);
  cli_same_on_ranks(args, 2);
}
