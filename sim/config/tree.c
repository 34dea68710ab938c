/* The YAML tree: libyaml events -> nodes that remember file:line:column. */
#include "config/config_internal.h"

#include <stdarg.h>
#include <string.h>
#include <yaml.h>

G_DEFINE_QUARK(dlsim-config-error-quark, cfg_error)

cfg_node *cfg_node_new(cfg_node_kind kind, const char *file, int line, int col)
{
  cfg_node *n = g_new0(cfg_node, 1);
  n->kind = kind;
  n->file = file;
  n->line = line;
  n->col = col;
  if (kind != CFG_NODE_SCALAR)
    n->items = g_ptr_array_new();
  return n;
}

static void cfg_pair_free(cfg_pair *p)
{
  g_free(p->key);
  cfg_node_free(p->value);
  g_free(p);
}

void cfg_node_free(cfg_node *n)
{
  if (!n)
    return;
  if (n->items) {
    for (guint i = 0; i < n->items->len; i++) {
      if (n->kind == CFG_NODE_MAP)
        cfg_pair_free(g_ptr_array_index(n->items, i));
      else
        cfg_node_free(g_ptr_array_index(n->items, i));
    }
    g_ptr_array_free(n->items, TRUE);
  }
  g_free(n->scalar);
  g_free(n);
}

cfg_pair *cfg_map_find(const cfg_node *map, const char *key)
{
  if (!map || map->kind != CFG_NODE_MAP)
    return NULL;
  for (guint i = 0; i < map->items->len; i++) {
    cfg_pair *p = g_ptr_array_index(map->items, i);
    if (strcmp(p->key, key) == 0)
      return p;
  }
  return NULL;
}

cfg_node *cfg_map_get(const cfg_node *map, const char *key)
{
  cfg_pair *p = cfg_map_find(map, key);
  return p ? p->value : NULL;
}

void cfg_map_put(cfg_node *map, const char *key, cfg_node *value)
{
  cfg_pair *p = cfg_map_find(map, key);
  if (p) {
    cfg_node_free(p->value);
    p->value = value;
    return;
  }
  p = g_new0(cfg_pair, 1);
  p->key = g_strdup(key);
  p->line = value->line;
  p->col = value->col;
  p->value = value;
  g_ptr_array_add(map->items, p);
}

bool cfg_node_is_null(const cfg_node *n)
{
  if (!n)
    return true;
  if (n->kind != CFG_NODE_SCALAR || !n->plain)
    return false;
  return n->scalar[0] == '\0' || strcmp(n->scalar, "~") == 0 || strcmp(n->scalar, "null") == 0 ||
         strcmp(n->scalar, "Null") == 0 || strcmp(n->scalar, "NULL") == 0;
}

const char *cfg_doc_intern_file(cfg_doc *doc, const char *file)
{
  for (guint i = 0; i < doc->files->len; i++)
    if (strcmp(g_ptr_array_index(doc->files, i), file) == 0)
      return g_ptr_array_index(doc->files, i);
  char *copy = g_strdup(file);
  g_ptr_array_add(doc->files, copy);
  return copy;
}

void cfg_set_error_at(GError **err, const char *file, int line, int col, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (line > 0)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: %s", file, line, col, msg);
  else
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s", file, msg);
}

void cfg_set_error_node(GError **err, const cfg_node *n, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  cfg_set_error_at(err, n->file, n->line, n->col, "%s", msg);
}

static size_t cfg_levenshtein(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b);
  g_autofree size_t *row = g_new(size_t, lb + 1);
  for (size_t j = 0; j <= lb; j++)
    row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t cost = g_ascii_tolower(a[i - 1]) == g_ascii_tolower(b[j - 1]) ? 0 : 1;
      size_t best = MIN(row[j] + 1, row[j - 1] + 1);
      row[j] = MIN(best, diag + cost);
      diag = up;
    }
  }
  return row[lb];
}

const char *cfg_closest(const char *word, const char *const *candidates, size_t n)
{
  const char *best = NULL;
  size_t best_d = G_MAXSIZE;
  for (size_t i = 0; i < n; i++) {
    size_t d = cfg_levenshtein(word, candidates[i]);
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
  }
  size_t limit = MAX((size_t)2, strlen(word) / 3);
  if (best && (best_d <= limit || g_str_has_prefix(best, word) || g_str_has_prefix(word, best)))
    return best;
  return NULL;
}

/* ---- libyaml -> tree ------------------------------------------------------------------------ */

/* No dlsim file nests deeper than a handful of levels; the reader and everything that walks
 * its tree recurse, so nesting is bounded where it is read, with a clear error. */
#define CFG_MAX_DEPTH 64

typedef struct {
  yaml_parser_t parser;
  const char *file;
  int depth; /* mappings and sequences open around the node being read */
} cfg_reader;

static void cfg_reader_error(cfg_reader *r, GError **err)
{
  const yaml_mark_t *m = r->parser.problem ? &r->parser.problem_mark : &r->parser.mark;
  const char *problem = r->parser.problem ? r->parser.problem : "unreadable input";
  if (r->parser.context)
    cfg_set_error_at(err, r->file, (int)m->line + 1, (int)m->column + 1,
                     "not valid YAML: %s %s", problem, r->parser.context);
  else
    cfg_set_error_at(err, r->file, (int)m->line + 1, (int)m->column + 1, "not valid YAML: %s",
                     problem);
}

static bool cfg_next(cfg_reader *r, yaml_event_t *ev, GError **err)
{
  if (!yaml_parser_parse(&r->parser, ev)) {
    cfg_reader_error(r, err);
    return false;
  }
  return true;
}

static cfg_node *cfg_read_node(cfg_reader *r, yaml_event_t *ev, GError **err);

static cfg_node *cfg_read_map(cfg_reader *r, cfg_node *map, GError **err)
{
  for (;;) {
    yaml_event_t key;
    if (!cfg_next(r, &key, err))
      goto fail;
    if (key.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&key);
      return map;
    }
    if (key.type != YAML_SCALAR_EVENT) {
      cfg_set_error_at(err, r->file, (int)key.start_mark.line + 1,
                       (int)key.start_mark.column + 1, "mapping keys must be plain words");
      yaml_event_delete(&key);
      goto fail;
    }
    const char *k = (const char *)key.data.scalar.value;
    int line = (int)key.start_mark.line + 1, col = (int)key.start_mark.column + 1;
    if (cfg_map_find(map, k)) {
      cfg_set_error_at(err, r->file, line, col, "duplicate key '%s'", k);
      yaml_event_delete(&key);
      goto fail;
    }
    yaml_event_t vev;
    if (!cfg_next(r, &vev, err)) {
      yaml_event_delete(&key);
      goto fail;
    }
    cfg_node *value = cfg_read_node(r, &vev, err);
    if (!value) {
      yaml_event_delete(&key);
      goto fail;
    }
    cfg_pair *p = g_new0(cfg_pair, 1);
    p->key = g_strdup(k);
    p->line = line;
    p->col = col;
    p->value = value;
    g_ptr_array_add(map->items, p);
    yaml_event_delete(&key);
  }
fail:
  cfg_node_free(map);
  return NULL;
}

static cfg_node *cfg_read_seq(cfg_reader *r, cfg_node *seq, GError **err)
{
  for (;;) {
    yaml_event_t ev;
    if (!cfg_next(r, &ev, err))
      break;
    if (ev.type == YAML_SEQUENCE_END_EVENT) {
      yaml_event_delete(&ev);
      return seq;
    }
    cfg_node *item = cfg_read_node(r, &ev, err);
    if (!item)
      break;
    g_ptr_array_add(seq->items, item);
  }
  cfg_node_free(seq);
  return NULL;
}

/* Consumes `ev` (deletes it). */
static cfg_node *cfg_read_node(cfg_reader *r, yaml_event_t *ev, GError **err)
{
  int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
  cfg_node *n = NULL;
  switch (ev->type) {
  case YAML_SCALAR_EVENT:
    n = cfg_node_new(CFG_NODE_SCALAR, r->file, line, col);
    n->scalar = g_strndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    yaml_event_delete(ev);
    return n;
  case YAML_MAPPING_START_EVENT:
  case YAML_SEQUENCE_START_EVENT:
    if (r->depth >= CFG_MAX_DEPTH) {
      cfg_set_error_at(err, r->file, line, col,
                       "nested more than %d levels deep (dlsim files need a few)", CFG_MAX_DEPTH);
      break;
    }
    r->depth++;
    n = ev->type == YAML_MAPPING_START_EVENT
            ? cfg_read_map(r, cfg_node_new(CFG_NODE_MAP, r->file, line, col), err)
            : cfg_read_seq(r, cfg_node_new(CFG_NODE_SEQ, r->file, line, col), err);
    r->depth--;
    yaml_event_delete(ev);
    return n;
  case YAML_ALIAS_EVENT:
    cfg_set_error_at(err, r->file, line, col, "YAML aliases (*name) are not supported");
    break;
  default:
    cfg_set_error_at(err, r->file, line, col, "unexpected YAML structure");
    break;
  }
  yaml_event_delete(ev);
  return NULL;
}

/* Reads the single document of the stream; NULL root with no error means an empty stream. */
static bool cfg_read_stream(cfg_reader *r, cfg_node **root, GError **err)
{
  yaml_event_t ev;
  *root = NULL;
  if (!cfg_next(r, &ev, err))
    return false;
  yaml_event_delete(&ev); /* STREAM_START */
  if (!cfg_next(r, &ev, err))
    return false;
  if (ev.type == YAML_STREAM_END_EVENT) {
    yaml_event_delete(&ev);
    return true;
  }
  yaml_event_delete(&ev); /* DOCUMENT_START */
  if (!cfg_next(r, &ev, err))
    return false;
  *root = cfg_read_node(r, &ev, err);
  if (!*root)
    return false;
  if (!cfg_next(r, &ev, err))
    return false;
  yaml_event_delete(&ev); /* DOCUMENT_END */
  if (!cfg_next(r, &ev, err))
    return false;
  bool single = ev.type == YAML_STREAM_END_EVENT;
  int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
  yaml_event_delete(&ev);
  if (!single) {
    cfg_set_error_at(err, r->file, line, col, "expected one YAML document, found several");
    return false;
  }
  return true;
}

cfg_node *cfg_tree_parse(cfg_doc *doc, const char *text, const char *file, GError **err)
{
  cfg_reader r = {.file = cfg_doc_intern_file(doc, file)};
  if (!yaml_parser_initialize(&r.parser)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: cannot initialise the YAML parser", file);
    return NULL;
  }
  yaml_parser_set_input_string(&r.parser, (const unsigned char *)text, strlen(text));
  cfg_node *root = NULL;
  bool ok = cfg_read_stream(&r, &root, err);
  yaml_parser_delete(&r.parser);
  if (!ok) {
    cfg_node_free(root);
    return NULL;
  }
  if (!root || cfg_node_is_null(root)) {
    cfg_node_free(root);
    cfg_set_error_at(err, r.file, 0, 0, "empty document: expected a mapping of keys");
    return NULL;
  }
  if (root->kind != CFG_NODE_MAP) {
    cfg_set_error_node(err, root, "expected a mapping of keys at the top level, found %s",
                       root->kind == CFG_NODE_SEQ ? "a list" : "a single value");
    cfg_node_free(root);
    return NULL;
  }
  return root;
}

cfg_doc *cfg_doc_parse(const char *text, const char *origin, GError **err)
{
  cfg_doc *doc = g_new0(cfg_doc, 1);
  doc->files = g_ptr_array_new_with_free_func(g_free);
  if (memchr(text, '\0', strlen(text)) == NULL && !g_utf8_validate(text, -1, NULL)) {
    cfg_set_error_at(err, origin, 0, 0, "not a text file (invalid UTF-8)");
    cfg_doc_free(doc);
    return NULL;
  }
  doc->root = cfg_tree_parse(doc, text, origin, err);
  if (!doc->root) {
    cfg_doc_free(doc);
    return NULL;
  }
  return doc;
}

cfg_doc *cfg_doc_load(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *io = NULL;
  if (!g_file_get_contents(path, &text, &len, &io)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: cannot read: %s", path, io->message);
    g_error_free(io);
    return NULL;
  }
  if (strlen(text) != len) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: not a text file (contains NUL bytes)", path);
    return NULL;
  }
  return cfg_doc_parse(text, path, err);
}

void cfg_doc_free(cfg_doc *doc)
{
  if (!doc)
    return;
  cfg_node_free(doc->root);
  g_ptr_array_free(doc->files, TRUE);
  g_free(doc);
}

const char *cfg_doc_file(const cfg_doc *doc)
{
  return doc->root ? doc->root->file : "";
}

/* Splits "a.b[2].c" into {"a","b","2","c"}. */
static char **cfg_path_split(const char *path)
{
  g_autofree char *norm = g_strdup(path);
  for (char *c = norm; *c; c++)
    if (*c == '[' || *c == ']')
      *c = '.';
  char **raw = g_strsplit(norm, ".", -1);
  GPtrArray *parts = g_ptr_array_new();
  for (char **p = raw; *p; p++)
    if (**p)
      g_ptr_array_add(parts, g_strdup(*p));
  g_ptr_array_add(parts, NULL);
  g_strfreev(raw);
  return (char **)g_ptr_array_free(parts, FALSE);
}

static cfg_node *cfg_child(const cfg_node *n, const char *seg)
{
  if (n->kind == CFG_NODE_MAP)
    return cfg_map_get(n, seg);
  if (n->kind == CFG_NODE_SEQ) {
    char *end = NULL;
    long idx = strtol(seg, &end, 10);
    if (*end || idx < 0 || (guint)idx >= n->items->len)
      return NULL;
    return g_ptr_array_index(n->items, idx);
  }
  return NULL;
}

bool cfg_doc_has(const cfg_doc *doc, const char *path)
{
  const cfg_node *n = doc ? doc->root : NULL;
  g_auto(GStrv) parts = cfg_path_split(path);
  for (char **p = parts; *p && n; p++)
    n = cfg_child(n, *p);
  return n != NULL;
}

char *cfg_doc_where(const cfg_doc *doc, const char *path)
{
  const cfg_node *n = doc->root;
  g_auto(GStrv) parts = cfg_path_split(path);
  for (char **p = parts; *p; p++) {
    const cfg_node *c = cfg_child(n, *p);
    if (!c)
      break;
    n = c;
  }
  if (n->line > 0)
    return g_strdup_printf("%s:%d:%d", n->file, n->line, n->col);
  if (strcmp(n->file, "--set") == 0)
    return g_strdup_printf("--set %s", path);
  return g_strdup(n->file);
}

/* A --set value is a scalar, or a flow list / mapping such as "[tp, dp, pp, cp]". */
static cfg_node *cfg_override_value(cfg_doc *doc, const char *value, const char *origin,
                                    GError **err)
{
  if (value[0] == '[' || value[0] == '{') {
    g_autofree char *text = g_strdup_printf("v: %s", value);
    GError *inner = NULL;
    cfg_node *wrapper = cfg_tree_parse(doc, text, origin, &inner);
    if (!wrapper) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set: cannot read '%s': %s", value,
                  inner->message);
      g_error_free(inner);
      return NULL;
    }
    cfg_pair *p = g_ptr_array_index(wrapper->items, 0);
    cfg_node *v = p->value;
    p->value = NULL;
    cfg_node_free(wrapper);
    return v;
  }
  cfg_node *v = cfg_node_new(CFG_NODE_SCALAR, origin, 0, 0);
  v->scalar = g_strdup(value);
  v->plain = true;
  return v;
}

bool cfg_tree_set(cfg_doc *doc, const char *path, const char *value, GError **err)
{
  g_auto(GStrv) parts = cfg_path_split(path);
  const char *origin = cfg_doc_intern_file(doc, "--set");
  cfg_node *n = doc->root;
  for (char **p = parts; *p; p++) {
    bool last = p[1] == NULL;
    if (n->kind == CFG_NODE_SEQ) {
      cfg_node *c = cfg_child(n, *p);
      if (!c) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                    "--set %s: index '%s' is outside the list (it has %u items)", path, *p,
                    n->items->len);
        return false;
      }
      if (last) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: cannot replace a list item",
                    path);
        return false;
      }
      n = c;
      continue;
    }
    if (n->kind != CFG_NODE_MAP) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--set %s: '%s' is a single value, not a mapping",
                  path, *p);
      return false;
    }
    if (last) {
      cfg_node *v = cfg_override_value(doc, value, origin, err);
      if (!v)
        return false;
      cfg_map_put(n, *p, v);
      return true;
    }
    cfg_node *c = cfg_map_get(n, *p);
    if (!c || c->kind == CFG_NODE_SCALAR) {
      c = cfg_node_new(CFG_NODE_MAP, origin, 0, 0);
      cfg_map_put(n, *p, c);
    }
    n = c;
  }
  return true;
}
