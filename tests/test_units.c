#include "units/units.h"

#include <criterion/criterion.h>
#include <glib.h>
#include <math.h>

static double parse_ok(const char *text, units_kind kind)
{
  double v = -1;
  char *why = NULL;
  bool ok = units_parse(text, kind, &v, &why);
  cr_assert(ok, "'%s' should parse: %s", text, why ? why : "");
  g_free(why);
  return v;
}

static void parse_bad(const char *text, units_kind kind)
{
  double v = 0;
  char *why = NULL;
  cr_assert_not(units_parse(text, kind, &v, &why), "'%s' should be rejected", text);
  cr_assert_not_null(why);
  g_free(why);
}

Test(units, sizes)
{
  cr_assert_float_eq(parse_ok("80GiB", UNITS_BYTES), 80.0 * 1073741824.0, 1);
  cr_assert_float_eq(parse_ok("25MB", UNITS_BYTES), 25e6, 1e-6);
  cr_assert_float_eq(parse_ok("2TiB", UNITS_BYTES), 2.0 * 1099511627776.0, 1);
  cr_assert_float_eq(parse_ok("1024", UNITS_BYTES), 1024, 0);
  cr_assert_float_eq(parse_ok(" 1.5 KiB ", UNITS_BYTES), 1536, 0);
  cr_assert_float_eq(parse_ok("30TB", UNITS_BYTES), 30e12, 1);
}

Test(units, bandwidths_bits_and_bytes)
{
  cr_assert_float_eq(parse_ok("3.35TB/s", UNITS_BYTES_PER_S), 3.35e12, 1);
  cr_assert_float_eq(parse_ok("400Gb/s", UNITS_BYTES_PER_S), 50e9, 1);
  cr_assert_float_eq(parse_ok("450GB/s", UNITS_BYTES_PER_S), 450e9, 1);
  cr_assert_float_eq(parse_ok("50GBps", UNITS_BYTES_PER_S), 50e9, 1);
  cr_assert_float_eq(parse_ok("100 Gbps", UNITS_BYTES_PER_S), 12.5e9, 1);
}

Test(units, flops_time_rate_fraction)
{
  cr_assert_float_eq(parse_ok("989TFLOPS", UNITS_FLOPS), 989e12, 1);
  cr_assert_float_eq(parse_ok("19.5 TFLOP/s", UNITS_FLOPS), 19.5e12, 1);
  cr_assert_float_eq(parse_ok("1.2PFLOPS", UNITS_FLOPS), 1.2e15, 1);
  cr_assert_float_eq(parse_ok("2us", UNITS_SECONDS), 2e-6, 1e-18);
  cr_assert_float_eq(parse_ok("1.5ms", UNITS_SECONDS), 1.5e-3, 1e-15);
  cr_assert_float_eq(parse_ok("100ns", UNITS_SECONDS), 100e-9, 1e-18);
  cr_assert_float_eq(parse_ok("3", UNITS_SECONDS), 3, 0);
  cr_assert_float_eq(parse_ok("10/s", UNITS_PER_SECOND), 10, 0);
  cr_assert_float_eq(parse_ok("600/min", UNITS_PER_SECOND), 10, 1e-12);
  cr_assert_float_eq(parse_ok("2 req/s", UNITS_PER_SECOND), 2, 0);
  cr_assert_float_eq(parse_ok("90%", UNITS_FRACTION), 0.9, 1e-15);
  cr_assert_float_eq(parse_ok("0.9", UNITS_FRACTION), 0.9, 0);
  cr_assert_float_eq(parse_ok("700W", UNITS_WATTS), 700, 0);
  cr_assert_float_eq(parse_ok("10.2kW", UNITS_WATTS), 10200, 1e-9);
  cr_assert_float_eq(parse_ok("50000h", UNITS_SECONDS), 1.8e8, 0);
}

Test(units, rejects_wrong_units_and_garbage)
{
  parse_bad("80 apples", UNITS_BYTES);
  parse_bad("400Gb/s", UNITS_BYTES);       /* a bandwidth is not a size */
  parse_bad("80GiB", UNITS_BYTES_PER_S);   /* nor the reverse */
  parse_bad("989TB", UNITS_FLOPS);
  parse_bad("fast", UNITS_SECONDS);
  parse_bad("700J", UNITS_WATTS);
  parse_bad("", UNITS_NUMBER);
  parse_bad("12kg", UNITS_NUMBER);
  parse_bad("nan", UNITS_BYTES);
  parse_bad("inf", UNITS_SECONDS);
}

Test(units, formatting)
{
  char *a = units_format_bytes(80.0 * 1073741824.0);
  char *b = units_format_seconds(0.1905);
  char *c = units_format_rate(46.9e9);
  cr_assert_str_eq(a, "80.00 GiB");
  cr_assert_str_eq(b, "190.500 ms");
  cr_assert_str_eq(c, "46.90 GB/s");
  g_free(a), g_free(b), g_free(c);
}
