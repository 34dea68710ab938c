/* Private to the cli module: sharing a command's work over MPI ranks, the exit code of an error,
 * progress lines, and the man page and completion built from --help. */
#ifndef DLSIM_CLI_INTERNAL_H
#define DLSIM_CLI_INTERNAL_H

#include "cli/cli.h"
#include "config/config.h"

#include <stdio.h>

/* The ranks a command shares its items over: without DLSIM_MPI, without mpirun, or inside a
 * dlsim batch job, a single process (rank 0 of 1). */
typedef struct {
  int rank, size;
  bool active; /* this command started MPI and ends it */
} cli_mpi;
void cli_mpi_init(cli_mpi *m);
/* Whether item `item` (0, 1, ...) is this rank's: round robin. */
bool cli_mpi_takes(const cli_mpi *m, guint item);
/* Every rank's bytes at rank 0, indexed by rank (GBytes); NULL on the other ranks. */
GPtrArray *cli_mpi_gather(const cli_mpi *m, GBytes *mine);
/* `items` (GBytes or NULL, the same length on every rank) holds this rank's results at its
 * items; afterwards rank 0's holds every rank's, in item order. */
void cli_mpi_gather_items(const cli_mpi *m, GPtrArray *items);
/* Rank 0's `value`, on every rank. */
int cli_mpi_share_int(const cli_mpi *m, int value);
/* An item's result as bytes: its text, or the error that stopped it. */
GBytes *cli_mpi_pack_text(const char *text);
GBytes *cli_mpi_pack_error(const GError *e);
/* The text, or NULL and the error packed (or that the item has no result). */
char *cli_mpi_unpack(GBytes *item, GError **err);
/* Ends a command on every rank: rank 0 reports `err` (which then sets the exit code), the
 * others stay quiet; MPI ends; every rank returns rank 0's exit code. Takes `err`. */
int cli_mpi_finish(cli_mpi *m, int code, GError *err);

/* dlsim plan for a workload with a `serving:` section (cli/plan_serve.c). */
typedef struct {
  const char *cluster, *workload;
  char **sets;
  int gpus, top;
  double ttft, tpot; /* seconds; 0: the workload's serving.slo */
  bool json, csv;
} cli_plan_serve_args;
int cli_plan_serve(const cli_plan_serve_args *a);

/* The exit code that fits an error: 1 when the simulation failed, 2 for bad input. */
int cli_error_code(const GError *err);

/* Progress with the time left, on a terminal, for runs past a few seconds (cli/progress.c).
 * cli_progress_update fits sim_options.progress, with the cli_progress as its context. */
typedef struct {
  const char *what;    /* "dlsim run" */
  FILE *stream;
  bool show;           /* a terminal, and not --quiet */
  double delay;        /* seconds of silence before the first line */
  gint64 start, last;  /* monotonic microseconds: the run's start, the last line */
  gint64 first;        /* ... the first report this process saw, and how far it was */
  double first_fraction;
} cli_progress;

void cli_progress_init(cli_progress *p, const char *what, FILE *stream, bool quiet);
void cli_progress_update(double fraction, void *ctx);
/* Erases the line, if one may have been printed. */
void cli_progress_end(cli_progress *p);
/* "dlsim run:  42 % simulated, about 13 s left" (`left` < 0: not known yet). */
char *cli_progress_text(const char *what, double fraction, double left);

/* The man page and the bash completion, from what `dlsim --help` and `dlsim COMMAND --help`
 * print (cli/docs.c). */
typedef struct {
  char short_name; /* 0: none */
  char *long_name;
  char *arg;       /* its metavariable ("CLUSTER"), NULL for a flag */
  char *desc;
} cli_doc_option;

typedef struct {
  char *name;         /* "run", or "trace summary" for a subcommand */
  char *summary;      /* from the command list of dlsim --help */
  char *synopsis;     /* "dlsim run [OPTION...]", NULL if the help had none */
  GPtrArray *options; /* cli_doc_option, without -h/--help */
  GString *text;      /* any further text the help prints */
} cli_doc_command;

void cli_doc_command_free(gpointer c);
/* The commands dlsim --help lists, with their summaries (no options yet). */
GPtrArray *cli_doc_commands(const char *usage);
/* Adds the synopsis, options and text of `help` (GOption's --help layout) to `c`. */
void cli_doc_parse_help(cli_doc_command *c, const char *help);
void cli_doc_man(GString *out, const GPtrArray *commands, const char *version);
void cli_doc_bash(GString *out, const GPtrArray *commands);

#endif
