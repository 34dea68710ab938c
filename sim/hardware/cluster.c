/* The link table of a cluster and the route between two GPUs.
 *
 * Layout (every SHARED link is split-duplex: each direction has the full bandwidth):
 *   GPU --nvl--> node switch (NVSwitch or PCIe switch) --nvl--> GPU       (nvlink-ring: ring links)
 *   GPU --nic--> node gateway --port--> tier-0 switch --up0--> tier-1 switch ... (and down again)
 * The latency of a switch of tier t is split over the links around it, so a route that turns at
 * tier T costs 2*sum(lat[t<T]) + lat[T]. A tier's oversubscription divides the uplinks that
 * enter it from below. Link bandwidths are what NCCL reaches on them (nccl.link_efficiency of
 * the datasheet figure), so every transfer, simulated or closed-form, sees the same rates.
 * Switches that reduce data (NVLS, SHARP) are endpoints too, joined to their switch by a
 * zero-cost link. */
#include "hardware/hardware.h"

#include <math.h>
#include <string.h>

struct hw_cluster {
  const cfg_cluster *cfg;
  /* A node here is one NVLink domain (node.nvlink_domain GPUs, one node unless it spans
   * several): what the GPUs share is their NVSwitch fabric, and the NICs of all its trays. */
  int ngpus, gpn, nnodes, nics;
  int trays;       /* configuration nodes (compute trays) per NVLink domain */
  int rails;       /* rails of a rail-optimized fabric (NIC k of every tray on rail k), else 0 */
  int *nps;        /* per tier: domains below one switch */
  int rail_link0;  /* rail-optimized: uplink of rail k of tier-0 group g: rail_link0 + g*rails + k */
  /* `nlinks` links, room for `links_room` (thousands on a large cluster, built per
   * configuration: an append through GLib each was a twentieth of an analytic one) */
  hw_link *links;
  int nlinks, links_room;
  int gpu_link0;   /* nvl link of GPU g (nvswitch, pcie) or ring link g (nvlink-ring) */
  int nic_link0;   /* nic link of node n, NIC k: nic_link0 + n*nics + k */
  int port_link0;  /* port link of node n */
  int *up_link0;   /* per tier t < ntiers-1: first uplink of tier-t groups */
  int *groups;     /* per tier: number of groups */
  int *switch0;    /* per tier: endpoint id of its first switch */
  int *swl_link0;  /* per tier: link joining switch endpoint g to its router */
  bool split_free_links; /* never-binding links split by direction and NIC (hw_xml_one_way) */
  int nendpoints;
};

/* Links are known by index; the platform XML names link i "l<i>" (see hw_xml_link). */
static int hw_add_link(hw_cluster *hw, double bw, double lat, hw_link_policy pol, int tier)
{
  if (hw->nlinks == hw->links_room) {
    hw->links_room = MAX(2 * hw->links_room, 256);
    hw->links = g_renew(hw_link, hw->links, hw->links_room);
  }
  hw->links[hw->nlinks] = (hw_link){.bandwidth = bw, .latency = lat, .policy = pol, .tier = tier};
  return hw->nlinks++;
}

static int hw_group_of(const hw_cluster *hw, int node, int tier)
{
  return node / hw->nps[tier];
}

/* NICs below group g of tier t: its trays' (the last group, and an NVLink domain, may be
 * partly filled). */
static int hw_group_nics(const hw_cluster *hw, int tier, int g)
{
  int per = hw->nps[tier] * hw->trays;
  return MIN(per, hw->cfg->node.count - g * per) * (hw->nics / hw->trays);
}

/* NICs of node n (an NVLink domain may be partly filled). */
static int hw_node_nics(const hw_cluster *hw, int n)
{
  return MIN(hw->trays, hw->cfg->node.count - n * hw->trays) * (hw->nics / hw->trays);
}

/* Each rail switch of a leaf group has its own uplinks to the spine: 1/rails of the group's. */
static void hw_build_rail_links(hw_cluster *hw, double eff_net)
{
  const cfg_network *net = &hw->cfg->network;
  hw->rail_link0 = hw->nlinks;
  if (!hw->rails || net->ntiers < 2 || hw->nnodes < 2)
    return;
  double lat = (net->tiers[0].latency + net->tiers[1].latency) / 2;
  for (int g = 0; g < hw->groups[0]; g++)
    for (int k = 0; k < hw->rails; k++) {
      double nics = (double)hw_group_nics(hw, 0, g) / hw->rails;
      hw_add_link(hw, nics * net->nic_bandwidth * eff_net / net->tiers[1].oversubscription, lat,
                  HW_LINK_SHARED, 1);
    }
}

static void hw_build_links(hw_cluster *hw)
{
  const cfg_cluster *c = hw->cfg;
  const cfg_intra *in = &c->node.intra;
  const cfg_network *net = &c->network;
  double eff_in = c->nccl.link_efficiency[CFG_LINK_INTRA];
  double eff_net = c->nccl.link_efficiency[CFG_LINK_NETWORK];
  hw->gpu_link0 = 0;
  for (int g = 0; g < hw->ngpus; g++) {
    /* ring: each GPU's bandwidth is split between its two neighbours */
    bool ring = in->kind == CFG_INTRA_NVLINK_RING;
    double bw = (ring && hw->gpn > 2 ? in->bandwidth / 2 : in->bandwidth) * eff_in;
    double lat = ring ? in->latency : in->latency / 2;
    hw_add_link(hw, MAX(bw, 1.0), lat,
                HW_LINK_SHARED, -1);
  }
  double lat0 = net->tiers[0].latency;
  hw->nic_link0 = hw->nlinks;
  for (int n = 0; n < hw->nnodes && hw->nnodes > 1; n++)
    for (int k = 0; k < hw->nics; k++)
      hw_add_link(hw, net->nic_bandwidth * eff_net, 0.0,
                  HW_LINK_SHARED, 0);
  hw->port_link0 = hw->nlinks;
  double over0 = net->tiers[0].oversubscription;
  for (int n = 0; n < hw->nnodes && hw->nnodes > 1; n++) {
    bool limited = over0 > 1.0;
    double bw = limited ? hw_node_nics(hw, n) * net->nic_bandwidth * eff_net / over0 : 1e15;
    hw_add_link(hw, bw, lat0 / 2, limited ? HW_LINK_SHARED
                                                                         : HW_LINK_FATPIPE, 0);
  }
  hw->up_link0 = g_new0(int, net->ntiers);
  hw->groups = g_new0(int, net->ntiers);
  for (int t = 0; t < net->ntiers; t++)
    hw->groups[t] = (hw->nnodes + hw->nps[t] - 1) / hw->nps[t];
  for (int t = 0; t + 1 < net->ntiers && hw->nnodes > 1; t++) {
    hw->up_link0[t] = hw->nlinks;
    double over = net->tiers[t + 1].oversubscription;
    double lat = (net->tiers[t].latency + net->tiers[t + 1].latency) / 2;
    for (int g = 0; g < hw->groups[t]; g++) {
      double bw = hw_group_nics(hw, t, g) * net->nic_bandwidth * eff_net / over;
      if (t == 0 && hw->rails) /* the rail uplinks below carry it; this joins the XML zones */
        hw_add_link(hw, 1e15, 0.0, HW_LINK_FATPIPE, 1);
      else
        hw_add_link(hw, bw, lat, HW_LINK_SHARED, t + 1);
    }
  }
  hw_build_rail_links(hw, eff_net);
  /* switch endpoints: node switches, then network switches tier by tier */
  hw->nendpoints = hw->ngpus + hw->nnodes;
  hw->switch0 = g_new0(int, net->ntiers);
  hw->swl_link0 = g_new0(int, net->ntiers);
  for (int t = 0; t < net->ntiers; t++) {
    hw->switch0[t] = hw->nendpoints;
    hw->swl_link0[t] = hw->nlinks;
    for (int g = 0; g < hw->groups[t]; g++)
      hw_add_link(hw, 1e15, 0.0, HW_LINK_FATPIPE, t + 1);
    hw->nendpoints += hw->groups[t];
  }
}

hw_cluster *hw_cluster_new(const cfg_cluster *cfg)
{
  hw_cluster *hw = g_new0(hw_cluster, 1);
  hw->cfg = cfg;
  int domain = MAX(cfg->node.nvlink_domain, cfg->node.gpus_per_node);
  hw->trays = domain / cfg->node.gpus_per_node;
  hw->gpn = domain;
  hw->ngpus = cfg->node.gpus_per_node * cfg->node.count;
  hw->nnodes = (hw->ngpus + hw->gpn - 1) / hw->gpn; /* the last domain may be partly filled */
  hw->nics = MAX(cfg->node.nics_per_node, 1) * hw->trays;
  if (cfg->network.topology == CFG_TOPO_RAIL_OPTIMIZED)
    hw->rails = MAX(cfg->node.nics_per_node, 1);
  hw->nps = g_new0(int, cfg->network.ntiers);
  for (int t = 0; t < cfg->network.ntiers; t++)
    hw->nps[t] = MAX(1, cfg->network.tiers[t].nodes_per_switch / hw->trays);
  hw->split_free_links = true;
  /* a GPU has a few links of its own (NVLink, NIC, its node's port) and its share of the
   * switches' uplinks: room for them at once rather than copied as they grow */
  hw->links_room = 4 * hw->ngpus + 64;
  hw->links = g_new(hw_link, hw->links_room);
  hw_build_links(hw);
  return hw;
}

void hw_split_free_links(hw_cluster *hw, bool on) { hw->split_free_links = on; }

void hw_cluster_free(hw_cluster *hw)
{
  if (!hw)
    return;
  g_free(hw->links);
  g_free(hw->up_link0);
  g_free(hw->groups);
  g_free(hw->switch0);
  g_free(hw->swl_link0);
  g_free(hw->nps);
  g_free(hw);
}

const cfg_cluster *hw_config(const hw_cluster *hw) { return hw->cfg; }
int hw_gpus(const hw_cluster *hw) { return hw->ngpus; }
int hw_gpus_per_node(const hw_cluster *hw) { return hw->gpn; }
int hw_node_of(const hw_cluster *hw, int gpu) { return gpu / hw->gpn; }
int hw_nlinks(const hw_cluster *hw) { return hw->nlinks; }
int hw_endpoints(const hw_cluster *hw) { return hw->nendpoints; }
int hw_node_switch(const hw_cluster *hw, int node) { return hw->ngpus + node; }
int hw_net_switch(const hw_cluster *hw, int tier, int group) { return hw->switch0[tier] + group; }
int hw_net_groups(const hw_cluster *hw, int tier) { return hw->groups[tier]; }
int hw_nodes(const hw_cluster *hw) { return hw->nnodes; }

int hw_group_of_node(const hw_cluster *hw, int node, int tier)
{
  return hw_group_of(hw, node, tier);
}

void hw_endpoint_name(const hw_cluster *hw, int e, char *buf, size_t len)
{
  if (e < hw->ngpus) {
    hw_host_name(e, buf, len);
    return;
  }
  if (e < hw->ngpus + hw->nnodes) {
    g_snprintf(buf, len, "nvs-%d", e - hw->ngpus);
    return;
  }
  int t = hw->cfg->network.ntiers - 1;
  while (e < hw->switch0[t])
    t--;
  g_snprintf(buf, len, "swh%d-%d", t, e - hw->switch0[t]);
}

cfg_link_class hw_route_class(const hw_route *r)
{
  return r->tier >= 1 ? CFG_LINK_NETWORK : CFG_LINK_INTRA;
}

const hw_link *hw_link_get(const hw_cluster *hw, int id)
{
  return &hw->links[id];
}

static void hw_push(const hw_cluster *hw, hw_route *r, int link, bool down)
{
  g_assert(r->nhops < (int)G_N_ELEMENTS(r->hops));
  const hw_link *l = hw_link_get(hw, link);
  r->hops[r->nhops++] = HW_HOP(link, down);
  r->latency += l->latency;
  r->bandwidth = MIN(r->bandwidth, l->bandwidth);
}

/* Ring links: link of local GPU i joins i and i+1 (mod gpn); forward is UP. */
static void hw_ring_route(const hw_cluster *hw, int node, int a, int b, hw_route *r)
{
  int n = hw->gpn, fwd = (b - a + n) % n, back = (a - b + n) % n;
  int base = node * n;
  if (fwd <= back)
    for (int i = 0; i < fwd; i++)
      hw_push(hw, r, hw->gpu_link0 + base + (a + i) % n, false);
  else
    for (int i = 0; i < back; i++)
      hw_push(hw, r, hw->gpu_link0 + base + (a - i - 1 + n) % n, true);
}

static int hw_nic_of(const hw_cluster *hw, int gpu)
{
  int node = gpu / hw->gpn, local = gpu % hw->gpn;
  return hw->nic_link0 + node * hw->nics + local * hw->nics / hw->gpn;
}

/* The rail of a GPU: the index of its NIC within its tray. */
static int hw_rail_of(const hw_cluster *hw, int gpu)
{
  return (gpu % hw->gpn * hw->nics / hw->gpn) % hw->rails;
}

/* The uplink that leaves tier t's group `group` towards the tier above, on `rail` (-1: from a
 * switch, not a NIC): a rail-optimized leaf group has one per rail switch. */
static int hw_uplink(const hw_cluster *hw, int t, int group, int rail)
{
  if (t == 0 && hw->rails && rail >= 0 && hw->cfg->network.ntiers > 1)
    return hw->rail_link0 + group * hw->rails + rail;
  return hw->up_link0[t] + group;
}

/* Where an endpoint sits: a GPU, a node switch, or the switch of group g at tier t. */
typedef struct {
  int kind; /* 0 GPU, 1 node switch, 2 network switch */
  int node, tier, group;
} hw_place;

static hw_place hw_place_of(const hw_cluster *hw, int e)
{
  hw_place p = {0};
  if (e < hw->ngpus) {
    p.node = e / hw->gpn;
  } else if (e < hw->ngpus + hw->nnodes) {
    p.kind = 1;
    p.node = e - hw->ngpus;
  } else {
    p.kind = 2;
    p.tier = hw->cfg->network.ntiers - 1;
    while (e < hw->switch0[p.tier])
      p.tier--;
    p.group = e - hw->switch0[p.tier];
  }
  return p;
}

/* From a GPU or a network switch up to the network switch of `tier` above it (or down). */
static void hw_up_path(const hw_cluster *hw, hw_route *r, int e, const hw_place *from, int tier,
                       bool down)
{
  int t0 = 0;
  if (from->kind == 0) {
    hw_push(hw, r, hw_nic_of(hw, e), down);
    hw_push(hw, r, hw->port_link0 + from->node, down);
  } else {
    t0 = from->tier;
  }
  int group = from->kind == 0 ? hw_group_of(hw, from->node, 0) : from->group;
  int rail = from->kind == 0 && hw->rails ? hw_rail_of(hw, e) : -1;
  for (int t = t0; t < tier; t++) {
    hw_push(hw, r, hw_uplink(hw, t, group, rail), down);
    group = group * hw->nps[t] / hw->nps[t + 1];
  }
  hw_push(hw, r, hw->swl_link0[tier] + group, down);
}

/* Routes that start or end at a switch endpoint: a GPU and its node switch, or a GPU / switch
 * and a network switch above it. */
static void hw_switch_route(const hw_cluster *hw, int src, int dst, hw_route *r)
{
  hw_place a = hw_place_of(hw, src), b = hw_place_of(hw, dst);
  bool up = b.kind > a.kind || (a.kind == 2 && b.kind == 2 && b.tier > a.tier);
  hw_place lo = up ? a : b, hi = up ? b : a;
  int lo_e = up ? src : dst;
  if (hi.kind == 1) {
    g_assert(lo.kind == 0 && lo.node == hi.node);
    hw_push(hw, r, hw->gpu_link0 + lo_e, !up);
    r->tier = 0;
    return;
  }
  g_assert(hi.kind == 2);
  hw_up_path(hw, r, lo_e, &lo, hi.tier, !up);
  if (!up) { /* reverse the hop order for the downward route */
    for (int i = 0; i < r->nhops / 2; i++) {
      hw_hop t = r->hops[i];
      r->hops[i] = r->hops[r->nhops - 1 - i];
      r->hops[r->nhops - 1 - i] = t;
    }
  }
  r->tier = 1 + hi.tier;
}

/* Between rails, NCCL moves the data over NVLink inside the source node first, to the GPU on
 * the destination's rail, and sends it from there (PXN): its rings leave a node through the
 * NIC of the next node's entry GPU. Rail-only fabrics have no other path. Returns the GPU that
 * sends. */
static int hw_pxn_hop(const hw_cluster *hw, int src, int dst, hw_route *r)
{
  bool pxn = hw->cfg->nccl.pxn || hw->cfg->network.rails == CFG_RAILS_ONLY;
  if (!hw->rails || !pxn || hw_rail_of(hw, src) == hw_rail_of(hw, dst))
    return src;
  int rail = hw_rail_of(hw, dst);
  int nic = (src % hw->gpn * hw->nics / hw->gpn) / hw->rails * hw->rails + rail;
  int via = src / hw->gpn * hw->gpn + (nic * hw->gpn + hw->nics - 1) / hw->nics;
  hw_push(hw, r, hw->gpu_link0 + src, false);
  hw_push(hw, r, hw->gpu_link0 + via, true);
  return via;
}

/* Between GPUs of different nodes: up to the lowest tier that holds both, and down. On a
 * rail-optimized fabric the leaf switch is the source's rail switch, and it reaches another
 * rail only through the spine. */
static void hw_net_route(const hw_cluster *hw, int src, int dst, hw_route *r)
{
  src = hw_pxn_hop(hw, src, dst, r);
  int ns = src / hw->gpn, nd = dst / hw->gpn;
  int ra = hw->rails ? hw_rail_of(hw, src) : -1, rb = hw->rails ? hw_rail_of(hw, dst) : -1;
  int top = 0;
  while (hw_group_of(hw, ns, top) != hw_group_of(hw, nd, top))
    top++;
  if (ra != rb && top == 0)
    top = 1;
  r->tier = 1 + top;
  hw_push(hw, r, hw_nic_of(hw, src), false);
  hw_push(hw, r, hw->port_link0 + ns, false);
  for (int t = 0; t < top; t++)
    hw_push(hw, r, hw_uplink(hw, t, hw_group_of(hw, ns, t), ra), false);
  for (int t = top - 1; t >= 0; t--)
    hw_push(hw, r, hw_uplink(hw, t, hw_group_of(hw, nd, t), rb), true);
  hw_push(hw, r, hw->port_link0 + nd, true);
  hw_push(hw, r, hw_nic_of(hw, dst), true);
}

void hw_route_get(const hw_cluster *hw, int src, int dst, hw_route *r)
{
  memset(r, 0, sizeof *r);
  r->bandwidth = INFINITY;
  r->tier = -1;
  if (src == dst)
    return;
  if (src >= hw->ngpus || dst >= hw->ngpus) {
    hw_switch_route(hw, src, dst, r);
    return;
  }
  int ns = src / hw->gpn, nd = dst / hw->gpn;
  if (ns == nd) {
    r->tier = 0;
    if (hw->cfg->node.intra.kind == CFG_INTRA_NVLINK_RING) {
      hw_ring_route(hw, ns, src % hw->gpn, dst % hw->gpn, r);
    } else {
      hw_push(hw, r, hw->gpu_link0 + src, false);
      hw_push(hw, r, hw->gpu_link0 + dst, true);
    }
    return;
  }
  hw_net_route(hw, src, dst, r);
}

void hw_host_name(int gpu, char *buf, size_t len)
{
  g_snprintf(buf, len, "gpu-%d", gpu);
}

void hw_link_describe(const hw_cluster *hw, int link, bool down, char *buf, size_t len)
{
  const cfg_network *net = &hw->cfg->network;
  const char *dir = down ? "down" : "up";
  int t = net->ntiers - 1;
  while (t >= 0 && link < hw->swl_link0[t])
    t--;
  if (t >= 0) {
    g_snprintf(buf, len, "%s switch %d, %s", net->tiers[t].name, link - hw->swl_link0[t], dir);
  } else if (hw->rails && link >= hw->rail_link0) {
    int i = link - hw->rail_link0;
    g_snprintf(buf, len, "%s %d uplink, rail %d, %s", net->tiers[0].name, i / hw->rails,
               i % hw->rails, dir);
  } else if (link >= hw->port_link0 + hw->nnodes * (hw->nnodes > 1)) {
    int u = MAX(net->ntiers - 2, 0);
    while (u > 0 && link < hw->up_link0[u])
      u--;
    g_snprintf(buf, len, "%s %d uplink, %s", net->tiers[u].name, link - hw->up_link0[u], dir);
  } else if (link >= hw->port_link0) {
    g_snprintf(buf, len, "node %d port, %s", link - hw->port_link0, down ? "in" : "out");
  } else if (link >= hw->nic_link0) {
    int i = link - hw->nic_link0;
    g_snprintf(buf, len, "NIC %d of node %d, %s", i % hw->nics, i / hw->nics, down ? "in" : "out");
  } else {
    g_snprintf(buf, len, "NVLink of GPU %d, %s", link - hw->gpu_link0, down ? "in" : "out");
  }
}

/* ---- background traffic -------------------------------------------------------------------- */

/* The NIC links of configuration node (tray) `tray`, rail `rail` (-1: all its NICs). */
static void hw_bg_nics(const hw_cluster *hw, int tray, int rail, GArray *links)
{
  int per = hw->nics / hw->trays, domain = tray / hw->trays, first = tray % hw->trays * per;
  for (int k = 0; k < per; k++)
    if (rail < 0 || k == rail) {
      int link = hw->nic_link0 + domain * hw->nics + first + k;
      g_array_append_val(links, link);
    }
}

/* The uplinks out of leaf group g: one per rail switch on a rail-optimized fabric. */
static void hw_bg_uplinks(const hw_cluster *hw, int g, GArray *links)
{
  for (int k = 0; k < MAX(hw->rails, 1); k++) {
    int link = hw_uplink(hw, 0, g, hw->rails ? k : -1);
    g_array_append_val(links, link);
  }
}

static GArray *hw_bg_select(const hw_cluster *hw, const cfg_background *b)
{
  GArray *links = g_array_new(FALSE, FALSE, sizeof(int));
  cfg_bg_select sel;
  if (!cfg_background_select(b->links, &sel) || hw->nnodes < 2)
    return links; /* the configuration checked it; one domain has no network links */
  if (sel.spine || sel.uplink >= 0) {
    for (int g = 0; g < hw->groups[0] && hw->cfg->network.ntiers > 1; g++)
      if (sel.spine || g == sel.uplink)
        hw_bg_uplinks(hw, g, links);
    return links;
  }
  for (int t = 0; t < hw->cfg->node.count; t++)
    if (sel.node < 0 || t == sel.node)
      hw_bg_nics(hw, t, sel.rail, links);
  return links;
}

GArray *hw_background_flows(const hw_cluster *hw)
{
  GArray *flows = g_array_new(FALSE, FALSE, sizeof(hw_bg_flow));
  const cfg_network *net = &hw->cfg->network;
  for (int i = 0; i < net->nbackground; i++) {
    const cfg_background *b = &net->background[i];
    g_autoptr(GArray) links = hw_bg_select(hw, b);
    for (guint j = 0; j < links->len; j++)
      for (int down = 0; down < 2; down++) {
        if (strcmp(b->direction, down ? "up" : "down") == 0)
          continue;
        int link = g_array_index(links, int, j);
        double bw = hw_link_get(hw, link)->bandwidth;
        hw_bg_flow f = {.link = link, .down = down, .start = b->start, .duration = b->duration,
                        .rate = isnan(b->fraction) ? b->bandwidth : b->fraction * bw};
        g_array_append_val(flows, f);
      }
  }
  return flows;
}

/* ---- platform XML ------------------------------------------------------------------------ */

/* A link that can never bind (FATPIPE, 1 PB/s) may as well be split-duplex, as it changes no
 * rate: each direction is then a constraint of its own in SimGrid's max-min solver, and flows
 * going up no longer join those coming down into one system that every change re-solves. */
static bool hw_xml_one_way(const hw_cluster *hw, int link)
{
  return hw->split_free_links || hw_link_get(hw, link)->policy != HW_LINK_FATPIPE;
}

/* Links carry no latency in SimGrid: CM02 shares a link among flows in inverse proportion to
 * their route latency (a TCP round-trip bias that RDMA and NVLink do not have). With zero
 * latency every flow weighs the same, max-min fair; the engine pays each route's latency itself. */
static void hw_xml_link(GString *x, const hw_cluster *hw, int link)
{
  const hw_link *l = hw_link_get(hw, link);
  g_string_append_printf(x, "<link id=\"l%d\" bandwidth=\"%.17gBps\" latency=\"0s\"%s/>\n",
                         link, l->bandwidth,
                         hw_xml_one_way(hw, link) ? " sharing_policy=\"SPLITDUPLEX\""
                                                  : " sharing_policy=\"FATPIPE\"");
}

static void hw_xml_hops(GString *x, const hw_cluster *hw, const hw_route *r)
{
  for (int i = 0; i < r->nhops; i++) {
    int link = HW_HOP_LINK(r->hops[i]);
    if (!hw_xml_one_way(hw, link))
      g_string_append_printf(x, "<link_ctn id=\"l%d\"/>", link);
    else
      g_string_append_printf(x, "<link_ctn id=\"l%d\" direction=\"%s\"/>", link,
                             r->hops[i] % 2 ? "DOWN" : "UP");
  }
}

/* One link list as an XML route body (UP or DOWN on every hop). */
static void hw_xml_one(GString *x, const hw_cluster *hw, int link, bool down)
{
  hw_route r = {.nhops = 1, .hops = {HW_HOP(link, down)}};
  hw_xml_hops(x, hw, &r);
}

static void hw_xml_node(GString *x, const hw_cluster *hw, int node, int ngpus, double speed,
                        bool gateway)
{
  bool declare = !gateway; /* multi-node platforms declare every link up front */
  int first = node * hw->gpn, last = MIN(first + hw->gpn, ngpus);
  char name[32];
  g_string_append_printf(x, "<zone id=\"node-%d\" routing=\"Full\">\n", node);
  for (int g = first; g < last; g++) {
    hw_host_name(g, name, sizeof name);
    g_string_append_printf(x, "<host id=\"%s\" speed=\"%.17gf\"/>\n", name, speed);
  }
  bool nvswitch = hw->cfg->node.intra.kind != CFG_INTRA_NVLINK_RING;
  if (nvswitch)
    g_string_append_printf(x, "<host id=\"nvs-%d\" speed=\"1e9f\"/>\n", node);
  if (gateway)
    g_string_append_printf(x, "<router id=\"gw-%d\"/>\n", node);
  for (int g = first; g < last && declare; g++)
    hw_xml_link(x, hw, hw->gpu_link0 + g);
  for (int a = first; a < last; a++)
    for (int b = first; b < last; b++) {
      if (a == b)
        continue;
      hw_route r;
      hw_route_get(hw, a, b, &r);
      char an[32], bn[32];
      hw_host_name(a, an, sizeof an);
      hw_host_name(b, bn, sizeof bn);
      g_string_append_printf(x, "<route src=\"%s\" dst=\"%s\" symmetrical=\"NO\">", an, bn);
      hw_xml_hops(x, hw, &r);
      g_string_append(x, "</route>\n");
    }
  for (int g = first; g < last && nvswitch; g++) {
    hw_host_name(g, name, sizeof name);
    g_string_append_printf(x, "<route src=\"%s\" dst=\"nvs-%d\" symmetrical=\"NO\">", name, node);
    hw_xml_one(x, hw, hw->gpu_link0 + g, false);
    g_string_append_printf(x, "</route>\n<route src=\"nvs-%d\" dst=\"%s\" symmetrical=\"NO\">",
                           node, name);
    hw_xml_one(x, hw, hw->gpu_link0 + g, true);
    g_string_append(x, "</route>\n");
  }
  if (gateway)
    for (int g = first; g < last; g++) {
      hw_host_name(g, name, sizeof name);
      int nic = hw_nic_of(hw, g);
      g_string_append_printf(x, "<route src=\"%s\" dst=\"gw-%d\" symmetrical=\"NO\">", name, node);
      hw_xml_one(x, hw, nic, false);
      g_string_append_printf(x, "</route>\n<route src=\"gw-%d\" dst=\"%s\" symmetrical=\"NO\">",
                             node, name);
      hw_xml_one(x, hw, nic, true);
      g_string_append(x, "</route>\n");
    }
  g_string_append(x, "</zone>\n");
}

/* The gateway (router name) of a child zone: a node, or a group of tier t-1. */
static void hw_child_gateway(int tier, int child, char *buf, size_t len)
{
  if (tier == 0)
    g_snprintf(buf, len, "gw-%d", child);
  else
    g_snprintf(buf, len, "swr%d-%d", tier - 1, child);
}

/* Whether a rail leaf group can be a graph SimGrid searches (see hw_xml_rail_graph): the
 * shortest path must be the link table's route, and unique. It is when every GPU has its own NIC
 * in a one-tray node on an NVSwitch and traffic changes rail over NVLink (PXN): then no two
 * routes of equal length join two endpoints. */
static bool hw_rail_graph_exact(const hw_cluster *hw)
{
  const cfg_cluster *c = hw->cfg;
  return hw->rails && hw->trays == 1 && hw->nics == hw->gpn &&
         c->node.intra.kind != CFG_INTRA_NVLINK_RING &&
         (c->nccl.pxn || c->network.rails == CFG_RAILS_ONLY);
}

/* A node's port link that can never bind (FATPIPE, 1 PB/s) stands in a rail graph as one link
 * per NIC and direction: the same flows as the NIC's link, so it joins no flows in SimGrid's
 * solver that the NIC does not (the node's one port joined all its rails, both ways). */
static bool hw_port_is_free(const hw_cluster *hw, int node)
{
  return hw->split_free_links && hw_link_get(hw, hw->port_link0 + node)->policy == HW_LINK_FATPIPE;
}

/* The pads of the rail groups' graphs (hw_xml_edge): one per NIC router x<n>.<k> and rail
 * switch r<g>.<k>. */
static void hw_xml_pads(GString *x, const hw_cluster *hw)
{
  static const char fmt[] = "<link id=\"lpad-%c%d.%d\" bandwidth=\"1e15Bps\" latency=\"0s\" "
                            "sharing_policy=\"FATPIPE\"/>\n";
  for (int n = 0; n < hw->nnodes; n++)
    for (int k = 0; k < hw->nics; k++)
      g_string_append_printf(x, fmt, 'x', n, k);
  for (int g = 0; g < hw->groups[0]; g++)
    for (int k = 0; k < hw->rails; k++)
      g_string_append_printf(x, fmt, 'r', g, k);
  for (int n = 0; n < hw->nnodes && hw_port_is_free(hw, n); n++)
    for (int k = 0; k < hw->nics; k++)
      g_string_append_printf(x, "<link id=\"lport%d.%d\" bandwidth=\"1e15Bps\" latency=\"0s\" "
                                "sharing_policy=\"SPLITDUPLEX\"/>\n", n, k);
}

/* Background flows: two hosts each, joined by the loaded link and the flow's cap. */
static void hw_xml_background(GString *x, const hw_cluster *hw, const GArray *bg)
{
  g_string_append(x, "<zone id=\"background\" routing=\"Full\">\n");
  for (guint i = 0; i < bg->len; i++)
    g_string_append_printf(x, "<host id=\"bg%ua\" speed=\"1e9f\"/><host id=\"bg%ub\" speed=\"1e9f\"/>\n",
                           i, i);
  for (guint i = 0; i < bg->len; i++) {
    const hw_bg_flow *f = &g_array_index(bg, hw_bg_flow, i);
    g_string_append_printf(x, "<route src=\"bg%ua\" dst=\"bg%ub\" symmetrical=\"NO\"><link_ctn id=\"lbg%u\"/>",
                           i, i, i);
    hw_xml_one(x, hw, f->link, f->down);
    g_string_append(x, "</route>\n");
  }
  g_string_append(x, "</zone>\n");
}

/* SimGrid resolves a link named in a route by a depth-first search from the root zone, so links
 * declared deep inside node zones cost O(links) to find and a large platform O(links^2) to load.
 * Declared first, in one zone of their own, they are found at once. */
static void hw_xml_all_links(GString *x, const hw_cluster *hw)
{
  g_string_append(x, "<zone id=\"links\" routing=\"None\">\n");
  for (int i = 0; i < hw_nlinks(hw); i++)
    hw_xml_link(x, hw, i);
  if (hw_rail_graph_exact(hw))
    hw_xml_pads(x, hw);
  g_autoptr(GArray) bg = hw_background_flows(hw);
  for (guint i = 0; i < bg->len; i++)
    g_string_append_printf(x, "<link id=\"lbg%u\" bandwidth=\"%.17gBps\" latency=\"0s\"/>\n", i,
                           g_array_index(bg, hw_bg_flow, i).rate);
  g_string_append(x, "</zone>\n");
  if (bg->len)
    hw_xml_background(x, hw, bg);
}

static void hw_xml_route(GString *x, const hw_cluster *hw, const char *src, const char *dst,
                         const hw_route *r)
{
  g_string_append_printf(x, "<route src=\"%s\" dst=\"%s\" symmetrical=\"NO\">", src, dst);
  hw_xml_hops(x, hw, r);
  g_string_append(x, "</route>\n");
}

/* The route between two endpoints, from the link table, both ways. */
static void hw_xml_pair(GString *x, const hw_cluster *hw, int a, int b)
{
  char an[32], bn[32];
  hw_route r;
  hw_endpoint_name(hw, a, an, sizeof an);
  hw_endpoint_name(hw, b, bn, sizeof bn);
  hw_route_get(hw, a, b, &r);
  hw_xml_route(x, hw, an, bn, &r);
  hw_route_get(hw, b, a, &r);
  hw_xml_route(x, hw, bn, an, &r);
}

/* A GPU to its leaf group's gateway (swr0-g) and back: up to its rail switch's uplink, which
 * the spine continues. */
static void hw_xml_rail_exit(GString *x, const hw_cluster *hw, int gpu, int g)
{
  char name[32], gw[32];
  hw_host_name(gpu, name, sizeof name);
  g_snprintf(gw, sizeof gw, "swr0-%d", g);
  hw_route up = {.bandwidth = INFINITY}, down = {.bandwidth = INFINITY};
  int node = gpu / hw->gpn, rail = hw_uplink(hw, 0, g, hw_rail_of(hw, gpu));
  int links[] = {hw_nic_of(hw, gpu), hw->port_link0 + node, rail};
  for (int i = 0; i < 3; i++) {
    hw_push(hw, &up, links[i], false);
    hw_push(hw, &down, links[2 - i], true);
  }
  hw_xml_route(x, hw, name, gw, &up);
  hw_xml_route(x, hw, gw, name, &down);
}

/* One edge of a rail group's graph: a directed route of one or two links, and a pad (`pad`
 * names it, or NULL): a link of no cost (FATPIPE, 1 PB/s) that lengthens a path for the search
 * only. Each NIC and rail switch has its own pad, so that no link joins all flows in the solver. */
static void hw_xml_edge(GString *x, const hw_cluster *hw, const char *src, const char *dst,
                        const int *links, const bool *down, int n, const char *pad)
{
  hw_route r = {.bandwidth = INFINITY};
  for (int i = 0; i < n; i++)
    hw_push(hw, &r, links[i], down[i]);
  g_string_append_printf(x, "<route src=\"%s\" dst=\"%s\" symmetrical=\"NO\">", src, dst);
  hw_xml_hops(x, hw, &r);
  if (pad)
    g_string_append_printf(x, "<link_ctn id=\"lpad-%s\"/>", pad);
  g_string_append(x, "</route>\n");
}

/* A GPU, its NIC's router x<n>.<k> and its node switch nvs-<n>: NVLink to the switch, the NIC
 * link to the router, and from the switch to every NIC of the node over the NVLink of the GPU
 * on that rail (PXN). */
static void hw_xml_rail_node(GString *x, const hw_cluster *hw, int node, int last)
{
  char gpu[32], nic[32], nvs[32];
  g_snprintf(nvs, sizeof nvs, "nvs-%d", node);
  for (int k = 0; k < hw->nics; k++) {
    int a = node * hw->gpn + k, nl = hw->nic_link0 + node * hw->nics + k, gl = hw->gpu_link0 + a;
    g_snprintf(nic, sizeof nic, "x%d.%d", node, k);
    int via[] = {gl, nl};
    hw_xml_edge(x, hw, nvs, nic, via, (bool[]){true, false}, 2, NULL);
    if (a >= last)
      continue;
    hw_host_name(a, gpu, sizeof gpu);
    hw_xml_edge(x, hw, gpu, nvs, &gl, (bool[]){false}, 1, NULL);
    hw_xml_edge(x, hw, nvs, gpu, &gl, (bool[]){true}, 1, NULL);
    hw_xml_edge(x, hw, gpu, nic, &nl, (bool[]){false}, 1, nic);
    hw_xml_edge(x, hw, nic, gpu, &nl, (bool[]){true}, 1, NULL);
  }
}

static void hw_xml_port_edge(GString *x, const char *src, const char *dst, int node, int nic,
                             const char *dir)
{
  g_string_append_printf(x, "<route src=\"%s\" dst=\"%s\" symmetrical=\"NO\">"
                            "<link_ctn id=\"lport%d.%d\" direction=\"%s\"/></route>\n",
                         src, dst, node, nic, dir);
}

/* A rail switch r<g>.<k>: the node ports below it, its uplink to the spine (through the group's
 * gateway swr0-g, or in a fabric-wide graph to the spine plane sp.<k>) and the group's reducing
 * switch swh0-g. Paths that would cross the switch
 * between rails carry a pad, so that changing rail over NVLink (two links) stays the shortest. */
static void hw_xml_rail_switch(GString *x, const hw_cluster *hw, int g, int k, int node0, int node1,
                               bool fabric)
{
  char rs[32], nic[32], gw[32], swh[32];
  g_snprintf(rs, sizeof rs, "r%d.%d", g, k);
  g_snprintf(gw, sizeof gw, "swr0-%d", g);
  g_snprintf(swh, sizeof swh, "swh0-%d", g);
  for (int n = node0; n <= node1; n++) {
    int port = hw->port_link0 + n;
    g_snprintf(nic, sizeof nic, "x%d.%d", n, k);
    if (hw_port_is_free(hw, n)) {
      hw_xml_port_edge(x, nic, rs, n, k, "UP");
      hw_xml_port_edge(x, rs, nic, n, k, "DOWN");
      continue;
    }
    hw_xml_edge(x, hw, nic, rs, &port, (bool[]){false}, 1, NULL);
    hw_xml_edge(x, hw, rs, nic, &port, (bool[]){true}, 1, NULL);
  }
  int swl = hw->swl_link0[0] + g;
  hw_xml_edge(x, hw, rs, swh, &swl, (bool[]){false}, 1, rs);
  hw_xml_edge(x, hw, swh, rs, &swl, (bool[]){true}, 1, rs);
  if (hw->cfg->network.ntiers > 1) {
    int up = hw_uplink(hw, 0, g, k);
    if (fabric) /* to rail k's spine plane, which meets other rails only at the spine switch */
      g_snprintf(gw, sizeof gw, "sp.%d", k);
    hw_xml_edge(x, hw, rs, gw, &up, (bool[]){false}, 1, rs);
    hw_xml_edge(x, hw, gw, rs, &up, (bool[]){true}, 1, NULL);
  }
}

/* The vertices of rail leaf group g's graph (hw_xml_rail_graph): its GPUs, node switches,
 * reducing switch and gateway, NIC routers and rail switches. */
static void hw_xml_rail_vertices(GString *x, const hw_cluster *hw, int g, int first, int last,
                                 double speed)
{
  int node0 = first / hw->gpn, node1 = (last - 1) / hw->gpn;
  char name[32];
  for (int e = first; e < last; e++) {
    hw_host_name(e, name, sizeof name);
    g_string_append_printf(x, "<host id=\"%s\" speed=\"%.17gf\"/>\n", name, speed);
  }
  for (int n = node0; n <= node1; n++)
    g_string_append_printf(x, "<host id=\"nvs-%d\" speed=\"1e9f\"/>\n", n);
  g_string_append_printf(x, "<host id=\"swh0-%d\" speed=\"1e9f\"/><router id=\"swr0-%d\"/>\n", g, g);
  for (int n = node0; n <= node1; n++)
    for (int k = 0; k < hw->nics; k++)
      g_string_append_printf(x, "<router id=\"x%d.%d\"/>\n", n, k);
  for (int k = 0; k < hw->rails; k++)
    g_string_append_printf(x, "<router id=\"r%d.%d\"/>\n", g, k);
}

static void hw_xml_rail_edges(GString *x, const hw_cluster *hw, int g, int first, int last,
                              bool fabric)
{
  int node0 = first / hw->gpn, node1 = (last - 1) / hw->gpn;
  for (int n = node0; n <= node1; n++)
    hw_xml_rail_node(x, hw, n, last);
  for (int k = 0; k < hw->rails; k++)
    hw_xml_rail_switch(x, hw, g, k, node0, node1, fabric);
}

/* One hop of a stored path, as the graph's edge names it. */
static void hw_xml_port_hop(GString *x, const hw_cluster *hw, int node, int nic, bool down)
{
  if (hw_port_is_free(hw, node))
    g_string_append_printf(x, "<link_ctn id=\"lport%d.%d\" direction=\"%s\"/>", node, nic,
                           down ? "DOWN" : "UP");
  else
    hw_xml_one(x, hw, hw->port_link0 + node, down);
}

/* The path SimGrid's search finds from GPU a to GPU b of one rail group's graph (the edges
 * hw_xml_rail_node and hw_xml_rail_switch declare), stored whole: the links of each edge in
 * turn, each edge's own backwards, as SimGrid's Dijkstra zone lists them when it walks the
 * path back from b (tests/test_topology.c holds every pair equal, link by link). Same node:
 * NVLink through the NVSwitch; same rail: the NIC (and its pad), the rail switch; another
 * rail: NVLink to the GPU on b's rail, then its NIC and rail (PXN). */
static void hw_xml_rail_bypass(GString *x, const hw_cluster *hw, int a, int b)
{
  int gpn = hw->gpn, n = a / gpn, m = b / gpn, i = a % gpn, j = b % gpn;
  char an[32], bn[32];
  hw_host_name(a, an, sizeof an);
  hw_host_name(b, bn, sizeof bn);
  g_string_append_printf(x, "<bypassRoute src=\"%s\" dst=\"%s\">", an, bn);
  if (n == m) {
    hw_xml_one(x, hw, hw->gpu_link0 + a, false);
    hw_xml_one(x, hw, hw->gpu_link0 + b, true);
  } else {
    if (i == j) {
      g_string_append_printf(x, "<link_ctn id=\"lpad-x%d.%d\"/>", n, i);
      hw_xml_one(x, hw, hw->nic_link0 + n * hw->nics + i, false);
    } else {
      hw_xml_one(x, hw, hw->gpu_link0 + a, false);
      hw_xml_one(x, hw, hw->nic_link0 + n * hw->nics + j, false);
      hw_xml_one(x, hw, hw->gpu_link0 + n * gpn + j, true);
    }
    hw_xml_port_hop(x, hw, n, j, false);
    hw_xml_port_hop(x, hw, m, j, true);
    hw_xml_one(x, hw, hw->nic_link0 + m * hw->nics + j, true);
  }
  g_string_append(x, "</bypassRoute>\n");
}

/* The stored paths of `pairs` (sorted keys a << 32 | b, hw_pair_keys) whose two GPUs are in
 * [first, last), one rail group: SimGrid then finds their route in a map (a bypass route)
 * rather than walking the search's predecessors back edge by edge (each step a scan of a
 * vertex's edges, a rail switch has one per node), most of the work of starting a transfer.
 * Other pairs are still searched. Only where every GPU's NIC is its rail. */
static void hw_xml_rail_bypasses(GString *x, const hw_cluster *hw, const GArray *pairs, int first,
                                 int last)
{
  if (!pairs || hw->rails != hw->nics)
    return;
  guint lo = 0, hi = pairs->len;
  while (lo < hi) { /* the first key of GPU `first` */
    guint mid = lo + (hi - lo) / 2;
    if (g_array_index(pairs, guint64, mid) >> 32 < (guint64)first)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (guint i = lo; i < pairs->len; i++) {
    guint64 key = g_array_index(pairs, guint64, i);
    int a = (int)(key >> 32), b = (int)(key & 0xffffffffu);
    if (a >= last)
      break;
    if (b >= first && b < last && a != b)
      hw_xml_rail_bypass(x, hw, a, b);
  }
}

/* The GPUs of leaf group g: [*first, *last) of the platform's ngpus. */
static void hw_rail_group_gpus(const hw_cluster *hw, int g, int ngpus, int *first, int *last)
{
  *first = g * hw->nps[0] * hw->gpn;
  *last = MIN(*first + hw->nps[0] * hw->gpn, ngpus);
}

/* A rail leaf group as a graph of its GPUs, NICs, node and rail switches that SimGrid searches
 * (Dijkstra, cached per source): O(GPUs) routes where the table needs O(GPUs^2), which made a
 * 32-node SU hold 65,000 routes and 8,192 GPUs load 4x slower than a fat tree. Exact only where
 * hw_rail_graph_exact says; tests/test_topology.c holds every route equal to the table's. */
static void hw_xml_rail_graph(GString *x, const hw_cluster *hw, int g, int first, int last,
                              double speed, const GArray *pairs)
{
  g_string_append_printf(x, "<zone id=\"t0-%d\" routing=\"DijkstraCache\">\n", g);
  hw_xml_rail_vertices(x, hw, g, first, last, speed);
  hw_xml_rail_edges(x, hw, g, first, last, false);
  hw_xml_rail_bypasses(x, hw, pairs, first, last);
  g_string_append(x, "</zone>\n");
}

/* The spine of a fabric-wide rail graph: rail k's spine plane sp.<k> joins the rail switches of
 * rail k, and the spine's reducing switch swh1-0 is reached from each plane and from each group's
 * reducing switch, as the table does. A flow that changed rail there would cross one link more
 * than over NVLink (PXN), and a GPU reaches swh1-0 through its group's switch by one more. */
static void hw_xml_rail_spine(GString *x, const hw_cluster *hw, int groups)
{
  char sp[32], swh[32];
  int swl = hw->swl_link0[1];
  for (int k = 0; k < hw->rails; k++) {
    g_snprintf(sp, sizeof sp, "sp.%d", k);
    hw_xml_edge(x, hw, sp, "swh1-0", &swl, (bool[]){false}, 1, NULL);
    hw_xml_edge(x, hw, "swh1-0", sp, &swl, (bool[]){true}, 1, NULL);
  }
  for (int g = 0; g < groups; g++) {
    g_snprintf(swh, sizeof swh, "swh0-%d", g);
    int up[] = {hw->up_link0[0] + g, swl};
    hw_xml_edge(x, hw, swh, "swh1-0", up, (bool[]){false, false}, 2, NULL);
    int down[] = {swl, hw->up_link0[0] + g};
    hw_xml_edge(x, hw, "swh1-0", swh, down, (bool[]){true, true}, 2, NULL);
  }
}

/* The most GPUs a fabric-wide rail graph holds: the SuperPOD's 1,016 and 4 SUs of 32 DGX. SimGrid
 * searches the whole graph once per sending GPU, so its cost grows with GPUs x senders: a DES
 * step of Llama 3 405B on dgx-h100 took 31 % more instructions at 1,024 GPUs (4 leaf groups),
 * 28 % more CPU at 2,048 and 2.4x at 4,096. Above this, leaf groups stay zones of their own (a
 * flow that changes both group and rail then leaves by the sender's rail). */
#define HW_RAIL_FABRIC_MAX_GPUS 1024

/* Whether the whole fabric is one searched graph (hw_xml_rail_fabric): rail groups that are
 * exact graphs, several of them under one spine, and not too many GPUs. */
static bool hw_rail_fabric_searched(const hw_cluster *hw, int ngpus)
{
  int used_nodes = (ngpus + hw->gpn - 1) / hw->gpn;
  return hw_rail_graph_exact(hw) && hw->cfg->network.ntiers == 2 &&
         hw_group_of(hw, used_nodes - 1, 0) > 0 && ngpus <= HW_RAIL_FABRIC_MAX_GPUS;
}

/* Every rail leaf group and the spine as one graph SimGrid searches. Between leaf groups NCCL's
 * PXN leaves by the NIC on the destination's rail, which depends on the destination: a zone of
 * SimGrid leaves by one gateway whatever the destination, so leaf groups as zones sent such
 * flows out of the sender's own rail. One graph with a spine plane per rail has the table's route
 * as its unique shortest path (tests/test_topology.c holds every pair), at the price of one
 * search over the whole fabric per sending GPU (SimGrid caches it). */
static void hw_xml_rail_fabric(GString *x, const hw_cluster *hw, int ngpus, double speed,
                               const GArray *pairs)
{
  int used_nodes = (ngpus + hw->gpn - 1) / hw->gpn, groups = hw_group_of(hw, used_nodes - 1, 0) + 1;
  int first, last;
  g_string_append(x, "<zone id=\"root\" routing=\"Floyd\">\n");
  hw_xml_all_links(x, hw);
  g_string_append(x, "<zone id=\"fabric\" routing=\"DijkstraCache\">\n");
  for (int g = 0; g < groups; g++) {
    hw_rail_group_gpus(hw, g, ngpus, &first, &last);
    hw_xml_rail_vertices(x, hw, g, first, last, speed);
  }
  g_string_append(x, "<host id=\"swh1-0\" speed=\"1e9f\"/>\n");
  for (int k = 0; k < hw->rails; k++)
    g_string_append_printf(x, "<router id=\"sp.%d\"/>\n", k);
  for (int g = 0; g < groups; g++) {
    hw_rail_group_gpus(hw, g, ngpus, &first, &last);
    hw_xml_rail_edges(x, hw, g, first, last, true);
  }
  hw_xml_rail_spine(x, hw, groups);
  for (int g = 0; g < groups; g++) {
    hw_rail_group_gpus(hw, g, ngpus, &first, &last);
    hw_xml_rail_bypasses(x, hw, pairs, first, last);
  }
  g_string_append(x, "</zone>\n</zone>\n");
}

/* A leaf group of a rail-optimized fabric: its nodes are not subtrees of one switch (each NIC
 * has its rail switch, and rails meet only at the spine), so the group is one zone with a route
 * from the link table between every two of its GPUs. */
static void hw_xml_rail_group(GString *x, const hw_cluster *hw, int g, int ngpus, double speed,
                              bool root, const GArray *pairs)
{
  int first, last;
  hw_rail_group_gpus(hw, g, ngpus, &first, &last);
  int node0 = first / hw->gpn, node1 = (last - 1) / hw->gpn;
  int sw = hw_net_switch(hw, 0, g);
  if (root) { /* a zone's hosts may not follow a sub-zone, so the links need a zone above */
    g_string_append(x, "<zone id=\"root\" routing=\"Floyd\">\n");
    hw_xml_all_links(x, hw);
  }
  if (hw_rail_graph_exact(hw)) {
    hw_xml_rail_graph(x, hw, g, first, last, speed, pairs);
    if (root)
      g_string_append(x, "</zone>\n");
    return;
  }
  g_string_append_printf(x, "<zone id=\"t0-%d\" routing=\"Full\">\n", g);
  char name[32];
  for (int e = first; e < last; e++) {
    hw_host_name(e, name, sizeof name);
    g_string_append_printf(x, "<host id=\"%s\" speed=\"%.17gf\"/>\n", name, speed);
  }
  bool nvswitch = hw->cfg->node.intra.kind != CFG_INTRA_NVLINK_RING;
  for (int n = node0; n <= node1 && nvswitch; n++)
    g_string_append_printf(x, "<host id=\"nvs-%d\" speed=\"1e9f\"/>\n", n);
  g_string_append_printf(x, "<host id=\"swh0-%d\" speed=\"1e9f\"/><router id=\"swr0-%d\"/>\n", g, g);
  for (int a = first; a < last; a++) {
    for (int b = a + 1; b < last; b++)
      hw_xml_pair(x, hw, a, b);
    if (nvswitch)
      hw_xml_pair(x, hw, a, hw_node_switch(hw, a / hw->gpn));
    hw_xml_pair(x, hw, a, sw);
    if (hw->cfg->network.ntiers > 1)
      hw_xml_rail_exit(x, hw, a, g);
  }
  g_string_append_printf(x, "<route src=\"swh0-%d\" dst=\"swr0-%d\" symmetrical=\"NO\">", g, g);
  hw_xml_one(x, hw, hw->swl_link0[0] + g, false);
  g_string_append_printf(x, "</route>\n<route src=\"swr0-%d\" dst=\"swh0-%d\" symmetrical=\"NO\">", g, g);
  hw_xml_one(x, hw, hw->swl_link0[0] + g, true);
  g_string_append(x, "</route>\n</zone>\n");
  if (root)
    g_string_append(x, "</zone>\n");
}

static void hw_xml_group(GString *x, const hw_cluster *hw, int tier, int g, int ngpus, double speed,
                         bool root, const GArray *pairs)
{
  if (tier == 0 && hw->rails) {
    hw_xml_rail_group(x, hw, g, ngpus, speed, root, pairs);
    return;
  }
  int used_nodes = (ngpus + hw->gpn - 1) / hw->gpn;
  int per = tier == 0 ? hw->nps[0] : hw->nps[tier] / hw->nps[tier - 1];
  int child_count = tier == 0 ? used_nodes : (used_nodes + hw->nps[tier - 1] - 1) / hw->nps[tier - 1];
  int c0 = g * per, c1 = MIN(c0 + per, child_count);
  g_string_append_printf(x, "<zone id=\"t%d-%d\" routing=\"Floyd\">\n", tier, g);
  if (root)
    hw_xml_all_links(x, hw);
  for (int c = c0; c < c1; c++) {
    if (tier == 0)
      hw_xml_node(x, hw, c, ngpus, speed, true);
    else
      hw_xml_group(x, hw, tier - 1, c, ngpus, speed, false, pairs);
  }
  /* the switch: a router, and a host for in-network reductions joined to it */
  g_string_append_printf(x,
                         "<zone id=\"sw%d-%d\" routing=\"Full\"><host id=\"swh%d-%d\" speed=\"1e9f\"/>"
                         "<router id=\"swr%d-%d\"/>\n",
                         tier, g, tier, g, tier, g);
  int swl = hw->swl_link0[tier] + g;
  g_string_append_printf(x, "<route src=\"swh%d-%d\" dst=\"swr%d-%d\" symmetrical=\"NO\">", tier, g, tier, g);
  hw_xml_one(x, hw, swl, false);
  g_string_append_printf(x, "</route>\n<route src=\"swr%d-%d\" dst=\"swh%d-%d\" symmetrical=\"NO\">", tier, g, tier, g);
  hw_xml_one(x, hw, swl, true);
  g_string_append(x, "</route></zone>\n");
  for (int c = c0; c < c1; c++) {
    char gw[32];
    hw_child_gateway(tier, c, gw, sizeof gw);
    int link = tier == 0 ? hw->port_link0 + c : hw->up_link0[tier - 1] + c;
    const char *child = tier == 0 ? "node" : "t";
    char cz[32];
    if (tier == 0)
      g_snprintf(cz, sizeof cz, "%s-%d", child, c);
    else
      g_snprintf(cz, sizeof cz, "t%d-%d", tier - 1, c);
    g_string_append_printf(x,
                           "<zoneRoute src=\"%s\" dst=\"sw%d-%d\" gw_src=\"%s\" gw_dst=\"swr%d-%d\" "
                           "symmetrical=\"NO\">",
                           cz, tier, g, gw, tier, g);
    hw_xml_one(x, hw, link, false);
    g_string_append_printf(x,
                           "</zoneRoute>\n<zoneRoute src=\"sw%d-%d\" dst=\"%s\" gw_src=\"swr%d-%d\" "
                           "gw_dst=\"%s\" symmetrical=\"NO\">",
                           tier, g, cz, tier, g, gw);
    hw_xml_one(x, hw, link, true);
    g_string_append(x, "</zoneRoute>\n");
  }
  g_string_append(x, "</zone>\n");
}

static gint hw_key_cmp(gconstpointer a, gconstpointer b)
{
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return (x > y) - (x < y);
}

/* `pairs` (flattened src, dst GPUs) as sorted unique keys a << 32 | b of the first ngpus. */
static GArray *hw_pair_keys(const int *pairs, size_t npairs, int ngpus)
{
  GArray *keys = g_array_sized_new(FALSE, FALSE, sizeof(guint64), (guint)npairs);
  for (size_t i = 0; i < npairs; i++) {
    int a = pairs[2 * i], b = pairs[2 * i + 1];
    guint64 key = (guint64)a << 32 | (guint64)b;
    if (a >= 0 && b >= 0 && a < ngpus && b < ngpus && a != b)
      g_array_append_val(keys, key);
  }
  g_array_sort(keys, hw_key_cmp);
  guint n = 0;
  for (guint i = 0; i < keys->len; i++)
    if (n == 0 || g_array_index(keys, guint64, i) != g_array_index(keys, guint64, n - 1))
      g_array_index(keys, guint64, n++) = g_array_index(keys, guint64, i);
  g_array_set_size(keys, n);
  return keys;
}

char *hw_platform_xml(const hw_cluster *hw, int ngpus, double host_speed)
{
  return hw_platform_xml_routes(hw, ngpus, host_speed, NULL, 0);
}

char *hw_platform_xml_routes(const hw_cluster *hw, int ngpus, double host_speed, const int *pairs,
                             size_t npairs)
{
  g_assert(ngpus >= 1 && ngpus <= hw->ngpus);
  g_autoptr(GArray) keys = hw_pair_keys(pairs, npairs, ngpus);
  GString *x = g_string_new("<?xml version='1.0'?>\n"
                            "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                            "<platform version=\"4.1\">\n");
  int used_nodes = (ngpus + hw->gpn - 1) / hw->gpn;
  if (used_nodes == 1) {
    hw_xml_node(x, hw, 0, ngpus, host_speed, false);
  } else if (hw_rail_fabric_searched(hw, ngpus)) {
    hw_xml_rail_fabric(x, hw, ngpus, host_speed, keys);
  } else {
    /* the lowest tier that spans all used nodes is the root */
    int top = 0;
    while (hw_group_of(hw, used_nodes - 1, top) != 0)
      top++;
    hw_xml_group(x, hw, top, 0, ngpus, host_speed, true, keys);
  }
  g_string_append(x, "</platform>\n");
  return g_string_free(x, FALSE);
}

int hw_group_tier(const hw_cluster *hw, const int *ranks, int n)
{
  int top = -1;
  for (int m = 1; m < n; m++) {
    hw_route r;
    hw_route_get(hw, ranks[0], ranks[m], &r);
    top = MAX(top, r.tier);
  }
  return top;
}
