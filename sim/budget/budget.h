/* budget: what a command will cost before it runs. dlsim estimates the memory and time a
 * simulation needs from what it is asked (ranks, requests) and refuses above a limit with the
 * estimate in the message, rather than growing until the machine kills it or an allocator
 * aborts. The user raises the limits (--max-memory, --yes).
 *
 * The per-unit costs were measured on this code (bench/ and /usr/bin/time on a 2-core VM):
 * the DES holds about 70 KB per simulated rank (ResNet-50 data parallel, 4096 GPUs: 303 MB),
 * the analytic engine about 10 KB, the serving simulator about 170 bytes per request and
 * 45 ns per output token (Llama 2 7B, 100,000 requests: 54 MB, 0.87 s). Estimates are rounded
 * up (x2) so that a refusal is never a surprise and an acceptance rarely one. */
#ifndef DLSIM_BUDGET_H
#define DLSIM_BUDGET_H

#include <glib.h>
#include <stdbool.h>

#define BUD_DEFAULT_BYTES (4.0 * 1024 * 1024 * 1024) /* a sixth of a 24 GiB workstation */
#define BUD_DEFAULT_SECONDS 60.0 /* a minute: past that, a user should say so (--yes) */

typedef struct {
  double max_bytes;   /* refuse what needs more memory than this */
  double max_seconds; /* ... or longer than this, unless `yes` */
  bool yes;           /* run whatever the time estimate says */
} bud_limits;

typedef struct {
  double bytes, seconds; /* seconds < 0: no estimate */
} bud_estimate;

bud_limits bud_defaults(void);
/* Parses --max-memory (a size with its unit: "8GiB"); NULL leaves the default. */
bool bud_limits_parse(bud_limits *l, const char *max_memory, bool yes, GError **err);

bud_estimate bud_run(int ranks, bool des);
bud_estimate bud_serve(double requests, double output_tokens);

/* Runtime error (exit 1) naming `what`, the estimate and the limit, when over budget. */
bool bud_check(const bud_limits *l, const char *what, bud_estimate e, GError **err);

#endif
