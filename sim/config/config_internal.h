/* Private to the config module: the YAML tree and the schema-driven decoder. */
#ifndef DLSIM_CONFIG_INTERNAL_H
#define DLSIM_CONFIG_INTERNAL_H

#include "config/config.h"
#include "units/units.h"

typedef enum { CFG_NODE_SCALAR, CFG_NODE_MAP, CFG_NODE_SEQ } cfg_node_kind;

typedef struct cfg_node cfg_node;
typedef struct {
  char *key;
  int line, col;
  cfg_node *value;
} cfg_pair;

struct cfg_node {
  cfg_node_kind kind;
  char *scalar;     /* SCALAR */
  bool plain;       /* SCALAR written without quotes (so "~" means null) */
  GPtrArray *items; /* MAP: cfg_pair*, SEQ: cfg_node* */
  const char *file; /* owned by the document */
  int line, col;    /* 1-based */
};

struct cfg_doc {
  cfg_node *root;
  GPtrArray *files; /* owned file names, for nodes grafted from other files */
};

cfg_node *cfg_node_new(cfg_node_kind kind, const char *file, int line, int col);
void cfg_node_free(cfg_node *n);
cfg_pair *cfg_map_find(const cfg_node *map, const char *key);
cfg_node *cfg_map_get(const cfg_node *map, const char *key);
void cfg_map_put(cfg_node *map, const char *key, cfg_node *value);
bool cfg_node_is_null(const cfg_node *n);
/* Parses text into a tree whose nodes name `file` (owned by `doc`). */
cfg_node *cfg_tree_parse(cfg_doc *doc, const char *text, const char *file, GError **err);
const char *cfg_doc_intern_file(cfg_doc *doc, const char *file);

/* Error helpers: "file:line:col: message" */
void cfg_set_error_at(GError **err, const char *file, int line, int col, const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);
void cfg_set_error_node(GError **err, const cfg_node *n, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

/* ---- schema ------------------------------------------------------------------------------- */

typedef enum {
  CFG_T_INT,
  CFG_T_QTY,        /* double with units */
  CFG_T_BOOL,       /* stored as int 0/1 */
  CFG_T_STRING,
  CFG_T_PATH,       /* string resolved relative to the file that holds it */
  CFG_T_ENUM,       /* stored as int */
  CFG_T_MAP,        /* nested struct */
  CFG_T_SEQ_MAP,    /* array of structs: pointer at offset, int count at count_offset */
  CFG_T_SEQ_ENUM,   /* int array inline at offset, int count at count_offset */
  CFG_T_QTY_BY_ENUM,/* mapping enum-name -> quantity, double array inline at offset */
  CFG_T_SEQ_STRING, /* list of strings: NULL-terminated char** at offset */
  CFG_T_NUMBER,     /* plain double, may be negative */
  CFG_T_SEQ_QTY     /* quantities of `unit`: double array inline at offset, int count at
                     * count_offset, at most `max` */
} cfg_type;

typedef struct cfg_schema cfg_schema;
typedef struct {
  const char *key;
  cfg_type type;
  size_t offset;
  units_kind unit;
  const char *const *names; /* ENUM names, NULL-terminated */
  const cfg_schema *sub;    /* MAP, SEQ_MAP */
  size_t count_offset;
  double min, max; /* inclusive range for INT and QTY (max 0 = unbounded) */
  const char *doc; /* one line for `dlsim schema` */
  const char *why; /* why values beyond `max` are refused (plausibility, not syntax) */
  /* the default: a constant that cfg_defaults applies (has_def: `def`, `defs` per name of a
   * QTY_BY_ENUM, `def_str` for strings), or `derived`: how load.c computes it, for the docs */
  bool has_def;
  double def;
  const double *defs;
  const char *def_str;
  const char *derived;
} cfg_field;

struct cfg_schema {
  const char *what; /* "cluster", "gpu", ... for messages */
  const cfg_field *fields;
  size_t nfields;
  size_t size;      /* sizeof the struct (SEQ_MAP elements) */
};

/* The range (SI) a quantity of this kind must lie in, or 0, and why; false if none. */
bool cfg_plausible_range(units_kind unit, double *lo, double *hi, const char **why);

/* Marks every key of `obj` unset (NAN, CFG_UNSET_INT, NULL, empty), as the table says. */
void cfg_schema_init(const cfg_schema *s, void *obj);
/* Gives every unset key of `obj` that has a constant default its default (recursing into
 * mappings and list elements). */
void cfg_defaults(const cfg_schema *s, void *obj);
/* Fills every unset key of `dst` from `src` (a calibration file under the cluster's keys). */
void cfg_merge(const cfg_schema *s, void *dst, const void *src);

extern const cfg_schema cfg_schema_cluster;
extern const cfg_schema cfg_schema_workload;
extern const cfg_schema cfg_schema_model;
extern const cfg_schema cfg_schema_efficiency;
extern const cfg_schema cfg_schema_nccl;
extern const cfg_schema cfg_schema_collectives;
extern const cfg_schema cfg_schema_tier;
extern const cfg_schema cfg_schema_case;
extern const char *const cfg_dtype_names[];

#define CFG_UNSET_INT G_MININT

bool cfg_decode(const cfg_node *node, const cfg_schema *schema, void *out, const char *path,
                GError **err);
/* Checks a dotted override path against a schema; on success stores the schema field it ends on. */
bool cfg_schema_check_path(const cfg_schema *schema, const char *path, GError **err);
bool cfg_schema_has_key(const cfg_schema *schema, const char *key);
/* Sets the scalar at a dotted path, creating mappings on the way. */
bool cfg_tree_set(cfg_doc *doc, const char *path, const char *value, GError **err);

/* A calibration file: what it was fitted for, and the efficiency tables. */
typedef struct {
  char *gpu;
  char *notes;
  cfg_efficiency efficiency;
  cfg_nccl nccl;
} cfg_calibration;
extern const cfg_schema cfg_schema_calibration;

bool cfg_calibration_load(const char *path, cfg_calibration *cal, GError **err);
void cfg_calibration_clear(cfg_calibration *cal);

#endif
