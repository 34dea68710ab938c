/* Numbers of a loaded cluster reached by their dotted key, through the same schema tables the
 * decoder uses: what a fit changes between two evaluations, without printing it as `--set`
 * text and reloading the files. */
#include "config/config_internal.h"

#include <string.h>

static const cfg_field *cfg_param_field(const cfg_schema *s, const char *key)
{
  for (size_t i = 0; i < s->nfields; i++)
    if (strcmp(s->fields[i].key, key) == 0)
      return &s->fields[i];
  return NULL;
}

static int cfg_param_name(const char *const *names, const char *name)
{
  for (int i = 0; names && names[i]; i++)
    if (strcmp(names[i], name) == 0)
      return i;
  return -1;
}

double *cfg_cluster_param(cfg_cluster *c, const char *key, GError **err)
{
  g_auto(GStrv) parts = g_strsplit(key, ".", -1);
  const cfg_schema *s = &cfg_schema_cluster;
  char *base = (char *)c;
  for (char **p = parts; *p; p++) {
    const cfg_field *f = cfg_param_field(s, *p);
    if (f && f->type == CFG_T_MAP && p[1]) {
      base += f->offset;
      s = f->sub;
      continue;
    }
    if (f && (f->type == CFG_T_QTY || f->type == CFG_T_NUMBER) && !p[1])
      return (double *)(base + f->offset);
    int e = f && f->type == CFG_T_QTY_BY_ENUM && p[1] && !p[2] ? cfg_param_name(f->names, p[1]) : -1;
    if (e >= 0)
      return (double *)(base + f->offset) + e;
    break;
  }
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
              "%s: not a number of the cluster (expected a key such as gpu.efficiency.sustained "
              "or nccl.base_latency.simple)", key);
  return NULL;
}
