/* Chakra execution traces: tiny traces written here with the protobuf-c code generated from
 * sim/chakra/chakra.proto, timed by hand; dependencies in any file order; corrupt files named
 * with the byte offset of the bad record; the public ASTRA-sim trace of validation/chakra/. */
#include "chakra/chakra.pb-c.h"
#include "helpers.h"
#include "run/run.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

typedef ChakraProtoMsg__AttributeProto ck_attr;

/* Appends one length-delimited record, as Chakra's encodeMessage writes it. */
static void ck_record(GByteArray *out, const ProtobufCMessage *m)
{
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t prefix[10];
  int k = 0;
  for (size_t v = n; k == 0 || v; v >>= 7)
    prefix[k++] = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
  g_byte_array_append(out, prefix, (guint)k);
  guint at = out->len;
  g_byte_array_set_size(out, at + (guint)n);
  protobuf_c_message_pack(m, out->data + at);
}

static void ck_metadata(GByteArray *out)
{
  ChakraProtoMsg__GlobalMetadata m = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
  m.version = "0.0.4";
  ck_record(out, &m.base);
}

static ck_attr ck_int(const char *name, int64_t v)
{
  ck_attr a = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__INIT;
  a.name = (char *)name;
  a.value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
  a.int64_val = v;
  return a;
}

/* A compute node of `us` microseconds with attributes, depending on nothing. */
static void ck_compute_with(GByteArray *out, uint64_t id, uint64_t us, ck_attr **attrs, size_t nattrs)
{
  ChakraProtoMsg__Node n = CHAKRA_PROTO_MSG__NODE__INIT;
  n.id = id;
  n.name = "op";
  n.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
  n.duration_micros = us;
  n.n_attr = nattrs;
  n.attr = attrs;
  ck_record(out, &n.base);
}

/* A compute node of `us` microseconds depending on `dep` (data, or control when ctrl). */
static void ck_compute(GByteArray *out, uint64_t id, uint64_t us, int64_t dep, bool ctrl)
{
  ChakraProtoMsg__Node n = CHAKRA_PROTO_MSG__NODE__INIT;
  uint64_t d = (uint64_t)dep;
  n.id = id;
  n.name = "gemm";
  n.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
  n.duration_micros = us;
  if (dep >= 0 && ctrl)
    n.n_ctrl_deps = 1, n.ctrl_deps = &d;
  else if (dep >= 0)
    n.n_data_deps = 1, n.data_deps = &d;
  ck_record(out, &n.base);
}

static void ck_allreduce(GByteArray *out, uint64_t id, int64_t bytes, int64_t dep)
{
  ChakraProtoMsg__Node n = CHAKRA_PROTO_MSG__NODE__INIT;
  uint64_t d = (uint64_t)dep;
  ck_attr type = ck_int("comm_type", CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE);
  ck_attr size = ck_int("comm_size", bytes);
  ck_attr *attrs[] = {&type, &size};
  n.id = id;
  n.name = "allreduce";
  n.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
  n.n_attr = 2;
  n.attr = attrs;
  if (dep >= 0)
    n.n_data_deps = 1, n.data_deps = &d;
  ck_record(out, &n.base);
}

/* Writes rank files NAME.r.et of `ranks` ranks, each what `fill` writes; returns the prefix. */
static char *ck_write(const char *name, int ranks, void (*fill)(GByteArray *, int))
{
  static char *dir = NULL;
  if (!dir)
    dir = g_dir_make_tmp("dlsim-chakra-XXXXXX", NULL);
  for (int r = 0; r < ranks; r++) {
    g_autoptr(GByteArray) b = g_byte_array_new();
    ck_metadata(b);
    fill(b, r);
    g_autofree char *file = g_strdup_printf("%s/%s.%d.et", dir, name, r);
    cr_assert(g_file_set_contents(file, (const char *)b->data, b->len, NULL));
  }
  return g_build_filename(dir, name, NULL);
}

/* 10 us, then 20 us, then an all-reduce of 1 MiB that needs the second. */
static void ck_fill_chain(GByteArray *b, int rank)
{
  (void)rank;
  ck_compute(b, 1, 10, -1, false);
  ck_compute(b, 2, 20, 1, true);
  ck_allreduce(b, 3, 1 << 20, 2);
}

/* The same DAG written backwards: the file order says nothing, the dependencies everything. */
static void ck_fill_reversed(GByteArray *b, int rank)
{
  (void)rank;
  ck_allreduce(b, 3, 1 << 20, 2);
  ck_compute(b, 2, 20, 1, true);
  ck_compute(b, 1, 10, -1, false);
}

/* The all-reduce depends on nothing: it runs under the compute. */
static void ck_fill_free(GByteArray *b, int rank)
{
  (void)rank;
  ck_compute(b, 1, 10, -1, false);
  ck_compute(b, 2, 20, 1, false);
  ck_allreduce(b, 3, 1 << 20, -1);
}

static double ck_time(const char *prefix, const char *engine)
{
  g_autofree char *path = g_path_is_absolute(prefix) ? g_strdup(prefix)
                                                     : g_build_filename(DLSIM_SOURCE_DIR, prefix, NULL);
  sim_chakra_args a = {.trace = path, .cluster = "dgx-h100", .engine = engine};
  sim_chakra r;
  GError *err = NULL;
  cr_assert(sim_chakra_run(&a, &r, &err), "%s", err ? err->message : "");
  double t = r.res.step_time;
  sim_chakra_clear(&r);
  return t;
}

/* The all-reduce alone on `gpus` GPUs of a DGX H100, as dlsim coll times it. */
static double ck_allreduce_alone(int gpus, double bytes)
{
  GError *err = NULL;
  cfg_cluster *c = sim_cluster_for("dgx-h100", NULL, gpus, &err);
  cr_assert_not_null(c);
  hw_cluster *hw = hw_cluster_new(c);
  eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_coll_result res;
  cr_assert(eng_collective_time(hw, &o, PROG_COLL_ALLREDUCE, gpus, gpus, bytes, &res, &err));
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  return res.time;
}

Test(chakra, two_computes_and_an_allreduce_by_hand)
{
  g_autofree char *prefix = ck_write("chain", 2, ck_fill_chain);
  double expect = 30e-6 + ck_allreduce_alone(2, 1 << 20);
  cr_expect(fabs(ck_time(prefix, "analytic") - expect) < 1e-9, "analytic %g, by hand %g",
            ck_time(prefix, "analytic"), expect);
  cr_expect(fabs(ck_time(prefix, "des") - expect) < 1e-9, "des %g, by hand %g", ck_time(prefix, "des"),
            expect);
}

Test(chakra, dependencies_order_nodes_not_the_file)
{
  g_autofree char *rev = ck_write("reversed", 2, ck_fill_reversed);
  g_autofree char *free_ = ck_write("free", 2, ck_fill_free);
  double ar = ck_allreduce_alone(2, 1 << 20);
  cr_expect(fabs(ck_time(rev, "des") - (30e-6 + ar)) < 1e-9);
  /* without the dependency the all-reduce overlaps the compute */
  cr_expect(fabs(ck_time(free_, "des") - MAX(30e-6, ar)) < 1e-9, "free %g", ck_time(free_, "des"));
  cr_expect(fabs(ck_time(free_, "analytic") - MAX(30e-6, ar)) < 1e-9);
}

static void ck_fill_cycle(GByteArray *b, int rank)
{
  (void)rank;
  ck_compute(b, 1, 10, 2, false);
  ck_compute(b, 2, 20, 1, false);
}

Test(chakra, a_cycle_is_refused_with_its_node)
{
  g_autofree char *prefix = ck_write("cycle", 1, ck_fill_cycle);
  sim_chakra_args a = {.trace = prefix, .cluster = "dgx-h100"};
  sim_chakra r;
  GError *err = NULL;
  cr_assert_not(sim_chakra_run(&a, &r, &err));
  cr_expect(strstr(err->message, "cycle.0.et: byte ") && strstr(err->message, "dependency cycle"),
            "%s", err->message);
  g_error_free(err);
  sim_chakra_clear(&r);
}

Test(chakra, a_corrupt_file_is_named_with_its_byte_offset)
{
  g_autofree char *prefix = ck_write("corrupt", 2, ck_fill_chain);
  g_autofree char *file = g_strdup_printf("%s.1.et", prefix);
  g_autofree char *text = NULL;
  gsize len;
  cr_assert(g_file_get_contents(file, &text, &len, NULL));
  /* cut inside the last record: the all-reduce's */
  g_autoptr(GByteArray) ok = g_byte_array_new();
  ck_metadata(ok);
  ck_compute(ok, 1, 10, -1, false);
  ck_compute(ok, 2, 20, 1, true);
  guint last = ok->len;
  cr_assert(g_file_set_contents(file, text, (gssize)len - 3, NULL));
  g_autofree char *want = g_strdup_printf("corrupt.1.et: byte %u: a record of", last);
  g_autofree char *args = g_strdup_printf("replay --chakra %s -c dgx-h100", prefix);
  th_proc p = th_dlsim(args);
  cr_expect_eq(p.status, 2);
  cr_expect(strstr(p.out, want), "%s (expected '%s')", p.out, want);
  th_proc_clear(&p);
  /* a flipped byte: decoded, or refused with the offset of its record */
  text[last + 1] = (char)0xff;
  text[last + 2] = (char)0xff;
  g_autoptr(GArray) nodes = g_array_new(FALSE, FALSE, sizeof(chk_node));
  GError *err = NULL;
  bool parsed = chk_parse((const uint8_t *)text, len, "x.et", nodes, &err);
  cr_expect(parsed || strstr(err->message, "x.et: byte "), "%s", err ? err->message : "");
  g_clear_error(&err);
  chk_nodes_clear(nodes);
}

Test(chakra, needs_a_cluster_and_says_so)
{
  th_proc p = th_dlsim("replay --chakra validation/chakra/all_reduce_8npus_1MB");
  cr_expect_eq(p.status, 2);
  cr_expect(strstr(p.out, "expected -c CLUSTER"), "%s", p.out);
  th_proc_clear(&p);
}

/* ASTRA-sim's all-reduce microbenchmark: 8 ranks, one 1 MiB all-reduce each. */
Test(chakra, the_public_astra_sim_trace_replays_in_both_engines)
{
  double ar = ck_allreduce_alone(8, 1 << 20);
  cr_expect(fabs(ck_time("validation/chakra/all_reduce_8npus_1MB", "des") - ar) < 1e-9);
  cr_expect(fabs(ck_time("validation/chakra/all_reduce_8npus_1MB/all_reduce.3.et", "analytic") - ar) < 1e-9);
  /* the send/receive ring: both engines agree, and its 56 compute nodes of 7 us are on rank 0's path */
  double des = ck_time("validation/chakra/custom_ring_allreduce_8npus_1MB", "des");
  double an = ck_time("validation/chakra/custom_ring_allreduce_8npus_1MB", "analytic");
  cr_expect(fabs(des - an) < 1e-9 * MAX(des, 1e-6), "des %g analytic %g", des, an);
  cr_expect_gt(des, 7 * 7e-6);
}

/* Each rank all-reduces 1 MiB in communicator group "1" (ranks 0-1) or "2" (ranks 2-3): the
 * rank's file names its own group. */
static void ck_fill_pg(GByteArray *b, int rank)
{
  ChakraProtoMsg__Node n = CHAKRA_PROTO_MSG__NODE__INIT;
  ck_attr type = ck_int("comm_type", CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE);
  ck_attr size = ck_int("comm_size", 1 << 20);
  ck_attr pg = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__INIT;
  pg.name = "pg_name";
  pg.value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL;
  pg.string_val = rank < 2 ? "1" : "2";
  ck_attr *attrs[] = {&type, &size, &pg};
  n.id = 1;
  n.name = "allreduce";
  n.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
  n.n_attr = 3;
  n.attr = attrs;
  ck_record(b, &n.base);
}

static double ck_groups_time(const char *prefix, const char *groups, GError **err)
{
  sim_chakra_args a = {.trace = prefix, .cluster = "dgx-h100", .engine = "des", .groups = groups};
  sim_chakra r;
  bool ok = sim_chakra_run(&a, &r, err);
  double t = ok ? r.res.step_time : -1;
  sim_chakra_clear(&r);
  return t;
}

Test(chakra, collectives_run_over_their_communicator_group)
{
  g_autofree char *prefix = ck_write("pg", 4, ck_fill_pg);
  g_autofree char *groups = th_write("groups.json", "{\"1\": [0, 1], \"2\": [2, 3]}");
  GError *err = NULL;
  /* two groups of 2 at once, as dlsim coll --group-size 2 runs them */
  g_autoptr(GError) e1 = NULL;
  cfg_cluster *c = sim_cluster_for("dgx-h100", NULL, 4, &err);
  hw_cluster *hw = hw_cluster_new(c);
  eng_options o = {.kind = ENG_DES, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_coll_result pairs;
  cr_assert(eng_collective_time(hw, &o, PROG_COLL_ALLREDUCE, 4, 2, 1 << 20, &pairs, &err));
  hw_cluster_free(hw);
  cfg_cluster_free(c);
  double t = ck_groups_time(prefix, groups, &e1);
  cr_expect(fabs(t - pairs.time) < 1e-9, "%g vs %g (%s)", t, pairs.time, e1 ? e1->message : "");
  /* without the file every collective spans the 4 ranks */
  cr_expect(fabs(ck_groups_time(prefix, NULL, &err) - ck_allreduce_alone(4, 1 << 20)) < 1e-9);
  /* a group the trace names but the file lacks, and a rank outside its own group */
  g_autofree char *lacks = th_write("lacks.json", "{\"1\": [0, 1]}");
  g_autoptr(GError) e2 = NULL;
  cr_expect_lt(ck_groups_time(prefix, lacks, &e2), 0);
  cr_expect(e2 && strstr(e2->message, "pg.2.et: byte ") && strstr(e2->message, "pg_name \"2\" is not a group"),
            "%s", e2 ? e2->message : "");
  g_autofree char *wrong = th_write("wrong.json", "{\"1\": [0, 2], \"2\": [1, 3]}");
  g_autoptr(GError) e3 = NULL;
  cr_expect_lt(ck_groups_time(prefix, wrong, &e3), 0);
  cr_expect(e3 && strstr(e3->message, "is not in its communicator group"), "%s", e3 ? e3->message : "");
  g_autofree char *bad = th_write("bad.json", "{\"1\": [0, \"x\"]}");
  g_autoptr(GError) e4 = NULL;
  cr_expect_lt(ck_groups_time(prefix, bad, &e4), 0);
  cr_expect(e4 && strstr(e4->message, "bad.json: group \"1\": expected a list of ranks"), "%s",
            e4 ? e4->message : "");
}

/* A host op of 100 us and a GPU kernel of 10 us, independent: the host runs beside the GPU
 * (ASTRA-sim's CPU and GPU resources), so the trace takes 100 us, not 110. */
static void ck_fill_host(GByteArray *b, int rank)
{
  (void)rank;
  ck_attr cpu = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__INIT;
  cpu.name = "is_cpu_op";
  cpu.value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL;
  cpu.bool_val = 1;
  ck_attr *attrs[] = {&cpu};
  ck_compute_with(b, 1, 100, attrs, 1);
  ck_compute(b, 2, 10, -1, false);
}

Test(chakra, host_ops_run_beside_the_gpu)
{
  g_autofree char *prefix = ck_write("host", 1, ck_fill_host);
  cr_expect(fabs(ck_time(prefix, "des") - 100e-6) < 1e-12, "%g", ck_time(prefix, "des"));
  cr_expect(fabs(ck_time(prefix, "analytic") - 100e-6) < 1e-12);
}

/* A GEMM of 2 TFLOP measured at 1 us: --recost times it by the cost model instead. */
static void ck_fill_flops(GByteArray *b, int rank)
{
  (void)rank;
  ck_attr ops = ck_int("num_ops", 2000000000000LL), size = ck_int("tensor_size", 1 << 30);
  ck_attr *attrs[] = {&ops, &size};
  ck_compute_with(b, 7, 1, attrs, 2);
}

Test(chakra, recost_times_flop_counts_by_the_cost_model)
{
  g_autofree char *prefix = ck_write("flops", 1, ck_fill_flops);
  cr_expect(fabs(ck_time(prefix, "des") - 1e-6) < 1e-12);
  sim_chakra_args a = {.trace = prefix, .cluster = "dgx-h100", .recost = true, .dtype = "fp8"};
  sim_chakra r;
  GError *err = NULL;
  cr_assert(sim_chakra_run(&a, &r, &err), "%s", err ? err->message : "");
  hw_cluster *hw = hw_cluster_new(r.cfg);
  prog_op op = {.kind = PROG_COMPUTE, .kclass = CFG_KCLASS_GEMM, .dtype = CFG_FP8, .flops = 2e12,
                .bytes = 1 << 30, .count = 1, .tmpl = -1, .fixed_time = -1};
  double expect = eng_compute_time(hw, &op);
  cr_expect_eq(r.counts.recosted, 1);
  cr_expect(fabs(r.res.step_time - expect) < 1e-12, "%g vs %g", r.res.step_time, expect);
  cr_expect_gt(expect, 2e12 / 2e15); /* at most the FP8 peak */
  hw_cluster_free(hw);
  sim_chakra_clear(&r);
}
