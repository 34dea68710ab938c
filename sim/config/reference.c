/* The reference of every key, generated from the tables (dlsim schema, docs/schema.md): what a
 * user reads is what the loader does. */
#include "config/config_internal.h"

#include <math.h>
#include <string.h>

static const char *cfg_ref_type(const cfg_field *f)
{
  static const char *const qty[] = {"number", "size", "bandwidth", "FLOP/s",
                                    "time",   "rate", "fraction", "power"};
  switch (f->type) {
  case CFG_T_INT:
    return "integer";
  case CFG_T_QTY:
    return qty[f->unit];
  case CFG_T_NUMBER:
    return "number";
  case CFG_T_BOOL:
    return "true/false";
  case CFG_T_STRING:
    return "text";
  case CFG_T_PATH:
    return "file";
  case CFG_T_ENUM:
    return "name";
  case CFG_T_MAP:
    return "mapping";
  case CFG_T_SEQ_MAP:
    return "list of mappings";
  case CFG_T_SEQ_ENUM:
    return "list of names";
  case CFG_T_SEQ_STRING:
    return "list of text";
  case CFG_T_SEQ_QTY:
    return f->unit == UNITS_FRACTION ? "list of fractions" : "list of numbers";
  case CFG_T_QTY_BY_ENUM:
    return f->unit == UNITS_FRACTION ? "fractions by name" : f->unit == UNITS_SECONDS ? "times by name"
           : f->unit == UNITS_BYTES ? "sizes by name" : "FLOP/s by name";
  }
  return "?";
}

/* A value as the YAML would write it, in the field's unit. */
static char *cfg_ref_value(units_kind unit, double v)
{
  switch (unit) {
  case UNITS_BYTES:
    return units_format_bytes(v);
  case UNITS_SECONDS:
    return v >= 86400 ? g_strdup_printf("%.0fh", v / 3600) : units_format_seconds(v);
  case UNITS_BYTES_PER_S:
    return units_format_rate(v);
  case UNITS_WATTS:
    return g_strdup_printf("%gW", v);
  default:
    return g_strdup_printf("%g", v);
  }
}

static char *cfg_ref_default(const cfg_field *f)
{
  if (f->derived)
    return g_strdup(f->derived);
  if (f->def_str)
    return g_strdup(f->def_str);
  if (f->defs) {
    GString *s = g_string_new(NULL);
    for (int k = 0; f->names[k]; k++) {
      g_autofree char *v = cfg_ref_value(f->unit, f->defs[k]);
      g_string_append_printf(s, "%s%s %s", k ? ", " : "", f->names[k], v);
    }
    return g_string_free(s, FALSE);
  }
  if (!f->has_def)
    return g_strdup("-");
  if (f->type == CFG_T_ENUM)
    return g_strdup(f->names[(int)f->def]);
  if (f->type == CFG_T_BOOL)
    return g_strdup(f->def != 0 ? "true" : "false");
  if (f->type == CFG_T_INT)
    return g_strdup_printf("%d", (int)f->def);
  return cfg_ref_value(f->unit, f->def);
}

static char *cfg_ref_allowed(const cfg_field *f)
{
  if (f->names && f->type != CFG_T_QTY_BY_ENUM)
    return g_strjoinv(", ", (char **)f->names);
  if (f->names) {
    g_autofree char *keys = g_strjoinv(", ", (char **)f->names);
    return g_strdup_printf("keys: %s", keys);
  }
  if (f->type == CFG_T_INT)
    return f->max > 0 ? g_strdup_printf("%g to %g", f->min, f->max) : g_strdup_printf(">= %g", f->min);
  double lo, hi;
  const char *why;
  if (f->type == CFG_T_QTY && f->max == 0 && cfg_plausible_range(f->unit, &lo, &hi, &why))
    return g_strdup_printf("0, or %g to %g (SI), with its unit", lo, hi);
  if (f->type == CFG_T_QTY)
    return f->max > 0 ? g_strdup_printf("0 to %g", f->max) : g_strdup(">= 0");
  return g_strdup("");
}

typedef struct {
  GString *out;
  bool markdown;
} cfg_ref;

static void cfg_ref_row(cfg_ref *r, const char *path, const cfg_field *f)
{
  g_autofree char *def = cfg_ref_default(f), *allowed = cfg_ref_allowed(f);
  if (r->markdown)
    g_string_append_printf(r->out, "| `%s` | %s | %s | %s | %s |\n", path, cfg_ref_type(f), def,
                           allowed, f->doc ? f->doc : "");
  else
    g_string_append_printf(r->out, "  %-40s %-17s default %s%s%s\n  %40s %s\n", path,
                           cfg_ref_type(f), def, *allowed ? "; " : "", allowed, "",
                           f->doc ? f->doc : "");
}

/* Every key below `s`, depth first, with its dotted path. */
static void cfg_ref_walk(cfg_ref *r, const cfg_schema *s, const char *prefix)
{
  for (size_t i = 0; i < s->nfields; i++) {
    const cfg_field *f = &s->fields[i];
    g_autofree char *path = *prefix ? g_strdup_printf("%s.%s", prefix, f->key) : g_strdup(f->key);
    if (f->type == CFG_T_MAP && f->sub == &cfg_schema_model && *prefix) {
      cfg_ref_row(r, path, f); /* a second model (a draft) takes the keys of `model` */
    } else if (f->type == CFG_T_MAP) {
      cfg_ref_walk(r, f->sub, path);
    } else if (f->type == CFG_T_SEQ_MAP) {
      cfg_ref_row(r, path, f);
      g_autofree char *item = g_strdup_printf("%s[]", path);
      cfg_ref_walk(r, f->sub, item);
    } else {
      cfg_ref_row(r, path, f);
    }
  }
}

static void cfg_ref_section(cfg_ref *r, const char *title, const char *what,
                            const cfg_schema *s, const char *prefix)
{
  if (r->markdown)
    g_string_append_printf(r->out, "\n## %s\n\n%s\n\n| key | type | default | allowed | what it is |\n"
                                   "|---|---|---|---|---|\n",
                           title, what);
  else
    g_string_append_printf(r->out, "\n%s\n  (%s)\n", title, what);
  cfg_ref_walk(r, s, prefix);
}

static const char *const cfg_ref_intro =
    "Every key dlsim reads, generated from the tables the loader uses (`dlsim schema "
    "--markdown`; a test fails when this file is stale).\n\n"
    "Quantities take SI or binary units as strings: sizes `80GiB`, `25MB`; bandwidths "
    "`3.35TB/s`, `400Gb/s` (bits are divided by 8); FLOP/s `989TFLOPS`; times `2us`, `1.5ms`; "
    "rates `10/s`, `600/min`; fractions `0.9` or `90%`. A quantity with a dimension needs its "
    "unit (a bare `400` for a bandwidth is an error, not 400 bytes/s; `0` needs none), and it "
    "must lie in the plausible range the table gives: a value outside is an error that names "
    "the key, the value, the range and why. `--set PATH=VALUE` sets any key by its dotted path, "
    "in the cluster or the workload (`--set gpu.memory_bandwidth=4.8TB/s`, `--set "
    "parallel.tp=4`). An unknown key is an error that names the key, its file:line:column and "
    "the closest known key. A default in words is derived from other keys when the file leaves "
    "the key out; `required` keys have none.\n";

void cfg_schema_reference(GString *out, bool markdown)
{
  cfg_ref r = {.out = out, .markdown = markdown};
  g_string_append(out, markdown ? "# dlsim configuration reference\n\n" : "dlsim configuration reference\n\n");
  g_string_append(out, cfg_ref_intro);
  cfg_ref_section(&r, "Cluster", "configs/clusters/*.yaml, or `-c FILE`", &cfg_schema_cluster, "");
  cfg_ref_section(&r, "Workload", "configs/workloads/*.yaml, or `-w FILE`; `model:` names a file "
                  "under configs/models/ or is a mapping of the keys below", &cfg_schema_workload, "");
  cfg_ref_section(&r, "Calibration file", "what `dlsim calibrate` writes and `gpu.calibration` "
                  "points at", &cfg_schema_calibration, "");
  cfg_ref_section(&r, "Validation case", "validation/cases/*.yaml, run by `dlsim validate`",
                  &cfg_schema_case, "");
}

/* The keys of `s` a `--set` reaches by a dotted path, one a line; a list's items are left out
 * (completion offers these, and an item needs its index). */
static void cfg_keys_walk(GString *out, const cfg_schema *s, const char *prefix)
{
  for (size_t i = 0; i < s->nfields; i++) {
    const cfg_field *f = &s->fields[i];
    g_autofree char *path = *prefix ? g_strdup_printf("%s.%s", prefix, f->key) : g_strdup(f->key);
    if (f->type == CFG_T_MAP)
      cfg_keys_walk(out, f->sub, path);
    else if (f->type == CFG_T_QTY_BY_ENUM)
      for (int k = 0; f->names[k]; k++)
        g_string_append_printf(out, "%s.%s\n", path, f->names[k]);
    else if (f->type != CFG_T_SEQ_MAP)
      g_string_append_printf(out, "%s\n", path);
  }
}

void cfg_schema_set_keys(GString *out)
{
  cfg_keys_walk(out, &cfg_schema_cluster, "");
  cfg_keys_walk(out, &cfg_schema_workload, "");
}
