#include "units/units.h"

#include <glib.h>
#include <math.h>
#include <string.h>

typedef struct {
  const char *name;
  double factor;
} units_suffix;

/* Binary prefixes must come before the SI ones sharing their first letter. */
static const units_suffix units_prefixes[] = {
    {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
    {"Pi", 1125899906842624.0}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9},
    {"T", 1e12}, {"P", 1e15}, {"E", 1e18}, {"", 1.0},
};

static const units_suffix units_time[] = {
    {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3}, {"s", 1.0},
    {"sec", 1.0}, {"min", 60.0}, {"h", 3600.0}, {"", 1.0},
};

static const units_suffix units_rate_per[] = {
    {"/s", 1.0}, {"/sec", 1.0}, {"/min", 1.0 / 60.0}, {"/h", 1.0 / 3600.0},
};

static bool units_match_table(const char *s, const units_suffix *table, size_t n, double *factor)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(s, table[i].name) == 0) {
      *factor = table[i].factor;
      return true;
    }
  return false;
}

/* Tries every prefix split, because "Pi" vs "P" + "i..." and "" + "B" are all legal starts. */
static bool units_prefixed(const char *s, const char *const *bases, const double *base_factors,
                           size_t nbases, double *factor)
{
  if (*s == '\0')
    return false;
  for (size_t i = 0; i < G_N_ELEMENTS(units_prefixes); i++) {
    size_t len = strlen(units_prefixes[i].name);
    if (strncmp(s, units_prefixes[i].name, len) != 0)
      continue;
    for (size_t b = 0; b < nbases; b++)
      if (strcmp(s + len, bases[b]) == 0) {
        *factor = units_prefixes[i].factor * base_factors[b];
        return true;
      }
  }
  return false;
}

static bool units_suffix_factor(const char *s, units_kind kind, double *factor)
{
  static const char *const byte_names[] = {"B", "bytes", "byte"};
  static const double byte_f[] = {1, 1, 1};
  static const char *const bw_names[] = {"B/s", "Bps", "b/s", "bps", "bit/s"};
  static const double bw_f[] = {1, 1, 0.125, 0.125, 0.125};
  static const char *const fl_names[] = {"FLOPS", "FLOP/s", "flops", "flop/s", "FLOP/S", "Flops",
                                         "Flop/s", "F"};
  static const double fl_f[] = {1, 1, 1, 1, 1, 1, 1, 1};
  static const char *const watt_names[] = {"W"};
  static const double watt_f[] = {1};
  const char *rest = NULL;
  if (*s == '\0') {
    *factor = 1.0;
    return true;
  }
  switch (kind) {
  case UNITS_NUMBER:
    return false;
  case UNITS_FRACTION:
    if (strcmp(s, "%") == 0) {
      *factor = 0.01;
      return true;
    }
    return false;
  case UNITS_BYTES:
    return units_prefixed(s, byte_names, byte_f, G_N_ELEMENTS(byte_names), factor);
  case UNITS_BYTES_PER_S:
    return units_prefixed(s, bw_names, bw_f, G_N_ELEMENTS(bw_names), factor);
  case UNITS_FLOPS:
    return units_prefixed(s, fl_names, fl_f, G_N_ELEMENTS(fl_names), factor);
  case UNITS_SECONDS:
    return units_match_table(s, units_time, G_N_ELEMENTS(units_time), factor);
  case UNITS_WATTS:
    return units_prefixed(s, watt_names, watt_f, G_N_ELEMENTS(watt_names), factor);
  case UNITS_PER_SECOND:
    /* "10/s", "10 req/s", "10 requests/s" */
    rest = strchr(s, '/');
    if (!rest)
      return false;
    return units_match_table(rest, units_rate_per, G_N_ELEMENTS(units_rate_per), factor);
  }
  return false;
}

const char *units_describe(units_kind kind)
{
  switch (kind) {
  case UNITS_NUMBER:
    return "a number";
  case UNITS_BYTES:
    return "a size with its unit, such as 80GiB, 25MB or 4096B";
  case UNITS_BYTES_PER_S:
    return "a bandwidth with its unit, such as 3.35TB/s or 400Gb/s";
  case UNITS_FLOPS:
    return "a compute rate with its unit, such as 989TFLOPS";
  case UNITS_SECONDS:
    return "a duration with its unit, such as 2us, 1.5ms or 3s";
  case UNITS_PER_SECOND:
    return "a rate such as 10/s or 600/min";
  case UNITS_FRACTION:
    return "a fraction such as 0.9 or 90%";
  case UNITS_WATTS:
    return "a power with its unit, such as 700W or 10.2kW";
  }
  return "a value";
}

bool units_parse(const char *text, units_kind kind, double *out, char **why)
{
  if (why)
    *why = NULL;
  if (!text) {
    if (why)
      *why = g_strdup("empty value");
    return false;
  }
  g_autofree char *copy = g_strstrip(g_strdup(text));
  if (*copy == '\0') {
    if (why)
      *why = g_strdup("empty value");
    return false;
  }
  char *end = NULL;
  double value = g_ascii_strtod(copy, &end);
  if (end == copy || !isfinite(value)) {
    if (why)
      *why = g_strdup_printf("'%s' does not start with a number", copy);
    return false;
  }
  while (*end == ' ' || *end == '\t')
    end++;
  double factor = 1.0;
  if (!units_suffix_factor(end, kind, &factor)) {
    if (why)
      *why = g_strdup_printf("unknown unit '%s' in '%s'", end, copy);
    return false;
  }
  *out = value * factor;
  return true;
}

static char *units_format_scaled(double v, const char *const *names, const double *scales, size_t n,
                                 int digits)
{
  size_t pick = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(v) >= scales[i])
      pick = i;
  return g_strdup_printf("%.*f %s", digits, v / scales[pick], names[pick]);
}

char *units_format_bytes(double bytes)
{
  static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  static const double scales[] = {1.0, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0};
  return units_format_scaled(bytes, names, scales, G_N_ELEMENTS(names), 2);
}

char *units_format_seconds(double seconds)
{
  static const char *const names[] = {"ns", "us", "ms", "s"};
  static const double scales[] = {1e-9, 1e-6, 1e-3, 1.0};
  if (seconds == 0.0)
    return g_strdup("0 s");
  return units_format_scaled(seconds, names, scales, G_N_ELEMENTS(names), 3);
}

char *units_format_rate(double bytes_per_s)
{
  static const char *const names[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  static const double scales[] = {1.0, 1e3, 1e6, 1e9, 1e12};
  return units_format_scaled(bytes_per_s, names, scales, G_N_ELEMENTS(names), 2);
}
