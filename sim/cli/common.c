#include "cli/cli_internal.h"

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

cfg_cluster *cli_cluster_for(const char *path, char *const *sets, int gpus, GError **err)
{
  cfg_cluster *c = NULL;
  if (!cfg_load_with(path, NULL, sets, &c, NULL, err))
    return NULL;
  if (cfg_cluster_gpus(c) >= gpus)
    return c;
  int nodes = (gpus + c->node.gpus_per_node - 1) / c->node.gpus_per_node;
  cfg_cluster_free(c);
  int n = sets ? (int)g_strv_length((char **)sets) : 0;
  g_auto(GStrv) more = g_new0(char *, n + 2);
  for (int i = 0; i < n; i++)
    more[i] = g_strdup(sets[i]);
  more[n] = g_strdup_printf("node.count=%d", nodes);
  c = NULL;
  return cfg_load_with(path, NULL, more, &c, NULL, err) ? c : NULL;
}

char **cli_strv_concat(char *const *a, char *const *b)
{
  GPtrArray *all = g_ptr_array_new();
  for (int i = 0; a && a[i]; i++)
    g_ptr_array_add(all, g_strdup(a[i]));
  for (int i = 0; b && b[i]; i++)
    g_ptr_array_add(all, g_strdup(b[i]));
  g_ptr_array_add(all, NULL);
  return (char **)g_ptr_array_free(all, FALSE);
}

const char *cli_default_cluster(const char *gpu_name)
{
  const char *g = gpu_name ? gpu_name : "";
  if (strstr(g, "GH200"))
    return "gh200";
  if (strstr(g, "H100"))
    return "dgx-h100";
  if (strstr(g, "V100"))
    return "v100-edr";
  return "dgx-a100";
}
