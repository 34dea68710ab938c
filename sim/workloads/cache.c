/* What building the programs of many configurations of one job may share (a sweep's layouts,
 * the planner's refinement): the process groups of each rank layout, and the model of each
 * shard. Two layouts that differ only in what runs on the ranks (micro-batch, ZeRO stage,
 * recomputation, the batch) have the same groups, and building them was an eighth of an
 * analytic configuration; the model (a sixteenth) depends on the shard, not on the batch or
 * the ZeRO stage. */
#include "workloads/workloads_internal.h"

#include <string.h>

/* Layouts remembered: each holds every rank's groups (megabytes on thousands of GPUs), and a
 * sweep meets a few layouts many times rather than many once. */
#define WL_CACHE_LAYOUTS 8

typedef struct {
  wl_groups_key key;
  prog_program *groups; /* shares a built program's group store; no classes of its own */
} wl_cache_entry;

/* Models remembered: a few kilobytes each. */
#define WL_CACHE_MODELS 8

/* A model and what wl_model_build made it from (the training settings without the batch,
 * which it does not read). */
typedef struct {
  cfg_model model;
  cfg_training training;
  wl_shard shard;
  wl_model *m;
} wl_cache_model_entry;

struct wl_cache {
  wl_cache_entry entry[WL_CACHE_LAYOUTS];
  int n, next; /* entries filled; the one to replace next (oldest first) */
  wl_cache_model_entry model[WL_CACHE_MODELS];
  int nmodels, next_model;
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
  for (int i = 0; i < c->nmodels; i++)
    wl_model_free(c->model[i].m);
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

static bool wl_shard_equal(const wl_shard *a, const wl_shard *b)
{
  return a->micro_batch == b->micro_batch && a->tp == b->tp && a->cp == b->cp &&
         a->sp == b->sp && a->recompute == b->recompute && a->ep == b->ep &&
         a->moe_load == b->moe_load && a->moe_dropped == b->moe_dropped &&
         a->checks_dp == b->checks_dp && a->tp_overlap == b->tp_overlap;
}

/* The training settings a model is built from: all but the batch. Copied whole, padding
 * included, so that equal settings compare equal byte for byte; the strings they point to
 * are the workload's, whose configurations share them while the cache lives. */
static cfg_training wl_model_training(const cfg_training *t)
{
  cfg_training k;
  memcpy(&k, t, sizeof k);
  k.global_batch = 0;
  return k;
}

static bool wl_cache_model_is(const wl_cache_model_entry *e, const cfg_model *cm,
                              const cfg_training *t, const wl_shard *shard)
{
  cfg_training k = wl_model_training(t);
  return wl_shard_equal(&e->shard, shard) && memcmp(&e->model, cm, sizeof *cm) == 0 &&
         memcmp(&e->training, &k, sizeof k) == 0;
}

bool wl_cache_model(wl_cache *c, const cfg_workload *w, const wl_shard *shard,
                    const wl_model **out, wl_model **own, GError **err)
{
  *own = NULL;
  for (int i = 0; c && i < c->nmodels; i++)
    if (wl_cache_model_is(&c->model[i], &w->model, &w->training, shard)) {
      *out = c->model[i].m;
      return true;
    }
  wl_model *m = NULL;
  if (!wl_model_build(&w->model, &w->training, shard, &m, err))
    return false;
  *out = m;
  if (!c) {
    *own = m;
    return true;
  }
  wl_cache_model_entry *e = &c->model[c->next_model];
  if (c->nmodels < WL_CACHE_MODELS)
    c->nmodels++;
  else
    wl_model_free(e->m);
  e->m = m;
  e->shard = *shard;
  memcpy(&e->model, &w->model, sizeof e->model);
  e->training = wl_model_training(&w->training);
  c->next_model = (c->next_model + 1) % WL_CACHE_MODELS;
  return true;
}

const wl_model *wl_cache_shard_model(wl_cache *c, const cfg_workload *w, GError **err)
{
  wl_shard shard = wl_shard_of(w);
  const wl_model *m = NULL;
  wl_model *own = NULL;
  g_assert(c);
  return wl_cache_model(c, w, &shard, &m, &own, err) ? m : NULL;
}
