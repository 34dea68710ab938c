/* Private to the trace module. */
#ifndef DLSIM_TRACE_INTERNAL_H
#define DLSIM_TRACE_INTERNAL_H

#include "trace/trace.h"

#include <cjson/cJSON.h>
#include <gio/gio.h>

/* ---- the streaming JSON reader (stream.c) ------------------------------------------------- */

/* Called for every element of "traceEvents" (or of a top-level array), parsed alone, with the
 * line and column where it starts. Returns false (with err set) to stop. */
typedef bool (*trc_event_fn)(void *ctx, const cJSON *event, int line, int col, GError **err);
/* Called for every other top-level key whose value the caller wants (`want` said yes). */
typedef bool (*trc_want_fn)(void *ctx, const char *key);
typedef void (*trc_meta_fn)(void *ctx, const char *key, const cJSON *value);

typedef struct {
  trc_event_fn event;
  trc_want_fn want;
  trc_meta_fn meta;
  void *ctx;
} trc_sink;

/* Reads a JSON document (gzip detected by its magic number) from `in`, calling `sink`. */
bool trc_stream_read(GInputStream *in, const char *origin, const trc_sink *sink,
                     guint64 *bytes_read, GError **err);

/* ---- loading (load.c, cpu.c) -------------------------------------------------------------- */

/* Shapes and collectives of a CPU op from its args ("Input Dims", "Input type", ...). */
void trc_cpu_op_shapes(trc_cpu_op *op, const cJSON *args);
/* NCCL metadata of a kernel or record_param_comms op from its args, when present. */
bool trc_args_collective(const cJSON *args, trc_nccl_coll *coll, double *in, double *out,
                         double *elem, int *group);
/* Bytes per element of a type as the profiler names it ("float", "c10::BFloat16", "Float"). */
double trc_type_size(const char *type);
trc_nccl_coll trc_coll_of_op_name(const char *name);
/* After loading: links ops to calls and CPU ops, fills what shapes and collectives say. */
void trc_link(trc_trace *t);

/* ---- time intervals (summary.c, replay.c) ------------------------------------------------- */

typedef struct {
  double a, b;
} trc_span;

/* Sorts and merges overlapping spans in place; returns the total length. */
double trc_spans_merge(GArray *spans);
/* Length of the intersection of two merged span lists. */
double trc_spans_overlap(const GArray *x, const GArray *y);

#endif
