/* Loading: presets, model grafting, --set routing, decoding, defaults and cross-checks. */
#include "config/config_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* An installed dlsim finds its data beside itself (bin/../share/dlsim), wherever the prefix
 * was moved to; a binary in a build tree has none there and uses the source tree it was built
 * from. */
static char *cfg_installed_data_dir(void)
{
  g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
  if (!exe)
    return NULL;
  g_autofree char *bindir = g_path_get_dirname(exe);
  g_autofree char *dir = g_build_filename(bindir, DLSIM_DATA_RELATIVE, NULL);
  g_autofree char *configs = g_build_filename(dir, "configs", NULL);
  return g_file_test(configs, G_FILE_TEST_IS_DIR) ? g_canonicalize_filename(dir, NULL) : NULL;
}

char *cfg_data_path(const char *first, ...)
{
  const char *env = g_getenv("DLSIM_DATA_DIR");
  char *root = env && *env ? g_strdup(env) : cfg_installed_data_dir();
  if (!root)
    root = g_strdup(DLSIM_DATA_DIR);
  GPtrArray *parts = g_ptr_array_new();
  g_ptr_array_add(parts, root);
  va_list ap;
  va_start(ap, first);
  for (const char *p = first; p; p = va_arg(ap, const char *))
    g_ptr_array_add(parts, (gpointer)p);
  va_end(ap);
  g_ptr_array_add(parts, NULL);
  char *path = g_build_filenamev((char **)parts->pdata);
  g_ptr_array_free(parts, TRUE);
  g_free(root);
  return path;
}

char *cfg_resolve(const char *name, const char *kind, const char *relative_to)
{
  if (g_file_test(name, G_FILE_TEST_IS_REGULAR))
    return g_strdup(name);
  g_autofree char *file = g_str_has_suffix(name, ".yaml") ? g_strdup(name)
                                                          : g_strdup_printf("%s.yaml", name);
  if (relative_to) {
    g_autofree char *dir = g_path_get_dirname(relative_to);
    /* the sibling folder of presets first: a workload and its model may share a name */
    char *cands[] = {g_build_filename(dir, "..", kind, file, NULL),
                     g_build_filename(dir, file, NULL)};
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++) {
      if (g_file_test(cands[i], G_FILE_TEST_IS_REGULAR)) {
        for (size_t j = 0; j < G_N_ELEMENTS(cands); j++)
          if (j != i)
            g_free(cands[j]);
        return cands[i];
      }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++)
      g_free(cands[i]);
  }
  char *preset = cfg_data_path("configs", kind, file, NULL);
  if (g_file_test(preset, G_FILE_TEST_IS_REGULAR))
    return preset;
  g_free(preset);
  return NULL;
}

static int cfg_compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *cfg_presets_list(const char *kind)
{
  g_autofree char *dir = cfg_data_path("configs", kind, NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  if (!d)
    return g_strdup("none");
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *e;
  while ((e = g_dir_read_name(d)))
    if (g_str_has_suffix(e, ".yaml"))
      g_ptr_array_add(names, g_strndup(e, strlen(e) - 5));
  g_dir_close(d);
  g_ptr_array_sort(names, cfg_compare_names);
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < names->len; i++)
    g_string_append_printf(out, "%s%s", i ? ", " : "", (char *)g_ptr_array_index(names, i));
  g_ptr_array_free(names, TRUE);
  return g_string_free(out, FALSE);
}

/* " (did you mean 'X'?)" for the preset of `kind` closest to `word`, or "". */
static char *cfg_presets_hint(const char *kind, const char *word)
{
  g_autofree char *list = cfg_presets_list(kind);
  g_auto(GStrv) names = g_strsplit(list, ", ", -1);
  const char *near = cfg_closest(word, (const char *const *)names, g_strv_length(names));
  return near ? g_strdup_printf(" (did you mean '%s'?)", near) : g_strdup("");
}

static cfg_doc *cfg_load_named(const char *name, const char *kind, GError **err)
{
  g_autofree char *path = cfg_resolve(name, kind, NULL);
  if (!path) {
    g_autofree char *list = cfg_presets_list(kind);
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: no such file, and no preset of that name in configs/%s (presets: %s)", name,
                kind, list);
    return NULL;
  }
  return cfg_doc_load(path, err);
}

/* A model read from a file is named after the file unless it names itself. */
static void cfg_name_model(cfg_node *model, const char *path)
{
  if (cfg_map_get(model, "name"))
    return;
  g_autofree char *base = g_path_get_basename(path);
  if (g_str_has_suffix(base, ".yaml"))
    base[strlen(base) - 5] = '\0';
  cfg_node *n = cfg_node_new(CFG_NODE_SCALAR, model->file, 0, 0);
  n->scalar = g_strdup(base);
  cfg_map_put(model, "name", n);
}

/* Moves the keys of `other` onto `base`, mappings merged key by key. Where both hold a key,
 * `other` wins (an overlay: a preset's keys under a workload's) or `base` does, keeping its value
 * and its place in its file for errors (a fill: a framework profile's defaults). */
static void cfg_map_merge(cfg_node *base, cfg_node *other, bool other_wins)
{
  for (guint i = 0; i < other->items->len; i++) {
    cfg_pair *o = g_ptr_array_index(other->items, i);
    cfg_node *b = cfg_map_get(base, o->key);
    if (b && b->kind == CFG_NODE_MAP && o->value->kind == CFG_NODE_MAP) {
      cfg_map_merge(b, o->value, other_wins);
      continue;
    }
    if (b && !other_wins)
      continue;
    cfg_map_put(base, o->key, o->value);
    o->value = NULL;
  }
}

/* The mapping in the file at `path` (a model or a framework profile) as a tree; `what` names the
 * key that referred to it, for errors. */
static cfg_node *cfg_read_map(cfg_doc *doc, const cfg_node *ref, const char *what,
                              const char *path, GError **err)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL)) {
    cfg_set_error_node(err, ref, "%s: cannot read '%s'", what, path);
    return NULL;
  }
  cfg_node *model = cfg_tree_parse(doc, text, path, err);
  if (model && model->kind != CFG_NODE_MAP) {
    cfg_set_error_node(err, ref, "%s: '%s' is not a mapping", what, path);
    cfg_node_free(model);
    return NULL;
  }
  return model;
}

/* The model file at `path` as a tree named after the file. */
static cfg_node *cfg_read_model(cfg_doc *doc, const cfg_node *ref, const char *what,
                                const char *path, GError **err)
{
  cfg_node *model = cfg_read_map(doc, ref, what, path, err);
  if (model)
    cfg_name_model(model, path);
  return model;
}

/* `model: {preset: NAME, KEY: VALUE...}`: the model file NAME with those keys changed. A `preset`
 * that names no model file stays what it was, a CNN's architecture (resnet18...). */
static bool cfg_graft_model_preset(cfg_doc *doc, cfg_pair *p, const char *what, GError **err)
{
  cfg_pair *pre = cfg_map_find(p->value, "preset");
  if (!pre || pre->value->kind != CFG_NODE_SCALAR)
    return true;
  const cfg_node *ref = pre->value;
  g_autofree char *path = cfg_resolve(ref->scalar, "models", ref->line ? ref->file : NULL);
  if (!path)
    return true;
  g_autofree char *key = g_strdup_printf("%s.preset", what);
  cfg_node *model = cfg_read_model(doc, ref, key, path, err);
  if (!model)
    return false;
  g_ptr_array_remove(p->value->items, pre); /* the file's own preset, if any, stays */
  g_free(pre->key);
  cfg_node_free(pre->value);
  g_free(pre);
  cfg_map_merge(model, p->value, true);
  cfg_node_free(p->value);
  p->value = model;
  return true;
}

/* Replaces `KEY: NAME` of `map` (the workload's model, a draft model) by the mapping of the
 * model file it names; `what` is its dotted path, for errors. */
static bool cfg_graft_model_at(cfg_doc *doc, cfg_node *map, const char *key, const char *what,
                               GError **err)
{
  cfg_pair *p = map && map->kind == CFG_NODE_MAP ? cfg_map_find(map, key) : NULL;
  if (p && p->value->kind == CFG_NODE_MAP)
    return cfg_graft_model_preset(doc, p, what, err);
  if (!p || p->value->kind != CFG_NODE_SCALAR)
    return true;
  const cfg_node *ref = p->value;
  g_autofree char *path = cfg_resolve(ref->scalar, "models", ref->line ? ref->file : NULL);
  if (!path) {
    g_autofree char *list = cfg_presets_list("models");
    cfg_set_error_node(err, ref, "%s: no model file '%s' (presets: %s)", what, ref->scalar, list);
    return false;
  }
  cfg_node *model = cfg_read_model(doc, ref, what, path, err);
  if (!model)
    return false;
  cfg_node_free(p->value);
  p->value = model;
  return true;
}

/* The workload's model and a speculative draft model, when named by preset. */
static bool cfg_graft_model(cfg_doc *doc, GError **err)
{
  cfg_node *serving = cfg_map_get(doc->root, "serving");
  cfg_node *spec = serving && serving->kind == CFG_NODE_MAP ? cfg_map_get(serving, "speculative")
                                                            : NULL;
  return cfg_graft_model_at(doc, doc->root, "model", "model", err) &&
         cfg_graft_model_at(doc, spec, "draft", "serving.speculative.draft", err);
}

/* A profile: a key naming a file of defaults for some sections of the workload. */
typedef struct {
  const char *section, *key; /* training.framework, serving.engine */
  const char *kind;          /* its folder of configs/ */
  const char *what;          /* for errors: "framework profile" */
  const char *const *allowed;/* the sections it may hold, NULL-terminated */
} cfg_profile;

static const char *const cfg_framework_sections[] = {"training", "parallel", "collectives", "memory", NULL};
static const char *const cfg_engine_sections[] = {"serving", NULL};
static const char *const cfg_runtime_sections[] = {"collectives", NULL};
static const cfg_profile cfg_profiles[] = {
    {"training", "framework", "frameworks", "framework profile", cfg_framework_sections},
    {"serving", "engine", "engines", "serving engine profile", cfg_engine_sections},
    {"collectives", "runtime", "runtimes", "runtime profile", cfg_runtime_sections},
};

static bool cfg_profile_sections_ok(const cfg_profile *pr, const cfg_node *profile,
                                    const cfg_node *ref, const char *path, GError **err)
{
  for (guint i = 0; i < profile->items->len; i++) {
    const cfg_pair *q = g_ptr_array_index(profile->items, i);
    bool ok = false;
    for (int k = 0; pr->allowed[k]; k++)
      ok |= strcmp(q->key, pr->allowed[k]) == 0 && q->value->kind == CFG_NODE_MAP;
    if (!ok) {
      g_autofree char *list = g_strjoinv(", ", (char **)pr->allowed);
      cfg_set_error_node(err, ref, "%s.%s: '%s' may hold only the sections %s (found '%s')",
                         pr->section, pr->key, path, list, q->key);
      return false;
    }
  }
  return true;
}

/* `training.framework: NAME` (configs/frameworks: the framework's defaults for attention
 * kernels, gradient dtype and buckets, sharding) or `serving.engine: NAME` (configs/engines:
 * the engine's scheduler, batch limits, KV cache and overheads): the profile goes under the
 * workload's own keys, so that what the workload or a --set states wins. */
static bool cfg_graft_profile(cfg_doc *doc, const cfg_profile *pr, GError **err)
{
  cfg_node *section = cfg_map_get(doc->root, pr->section);
  cfg_node *ref = section && section->kind == CFG_NODE_MAP ? cfg_map_get(section, pr->key) : NULL;
  if (!ref || ref->kind != CFG_NODE_SCALAR || strcmp(ref->scalar, "none") == 0)
    return true;
  g_autofree char *path = cfg_resolve(ref->scalar, pr->kind, NULL);
  g_autofree char *where = g_strdup_printf("%s.%s", pr->section, pr->key);
  if (!path) {
    g_autofree char *list = cfg_presets_list(pr->kind);
    g_autofree char *hint = cfg_presets_hint(pr->kind, ref->scalar);
    cfg_set_error_node(err, ref, "%s: no %s '%s'%s (profiles: none, %s)", where, pr->what,
                       ref->scalar, hint, list);
    return false;
  }
  cfg_node *profile = cfg_read_map(doc, ref, where, path, err);
  if (!profile || !cfg_profile_sections_ok(pr, profile, ref, path, err)) {
    cfg_node_free(profile);
    return false;
  }
  cfg_map_merge(doc->root, profile, false);
  cfg_node_free(profile);
  return true;
}

static bool cfg_graft_profiles(cfg_doc *doc, GError **err)
{
  for (size_t i = 0; i < G_N_ELEMENTS(cfg_profiles); i++)
    if (!cfg_graft_profile(doc, &cfg_profiles[i], err))
      return false;
  return true;
}

bool cfg_override_parse(const char *text, cfg_override *out, GError **err)
{
  const char *eq = strchr(text, '=');
  if (!eq || eq == text || !eq[1]) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--set %s: expected KEY=VALUE, as in --set parallel.tp=4", text);
    return false;
  }
  out->path = g_strstrip(g_strndup(text, (gsize)(eq - text)));
  out->value = g_strstrip(g_strdup(eq + 1));
  return true;
}

void cfg_override_clear(cfg_override *o)
{
  g_clear_pointer(&o->path, g_free);
  g_clear_pointer(&o->value, g_free);
}

/* Whether the workload's model, as the tree holds it, is a CNN. */
static bool cfg_model_is_cnn(const cfg_doc *workload)
{
  const cfg_node *model = cfg_map_get(workload->root, "model");
  const cfg_node *kind = model && model->kind == CFG_NODE_MAP ? cfg_map_get(model, "kind") : NULL;
  return kind && kind->kind == CFG_NODE_SCALAR && strcmp(kind->scalar, "cnn") == 0;
}

/* Routes an override to the cluster or the workload by its first key. */
static bool cfg_apply_override(cfg_doc *cluster, cfg_doc *workload, const cfg_override *o,
                               GError **err)
{
  const char *path = o->path;
  g_autofree char *first = g_strdup(path);
  char *dot = strpbrk(first, ".[");
  if (dot)
    *dot = '\0';
  cfg_doc *target = NULL;
  const cfg_schema *schema = NULL;
  if (strcmp(first, "cluster") == 0 && dot) {
    target = cluster, schema = &cfg_schema_cluster, path += strlen("cluster.");
  } else if (strcmp(first, "workload") == 0 && dot) {
    target = workload, schema = &cfg_schema_workload, path += strlen("workload.");
  } else if (cfg_schema_has_key(&cfg_schema_cluster, first)) {
    target = cluster, schema = &cfg_schema_cluster;
  } else if (cfg_schema_has_key(&cfg_schema_workload, first)) {
    target = workload, schema = &cfg_schema_workload;
  } else {
    const char *keys[] = {"name", "gpu", "node", "network", "model", "training",
                          "parallel", "serving", "collectives"};
    const char *near = cfg_closest(first, keys, G_N_ELEMENTS(keys));
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--set %s: unknown key '%s'%s%s%s (cluster keys: name, gpu, node, network; "
                "workload keys: model, training, parallel, serving, collectives)",
                o->path, first, near ? " (did you mean '" : "", near ? near : "",
                near ? "'?)" : "");
    return false;
  }
  if (!target) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: this command has no %s file",
                o->path, schema == &cfg_schema_cluster ? "cluster" : "workload");
    return false;
  }
  /* `--set model=NAME` names another model file or preset (a draft model too): grafted after
   * the overrides */
  if (target == workload && (strcmp(path, "model") == 0 ||
                             strcmp(path, "serving.speculative.draft") == 0))
    return cfg_tree_set(target, path, o->value, err);
  if (target == workload && strcmp(path, "model.preset") == 0 && !cfg_model_is_cnn(workload)) {
    /* grafted under the model already there, it would change nothing: say so */
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--set model.preset=%s: model.preset names a CNN's architecture; to run another "
                "model, use --set model=%s", o->value, o->value);
    return false;
  }
  /* another CNN architecture is another model: it is named after it, not after the file */
  if (target == workload && strcmp(path, "model.preset") == 0 &&
      !cfg_tree_set(target, "model.name", o->value, err))
    return false;
  if (!cfg_schema_check_path(schema, path, err))
    return false;
  return cfg_tree_set(target, path, o->value, err);
}

/* ---- defaults and checks ------------------------------------------------------------------ */

static bool cfg_fail(GError **err, const cfg_doc *doc, const char *path, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
static bool cfg_fail(GError **err, const cfg_doc *doc, const char *path, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_autofree char *where = cfg_doc_where(doc, path);
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s", where, msg);
  return false;
}

#define CFG_DEFAULT_INT(v, d)                                                                     \
  do {                                                                                            \
    if ((int)(v) == CFG_UNSET_INT)                                                                \
      (v) = (d);                                                                                  \
  } while (0)
#define CFG_DEFAULT_QTY(v, d)                                                                     \
  do {                                                                                            \
    if (isnan(v))                                                                                 \
      (v) = (d);                                                                                  \
  } while (0)

/* One non-blocking switch over all nodes when no tier is given: the common case of a small
 * cluster (its keys take the tables' defaults). */
static void cfg_one_switch(cfg_network *net)
{
  if (net->ntiers > 0)
    return;
  net->tiers = g_new0(cfg_tier, 1);
  net->ntiers = 1;
  cfg_schema_init(&cfg_schema_tier, net->tiers);
  net->tiers[0].name = g_strdup("leaf");
}

bool cfg_background_select(const char *links, cfg_bg_select *out)
{
  char tail;
  *out = (cfg_bg_select){.node = -1, .rail = -1, .uplink = -1};
  if (strcmp(links, "spine") == 0) {
    out->spine = true;
    return true;
  }
  return sscanf(links, "node %d rail %d %c", &out->node, &out->rail, &tail) == 2 ||
         sscanf(links, "node %d %c", &out->node, &tail) == 1 ||
         sscanf(links, "rail %d %c", &out->rail, &tail) == 1 ||
         sscanf(links, "uplink %d %c", &out->uplink, &tail) == 1;
}

/* One background flow: a selector the hardware module can resolve, one rate, a direction. */
static bool cfg_background_check(cfg_background *b, int i, const cfg_cluster *c, const cfg_doc *d,
                                 GError **err)
{
  int nodes = c->node.count;
  g_autofree char *path = g_strdup_printf("network.background.%d", i);
  if (!b->links)
    return cfg_fail(err, d, path, "%s: missing required key 'links'", path);
  cfg_bg_select sel;
  if (!cfg_background_select(b->links, &sel))
    return cfg_fail(err, d, path, "%s.links = '%s': expected node N, node N rail K, rail K, "
                    "uplink G or spine", path, b->links);
  const cfg_network *net = &c->network;
  int leaves = (nodes + net->tiers[0].nodes_per_switch - 1) / net->tiers[0].nodes_per_switch;
  if (sel.node >= nodes || sel.rail >= c->node.nics_per_node || sel.uplink >= leaves ||
      ((sel.spine || sel.uplink >= 0) && net->ntiers < 2))
    return cfg_fail(err, d, path, "%s.links = '%s': no such links (%d nodes of %d NICs, leaf "
                    "groups 0-%d, %d tiers)", path, b->links, nodes, c->node.nics_per_node, leaves - 1,
                    net->ntiers);
  if (nodes < 2)
    return cfg_fail(err, d, path, "%s: background traffic loads network links, and a cluster "
                    "of one node has none", path);
  if (strcmp(b->direction, "up") && strcmp(b->direction, "down") && strcmp(b->direction, "both"))
    return cfg_fail(err, d, path, "%s.direction = '%s': expected up, down or both", path,
                    b->direction);
  if (isnan(b->fraction) == isnan(b->bandwidth))
    return cfg_fail(err, d, path, "%s: give either 'fraction' or 'bandwidth'", path);
  if (!isnan(b->fraction) && !(b->fraction > 0 && b->fraction <= 1))
    return cfg_fail(err, d, path, "%s.fraction = %g: expected a share in (0, 1]", path,
                    b->fraction);
  if (!isnan(b->bandwidth) && !(b->bandwidth > 0))
    return cfg_fail(err, d, path, "%s.bandwidth: must be > 0", path);
  if (b->start < 0 || b->duration < 0)
    return cfg_fail(err, d, path, "%s: start and duration must be >= 0", path);
  return true;
}

/* An NVLink domain is whole nodes on one NVSwitch fabric (the last one may be partly filled). */
static bool cfg_domain_check(cfg_node_spec *n, const cfg_doc *d, GError **err)
{
  CFG_DEFAULT_INT(n->nvlink_domain, n->gpus_per_node);
  if (n->nvlink_domain % n->gpus_per_node != 0)
    return cfg_fail(err, d, "node.nvlink_domain",
                    "node.nvlink_domain = %d: expected a multiple of node.gpus_per_node (%d)",
                    n->nvlink_domain, n->gpus_per_node);
  if (n->nvlink_domain == n->gpus_per_node)
    return true;
  if (n->intra.kind != CFG_INTRA_NVSWITCH)
    return cfg_fail(err, d, "node.nvlink_domain",
                    "node.nvlink_domain = %d spans nodes: needs node.intra.kind nvswitch",
                    n->nvlink_domain);
  return true;
}

/* What PyTorch eager reaches on a CPU socket, where the cluster file and its calibration say
 * nothing (dlsim's documented assumptions, not a fit: README "CPU nodes"): oneDNN GEMMs at
 * about half of the AVX-512 / AMX peak, convolutions and unfused attention (batched matmuls
 * and a softmax) lower, each op paying ~10 us of dispatch, no tile pipeline to fill (AMX tiles
 * are 32 deep in K) and no clock drop beyond the base clock the peaks are quoted at. */
static void cfg_cpu_efficiency_defaults(cfg_efficiency *e)
{
  static const double flops[CFG_NKCLASSES] = {0.50, 0.40, 0.25, 0.50, 0.50, 0.30};
  for (int k = 0; k < CFG_NKCLASSES; k++)
    if (isnan(e->flops_efficiency[k]))
      e->flops_efficiency[k] = flops[k];
  CFG_DEFAULT_QTY(e->memory_efficiency, 0.80); /* STREAM triad: ~80 % of DDR wire rate */
  CFG_DEFAULT_QTY(e->gemm_k_half, 32);
  CFG_DEFAULT_QTY(e->sustained, 1.0);
  CFG_DEFAULT_QTY(e->launch_overhead, 10e-6);
  for (int k = 0; k < CFG_NKCLASSES; k++) /* no CPU measurement: no interference */
    if (isnan(e->interference[k]))
      e->interference[k] = 1.0;
  if (!e->source)
    e->source = g_strdup("dlsim CPU defaults (assumed, not calibrated)");
}

static bool cfg_cluster_check(cfg_cluster *c, GError **err)
{
  const cfg_doc *d = c->doc;
  if (!c->name)
    c->name = g_strdup("cluster");
  if (!c->gpu.name)
    c->gpu.name = g_strdup("gpu");
  if (isnan(c->gpu.memory))
    return cfg_fail(err, d, "gpu", "gpu: missing required key 'memory' (for example 80GiB)");
  if (!(c->gpu.memory > 0))
    return cfg_fail(err, d, "gpu.memory", "gpu.memory: must be > 0 (for example 80GiB)");
  if (isnan(c->gpu.memory_bandwidth))
    return cfg_fail(err, d, "gpu",
                    "gpu: missing required key 'memory_bandwidth' (for example 3.35TB/s)");
  if (!(c->gpu.memory_bandwidth > 0))
    return cfg_fail(err, d, "gpu.memory_bandwidth",
                    "gpu.memory_bandwidth: must be > 0 (for example 3.35TB/s)");
  bool any_flops = false;
  for (int k = 0; k < CFG_NDTYPES; k++)
    any_flops |= !isnan(c->gpu.flops[k]) && c->gpu.flops[k] > 0;
  if (!any_flops && c->gpu.kind == CFG_DEVICE_CPU)
    return cfg_fail(err, d, "gpu",
                    "gpu: missing required key 'flops': a CPU device needs its socket's peaks "
                    "(for example {fp32: 7.168TFLOPS, bf16: 114.688TFLOPS}: cores x clock x FLOP "
                    "per cycle)");
  if (!any_flops)
    return cfg_fail(err, d, "gpu",
                    "gpu: missing required key 'flops' (for example {bf16: 989TFLOPS})");
  g_autofree char *cal_base = c->gpu.calibration ? g_path_get_basename(c->gpu.calibration) : NULL;
  if (cal_base && strcmp(cal_base, "none") == 0)
    g_clear_pointer(&c->gpu.calibration, g_free); /* `calibration: none` drops the preset's */
  if (c->gpu.calibration) {
    cfg_calibration file;
    GError *inner = NULL;
    if (!cfg_calibration_load(c->gpu.calibration, &file, &inner)) {
      g_autofree char *where = cfg_doc_where(d, "gpu.calibration");
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: gpu.calibration: %s", where,
                  inner->message);
      g_error_free(inner);
      return false;
    }
    cfg_merge(&cfg_schema_efficiency, &c->gpu.efficiency, &file.efficiency);
    cfg_merge(&cfg_schema_nccl, &c->nccl, &file.nccl);
    cfg_calibration_clear(&file);
  }
  if (c->gpu.kind == CFG_DEVICE_CPU)
    cfg_cpu_efficiency_defaults(&c->gpu.efficiency);
  cfg_one_switch(&c->network);
  /* every constant default of the tables, after the calibration file filled what it sets */
  cfg_defaults(&cfg_schema_cluster, c);
  /* nvidia-smi refuses a limit above the board's: a cap only lowers the clock */
  if (c->gpu.power_limit > c->power.gpu_tdp)
    return cfg_fail(err, d, "gpu.power_limit",
                    "gpu.power_limit: %g W is above power.gpu_tdp (%g W); expected 0 (no cap) "
                    "or a cap up to it",
                    c->gpu.power_limit, c->power.gpu_tdp);
  for (int k = 0; k < CFG_NKCLASSES; k++)
    if (c->gpu.efficiency.flops_efficiency[k] <= 0)
      return cfg_fail(err, d, "gpu.efficiency", "gpu.efficiency.flops.%s: must be > 0",
                      cfg_kernel_class_name((cfg_kernel_class)k));
  for (int k = 0; k < CFG_NKCLASSES; k++)
    if (!(c->gpu.efficiency.interference[k] >= 1))
      return cfg_fail(err, d, "gpu.efficiency.interference",
                      "gpu.efficiency.interference.%s = %g: expected a factor >= 1",
                      cfg_kernel_class_name((cfg_kernel_class)k),
                      c->gpu.efficiency.interference[k]);
  if (c->gpu.efficiency.memory_efficiency <= 0)
    return cfg_fail(err, d, "gpu.efficiency", "gpu.efficiency.memory: must be > 0");
  if (!(c->gpu.efficiency.sustained > 0 && c->gpu.efficiency.sustained <= 1))
    return cfg_fail(err, d, "gpu.efficiency", "gpu.efficiency.sustained: must be in (0, 1]");
  if (c->gpu.efficiency.gemm_k_half < 0)
    return cfg_fail(err, d, "gpu.efficiency", "gpu.efficiency.gemm_k_half: must be >= 0");
  if (c->gpu.efficiency.gemm_tile_load < 0)
    return cfg_fail(err, d, "gpu.efficiency", "gpu.efficiency.gemm_tile_load: must be >= 0");
  for (int k = 0; k < CFG_NLINKCLASSES; k++)
    if (c->nccl.link_efficiency[k] <= 0)
      return cfg_fail(err, d, "nccl.link_efficiency", "nccl.link_efficiency: must be > 0");
  for (int p = 0; p < CFG_NPROTOS; p++)
    if (c->nccl.protocol_efficiency[p] <= 0)
      return cfg_fail(err, d, "nccl.protocol_efficiency", "nccl.protocol_efficiency: must be > 0");
  if (c->nccl.nvls_efficiency <= 0 || c->nccl.p2p_efficiency <= 0)
    return cfg_fail(err, d, "nccl", "nccl.nvls_efficiency and nccl.p2p_efficiency: must be > 0");

  cfg_node_spec *n = &c->node;
  if (n->gpus_per_node == CFG_UNSET_INT)
    return cfg_fail(err, d, "node", "node: missing required key 'gpus_per_node'");
  if (n->gpus_per_node > 1 && isnan(n->intra.bandwidth))
    return cfg_fail(err, d, "node",
                    "node.intra: missing required key 'bandwidth' (the node has %d GPUs)",
                    n->gpus_per_node);
  CFG_DEFAULT_QTY(n->intra.bandwidth, 0);
  if (n->intra.nvls && n->intra.kind != CFG_INTRA_NVSWITCH)
    return cfg_fail(err, d, "node.intra.nvls", "node.intra.nvls: needs kind nvswitch");
  if (n->gpus_per_node > 1 && n->intra.bandwidth <= 0)
    return cfg_fail(err, d, "node.intra.bandwidth", "node.intra.bandwidth: must be > 0");
  gint64 gpus = (gint64)n->count * n->gpus_per_node;
  if (gpus > CFG_MAX_GPUS)
    return cfg_fail(err, d, "node.count",
                    "node.count x node.gpus_per_node = %d x %d = %" G_GINT64_FORMAT " GPUs: dlsim "
                    "simulates clusters of at most %d GPUs", n->count, n->gpus_per_node, gpus,
                    CFG_MAX_GPUS);
  CFG_DEFAULT_INT(n->nics_per_node, n->count > 1 ? n->gpus_per_node : 0);
  if (!cfg_domain_check(n, d, err))
    return false;

  cfg_network *net = &c->network;
  if (n->count > 1) {
    if (isnan(net->nic_bandwidth) || net->nic_bandwidth <= 0)
      return cfg_fail(err, d, "network",
                      "network: missing required key 'nic_bandwidth' (the cluster has %d nodes)",
                      n->count);
    if (n->nics_per_node < 1)
      return cfg_fail(err, d, "node.nics_per_node",
                      "node.nics_per_node: must be >= 1 when there is more than one node");
  }
  CFG_DEFAULT_QTY(net->nic_bandwidth, 0);
  int below = 1, trays = n->nvlink_domain / n->gpus_per_node;
  for (int i = 0; i < net->ntiers; i++) {
    cfg_tier *t = &net->tiers[i];
    g_autofree char *path = g_strdup_printf("network.tiers.%d", i);
    if (!t->name)
      t->name = g_strdup_printf("tier%d", i);
    if (t->oversubscription < 1.0)
      return cfg_fail(err, d, path, "%s.oversubscription: must be >= 1 (1 = full bisection)", path);
    bool top = i == net->ntiers - 1;
    if (t->nodes_per_switch == CFG_UNSET_INT) {
      if (!top)
        return cfg_fail(err, d, path, "%s: missing required key 'nodes_per_switch'", path);
      t->nodes_per_switch = (MAX(n->count, below) + below - 1) / below * below;
    }
    if (t->nodes_per_switch % below != 0)
      return cfg_fail(err, d, path,
                      "%s.nodes_per_switch = %d is not a multiple of the tier below (%d)", path,
                      t->nodes_per_switch, below);
    below = t->nodes_per_switch;
    if (below % trays != 0)
      return cfg_fail(err, d, path,
                      "%s.nodes_per_switch = %d splits an NVLink domain (node.nvlink_domain %d = "
                      "%d nodes): expected a multiple of %d", path, below, n->nvlink_domain,
                      trays, trays);
  }
  /* with NCCL's PXN no traffic changes rail in the network, so one tier of rails will do */
  if (net->topology == CFG_TOPO_RAIL_OPTIMIZED && net->rails == CFG_RAILS_SPINE && n->count > 1 &&
      net->ntiers < 2 && !c->nccl.pxn)
    return cfg_fail(err, d, "network.rails",
                    "network.rails: spine needs a spine (network.tiers with at least two tiers) "
                    "when nccl.pxn is off; with one tier set rails: only");
  if (below < n->count)
    return cfg_fail(err, d, "network.tiers",
                    "network.tiers: the top tier spans %d nodes but the cluster has %d", below,
                    n->count);
  for (int i = 0; i < net->nbackground; i++)
    if (!cfg_background_check(&net->background[i], i, c, d, err))
      return false;
  return true;
}

/* Defaults and checks of the routing of a mixture-of-experts layer. */
static bool cfg_moe_check(cfg_moe *m, int layers, const cfg_doc *d, GError **err)
{
  if (m->first_dense >= layers)
    return cfg_fail(err, d, "model.moe.first_dense",
                    "model.moe.first_dense = %d leaves no MoE layer among %d layers",
                    m->first_dense, layers);
  if (m->routing == CFG_ROUTING_HISTOGRAM && !m->histogram)
    return cfg_fail(err, d, "model.moe.routing",
                    "model.moe.routing = histogram needs model.moe.histogram (a file of "
                    "per-expert loads)");
  if (!(m->zipf_s > 0))
    return cfg_fail(err, d, "model.moe.zipf_s", "model.moe.zipf_s: expected a number > 0");
  if (m->capacity_factor < 0 || (m->capacity_factor > 0 && m->capacity_factor < 1))
    return cfg_fail(err, d, "model.moe.capacity_factor",
                    "model.moe.capacity_factor = %g: expected 0 (unbounded) or >= 1",
                    m->capacity_factor);
  if (m->drop_tokens && m->capacity_factor == 0)
    return cfg_fail(err, d, "model.moe.drop_tokens",
                    "model.moe.drop_tokens needs a model.moe.capacity_factor");
  return true;
}

static bool cfg_mla_check(cfg_mla *m, const cfg_doc *d, GError **err)
{
  bool any = m->q_rank != CFG_UNSET_INT || m->kv_rank != CFG_UNSET_INT || m->rope_dim != CFG_UNSET_INT;
  if (!any) {
    m->q_rank = m->kv_rank = m->rope_dim = 0;
    return true;
  }
  if (m->q_rank == CFG_UNSET_INT || m->kv_rank == CFG_UNSET_INT)
    return cfg_fail(err, d, "model.mla", "model.mla: 'q_rank' and 'kv_rank' are required");
  CFG_DEFAULT_INT(m->rope_dim, 0);
  return true;
}

static bool cfg_model_check(cfg_model *m, const cfg_doc *d, GError **err)
{
  if (!m->name)
    m->name = g_strdup(m->kind == CFG_MODEL_CNN && m->preset ? m->preset : "model");
  if (m->kind == CFG_MODEL_GENERIC) {
    if (isnan(m->params) || m->params <= 0)
      return cfg_fail(err, d, "model", "model: a generic model needs 'params' (for example 7.5e9)");
    CFG_DEFAULT_QTY(m->largest_layer_params, 0);
    CFG_DEFAULT_INT(m->seq_len, 2048);
    return true;
  }
  if (m->kind == CFG_MODEL_CNN) {
    if (!m->preset)
      return cfg_fail(err, d, "model", "model: a cnn needs 'preset' (for example resnet50)");
    return true;
  }
  const char *need[] = {"layers", "hidden", "heads", "vocab", "seq_len"};
  const int have[] = {m->layers, m->hidden, m->heads, m->vocab, m->seq_len};
  for (size_t i = 0; i < G_N_ELEMENTS(need); i++)
    if (have[i] == CFG_UNSET_INT)
      return cfg_fail(err, d, "model", "model: missing required key '%s'", need[i]);
  CFG_DEFAULT_INT(m->kv_heads, m->heads);
  if (m->hidden > CFG_MAX_HIDDEN)
    return cfg_fail(err, d, "model.hidden", "model.hidden = %d: at most %d", m->hidden,
                    CFG_MAX_HIDDEN);
  CFG_DEFAULT_INT(m->ffn_hidden, 4 * m->hidden);
  CFG_DEFAULT_INT(m->tied_embeddings, m->activation == CFG_ACT_GELU);
  if (m->head_dim == CFG_UNSET_INT && m->hidden % m->heads != 0)
    return cfg_fail(err, d, "model.heads", "model.heads = %d does not divide hidden = %d",
                    m->heads, m->hidden);
  CFG_DEFAULT_INT(m->head_dim, m->hidden / m->heads);
  if (!cfg_mla_check(&m->mla, d, err))
    return false;
  if (m->heads % m->kv_heads != 0)
    return cfg_fail(err, d, "model.kv_heads", "model.kv_heads = %d does not divide heads = %d",
                    m->kv_heads, m->heads);
  if (m->kind == CFG_MODEL_MOE_TRANSFORMER) {
    if (m->moe.experts == CFG_UNSET_INT || m->moe.top_k == CFG_UNSET_INT)
      return cfg_fail(err, d, "model", "model.moe: 'experts' and 'top_k' are required");
    CFG_DEFAULT_INT(m->moe.expert_ffn_hidden, m->ffn_hidden);
    CFG_DEFAULT_INT(m->moe.shared_experts, 0);
    CFG_DEFAULT_INT(m->moe.every, 1);
    if (m->moe.top_k > m->moe.experts)
      return cfg_fail(err, d, "model.moe.top_k", "model.moe.top_k = %d exceeds experts = %d",
                      m->moe.top_k, m->moe.experts);
    if (!cfg_moe_check(&m->moe, m->layers, d, err))
      return false;
  }
  return true;
}

/* Each degree of parallelism at most the cluster's GPUs, and so their product computed in 64
 * bits: tp x pp x cp x dp of user numbers overflows an int long before it is checked. */
static bool cfg_degrees_fit(const cfg_parallel *p, int gpus, const cfg_doc *d, GError **err)
{
  const struct {
    const char *key;
    int v;
  } deg[] = {{"parallel.tp", p->tp}, {"parallel.pp", p->pp}, {"parallel.cp", p->cp},
             {"parallel.dp", p->dp}, {"parallel.ep", p->ep}};
  for (size_t i = 0; i < G_N_ELEMENTS(deg); i++)
    if (deg[i].v != CFG_UNSET_INT && deg[i].v > gpus)
      return cfg_fail(err, d, deg[i].key, "%s = %d, but the cluster has %d GPUs", deg[i].key,
                      deg[i].v, gpus);
  gint64 inner = (gint64)p->tp * p->pp * p->cp;
  if (inner > gpus)
    return cfg_fail(err, d, "parallel",
                    "parallel: tp*pp*cp = %d*%d*%d = %" G_GINT64_FORMAT ", but the cluster has %d GPUs",
                    p->tp, p->pp, p->cp, inner, gpus);
  return true;
}

/* A data type needs its tensor-core unit (gpu.flops); MXFP8 also Blackwell's hardware block
 * scaling, which the FP4 unit stands for (Hopper scales FP8 blocks in software: fp8-block). */
static bool cfg_dtype_runs_on(const cfg_cluster *c, cfg_dtype dt, const cfg_doc *d, const char *key,
                              GError **err)
{
  cfg_dtype unit = dt == CFG_MXFP8 ? CFG_FP4 : cfg_dtype_unit(dt);
  if (!isnan(c->gpu.flops[unit]) && c->gpu.flops[unit] > 0)
    return true;
  return cfg_fail(err, d, key, "%s = %s, but the cluster's gpu.flops has no %s entry%s", key,
                  cfg_dtype_name(dt), cfg_dtype_name(unit),
                  unit == CFG_FP4 ? " (FP4 and MX tensor cores are Blackwell's: B200, GB200)" : "");
}

static bool cfg_training_check(cfg_workload *w, const cfg_cluster *c, GError **err)
{
  const cfg_doc *d = w->doc;
  cfg_training *t = &w->training;
  cfg_parallel *p = &w->parallel;
  if (t->global_batch == CFG_UNSET_INT)
    return cfg_fail(err, d, "training", "training: missing required key 'global_batch'");
  /* Megatron keeps fp32 main gradients; fp32 training has nothing narrower. */
  if (p->offload != CFG_OFFLOAD_NONE && p->zero == 0)
    return cfg_fail(err, d, "parallel.offload",
                    "parallel.offload = %s needs ZeRO (parallel.zero 1, 2 or 3)",
                    p->offload == CFG_OFFLOAD_CPU ? "cpu" : "nvme");
  if (t->grad_accum_pass != CFG_GRAD_ACCUM_CAST_ADD && !t->grad_accum_dtype)
    return cfg_fail(err, d, "training.grad_accum_pass",
                    "training.grad_accum_pass describes the buffer of training.grad_accum_dtype, "
                    "which is not set");
  if (t->grad_accum_dtype && p->zero > 1)
    return cfg_fail(err, d, "training.grad_accum_dtype",
                    "training.grad_accum_dtype is DeepSpeed's BF16 optimizer, which runs with "
                    "parallel.zero 0 or 1 (got %d)", p->zero);
  if (t->grad_accum_dtype && !t->grad_accum_fusion)
    return cfg_fail(err, d, "training.grad_accum_fusion",
                    "training.grad_accum_fusion = false is Megatron-LM's main-gradient hook; "
                    "training.grad_accum_dtype is DeepSpeed's BF16 optimizer's buffer: set one");
  if (p->offload_params && (p->zero != 3 || p->offload == CFG_OFFLOAD_NONE))
    return cfg_fail(err, d, "parallel.offload_params",
                    "parallel.offload_params needs parallel.zero 3 and an offload target");
  if (p->offload == CFG_OFFLOAD_NVME && !(c->node.nvme > 0))
    return cfg_fail(err, d, "parallel.offload",
                    "parallel.offload = nvme, but the cluster's nodes have no NVMe (node.nvme)");
  if (p->offload == CFG_OFFLOAD_CPU && !(c->node.cpu.flops > 0 && c->node.cpu.memory_bandwidth > 0))
    return cfg_fail(err, d, "parallel.offload",
                    "parallel.offload = cpu steps the optimizer on the host, but the cluster does "
                    "not give node.cpu.flops and node.cpu.memory_bandwidth (for example {flops: "
                    "9.2TFLOPS, memory_bandwidth: 409.6GB/s})");
  if (p->nplacement == 0) {
    const cfg_dim def[] = {CFG_DIM_TP, CFG_DIM_CP, CFG_DIM_PP, CFG_DIM_DP};
    memcpy(p->placement, def, sizeof def);
    p->nplacement = CFG_NDIMS;
  }
  unsigned seen = 0;
  for (int i = 0; i < p->nplacement; i++)
    seen |= 1u << p->placement[i];
  if (p->nplacement != CFG_NDIMS || seen != (1u << CFG_NDIMS) - 1)
    return cfg_fail(err, d, "parallel.placement",
                    "parallel.placement: expected each of tp, cp, pp, dp exactly once");
  if (!cfg_dtype_runs_on(c, t->dtype, d, "training.dtype", err))
    return false;
  if (t->fp8_params && cfg_dtype_unit(t->dtype) != CFG_FP8)
    return cfg_fail(err, d, "training.fp8_params",
                    "training.fp8_params: true needs an fp8 training.dtype (fp8, fp8-block or "
                    "mxfp8), not %s", cfg_dtype_name(t->dtype));

  if (c->gpu.kind == CFG_DEVICE_CPU && (w->collectives.progress == CFG_PROGRESS_KERNEL ||
                                        w->collectives.ucc_tl == CFG_UCC_TL_NCCL))
    return cfg_fail(err, d, "collectives.runtime",
                    "the cluster's devices are CPUs (gpu.kind: cpu), which NCCL does not run "
                    "on: use an MPI runtime or gloo (collectives.runtime: mpi-mvapich, mpi-ucx "
                    "or gloo)");
  if (p->processes_per_gpu > 1 && (w->collectives.progress == CFG_PROGRESS_KERNEL ||
                                   w->collectives.ucc_tl == CFG_UCC_TL_NCCL))
    return cfg_fail(err, d, "parallel.processes_per_gpu",
                    "parallel.processes_per_gpu = %d needs an MPI runtime (collectives.runtime: "
                    "mpi-mvapich or mpi-ucx): NCCL refuses two ranks on one GPU",
                    p->processes_per_gpu);
  /* with MPS every process is a rank: the degrees count processes */
  int gpus = cfg_cluster_gpus(c) * p->processes_per_gpu;
  if (!cfg_degrees_fit(p, gpus, d, err))
    return false;
  int inner = p->tp * p->pp * p->cp;
  if (p->dp == CFG_UNSET_INT) {
    if (gpus % inner != 0)
      return cfg_fail(err, d, "parallel",
                      "parallel: tp*pp*cp = %d does not divide the cluster's %d GPUs "
                      "(node.count %d x node.gpus_per_node %d)",
                      inner, gpus, c->node.count, c->node.gpus_per_node);
    p->dp = gpus / inner;
  } else if ((gint64)inner * p->dp != gpus) {
    return cfg_fail(err, d, "parallel.dp",
                    "parallel: tp*pp*dp*cp = %d*%d*%d*%d = %" G_GINT64_FORMAT ", but the cluster "
                    "has %d GPUs (node.count %d x node.gpus_per_node %d)",
                    p->tp, p->pp, p->dp, p->cp, (gint64)inner * p->dp, gpus, c->node.count,
                    c->node.gpus_per_node);
  }
  if (t->global_batch % p->dp != 0)
    return cfg_fail(err, d, "training.global_batch",
                    "training.global_batch = %d is not divisible by dp = %d", t->global_batch,
                    p->dp);
  int per_replica = t->global_batch / p->dp;
  if (per_replica % t->micro_batch != 0)
    return cfg_fail(err, d, "training.micro_batch",
                    "training.micro_batch = %d does not divide the per-replica batch %d "
                    "(global_batch %d / dp %d)",
                    t->micro_batch, per_replica, t->global_batch, p->dp);
  return true;
}

/* Two names of one key (the old one kept working): either, or both if they agree, or (an
 * engine profile may set the old name) the new one wins. Unset both: `def`. */
static bool cfg_same_key(int *key, int *alias, int def, bool alias_wins, const char *key_path,
                         const char *alias_path, const cfg_doc *d, GError **err)
{
  if (!alias_wins && *alias != CFG_UNSET_INT && *key != CFG_UNSET_INT && *alias != *key)
    return cfg_fail(err, d, alias_path, "%s = %d but %s = %d: they are the same key, give one",
                    alias_path, *alias, key_path, *key);
  if (*alias != CFG_UNSET_INT)
    *key = *alias;
  CFG_DEFAULT_INT(*key, def);
  *alias = *key;
  return true;
}

/* Only a closed loop has clients to start one by one; a warm-up leaves requests to measure. */
static bool cfg_ramp_check(const cfg_requests *r, const cfg_doc *d, GError **err)
{
  if (!r->trace && r->count != CFG_UNSET_INT && r->warmup >= r->count)
    return cfg_fail(err, d, "serving.requests.warmup",
                    "serving.requests.warmup = %d: must leave requests to measure (count is %d)",
                    r->warmup, r->count);
  if (r->ramp > 0 && r->concurrency <= 0)
    return cfg_fail(err, d, "serving.requests.ramp",
                    "serving.requests.ramp = %g s: a ramp starts the clients of a closed loop; "
                    "set serving.requests.concurrency",
                    r->ramp);
  return true;
}

/* Conversations are driven by their own answers, which a closed loop or a replayed trace
 * already decides. */
static bool cfg_turns_check(const cfg_requests *r, const cfg_doc *d, GError **err)
{
  if (r->turns <= 1)
    return true;
  if (r->trace || r->concurrency > 0)
    return cfg_fail(err, d, "serving.requests.turns",
                    "serving.requests.turns = %d: conversations take open-loop or burst "
                    "arrivals, not %s",
                    r->turns, r->trace ? "a replayed trace" : "a closed loop (concurrency)");
  return true;
}

static bool cfg_requests_check(cfg_requests *r, const cfg_doc *d, GError **err)
{
  CFG_DEFAULT_INT(r->distribution, r->lengths_file ? CFG_LENGTHS_FILE : CFG_LENGTHS_FIXED);
  if (!cfg_same_key(&r->prefix_tokens, &r->shared_prefix, 0, false, "serving.requests.prefix_tokens",
                    "serving.requests.shared_prefix", d, err) ||
      !cfg_turns_check(r, d, err) || !cfg_ramp_check(r, d, err))
    return false;
  bool open_rate = !r->trace && r->concurrency == 0 && r->arrival != CFG_ARRIVAL_BURST;
  if (open_rate && !(r->rate > 0))
    return cfg_fail(err, d, "serving.requests",
                    "serving.requests: missing required key 'rate' (for example 10/s), unless "
                    "arrival is burst, concurrency is set or a trace is replayed");
  if (r->arrival == CFG_ARRIVAL_GAMMA && !(r->burstiness > 0))
    return cfg_fail(err, d, "serving.requests.burstiness",
                    "serving.requests.burstiness: must be > 0 (the gamma shape; 1 is Poisson)");
  if (r->distribution == CFG_LENGTHS_FILE && !r->lengths_file)
    return cfg_fail(err, d, "serving.requests.distribution",
                    "serving.requests.distribution = file needs 'lengths_file' (a CSV with "
                    "prompt_tokens and output_tokens columns)");
  if (!r->trace && r->distribution != CFG_LENGTHS_FILE)
    for (int i = 0; i < 2; i++)
      if ((i ? r->output_tokens : r->prompt_tokens) == CFG_UNSET_INT)
        return cfg_fail(err, d, "serving.requests", "serving.requests: missing required key '%s'",
                        i ? "output_tokens" : "prompt_tokens");
  if (r->prefix_tokens > 0 && r->prompt_tokens != CFG_UNSET_INT &&
      r->prefix_tokens >= r->prompt_tokens * (1 - (r->distribution == CFG_LENGTHS_UNIFORM ? r->spread : 0)))
    return cfg_fail(err, d, "serving.requests.prefix_tokens",
                    "serving.requests.prefix_tokens = %d: the shared prefix must be shorter than "
                    "the shortest prompt (prompt_tokens %d%s)",
                    r->prefix_tokens, r->prompt_tokens,
                    r->distribution == CFG_LENGTHS_UNIFORM ? ", less the spread" : "");
  return true;
}

/* Wide expert parallelism: whole experts spread evenly over the ep GPUs of a replica, each
 * GPU also one attention data-parallel rank's share (ep / tp ranks of TP tp). */
static bool cfg_serving_ep_check(const cfg_workload *w, GError **err)
{
  const cfg_doc *d = w->doc;
  const cfg_serving *s = &w->serving;
  if (s->ep <= 1)
    return true;
  if (w->model.kind != CFG_MODEL_MOE_TRANSFORMER)
    return cfg_fail(err, d, "serving.ep",
                    "serving.ep = %d: expert parallelism needs a mixture of experts (model.kind "
                    "moe-transformer)",
                    s->ep);
  if (w->model.moe.experts % s->ep != 0)
    return cfg_fail(err, d, "serving.ep",
                    "serving.ep = %d does not divide model.moe.experts = %d (each GPU holds "
                    "experts / ep whole experts)",
                    s->ep, w->model.moe.experts);
  if (s->ep % s->tp != 0)
    return cfg_fail(err, d, "serving.ep",
                    "serving.ep = %d is not a multiple of serving.tp = %d (attention runs data "
                    "parallel over ep / tp ranks of tp GPUs)",
                    s->ep, s->tp);
  if (s->pp > 1)
    return cfg_fail(err, d, "serving.pp",
                    "serving.pp = %d with serving.ep = %d: pipeline stages with wide expert "
                    "parallelism are not modelled; use serving.pp 1",
                    s->pp, s->ep);
  return true;
}

/* The draft model is checked as a model is, its errors named by its own path and position. */
static bool cfg_draft_check(cfg_model *m, const cfg_doc *d, GError **err)
{
  cfg_node *serving = cfg_map_get(d->root, "serving");
  cfg_node *draft = cfg_map_get(cfg_map_get(serving, "speculative"), "draft");
  if (!draft)
    return cfg_fail(err, d, "serving.speculative.method",
                    "serving.speculative.method = draft needs serving.speculative.draft (a model "
                    "preset name or a mapping)");
  cfg_node *wrapper = cfg_node_new(CFG_NODE_MAP, draft->file, draft->line, draft->col);
  cfg_map_put(wrapper, "model", draft);
  cfg_doc view = {.root = wrapper};
  GError *inner = NULL;
  bool ok = cfg_model_check(m, &view, &inner);
  cfg_map_find(wrapper, "model")->value = NULL; /* borrowed */
  cfg_node_free(wrapper);
  if (!ok) {
    const char *msg = strstr(inner->message, ": model");
    g_autofree char *where = msg ? g_strndup(inner->message, (gsize)(msg - inner->message))
                                 : cfg_doc_where(d, "serving.speculative.draft");
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: serving.speculative.draft%s", where,
                msg ? msg + strlen(": model") : inner->message);
    g_error_free(inner);
    return false;
  }
  if (m->kind != CFG_MODEL_TRANSFORMER && m->kind != CFG_MODEL_MOE_TRANSFORMER)
    return cfg_fail(err, d, "serving.speculative.draft",
                    "serving.speculative.draft: expected a transformer (kind transformer or "
                    "moe-transformer)");
  return true;
}

static bool cfg_speculative_check(cfg_speculative *sp, cfg_scheduler sched, const cfg_doc *d,
                                  GError **err)
{
  CFG_DEFAULT_INT(sp->tokens, sp->nprofile > 0 ? sp->nprofile : 1);
  if (sp->method == CFG_SPEC_NONE)
    return true;
  if (sched == CFG_SCHEDULER_STATIC)
    return cfg_fail(err, d, "serving.speculative.method",
                    "serving.speculative: static batches (serving.scheduler static) decode "
                    "padded one token at a time; speculative decoding needs another scheduler");
  if (sp->nprofile > 0 && sp->nprofile != sp->tokens)
    return cfg_fail(err, d, "serving.speculative.acceptance_profile",
                    "serving.speculative.acceptance_profile: %d entries, but tokens = %d: give "
                    "one acceptance rate per proposed token",
                    sp->nprofile, sp->tokens);
  if (sp->nprofile == 0 && isnan(sp->acceptance))
    return cfg_fail(err, d, "serving.speculative",
                    "serving.speculative: missing required key 'acceptance' (the probability a "
                    "proposed token is accepted, for example 0.8) or 'acceptance_profile'");
  if (sp->nprofile > 0 && !isnan(sp->acceptance))
    return cfg_fail(err, d, "serving.speculative.acceptance",
                    "serving.speculative: give 'acceptance' or 'acceptance_profile', not both");
  return sp->method != CFG_SPEC_DRAFT || cfg_draft_check(&sp->draft, d, err);
}

/* A pool's layout against the model, named by the pool's own keys (serving.prefill.tp ...). */
static bool cfg_pool_fits(const cfg_pool *p, const char *name, const cfg_model *m,
                          const cfg_doc *d, GError **err)
{
  g_autofree char *tp = g_strdup_printf("serving.%s.tp", name);
  g_autofree char *pp = g_strdup_printf("serving.%s.pp", name);
  g_autofree char *ep = g_strdup_printf("serving.%s.ep", name);
  if (m->heads % p->tp != 0)
    return cfg_fail(err, d, tp, "%s = %d does not divide model.heads = %d", tp, p->tp, m->heads);
  if (m->kv_heads % p->tp != 0 && p->tp % m->kv_heads != 0)
    return cfg_fail(err, d, tp, "%s = %d and model.kv_heads = %d: one must divide the other", tp,
                    p->tp, m->kv_heads);
  if (m->ffn_hidden % p->tp != 0)
    return cfg_fail(err, d, tp, "%s = %d does not divide model.ffn_hidden = %d", tp, p->tp,
                    m->ffn_hidden);
  if (p->pp > m->layers)
    return cfg_fail(err, d, pp, "%s = %d exceeds model.layers = %d", pp, p->pp, m->layers);
  if (p->ep > 1)
    return cfg_fail(err, d, ep,
                    "%s = %d: expert parallelism in a disaggregated pool is not simulated yet "
                    "(ep 1 splits the experts by tensor parallelism)",
                    ep, p->ep);
  return true;
}

/* serving.prefill and serving.decode: both or neither; each fits the model; together they fit
 * the cluster (placed in order, prefill first). */
static bool cfg_pools_check(cfg_workload *w, const cfg_cluster *c, GError **err)
{
  const cfg_doc *d = w->doc;
  cfg_serving *s = &w->serving;
  const cfg_node *node = cfg_map_get(d->root, "serving");
  bool pre = cfg_map_get(node, "prefill") != NULL, dec = cfg_map_get(node, "decode") != NULL;
  if (pre != dec)
    return cfg_fail(err, d, pre ? "serving.prefill" : "serving.decode",
                    "serving.%s without serving.%s: a disaggregated deployment needs both pools",
                    pre ? "prefill" : "decode", pre ? "decode" : "prefill");
  s->disaggregated = pre && dec;
  if (!s->disaggregated)
    return true;
  if (s->scheduler == CFG_SCHEDULER_STATIC || s->scheduler == CFG_SCHEDULER_FUSED)
    return cfg_fail(err, d, "serving.scheduler",
                    "serving.scheduler = %s: disaggregated pools run continuous or chunked "
                    "batching", cfg_scheduler_name(s->scheduler));
  cfg_pool *pools[2] = {&s->prefill, &s->decode};
  const char *names[2] = {"prefill", "decode"};
  for (int i = 0; i < 2; i++) {
    CFG_DEFAULT_INT(pools[i]->max_batch, s->max_batch);
    CFG_DEFAULT_INT(pools[i]->max_tokens, s->max_tokens);
    CFG_DEFAULT_INT(pools[i]->router, s->router);
    if (!cfg_pool_fits(pools[i], names[i], &w->model, d, err))
      return false;
  }
  if (!c)
    return true;
  gint64 gpus[2];
  for (int i = 0; i < 2; i++)
    gpus[i] = (gint64)pools[i]->replicas * pools[i]->tp * pools[i]->pp;
  if (gpus[0] + gpus[1] > cfg_cluster_gpus(c))
    return cfg_fail(err, d, "serving.decode",
                    "serving: prefill %d x %d x %d + decode %d x %d x %d (replicas x tp x pp) = "
                    "%" G_GINT64_FORMAT " GPUs, but the cluster has %d (node.count %d x "
                    "node.gpus_per_node %d)",
                    s->prefill.replicas, s->prefill.tp, s->prefill.pp, s->decode.replicas,
                    s->decode.tp, s->decode.pp, gpus[0] + gpus[1], cfg_cluster_gpus(c),
                    c->node.count, c->node.gpus_per_node);
  return true;
}

/* Serving defaults follow vLLM's where a serving engine has to pick one. */
static bool cfg_serving_check(cfg_workload *w, const cfg_cluster *c, GError **err)
{
  const cfg_doc *d = w->doc;
  cfg_serving *s = &w->serving;
  /* weight-only int8 / int4 quantization keeps 16-bit activations and KV; block-scaled FP8 and
   * FP4 checkpoints (ModelOpt's) keep an FP8 KV cache */
  CFG_DEFAULT_INT(s->kv_dtype, s->dtype == CFG_INT8 || s->dtype == CFG_INT4 ? CFG_BF16
                               : cfg_dtype_unit(s->dtype) == CFG_FP4 || cfg_dtype_block_scaled(s->dtype)
                                   ? CFG_FP8
                                   : s->dtype);
  /* (older formats keep their fallbacks: int4 weights dequantize into 16-bit GEMMs) */
  if ((s->dtype >= CFG_FP4) && !cfg_dtype_runs_on(c, s->dtype, d, "serving.dtype", err))
    return false;
  CFG_DEFAULT_INT(s->max_model_len, w->model.seq_len > 0 ? w->model.seq_len : 4096);
  CFG_DEFAULT_INT(s->kv_blocks, 0); /* computed by the serving model */
  /* without chunking a whole prompt must fit one iteration (vLLM's rule) */
  CFG_DEFAULT_INT(s->max_tokens, s->scheduler == CFG_SCHEDULER_CHUNKED ? 2048
                                                                      : MAX(2048, s->max_model_len));
  if (!(s->gpu_memory_utilization > 0))
    return cfg_fail(err, d, "serving.gpu_memory_utilization",
                    "serving.gpu_memory_utilization: must be in (0, 1]");
  if (!cfg_requests_check(&s->requests, d, err) || !cfg_serving_ep_check(w, err) ||
      !cfg_same_key(&s->prefix_caching, &s->prefix_cache, 0, true, "serving.prefix_caching",
                    "serving.prefix_cache", d, err) ||
      !cfg_speculative_check(&s->speculative, s->scheduler, d, err) ||
      !cfg_pools_check(w, c, err))
    return false;
  if (!c)
    return true;
  CFG_DEFAULT_QTY(s->kv_offload.bandwidth, c->storage.host_bandwidth);
  if (s->kv_offload.size > 0 && !(s->kv_offload.bandwidth > 0))
    return cfg_fail(err, d, "serving.kv_offload.bandwidth",
                    "serving.kv_offload.bandwidth: must be above 0 (hits in host memory come "
                    "back over it)");
  if (s->disaggregated)
    return true;
  /* with expert parallelism the replica is its ep GPUs (attention DP ep / tp x TP tp) */
  int width = s->ep > 1 ? s->ep : s->tp;
  gint64 need = (gint64)s->replicas * width * s->pp; /* each < 2^31: no 64-bit overflow */
  if (need > cfg_cluster_gpus(c))
    return cfg_fail(err, d, s->ep > 1 ? "serving.ep" : "serving",
                    "serving: replicas x %s x pp = %d x %d x %d = %" G_GINT64_FORMAT " GPUs, but "
                    "the cluster has %d (node.count %d x node.gpus_per_node %d)",
                    s->ep > 1 ? "ep" : "tp", s->replicas, width, s->pp, need,
                    cfg_cluster_gpus(c), c->node.count, c->node.gpus_per_node);
  return true;
}

/* A runtime that drives its own messages (cpu progress) must say what a call costs; one
 * that runs NCCL's kernels adds nothing unless it says so. */
static bool cfg_collectives_check(cfg_collectives *k, const cfg_doc *d, GError **err)
{
  bool kernel = k->progress == CFG_PROGRESS_KERNEL || k->ucc_tl == CFG_UCC_TL_NCCL;
  if (isnan(k->call_latency) && !kernel)
    return cfg_fail(err, d, "collectives.progress",
                    "collectives.progress = cpu needs collectives.call_latency (the runtime's "
                    "cost per call; the profiles in configs/runtimes give it)");
  CFG_DEFAULT_QTY(k->call_latency, 0.0);
  return true;
}

static bool cfg_workload_check(cfg_workload *w, const cfg_cluster *c, GError **err)
{
  const cfg_doc *d = w->doc;
  cfg_defaults(&cfg_schema_workload, w);
  if (!cfg_map_get(d->root, "model"))
    return cfg_fail(err, d, "model", "workload: missing required key 'model'");
  if (!cfg_model_check(&w->model, d, err))
    return false;
  w->has_training = cfg_map_get(d->root, "training") != NULL;
  w->has_serving = cfg_map_get(d->root, "serving") != NULL;
  if (!w->has_training && !w->has_serving)
    return cfg_fail(err, d, "", "workload: expected a 'training' or a 'serving' section");
  if (!(w->collectives.sm_reserved >= 0 && w->collectives.sm_reserved < 0.9))
    return cfg_fail(err, d, "collectives.sm_reserved",
                    "collectives.sm_reserved = %g: expected a fraction in [0, 0.9)",
                    w->collectives.sm_reserved);
  if (!cfg_collectives_check(&w->collectives, d, err))
    return false;
  /* Allowances that are not model states or activations: uncalibrated, documented defaults. */
  cfg_memory *m = &w->memory;
  CFG_DEFAULT_QTY(m->comm_bucket, w->parallel.gradient_bucket);
  if (w->has_training && c && !cfg_training_check(w, c, err))
    return false;
  if (w->has_serving && !cfg_serving_check(w, c, err))
    return false;
  return true;
}

double cfg_host_dispatch(const cfg_cluster *c, const cfg_workload *w)
{
  return w->has_training ? w->training.host_dispatch * c->node.cpu.dispatch_scale : 0;
}

int cfg_cluster_gpus(const cfg_cluster *c)
{
  return c->node.count * c->node.gpus_per_node;
}

/* ---- entry point -------------------------------------------------------------------------- */

static bool cfg_decode_cluster(cfg_doc *doc, cfg_cluster **out, GError **err)
{
  cfg_cluster *c = g_new0(cfg_cluster, 1);
  cfg_schema_init(&cfg_schema_cluster, c);
  c->doc = doc;
  *out = c;
  return cfg_decode(doc->root, &cfg_schema_cluster, c, "", err) && cfg_cluster_check(c, err);
}

static bool cfg_decode_workload(cfg_doc *doc, const cfg_cluster *c, cfg_workload **out,
                                GError **err)
{
  cfg_workload *w = g_new0(cfg_workload, 1);
  cfg_schema_init(&cfg_schema_workload, w);
  w->doc = doc;
  *out = w;
  return cfg_decode(doc->root, &cfg_schema_workload, w, "", err) && cfg_workload_check(w, c, err);
}

/* Applies the overrides to the documents (either may be NULL; both are consumed), then decodes
 * and checks them. */
/* An integer at a dotted path of a document's tree (1 where absent: a degree left out). */
static int cfg_tree_int(const cfg_doc *doc, const char *a, const char *b, int absent)
{
  const cfg_node *n = cfg_map_get(cfg_map_get(doc->root, a), b);
  if (!n)
    return absent;
  char *end = NULL;
  double v = n->kind == CFG_NODE_SCALAR ? g_ascii_strtod(n->scalar, &end) : NAN;
  return end && !*end && v >= 1 && v <= 1 << 20 && v == floor(v) ? (int)v : -1;
}

/* Nodes of `gpn` GPUs for a job that leaves dp out: the most (up to `count`) whose data
 * parallelism divides the batch into whole micro-batches; 0 if none. */
static int cfg_nodes_for_batch(int count, int gpn, gint64 inner, int batch, int micro)
{
  for (int n = count; n >= 1; n--) {
    gint64 gpus = (gint64)n * gpn;
    if (gpus % inner)
      continue;
    gint64 dp = gpus / inner;
    if (batch % dp == 0 && (batch / dp) % micro == 0)
      return n;
  }
  return 0;
}

/* A preset cluster takes the size of the job it is given: `dlsim run -c dgx-a100 -w
 * megatron-22b` runs the workload's TP 8 on one node, not an error about the preset's four.
 * With dp stated, the job's GPUs in whole nodes; with dp left out, the most nodes (up to the
 * preset's) whose data parallelism divides the batch. Only for a cluster given by preset name
 * whose node count was not set. Returns the nodes it set, or 0. */
static int cfg_size_preset(cfg_doc *cdoc, const cfg_doc *wdoc, const cfg_override *sets,
                           size_t nsets)
{
  for (size_t i = 0; i < nsets; i++)
    if (strcmp(sets[i].path, "node.count") == 0)
      return 0;
  int gpn = cfg_tree_int(cdoc, "node", "gpus_per_node", -1), count = cfg_tree_int(cdoc, "node", "count", 1);
  int tp = cfg_tree_int(wdoc, "parallel", "tp", 1), pp = cfg_tree_int(wdoc, "parallel", "pp", 1);
  int cp = cfg_tree_int(wdoc, "parallel", "cp", 1), dp = cfg_tree_int(wdoc, "parallel", "dp", 0);
  int batch = cfg_tree_int(wdoc, "training", "global_batch", -1);
  int micro = cfg_tree_int(wdoc, "training", "micro_batch", 1);
  if (gpn < 1 || count < 1 || tp < 1 || pp < 1 || cp < 1 || dp < 0 || batch < 1 || micro < 1)
    return 0;
  gint64 inner = (gint64)tp * pp * cp, nodes = 0;
  if (dp > 0)
    nodes = inner * dp % gpn ? 0 : inner * dp / gpn;
  else
    nodes = cfg_nodes_for_batch(count, gpn, inner, batch, micro);
  if (nodes < 1 || nodes == count || nodes > 1 << 20)
    return 0;
  g_autofree char *text = g_strdup_printf("%" G_GINT64_FORMAT, nodes);
  return cfg_tree_set(cdoc, "node.count", text, NULL) ? (int)nodes : 0;
}

/* NCCL does not run on CPUs: a workload on CPU devices that names no runtime takes MVAPICH,
 * the MPI of the HiDL CPU labs (set before the profiles are grafted, so that its applies). */
static bool cfg_default_cpu_runtime(const cfg_doc *cdoc, cfg_doc *wdoc, GError **err)
{
  const cfg_node *kind = cfg_map_get(cfg_map_get(cdoc->root, "gpu"), "kind");
  if (!kind || kind->kind != CFG_NODE_SCALAR || strcmp(kind->scalar, "cpu") != 0 ||
      cfg_map_get(cfg_map_get(wdoc->root, "collectives"), "runtime"))
    return true;
  return cfg_tree_set(wdoc, "collectives.runtime", "mpi-mvapich", err);
}

static bool cfg_load_docs(cfg_doc *cdoc, cfg_doc *wdoc, const cfg_override *sets, size_t nsets,
                          bool preset, cfg_cluster **cluster, cfg_workload **workload, GError **err)
{
  int sized = 0;
  if (wdoc && !cfg_graft_model(wdoc, err))
    goto fail;
  for (size_t i = 0; i < nsets; i++)
    if (!cfg_apply_override(cdoc, wdoc, &sets[i], err))
      goto fail;
  if (wdoc && !cfg_graft_model(wdoc, err)) /* a --set may have named another model */
    goto fail;
  if (cdoc && wdoc && !cfg_default_cpu_runtime(cdoc, wdoc, err))
    goto fail;
  if (wdoc && !cfg_graft_profiles(wdoc, err)) /* after the overrides: they may name them */
    goto fail;
  if (preset && cdoc && wdoc && cfg_map_get(wdoc->root, "training"))
    sized = cfg_size_preset(cdoc, wdoc, sets, nsets);
  if (cdoc) {
    bool ok = cfg_decode_cluster(cdoc, cluster, err);
    if (ok)
      (*cluster)->sized_to_job = sized > 0;
    cdoc = NULL; /* owned by the cluster now */
    if (!ok)
      goto fail;
  }
  if (wdoc) {
    bool ok = cfg_decode_workload(wdoc, cluster ? *cluster : NULL, workload, err);
    wdoc = NULL;
    if (!ok)
      goto fail;
  }
  return true;
fail:
  cfg_doc_free(cdoc);
  cfg_doc_free(wdoc);
  if (cluster) {
    cfg_cluster_free(*cluster);
    *cluster = NULL;
  }
  if (workload) {
    cfg_workload_free(*workload);
    *workload = NULL;
  }
  return false;
}

/* Opens the cluster and the workload (a file or preset name, or YAML text) for cfg_load_docs. */
static bool cfg_load_from(const char *cluster_path, const char *workload_path,
                          const char *workload_text, const cfg_override *sets, size_t nsets,
                          cfg_cluster **cluster, cfg_workload **workload, GError **err)
{
  cfg_doc *cdoc = NULL, *wdoc = NULL;
  if (cluster)
    *cluster = NULL;
  if (workload)
    *workload = NULL;
  if (cluster_path && !(cdoc = cfg_load_named(cluster_path, "clusters", err)))
    return false;
  if (workload_path && !(wdoc = cfg_load_named(workload_path, "workloads", err))) {
    cfg_doc_free(cdoc);
    return false;
  }
  if (workload_text && !(wdoc = cfg_doc_parse(workload_text, "workload", err))) {
    cfg_doc_free(cdoc);
    return false;
  }
  /* a name that is no file is one of configs/clusters: a preset, sized to the job */
  bool preset = cluster_path && !g_file_test(cluster_path, G_FILE_TEST_IS_REGULAR);
  return cfg_load_docs(cdoc, wdoc, sets, nsets, preset, cluster, workload, err);
}

bool cfg_load(const char *cluster_path, const char *workload_path, const cfg_override *sets,
              size_t nsets, cfg_cluster **cluster, cfg_workload **workload, GError **err)
{
  return cfg_load_from(cluster_path, workload_path, NULL, sets, nsets, cluster, workload, err);
}

/* cfg_load_with and cfg_load_text: the overrides parsed from "key=value" strings first. */
static bool cfg_load_strings(const char *cluster_path, const char *workload_path,
                             const char *workload_text, char *const *sets, cfg_cluster **cluster,
                             cfg_workload **workload, GError **err)
{
  size_t n = sets ? g_strv_length((char **)sets) : 0;
  cfg_override *ov = g_new0(cfg_override, n + 1);
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++)
    ok = cfg_override_parse(sets[i], &ov[i], err);
  if (ok)
    ok = cfg_load_from(cluster_path, workload_path, workload_text, ov, n, cluster, workload, err);
  for (size_t i = 0; i < n; i++)
    cfg_override_clear(&ov[i]);
  g_free(ov);
  return ok;
}

bool cfg_load_with(const char *cluster_path, const char *workload_path, char *const *sets,
                   cfg_cluster **cluster, cfg_workload **workload, GError **err)
{
  return cfg_load_strings(cluster_path, workload_path, NULL, sets, cluster, workload, err);
}

bool cfg_load_text(const char *cluster_path, const char *workload_yaml, char *const *sets,
                   cfg_cluster **cluster, cfg_workload **workload, GError **err)
{
  return cfg_load_strings(cluster_path, NULL, workload_yaml, sets, cluster, workload, err);
}

bool cfg_calibration_load(const char *path, cfg_calibration *cal, GError **err)
{
  cfg_schema_init(&cfg_schema_calibration, cal);
  cfg_doc *doc = cfg_doc_load(path, err);
  if (!doc)
    return false;
  bool ok = cfg_decode(doc->root, &cfg_schema_calibration, cal, "", err);
  if (ok && !cfg_map_get(doc->root, "efficiency") && !cfg_map_get(doc->root, "nccl")) {
    cfg_set_error_at(err, cfg_doc_file(doc), 0, 0, "expected 'efficiency' or 'nccl'");
    ok = false;
  }
  if (!ok)
    cfg_calibration_clear(cal);
  cfg_doc_free(doc);
  return ok;
}

void cfg_calibration_clear(cfg_calibration *cal)
{
  g_free(cal->gpu);
  g_free(cal->notes);
  g_free(cal->efficiency.source);
  g_free(cal->nccl.source);
  cal->gpu = cal->notes = cal->efficiency.source = cal->nccl.source = NULL;
}

void cfg_cluster_free(cfg_cluster *c)
{
  if (!c)
    return;
  g_free(c->name);
  g_free(c->gpu.name);
  g_free(c->gpu.calibration);
  g_free(c->gpu.efficiency.source);
  g_free(c->node.cpu.name);
  g_free(c->nccl.source);
  for (int i = 0; i < c->network.ntiers; i++)
    g_free(c->network.tiers[i].name);
  g_free(c->network.tiers);
  for (int i = 0; i < c->network.nbackground; i++) {
    g_free(c->network.background[i].links);
    g_free(c->network.background[i].direction);
  }
  g_free(c->network.background);
  cfg_doc_free(c->doc);
  g_free(c);
}

void cfg_workload_free(cfg_workload *w)
{
  if (!w)
    return;
  g_free(w->model.name);
  g_free(w->model.preset);
  g_free(w->training.framework);
  g_free(w->serving.engine);
  g_free(w->model.moe.histogram);
  cfg_collectives_clear(&w->collectives);
  g_free(w->serving.requests.lengths_file);
  g_free(w->serving.requests.trace);
  g_free(w->serving.speculative.draft.name);
  g_free(w->serving.speculative.draft.preset);
  g_free(w->serving.speculative.draft.moe.histogram);
  cfg_doc_free(w->doc);
  g_free(w);
}

void cfg_collectives_clear(cfg_collectives *c)
{
  char **strs[] = {&c->algorithm, &c->protocol, &c->runtime, &c->allreduce,
                   &c->allgather, &c->reducescatter, &c->alltoall};
  for (size_t i = 0; i < G_N_ELEMENTS(strs); i++) {
    g_free(*strs[i]);
    *strs[i] = NULL;
  }
}

bool cfg_runtime_load(const char *name, cfg_collectives *out, GError **err)
{
  return cfg_runtime_load_with(name, NULL, out, err);
}

/* Overrides `collectives.KEY=VALUE` of a runtime profile, applied to its tree as --set is. */
static bool cfg_runtime_overrides(cfg_doc *doc, char *const *sets, GError **err)
{
  for (int i = 0; sets && sets[i]; i++) {
    cfg_override o = {0};
    bool ok = cfg_override_parse(sets[i], &o, err);
    if (ok && !g_str_has_prefix(o.path, "collectives.")) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s: a runtime profile takes collectives.KEY=VALUE only", sets[i]);
      ok = false;
    }
    ok = ok && cfg_schema_check_path(&cfg_schema_collectives, o.path + strlen("collectives."), err) &&
         cfg_tree_set(doc, o.path, o.value, err);
    cfg_override_clear(&o);
    if (!ok)
      return false;
  }
  return true;
}

bool cfg_runtime_load_with(const char *name, char *const *sets, cfg_collectives *out, GError **err)
{
  cfg_schema_init(&cfg_schema_collectives, out);
  g_autofree char *path = cfg_resolve(name, "runtimes", NULL);
  if (!path) {
    g_autofree char *list = cfg_presets_list("runtimes");
    g_autofree char *hint = cfg_presets_hint("runtimes", name);
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--runtime %s: no runtime profile '%s'%s "
                "(profiles: %s)", name, name, hint, list);
    return false;
  }
  cfg_doc *doc = cfg_doc_load(path, err);
  if (!doc)
    return false;
  bool ok = cfg_runtime_overrides(doc, sets, err);
  const cfg_node *section = cfg_map_get(doc->root, "collectives");
  if (ok && (!section || section->kind != CFG_NODE_MAP)) {
    cfg_set_error_at(err, cfg_doc_file(doc), 0, 0, "expected a 'collectives' mapping");
    ok = false;
  }
  ok = ok && cfg_decode(section, &cfg_schema_collectives, out, "collectives", err);
  if (ok) {
    cfg_defaults(&cfg_schema_collectives, out);
    ok = cfg_collectives_check(out, doc, err);
  }
  if (!ok)
    cfg_collectives_clear(out);
  cfg_doc_free(doc);
  return ok;
}

bool cfg_case_load(const char *path, cfg_case *out, GError **err)
{
  memset(out, 0, sizeof *out);
  cfg_schema_init(&cfg_schema_case, out);
  cfg_doc *doc = cfg_doc_load(path, err);
  if (!doc)
    return false;
  bool ok = cfg_decode(doc->root, &cfg_schema_case, out, "", err);
  const char *need_run[] = {"name", "role", "source", "cluster", "workload", "metric", "measured"};
  const char *need_table[] = {"name", "role", "source", "cluster", "table", "op", "gpus", NULL};
  bool table = cfg_map_get(doc->root, "table") != NULL;
  if (cfg_map_get(doc->root, "trace"))
    need_run[4] = "trace"; /* a replayed trace is the workload */
  if (ok && table && out->op && strcmp(out->op, "gemm") == 0)
    need_table[6] = "dtype"; /* a GEMM table runs on one GPU */
  const char *const *need = table ? need_table : need_run;
  for (size_t i = 0; ok && i < (table ? 7 : G_N_ELEMENTS(need_run)); i++)
    if (!cfg_map_get(doc->root, need[i])) {
      cfg_set_error_at(err, cfg_doc_file(doc), 0, 0, "missing required key '%s'", need[i]);
      ok = false;
    }
  if (ok && out->engine == CFG_UNSET_INT)
    out->engine = 1;
  if (ok && isnan(out->tolerance))
    out->tolerance = 0.10;
  if (ok && isnan(out->tolerance_small))
    out->tolerance_small = 0.25;
  if (ok && out->engine == 1 && table && !cfg_map_get(doc->root, "engine"))
    out->engine = 0; /* tables sweep dozens of sizes: closed form unless asked */
  cfg_doc_free(doc);
  return ok;
}

void cfg_case_clear(cfg_case *c)
{
  g_free(c->name);
  g_free(c->source);
  g_free(c->notes);
  g_free(c->cluster);
  g_free(c->workload);
  g_strfreev(c->set);
  g_strfreev(c->ratio_to);
  g_strfreev(c->unfit);
  g_free(c->metric);
  g_free(c->command);
  g_free(c->unit);
  g_free(c->table);
  g_free(c->runtime);
  g_free(c->op);
  g_free(c->algorithm);
  g_free(c->size_column);
  g_free(c->time_column);
  g_free(c->time_unit);
  g_strfreev(c->filter);
  g_free(c->trace);
  g_free(c->steps);
  memset(c, 0, sizeof *c);
}
