/* Shared by the benchmarks: run one measurement in a fresh process, so its peak RSS is its own. */
#ifndef DLSIM_BENCH_UTIL_H
#define DLSIM_BENCH_UTIL_H

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  int ok;
  double sim, wall, rss_mb;
  long messages;
} bench_row;

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
