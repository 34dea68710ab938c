/* Private to calibration: the parameter search every fit shares. */
#ifndef DLSIM_CALIBRATION_INTERNAL_H
#define DLSIM_CALIBRATION_INTERNAL_H

#include "calibration/calibration.h"

/* Sets the slots from a point of the free space; returns loss + penalties. */
double calib_search_eval(calib_search *s, const double *x);
/* Keeps only the parameters that move the loss when nudged. */
void calib_search_keep_sensitive(calib_search *s);

double calib_median(double *v, int n);

/* The NCCL parameters whose names start with an entry of `fit` (NULL: the latencies), as
 * search parameters; efficiencies are bounded below by `eff_lo`. */
void calib_nccl_candidates(calib_search *s, cfg_nccl *n, char *const *fit, double eff_lo);

/* ---- the text tables benchmarks print (table.c, omb.c) ---- */

/* The words of a line, split at blanks. */
char **calib_words(const char *line);
/* Whether a word is a number >= 0 (a whole one if `integer`). */
bool calib_raw_number(const char *word, bool integer);
/* NCCL's own log lines (NCCL_DEBUG=INFO) between rows. */
bool calib_raw_is_log(const char *line);
/* The length of a launcher's rank label at the start of a line (srun -l, --tag-output), or 0. */
size_t calib_launcher_label(const char *line);
/* One row under a header of `ncols` columns named `names`, as a CSV line; NULL (and the error,
 * which calls the row `tool`'s, e.g. "an OMB") when it is not such a row. `indent` is how far
 * the stripped line started in the file (for the error's column). */
char *calib_raw_row(const char *path, int lineno, int indent, const char *line, char **names,
                    int ncols, const char *tool, GError **err);

/* OSU Micro-Benchmarks output (omb.c): whether the lines hold an OMB title ("# OSU MPI..."),
 * and the table under it rewritten in place as CSV, line for line. */
bool calib_omb_is_table(char **lines);
/* `window` gets the messages a bandwidth test keeps in flight (0 for a latency test). */
bool calib_omb_to_csv(const char *path, char **lines, int *window, GError **err);

#endif
