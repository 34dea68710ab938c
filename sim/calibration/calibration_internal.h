/* Private to calibration: the parameter search every fit shares. */
#ifndef DLSIM_CALIBRATION_INTERNAL_H
#define DLSIM_CALIBRATION_INTERNAL_H

#include "calibration/calibration.h"

/* One model parameter a fit may move. It is searched in a space where it is free (the logit of
 * a fraction, the log of anything else) and held near its starting value by a penalty on its
 * log ratio, so that a fit moves it only as far as the data asks. */
typedef struct {
  double *slot;
  bool fraction;  /* logit transform, else log */
  double lo, hi;  /* physical bounds */
  double prior;   /* the starting value */
  char name[48];
} calib_param;

#define CALIB_MAX_PARAMS 16

typedef struct {
  calib_param params[CALIB_MAX_PARAMS];
  int nparams;
  double prior_weight;       /* penalty per squared log ratio to the prior */
  double (*loss)(void *ctx); /* the error with the parameters as they are in their slots */
  void *ctx;
  int evals;
} calib_search;

void calib_search_add(calib_search *s, double *slot, bool fraction, double lo, double hi,
                      const char *name);
/* Sets the slots from a point of the free space; returns loss + penalties. */
double calib_search_eval(calib_search *s, const double *x);
/* Keeps only the parameters that move the loss when nudged. */
void calib_search_keep_sensitive(calib_search *s);
/* Multi-start Nelder-Mead from the current values; leaves the best values in the slots and
 * returns the best objective. */
double calib_search_run(calib_search *s, int starts, int evals_per_start, int polish_evals);

double calib_median(double *v, int n);

/* The NCCL parameters whose names start with an entry of `fit` (NULL: the latencies), as
 * search parameters; efficiencies are bounded below by `eff_lo`. */
void calib_nccl_candidates(calib_search *s, cfg_nccl *n, char *const *fit, double eff_lo);

#endif
