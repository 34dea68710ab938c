/* units: physical quantities written as text ("80GiB", "3.35TB/s", "400Gb/s", "989TFLOPS", "2us")
 * parsed to SI doubles, and formatted back for reports. */
#ifndef DLSIM_UNITS_H
#define DLSIM_UNITS_H

#include <stdbool.h>

typedef enum {
  UNITS_NUMBER,       /* dimensionless: "8", "1.5e3" */
  UNITS_BYTES,        /* "80GiB", "25MB", "1024" */
  UNITS_BYTES_PER_S,  /* "3.35TB/s", "400Gb/s" (bits are divided by 8), "50GBps" */
  UNITS_FLOPS,        /* FLOP/s: "989TFLOPS", "19.5 TFLOP/s" */
  UNITS_SECONDS,      /* "2us", "1.5ms", "3s", "100ns" */
  UNITS_PER_SECOND,   /* event rate: "10/s", "600/min", "2 req/s" */
  UNITS_FRACTION,     /* "0.9" or "90%" */
  UNITS_WATTS,        /* power: "700W", "10.2kW" */
} units_kind;

/* Parses `text` as a quantity of `kind`. On failure returns false and, if `why` is non-NULL,
 * stores a newly allocated (g_free) reason. A bare number is taken in the SI base unit. */
bool units_parse(const char *text, units_kind kind, double *out, char **why);

/* A short phrase naming what `kind` expects, with examples, for error messages. */
const char *units_describe(units_kind kind);

/* Human-readable renderings (newly allocated, g_free). */
char *units_format_bytes(double bytes);      /* "80.00 GiB" */
char *units_format_seconds(double seconds);  /* "190.5 ms" */
char *units_format_rate(double bytes_per_s); /* "46.9 GB/s" */

#endif
