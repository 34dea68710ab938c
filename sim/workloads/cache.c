/* What building the programs of many configurations of one job may share (a sweep's layouts,
 * the planner's refinement): the process groups of each rank layout. Two layouts that differ
 * only in what runs on the ranks (micro-batch, ZeRO stage, recomputation, the batch) have the
 * same groups, and building them was an eighth of an analytic configuration. */
#include "workloads/workloads_internal.h"

/* Layouts remembered: each holds every rank's groups (megabytes on thousands of GPUs), and a
 * sweep meets a few layouts many times rather than many once. */
#define WL_CACHE_LAYOUTS 8

typedef struct {
  wl_groups_key key;
  prog_program *groups; /* shares a built program's group store; no classes of its own */
} wl_cache_entry;

struct wl_cache {
  wl_cache_entry entry[WL_CACHE_LAYOUTS];
  int n, next; /* entries filled; the one to replace next (oldest first) */
};

wl_cache *wl_cache_new(void)
{
  return g_new0(wl_cache, 1);
}

void wl_cache_free(wl_cache *c)
{
  if (!c)
    return;
  for (int i = 0; i < c->n; i++)
    prog_free(c->entry[i].groups);
  g_free(c);
}

const prog_program *wl_cache_groups(const wl_cache *c, const wl_groups_key *key)
{
  for (int i = 0; c && i < c->n; i++)
    if (wl_groups_key_equal(&c->entry[i].key, key))
      return c->entry[i].groups;
  return NULL;
}

void wl_cache_keep(wl_cache *c, const wl_groups_key *key, const prog_program *built)
{
  if (!c || wl_cache_groups(c, key))
    return;
  wl_cache_entry *e = &c->entry[c->next];
  if (c->n < WL_CACHE_LAYOUTS)
    c->n++;
  else
    prog_free(e->groups);
  *e = (wl_cache_entry){.key = *key, .groups = prog_new_sharing_groups(built)};
  c->next = (c->next + 1) % WL_CACHE_LAYOUTS;
}
