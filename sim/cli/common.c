#include "cli/cli.h"
#include "config/config.h"

#include <stdio.h>
#include <string.h>

int cli_fail(GError *err)
{
  int code = err && err->domain == CFG_ERROR && err->code == CFG_ERROR_RUNTIME ? 1 : 2;
  fprintf(stderr, "dlsim: error: %s\n", err ? err->message : "unknown error");
  if (err)
    g_error_free(err);
  return code;
}

/* The entry `arg` names (--long or -s, without a value attached), or NULL. */
static const GOptionEntry *cli_entry_of(const GOptionEntry *entries, const char *arg)
{
  for (const GOptionEntry *e = entries; e->long_name; e++) {
    if (g_str_has_prefix(arg, "--") && strcmp(arg + 2, e->long_name) == 0)
      return e;
    if (e->short_name && arg[0] == '-' && arg[1] == e->short_name && arg[2] == '\0')
      return e;
  }
  return NULL;
}

/* Whether an argument reads as an option rather than a value (negative numbers are values). */
static bool cli_looks_like_option(const char *arg)
{
  return arg[0] == '-' && arg[1] && !g_ascii_isdigit(arg[1]) && arg[1] != '.';
}

/* GOption gives an option that takes a value whatever follows it, even another option: `serve
 * --trace --json` wrote a trace file named "--json". Refuse that before parsing. */
static bool cli_values_present(const GOptionEntry *entries, int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const GOptionEntry *e = cli_entry_of(entries, argv[i]);
    if (!e || e->arg == G_OPTION_ARG_NONE)
      continue;
    if (i + 1 >= argc || cli_looks_like_option(argv[i + 1])) {
      fprintf(stderr, "dlsim: error: %s needs a value%s%s (see --help)\n", argv[i],
              i + 1 < argc ? ", but is followed by the option " : "", i + 1 < argc ? argv[i + 1] : "");
      return false;
    }
    i++;
  }
  return true;
}

bool cli_parse(const GOptionEntry *entries, const char *summary, int *argc, char ***argv, int *code)
{
  if (!cli_values_present(entries, *argc, *argv)) {
    *code = 2;
    return false;
  }
  GOptionContext *ctx = g_option_context_new(summary);
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *err = NULL;
  bool ok = g_option_context_parse(ctx, argc, argv, &err);
  g_option_context_free(ctx);
  if (ok)
    return true;
  fprintf(stderr, "dlsim: error: %s (see --help)\n", err->message);
  g_error_free(err);
  *code = 2;
  return false;
}

