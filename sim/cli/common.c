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
