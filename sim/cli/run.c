/* dlsim run -c CLUSTER -w WORKLOAD [--engine des|analytic] [--json] [--trace FILE]
 * [--timeline FILE.svg [--timeline-window START:END|LAYER]] [--trace-ranks LIST] [--trace-steps N]
 * [--set K=V]... [--quiet] */
#include "cli/cli_internal.h"
#include "lifecycle/lifecycle.h"
#include "report/report.h"
#include "run/run.h"

#include <glib/gstdio.h>
#include <stdio.h>

/* Perfetto's UI slows down past a few hundred megabytes: say how to cap a trace that big. */
static void cli_trace_size_note(const char *path)
{
  GStatBuf st;
  if (g_stat(path, &st) == 0 && st.st_size > 100 * 1000 * 1000)
    fprintf(stderr, "dlsim run: the trace is %.0f MB; --trace-ranks (e.g. 0-7) and --trace-steps "
            "(micro-batches per GPU) make it smaller\n", st.st_size / 1e6);
}

int cli_run(int argc, char **argv)
{
  g_autofree char *cluster = NULL, *workload = NULL, *engine = NULL, *trace = NULL;
  g_autofree char *max_memory = NULL, *trace_ranks = NULL, *timeline = NULL, *window_text = NULL;
  gint trace_steps = G_MININT; /* unset */
  gboolean yes = FALSE, quiet = FALSE;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &cluster, NULL),
      cli_opt(CLI_WORKLOAD, &workload, NULL),
      cli_opt(CLI_ENGINE, &engine, NULL),
      cli_opt(CLI_JSON, &json, NULL),
      cli_opt(CLI_TRACE, &trace, NULL),
      {"timeline", 0, 0, G_OPTION_ARG_FILENAME, &timeline,
       "Draw the trace's events as an SVG timeline", "FILE.svg"},
      {"timeline-window", 0, 0, G_OPTION_ARG_STRING, &window_text,
       "With --timeline: only START to END ms of the step, or the passes of one layer (default all of it)",
       "START:END|LAYER"},
      {"trace-ranks", 0, 0, G_OPTION_ARG_STRING, &trace_ranks,
       "With --trace or --timeline: only these GPUs (default all; a timeline of more than 16: "
       "the first 16 simulated on their own, such as one per pipeline stage)", "LIST"},
      {"trace-steps", 0, 0, G_OPTION_ARG_INT, &trace_steps,
       "With --trace or --timeline: only each GPU's first N micro-batches (default all; a timeline "
       "of more than 16 GPUs: 2)", "N"},
      cli_opt(CLI_SET, &sets, NULL),
      cli_opt(CLI_MAX_MEMORY, &max_memory, NULL),
      cli_opt(CLI_YES, &yes, NULL),
      cli_opt(CLI_QUIET, &quiet, "No progress on stderr"),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- simulate one training step", &argc, &argv, &code))
    return code;
  if (argc > 1) {
    fprintf(stderr, "dlsim: error: unexpected argument '%s' (see dlsim run --help)\n", argv[1]);
    return 2;
  }
  if (!cluster || !workload) {
    fprintf(stderr, "dlsim: error: dlsim run needs -c CLUSTER and -w WORKLOAD (see dlsim run --help)\n");
    return 2;
  }
  if ((trace_ranks || trace_steps != G_MININT) && !trace && !timeline) {
    fprintf(stderr, "dlsim: error: --trace-ranks and --trace-steps shape a trace: add --trace FILE "
                    "or --timeline FILE.svg\n");
    return 2;
  }
  if (window_text && !timeline) {
    fprintf(stderr, "dlsim: error: --timeline-window shapes a timeline: add --timeline FILE.svg\n");
    return 2;
  }
  if (trace_steps != G_MININT && trace_steps < 1) {
    fprintf(stderr, "dlsim: error: --trace-steps: expected a number of micro-batches >= 1, got %d\n",
            trace_steps);
    return 2;
  }
  GError *err = NULL;
  eng_kind kind;
  bud_limits budget;
  g_autoptr(GArray) ranks = NULL;
  double window[2] = {0, 0};
  if (!cli_engine(engine, &kind, &err) ||
      !bud_limits_parse(&budget, max_memory, yes, &err) ||
      (trace_ranks && !rep_trace_ranks_parse(trace_ranks, &ranks, &err)) ||
      (window_text && !rep_timeline_window_parse(window_text, window, &err)))
    return cli_fail(err);
  /* a trace shows every op, so every micro-batch is simulated */
  cli_progress progress;
  cli_progress_init(&progress, "dlsim run", stderr, quiet);
  bool traced = trace || timeline;
  sim_options o = {.engine = kind, .trace = traced, .fold = !traced, .budget = &budget,
                   .progress = progress.show ? cli_progress_update : NULL, .progress_ctx = &progress};
  sim_result run;
  bool ran = sim_run_files(cluster, workload, sets, &o, &run, &err);
  cli_progress_end(&progress);
  if (!ran) {
    sim_result_clear(&run);
    return cli_fail(err);
  }
  unc_table *bands = unc_table_load(NULL, &err);
  if (!bands) {
    sim_result_clear(&run);
    return cli_fail(err);
  }
  sim_result_bracket(&run, bands);
  /* a whole run when the workload gives its length; the step report alone otherwise */
  lc_run life;
  bool whole = lc_wanted(run.workload);
  bool ok = !whole || lc_estimate(&run, &life, &err);
  if (ok && json) {
    cJSON *j = rep_run_json(&run);
    if (whole)
      cJSON_AddItemToObject(j, "run", lc_json(&life));
    rep_json_print(stdout, j);
    cJSON_Delete(j);
  } else if (ok) {
    rep_run_text(stdout, &run);
    if (whole)
      lc_text(stdout, &life);
  }
  rep_trace_options to = {.ranks = ranks, .steps = MAX(trace_steps, 0)};
  ok = ok && (!trace || rep_trace_write(trace, &run, &to, &err));
  if (ok && trace)
    cli_trace_size_note(trace);
  ok = ok && (!timeline || rep_timeline_write(timeline, &run, &to, window_text, &err));
  sim_result_clear(&run);
  unc_table_free(bands);
  return ok ? 0 : cli_fail(err);
}
