#include "budget/budget.h"

#include "config/config.h"
#include "units/units.h"

/* Measured per-unit costs (see budget.h), doubled. */
#define BUD_BASE_BYTES (2 * 40e6)
#define BUD_DES_RANK_BYTES (2 * 70e3)
#define BUD_ANALYTIC_RANK_BYTES (2 * 10e3)
#define BUD_REQUEST_BYTES (2 * 170.0)
#define BUD_TOKEN_SECONDS (2 * 45e-9)

bud_limits bud_defaults(void)
{
  return (bud_limits){.max_bytes = BUD_DEFAULT_BYTES, .max_seconds = BUD_DEFAULT_SECONDS};
}

bool bud_limits_parse(bud_limits *l, const char *max_memory, bool yes, GError **err)
{
  *l = bud_defaults();
  l->yes = yes;
  if (!max_memory)
    return true;
  g_autofree char *why = NULL;
  if (!units_parse(max_memory, UNITS_BYTES, &l->max_bytes, &why) || !(l->max_bytes > 0)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--max-memory %s: %s", max_memory,
                why ? why : "expected a size > 0, such as 16GiB");
    return false;
  }
  return true;
}

bud_estimate bud_run(int ranks, bool des)
{
  return (bud_estimate){
      .bytes = BUD_BASE_BYTES + (double)ranks * (des ? BUD_DES_RANK_BYTES : BUD_ANALYTIC_RANK_BYTES),
      .seconds = -1};
}

bud_estimate bud_serve(double requests, double output_tokens)
{
  return (bud_estimate){.bytes = BUD_BASE_BYTES + requests * BUD_REQUEST_BYTES,
                        .seconds = output_tokens * BUD_TOKEN_SECONDS};
}

bool bud_check(const bud_limits *l, const char *what, bud_estimate e, GError **err)
{
  if (e.bytes > l->max_bytes) {
    g_autofree char *need = units_format_bytes(e.bytes), *max = units_format_bytes(l->max_bytes);
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                "%s would need about %s of memory, over the limit of %s (raise it with "
                "--max-memory, or ask for less)", what, need, max);
    return false;
  }
  if (!l->yes && e.seconds > l->max_seconds) {
    g_autofree char *need = units_format_seconds(e.seconds);
    g_autofree char *max = units_format_seconds(l->max_seconds);
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME,
                "%s would take about %s, over the limit of %s (run it anyway with --yes, or ask "
                "for less)", what, need, max);
    return false;
  }
  return true;
}
