/* Reading Chakra ET files: finding a trace's ranks, the varint framing of its records and the
 * attributes dlsim uses. Every error names the file and the byte offset of the bad record. */
#include "chakra/chakra.h"
#include "chakra/chakra.pb-c.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

typedef ChakraProtoMsg__Node chk_pb_node;
typedef ChakraProtoMsg__AttributeProto chk_pb_attr;

/* ---- framing ---------------------------------------------------------------------------- */

/* A record's length prefix at *pos; advances past it. */
static bool chk_varint(const uint8_t *buf, gsize len, gsize *pos, uint64_t *out)
{
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *pos < len; shift += 7) {
    uint8_t b = buf[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* The next record: its body's start and size. */
static bool chk_record(const uint8_t *buf, gsize len, gsize *pos, const char *origin,
                       gsize *body, gsize *size, GError **err)
{
  gsize at = *pos;
  uint64_t n;
  if (!chk_varint(buf, len, pos, &n)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: byte %" G_GSIZE_FORMAT ": truncated or malformed length prefix of a Chakra record",
                origin, at);
    return false;
  }
  if (n > len - *pos) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: byte %" G_GSIZE_FORMAT ": a record of %" G_GUINT64_FORMAT
                " bytes runs past the end of the file (%" G_GSIZE_FORMAT " bytes)",
                origin, at, n, len);
    return false;
  }
  *body = *pos;
  *size = (gsize)n;
  *pos += (gsize)n;
  return true;
}

/* ---- attributes ------------------------------------------------------------------------- */

/* An attribute's value as a number, whichever numeric type the writer chose. */
static bool chk_attr_number(const chk_pb_attr *a, double *out)
{
  switch (a->value_case) {
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_DOUBLE_VAL: *out = a->double_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FLOAT_VAL: *out = a->float_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL: *out = a->int32_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL: *out = (double)a->int64_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT32_VAL: *out = a->uint32_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL: *out = (double)a->uint64_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT32_VAL: *out = a->sint32_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT64_VAL: *out = (double)a->sint64_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FIXED32_VAL: *out = a->fixed32_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FIXED64_VAL: *out = (double)a->fixed64_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED32_VAL: *out = a->sfixed32_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED64_VAL: *out = (double)a->sfixed64_val; return true;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL: *out = a->bool_val; return true;
  default: return false;
  }
}

/* The string attribute `name` of a node, or NULL. */
static const char *chk_attr_string(const chk_pb_node *n, const char *name)
{
  for (size_t i = 0; i < n->n_attr; i++)
    if (n->attr[i]->name && strcmp(n->attr[i]->name, name) == 0 &&
        n->attr[i]->value_case == CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL)
      return n->attr[i]->string_val;
  return NULL;
}

/* The numeric attribute `name` of a node; false when it has none. */
static bool chk_attr(const chk_pb_node *n, const char *name, double *out)
{
  for (size_t i = 0; i < n->n_attr; i++)
    if (n->attr[i]->name && strcmp(n->attr[i]->name, name) == 0)
      return chk_attr_number(n->attr[i], out);
  return false;
}

/* ---- nodes ------------------------------------------------------------------------------ */

static bool chk_coll_of(double type, prog_coll *out)
{
  switch ((int)type) {
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE: *out = PROG_COLL_ALLREDUCE; return true;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE: *out = PROG_COLL_REDUCE; return true;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER: *out = PROG_COLL_ALLGATHER; return true;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BROADCAST: *out = PROG_COLL_BROADCAST; return true;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL: *out = PROG_COLL_ALLTOALL; return true;
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER:
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER_BLOCK:
    *out = PROG_COLL_REDUCESCATTER;
    return true;
  /* a barrier moves no data: an all-reduce of one word costs what it costs */
  case CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BARRIER: *out = PROG_COLL_ALLREDUCE; return true;
  default: return false;
  }
}

/* What a communication node needs: its size, and its collective or its peer. */
static bool chk_comm_fields(const chk_pb_node *n, chk_node *x, const char *where, GError **err)
{
  double type = -1, size = 0, peer = -1;
  if (!chk_attr(n, "comm_size", &size) || size < 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: node %" G_GUINT64_FORMAT
                " (%s): a communication node needs a comm_size attribute (bytes)",
                where, n->id, n->name);
    return false;
  }
  x->bytes = size;
  if (x->kind == CHK_COLL) {
    bool barrier = chk_attr(n, "comm_type", &type) &&
                   (int)type == CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BARRIER;
    if (!chk_coll_of(type, &x->coll)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: node %" G_GUINT64_FORMAT
                  " (%s): comm_type %g: expected ALL_REDUCE (0), REDUCE (1), ALL_GATHER (2), BROADCAST (5), "
                  "ALL_TO_ALL (6), REDUCE_SCATTER (7, 8) or BARRIER (9)",
                  where, n->id, n->name, type);
      return false;
    }
    if (barrier)
      x->bytes = 4;
    const char *pg = chk_attr_string(n, "pg_name");
    x->pg = pg && *pg ? g_strdup(pg) : NULL;
    return true;
  }
  const char *key = x->kind == CHK_SEND ? "comm_dst" : "comm_src";
  if (!chk_attr(n, key, &peer) || peer < 0 || peer > G_MAXINT) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: node %" G_GUINT64_FORMAT
                " (%s): a %s needs a %s attribute (a rank)", where, n->id, n->name,
                x->kind == CHK_SEND ? "send" : "receive", key);
    return false;
  }
  x->peer = (int)peer;
  return true;
}

static chk_kind chk_kind_of(ChakraProtoMsg__NodeType t)
{
  switch (t) {
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE: return CHK_COMPUTE;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE: return CHK_COLL;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE: return CHK_SEND;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE: return CHK_RECV;
  default: return CHK_OTHER; /* memory, metadata, storage: they only pass dependencies on */
  }
}

static bool chk_node_from(const chk_pb_node *n, gsize offset, const char *origin, chk_node *x,
                          GError **err)
{
  *x = (chk_node){.id = n->id, .kind = chk_kind_of(n->type), .peer = -1, .offset = offset,
                  .duration = (double)n->duration_micros * 1e-6};
  g_autofree char *where = g_strdup_printf("%s: byte %" G_GSIZE_FORMAT, origin, offset);
  if ((x->kind == CHK_COLL || x->kind == CHK_SEND || x->kind == CHK_RECV) &&
      !chk_comm_fields(n, x, where, err))
    return false;
  if (x->kind == CHK_COMPUTE) {
    double cpu = 0;
    chk_attr(n, "num_ops", &x->flops);
    chk_attr(n, "tensor_size", &x->bytes);
    x->cpu = chk_attr(n, "is_cpu_op", &cpu) && cpu != 0;
  }
  x->name = g_strdup(n->name && *n->name ? n->name : "node");
  x->ndeps = (guint)(n->n_data_deps + n->n_ctrl_deps);
  x->deps = g_new(uint64_t, MAX(x->ndeps, 1u));
  if (n->n_data_deps)
    memcpy(x->deps, n->data_deps, n->n_data_deps * sizeof *x->deps);
  if (n->n_ctrl_deps)
    memcpy(x->deps + n->n_data_deps, n->ctrl_deps, n->n_ctrl_deps * sizeof *x->deps);
  return true;
}

void chk_nodes_clear(GArray *nodes)
{
  for (guint i = 0; i < nodes->len; i++) {
    chk_node *x = &g_array_index(nodes, chk_node, i);
    g_free(x->name);
    g_free(x->pg);
    g_free(x->deps);
  }
  g_array_set_size(nodes, 0);
}

static bool chk_parse_metadata(const uint8_t *buf, gsize len, gsize *pos, const char *origin,
                               GError **err)
{
  gsize body, size;
  if (len == 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: byte 0: empty file, expected a Chakra trace (GlobalMetadata, then nodes)", origin);
    return false;
  }
  if (!chk_record(buf, len, pos, origin, &body, &size, err))
    return false;
  ChakraProtoMsg__GlobalMetadata *m =
      chakra_proto_msg__global_metadata__unpack(NULL, size, buf + body);
  if (!m) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: byte 0: not a Chakra GlobalMetadata record (%" G_GSIZE_FORMAT " bytes)", origin, size);
    return false;
  }
  chakra_proto_msg__global_metadata__free_unpacked(m, NULL);
  return true;
}

bool chk_parse(const uint8_t *buf, gsize len, const char *origin, GArray *nodes, GError **err)
{
  gsize pos = 0;
  if (!chk_parse_metadata(buf, len, &pos, origin, err))
    return false;
  while (pos < len) {
    gsize at = pos, body, size;
    if (!chk_record(buf, len, &pos, origin, &body, &size, err))
      return false;
    chk_pb_node *n = chakra_proto_msg__node__unpack(NULL, size, buf + body);
    if (!n) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "%s: byte %" G_GSIZE_FORMAT ": not a Chakra Node record (%" G_GSIZE_FORMAT " bytes)",
                  origin, at, size);
      return false;
    }
    chk_node x;
    bool ok = chk_node_from(n, at, origin, &x, err);
    chakra_proto_msg__node__free_unpacked(n, NULL);
    if (!ok)
      return false;
    g_array_append_val(nodes, x);
  }
  return true;
}

/* ---- files ------------------------------------------------------------------------------ */

/* NAME and RANK of a NAME.RANK.et file name; false for any other name. */
static bool chk_split_name(const char *base, char **name, int *rank)
{
  if (!g_str_has_suffix(base, ".et"))
    return false;
  g_autofree char *stem = g_strndup(base, strlen(base) - 3);
  char *dot = strrchr(stem, '.');
  if (!dot || dot == stem || !dot[1])
    return false;
  char *end;
  long r = strtol(dot + 1, &end, 10);
  if (*end || r < 0 || r > G_MAXINT || !g_ascii_isdigit(dot[1]))
    return false;
  *name = g_strndup(stem, (gsize)(dot - stem));
  *rank = (int)r;
  return true;
}

bool chk_is_trace(const char *path)
{
  g_autofree char *base = g_path_get_basename(path), *name = NULL;
  int rank;
  if (chk_split_name(base, &name, &rank))
    return true;
  GDir *d = g_dir_open(path, 0, NULL);
  bool any = false;
  for (const char *f; d && !any && (f = g_dir_read_name(d));)
    any = g_str_has_suffix(f, ".et");
  if (d)
    g_dir_close(d);
  return any;
}

/* The directory and NAME a DIR_OR_PREFIX argument designates (NAME NULL: the only one there). */
static void chk_locate(const char *arg, char **dir, char **name)
{
  g_autofree char *base = g_path_get_basename(arg);
  int rank;
  *name = NULL;
  if (g_file_test(arg, G_FILE_TEST_IS_DIR)) {
    *dir = g_strdup(arg);
  } else {
    *dir = g_path_get_dirname(arg);
    if (!chk_split_name(base, name, &rank))
      *name = g_strdup(base);
  }
}

/* Files of the series: path per rank, in a table rank -> path. */
static bool chk_find_ranks(const char *dir, char **name, GHashTable *paths, GError **err)
{
  GDir *d = g_dir_open(dir, 0, err);
  if (!d)
    return false;
  bool ok = true;
  for (const char *f; ok && (f = g_dir_read_name(d));) {
    g_autofree char *n = NULL;
    int rank;
    if (!chk_split_name(f, &n, &rank) || (*name && strcmp(n, *name) != 0))
      continue;
    if (!*name) {
      *name = g_strdup(n);
    } else if (strcmp(n, *name) != 0) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: holds two Chakra traces (%s.*.et and %s.*.et): "
                  "name one by its prefix, %s/%s", dir, *name, n, dir, n);
      ok = false;
    }
    g_hash_table_insert(paths, GINT_TO_POINTER(rank), g_build_filename(dir, f, NULL));
  }
  g_dir_close(d);
  return ok;
}

static bool chk_load_rank(chk_rank *r, GError **err)
{
  g_autofree char *text = NULL;
  gsize len;
  if (!g_file_get_contents(r->path, &text, &len, err))
    return false;
  return chk_parse((const uint8_t *)text, len, r->path, r->nodes, err);
}

chk_trace *chk_load(const char *arg, GError **err)
{
  g_autofree char *dir = NULL;
  char *name = NULL;
  chk_locate(arg, &dir, &name);
  g_autoptr(GHashTable) paths = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  bool ok = chk_find_ranks(dir, &name, paths, err);
  if (ok && g_hash_table_size(paths) == 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: no Chakra trace there (expected files NAME.0.et, NAME.1.et, ... one per rank)", arg);
    ok = false;
  }
  if (!ok) {
    g_free(name);
    return NULL;
  }
  chk_trace *t = g_new0(chk_trace, 1);
  t->name = name;
  t->nranks = (int)g_hash_table_size(paths);
  t->ranks = g_new0(chk_rank, t->nranks);
  for (int r = 0; r < t->nranks; r++)
    t->ranks[r].nodes = g_array_new(FALSE, FALSE, sizeof(chk_node));
  for (int r = 0; ok && r < t->nranks; r++) {
    const char *p = g_hash_table_lookup(paths, GINT_TO_POINTER(r));
    if (!p) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s/%s.%d.et: missing: a trace of %d files must "
                  "hold ranks 0-%d", dir, name, r, t->nranks, t->nranks - 1);
      ok = false;
      break;
    }
    t->ranks[r].path = g_strdup(p);
    ok = chk_load_rank(&t->ranks[r], err);
  }
  if (!ok) {
    chk_free(t);
    return NULL;
  }
  return t;
}

void chk_free(chk_trace *t)
{
  if (!t)
    return;
  for (int r = 0; r < t->nranks; r++) {
    if (t->ranks[r].nodes) {
      chk_nodes_clear(t->ranks[r].nodes);
      g_array_free(t->ranks[r].nodes, TRUE);
    }
    g_free(t->ranks[r].path);
  }
  g_free(t->ranks);
  g_free(t->name);
  g_free(t);
}

/* ---- communicator groups ---------------------------------------------------------------- */

static bool chk_group_ranks(const cJSON *v, const char *path, GArray *ranks, GError **err)
{
  const cJSON *r;
  cJSON_ArrayForEach(r, v)
  {
    if (!cJSON_IsNumber(r) || r->valuedouble < 0 || r->valuedouble > G_MAXINT ||
        r->valuedouble != (int)r->valuedouble) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: group \"%s\": expected a list of ranks (integers >= 0)",
                  path, v->string);
      return false;
    }
    int k = (int)r->valuedouble;
    for (guint i = 0; i < ranks->len; i++)
      if (g_array_index(ranks, int, i) == k) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: group \"%s\": rank %d appears twice", path,
                    v->string, k);
        return false;
      }
    g_array_append_val(ranks, k);
  }
  if (ranks->len == 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: group \"%s\" has no ranks", path, v->string);
    return false;
  }
  return true;
}

GHashTable *chk_groups_load(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, err))
    return NULL;
  cJSON *j = cJSON_Parse(text);
  if (!cJSON_IsObject(j)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s: expected a JSON object of communicator groups, {\"1\": [0, 1, 2, 3], ...}", path);
    cJSON_Delete(j);
    return NULL;
  }
  GHashTable *groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
  const cJSON *v;
  bool ok = true;
  cJSON_ArrayForEach(v, j)
  {
    GArray *ranks = g_array_new(FALSE, FALSE, sizeof(int));
    g_hash_table_insert(groups, g_strdup(v->string), ranks);
    if (!(ok = chk_group_ranks(v, path, ranks, err)))
      break;
  }
  cJSON_Delete(j);
  if (!ok)
    g_clear_pointer(&groups, g_hash_table_destroy);
  return groups;
}
