/* cli: the subcommands of dlsim. Each takes the arguments after its name and returns the exit
 * code: 0 success, 1 the simulation failed, 2 bad input or usage. */
#ifndef DLSIM_CLI_H
#define DLSIM_CLI_H

#include "config/config.h"
#include "engine/engine.h"
#include "program/program.h"

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdbool.h>
#include <stdio.h>

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

/* ---- one option convention for every command ----------------------------------------------
 * A short letter means the same long option in every command: the letters are given only by
 * cli_opt() (a row of the table in common.c), and cli_parse() refuses any other. */
typedef enum {
  CLI_CLUSTER,      /* -c --cluster */
  CLI_WORKLOAD,     /* -w --workload */
  CLI_MODEL,        /* -m --model */
  CLI_SET,          /* -s --set KEY=VALUE, repeatable */
  CLI_ENGINE,       /* -e --engine */
  CLI_OUTPUT,       /* -o --output FILE */
  CLI_TRACE,        /* -t --trace FILE (written) */
  CLI_GPUS,         /* -n --gpus */
  CLI_GROUP_SIZE,   /* -g --group-size */
  CLI_GLOBAL_BATCH, /* -b --global-batch */
  CLI_TOP,          /* -k --top */
  CLI_ALGO,         /* -a --algo */
  CLI_PROTO,        /* -p --proto */
  CLI_THREADS,      /* -j --threads */
  CLI_VERBOSE,      /* -v --verbose */
  CLI_QUIET,        /* -q --quiet */
  CLI_YES,          /* -y --yes */
  CLI_JSON,         /* --json */
  CLI_CSV,          /* --csv */
  CLI_MAX_MEMORY,   /* --max-memory */
  CLI_NOPTS
} cli_opt_id;

/* The entry of option `id` storing into `data`; `help` NULL for the table's wording. */
GOptionEntry cli_opt(cli_opt_id id, gpointer data, const char *help);
#define CLI_OPT_END {NULL, 0, 0, 0, NULL, NULL, NULL}

/* The engine of every command that takes --engine: the DES, which shares links between
 * concurrent flows (the analytic engine gives the same answer where nothing contends). */
#define CLI_DEFAULT_ENGINE ENG_DES
#define CLI_ENGINE_HELP                                                                          \
  "des (default: flows share links) or analytic (closed form, faster, no contention)"
/* --engine VALUE (NULL: the default), with "did you mean" on a near miss. */
bool cli_engine(const char *value, eng_kind *out, GError **err);

/* The index of `value` among `names`, or -1 with "OPTION VALUE: expected one of ... (did you
 * mean ...?)" in `err`. */
int cli_choice(const char *option, const char *value, const char *const *names, int n, GError **err);
/* Whether `name` is one of `names`; if not, prints "unknown WHAT 'NAME' (did you mean ...?)". */
bool cli_known(const char *what, const char *name, const char *const *names, int n);
bool cli_coll_op(const char *value, prog_coll *out, GError **err);
bool cli_dtype(const char *value, cfg_dtype *out, GError **err);

/* The leaves of a JSON object as dotted keys and their values (arrays left out). */
void cli_json_leaves(const cJSON *o, const char *prefix, GPtrArray *keys, GPtrArray *values);
/* Adds `item` to object `o` as its first key (a CSV's leading column). */
void cli_json_prepend(cJSON *o, const char *key, cJSON *item);
/* A JSON array of objects as CSV: a header row of the keys (their units in their names), then
 * one line per object. */
void cli_csv_print(FILE *out, const cJSON *rows);
/* Not in the command list: `dlsim --data-dir` (where the presets are), and what the build runs,
 * `dlsim man` and `dlsim completion` (the man page dlsim(1) and the bash completion). */
bool cli_is_hidden(const char *command);
int cli_hidden(int argc, char **argv);

#endif
