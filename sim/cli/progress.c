/* A one-line progress report with the time left, for runs long enough to wonder about: on a
 * terminal only (pipes, files and golden outputs never see it), after a delay, rewritten in
 * place and erased at the end. */
#include "cli/cli_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A short run says nothing: the line would only flicker ($DLSIM_PROGRESS_DELAY changes it). */
#define CLI_PROGRESS_DELAY 2.0
/* Wide enough for the longest text; what is shorter is padded so that nothing of the line
 * before stays behind. */
#define CLI_PROGRESS_WIDTH 64

static char *cli_progress_eta(double seconds)
{
  long s = lround(MAX(seconds, 0));
  if (s < 60)
    return g_strdup_printf("%ld s", s);
  if (s < 3600)
    return g_strdup_printf("%ld min %02ld s", s / 60, s % 60);
  return g_strdup_printf("%ld h %02ld min", s / 3600, s / 60 % 60);
}

char *cli_progress_text(const char *what, double fraction, double left)
{
  double percent = 100 * CLAMP(fraction, 0, 1);
  if (!(left >= 0))
    return g_strdup_printf("%s: %3.0f %% simulated", what, percent);
  g_autofree char *eta = cli_progress_eta(left);
  return g_strdup_printf("%s: %3.0f %% simulated, about %s left", what, percent, eta);
}

/* The time left at the rate seen since this process's first report: the setup before the first
 * op (the platform, thousands of actors) would make the first estimates far too long. Each DES
 * child starts from the parent's state, so each measures its own rate. */
static double cli_progress_left(cli_progress *p, double fraction, gint64 now)
{
  if (!p->first) {
    p->first = now;
    p->first_fraction = fraction;
  }
  double seconds = (double)(now - p->first) / G_USEC_PER_SEC, done = fraction - p->first_fraction;
  if (seconds < 1 || done <= 0)
    return -1;
  return (1 - fraction) * seconds / done;
}

void cli_progress_init(cli_progress *p, const char *what, FILE *stream, bool quiet)
{
  const char *delay = g_getenv("DLSIM_PROGRESS_DELAY");
  *p = (cli_progress){.what = what, .stream = stream, .start = g_get_monotonic_time(),
                      .delay = delay && *delay ? g_ascii_strtod(delay, NULL) : CLI_PROGRESS_DELAY};
  p->show = !quiet && isatty(fileno(stream));
}

static double cli_progress_elapsed(const cli_progress *p)
{
  return (double)(g_get_monotonic_time() - p->start) / 1e6;
}

void cli_progress_update(double fraction, void *ctx)
{
  cli_progress *p = ctx;
  gint64 now = g_get_monotonic_time();
  /* five lines a second are plenty to read */
  if (!p->show || cli_progress_elapsed(p) < p->delay || now - p->last < G_USEC_PER_SEC / 5)
    return;
  p->last = now;
  g_autofree char *text = cli_progress_text(p->what, fraction, cli_progress_left(p, fraction, now));
  fprintf(p->stream, "\r%-*s", CLI_PROGRESS_WIDTH, text);
  fflush(p->stream);
}

void cli_progress_end(cli_progress *p)
{
  /* the lines came from the DES's child, which cannot tell: erase if one may have been shown */
  if (!p->show || cli_progress_elapsed(p) < p->delay)
    return;
  fprintf(p->stream, "\r%*s\r", CLI_PROGRESS_WIDTH, "");
  fflush(p->stream);
}
