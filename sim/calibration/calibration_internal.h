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

#endif
