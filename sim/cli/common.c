#include "cli/cli.h"
#include "config/config.h"

#include <stdio.h>

int cli_fail(GError *err)
{
  int code = err && err->domain == CFG_ERROR && err->code == CFG_ERROR_RUNTIME ? 1 : 2;
  fprintf(stderr, "dlsim: error: %s\n", err ? err->message : "unknown error");
  if (err)
    g_error_free(err);
  return code;
}

bool cli_parse(const GOptionEntry *entries, const char *summary, int *argc, char ***argv, int *code)
{
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
