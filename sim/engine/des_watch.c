/* The watchdog over a DES child: the parent waits for its results with poll() instead of a
 * blocking read, and a child that neither sends a byte nor uses any CPU time for the stall
 * limit is taken for stuck (a fork copies only the calling thread, so a lock another thread
 * held at fork() stays held in the child forever) and killed, so that the caller gets an error
 * naming the simulation instead of waiting forever. A child that computes, however slowly on a
 * loaded machine, keeps using CPU time and is never killed. */
#include "engine/engine_internal.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

/* Generous: a live child uses CPU time every second, so only a blocked one waits this long. */
#define DES_STALL_DEFAULT 120.0
/* How often the parent looks at the child's CPU time while nothing arrives. */
#define DES_WATCH_TICK_MS 250

bool des_watch_stall(double *stall, GError **err)
{
  *stall = DES_STALL_DEFAULT;
  const char *env = g_getenv("DLSIM_DES_STALL");
  if (!env || !*env)
    return true;
  char *end = NULL;
  double s = g_ascii_strtod(env, &end);
  if (*end || !(s > 0) || !isfinite(s)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "DLSIM_DES_STALL=%s: expected a number of seconds > 0 (how long a DES child may "
                "make no progress before it is killed)", env);
    return false;
  }
  *stall = s;
  return true;
}

void des_watch_start(des_watch *w, pid_t pid, double stall)
{
  /* a pidfd becomes readable when the child exits: its end is watched as the pipe is */
  *w = (des_watch){.pid = pid, .stall = stall, .cpu = -1, .last = g_get_monotonic_time(),
                   .pidfd = pidfd_open(pid, 0)};
}

bool des_watch_exit(des_watch *w, int *status)
{
  /* without a pidfd (kernels before 5.3), a plain wait: the results have all come by then */
  bool ok = w->pidfd < 0 || des_watch_readable(w, w->pidfd);
  while (waitpid(w->pid, status, 0) < 0 && errno == EINTR)
    ;
  return ok;
}

void des_watch_end(des_watch *w)
{
  if (w->pidfd >= 0)
    close(w->pidfd);
  g_clear_error(&w->error);
}

/* The child's user + system CPU time in clock ticks, from /proc (-1 if unreadable). */
static long long des_watch_cpu(pid_t pid)
{
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* the command name in parentheses may hold spaces: fields are counted after its ')' */
  const char *p = strrchr(buf, ')');
  unsigned long long utime = 0, stime = 0;
  if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                   &stime) != 2)
    return -1;
  return (long long)(utime + stime);
}

/* Whether the child did anything since the last look; unreadable CPU time counts as progress,
 * so that a system without /proc never has a working child killed. */
static bool des_watch_progressed(des_watch *w)
{
  long long cpu = des_watch_cpu(w->pid);
  bool moved = cpu < 0 || cpu != w->cpu;
  w->cpu = cpu;
  return moved;
}

static void des_watch_kill(des_watch *w)
{
  kill(w->pid, SIGKILL);
  w->killed = true;
}

bool des_watch_readable(des_watch *w, int fd)
{
  struct pollfd p = {.fd = fd, .events = POLLIN};
  for (;;) {
    int n = poll(&p, 1, DES_WATCH_TICK_MS);
    if (n > 0) {
      w->last = g_get_monotonic_time();
      return true; /* data, or the end of the pipe: the read says which */
    }
    if (n < 0 && errno != EINTR) {
      /* without poll the child cannot be watched: stop it rather than wait blind */
      des_watch_kill(w);
      g_set_error(&w->error, CFG_ERROR, CFG_ERROR_RUNTIME, "des engine: poll: %s",
                  g_strerror(errno));
      return false;
    }
    gint64 now = g_get_monotonic_time();
    if (des_watch_progressed(w))
      w->last = now;
    else if ((double)(now - w->last) / G_USEC_PER_SEC >= w->stall) {
      des_watch_kill(w);
      g_set_error(&w->error, CFG_ERROR, CFG_ERROR_RUNTIME,
                  "des engine: the simulation made no progress for %g s (no CPU time used, no "
                  "result sent: blocked, e.g. on a lock another thread held at fork), so it was "
                  "killed (DLSIM_DES_STALL sets the limit)", w->stall);
      return false;
    }
  }
}
