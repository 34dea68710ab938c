/* Installing dlsim: where it finds its data, the man page and the bash completion generated
 * from the commands' --help, and an installed tree that runs from any directory. */
#include "cli/cli_internal.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>

/* Runs argv in `dir` with `env`; returns stdout + stderr and the exit status in *status. */
static char *inst_spawn(const char *dir, const char *const *argv, char **env, int *status)
{
  g_autofree char *out = NULL, *err = NULL;
  int raw = 0;
  GError *e = NULL;
  bool ok = g_spawn_sync(dir, (char **)argv, env, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                         &raw, &e);
  cr_assert(ok, "cannot run %s: %s", argv[0], e ? e->message : "?");
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return g_strconcat(out ? out : "", err ? err : "", NULL);
}

/* The environment of a user who never heard of DLSIM_DATA_DIR. */
static char **inst_plain_env(void)
{
  return g_environ_unsetenv(g_get_environ(), "DLSIM_DATA_DIR");
}

Test(install, data_dir_from_the_environment_first)
{
  g_setenv("DLSIM_DATA_DIR", "/somewhere/else", TRUE);
  g_autofree char *p = cfg_data_path("configs", "clusters", NULL);
  cr_expect_str_eq(p, "/somewhere/else/configs/clusters");
  g_unsetenv("DLSIM_DATA_DIR");
  /* the test binary lives in a build tree: no share/dlsim beside it, so the source tree */
  g_autofree char *dir = cfg_data_path(NULL, NULL);
  cr_expect_str_eq(dir, DLSIM_DATA_DIR);
}

static const char run_help[] =
    "Usage:\n"
    "  dlsim run [OPTION?] - simulate one training step\n"
    "\n"
    "Help Options:\n"
    "  -h, --help                  Show help options\n"
    "\n"
    "Application Options:\n"
    "  -c, --cluster=CLUSTER       Cluster file or preset name\n"
    "  --json                      Print JSON\n"
    "  -s, --set=KEY=VALUE         Override a key\n"
    "                              (repeatable)\n"
    "  --a-very-long-option-name=X Long\n"
    "\n"
    "Presets are in configs/.\n";

Test(install, help_parsed_into_options)
{
  GPtrArray *cmds = cli_doc_commands("usage: dlsim ...\n\ncommands:\n"
                                     "  run        simulate a step\n\nmore text\n");
  cr_assert_eq(cmds->len, 1);
  cli_doc_command *c = g_ptr_array_index(cmds, 0);
  cr_assert_str_eq(c->name, "run");
  cr_expect_str_eq(c->summary, "simulate a step");
  cli_doc_parse_help(c, run_help);
  cr_expect_str_eq(c->synopsis, "dlsim run [OPTION...]");
  cr_assert_eq(c->options->len, 4, "-h/--help is left out: %u options", c->options->len);
  const cli_doc_option *o = g_ptr_array_index(c->options, 0);
  cr_expect_eq(o->short_name, 'c');
  cr_expect_str_eq(o->long_name, "cluster");
  cr_expect_str_eq(o->arg, "CLUSTER");
  o = g_ptr_array_index(c->options, 1);
  cr_expect_eq(o->short_name, 0);
  cr_expect_null(o->arg);
  o = g_ptr_array_index(c->options, 2);
  cr_expect_str_eq(o->arg, "KEY=VALUE");
  cr_expect_str_eq(o->desc, "Override a key (repeatable)");
  o = g_ptr_array_index(c->options, 3);
  cr_expect_str_eq(o->long_name, "a-very-long-option-name");
  cr_expect_str_eq(c->text->str, "Presets are in configs/.\n");
  g_autoptr(GString) man = g_string_new(NULL);
  cli_doc_man(man, cmds, "9.9");
  cr_expect(strstr(man->str, "\\fB\\-c\\fR, \\fB\\-\\-cluster\\fR=\\fICLUSTER\\fR\n"), "%s", man->str);
  cr_expect(strstr(man->str, ".TH DLSIM 1 \"\" \"dlsim 9.9\""));
  g_ptr_array_free(cmds, TRUE);
}

/* Every --long option the real `dlsim COMMAND --help` prints, by a pattern of its own. */
static GPtrArray *inst_real_options(const char *cmd)
{
  g_autofree char *args = g_strdup_printf("%s --help", cmd);
  th_proc p = th_dlsim(args);
  GPtrArray *opts = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GRegex) re = g_regex_new("^  (?:-., )?(--[a-z0-9-]+)", G_REGEX_MULTILINE, 0, NULL);
  GMatchInfo *m = NULL;
  g_regex_match(re, p.out, 0, &m);
  while (g_match_info_matches(m)) {
    char *o = g_match_info_fetch(m, 1);
    if (strcmp(o, "--help") == 0)
      g_free(o);
    else
      g_ptr_array_add(opts, o);
    g_match_info_next(m, NULL);
  }
  g_match_info_free(m);
  th_proc_clear(&p);
  return opts;
}

static char *inst_roff_dashes(const char *opt)
{
  g_autoptr(GString) s = g_string_new(opt);
  g_string_replace(s, "-", "\\-", 0);
  return g_strdup(s->str);
}

Test(install, man_page_renders_every_real_option, .timeout = 60)
{
  g_autofree char *roff = NULL;
  cr_assert(g_file_get_contents(DLSIM_MAN_PAGE, &roff, NULL, NULL), "no %s", DLSIM_MAN_PAGE);
  const char *cmds[] = {"run", "plan", "serve", "schema", "trace summary"};
  for (size_t i = 0; i < G_N_ELEMENTS(cmds); i++) {
    g_autoptr(GPtrArray) opts = inst_real_options(cmds[i]);
    cr_expect_gt(opts->len, 0, "dlsim %s --help shows no option", cmds[i]);
    g_autofree char *head = g_strdup_printf(".SS %s\n", cmds[i]);
    const char *section = strstr(roff, head);
    cr_assert(section, "no section for %s", cmds[i]);
    const char *end = strstr(section + 1, ".SS ");
    g_autofree char *body = end ? g_strndup(section, (gsize)(end - section)) : g_strdup(section);
    for (guint k = 0; k < opts->len; k++) {
      g_autofree char *want = inst_roff_dashes(g_ptr_array_index(opts, k));
      cr_expect(strstr(body, want), "man page: %s lacks %s", cmds[i],
                (char *)g_ptr_array_index(opts, k));
    }
  }
  int status = 0;
  const char *argv[] = {"groff", "-man", "-ww", "-z", DLSIM_MAN_PAGE, NULL};
  g_autofree char *warnings = inst_spawn(NULL, argv, NULL, &status);
  cr_expect_eq(status, 0);
  cr_expect_str_eq(warnings, "", "groff warns:\n%s", warnings);
}

/* What the completion offers for the words given (the last one being completed). */
static char *inst_complete(const char *words)
{
  g_autofree char *script = g_strdup_printf(
      "source '%s'; COMP_WORDS=('%s' %s); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _dlsim; "
      "printf '%%s\\n' \"${COMPREPLY[@]}\" | sort | tr '\\n' ' '",
      DLSIM_COMPLETION, DLSIM_BINARY, words);
  const char *argv[] = {"bash", "--norc", "-c", script, NULL};
  int status = 0;
  g_auto(GStrv) env = inst_plain_env();
  char *out = inst_spawn(DLSIM_SOURCE_DIR, argv, env, &status);
  cr_expect_eq(status, 0, "bash: %s", out);
  return g_strstrip(out);
}

/* The workload presets whose names start with `prefix`, sorted, space-separated: what completing
 * `--workload PREFIX` must offer whatever presets the tree holds. */
static int inst_strcmp_ptr(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *inst_workloads_with(const char *prefix)
{
  g_autofree char *dir = g_build_filename(DLSIM_SOURCE_DIR, "configs", "workloads", NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  cr_assert_not_null(d);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  for (const char *f; (f = g_dir_read_name(d));)
    if (g_str_has_prefix(f, prefix) && g_str_has_suffix(f, ".yaml"))
      g_ptr_array_add(names, g_strndup(f, strlen(f) - 5));
  g_dir_close(d);
  g_ptr_array_sort(names, inst_strcmp_ptr);
  g_ptr_array_add(names, NULL);
  char *out = g_strjoinv(" ", (char **)names->pdata);
  g_ptr_array_free(names, TRUE);
  return out;
}

Test(install, bash_completion, .timeout = 60)
{
  g_autofree char *llama3 = inst_workloads_with("llama3-");
  const struct {
    const char *words, *want;
  } cases[] = {
      {"r", "replay run"},
      {"run --cl", "--cluster"},
      {"run -c dgx-h100-s", "dgx-h100-superpod"},
      {"run --workload llama3-", llama3},
      {"plan -m gpt3-1", "gpt3-1.3b gpt3-175b"},
      {"run --set parallel.ze", "parallel.zero3_backward_post= parallel.zero3_copies= parallel.zero="},
      {"whatif --sweep node.cou", "node.count="},
      {"run --cluster = v100", "v100-edr"},
      {"trace s", "summary"},
      {"trace summary --t", "--top"},
      {"schema --k", "--keys"},
      {"run --engine ''", ""},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *got = inst_complete(cases[i].words);
    cr_expect_str_eq(got, cases[i].want, "dlsim %s<TAB>: got '%s', expected '%s'", cases[i].words,
                     got, cases[i].want);
  }
}

Test(install, schema_keys_are_what_set_takes)
{
  th_proc p = th_dlsim("schema --keys");
  cr_expect_eq(p.status, 0);
  cr_expect(strstr(p.out, "\nparallel.tp\n") && strstr(p.out, "\ngpu.flops.bf16\n"), "%s", p.out);
  cr_expect_null(strstr(p.out, " "), "one key a line, nothing else");
  th_proc_clear(&p);
}

/* cmake --install into a temporary prefix, then the installed dlsim alone, from another
 * directory, with no DLSIM_DATA_DIR: it finds its presets beside itself, and still does once
 * the whole prefix has moved. */
Test(install, installed_tree_runs_from_anywhere, .timeout = 120)
{
  g_autofree char *tmp = g_dir_make_tmp("dlsim-install-XXXXXX", NULL);
  g_autofree char *prefix = g_build_filename(tmp, "prefix", NULL);
  int status = 0;
  const char *install[] = {"cmake", "--install", DLSIM_BUILD_DIR, "--prefix", prefix, NULL};
  g_autofree char *log = inst_spawn(NULL, install, NULL, &status);
  cr_assert_eq(status, 0, "cmake --install failed:\n%s", log);
  g_autofree char *moved = g_build_filename(tmp, "moved", NULL);
  const char *where[] = {prefix, moved};
  for (int k = 0; k < 2; k++) {
    if (k == 1)
      cr_assert_eq(g_rename(prefix, moved), 0);
    g_autofree char *exe = g_build_filename(where[k], "bin", "dlsim", NULL);
    g_auto(GStrv) env = inst_plain_env();
    const char *dir[] = {exe, "--data-dir", NULL};
    g_autofree char *data = g_strstrip(inst_spawn("/", dir, env, &status));
    g_autofree char *want = g_build_filename(where[k], "share", "dlsim", NULL);
    cr_expect_str_eq(data, want);
    const char *run[] = {exe, "run", "-c", "dgx-h100", "-w", "llama3-405b", "--engine", "analytic",
                         NULL};
    g_autofree char *out = inst_spawn("/", run, env, &status);
    cr_expect_eq(status, 0, "%s", out);
    cr_expect(g_str_has_prefix(out, "dlsim run: llama3-405b"), "%s", out);
  }
  g_autofree char *man = g_build_filename(moved, "share", "man", "man1", "dlsim.1", NULL);
  g_autofree char *comp = g_build_filename(moved, "share", "bash-completion", "completions",
                                           "dlsim", NULL);
  cr_expect(g_file_test(man, G_FILE_TEST_IS_REGULAR) && g_file_test(comp, G_FILE_TEST_IS_REGULAR));
  const char *rm[] = {"rm", "-rf", tmp, NULL};
  g_free(inst_spawn(NULL, rm, NULL, &status));
}

/* Where the build found jemalloc (and no sanitizer), dlsim runs on it: the DES's SimGrid objects
 * cost a third less CPU than on glibc's malloc (CMakeLists.txt). */
Test(install, dlsim_links_jemalloc_when_the_build_found_it)
{
  const char *const argv[] = {"ldd", DLSIM_BINARY, NULL};
  int status = 0;
  g_autofree char *out = inst_spawn(NULL, argv, NULL, &status);
  cr_assert_eq(status, 0, "%s", out);
  cr_expect_eq(strstr(out, "libjemalloc") != NULL, DLSIM_JEMALLOC, "jemalloc %s in:\n%s",
               DLSIM_JEMALLOC ? "expected" : "not expected", out);
}
