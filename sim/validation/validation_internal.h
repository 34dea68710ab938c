/* Private to validation. */
#ifndef DLSIM_VALIDATION_INTERNAL_H
#define DLSIM_VALIDATION_INTERNAL_H

#include "validation/validation.h"

/* The case's metric for a cluster and workload already loaded (any command but replay). */
bool val_predict_loaded(const cfg_case *c, const cfg_cluster *cl, const cfg_workload *w,
                        double *out, GError **err);
/* A table case (collective or GEMM times): predicted row by row, judged on the median error. */
void val_run_table(val_row *row);

#endif
