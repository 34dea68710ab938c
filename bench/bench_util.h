/* Shared by the benchmarks: their command line, and one measurement in a fresh process, so its
 * peak RSS is its own. */
#ifndef DLSIM_BENCH_UTIL_H
#define DLSIM_BENCH_UTIL_H

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* --help prints `usage` (what the bench measures, its arguments and defaults) and exits 0; an
 * option, or an argument that is not a positive number, is refused with exit 2. At most
 * `max_args` numbers. */
static inline void bench_args(int argc, char **argv, const char *usage, int max_args)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      exit(0);
    }
    char *end = NULL;
    double v = g_ascii_strtod(argv[i], &end);
    if (i > max_args || end == argv[i] || *end || !(v > 0)) {
      fprintf(stderr, "%s: error: unexpected argument '%s' (see --help)\n", argv[0], argv[i]);
      exit(2);
    }
  }
}

/* CPU seconds this process and the children it waited for have used. */
static inline double bench_cpu_seconds(void)
{
  struct rusage self, kids;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  const struct timeval t[] = {self.ru_utime, self.ru_stime, kids.ru_utime, kids.ru_stime};
  double s = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(t); i++)
    s += (double)t[i].tv_sec + (double)t[i].tv_usec / 1e6;
  return s;
}

typedef struct {
  int ok;
  double sim, wall, rss_mb;
  long messages;
  /* CPU seconds (a loaded machine stretches wall time): what the bench measured, else (0)
   * those of the child and its children when bench_isolated ran it */
  double cpu;
  int simulated;   /* ranks the DES ran (eng_result.fold.ranks), when the bench sets it */
  long activities; /* the DES's executions and sleeps (eng_result.activities), likewise */
} bench_row;

static inline double bench_rusage_seconds(const struct rusage *u)
{
  return (double)u->ru_utime.tv_sec + u->ru_utime.tv_usec / 1e6 + (double)u->ru_stime.tv_sec +
         u->ru_stime.tv_usec / 1e6;
}

/* Runs `fn(arg, flag)` in a child process; fills rss_mb with the child's (and its children's)
 * peak resident memory. */
static inline bench_row bench_isolated(bench_row (*fn)(int, bool), int arg, bool flag)
{
  int fds[2];
  bench_row row = {0};
  if (pipe(fds) != 0)
    return row;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    row = fn(arg, flag);
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    row.rss_mb = MAX(self.ru_maxrss, kids.ru_maxrss) / 1024.0;
    /* a bench that timed its own part (one configuration of many) keeps its figure */
    if (!(row.cpu > 0))
      row.cpu = bench_rusage_seconds(&self) + bench_rusage_seconds(&kids);
    ssize_t w = write(fds[1], &row, sizeof row);
    _exit(w == (ssize_t)sizeof row ? 0 : 1);
  }
  close(fds[1]);
  if (read(fds[0], &row, sizeof row) != (ssize_t)sizeof row)
    row.ok = 0;
  close(fds[0]);
  waitpid(pid, NULL, 0);
  return row;
}

#endif
