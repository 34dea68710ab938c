/* dlsim: a discrete-event simulator of distributed deep-learning training on GPU clusters. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} dlsim_command;

static const dlsim_command dlsim_commands[] = {
    {"run", cli_run, "simulate one training step: time, MFU, breakdown, memory"},
    {"memory", cli_memory, "memory per GPU and pipeline stage: ZeRO, offload, activations, fits?"},
    {"coll", cli_coll, "a collective's time and bus bandwidth vs size, as nccl-tests prints"},
    {"plan", cli_plan, "the best TP x CP x PP x DP x EP x ZeRO layout for N GPUs"},
    {"whatif", cli_whatif, "the same job on changed hardware: deltas, sweeps and plots"},
    {"moe", cli_moe, "one mixture-of-experts layer: routing imbalance, all-to-alls, experts"},
    {"calibrate", cli_calibrate, "fit model parameters to real measurements (nccl-tests, kernel tables, traces)"},
    {"serve", cli_serve, "LLM serving: TTFT, TBT, throughput and goodput under request load"},
    {"validate", cli_validate, "predicted vs measured for the real cases in validation/"},
    {"trace", cli_trace, "summarise a real PyTorch profiler (Kineto) trace per step"},
    {"replay", cli_replay, "re-simulate a real trace: predicted vs measured step time, what-if"},
    {"schema", cli_schema, "every configuration key: type, unit, default, allowed values"},
};

static void dlsim_usage(FILE *out)
{
  fprintf(out, "usage: dlsim COMMAND [OPTIONS]   (dlsim help COMMAND, or dlsim COMMAND --help, for "
               "its options)\n\ncommands:\n");
  for (size_t i = 0; i < G_N_ELEMENTS(dlsim_commands); i++)
    fprintf(out, "  %-10s %s\n", dlsim_commands[i].name, dlsim_commands[i].summary);
  fprintf(out, "\nOptions mean the same in every command: -c cluster, -w workload, -s/--set KEY=VALUE,\n"
               "-e/--engine des (the default everywhere) or analytic, -o/--output FILE, --json,\n"
               "and --csv where a command prints a table.\n");
}

/* The command named `name`, or NULL after "unknown command (did you mean ...?)". */
static const dlsim_command *dlsim_find(const char *name)
{
  const char *names[G_N_ELEMENTS(dlsim_commands)];
  for (size_t i = 0; i < G_N_ELEMENTS(dlsim_commands); i++) {
    names[i] = dlsim_commands[i].name;
    if (strcmp(name, names[i]) == 0)
      return &dlsim_commands[i];
  }
  cli_known("command", name, names, G_N_ELEMENTS(names));
  return NULL;
}

static int dlsim_dispatch(const dlsim_command *cmd, int argc, char **argv)
{
  g_autofree char *prog = g_strdup_printf("dlsim %s", cmd->name);
  argv[0] = prog;
  return cmd->run(argc, argv);
}

/* dlsim help [COMMAND]: the command's own --help. */
static int dlsim_help(int argc, char **argv)
{
  if (argc < 3) {
    dlsim_usage(stdout);
    return 0;
  }
  const dlsim_command *cmd = dlsim_find(argv[2]);
  if (!cmd) {
    dlsim_usage(stderr);
    return 2;
  }
  char *help_argv[] = {NULL, "--help", NULL};
  return dlsim_dispatch(cmd, 2, help_argv);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    dlsim_usage(stderr);
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
  const dlsim_command *cmd = dlsim_find(argv[1]);
  if (!cmd) {
    dlsim_usage(stderr);
    return 2;
  }
  return dlsim_dispatch(cmd, argc - 1, argv + 1);
}
