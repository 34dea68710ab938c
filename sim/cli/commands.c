/* The commands of dlsim, by name: main dispatches on them, and dlsim batch runs its jobs with
 * them. */
#include "cli/cli.h"

#include <string.h>

static const cli_command cli_commands[] = {
    {"run", cli_run, true, "simulate one training step: time, MFU, breakdown, memory; a whole run with training.tokens"},
    {"memory", cli_memory, true, "memory per GPU and pipeline stage: ZeRO, offload, activations, fits?"},
    {"coll", cli_coll, true, "a collective's time and bus bandwidth vs size, as nccl-tests prints"},
    {"plan", cli_plan, true, "the best TP x CP x PP x DP x EP x ZeRO layout (or serving deployment) for N GPUs"},
    {"whatif", cli_whatif, true, "the same job on changed hardware: deltas, sweeps and plots"},
    {"moe", cli_moe, true, "one mixture-of-experts layer: routing imbalance, all-to-alls, experts"},
    {"calibrate", cli_calibrate, false, "fit model parameters to real measurements (nccl-tests, kernel tables, traces)"},
    {"serve", cli_serve, true, "LLM serving: TTFT, TBT, throughput and goodput under request load"},
    {"validate", cli_validate, true, "predicted vs measured for the real cases in validation/"},
    {"trace", cli_trace, true, "summarise a real PyTorch profiler (Kineto) trace per step"},
    {"replay", cli_replay, true, "re-simulate a real trace: predicted vs measured step time, what-if"},
    {"schema", cli_schema, false, "every configuration key: type, unit, default, allowed values"},
    {"batch", cli_batch, false, "many jobs from a file, one JSON line each; shared over MPI ranks"},
};

const cli_command *cli_command_find(const char *name, GError **err)
{
  const char *names[G_N_ELEMENTS(cli_commands)];
  for (size_t i = 0; i < G_N_ELEMENTS(cli_commands); i++) {
    names[i] = cli_commands[i].name;
    if (strcmp(name, names[i]) == 0)
      return &cli_commands[i];
  }
  const char *near = cfg_closest(name, names, G_N_ELEMENTS(names));
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "unknown command '%s'%s%s%s", name,
              near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
  return NULL;
}

void cli_usage(FILE *out)
{
  fprintf(out, "usage: dlsim COMMAND [OPTIONS]   (dlsim help COMMAND, or dlsim COMMAND --help, for "
               "its options)\n\ncommands:\n");
  for (size_t i = 0; i < G_N_ELEMENTS(cli_commands); i++)
    fprintf(out, "  %-10s %s\n", cli_commands[i].name, cli_commands[i].summary);
  fprintf(out, "\nOptions mean the same in every command: -c cluster, -w workload, -s/--set KEY=VALUE,\n"
               "-e/--engine des (the default everywhere) or analytic, -o/--output FILE, --json,\n"
               "and --csv where a command prints a table.\n");
}
