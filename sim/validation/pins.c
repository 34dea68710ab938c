/* Pins: every case's |error| as of the last accepted model change, so that a change that makes
 * any case worse by more than a point is seen (CI runs every case against them). */
#include "validation/validation.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

char *val_pins_path(void)
{
  return cfg_data_path("validation", "pins.tsv", NULL);
}

static void val_pin_free(gpointer p)
{
  val_pin *pin = p;
  g_free(pin->name);
  g_free(pin);
}

/* "NAME<TAB>ERROR" with ERROR a percentage or "failed". */
static bool val_pin_parse(const char *path, int lineno, const char *line, val_pin **out,
                          GError **err)
{
  g_auto(GStrv) f = g_strsplit(line, "\t", -1);
  char *end = NULL;
  double v = f[0] && f[1] ? g_ascii_strtod(f[1], &end) : NAN;
  bool failed = f[0] && f[1] && strcmp(f[1], "failed") == 0;
  if (!f[0] || !f[1] || f[2] || (!failed && (!end || *end || !(v >= 0)))) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s:%d: expected CASE<TAB>|ERROR| IN PERCENT (or 'failed')", path, lineno);
    return false;
  }
  *out = g_new0(val_pin, 1);
  (*out)->name = g_strdup(f[0]);
  (*out)->abs_error_pct = failed ? NAN : v;
  return true;
}

bool val_pins_load(const char *path, GHashTable **pins, GError **err)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, err))
    return false;
  GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, val_pin_free);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (int i = 0; lines[i]; i++) {
    if (!lines[i][0] || lines[i][0] == '#')
      continue;
    val_pin *pin = NULL;
    if (!val_pin_parse(path, i + 1, lines[i], &pin, err)) {
      g_hash_table_destroy(h);
      return false;
    }
    g_hash_table_replace(h, pin->name, pin);
  }
  *pins = h;
  return true;
}

/* What the pin compares: the |error| in percent, NAN when the case failed. */
static double val_row_abs_pct(const val_row *r)
{
  return r->failure ? NAN : 100 * fabs(r->error);
}

bool val_pins_check(const GArray *rows, GHashTable *pins, bool complete, GString *report)
{
  bool ok = true;
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < rows->len; i++) {
    const val_row *r = &g_array_index(rows, val_row, i);
    const val_pin *pin = g_hash_table_lookup(pins, r->c.name);
    double now = val_row_abs_pct(r);
    g_hash_table_add(seen, r->c.name);
    if (!pin) {
      g_string_append_printf(report, "case %s has no pin (add it with --update-pins)\n", r->c.name);
      ok = false;
    } else if (isnan(now) && !isnan(pin->abs_error_pct)) {
      g_string_append_printf(report, "case %s: failed (%s); pinned at %.2f %%\n", r->c.name,
                             r->failure, pin->abs_error_pct);
      ok = false;
    } else if (!isnan(now) && !isnan(pin->abs_error_pct) &&
               now > pin->abs_error_pct + VAL_PIN_SLACK) {
      g_string_append_printf(report, "case %s: |error| %.2f %% > pin %.2f %% + %.0f\n", r->c.name,
                             now, pin->abs_error_pct, VAL_PIN_SLACK);
      ok = false;
    }
  }
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, pins);
  while (complete && g_hash_table_iter_next(&it, &key, NULL))
    if (!g_hash_table_contains(seen, key)) {
      g_string_append_printf(report, "pinned case %s is gone\n", (const char *)key);
      ok = false;
    }
  g_hash_table_destroy(seen);
  return ok;
}

bool val_pins_write(const char *path, const GArray *rows, GError **err)
{
  GString *s = g_string_new(
      "# The |error| of every validation case, in percent, as of the last accepted model change.\n"
      "# CI runs every case (dlsim validate --check-pins) and fails if one grows by more than one\n"
      "# point beyond its pin, if a pinned case is gone, or if a case has no pin. A change that\n"
      "# improves a case updates its pin in the same commit: dlsim validate --update-pins.\n"
      "# case\t|error| %\n");
  for (guint i = 0; i < rows->len; i++) {
    const val_row *r = &g_array_index(rows, val_row, i);
    double v = val_row_abs_pct(r);
    if (isnan(v))
      g_string_append_printf(s, "%s\tfailed\n", r->c.name);
    else
      g_string_append_printf(s, "%s\t%.2f\n", r->c.name, v);
  }
  bool ok = cfg_write_text("--update-pins", path, s, err);
  g_string_free(s, TRUE);
  return ok;
}
