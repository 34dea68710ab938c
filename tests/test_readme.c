/* The README shows what dlsim prints: its marked examples rerun to the same text
 * (scripts/readme-examples.sh --check), no `$ dlsim` example goes unmarked, and its dependency
 * list is the one scripts/deps.sh installs. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <string.h>
#include <sys/wait.h>

static char *rd_read(const char *relative)
{
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, relative, NULL);
  char *text = NULL;
  cr_assert(g_file_get_contents(path, &text, NULL, NULL), "cannot read %s", path);
  return text;
}

/* The slow examples (a DES-confirmed plan, all of dlsim validate) are left to the script's
 * full run; the rest take a few seconds even under the sanitizers. */
Test(readme, examples_print_what_dlsim_prints, .timeout = 120)
{
  char *argv[] = {"sh", "scripts/readme-examples.sh", "--check", "--fast", "--dlsim",
                  DLSIM_BINARY, NULL};
  g_auto(GStrv) env = g_get_environ();
  env = g_environ_setenv(env, "DLSIM_DATA_DIR", DLSIM_SOURCE_DIR, TRUE);
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;
  cr_assert(g_spawn_sync(DLSIM_SOURCE_DIR, argv, env, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                         &status, NULL));
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "README.md has drifted from dlsim's output; run scripts/readme-examples.sh:\n%s%s", out,
            err);
}

/* An example of `$ dlsim ...` needs the marker (or `<!-- not an example: WHY -->`), or nothing
 * would keep it true. */
Test(readme, every_dlsim_example_is_marked)
{
  g_autofree char *text = rd_read("README.md");
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  bool marked = false, in_block = false;
  for (int i = 0; lines[i]; i++) {
    const char *l = lines[i];
    if (g_str_has_prefix(l, "<!-- example") || g_str_has_prefix(l, "<!-- not an example:")) {
      marked = true;
      continue;
    }
    bool indented = g_str_has_prefix(l, "    ");
    if (g_str_has_prefix(l, "    $ dlsim ") && !in_block)
      cr_assert(marked, "README.md:%d: `%s` has no <!-- example --> marker before it", i + 1, l + 4);
    if (indented)
      in_block = true;
    else if (*l) {
      in_block = false;
      marked = false;
    }
  }
}

Test(readme, lists_the_packages_deps_sh_installs)
{
  g_autofree char *readme = rd_read("README.md");
  g_autofree char *deps = rd_read("scripts/deps.sh");
  const char *at = strstr(deps, "DLSIM_PACKAGES=\"");
  cr_assert_not_null(at);
  at += strlen("DLSIM_PACKAGES=\"");
  g_autofree char *list = g_strndup(at, (gsize)(strchr(at, '"') - at));
  g_auto(GStrv) packages = g_strsplit(list, " ", -1);
  int n = 0;
  for (int i = 0; packages[i]; i++)
    if (*packages[i]) {
      cr_expect_not_null(strstr(readme, packages[i]), "README.md does not list %s (scripts/deps.sh installs it)",
                         packages[i]);
      n++;
    }
  cr_assert(n >= 8);
}

/* Every bench the README quotes exists and says what it measures; run without arguments it
 * produces the README's table (its help says so). */
Test(readme, every_bench_it_quotes_has_help)
{
  g_autofree char *readme = rd_read("README.md");
  g_autofree char *bindir = g_path_get_dirname(DLSIM_BINARY);
  int n = 0;
  for (const char *at = readme; (at = strstr(at, "build/release/dlsim_bench")); n++) {
    at += strlen("build/release/");
    g_autofree char *name = g_strndup(at, strspn(at, "abcdefghijklmnopqrstuvwxyz0123456789_"));
    g_autofree char *path = g_build_filename(bindir, name, NULL);
    char *argv[] = {path, "--help", NULL};
    g_autofree char *out = NULL;
    int status = 0;
    cr_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL,
                           &status, NULL), "cannot run %s", path);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s --help exited %d", name, status);
    g_autofree char *usage = g_strdup_printf("usage: %s", name);
    cr_assert(g_str_has_prefix(out, usage), "%s --help printed:\n%s", name, out);
  }
  cr_assert(n >= 6, "the README quotes %d benches", n);
}
