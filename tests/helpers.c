#include "helpers.h"

#include "calibration/calibration.h"
#include "hardware/hardware.h"
#include "workloads/workloads.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

char *th_write(const char *name, const char *text)
{
  static char *dir = NULL; /* per test process */
  if (!dir)
    dir = g_dir_make_tmp("dlsim-test-XXXXXX", NULL);
  char *path = g_build_filename(dir, name, NULL);
  g_file_set_contents(path, text, -1, NULL);
  return path;
}

char *th_write_calibration(const cfg_cluster *c, const char *name, char **yaml)
{
  char *out = th_write(name, "");
  GError *err = NULL;
  if (!calib_write(out, c, "test", NULL, &err) || !g_file_get_contents(out, yaml, NULL, &err)) {
    fprintf(stderr, "%s: %s\n", name, err ? err->message : "not written");
    g_clear_error(&err);
    g_clear_pointer(&out, g_free);
  }
  return out;
}

/* Parses the overrides; on a malformed one returns NULL with `err` set. */
static cfg_override *th_overrides(const char *const *sets, size_t *n, GError **err)
{
  *n = sets ? g_strv_length((char **)sets) : 0;
  cfg_override *ov = g_new0(cfg_override, *n + 1);
  for (size_t i = 0; i < *n; i++)
    if (!cfg_override_parse(sets[i], &ov[i], err)) {
      for (size_t k = 0; k < i; k++)
        cfg_override_clear(&ov[k]);
      g_free(ov);
      return NULL;
    }
  return ov;
}

bool th_load(const char *cluster, const char *workload, const char *const *sets, cfg_cluster **c,
             cfg_workload **w)
{
  size_t n;
  GError *err = NULL;
  cfg_override *ov = th_overrides(sets, &n, &err);
  bool ok = ov && cfg_load(cluster, workload, ov, n, c, w, &err);
  if (!ok) {
    fprintf(stderr, "load failed: %s\n", err->message);
    g_error_free(err);
  }
  for (size_t i = 0; i < n; i++)
    cfg_override_clear(&ov[i]);
  g_free(ov);
  return ok;
}

prog_program *th_program(const char *cluster, const char *workload, const char *const *sets)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  if (!th_load(cluster, workload, sets, &c, &w))
    return NULL;
  hw_cluster *hw = hw_cluster_new(c);
  prog_program *p = NULL;
  GError *err = NULL;
  if (!wl_build(w, hw, &p, &err)) {
    fprintf(stderr, "build failed: %s\n", err->message);
    g_error_free(err);
  }
  hw_cluster_free(hw);
  cfg_workload_free(w);
  cfg_cluster_free(c);
  return p;
}

char *th_load_error(const char *cluster, const char *workload, const char *const *sets)
{
  size_t n;
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  GError *err = NULL;
  char *msg = NULL;
  cfg_override *ov = th_overrides(sets, &n, &err);
  if (!ov) {
    msg = g_strdup(err->message);
    g_error_free(err);
    return msg;
  }
  if (cfg_load(cluster, workload, ov, n, &c, &w, &err)) {
    cfg_cluster_free(c);
    cfg_workload_free(w);
  } else {
    msg = g_strdup(err->message);
    g_error_free(err);
  }
  for (size_t i = 0; i < n; i++)
    cfg_override_clear(&ov[i]);
  g_free(ov);
  return msg;
}

/* Under AddressSanitizer, SimGrid's context switches make ASan print a three-line notice once
 * per process ("ASan is ignoring requested __asan_handle_no_return ..."). It is not an error
 * (an error report would also make the process fail); drop it so golden outputs compare. */
static char *th_drop_asan_notice(const char *text)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  GString *out = g_string_new(NULL);
  for (int i = 0; lines[i]; i++) {
    const char *l = lines[i];
    if (strstr(l, "ASan is ignoring requested __asan_handle_no_return") ||
        strcmp(l, "False positive error reports may follow") == 0 ||
        strcmp(l, "For details see https://github.com/google/sanitizers/issues/189") == 0)
      continue;
    g_string_append(out, l);
    if (lines[i + 1])
      g_string_append_c(out, '\n');
  }
  return g_string_free(out, FALSE);
}

/* Runs `cmd` (shell-style words; the program looked up in PATH) in the source directory with
 * DLSIM_DATA_DIR set; returns its exit status. */
static int th_spawn(const char *cmd, bool mpi, char **out, char **err)
{
  g_auto(GStrv) argv = NULL;
  g_shell_parse_argv(cmd, NULL, &argv, NULL);
  g_auto(GStrv) env = g_get_environ();
  env = g_environ_setenv(env, "DLSIM_DATA_DIR", DLSIM_SOURCE_DIR, TRUE);
  /* OpenMPI's own allocations outlive MPI_Finalize: leak checking is for dlsim's code, which
   * the single-process runs cover */
  if (mpi)
    env = g_environ_setenv(env, "ASAN_OPTIONS", "detect_leaks=0", TRUE);
  int status = 0;
  g_spawn_sync(DLSIM_SOURCE_DIR, argv, env, G_SPAWN_SEARCH_PATH, NULL, NULL, out, err, &status, NULL);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

th_proc th_dlsim(const char *args)
{
  th_proc p = {0};
  g_autofree char *cmd = g_strdup_printf("%s %s", DLSIM_BINARY, args);
  g_autofree char *out = NULL, *err = NULL;
  p.status = th_spawn(cmd, false, &out, &err);
  g_autofree char *errs = th_drop_asan_notice(err ? err : "");
  p.out = g_strconcat(out ? out : "", errs, NULL);
  return p;
}

bool th_have_mpirun(void)
{
#ifdef DLSIM_MPI
  g_autofree char *path = g_find_program_in_path("mpirun");
  return path != NULL;
#else
  return false;
#endif
}

th_proc th_dlsim_ranks(const char *args, int ranks)
{
  th_proc p = {0};
  g_autofree char *cmd = ranks > 0 ? g_strdup_printf("mpirun --allow-run-as-root --oversubscribe "
                                                     "-np %d %s %s", ranks, DLSIM_BINARY, args)
                                   : g_strdup_printf("%s %s", DLSIM_BINARY, args);
  p.status = th_spawn(cmd, ranks > 0, &p.out, &p.err);
  if (!p.out)
    p.out = g_strdup("");
  return p;
}

void th_proc_clear(th_proc *p)
{
  g_free(p->out);
  g_free(p->err);
  p->out = p->err = NULL;
}
