/* Private to collectives: the builder that algorithm files fill with phases. */
#ifndef DLSIM_COLLECTIVES_INTERNAL_H
#define DLSIM_COLLECTIVES_INTERNAL_H

#include "collectives/collectives.h"

typedef struct {
  const hw_cluster *hw;
  coll_schedule *s;
  bool fold;
  GArray *phases;   /* coll_phase */
  GPtrArray *xfers; /* per phase: GArray of coll_xfer */
} coll_builder;

coll_phase *coll_add_phase(coll_builder *b, int steps);
void coll_add_xfer(coll_builder *b, int src, int dst, double bytes);
/* Fills the builder with the phases of b->s->op under `algo` (AUTO picks). */
void coll_plan(coll_builder *b, coll_algo algo);

#endif
