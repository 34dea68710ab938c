/* The progress line of long DES runs: its text, and that only a terminal ever sees it. */
#include "cli/cli_internal.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <string.h>
#include <sys/wait.h>

Test(progress, text_says_percent_and_time_left)
{
  const struct {
    double fraction, left;
    const char *want;
  } cases[] = {
      {0.42, 13.4, "dlsim run:  42 % simulated, about 13 s left"},
      {0.5, 125, "dlsim run:  50 % simulated, about 2 min 05 s left"},
      {0.01, 3 * 3600 + 61, "dlsim run:   1 % simulated, about 3 h 01 min left"},
      {0.03, -1, "dlsim run:   3 % simulated"},
      {1.2, 0, "dlsim run: 100 % simulated, about 0 s left"},
      {-0.1, -1, "dlsim run:   0 % simulated"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *t = cli_progress_text("dlsim run", cases[i].fraction, cases[i].left);
    cr_expect_str_eq(t, cases[i].want);
  }
}

/* A file (or a pipe) is not a terminal: nothing is written, even with no delay. */
Test(progress, nothing_on_a_file)
{
  g_setenv("DLSIM_PROGRESS_DELAY", "0", TRUE);
  FILE *f = tmpfile();
  cr_assert(f);
  cli_progress p;
  cli_progress_init(&p, "dlsim run", f, false);
  cr_expect_not(p.show);
  cli_progress_update(0.5, &p);
  cli_progress_end(&p);
  cr_expect_eq(ftell(f), 0);
  fclose(f);
}

/* dlsim run under a pseudo-terminal (script(1)) with the delay at 0. */
static char *progress_on_a_terminal(const char *args)
{
  g_autofree char *cmd = g_strdup_printf("DLSIM_DATA_DIR=%s DLSIM_PROGRESS_DELAY=0 %s %s",
                                         DLSIM_SOURCE_DIR, DLSIM_BINARY, args);
  const char *argv[] = {"script", "-qec", cmd, "/dev/null", NULL};
  char *out = NULL;
  int status = 0;
  cr_assert(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                         NULL, NULL, &out, NULL, &status, NULL));
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", out);
  return out;
}

static const char des_run[] = "run -c dgx-a100 -w megatron-175b --set node.count=8";

Test(progress, a_terminal_sees_it_then_it_is_erased, .timeout = 120)
{
  g_autofree char *out = progress_on_a_terminal(des_run);
  const char *line = strstr(out, "\rdlsim run:");
  cr_assert(line && strstr(line, "% simulated"), "no progress on a terminal:\n%s", out);
  /* erased (spaces, back to the start) before the report is printed */
  const char *report = strstr(out, "dlsim run: gpt3-175b");
  cr_assert(report && report > line);
  cr_expect_eq(report[-1], '\r', "the report starts where the erased line was");
  g_autofree char *quiet_args = g_strdup_printf("%s -q", des_run);
  g_autofree char *quiet = progress_on_a_terminal(quiet_args);
  cr_expect_null(strstr(quiet, "% simulated"), "--quiet shows it:\n%s", quiet);
}

Test(progress, never_in_a_pipe, .timeout = 120)
{
  g_setenv("DLSIM_PROGRESS_DELAY", "0", TRUE);
  th_proc p = th_dlsim(des_run);
  cr_expect_eq(p.status, 0, "%s", p.out);
  cr_expect(g_str_has_prefix(p.out, "dlsim run: gpt3-175b"), "%s", p.out);
  cr_expect_null(strchr(p.out, '\r'), "%s", p.out);
  th_proc_clear(&p);
}

/* dlsim plan counts its DES runs on a terminal, last "N of N", and erases the line before the
 * table; -q shows nothing. */
Test(progress, a_plan_counts_its_des_runs_on_a_terminal, .timeout = 120)
{
  static const char plan[] = "plan -c dgx-h100 -m gpt3-1.3b --gpus 8 --global-batch 16 --top 2 "
                             "--refine 4 -j 2";
  g_autofree char *out = progress_on_a_terminal(plan);
  const char *last = g_strrstr(out, "\rdlsim plan: 2 of 2 DES runs done");
  cr_assert(last, "no count of the DES runs on a terminal:\n%s", out);
  const char *table = strstr(out, "dlsim plan: gpt3-1.3b");
  cr_assert(table && table > last && table[-1] == '\r', "not erased before the table:\n%s", out);
  g_autofree char *quiet_args = g_strdup_printf("%s -q", plan);
  g_autofree char *quiet = progress_on_a_terminal(quiet_args);
  cr_expect_null(strstr(quiet, "DES runs done"), "--quiet shows it:\n%s", quiet);
}
