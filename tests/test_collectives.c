/* Collectives: closed forms, DES = analytic without contention for every algorithm, folded =
 * unfolded, NCCL-like choices, contention, and the nccl-tests relations users rely on. */
#include "calibration/calibration.h"
#include "collectives/collectives.h"
#include "collectives/collectives_internal.h"
#include "engine/engine.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* nodes x gpn GPUs with round numbers; `extra` adds YAML (NCCL parameters) or, when it starts
 * with "set:", a ';'-separated list of overrides (NVLS, SHARP, NICs). */
static hw_cluster *make_cluster(int nodes, int gpn, const char *extra, cfg_cluster **cfg)
{
  g_auto(GStrv) sets = NULL;
  if (extra && g_str_has_prefix(extra, "set:")) {
    sets = g_strsplit(extra + 4, ";", -1);
    extra = NULL;
  }
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
      "node: {count: %d, gpus_per_node: %d, intra: {bandwidth: 100GB/s, latency: 2us}}\n"
      "network: {nic_bandwidth: 100Gb/s, tiers: [{name: leaf, latency: 1us, nodes_per_switch: 4},\n"
      "          {name: spine, latency: 1us}]}\n"
      "%s\n",
      nodes, gpn, extra ? extra : "");
  g_autofree char *path = th_write("c.yaml", text);
  cr_assert(th_load(path, NULL, (const char *const *)sets, cfg, NULL));
  return hw_cluster_new(*cfg);
}

/* A pure alpha-beta network: no protocol costs, full link rates. */
static const char *const plain =
    "nccl: {link_efficiency: {intra: 1, network: 1}, base_latency: {ll: 0, ll128: 0, simple: 0},\n"
    "  hop_latency: {intra: {ll: 0, ll128: 0, simple: 0}, network: {ll: 0, ll128: 0, simple: 0}},\n"
    "  protocol_efficiency: {ll: 1, ll128: 1, simple: 1}, chunk: {ll: 0, ll128: 0, simple: 0}}";

static double run_engine(hw_cluster *hw, eng_kind kind, prog_coll op, int gpus, int group,
                         double bytes, coll_algo algo, int proto, bool unfold)
{
  eng_options o = {.kind = kind, .unfold = unfold, .algo = algo, .proto = proto};
  eng_coll_result r;
  GError *err = NULL;
  bool ok = eng_collective_time(hw, &o, op, gpus, group, bytes, &r, &err);
  cr_assert(ok, "engine failed: %s", err ? err->message : "");
  return r.time;
}

Test(collectives, ring_allreduce_matches_closed_form_2_to_512)
{
  const int sizes[] = {2, 3, 4, 8, 16, 64, 128, 512};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    int p = sizes[i];
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(p, 1, plain, &cfg);
    double S = 1 << 30;
    double t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, p, p, S, COLL_ALGO_RING,
                          CFG_PROTO_SIMPLE, false);
    /* textbook ring: 2(p-1) steps of S/p over a 12.5 GB/s NIC; latency 1 us within a leaf
     * switch of 4 nodes, 3 us (leaf, spine, leaf) beyond; the folded message carries all the
     * steps' bytes, truncated to whole bytes as SimGrid sends them */
    double alpha = p > 4 ? 3e-6 : 1e-6, B = 12.5e9;
    double expect = 2.0 * (p - 1) * alpha + floor(2.0 * (p - 1) * (S / p)) / B;
    cr_assert_float_eq(t, expect, expect * 1e-12, "p=%d: %.12g vs %.12g", p, t, expect);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, des_ring_allreduce_matches_closed_form)
{
  const int sizes[] = {2, 64, 512};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    int p = sizes[i];
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(p, 1, plain, &cfg);
    double S = 1 << 30;
    double t = run_engine(hw, ENG_DES, PROG_COLL_ALLREDUCE, p, p, S, COLL_ALGO_RING,
                          CFG_PROTO_SIMPLE, false);
    double alpha = p > 4 ? 3e-6 : 1e-6;
    double expect = 2.0 * (p - 1) * alpha + floor(2.0 * (p - 1) * (S / p)) / 12.5e9;
    cr_assert_float_eq(t, expect, expect * 1e-9, "p=%d: des %.12g vs %.12g", p, t, expect);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

/* Every algorithm, protocol and op: the DES equals the closed form when nothing contends. */
Test(collectives, des_equals_analytic_for_every_algorithm, .timeout = 120)
{
  const struct {
    prog_coll op;
    coll_algo algo;
    int nodes, gpn;
  } cases[] = {
      {PROG_COLL_ALLREDUCE, COLL_ALGO_RING, 2, 4},         {PROG_COLL_ALLREDUCE, COLL_ALGO_TREE, 6, 4},
      {PROG_COLL_ALLREDUCE, COLL_ALGO_RHD, 2, 4},          {PROG_COLL_ALLREDUCE, COLL_ALGO_HIERARCHICAL, 3, 4},
      {PROG_COLL_ALLREDUCE, COLL_ALGO_NVLS, 1, 8},         {PROG_COLL_ALLREDUCE, COLL_ALGO_NVLS_TREE, 2, 4},
      {PROG_COLL_ALLREDUCE, COLL_ALGO_SHARP, 8, 2},        {PROG_COLL_ALLGATHER, COLL_ALGO_RING, 2, 4},
      {PROG_COLL_REDUCESCATTER, COLL_ALGO_RING, 2, 4},     {PROG_COLL_BROADCAST, COLL_ALGO_RING, 2, 4},
      {PROG_COLL_REDUCE, COLL_ALGO_RING, 2, 4},            {PROG_COLL_ALLTOALL, COLL_ALGO_DIRECT, 2, 4},
      {PROG_COLL_ALLTOALL, COLL_ALGO_PAIRWISE, 2, 4},      {PROG_COLL_SENDRECV, COLL_ALGO_DIRECT, 2, 4},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(cases[i].nodes, cases[i].gpn,
                                  "set:node.intra.nvls=true;network.sharp=true", &cfg);
    int n = cases[i].nodes * cases[i].gpn;
    for (int proto = 0; proto < CFG_NPROTOS; proto++) {
      if (!coll_proto_applies(cases[i].algo, proto))
        continue;
      double a = run_engine(hw, ENG_ANALYTIC, cases[i].op, n, n, 96e6, cases[i].algo, proto, false);
      double d = run_engine(hw, ENG_DES, cases[i].op, n, n, 96e6, cases[i].algo, proto, false);
      cr_assert(a > 0);
      cr_assert_float_eq(d, a, a * 1e-9, "%s/%s/%s on %dx%d: des %.12g analytic %.12g",
                         prog_coll_name(cases[i].op), coll_algo_name(cases[i].algo),
                         cfg_proto_name((cfg_proto)proto), cases[i].nodes, cases[i].gpn, d, a);
    }
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, folded_equals_step_by_step_on_a_uniform_ring)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(4, 1, plain, &cfg);
  double folded = run_engine(hw, ENG_DES, PROG_COLL_ALLREDUCE, 4, 4, 64e6, COLL_ALGO_RING,
                             CFG_PROTO_SIMPLE, false);
  double steps = run_engine(hw, ENG_DES, PROG_COLL_ALLREDUCE, 4, 4, 64e6, COLL_ALGO_RING,
                            CFG_PROTO_SIMPLE, true);
  double steps_analytic = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 4, 4, 64e6,
                                     COLL_ALGO_RING, CFG_PROTO_SIMPLE, true);
  cr_assert_float_eq(steps, folded, folded * 1e-6, "steps %.12g folded %.12g", steps, folded);
  cr_assert_float_eq(steps_analytic, steps, steps * 1e-9);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, one_gpu_takes_no_time)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 1, NULL, &cfg);
  for (int op = 0; op < PROG_NCOLLS; op++) {
    if (op == PROG_COLL_SENDRECV)
      continue;
    cr_assert_eq(run_engine(hw, ENG_ANALYTIC, (prog_coll)op, 1, 1, 1e9, COLL_ALGO_AUTO,
                            COLL_PROTO_AUTO, false), 0.0, "%s", prog_coll_name((prog_coll)op));
  }
  cr_assert_eq(run_engine(hw, ENG_DES, PROG_COLL_ALLREDUCE, 1, 1, 1e9, COLL_ALGO_AUTO,
                          COLL_PROTO_AUTO, false), 0.0);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, group_must_be_a_subset_of_the_cluster)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 2, NULL, &cfg);
  int bad[] = {0, 1, 7};
  GError *err = NULL;
  cr_assert_not(coll_group_check(hw, bad, 3, &err));
  cr_assert(strstr(err->message, "rank 7 is not a GPU of the cluster (it has 4 GPUs, 0..3)"), "%s", err->message);
  g_clear_error(&err);
  int dup[] = {0, 1, 1};
  cr_assert_not(coll_group_check(hw, dup, 3, &err));
  cr_assert(strstr(err->message, "rank 1 appears twice"));
  g_clear_error(&err);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, busbw_is_monotone_in_size)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(4, 8, "set:node.intra.nvls=true", &cfg);
  const prog_coll ops[] = {PROG_COLL_ALLREDUCE, PROG_COLL_ALLGATHER, PROG_COLL_ALLTOALL};
  for (size_t o = 0; o < G_N_ELEMENTS(ops); o++) {
    double prev = 0;
    for (double size = 8; size <= 8.0 * (1 << 30); size *= 2) {
      double t = run_engine(hw, ENG_ANALYTIC, ops[o], 32, 32, size, COLL_ALGO_AUTO, COLL_PROTO_AUTO, false);
      double busbw = size / t * coll_busbw_factor(ops[o], 32);
      cr_assert(busbw >= prev * (1 - 1e-9), "%s: busbw fell at %g bytes", prog_coll_name(ops[o]), size);
      prev = busbw;
    }
  }
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, alltoall_over_nodes_reaches_n_over_n_minus_1_nic_bandwidth)
{
  /* nccl-tests maintainers: on N nodes all-to-all busbw ~ N/(N-1) x per-GPU NIC bandwidth */
  const int nodes[] = {2, 4};
  for (size_t i = 0; i < G_N_ELEMENTS(nodes); i++) {
    int N = nodes[i], n = 8 * N;
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(N, 8, NULL, &cfg);
    double S = 4.0 * (1 << 30);
    double t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLTOALL, n, n, S, COLL_ALGO_AUTO, COLL_PROTO_AUTO, false);
    double busbw = S / t * coll_busbw_factor(PROG_COLL_ALLTOALL, n);
    double nic = 12.5e9 * cfg->nccl.link_efficiency[CFG_LINK_NETWORK];
    double expect = nic * N / (N - 1);
    cr_assert(fabs(busbw / expect - 1) < 0.10, "N=%d: busbw %.3g vs %.3g", N, busbw, expect);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

/* N nodes of 8 GPUs on NVLS with NVLink 64x faster than their 100 Gb/s NICs, no latencies. */
/* `hw` built again from `cfg` after a test changed a key in it. */
static hw_cluster *rebuilt(hw_cluster *hw, const cfg_cluster *cfg)
{
  hw_cluster_free(hw);
  return hw_cluster_new(cfg);
}

static hw_cluster *nvls_nodes(int N, const char *const *sets, cfg_cluster **cfg)
{
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
      "node: {count: %d, gpus_per_node: 8, intra: {bandwidth: 800GB/s, latency: 0us, nvls: true}}\n"
      "network: {nic_bandwidth: 100Gb/s, tiers: [{name: leaf, latency: 0us}]}\n%s\n",
      N, plain);
  g_autofree char *path = th_write("c.yaml", text);
  cr_assert(th_load(path, NULL, sets, cfg, NULL));
  return hw_cluster_new(*cfg);
}

Test(collectives, nvls_tree_sends_twice_the_shard_past_two_nodes)
{
  /* NCCL's double binary tree over nodes: at 2 nodes every NIC carries its 1/g shard once each
   * way (half per tree); past 2 nodes an inner node sends its half to a parent and two children
   * while it is a leaf of the other tree, 2 S/g in all, which NCCL's tuner encodes as half the
   * network bandwidth for NVLS-tree beyond two nodes. With NVLink 64x faster than the NIC the
   * step is the busiest NIC's bytes over its rate. */
  const int nodes[] = {2, 4, 8, 16};
  const double shards[] = {1.0, 2.0, 2.0, 2.0};
  for (size_t i = 0; i < G_N_ELEMENTS(nodes); i++) {
    int N = nodes[i];
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = nvls_nodes(N, NULL, &cfg);
    double S = 8.0 * (1 << 30);
    double t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8 * N, 8 * N, S,
                          COLL_ALGO_NVLS_TREE, CFG_PROTO_SIMPLE, false);
    double expect = shards[i] * (S / 8) / 12.5e9;
    cr_assert(fabs(t / expect - 1) < 0.01, "N=%d: %.6g s vs %.6g s", N, t, expect);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, nvls_tree_bus_bandwidth_stays_flat_past_two_nodes_under_its_channel_ceiling)
{
  /* NCCL's tuner caps an NVLS-tree channel at perChMaxNVLSTreeBw (bus bandwidth): with the
   * links twice as fast as the ceiling, 8 channels x 10 GB/s give 80 GB/s of bus bandwidth at
   * 4, 8 and 16 nodes alike (busbw = algbw x 2 (n - 1) / n), and 8 x 30 GB/s on 2 nodes, where
   * the links (12.5 GB/s per NIC, one shard each way: algbw 100 GB/s, busbw 187.5) bind
   * first. Without the ceiling the bus bandwidth would rise with the nodes. In both engines. */
  const int nodes[] = {2, 4, 8, 16};
  const double busbw[] = {100e9 * 2 * 15 / 16, 80e9, 80e9, 80e9};
  for (size_t i = 0; i < G_N_ELEMENTS(nodes); i++) {
    int N = nodes[i], n = 8 * N;
    cfg_cluster *cfg = NULL;
    const char *const sets[] = {"nccl.nvls_tree_channel.two_nodes=30GB/s",
                                "nccl.nvls_tree_channel.more_nodes=10GB/s", NULL};
    hw_cluster *hw = nvls_nodes(N, sets, &cfg);
    double S = 8.0 * (1 << 30);
    for (int e = 0; e < 2; e++) {
      double t = run_engine(hw, e ? ENG_DES : ENG_ANALYTIC, PROG_COLL_ALLREDUCE, n, n, S,
                            COLL_ALGO_NVLS_TREE, CFG_PROTO_SIMPLE, false);
      double got = S / t * coll_busbw_factor(PROG_COLL_ALLREDUCE, n);
      cr_assert(fabs(got / busbw[i] - 1) < 0.01, "N=%d engine %d: busbw %.4g vs %.4g", N, e, got,
                busbw[i]);
    }
    cfg->nccl.nvls_tree_channel[CFG_SCALE_MORE_NODES] = 0;
    double free_t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, n, n, S,
                               COLL_ALGO_NVLS_TREE, CFG_PROTO_SIMPLE, false);
    if (N > 2)
      cr_assert(S / free_t * coll_busbw_factor(PROG_COLL_ALLREDUCE, n) > 1.1 * busbw[i]);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

/* The channels a tree all-reduce over all of `hw`'s n GPUs runs on. */
static int tree_channels(const hw_cluster *hw, int n)
{
  int *ranks = g_new(int, n);
  for (int i = 0; i < n; i++)
    ranks[i] = i;
  coll_plan *p = coll_plan_new(hw, PROG_COLL_ALLREDUCE, ranks, n, COLL_ALGO_TREE, NULL, true);
  int c = p->channels;
  coll_plan_free(p);
  g_free(ranks);
  return c;
}

Test(collectives, tree_and_ll_ceilings_bound_bus_bandwidth_across_nodes)
{
  /* NCCL's tuner (src/graph/tuning.cc) caps a tree channel (perChMaxTreeBw, on LL128 also
   * perChMaxTreeLL128Bw) and LL rings and trees as a whole (llMaxBw), in bus bandwidth, by
   * whether the group spans two nodes or more; a tree's algorithm bandwidth is half its bus
   * bandwidth, a ring all-reduce's n / (2 (n - 1)). With ceilings far below the links (12.5
   * GB/s per NIC) a 1 GiB all-reduce lasts S / (ceiling x ratio); without them, far less. */
  const char *const sets[] = {"nccl.tree_channel.two_nodes=0.8GB/s",
                              "nccl.tree_channel.more_nodes=0.4GB/s",
                              "nccl.tree_ll128_channel.more_nodes=0.2GB/s",
                              "nccl.ll_max_bandwidth.two_nodes=1GB/s",
                              "nccl.ll_max_bandwidth.more_nodes=0.5GB/s", NULL};
  double S = 1 << 30;
  for (int N = 2; N <= 4; N += 2) {
    int n = 8 * N;
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = nvls_nodes(N, sets, &cfg);
    double C = tree_channels(hw, n), more = N > 2;
    double tree = (more ? 0.4e9 : 0.8e9) * C, ll = more ? 0.5e9 : 1e9;
    struct {
      coll_algo algo;
      int proto;
      double busbw, ratio;
    } want[] = {{COLL_ALGO_TREE, CFG_PROTO_SIMPLE, tree, 0.5},
                {COLL_ALGO_TREE, CFG_PROTO_LL128, more ? 0.2e9 * C : tree, 0.5},
                {COLL_ALGO_TREE, CFG_PROTO_LL, MIN(tree, ll), 0.5},
                {COLL_ALGO_RING, CFG_PROTO_LL, ll, n / (2.0 * (n - 1))}};
    for (size_t i = 0; i < G_N_ELEMENTS(want); i++)
      for (int e = 0; e < 2; e++) {
        double t = run_engine(hw, e ? ENG_DES : ENG_ANALYTIC, PROG_COLL_ALLREDUCE, n, n, S,
                              want[i].algo, want[i].proto, false);
        double expect = S / (want[i].busbw * want[i].ratio);
        cr_assert(fabs(t / expect - 1) < 0.01, "N=%d case %zu engine %d: %.6g s vs %.6g s", N, i,
                  e, t, expect);
      }
    cfg->nccl.tree_channel[CFG_SCALE_TWO_NODES] = cfg->nccl.tree_channel[CFG_SCALE_MORE_NODES] = 0;
    cfg->nccl.ll_max_bandwidth[CFG_SCALE_TWO_NODES] = cfg->nccl.ll_max_bandwidth[CFG_SCALE_MORE_NODES] = 0;
    double free_t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, n, n, S, COLL_ALGO_TREE,
                               CFG_PROTO_SIMPLE, false);
    cr_assert(free_t < 0.5 * S / (tree * 0.5), "N=%d: %.6g s without the ceilings", N, free_t);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, ceilings_leave_a_group_inside_one_node_alone)
{
  /* the ceilings are NCCL's across nodes; inside a node its GPU-type figures apply, which
   * dlsim does not copy: a ring on LL over 8 GPUs of one node is as fast with them as without */
  const char *const sets[] = {"nccl.ll_max_bandwidth.two_nodes=0.1GB/s",
                              "nccl.ll_max_bandwidth.more_nodes=0.1GB/s", NULL};
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = nvls_nodes(1, sets, &cfg);
  double t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8, 8, 1 << 30, COLL_ALGO_RING,
                        CFG_PROTO_LL, false);
  cr_assert(t < (1 << 30) / 0.1e9 / 10, "%.6g s", t);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, nvls_pays_its_own_latency_not_the_rings_steps)
{
  /* NCCL's tuning model: an NVLS all-reduce costs hwLat[NVLINK][NVLS] once (nccl.nvls_latency),
   * not the base latency plus a latency per NVLink step; one byte takes just that. */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 8, "set:node.intra.nvls=true;nccl.nvls_latency=40us;"
                                      "nccl.base_latency.simple=5us;nccl.hop_latency.intra.simple=3us",
                                &cfg);
  double t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8, 8, 1, COLL_ALGO_NVLS,
                        CFG_PROTO_SIMPLE, false);
  cfg->nccl.nvls_latency = 0; /* what is left: the wires' own latency, no base, no 3 us steps */
  double wires = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8, 8, 1, COLL_ALGO_NVLS,
                            CFG_PROTO_SIMPLE, false);
  cr_assert(wires < 3e-6, "%.9g s", wires);
  cr_assert_float_eq(t - wires, 40e-6, 1e-12, "%.9g s", t - wires);
  cfg->nccl.nvls_latency = 40e-6;
  double d = run_engine(hw, ENG_DES, PROG_COLL_ALLREDUCE, 8, 8, 1, COLL_ALGO_NVLS, CFG_PROTO_SIMPLE, false);
  cr_assert_float_eq(d, t, 0.05e-6, "des %.9g s vs analytic %.9g s", d, t);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* One H100-like node of 8 at 100 GB/s, NVLS with nothing but its transfers and its fill: each
 * GPU sends and receives 1.125 S, so the transfers take T = 1.125 S / 100 GB/s. */
static hw_cluster *make_bare_nvls_node(cfg_cluster **cfg)
{
  return make_cluster(1, 8, "set:node.intra.nvls=true;node.intra.latency=0;nccl.nvls_latency=0;"
                            "nccl.nvls_efficiency=1;nccl.link_efficiency.intra=1", cfg);
}

Test(collectives, single_node_nvls_fills_two_of_nccls_chunk_loops)
{
  /* 16 channels x 8 heads = 128 chunks a loop; NCCL's chunk is 16 KiB below 8 MiB, 32 KiB
   * below 64 MiB, 64 KiB below 1 GiB: a loop of 2, 4, 8 MiB. The fill is two loops' share of
   * T, at most 2 T: 1 MiB 2 T, 4 MiB T, 8 MiB T, 32 MiB T / 4, 64 MiB T / 4. */
  const struct {
    double mib, times_t;
  } cases[] = {{1, 3.0}, {4, 2.0}, {8, 2.0}, {32, 1.25}, {64, 1.25}};
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_bare_nvls_node(&cfg);
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    double S = cases[i].mib * 1048576, T = 1.125 * S / 100e9;
    double t = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8, 8, S, COLL_ALGO_NVLS,
                          CFG_PROTO_SIMPLE, false);
    cr_assert_float_eq(t, cases[i].times_t * T, T * 1e-9, "%g MiB: %.9g s, T = %.9g s",
                       cases[i].mib, t, T);
  }
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, des_equals_closed_form_for_the_nvls_fill_at_16_mib)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_bare_nvls_node(&cfg);
  double S = 16 * 1048576, T = 1.125 * S / 100e9; /* a loop of 4 MiB: fill T / 2 */
  double a = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8, 8, S, COLL_ALGO_NVLS,
                        CFG_PROTO_SIMPLE, false);
  double d = run_engine(hw, ENG_DES, PROG_COLL_ALLREDUCE, 8, 8, S, COLL_ALGO_NVLS,
                        CFG_PROTO_SIMPLE, false);
  cr_assert_float_eq(a, 1.5 * T, T * 1e-9, "analytic %.9g s, T = %.9g s", a, T);
  cr_assert_float_eq(d, a, a * 1e-9, "des %.12g s vs analytic %.12g s", d, a);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, a_ring_of_few_gpus_is_bound_by_its_channels_loads_and_stores)
{
  /* 1 GB all-reduce at 150 GB/s of loads and stores, NVLink 100 GB/s: on 2 GPUs each sends
   * 1 GB (stored and loaded once each) and touches 2 GB of its own buffers: 4 GB / 150 GB/s,
   * not 1 GB / 100 GB/s; busbw = copy_bandwidth x (n - 1)/(3n - 2), a quarter of it on 2 GPUs
   * and 7/22 on 8 */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 8, plain, &cfg);
  cfg->nccl.copy_bandwidth = 150e9;
  double lat = 2 * 2e-6; /* the ring's 2 steps on 2us links */
  double two = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 2, 2, 1e9, COLL_ALGO_RING,
                          CFG_PROTO_SIMPLE, false);
  cr_assert_float_eq(two - lat, 4e9 / 150e9, 1e-9, "%.9g s", two);
  double eight = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8, 8, 1e9, COLL_ALGO_RING,
                            CFG_PROTO_SIMPLE, false);
  cr_assert_float_eq(eight - 14 * 2e-6, 5.5e9 / 150e9, 1e-9, "%.9g s", eight);
  /* all-gather on 2: 0.5 GB sent, 1.5 GB of its own buffers (its chunk loaded, both stored) */
  double ag = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLGATHER, 2, 2, 1e9, COLL_ALGO_RING,
                         CFG_PROTO_SIMPLE, false);
  cr_assert_float_eq(ag - 2e-6, 2.5e9 / 150e9, 1e-9, "%.9g s", ag);
  double des = run_engine(hw, ENG_DES, PROG_COLL_ALLREDUCE, 2, 2, 1e9, COLL_ALGO_RING,
                          CFG_PROTO_SIMPLE, false);
  cr_assert_float_eq(des, two, 1e-6 * two, "des %.9g s vs analytic %.9g s", des, two);
  /* fast enough SMs leave the links' time */
  cfg->nccl.copy_bandwidth = 1e15;
  double links = run_engine(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 2, 2, 1e9, COLL_ALGO_RING,
                            CFG_PROTO_SIMPLE, false);
  cr_assert_float_eq(links - lat, 1e9 / 100e9, 1e-9, "%.9g s", links);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, tuner_picks_latency_protocols_small_and_bandwidth_ones_large)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 8, NULL, &cfg);
  eng_options o = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_coll_result small, large;
  cr_assert(eng_collective_time(hw, &o, PROG_COLL_ALLREDUCE, 16, 16, 1024, &small, NULL));
  cr_assert(eng_collective_time(hw, &o, PROG_COLL_ALLREDUCE, 16, 16, 4e9, &large, NULL));
  cr_assert_eq(small.proto, CFG_PROTO_LL, "small messages: %s", cfg_proto_name((cfg_proto)small.proto));
  cr_assert_eq(large.proto, CFG_PROTO_SIMPLE, "large: %s", cfg_proto_name((cfg_proto)large.proto));
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
  /* where the switches reduce, large all-reduces go through them */
  hw = make_cluster(2, 8, "set:node.intra.nvls=true", &cfg);
  cr_assert(eng_collective_time(hw, &o, PROG_COLL_ALLREDUCE, 16, 16, 4e9, &large, NULL));
  cr_assert_eq(large.algo, COLL_ALGO_NVLS_TREE, "large: %s", coll_algo_name(large.algo));
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, concurrent_groups_contend_in_both_engines)
{
  /* 4 data-parallel rings across 2 nodes through the same NIC per node: the DES shares the
   * NIC between the flows; the analytic engine times each group beside the other groups of
   * its class, which run the same collective in step */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, "set:node.nics_per_node=1", &cfg);
  eng_options a = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE};
  eng_options d = a;
  d.kind = ENG_DES;
  /* groups {0,4}, {1,5}, ...: each pairs a GPU with its peer on the other node */
  prog_program *p = prog_new(8);
  int cls = prog_class_add(p, "all");
  int fam = prog_family_add(p, "dp", PROG_DIM_DP);
  for (int r = 0; r < 4; r++) {
    int g[2] = {r, r + 4};
    int id = prog_group_add(p, g, 2);
    prog_family_set(p, fam, r, id);
    prog_family_set(p, fam, r + 4, id);
  }
  for (int r = 0; r < 8; r++)
    prog_rank_set_class(p, r, cls);
  prog_finalize(p);
  prog_comm(p, cls, PROG_STREAM_DP, "ar", PROG_COLL_ALLREDUCE, fam, 256e6, NULL, 0);
  eng_result ra, rd;
  cr_assert(eng_run(p, hw, &a, &ra, NULL));
  cr_assert(eng_run(p, hw, &d, &rd, NULL));
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_RING, CFG_PROTO_SIMPLE, true);
  int pair[2] = {0, 4};
  double alone = coll_planner_get(pl, PROG_COLL_ALLREDUCE, pair, 2, 1, 256e6, NULL, NULL)->time;
  coll_planner_free(pl);
  cr_assert(rd.step_time > 3.5 * alone, "des %g, one group alone %g", rd.step_time, alone);
  cr_assert(fabs(ra.step_time - rd.step_time) < 0.01 * rd.step_time, "des %g analytic %g",
            rd.step_time, ra.step_time);
  eng_result_clear(&ra);
  eng_result_clear(&rd);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* The extra time of an all-gather over {0, 4} of 2 one-node leaves when the three other GPU
 * pairs {1, 5}, {2, 6}, {3, 7} gather at the same moment, under spine oversubscription `over`. */
static double crowded_extra(double over)
{
  cfg_cluster *cfg = NULL;
  g_autofree char *sets = g_strdup_printf("set:network.tiers[0].nodes_per_switch=1;"
                                          "network.tiers[1].oversubscription=%g;"
                                          "nccl.link_efficiency.network=1", over);
  hw_cluster *hw = make_cluster(2, 4, sets, &cfg);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_RING, CFG_PROTO_SIMPLE, true);
  int own[2] = {0, 4}, others[6] = {1, 5, 2, 6, 3, 7};
  const coll_schedule *s = coll_planner_get(pl, PROG_COLL_ALLGATHER, own, 2, 1, 1e9, NULL, NULL);
  cr_assert(s);
  double t = coll_schedule_crowded(s, hw, true, others, 3) - s->time;
  coll_planner_free(pl);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
  return t;
}

Test(collectives, lock_step_groups_share_an_oversubscribed_spine)
{
  /* each node's uplink carries 4 NICs of 12.5 GB/s over 4: one pair alone still gets a NIC's
   * rate, four share it; each GPU sends half of the 1 GB over it, so four pairs take
   * 3 x 0.5 GB / 12.5 GB/s = 0.12 s more than one */
  double extra = crowded_extra(4);
  cr_assert(fabs(extra - 0.12) < 1e-3 * 0.12, "crowded adds %g s", extra);
  /* a full-bisection spine gives each pair its own NIC and uplink share: nothing changes */
  cr_assert(fabs(crowded_extra(1)) < 1e-12, "crowded adds %g s at 1:1", crowded_extra(1));
}

/* The fit recovers parameters it did not start from, on a table the model itself produced. */
/* Sizes from `lo` to `hi` (x4) with the times the cluster predicts for them: a table a fit
 * must find the cluster's parameters back from. */
static calib_table truth_table(cfg_cluster *cfg, const calib_target *t, double lo, double hi)
{
  calib_table tab = {.points = g_array_new(FALSE, FALSE, sizeof(calib_point))};
  for (double s = lo; s <= hi; s *= 4) {
    calib_point pt = {.size = s};
    g_array_append_val(tab.points, pt);
  }
  g_autofree double *truth = g_new(double, tab.points->len);
  cr_assert(calib_predict(cfg, t, &tab, truth, NULL));
  for (guint i = 0; i < tab.points->len; i++)
    g_array_index(tab.points, calib_point, i).time = truth[i];
  return tab;
}

Test(collectives, calibration_recovers_known_parameters, .timeout = 60)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 8, "set:node.intra.nvls=true", &cfg);
  /* NVLS-tree forced, as a table run with NCCL_ALGO=NVLSTree: its latency shows at every size */
  calib_target t = {.op = PROG_COLL_ALLREDUCE, .gpus = 16, .group = 16, .engine = ENG_ANALYTIC,
                    .algo = COLL_ALGO_NVLS_TREE, .proto = COLL_PROTO_AUTO};
  calib_table tab = truth_table(cfg, &t, 8, 4e9);
  double true_base = cfg->nccl.nvls_latency;
  double true_nvls = cfg->nccl.nvls_efficiency;
  cfg->nccl.nvls_latency *= 2.5; /* start away from the answer */
  cfg->nccl.nvls_efficiency = 0.45;
  char *fit[] = {"nvls_latency", "nvls_efficiency", NULL};
  calib_fit_report rep;
  cr_assert(calib_fit_nccl(cfg, &t, &tab, fit, &rep, NULL));
  cr_assert(rep.after.median_all < 0.01, "median error after the fit %g", rep.after.median_all);
  cr_assert(fabs(cfg->nccl.nvls_efficiency / true_nvls - 1) < 0.02, "nvls %g vs %g",
            cfg->nccl.nvls_efficiency, true_nvls);
  cr_assert(fabs(cfg->nccl.nvls_latency / true_base - 1) < 0.1, "nvls latency %g vs %g",
            cfg->nccl.nvls_latency, true_base);
  g_array_free(tab.points, TRUE);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, calibration_recovers_the_copy_bandwidth_from_no_limit, .timeout = 60)
{
  /* a 2-GPU all-reduce table made at 120 GB/s of loads and stores (NVLink 100 GB/s); the fit
   * starts from no limit, as a preset without one does */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 8, "set:nccl.copy_bandwidth=120GB/s", &cfg);
  calib_target t = {.op = PROG_COLL_ALLREDUCE, .gpus = 2, .group = 2, .engine = ENG_ANALYTIC,
                    .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  calib_table tab = truth_table(cfg, &t, 1 << 20, 4e9);
  cfg->nccl.copy_bandwidth = 0;
  char *fit[] = {"copy_bandwidth", NULL};
  calib_fit_report rep;
  cr_assert(calib_fit_nccl(cfg, &t, &tab, fit, &rep, NULL));
  cr_assert(rep.before.median_all > 0.2, "no limit should be far off: %g", rep.before.median_all);
  cr_assert(rep.after.median_all < 0.01, "median error after the fit %g", rep.after.median_all);
  cr_assert(fabs(cfg->nccl.copy_bandwidth / 120e9 - 1) < 0.02, "copy bandwidth %g",
            cfg->nccl.copy_bandwidth);
  g_array_free(tab.points, TRUE);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* A 1 GB send from GPU 0 to GPU 1 on the next node (NICs of 12.5 GB/s, alpha-beta network)
 * with `background` as network.background; returns its time. */
static double send_beside(const char *background)
{
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
      "node: {count: 2, gpus_per_node: 1, intra: {bandwidth: 100GB/s, latency: 2us}}\n"
      "network: {nic_bandwidth: 100Gb/s, background: %s,\n"
      "  tiers: [{name: leaf, latency: 1us, nodes_per_switch: 4}, {name: spine, latency: 1us}]}\n"
      "%s\n",
      background, plain);
  g_autofree char *path = th_write("bg.yaml", text);
  cfg_cluster *cfg = NULL;
  cr_assert(th_load(path, NULL, NULL, &cfg, NULL));
  hw_cluster *hw = hw_cluster_new(cfg);
  double t = run_engine(hw, ENG_DES, PROG_COLL_SENDRECV, 2, 2, 1e9, COLL_ALGO_AUTO, CFG_PROTO_SIMPLE,
                        false);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
  return t;
}

/* Another tenant's flow capped at half of node 0's NIC: max-min gives it and the send half the
 * link each, so 1 GB at 6.25 GB/s takes 0.08 s more than at 12.5 GB/s; capped at 2.5 GB/s it
 * leaves the send 10 GB/s (0.02 s more); for 20 ms from the start it costs the send half of
 * that time; on the other direction or another node's NIC, nothing. */
Test(collectives, background_traffic_takes_its_share_of_a_link)
{
  double alone = send_beside("[]");
  double half = send_beside("[{links: node 0, direction: up, fraction: 0.5}]");
  cr_assert(fabs(half - alone - 0.08) < 1e-9, "half a NIC: %.12g vs alone %.12g", half, alone);
  double rate = send_beside("[{links: node 0 rail 0, bandwidth: 2.5GB/s}]");
  cr_assert(fabs(rate - alone - 0.02) < 1e-9, "2.5 GB/s taken: %.12g vs %.12g", rate, alone);
  double brief = send_beside("[{links: rail 0, fraction: 0.5, start: 0s, duration: 20ms}]");
  /* the send's data leaves after the 1 us latency of its route: 20 ms - 1 us at half rate */
  cr_assert(fabs(brief - alone - (0.02 - 1e-6) / 2) < 1e-9, "20 ms of half: %.12g vs %.12g", brief,
            alone);
  double other = send_beside("[{links: node 0, direction: down, fraction: 0.9}]");
  cr_assert(fabs(other - alone) < 1e-12, "the other direction: %.12g vs %.12g", other, alone);
}

/* The DES counts what each link carried: a lone 1 GB send from node 0 to node 1 loads node 0's
 * NIC out and node 1's NIC in with its wire bytes, busy for the transfer's share of the step
 * (all of it but the route latency); traced, the rates over the step add up to the bytes. */
Test(collectives, the_des_names_the_links_a_send_loaded)
{
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
      "node: {count: 2, gpus_per_node: 1, intra: {bandwidth: 100GB/s, latency: 2us}}\n"
      "network: {nic_bandwidth: 100Gb/s, tiers: [{name: leaf, latency: 1us}]}\n%s\n", plain);
  g_autofree char *path = th_write("links.yaml", text);
  cfg_cluster *cfg = NULL;
  cr_assert(th_load(path, NULL, NULL, &cfg, NULL));
  hw_cluster *hw = hw_cluster_new(cfg);
  prog_program *p = eng_collective_program(PROG_COLL_SENDRECV, 2, 2, 1e9);
  eng_options o = {.kind = ENG_DES, .trace = true, .algo = COLL_ALGO_AUTO, .proto = CFG_PROTO_SIMPLE};
  eng_result r;
  cr_assert(eng_run(p, hw, &o, &r, NULL));
  cr_assert(r.link_loads && r.link_loads->len == 2, "two loaded links");
  for (guint i = 0; i < 2; i++) {
    const eng_link_load *l = &g_array_index(r.link_loads, eng_link_load, i);
    char name[96];
    hw_link_describe(hw, l->link, l->down, name, sizeof name);
    cr_assert(strcmp(name, l->down ? "NIC 0 of node 1, in" : "NIC 0 of node 0, out") == 0, "%s", name);
    cr_assert(fabs(l->bytes - 1e9) < 1, "%s carried %g bytes", name, l->bytes);
    double busy = 1e9 / 12.5e9 / r.step_time;
    cr_assert(fabs(l->utilisation - busy) < 1e-9, "%s: %g busy, expected %g", name,
              l->utilisation, busy);
  }
  double sum = 0, dt = g_array_index(r.link_samples, eng_link_sample, 1).time;
  for (guint i = 0; i < r.link_samples->len; i++) {
    const eng_link_sample *s = &g_array_index(r.link_samples, eng_link_sample, i);
    sum += s->link == g_array_index(r.link_loads, eng_link_load, 0).link ? s->rate * dt : 0;
  }
  cr_assert(fabs(sum - 1e9) < 1e3, "the samples of one link add up to %g bytes", sum);
  eng_result_clear(&r);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* The step time of a program in engine `kind`; frees the program and the cluster. */
static double step_and_free(prog_program *p, hw_cluster *hw, cfg_cluster *cfg, eng_kind kind,
                            coll_algo algo)
{
  eng_options o = {.kind = kind, .algo = algo, .proto = CFG_PROTO_SIMPLE};
  eng_result r;
  cr_assert(eng_run(p, hw, &o, &r, NULL));
  double t = r.step_time;
  eng_result_clear(&r);
  prog_free(p);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
  return t;
}

/* Two GPUs on two nodes (one 12.5 GB/s NIC each): a 1 GB data-parallel all-reduce alone, then
 * beside a pipeline send of `pp` bytes from GPU 0 to GPU 1 on its own stream; the step. */
static double dp_beside_pp(double pp)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 1, plain, &cfg);
  prog_program *p = prog_new(2);
  int cls = prog_class_add(p, "all");
  int dp = prog_family_add(p, "dp", PROG_DIM_DP), fam_pp = prog_family_add(p, "pp", PROG_DIM_PP);
  int both[2] = {0, 1}, g = prog_group_add(p, both, 2);
  for (int r = 0; r < 2; r++) {
    prog_family_set(p, dp, r, g);
    prog_family_set(p, fam_pp, r, g);
    prog_rank_set_class(p, r, cls);
  }
  prog_finalize(p);
  prog_comm(p, cls, PROG_STREAM_DP, "ar", PROG_COLL_ALLREDUCE, dp, 1e9, NULL, 0);
  if (pp > 0)
    prog_comm(p, cls, PROG_STREAM_PP, "send", PROG_COLL_SENDRECV, fam_pp, pp, NULL, 0);
  return step_and_free(p, hw, cfg, ENG_DES, COLL_ALGO_RING);
}

/* The all-reduce of two GPUs is one flow each way carrying 1 GB (2 steps of half) after the
 * latency of its 2 steps (2 us); alone it ends at 0.08 s + 2 us. GPU 0's flow leaves its NIC
 * beside a 0.5 GB send that starts after its own 1 us: the send has the NIC alone for 1 us
 * (12.5 kB), then both get 6.25 GB/s until the send ends at 0.08 s; the all-reduce has then
 * 0.5 GB + 12.5 kB left at the full 12.5 GB/s: 0.04 s + 1 us more, ending at 0.12 s + 1 us.
 * The send, 0.04 s + 1 us alone, took 0.08 s. */
Test(collectives, dp_allreduce_and_pp_sends_sharing_a_nic_slow_each_other)
{
  double alone = dp_beside_pp(0), both = dp_beside_pp(0.5e9);
  cr_assert(fabs(alone - (0.08 + 2e-6)) < 1e-12, "all-reduce alone: %.12g", alone);
  cr_assert(fabs(both - (0.12 + 1e-6)) < 1e-12, "all-reduce beside a send: %.12g", both);
}

/* A 1 GB pipeline send from GPU 0 to GPU 1 on the next node, its ends ready after a GEMM of
 * `flops0` and `flops1`; the step in `kind`. */
static double send_after(eng_kind kind, double flops0, double flops1)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 1, plain, &cfg);
  prog_program *p = prog_new(2);
  int fam = prog_family_add(p, "pp", PROG_DIM_PP);
  int both[2] = {0, 1}, g = prog_group_add(p, both, 2);
  double flops[2] = {flops0, flops1};
  int cls[2];
  for (int r = 0; r < 2; r++) {
    cls[r] = prog_class_add(p, r ? "recv" : "send");
    prog_family_set(p, fam, r, g);
    prog_rank_set_class(p, r, cls[r]);
  }
  prog_finalize(p);
  for (int r = 0; r < 2; r++) {
    uint32_t c = prog_compute(p, cls[r], "gemm", CFG_KCLASS_GEMM, CFG_BF16, flops[r], 0, NULL, 0);
    prog_comm(p, cls[r], PROG_STREAM_PP, "send", PROG_COLL_SENDRECV, fam, 1e9, &c, 1);
  }
  return step_and_free(p, hw, cfg, kind, COLL_ALGO_AUTO);
}

/* A send starts once both its ends are ready, after its route's 1 us of latency, whichever end
 * comes last: the DES lets the first end post at once (a sleep fewer) and the later one sleep,
 * so the step is the longer GEMM + 1 us + 1 GB at 12.5 GB/s either way, as the closed form has
 * it. */
Test(collectives, a_send_starts_a_latency_after_its_later_end)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 1, plain, &cfg);
  hw_kernel k = {.kclass = CFG_KCLASS_GEMM, .dtype = CFG_BF16, .flops = 4e12};
  double gemm = hw_kernel_time(hw, &k);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
  double want = gemm + 1e-6 + 0.08;
  for (int late = 0; late < 2; late++) {
    double d = send_after(ENG_DES, late ? 1e12 : 4e12, late ? 4e12 : 1e12);
    double a = send_after(ENG_ANALYTIC, late ? 1e12 : 4e12, late ? 4e12 : 1e12);
    cr_assert(fabs(d - want) < 1e-12, "%s late: DES %.15g s, by hand %.15g s",
              late ? "receiver" : "sender", d, want);
    cr_assert(fabs(a - want) < 1e-12, "analytic %.15g s, by hand %.15g s", a, want);
  }
}

/* A 1 GB all-to-all over {0, 2}, and with `both` also over {1, 3}, on four one-GPU nodes in two
 * leaves of two under a 4:1 spine (each leaf's uplink 2 x 12.5 / 4 = 6.25 GB/s each way). */
static double ep_across_spine(bool both)
{
  cfg_cluster *cfg = NULL;
  g_autofree char *sets = g_strdup_printf("set:network.tiers[0].nodes_per_switch=2;"
                                          "network.tiers[1].oversubscription=4;"
                                          "nccl.link_efficiency.network=1");
  hw_cluster *hw = make_cluster(4, 1, sets, &cfg);
  prog_program *p = prog_new(4);
  int cls = prog_class_add(p, "ep"), idle = prog_class_add(p, "idle");
  int fam = prog_family_add(p, "ep", PROG_DIM_EP);
  for (int r = 0; r < 2; r++) {
    int g[2] = {r, r + 2}, id = prog_group_add(p, g, 2);
    prog_family_set(p, fam, r, id);
    prog_family_set(p, fam, r + 2, id);
    prog_rank_set_class(p, r, r == 0 || both ? cls : idle);
    prog_rank_set_class(p, r + 2, r == 0 || both ? cls : idle);
  }
  prog_finalize(p);
  prog_comm(p, cls, PROG_STREAM_EP, "a2a", PROG_COLL_ALLTOALL, fam, 1e9, NULL, 0);
  return step_and_free(p, hw, cfg, ENG_DES, COLL_ALGO_AUTO);
}

/* Each GPU sends half its buffer (0.5 GB) to its peer across the spine: one group alone has a
 * leaf uplink at 6.25 GB/s per direction for its one flow (0.08 s), two groups share it
 * (3.125 GB/s each, 0.16 s): the second group costs 0.08 s, the NICs (12.5 GB/s) never bind. */
Test(collectives, two_ep_groups_crossing_a_4_to_1_spine_share_its_uplinks)
{
  double one = ep_across_spine(false), two = ep_across_spine(true);
  cr_assert(one > 0.08 && one < 0.08 + 1e-4, "one group %.12g (0.08 s and NCCL's latencies)", one);
  cr_assert(fabs(two - one - 0.08) < 1e-9, "two groups %.12g, one %.12g", two, one);
}

/* ---- runtimes ------------------------------------------------------------------------------ */

/* A host-driven runtime with no software costs unless asked: every figure below is links. */
static coll_runtime *cpu_runtime(int leaders, const char *allreduce, double step, double eager,
                                 double rendezvous)
{
  cfg_collectives c = {.runtime = "test", .progress = CFG_PROGRESS_CPU,
                       .transport = CFG_TRANSPORT_GPU_DIRECT, .call_latency = 0,
                       .step_latency = step, .eager_limit = eager,
                       .rendezvous_latency = rendezvous, .leaders_per_node = leaders,
                       .allreduce = (char *)allreduce};
  GError *err = NULL;
  coll_runtime *rt = coll_runtime_new(&c, NULL, &err);
  cr_assert(rt, "%s", err ? err->message : "");
  return rt;
}

static double runtime_time(hw_cluster *hw, coll_runtime *rt, eng_kind kind, int gpus, double S)
{
  eng_options o = {.kind = kind, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO, .runtime = rt};
  eng_coll_result r;
  GError *err = NULL;
  cr_assert(eng_collective_time(hw, &o, PROG_COLL_ALLREDUCE, gpus, gpus, S, &r, &err), "%s",
            err ? err->message : "");
  return r.time;
}

Test(collectives, multi_leader_allreduce_by_hand_on_2_nodes_of_4)
{
  /* 2 nodes x 4 GPUs, NVSwitch links of 100 GB/s (2 us), NICs of 12.5 GB/s (1 us), S = 64 MiB.
   * k = 1, one NIC per node: the leader takes the 3 others' whole buffers over its NVSwitch
   * link (3 S / 100 GB/s), the two leaders all-reduce over the NICs (ring of 2: 2 steps of S/2
   * each way, S / 12.5 GB/s, 2 x 1 us), the leader sends the result back (3 S / 100 GB/s):
   *   2 us + 2.01326592 ms + 2 us + 5.36870912 ms + 2 us + 2.01326592 ms = 9.40124096 ms.
   * k = 4, a NIC per GPU: each GPU leads a quarter; it sends 3 quarters and takes 3 (3 S / 4
   * over its link), the 4 pairs of leaders exchange 2 x S/8 each on their own NIC (S / 4 /
   * 12.5 GB/s), and the quarters come back (3 S / 4):
   *   2 us + 0.50331648 ms + 2 us + 1.34217728 ms + 2 us + 0.50331648 ms = 2.35481024 ms.
   * k = 4 on one NIC per node: the 4 rings share it, the middle phase is S / 12.5 GB/s again:
   *   6 us + 2 x 0.50331648 ms + 5.36870912 ms = 6.38134208 ms. */
  const double S = 64.0 * 1048576;
  const struct {
    int leaders, nics;
    double expect;
  } cases[] = {{1, 1, 9.40124096e-3}, {4, 4, 2.35481024e-3}, {4, 1, 6.38134208e-3}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = make_cluster(2, 4, plain, &cfg);
    cfg->node.nics_per_node = cases[i].nics; /* before the platform is built from it */
    hw_cluster_free(hw);
    hw = hw_cluster_new(cfg);
    coll_runtime *rt = cpu_runtime(cases[i].leaders, "multi-leader", 0, 0, 0);
    for (int e = 0; e < 2; e++) {
      double t = runtime_time(hw, rt, e ? ENG_DES : ENG_ANALYTIC, 8, S);
      cr_assert_float_eq(t, cases[i].expect, cases[i].expect * 1e-9,
                         "k=%d nics=%d %s: %.10g vs %.10g", cases[i].leaders, cases[i].nics,
                         e ? "des" : "analytic", t, cases[i].expect);
    }
    coll_runtime_free(rt);
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(collectives, a_rendezvous_adds_its_handshake_above_the_eager_limit)
{
  /* 2 GPUs on 2 nodes, ring all-reduce: 2 steps each sending S/2. Each step costs 1 us of link
   * and 1 us of software; above the 16 KiB eager limit each also waits for a 3 us handshake:
   * S = 32 KiB sends 16 KiB messages (eager), 2 bytes more sends rendezvous messages. */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 1, plain, &cfg);
  coll_runtime *rt = cpu_runtime(1, "ring", 1e-6, 16384, 3e-6);
  double eager = runtime_time(hw, rt, ENG_ANALYTIC, 2, 32768);
  double rendezvous = runtime_time(hw, rt, ENG_ANALYTIC, 2, 32770);
  double B = 12.5e9;
  cr_assert_float_eq(eager, 2 * 2e-6 + 32768 / B, 1e-15, "%.12g", eager);
  cr_assert_float_eq(rendezvous - eager, 2 * 3e-6 + 2 / B, 1e-15, "%.12g", rendezvous - eager);
  cr_assert_float_eq(runtime_time(hw, rt, ENG_DES, 2, 32770), rendezvous, 1e-12);
  coll_runtime_free(rt);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* One schedule of `op` over the first n GPUs under `rt`. */
static const coll_schedule *runtime_schedule(coll_planner *pl, prog_coll op, int n, double S)
{
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7};
  GError *err = NULL;
  const coll_schedule *s = coll_planner_get(pl, op, ranks, n, 0, S, NULL, &err);
  cr_assert(s, "%s", err ? err->message : "");
  return s;
}

/* An all-to-all over 4 GPUs by an MPI whose rule is `rule`, 1 us to post a message. */
static double alltoall_time(hw_cluster *hw, const char *rule, double S)
{
  cfg_collectives c = {.runtime = "test", .progress = CFG_PROGRESS_CPU, .step_latency = 1e-6,
                       .leaders_per_node = 1, .alltoall = (char *)rule};
  coll_runtime *rt = coll_runtime_new(&c, NULL, NULL);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  coll_planner_set_runtime(pl, rt);
  double t = runtime_schedule(pl, PROG_COLL_ALLTOALL, 4, S)->time;
  coll_planner_free(pl);
  coll_runtime_free(rt);
  return t;
}

Test(collectives, a_linear_alltoall_posts_its_sends_one_after_the_other)
{
  /* 4 one-GPU nodes under one leaf (1 us route, 12.5 GB/s NICs), 1 us to post a message.
   * direct: every rank posts its 3 sends at once, the last one 2 us after the first, and its
   * NIC carries the 3 blocks of S/4: 1 us + 1 us + 2 us + 3 S/4 / 12.5 GB/s.
   * pairwise: 3 rounds of one send each, nothing waits on posting: 3 x (1 us + 1 us + S/4 / B). */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(4, 1, plain, &cfg);
  const double S = 4.0 * 1048576, B = 12.5e9;
  double direct = alltoall_time(hw, "direct", S), pairwise = alltoall_time(hw, "pairwise", S);
  cr_assert_float_eq(direct, 4e-6 + 0.75 * S / B, 1e-12, "%.12g", direct);
  cr_assert_float_eq(pairwise, 3 * (2e-6 + 0.25 * S / B), 1e-12, "%.12g", pairwise);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, osu_bw_streams_a_window_of_messages)
{
  /* 2 nodes, 1 us route, 12.5 GB/s; an MPI with a 5 us call and 1 us per message. One message
   * of S costs 5 + 1 + 1 us + S / B. In a window of 64 those 7 us are paid once for the 64, and
   * each message costs its wire time, or the 1 us its sender takes to post it when the wire is
   * quicker: 8 B streams at 1 us + 7/64 us, 1 MiB at S / B + 7/64 us. NCCL (no runtime) posts
   * nothing from the host: 8 B costs its wire time and its share of the latency. */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 1, plain, &cfg);
  cfg_collectives c = {.runtime = "test", .progress = CFG_PROGRESS_CPU, .call_latency = 5e-6,
                       .step_latency = 1e-6, .leaders_per_node = 1};
  coll_runtime *rt = coll_runtime_new(&c, NULL, NULL);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  coll_planner_set_runtime(pl, rt);
  const double B = 12.5e9, S = 1048576;
  const coll_schedule *small = runtime_schedule(pl, PROG_COLL_SENDRECV, 2, 8);
  const coll_schedule *large = runtime_schedule(pl, PROG_COLL_SENDRECV, 2, S);
  cr_assert_float_eq(large->time, 7e-6 + S / B, 1e-15);
  cr_assert_float_eq(coll_schedule_streamed(small, rt, 64), 1e-6 + 7e-6 / 64, 1e-15);
  cr_assert_float_eq(coll_schedule_streamed(large, rt, 64), S / B + 7e-6 / 64, 1e-15);
  cr_assert_float_eq(coll_schedule_streamed(large, rt, 1), large->time, 0, "no window");
  coll_planner *nccl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  const coll_schedule *alone = runtime_schedule(nccl, PROG_COLL_SENDRECV, 2, 8);
  cr_assert_float_eq(coll_schedule_streamed(alone, NULL, 64), 8 / B + (alone->time - 8 / B) / 64,
                     1e-15);
  coll_planner_free(nccl);
  coll_planner_free(pl);
  coll_runtime_free(rt);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, size_rules_pick_the_algorithm_and_fall_back_when_it_cannot_run)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, NULL, &cfg);
  coll_runtime *rt = cpu_runtime(2, "rd < 16KiB, rhd < 1MiB, multi-leader", 1e-6, 0, 0);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  coll_planner_set_runtime(pl, rt);
  const int r8[] = {0, 1, 2, 3, 4, 5, 6, 7}, r6[] = {0, 1, 2, 4, 5, 6};
  const struct {
    const int *ranks;
    int n;
    double bytes;
    coll_algo want;
  } cases[] = {{r8, 8, 1024, COLL_ALGO_RD},
               {r8, 8, 65536, COLL_ALGO_RHD},
               {r8, 8, 1 << 24, COLL_ALGO_MULTI_LEADER},
               /* 6 ranks: no power of two, so rd and rhd hand over to the next rule */
               {r6, 6, 1024, COLL_ALGO_MULTI_LEADER}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    const coll_schedule *s = coll_planner_get(pl, PROG_COLL_ALLREDUCE, cases[i].ranks, cases[i].n,
                                              (int)cases[i].n, cases[i].bytes, NULL, NULL);
    cr_assert(s && s->plan);
    cr_assert_eq(s->plan->algo, cases[i].want, "case %zu: %s", i, coll_algo_name(s->plan->algo));
    cr_assert_eq(s->proto, CFG_PROTO_SIMPLE, "MPI has no LL protocols");
  }
  g_autofree char *why = coll_runtime_why(rt, PROG_COLL_ALLREDUCE, 65536, COLL_ALGO_RHD);
  cr_assert_str_eq(why, "test: 'rhd < 1MiB' of collectives.allreduce");
  coll_planner_free(pl);
  coll_runtime_free(rt);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, a_bad_size_rule_names_its_key_and_the_closest_algorithm)
{
  const char *const bad[][2] = {
      {"rd < 16KiB, rnig", "unknown algorithm 'rnig' (did you mean 'ring'?)"},
      {"rd, ring", "'rd' has no '< SIZE' but is not the last rule"},
      {"rd < lots, ring", "'rd < lots'"}};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    cfg_collectives c = {.progress = CFG_PROGRESS_CPU, .leaders_per_node = 1,
                         .allreduce = (char *)bad[i][0]};
    GError *err = NULL;
    cr_assert_null(coll_runtime_new(&c, NULL, &err));
    cr_assert(strstr(err->message, "collectives.allreduce") && strstr(err->message, bad[i][1]),
              "%s", err->message);
    g_error_free(err);
  }
}

Test(collectives, a_framework_cycle_delays_each_collective_by_half_a_cycle)
{
  /* Horovod launches fused all-reduces once per cycle: a 1 ms cycle adds 0.5 ms on average to
   * every collective, whatever the runtime (here a host-driven ring of 2 GPUs). */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 1, plain, &cfg);
  coll_runtime *plain_rt = cpu_runtime(1, "ring", 1e-6, 0, 0);
  cfg_collectives c = {.runtime = "cycled", .progress = CFG_PROGRESS_CPU, .step_latency = 1e-6,
                       .leaders_per_node = 1, .cycle_time = 1e-3, .allreduce = "ring"};
  coll_runtime *cycled = coll_runtime_new(&c, NULL, NULL);
  cr_assert(cycled);
  for (int e = 0; e < 2; e++) {
    eng_kind kind = e ? ENG_DES : ENG_ANALYTIC;
    double t0 = runtime_time(hw, plain_rt, kind, 2, 1 << 20);
    double t1 = runtime_time(hw, cycled, kind, 2, 1 << 20);
    cr_assert_float_eq(t1 - t0, 0.5e-3, 1e-12, "%s: %.12g", e ? "des" : "analytic", t1 - t0);
  }
  coll_runtime_free(plain_rt);
  coll_runtime_free(cycled);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* Gloo's ring through host memory, with cpu_runtime's step latency. */
static coll_runtime *gloo_ring(void)
{
  cfg_collectives gloo = {.runtime = "gloo", .progress = CFG_PROGRESS_CPU,
                          .transport = CFG_TRANSPORT_HOST_STAGED, .step_latency = 1e-6,
                          .leaders_per_node = 1, .allreduce = "ring"};
  return coll_runtime_new(&gloo, NULL, NULL);
}

/* What Gloo's staged ring costs over the same ring GPU-direct, on 8 ranks. */
static double host_staging_extra(hw_cluster *hw, double S)
{
  coll_runtime *direct = cpu_runtime(1, "ring", 1e-6, 0, 0);
  coll_runtime *staged = gloo_ring();
  double extra = runtime_time(hw, staged, ENG_ANALYTIC, 8, S) -
                 runtime_time(hw, direct, ENG_ANALYTIC, 8, S);
  coll_runtime_free(direct);
  coll_runtime_free(staged);
  return extra;
}

Test(collectives, nccl_under_mpi_adds_the_call_and_host_staging_adds_the_copies)
{
  /* UCC's NCCL team: NCCL's tuner and costs, plus the MPI call (8 us). Host staging (Gloo):
   * the buffer goes to host memory and back at storage.host_bandwidth (51.2 GB/s by default),
   * 2 x 64 MiB / 51.2 GB/s = 2.62144 ms more than the same runtime GPU-direct. */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, NULL, &cfg);
  const double S = 64.0 * 1048576;
  eng_options nccl = {.kind = ENG_ANALYTIC, .algo = COLL_ALGO_AUTO, .proto = COLL_PROTO_AUTO};
  eng_coll_result base;
  cr_assert(eng_collective_time(hw, &nccl, PROG_COLL_ALLREDUCE, 8, 8, S, &base, NULL));
  cfg_collectives ucc = {.runtime = "ucc-nccl", .progress = CFG_PROGRESS_CPU,
                         .ucc_tl = CFG_UCC_TL_NCCL, .call_latency = 8e-6, .leaders_per_node = 1,
                         .allreduce = "rd < 8KiB, rhd"};
  coll_runtime *rt = coll_runtime_new(&ucc, NULL, NULL);
  cr_assert(!coll_runtime_cpu(rt), "NCCL's kernels drive it");
  cr_assert_float_eq(runtime_time(hw, rt, ENG_ANALYTIC, 8, S), base.time + 8e-6, 1e-12);
  coll_runtime_free(rt);
  double extra = host_staging_extra(hw, S);
  cr_assert_float_eq(extra, 2 * S / 51.2e9, 1e-12, "%.12g", extra);
  coll_runtime *staged = gloo_ring();
  cr_assert_float_eq(runtime_time(hw, staged, ENG_DES, 8, S),
                     runtime_time(hw, staged, ENG_ANALYTIC, 8, S), 1e-9);
  coll_runtime_free(staged);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, host_staging_copies_and_reduces_on_one_core_per_process)
{
  /* One node of 4 GPUs (100 GB/s links, 2 us), a core that reads plus writes 20 GB/s (copies at
   * 10 GB/s), Gloo's ring of 16 MiB: the copies down and back go at the core's 10 GB/s, not
   * PCIe's 51.2 (2 S / 10 GB/s); the CPU sums 3/4 of the buffer reading two and writing one
   * (1.5 x 0.75 S / 10 GB/s); the ring's 6 steps of S/4 go through shared memory at the core's
   * rate (1.5 S / 10 GB/s, not 1.5 S / 100 GB/s), each waiting 2 us of link and 1 us of posting:
   *   18 us + (2 + 1.125 + 1.5) S / 10 GB/s. */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 4, plain, &cfg);
  cfg->node.cpu.core_bandwidth = 20e9;
  hw = rebuilt(hw, cfg);
  const double S = 16.0 * 1048576, expect = 18e-6 + 4.625 * S / 10e9;
  coll_runtime *staged = gloo_ring();
  for (int e = 0; e < 2; e++) {
    double t = runtime_time(hw, staged, e ? ENG_DES : ENG_ANALYTIC, 4, S);
    cr_assert_float_eq(t, expect, 1e-9, "%s: %.12g vs %.12g", e ? "des" : "analytic", t, expect);
  }
  coll_runtime_free(staged);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, host_staging_costs_nothing_on_cpu_devices)
{
  /* a CPU rank's buffer already is in host memory: Gloo's ring costs what it does GPU-direct */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, "set:gpu.kind=cpu", &cfg);
  const double S = 64.0 * 1048576;
  cr_assert_float_eq(host_staging_extra(hw, S), 0, 1e-12);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, sizes_above_a_bounded_last_rule_go_to_the_tuner)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, NULL, &cfg);
  coll_runtime *rt = cpu_runtime(1, "rd < 16KiB", 1e-6, 0, 0);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  coll_planner_set_runtime(pl, rt);
  const int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7};
  const coll_schedule *small = coll_planner_get(pl, PROG_COLL_ALLREDUCE, ranks, 8, 0, 1024, NULL,
                                                NULL);
  cr_assert_eq(small->plan->algo, COLL_ALGO_RD);
  /* above 16 KiB no rule holds: the fastest of the MPI's algorithms (a ring, rhd, rd or the
   * multi-leader design), whichever it is, and the report says there was no rule */
  const coll_schedule *large = coll_planner_get(pl, PROG_COLL_ALLREDUCE, ranks, 8, 0, 1 << 24,
                                                NULL, NULL);
  g_autofree char *why = coll_runtime_why(rt, PROG_COLL_ALLREDUCE, 1 << 24, large->plan->algo);
  cr_assert_str_eq(why, "test: the fastest by its costs (no rule for allreduce)");
  coll_planner_free(pl);
  coll_runtime_free(rt);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* A planner counts link loads for all the plans it builds in one array, which each plan must
 * leave as it found it: plans built one after the other by one planner, over groups that load
 * different links (inside a node, across leaves, across the spine, uneven), cost what each
 * costs built alone, phase by phase. */
Test(collectives, a_planners_plans_cost_what_each_costs_built_alone)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(8, 4, NULL, &cfg);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  const int node[] = {0, 1, 2, 3}, rail[] = {0, 4, 8, 12, 16, 20, 24, 28},
            spine[] = {1, 17}, uneven[] = {0, 1, 2, 5, 9, 30}, all2[] = {3, 7, 11, 15};
  const struct {
    const int *ranks;
    int n;
    prog_coll op;
  } groups[] = {{node, 4, PROG_COLL_ALLREDUCE},   {rail, 8, PROG_COLL_ALLREDUCE},
                {spine, 2, PROG_COLL_SENDRECV},   {uneven, 6, PROG_COLL_ALLGATHER},
                {rail, 8, PROG_COLL_REDUCESCATTER}, {all2, 4, PROG_COLL_ALLTOALL},
                {uneven, 6, PROG_COLL_ALLREDUCE}};
  for (int round = 0; round < 2; round++)
    for (size_t i = 0; i < G_N_ELEMENTS(groups); i++) {
      double bytes = round ? 1 << 26 : 4096;
      const coll_schedule *s = coll_planner_get(pl, groups[i].op, groups[i].ranks, groups[i].n,
                                                (int)(100 * round + i), bytes, NULL, NULL);
      cr_assert(s && s->plan, "group %zu", i);
      coll_plan *alone = coll_plan_new(hw, groups[i].op, groups[i].ranks, groups[i].n,
                                       s->plan->algo, NULL, true);
      coll_schedule t;
      coll_schedule_eval(alone, hw, s->proto, bytes, &t);
      cr_assert(t.time == s->time, "group %zu, %g bytes: %.17g s alone, %.17g s by the planner", i,
                bytes, t.time, s->time);
      cr_assert_eq(alone->nphases, s->plan->nphases);
      for (int k = 0; k < alone->nphases; k++)
        cr_assert(alone->phases[k].min_rate == s->plan->phases[k].min_rate &&
                      alone->phases[k].nkinds == s->plan->phases[k].nkinds,
                  "group %zu, phase %d", i, k);
      coll_schedule_clear(&t);
      coll_plan_free(alone);
    }
  coll_planner_free(pl);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* Kinds alike field by field: a coll_kind's padding after its class holds whatever the stack
 * held where it was made, which memcmp would compare too. */
static bool same_kinds(const coll_kind *a, const coll_kind *b, int n)
{
  for (int i = 0; i < n; i++)
    if (a[i].alpha != b[i].alpha || a[i].frac != b[i].frac || a[i].rate != b[i].rate ||
        a[i].cls != b[i].cls)
      return false;
  return true;
}

/* Two plans alike field by field: transfers, routes' costs and the member index. */
static void assert_same_plan(const coll_plan *a, const coll_plan *b, const char *what)
{
  cr_assert(a->op == b->op && a->algo == b->algo && a->n == b->n && a->nmembers == b->nmembers &&
                a->channels == b->channels && a->nnodes == b->nnodes &&
                a->nphases == b->nphases && a->absolute == b->absolute &&
                memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->n) == 0 &&
                memcmp(a->members, b->members, sizeof(int) * (size_t)a->nmembers) == 0,
            "%s: plan", what);
  for (int m = 0; m < a->nmembers; m++)
    cr_assert_eq(coll_member(a, a->members[m]), coll_member(b, b->members[m]), "%s", what);
  for (int i = 0; i < a->nphases; i++) {
    const coll_phase *x = &a->phases[i], *y = &b->phases[i];
    cr_assert(x->steps == y->steps && x->pipelined == y->pipelined && x->nxfers == y->nxfers &&
                  x->nkinds == y->nkinds && x->max_alpha == y->max_alpha &&
                  x->min_rate == y->min_rate && x->max_frac == y->max_frac &&
                  x->max_sends == y->max_sends && x->sent == y->sent && x->own == y->own &&
                  memcmp(x->stages, y->stages, sizeof x->stages) == 0 &&
                  memcmp(x->class_alpha, y->class_alpha, sizeof x->class_alpha) == 0 &&
                  memcmp(x->xfers, y->xfers, sizeof(coll_xfer) * (size_t)x->nxfers) == 0 &&
                  same_kinds(x->kinds, y->kinds, x->nkinds) &&
                  memcmp(x->member_off, y->member_off,
                         sizeof(int) * (size_t)(a->nmembers + 1)) == 0 &&
                  memcmp(x->member_idx, y->member_idx,
                         sizeof(int) * (size_t)x->member_off[a->nmembers]) == 0,
              "%s: phase %d", what, i);
  }
}

/* The planner plans a group once per shape and moves the plans onto groups whole nodes apart:
 * each moved plan must be the one planned afresh for its group (its own routes: a pair inside a
 * leaf and one across the spine, a rail-optimized fabric), and the schedule the tuner picks from
 * them the fresh planner's, bit for bit. */
Test(collectives, a_group_planned_like_one_whole_nodes_apart_gets_its_own_plan)
{
  cfg_cluster *cfg[2] = {NULL, NULL};
  hw_cluster *hw[2];
  hw[0] = make_cluster(12, 4, "set:node.nics_per_node=2;node.intra.nvls=true", &cfg[0]);
  const char *h100[] = {"node.count=12", NULL};
  cr_assert(th_load("dgx-h100", NULL, h100, &cfg[1], NULL));
  hw[1] = hw_cluster_new(cfg[1]);
  const struct {
    prog_coll op;
    int n, stride_node, stride_gpu, first_gpu; /* member k: node j + k / per, GPU ... */
    int per; /* members per node */
  } shapes[] = {
      {PROG_COLL_ALLREDUCE, 4, 0, 1, 0, 4},    /* a node's GPUs (tensor parallel) */
      {PROG_COLL_ALLGATHER, 4, 0, 1, 0, 4},
      {PROG_COLL_REDUCESCATTER, 2, 0, 2, 1, 2},
      {PROG_COLL_SENDRECV, 2, 1, 0, 0, 1},     /* pipeline neighbours */
      {PROG_COLL_ALLREDUCE, 2, 1, 0, 1, 1},    /* tied embeddings */
      {PROG_COLL_ALLREDUCE, 4, 2, 0, 1, 1},    /* data parallel: one GPU every other node */
      {PROG_COLL_ALLGATHER, 6, 1, 1, 0, 2},    /* two GPUs on each of three nodes */
      {PROG_COLL_ALLTOALL, 4, 1, 1, 0, 2},
  };
  for (int c = 0; c < 2; c++) {
    int gpn = hw_gpus_per_node(hw[c]), nodes = hw_gpus(hw[c]) / gpn;
    coll_planner *pl = coll_planner_new(hw[c], COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
    coll_planner_key_by_ranks(pl);
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++)
      for (int j = 0; j < nodes; j++) {
        int ranks[8], n = shapes[s].n, per = shapes[s].per;
        int span = (n / per - 1) * MAX(shapes[s].stride_node, 1);
        if (j + span >= nodes)
          break;
        for (int k = 0; k < n; k++)
          ranks[k] = (j + (k / per) * MAX(shapes[s].stride_node, 1)) * gpn + shapes[s].first_gpu +
                     (k % per) * shapes[s].stride_gpu;
        GError *err = NULL;
        const coll_schedule *got = coll_planner_get(pl, shapes[s].op, ranks, n, 0, 1 << 24, NULL,
                                                    &err);
        cr_assert(got, "%s", err ? err->message : "");
        coll_planner *fresh = coll_planner_new(hw[c], COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
        const coll_schedule *want = coll_planner_get(fresh, shapes[s].op, ranks, n, 0, 1 << 24,
                                                     NULL, &err);
        g_autofree char *what = g_strdup_printf("cluster %d, shape %zu on node %d", c, s, j);
        cr_assert(want && got->time == want->time && got->proto == want->proto, "%s: %g vs %g",
                  what, got->time, want ? want->time : -1);
        assert_same_plan(got->plan, want->plan, what);
        coll_planner_free(fresh);
      }
    coll_planner_free(pl);
    hw_cluster_free(hw[c]);
    cfg_cluster_free(cfg[c]);
  }
}

/* SHARP on nodes without NVLink SHARP runs as NCCL's CollNet Direct: scatter to the heads and
 * gather back, one NVLink hop each way, NCCL's CollNet latency and chunk, and NCCL's tuner's
 * GPU / NIC factor when a node has fewer NICs than GPUs. 2 nodes x 4 GPUs, 12.5 GB/s NICs. */
#define FULL_RATE "nccl.link_efficiency.network=1;nccl.link_efficiency.intra=1"

static double collnet_time(hw_cluster *hw, eng_kind kind, double bytes)
{
  return run_engine(hw, kind, PROG_COLL_ALLREDUCE, 8, 8, bytes, COLL_ALGO_SHARP, CFG_PROTO_SIMPLE,
                    false);
}

Test(collectives, collnet_direct_des_equals_analytic)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, "set:network.sharp=true;node.nics_per_node=2", &cfg);
  const double sizes[] = {8, 1e6, 96e6};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    double a = collnet_time(hw, ENG_ANALYTIC, sizes[i]);
    double d = collnet_time(hw, ENG_DES, sizes[i]);
    cr_assert_float_eq(d, a, a * 1e-9, "%g B: des %.12g analytic %.12g", sizes[i], d, a);
  }
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, collnet_direct_latency_is_nccls_model)
{
  /* NCCL's tuning model: 2 (3.7 us + 3 x 0.4 us) + 31 us = 40.8 us on 4 GPUs a node, whatever
   * the per-step latencies (set absurdly high here); beyond it only the wires' own latency
   * (2 us NVLink hops, 1 us switch hops) and 8 bytes' transfers */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4,
                                "set:network.sharp=true;nccl.hop_latency.network.simple=1ms;"
                                "nccl.hop_latency.intra.simple=1ms;nccl.base_latency.simple=1ms",
                                &cfg);
  double t = collnet_time(hw, ENG_ANALYTIC, 8);
  cr_assert(t > 40.8e-6 && t < 40.8e-6 + 10e-6, "%.9g s", t);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, collnet_direct_fills_nccls_chunk)
{
  /* one NIC per GPU: no GPU / NIC factor; the NICs bound it (each carries S/4 each way at
   * 12.5 GB/s: S / 50 GB/s) and the pipeline fills for 3 stages of NCCL's CollNet chunk at the
   * NIC's rate. 4 channels x 4 heads: 16 MiB takes 64 KiB chunks (16 MiB / (16 x 64 KiB) = 16),
   * 1 GiB keeps a 512 KiB step (128 per head and channel); the latencies cancel */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, "set:network.sharp=true;node.nics_per_node=4;" FULL_RATE, &cfg);
  double small = 16 * 1048576.0, large = 1073741824.0;
  double diff = collnet_time(hw, ENG_ANALYTIC, large) - collnet_time(hw, ENG_ANALYTIC, small);
  double expect = (large - small) / 50e9 + 3 * (512 * 1024 - 64 * 1024) / 12.5e9;
  cr_assert_float_eq(diff, expect, expect * 1e-3, "%.9g vs %.9g", diff, expect);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, collnet_direct_pays_nccls_gpu_per_nic_factor)
{
  /* 4 GPUs on 2 NICs: NCCL's tuner divides the NICs' rate by 2 - (2 - 1)/2 = 1.5, so past the
   * latency the time grows at 1.5 / (2 x 12.5 GB/s) a byte, where the NICs alone allow 1 / 25 */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(2, 4, "set:network.sharp=true;node.nics_per_node=2;" FULL_RATE, &cfg);
  double diff = collnet_time(hw, ENG_ANALYTIC, 1073741824.0) -
                collnet_time(hw, ENG_ANALYTIC, 536870912.0);
  double expect = 536870912.0 * 1.5 / 25e9;
  cr_assert_float_eq(diff, expect, expect * 1e-6, "%.9g vs %.9g", diff, expect);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* `op` on 4 GPUs of one node under a kernel runtime with or without reduce_pass. */
static double reduce_pass_time(hw_cluster *hw, prog_coll op, eng_kind kind, bool pass, double S)
{
  cfg_collectives c = {.runtime = "xla", .progress = CFG_PROGRESS_KERNEL,
                       .transport = CFG_TRANSPORT_GPU_DIRECT, .call_latency = 0,
                       .leaders_per_node = 1, .reduce_pass = pass};
  coll_runtime *rt = coll_runtime_new(&c, NULL, NULL);
  eng_options o = {.kind = kind, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE, .runtime = rt};
  eng_coll_result r;
  cr_assert(eng_collective_time(hw, &o, op, 4, 4, S, &r, NULL));
  coll_runtime_free(rt);
  return r.time;
}

Test(collectives, reduce_pass_costs_one_chunk_read_twice_and_written_once)
{
  /* HBM 2 TB/s at efficiency.memory 0.8, 4 GPUs, S = 64 MiB: a reduction's pass over its
   * chunk S/4 reads two and writes one, 3 x 16 MiB / 1.6 TB/s = 31.45728 us more, in both
   * engines, for all-reduce and reduce-scatter; an all-gather reduces nothing. */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 4, NULL, &cfg);
  cfg->gpu.efficiency.memory_efficiency = 0.8;
  hw = rebuilt(hw, cfg);
  const double S = 64.0 * 1048576, pass = 3 * 16.0 * 1048576 / 1.6e12;
  const prog_coll ops[] = {PROG_COLL_ALLREDUCE, PROG_COLL_REDUCESCATTER, PROG_COLL_ALLGATHER};
  for (size_t i = 0; i < G_N_ELEMENTS(ops); i++)
    for (int e = 0; e < 2; e++) {
      eng_kind kind = e ? ENG_DES : ENG_ANALYTIC;
      double extra = reduce_pass_time(hw, ops[i], kind, true, S) -
                     reduce_pass_time(hw, ops[i], kind, false, S);
      double expect = ops[i] == PROG_COLL_ALLGATHER ? 0 : pass;
      cr_assert_float_eq(extra, expect, 1e-10, "op %d %s: %.12g vs %.12g", (int)ops[i],
                         e ? "des" : "analytic", extra, expect);
    }
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, nccl_alltoall_takes_ll_up_to_16_kib_a_peer_then_simple_never_ll128)
{
  /* NCCL's grouped send/recv pick LL for a peer's message up to NCCL_P2P_LL_THRESHOLD
   * (16384 B) and Simple above it, whatever its tuner would say (src/enqueue.cc): over 8 GPUs
   * a buffer of 8 x 16384 B goes as LL, 8 B more as Simple, and 16 MiB as Simple. */
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_cluster(1, 8, NULL, &cfg);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  cr_assert_eq(runtime_schedule(pl, PROG_COLL_ALLTOALL, 8, 8 * 16384.0)->proto, CFG_PROTO_LL);
  cr_assert_eq(runtime_schedule(pl, PROG_COLL_ALLTOALL, 8, 8 * 16385.0)->proto, CFG_PROTO_SIMPLE);
  cr_assert_eq(runtime_schedule(pl, PROG_COLL_ALLTOALL, 8, 16777216.0)->proto, CFG_PROTO_SIMPLE);
  cr_assert_eq(runtime_schedule(pl, PROG_COLL_SENDRECV, 2, 4096.0)->proto, CFG_PROTO_LL);
  coll_planner_free(pl);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* One node of 8 at 100 GB/s with no latency and no efficiency below 1: an all-to-all's 7
 * transfers from a GPU share its link, T = 7/8 S / 100 GB/s. */
static hw_cluster *make_bare_p2p_node(cfg_cluster **cfg)
{
  return make_cluster(1, 8, "set:node.intra.latency=0;nccl.link_efficiency.intra=1;"
                            "nccl.p2p_efficiency=1;nccl.base_latency.simple=0;"
                            "nccl.hop_latency.intra.simple=0", cfg);
}

Test(collectives, nccl_p2p_channels_follow_enqueue_rule)
{
  /* 32 p2p channels: nChannelsMin = 32 / 8 = 4 over 8 ranks, 16 over 2; a message takes
   * min(nChannelsMin, bytes / 64 KiB), doubled while a part is over 16 MiB, at most 32 */
  cr_assert_eq(coll_p2p_channels(8, 100 * 1024.0), 2);
  cr_assert_eq(coll_p2p_channels(8, 8 * 1048576.0), 4);
  cr_assert_eq(coll_p2p_channels(8, 128 * 1048576.0), 8);
  cr_assert_eq(coll_p2p_channels(2, 64 * 1048576.0), 16);
  cr_assert_eq(coll_p2p_channels(2, 1073741824.0), 32);
  cr_assert_eq(coll_p2p_channels(2, 4294967296.0), 32);
}

Test(collectives, nccl_alltoall_waits_for_one_chunk_a_channel_in_both_engines)
{
  /* per peer S/8 on 4 channels (8 on 128 MiB): the first 512 KiB chunk of each channel is
   * copied out after it is copied in. 8 MiB: 1 MiB a peer, less than 4 chunks: 2 T.
   * 64 MiB: 8 MiB a peer, 2 MiB first: 1.25 T. 1 GiB: 128 MiB a peer on 8 channels, 4 MiB
   * first: T (1 + 1/32). */
  const struct {
    double mib, times_t;
  } cases[] = {{8, 2.0}, {64, 1.25}, {1024, 1.03125}};
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_bare_p2p_node(&cfg);
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    double S = cases[i].mib * 1048576, T = floor(S / 8) / (100e9 / 7);
    for (int e = 0; e < 2; e++) {
      double t = run_engine(hw, e ? ENG_DES : ENG_ANALYTIC, PROG_COLL_ALLTOALL, 8, 8, S,
                            COLL_ALGO_AUTO, COLL_PROTO_AUTO, false);
      cr_assert_float_eq(t, cases[i].times_t * T, T * 1e-6, "%g MiB %s: %.9g s, T = %.9g s",
                         cases[i].mib, e ? "des" : "analytic", t, T);
    }
  }
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(collectives, no_p2p_chunk_wait_for_ll_deepep_or_an_mpi)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = make_bare_p2p_node(&cfg);
  double S = 8 * 1048576, T = floor(S / 8) / (100e9 / 7);
  /* DeepEP's dispatch and combine are its own kernels, not NCCL's FIFO */
  cfg_collectives deepep = {.runtime = "nccl", .a2a = CFG_A2A_DEEPEP};
  coll_runtime *rt = coll_runtime_new(&deepep, NULL, NULL);
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  coll_planner_set_runtime(pl, rt);
  double t = runtime_schedule(pl, PROG_COLL_ALLTOALL, 8, S)->time;
  cr_assert_float_eq(t, T, T * 1e-9, "deepep: %.9g s, T = %.9g s", t, T);
  /* an MPI sends plain messages */
  coll_runtime *mpi = cpu_runtime(1, NULL, 0, 0, 0);
  coll_planner_set_runtime(pl, mpi);
  t = runtime_schedule(pl, PROG_COLL_ALLTOALL, 8, S)->time;
  cr_assert_float_eq(t, T, T * 1e-9, "mpi: %.9g s, T = %.9g s", t, T);
  coll_planner_free(pl);
  coll_runtime_free(rt);
  coll_runtime_free(mpi);
  /* LL (16 KiB a peer) moves flags with its data: nothing to wait for */
  pl = coll_planner_new(hw, COLL_ALGO_AUTO, COLL_PROTO_AUTO, true);
  const coll_schedule *s = runtime_schedule(pl, PROG_COLL_ALLTOALL, 8, 8 * 16384.0);
  cr_assert_eq(s->proto, CFG_PROTO_LL);
  cr_assert_float_eq(s->post[0], 0.0, 1e-15);
  coll_planner_free(pl);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}
