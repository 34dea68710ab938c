/* chakra: MLCommons Chakra execution traces (ET) read into dlsim's program representation, so
 * traces made for ASTRA-sim replay on dlsim's network (`dlsim replay --chakra`).
 *
 * A trace is one file per rank, NAME.RANK.et: a GlobalMetadata record, then Node records, each
 * length-delimited by a varint prefix (sim/chakra/chakra.proto describes the wire format; C is
 * generated from it at build time by protoc-c). Each rank becomes its own class of the program:
 * compute nodes keep their measured duration (or are re-costed from their FLOP count),
 * collectives run over all ranks on the cluster's network, sends and receives between their
 * two ranks, and data and control dependencies both order nodes. */
#ifndef DLSIM_CHAKRA_H
#define DLSIM_CHAKRA_H

#include "program/program.h"

#include <glib.h>
#include <stdint.h>

typedef enum { CHK_COMPUTE, CHK_COLL, CHK_SEND, CHK_RECV, CHK_OTHER } chk_kind;

typedef struct {
  uint64_t id;
  char *name;
  chk_kind kind;
  double duration; /* s (duration_micros) */
  double flops;    /* num_ops, 0 when absent */
  double bytes;    /* comm_size of communication, tensor_size of compute (0: absent) */
  prog_coll coll;
  int peer;        /* a send's comm_dst, a receive's comm_src */
  bool cpu;        /* a compute node on the host (is_cpu_op) */
  char *pg;        /* a collective's pg_name (NULL: none) */
  uint64_t *deps;  /* data and control dependencies */
  guint ndeps;
  gsize offset;    /* byte offset of the record in its file */
} chk_node;

typedef struct {
  char *path;
  GArray *nodes; /* chk_node, in file order */
} chk_rank;

typedef struct {
  char *name; /* NAME of NAME.RANK.et */
  int nranks;
  chk_rank *ranks;
} chk_trace;

/* A path names a Chakra trace: a NAME.RANK.et file, or a directory holding some. */
bool chk_is_trace(const char *path);
/* Loads every rank of the trace DIR_OR_PREFIX names: a directory holding one NAME.*.et series,
 * a prefix (dir/NAME for dir/NAME.0.et ...) or one of its files. Ranks must run 0..N-1. */
chk_trace *chk_load(const char *dir_or_prefix, GError **err);
void chk_free(chk_trace *t);
/* Decodes one rank's file (as read into memory) into `nodes` (chk_node); `origin` names it in
 * errors, which give the byte offset of the bad record. */
bool chk_parse(const uint8_t *buf, gsize len, const char *origin, GArray *nodes, GError **err);
void chk_nodes_clear(GArray *nodes);

typedef struct {
  bool recost;     /* compute nodes with a FLOP count timed by the cost model, not measured */
  cfg_dtype dtype; /* of re-costed compute */
  GHashTable *groups; /* pg_name -> GArray of int ranks (chk_groups_load); NULL: every
                       * collective spans all ranks */
} chk_options;

/* ASTRA-sim's communicator-group file (--comm-group-configuration): a JSON object whose keys
 * are the pg_name of collectives and values their ranks, {"1": [0, 1, 2, 3], ...}. */
GHashTable *chk_groups_load(const char *path, GError **err);

typedef struct {
  int compute, collectives, p2p, other; /* nodes of each kind, all ranks */
  int recosted;                         /* compute nodes timed by the cost model */
  int grouped;                          /* collectives over a group of the comm group file */
  int cpu;                              /* compute nodes on the host (is_cpu_op) */
  int absent_deps;                      /* dependencies on nodes not in the trace, ignored */
} chk_counts;

/* The trace as a program of one class per rank. Fails on a dependency cycle, a send or
 * receive to a rank the trace does not have. */
prog_program *chk_program(const chk_trace *t, const chk_options *o, chk_counts *counts,
                          GError **err);

#endif
