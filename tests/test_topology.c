/* Topologies as built: rail-optimized leaves (rail+spine and rail-only), oversubscribed spines
 * and NVLink domains larger than a node, against routes and times derived by hand. */
#include "collectives/collectives.h"
#include "engine/engine.h"
#include "hardware/hardware.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/dynar.h>
#include <xbt/log.h>

/* 2 nodes of 4 GPUs and 4 NICs of 12.5 GB/s, both below one leaf group, a spine over it with
 * `over`:1 oversubscription; `net` adds network keys (topology, rails); NCCL a pure alpha-beta
 * model (no protocol costs, full link rates), with PXN or not. */
static hw_cluster *rail_cluster_leaf(const char *net, double over, bool pxn, int leaf,
                                     cfg_cluster **cfg)
{
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
      "node: {count: 2, gpus_per_node: 4, nics_per_node: 4,\n"
      "       intra: {bandwidth: 100GB/s, latency: 2us}}\n"
      "network: {%s nic_bandwidth: 100Gb/s,\n"
      "          tiers: [{name: leaf, latency: 1us, nodes_per_switch: %d},\n"
      "                  {name: spine, latency: 1us, oversubscription: %g}]}\n"
      "nccl: {link_efficiency: {intra: 1, network: 1}, base_latency: {ll: 0, ll128: 0, simple: 0},\n"
      "  hop_latency: {intra: {ll: 0, ll128: 0, simple: 0}, network: {ll: 0, ll128: 0, simple: 0}},\n"
      "  protocol_efficiency: {ll: 1, ll128: 1, simple: 1}, chunk: {ll: 0, ll128: 0, simple: 0},\n"
      "  pxn: %s}\n",
      net, leaf, over, pxn ? "true" : "false");
  g_autofree char *path = th_write("rail.yaml", text);
  cr_assert(th_load(path, NULL, NULL, cfg, NULL));
  return hw_cluster_new(*cfg);
}

static hw_cluster *rail_cluster_pxn(const char *net, double over, bool pxn, cfg_cluster **cfg)
{
  return rail_cluster_leaf(net, over, pxn, 2, cfg);
}

/* The fabric's own paths: NCCL's PXN off. */
static hw_cluster *rail_cluster(const char *net, double over, cfg_cluster **cfg)
{
  return rail_cluster_pxn(net, over, false, cfg);
}

/* The highest link tier a route uses (-1 NVLink, 0 NIC and leaf, 1 leaf to spine). */
static int top_link_tier(const hw_cluster *hw, const hw_route *r)
{
  int top = -1;
  for (int i = 0; i < r->nhops; i++)
    top = MAX(top, hw_link_get(hw, HW_HOP_LINK(r->hops[i]))->tier);
  return top;
}

Test(topology, same_rail_traffic_stays_below_the_spine)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = rail_cluster("topology: rail-optimized,", 1, &cfg);
  hw_route r;
  hw_route_get(hw, 1, 5, &r); /* GPU 1 of both nodes: rail 1 */
  cr_assert_eq(r.tier, 1, "same rail turns at the leaf: tier %d", r.tier);
  cr_assert_eq(r.nhops, 4, "NIC, leaf, leaf, NIC: %d hops", r.nhops);
  cr_assert_eq(top_link_tier(hw, &r), 0);
  cr_assert_float_eq(r.latency, 1e-6, 1e-15); /* one leaf switch */
  hw_route_get(hw, 1, 6, &r); /* rail 1 to rail 2 */
  cr_assert_eq(r.tier, 2, "another rail is reached through the spine: tier %d", r.tier);
  cr_assert_eq(top_link_tier(hw, &r), 1);
  cr_assert_float_eq(r.latency, 3e-6, 1e-15); /* leaf, spine, leaf */
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(topology, a_fat_tree_leaf_joins_every_nic)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = rail_cluster("topology: fat-tree,", 1, &cfg);
  hw_route r;
  hw_route_get(hw, 1, 6, &r);
  cr_assert_eq(r.tier, 1, "one leaf switch over both nodes: tier %d", r.tier);
  cr_assert_eq(top_link_tier(hw, &r), 0);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* Rail-only has no spine between rails; NCCL's PXN does not use it either. */
Test(topology, rail_only_and_pxn_change_rail_over_nvlink_first)
{
  const char *nets[] = {"topology: rail-optimized, rails: only,", "topology: rail-optimized,"};
  for (int i = 0; i < 2; i++) {
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = rail_cluster_pxn(nets[i], 1, i == 1, &cfg);
    hw_route r;
    hw_route_get(hw, 1, 6, &r);
    /* GPU 1 -> NVSwitch -> GPU 2 of the same node, then rail 2: NIC, leaf, leaf, NIC */
    cr_assert_eq(r.tier, 1, "%s: no spine between rails: tier %d", nets[i], r.tier);
    cr_assert_eq(r.nhops, 6);
    cr_assert_eq(hw_link_get(hw, HW_HOP_LINK(r.hops[0]))->tier, -1);
    cr_assert_eq(hw_link_get(hw, HW_HOP_LINK(r.hops[1]))->tier, -1);
    cr_assert_eq(top_link_tier(hw, &r), 0);
    cr_assert_float_eq(r.latency, 2e-6 + 1e-6, 1e-15); /* NVLink, then one leaf */
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

Test(topology, rails_meeting_at_a_missing_spine_is_an_error)
{
  const char *text = "name: t\n"
                     "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
                     "node: {count: 2, gpus_per_node: 4, intra: {bandwidth: 100GB/s}}\n"
                     "network: {topology: rail-optimized, nic_bandwidth: 100Gb/s}\n"
                     "nccl: {pxn: false}\n";
  g_autofree char *path = th_write("onetier.yaml", text);
  g_autofree char *msg = th_load_error(path, NULL, NULL);
  cr_assert(msg && strstr(msg, "network.rails"), "%s", msg ? msg : "(loaded)");
  /* with PXN (NCCL's default) no traffic changes rail in the network: one tier will do */
  const char *const pxn[] = {"nccl.pxn=true", NULL};
  g_autofree char *none = th_load_error(path, NULL, pxn);
  cr_assert_null(none, "%s", none);
}

/* A 2-GPU all-gather of 1 GB: each GPU sends 0.5 GB to the other, alone on its route. */
static double pair_allgather(const hw_cluster *hw, int a, int b)
{
  coll_planner *pl = coll_planner_new(hw, COLL_ALGO_RING, CFG_PROTO_SIMPLE, true);
  int pair[2] = {a, b};
  const coll_schedule *s = coll_planner_get(pl, PROG_COLL_ALLGATHER, pair, 2, 1, 1e9, NULL, NULL);
  cr_assert(s);
  double t = s->time;
  coll_planner_free(pl);
  return t;
}

Test(topology, an_oversubscribed_spine_slows_cross_rail_traffic_only)
{
  cfg_cluster *c1 = NULL, *c8 = NULL;
  hw_cluster *full = rail_cluster("topology: rail-optimized,", 1, &c1);
  hw_cluster *over = rail_cluster("topology: rail-optimized,", 8, &c8);
  /* same rail: 0.5 GB over a 12.5 GB/s NIC behind one leaf switch, whatever the spine */
  double same = 1e-6 + 0.5e9 / 12.5e9;
  cr_assert_float_eq(pair_allgather(full, 1, 5), same, same * 1e-9);
  cr_assert_float_eq(pair_allgather(over, 1, 5), same, same * 1e-9);
  /* across rails at 1:1 the rail switch's uplink carries its 2 NICs' 25 GB/s: the NIC bounds */
  double cross1 = 3e-6 + 0.5e9 / 12.5e9;
  cr_assert_float_eq(pair_allgather(full, 1, 6), cross1, cross1 * 1e-9);
  /* at 8:1 it carries 25 / 8 = 3.125 GB/s: 4 times slower than the NIC */
  double cross8 = 3e-6 + 0.5e9 / 3.125e9;
  cr_assert_float_eq(pair_allgather(over, 1, 6), cross8, cross8 * 1e-9);
  /* with NCCL's PXN the spine is not used: NVLink (2 us, 100 GB/s), then the NIC */
  cfg_cluster *cp = NULL;
  hw_cluster *pxn = rail_cluster_pxn("topology: rail-optimized,", 8, true, &cp);
  cr_assert_float_eq(pair_allgather(pxn, 1, 6), cross1, cross1 * 1e-9);
  hw_cluster_free(pxn);
  cfg_cluster_free(cp);
  hw_cluster_free(full);
  hw_cluster_free(over);
  cfg_cluster_free(c1);
  cfg_cluster_free(c8);
}

static double engine_time(hw_cluster *hw, eng_kind kind, prog_coll op, int gpus, double bytes)
{
  eng_options o = {.kind = kind, .algo = COLL_ALGO_RING, .proto = CFG_PROTO_SIMPLE};
  eng_coll_result r;
  GError *err = NULL;
  cr_assert(eng_collective_time(hw, &o, op, gpus, gpus, bytes, &r, &err), "engine failed: %s",
            err ? err->message : "");
  return r.time;
}

Test(topology, the_des_routes_a_rail_fabric_as_the_closed_form_does)
{
  const char *nets[] = {"topology: rail-optimized,", "topology: rail-optimized, rails: only,",
                        "topology: rail-optimized,"};
  /* one leaf group over both nodes, then a leaf group per node (routes through the spine zone) */
  for (int leaf = 2; leaf >= 1; leaf--)
    for (size_t i = 0; i < G_N_ELEMENTS(nets); i++) {
      cfg_cluster *cfg = NULL;
      hw_cluster *hw = rail_cluster_leaf(nets[i], 8, i == 2, leaf, &cfg);
      double a = engine_time(hw, ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 8, 1 << 28);
      double d = engine_time(hw, ENG_DES, PROG_COLL_ALLREDUCE, 8, 1 << 28);
      cr_assert(fabs(d / a - 1) < 1e-6, "%s leaf %d: des %.9g analytic %.9g", nets[i], leaf, d,
                a);
      hw_cluster_free(hw);
      cfg_cluster_free(cfg);
    }
}

/* gb200-nvl72 with the alpha-beta NCCL parameters: only the datasheet links remain. */
static hw_cluster *nvl72(cfg_cluster **cfg)
{
  const char *const sets[] = {"nccl.link_efficiency.intra=1",
                              "nccl.base_latency.simple=0",
                              "nccl.hop_latency.intra.simple=0",
                              "nccl.protocol_efficiency.simple=1",
                              "nccl.chunk.simple=0",
                              NULL};
  cr_assert(th_load("gb200-nvl72", NULL, sets, cfg, NULL));
  return hw_cluster_new(*cfg);
}

Test(topology, nvl72_keeps_a_tp16_group_on_nvlink)
{
  cfg_cluster *cfg = NULL;
  hw_cluster *hw = nvl72(&cfg);
  cr_assert_eq(hw_gpus(hw), 72);
  int tp[16];
  for (int i = 0; i < 16; i++)
    tp[i] = i; /* four 4-GPU trays */
  cr_assert_eq(hw_group_tier(hw, tp, 16), 0, "a TP 16 group crosses no network tier");
  hw_route r;
  hw_route_get(hw, 0, 71, &r); /* first and last tray of the rack */
  cr_assert_eq(r.tier, 0);
  cr_assert_eq(r.nhops, 2);
  cr_assert_float_eq(r.bandwidth, 900e9, 1); /* NVLink 5: 900 GB/s each way */
  /* ring all-reduce of 1 GiB over 16 GPUs: 30 steps of S/16 at 900 GB/s, 1 us each (the GPU
   * to NVSwitch to GPU latency) */
  double S = 1 << 30;
  double want = 30 * 1e-6 + floor(30 * S / 16) / 900e9;
  for (int k = 0; k < 2; k++) {
    double t = engine_time(hw, k ? ENG_DES : ENG_ANALYTIC, PROG_COLL_ALLREDUCE, 16, S);
    cr_assert_float_eq(t, want, want * 1e-9, "%s: %.12g vs %.12g", k ? "des" : "analytic", t,
                       want);
  }
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(topology, two_nvl72_racks_meet_over_the_network)
{
  const char *const sets[] = {"node.count=36", NULL};
  cfg_cluster *cfg = NULL;
  cr_assert(th_load("gb200-nvl72", NULL, sets, &cfg, NULL));
  hw_cluster *hw = hw_cluster_new(cfg);
  hw_route r;
  hw_route_get(hw, 71, 72, &r);
  cr_assert_eq(r.tier, 2, "a leaf switch per rack, racks meet at the spine: tier %d", r.tier);
  cr_assert_float_eq(r.bandwidth, 50e9 * cfg->nccl.link_efficiency[CFG_LINK_NETWORK], 1);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* A partly filled rack: 5 trays are one NVLink domain of 20 GPUs. */
Test(topology, a_partial_rack_is_one_smaller_domain)
{
  const char *const sets[] = {"node.count=5", NULL};
  cfg_cluster *cfg = NULL;
  cr_assert(th_load("gb200-nvl72", NULL, sets, &cfg, NULL));
  hw_cluster *hw = hw_cluster_new(cfg);
  cr_assert_eq(hw_gpus(hw), 20);
  cr_assert_eq(hw_nodes(hw), 1);
  hw_route r;
  hw_route_get(hw, 0, 19, &r);
  cr_assert_eq(r.tier, 0);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

/* A rack and 2 trays: the second domain's 8 NICs share its 16:1 port, not a full rack's 72. */
Test(topology, a_partial_domain_has_only_its_trays_nics)
{
  const char *const sets[] = {"node.count=20", "network.tiers[0].oversubscription=16", NULL};
  cfg_cluster *cfg = NULL;
  cr_assert(th_load("gb200-nvl72", NULL, sets, &cfg, NULL));
  hw_cluster *hw = hw_cluster_new(cfg);
  hw_route r;
  hw_route_get(hw, 72, 0, &r);
  double eff = cfg->nccl.link_efficiency[CFG_LINK_NETWORK];
  cr_assert_float_eq(r.bandwidth, 8 * 50e9 * eff / 16, 1, "%g", r.bandwidth);
  hw_cluster_free(hw);
  cfg_cluster_free(cfg);
}

Test(topology, an_nvlink_domain_is_whole_nodes)
{
  const char *const bad[][2] = {
      {"node.nvlink_domain=6", "multiple of node.gpus_per_node"},
      {"network.tiers[0].nodes_per_switch=9", "splits an NVLink domain"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    const char *const sets[] = {bad[i][0], NULL};
    g_autofree char *msg = th_load_error("gb200-nvl72", NULL, sets);
    cr_assert(msg && strstr(msg, bad[i][1]), "%s: %s", bad[i][0], msg ? msg : "(loaded)");
  }
}

/* The highest tier any group of dimension `d` reaches. */
static int dim_tier(const prog_program *p, const hw_cluster *hw, prog_dim d)
{
  int top = -1;
  for (guint f = 0; f < p->families->len; f++) {
    const prog_family *fam = g_ptr_array_index(p->families, f);
    for (int r = 0; r < p->nranks && fam->dim == d; r++)
      if (fam->group_of[r] >= 0) {
        const prog_group *g = g_ptr_array_index(p->groups, fam->group_of[r]);
        top = MAX(top, hw_group_tier(hw, g->ranks, g->n));
      }
  }
  return top;
}

/* Ranks fill the rack in order, TP innermost: every TP 16 group of 64 GPUs (16 trays, one
 * domain) is on NVLink, and data parallelism across them too. */
Test(topology, tp16_placement_on_an_nvl72_rack_stays_on_nvlink)
{
  const char *const sets[] = {"node.count=16", "parallel.tp=16", "parallel.dp=4",
                              "training.global_batch=16", NULL};
  cfg_cluster *cfg = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("gb200-nvl72", "megatron-22b", sets, &cfg, &w));
  prog_program *p = th_program("gb200-nvl72", "megatron-22b", sets);
  cr_assert(p);
  hw_cluster *hw = hw_cluster_new(cfg);
  cr_assert_eq(dim_tier(p, hw, PROG_DIM_TP), 0);
  cr_assert_eq(dim_tier(p, hw, PROG_DIM_DP), 0);
  hw_cluster_free(hw);
  prog_free(p);
  cfg_workload_free(w);
  cfg_cluster_free(cfg);
}

static int th_strcmp_ptr(const char **a, const char **b)
{
  return strcmp(*a, *b);
}

/* A set of link names in one string, sorted (a flow shares links whatever their order). */
static char *sorted_names(GPtrArray *names)
{
  g_ptr_array_sort(names, (GCompareFunc)th_strcmp_ptr);
  g_ptr_array_add(names, NULL);
  char *s = g_strjoinv(" ", (char **)names->pdata);
  g_ptr_array_free(names, TRUE);
  return s;
}

/* The links of a table route as SimGrid names them (split-duplex links get _UP / _DOWN). */
static char *table_route_names(const hw_cluster *hw, int a, int b, bool with_free)
{
  hw_route r;
  hw_route_get(hw, a, b, &r);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; i < r.nhops; i++) {
    int link = HW_HOP_LINK(r.hops[i]);
    if (hw_link_get(hw, link)->policy == HW_LINK_FATPIPE && !with_free)
      continue;
    if (hw_link_get(hw, link)->policy == HW_LINK_FATPIPE)
      g_ptr_array_add(names, g_strdup_printf("l%d", link));
    else
      g_ptr_array_add(names, g_strdup_printf("l%d_%s", link, r.hops[i] % 2 ? "DOWN" : "UP"));
  }
  return sorted_names(names);
}

/* Whether SimGrid's link `name` is one the table's never binds (FATPIPE), as split-duplex
 * halves or a rail graph's per-NIC port (hw_split_free_links). */
static bool is_split_free_link(const hw_cluster *hw, const char *name)
{
  int link;
  if (strncmp(name, "lport", 5) == 0)
    return true;
  return sscanf(name, "l%d_", &link) == 1 && strchr(name, '_') &&
         hw_link_get(hw, link)->policy == HW_LINK_FATPIPE;
}

/* The links SimGrid routes from a to b over, without the search's pads (nor, with_free false,
 * the links that never bind). */
static char *simgrid_route_names(const hw_cluster *hw, int a, int b, bool with_free)
{
  char an[32], bn[32];
  hw_endpoint_name(hw, a, an, sizeof an);
  hw_endpoint_name(hw, b, bn, sizeof bn);
  xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(sg_host_by_name(an), sg_host_by_name(bn), links);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  unsigned i;
  sg_link_t l;
  xbt_dynar_foreach (links, i, l)
    if (strncmp(sg_link_get_name(l), "lpad-", 5) != 0 &&
        (with_free || !is_split_free_link(hw, sg_link_get_name(l))))
      g_ptr_array_add(names, g_strdup(sg_link_get_name(l)));
  xbt_dynar_free(&links);
  return sorted_names(names);
}

/* SimGrid with the platform at xml_path, sealed (with no actors, running seals it: the searched
 * zones number their nodes). */
static void load_platform(const char *xml_path)
{
  int argc = 1;
  char prog[] = "t", *argv[] = {prog, NULL};
  xbt_log_control_set("root.thresh:critical");
  simgrid_init(&argc, argv);
  simgrid_load_platform(xml_path);
  simgrid_run();
}

/* How many of the routes a -> e and e -> a differ between SimGrid and the table; the first five
 * differences of a count (`so_far` before these) are printed. */
static int pair_mismatches(const hw_cluster *hw, int a, int e, bool with_free, int so_far)
{
  int bad = 0;
  for (int dir = 0; dir < 2; dir++) {
    int s = dir ? e : a, d = dir ? a : e;
    g_autofree char *want = table_route_names(hw, s, d, with_free);
    g_autofree char *got = simgrid_route_names(hw, s, d, with_free);
    if (strcmp(want, got) != 0 && so_far + bad++ < 5)
      fprintf(stderr, "route %d -> %d: table %s, simgrid %s\n", s, d, want, got);
  }
  return bad;
}

/* Counts the endpoint pairs of each leaf group (GPUs, node and leaf switches) whose SimGrid
 * route differs from the table's; runs in a child, as SimGrid loads one platform per process. */
static int route_mismatches(const hw_cluster *hw, int ngpus, const char *xml_path, bool with_free)
{
  load_platform(xml_path);
  int bad = 0, per = ngpus / hw_net_groups(hw, 0) + (ngpus % hw_net_groups(hw, 0) != 0);
  per = hw_gpus_per_node(hw) * (int)ceil((double)per / hw_gpus_per_node(hw));
  for (int a = 0; a < ngpus; a++) {
    int g = a / per, n = hw_node_of(hw, a);
    int ends[] = {hw_node_switch(hw, n), hw_net_switch(hw, 0, g)};
    for (int b = g * per; b < MIN((g + 1) * per, ngpus) + 2; b++) {
      int e = b < MIN((g + 1) * per, ngpus) ? b : ends[b - MIN((g + 1) * per, ngpus)];
      if (e == a)
        continue;
      bad += pair_mismatches(hw, a, e, with_free, bad);
    }
  }
  return bad;
}

typedef int (*route_counter)(const hw_cluster *hw, int ngpus, const char *xml_path, bool with_free);

/* with_free: the never-binding links too, which only the unsplit platform names as the table.
 * `count` counts the routes that differ, in a child (SimGrid loads one platform per process). */
static void assert_simgrid_routes_as_table(const hw_cluster *hw, int ngpus, const char *what,
                                           bool with_free, route_counter count)
{
  g_autofree char *xml = hw_platform_xml(hw, ngpus, 1e12);
  g_autofree char *path = th_write("platform.xml", xml);
  cr_assert(strstr(xml, "DijkstraCache"), "%s: the rail groups should be searched graphs", what);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int bad = count(hw, ngpus, path, with_free);
    _exit(MIN(bad, 100));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s, %d GPUs: %d routes differ", what,
            ngpus, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* `nodes` nodes of 4 GPUs and 4 NICs, 2 a leaf group, under a spine `over`:1; `net` the
 * topology keys. */
static hw_cluster *rail_groups(const char *net, int nodes, double over, cfg_cluster **cfg)
{
  g_autofree char *text = g_strdup_printf(
      "name: t\n"
      "gpu: {memory: 80GiB, memory_bandwidth: 2TB/s, flops: {bf16: 100TFLOPS}}\n"
      "node: {count: %d, gpus_per_node: 4, nics_per_node: 4,\n"
      "       intra: {bandwidth: 100GB/s, latency: 2us}}\n"
      "network: {%s nic_bandwidth: 100Gb/s,\n"
      "          tiers: [{name: leaf, latency: 1us, nodes_per_switch: 2},\n"
      "                  {name: spine, latency: 1us, oversubscription: %g}]}\n",
      nodes, net, over);
  g_autofree char *path = th_write("rail-groups.yaml", text);
  cr_assert(th_load(path, NULL, NULL, cfg, NULL));
  return hw_cluster_new(*cfg);
}

/* Every route `count` checks, on `nodes` nodes under a spine `over`:1, rail+spine and
 * rail-only, free links split or not, the nodes whole and the last one partly used. */
static void assert_rail_fabrics_route_as_table(int nodes, double over, route_counter count)
{
  const char *nets[] = {"topology: rail-optimized,", "topology: rail-optimized, rails: only,"};
  for (size_t i = 0; i < G_N_ELEMENTS(nets); i++) {
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = rail_groups(nets[i], nodes, over, &cfg);
    for (int split = 0; split < 2; split++) {
      hw_split_free_links(hw, split);
      assert_simgrid_routes_as_table(hw, 4 * nodes, nets[i], !split, count);
      assert_simgrid_routes_as_table(hw, 14, nets[i], !split, count);
    }
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

/* A rail leaf group is a graph SimGrid searches, not a table of every pair: its shortest paths
 * must be the table's routes, link by link, for every pair of GPUs, NVSwitch and leaf switch of
 * a group, rail+spine and rail-only, whole and with the last node partly used. */
Test(topology, a_searched_rail_group_routes_as_the_table)
{
  assert_rail_fabrics_route_as_table(5, 2, route_mismatches);
}

/* Counts the pairs of GPUs in different leaf groups, and of a GPU and the spine switch, whose
 * SimGrid route differs from the table's (every pair, both ways); runs in a child like
 * route_mismatches. */
static int cross_group_mismatches(const hw_cluster *hw, int ngpus, const char *xml_path,
                                  bool with_free)
{
  load_platform(xml_path);
  int bad = 0, spine = hw_net_switch(hw, 1, 0);
  for (int a = 0; a < ngpus; a++)
    for (int b = 0; b <= ngpus; b++) {
      int e = b < ngpus ? b : spine;
      hw_route r;
      hw_route_get(hw, a, e, &r);
      if (a == e || top_link_tier(hw, &r) < 1)
        continue;
      bad += pair_mismatches(hw, a, e, with_free, bad);
    }
  return bad;
}

/* Across leaf groups and rails, NCCL's PXN moves the data over NVLink to the GPU on the
 * destination's rail and leaves by that GPU's NIC and rail: the table does so, and the DES's
 * platform must cross the same links, and reach the spine switch as the table does (2 groups of
 * 2 nodes of 4 GPUs, rail+spine and rail-only, PXN on). With leaf groups as zones, SimGrid left a
 * group by one gateway whatever the destination: all 96 rail-changing cross-group pairs here
 * went out of the sender's own NIC and rail. */
Test(topology, pxn_across_leaf_groups_routes_as_the_table)
{
  assert_rail_fabrics_route_as_table(4, 1, cross_group_mismatches);
}

/* One graph over the whole fabric costs a search of it per sending GPU: up to 1,024 GPUs the
 * platform is one, above it a zone per leaf group again. */
Test(topology, a_rail_fabric_is_one_searched_graph_up_to_1024_gpus)
{
  for (int nodes = 256; nodes <= 257; nodes++) {
    cfg_cluster *cfg = NULL;
    hw_cluster *hw = rail_groups("topology: rail-optimized,", nodes, 1, &cfg);
    g_autofree char *xml = hw_platform_xml(hw, 4 * nodes, 1e12);
    bool one = strstr(xml, "<zone id=\"fabric\"") != NULL;
    cr_assert_eq(one, nodes == 256, "%d GPUs: %s", 4 * nodes, one ? "one graph" : "zones");
    cr_assert(strstr(xml, "DijkstraCache"));
    hw_cluster_free(hw);
    cfg_cluster_free(cfg);
  }
}

/* The GPUs of `a`'s leaf group in a rail_groups cluster: [*first, *last) of ngpus. */
static void leaf_group_gpus(const hw_cluster *hw, int ngpus, int a, int *first, int *last)
{
  int per = hw_gpus_per_node(hw) * (hw_nodes(hw) / hw_net_groups(hw, 0) +
                                    (hw_nodes(hw) % hw_net_groups(hw, 0) != 0));
  *first = a / per * per;
  *last = MIN(*first + per, ngpus);
}

/* Every ordered pair of GPUs of one leaf group, flattened; `*n` pairs. */
static int *leaf_group_pairs(const hw_cluster *hw, int ngpus, size_t *n)
{
  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(int));
  for (int a = 0; a < ngpus; a++) {
    int first, last;
    leaf_group_gpus(hw, ngpus, a, &first, &last);
    for (int b = first; b < last; b++)
      if (b != a)
        g_array_append_vals(pairs, (int[]){a, b}, 2);
  }
  *n = pairs->len / 2;
  return (int *)(void *)g_array_free(pairs, FALSE);
}

/* In a child (one platform per process): SimGrid's route of every pair of GPUs of a leaf group,
 * its links in order, pads included, one line per pair, into out_path. */
static void write_group_routes(const hw_cluster *hw, int ngpus, const char *xml_path,
                               const char *out_path)
{
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    load_platform(xml_path);
    FILE *f = fopen(out_path, "w");
    for (int a = 0; f && a < ngpus; a++) {
      int first, last;
      leaf_group_gpus(hw, ngpus, a, &first, &last);
      for (int b = first; b < last; b++) {
        if (b == a)
          continue;
        char an[32], bn[32];
        hw_host_name(a, an, sizeof an);
        hw_host_name(b, bn, sizeof bn);
        xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
        sg_host_get_route(sg_host_by_name(an), sg_host_by_name(bn), links);
        fprintf(f, "%d -> %d:", a, b);
        unsigned i;
        sg_link_t l;
        xbt_dynar_foreach (links, i, l)
          fprintf(f, " %s", sg_link_get_name(l));
        fputc('\n', f);
        xbt_dynar_free(&links);
      }
    }
    _exit(f && fclose(f) == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "routes of %s not written", xml_path);
}

/* The platform `xml` with the pads taken out of its stored routes only (the graph keeps them):
 * routes that differ from the searched ones if SimGrid takes them. */
static char *without_stored_pads(const char *xml)
{
  g_autoptr(GRegex) pad = g_regex_new("(<bypassRoute [^\n]*?)<link_ctn id=\"lpad-[^\"]*\"/>",
                                      0, 0, NULL);
  return g_regex_replace(pad, xml, -1, 0, "\\1", 0, NULL);
}

/* The routes of the platform `xml` (write_group_routes), read back. */
static char *group_routes(const hw_cluster *hw, int ngpus, const char *xml)
{
  g_autofree char *xml_path = th_write("platform.xml", xml);
  g_autofree char *out_path = th_write("routes.txt", "");
  write_group_routes(hw, ngpus, xml_path, out_path);
  char *text = NULL;
  cr_assert(g_file_get_contents(out_path, &text, NULL, NULL));
  return text;
}

/* A stored route (hw_platform_xml_routes) must be the path the search finds, the same links in
 * the same order (the solver sees a flow's links in route order), for every pair of GPUs of a
 * leaf group: a group zone of its own (2 nodes, 257 nodes) or one fabric-wide graph (5 nodes),
 * rail+spine and rail-only, free links split or not, the last node whole or partly used. */
Test(topology, a_stored_rail_route_is_the_searched_path)
{
  const char *nets[] = {"topology: rail-optimized,", "topology: rail-optimized, rails: only,"};
  const int sizes[] = {2, 5, 257};
  for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++)
    for (size_t i = 0; i < G_N_ELEMENTS(nets); i++) {
      cfg_cluster *cfg = NULL;
      hw_cluster *hw = rail_groups(nets[i], sizes[s], 2, &cfg);
      for (int split = 0; split < 2; split++) {
        hw_split_free_links(hw, split);
        for (int ngpus = 4 * sizes[s] - 2; ngpus <= 4 * sizes[s]; ngpus += 2) {
          size_t n = 0;
          g_autofree int *pairs = leaf_group_pairs(hw, ngpus, &n);
          g_autofree char *plain = hw_platform_xml(hw, ngpus, 1e12);
          g_autofree char *stored = hw_platform_xml_routes(hw, ngpus, 1e12, pairs, n);
          g_auto(GStrv) parts = g_strsplit(stored, "<bypassRoute ", -1);
          cr_assert_eq(g_strv_length(parts) - 1, n, "%s %d GPUs: %u stored routes, %zu pairs",
                       nets[i], ngpus, g_strv_length(parts) - 1, n);
          g_autofree char *want = group_routes(hw, ngpus, plain);
          g_autofree char *got = group_routes(hw, ngpus, stored);
          cr_assert(strlen(want) > 0 && strcmp(want, got) == 0,
                    "%s, %d GPUs, split %d: stored routes differ from the searched ones", nets[i],
                    ngpus, split);
          if (s + i + (size_t)split > 0 || ngpus < 4 * sizes[s])
            continue;
          /* and SimGrid takes them: the same routes stored without their pads come out so */
          g_autofree char *tampered = without_stored_pads(stored);
          g_autofree char *bare = group_routes(hw, ngpus, tampered);
          cr_assert(strcmp(tampered, stored) != 0 && strcmp(bare, want) != 0,
                    "the stored routes are not the ones SimGrid takes");
        }
      }
      hw_cluster_free(hw);
      cfg_cluster_free(cfg);
    }
}
