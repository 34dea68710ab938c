/* dlsim: a discrete-event simulator of distributed deep-learning training on GPU clusters. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

/* The command named `name`, or NULL after "unknown command (did you mean ...?)". */
static const cli_command *dlsim_find(const char *name)
{
  GError *err = NULL;
  const cli_command *cmd = cli_command_find(name, &err);
  if (!cmd) {
    fprintf(stderr, "dlsim: error: %s\n", err->message);
    g_error_free(err);
  }
  return cmd;
}

static int dlsim_dispatch(const cli_command *cmd, int argc, char **argv)
{
  g_autofree char *prog = g_strdup_printf("dlsim %s", cmd->name);
  argv[0] = prog;
  return cmd->run(argc, argv);
}

/* dlsim help [COMMAND]: the command's own --help. */
static int dlsim_help(int argc, char **argv)
{
  if (argc < 3) {
    cli_usage(stdout);
    return 0;
  }
  const cli_command *cmd = dlsim_find(argv[2]);
  if (!cmd) {
    cli_usage(stderr);
    return 2;
  }
  char *help_argv[] = {NULL, "--help", NULL};
  return dlsim_dispatch(cmd, 2, help_argv);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    cli_usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
    return dlsim_help(1, argv);
  if (strcmp(argv[1], "help") == 0)
    return dlsim_help(argc, argv);
  if (strcmp(argv[1], "--version") == 0) {
    printf("dlsim %s\n", DLSIM_VERSION);
    return 0;
  }
  if (cli_is_hidden(argv[1])) /* --data-dir, and what the build runs: man, completion */
    return cli_hidden(argc - 1, argv + 1);
  const cli_command *cmd = dlsim_find(argv[1]);
  if (!cmd) {
    cli_usage(stderr);
    return 2;
  }
  return dlsim_dispatch(cmd, argc - 1, argv + 1);
}
