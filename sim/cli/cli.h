/* cli: the subcommands of dlsim. Each takes the arguments after its name and returns the exit
 * code: 0 success, 1 the simulation failed, 2 bad input or usage. */
#ifndef DLSIM_CLI_H
#define DLSIM_CLI_H

#include <glib.h>
#include <stdbool.h>

int cli_run(int argc, char **argv);
int cli_validate(int argc, char **argv);
int cli_coll(int argc, char **argv);
int cli_memory(int argc, char **argv);
int cli_calibrate(int argc, char **argv);
int cli_moe(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_whatif(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_trace(int argc, char **argv);
int cli_replay(int argc, char **argv);
int cli_schema(int argc, char **argv);

/* Prints "dlsim: error: ..." and returns the exit code that fits the error. */
int cli_fail(GError *err);
/* Parses options against `entries` ("summary" is the --help line); on error prints it and
 * returns false with the exit code in `code`. */
bool cli_parse(const GOptionEntry *entries, const char *summary, int *argc, char ***argv, int *code);

/* Not in the command list: `dlsim --data-dir` (where the presets are), and what the build runs,
 * `dlsim man` and `dlsim completion` (the man page dlsim(1) and the bash completion). */
bool cli_is_hidden(const char *command);
int cli_hidden(int argc, char **argv);

#endif
