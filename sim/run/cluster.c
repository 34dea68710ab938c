/* Helpers the simulations and the CLI share: cluster sizing and preset choice for traces. */
#include "run/run.h"

#include <string.h>

cfg_cluster *sim_cluster_for(const char *path, char *const *sets, int gpus, GError **err)
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

char **sim_strv_concat(char *const *a, char *const *b)
{
  GPtrArray *all = g_ptr_array_new();
  for (int i = 0; a && a[i]; i++)
    g_ptr_array_add(all, g_strdup(a[i]));
  for (int i = 0; b && b[i]; i++)
    g_ptr_array_add(all, g_strdup(b[i]));
  g_ptr_array_add(all, NULL);
  return (char **)g_ptr_array_free(all, FALSE);
}

const char *sim_default_cluster(const char *gpu_name)
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
