/* Private to the cli module: MPI for dlsim plan. */
#ifndef DLSIM_CLI_INTERNAL_H
#define DLSIM_CLI_INTERNAL_H

#include "cli/cli.h"
#include "planner/planner.h"

#include <stdio.h>

/* MPI for dlsim plan: without DLSIM_MPI a single process (rank 0 of 1). */
typedef struct {
  int rank, size;
  bool active;
} plan_mpi;
void plan_mpi_init(plan_mpi *m, int *argc, char ***argv);
/* Gathers every rank's screening into rank 0's (others keep theirs). */
bool plan_mpi_merge(plan_mpi *m, plan_screen_result *r, int refine, GError **err);
void plan_mpi_finalize(plan_mpi *m);

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
