/* dlsim coll -c CLUSTER --op OP --gpus N [--group-size G] [--min 8B --max 8GiB --factor 2]
 *            [--algo A] [--proto P] [--engine des|analytic] [--json | --csv] [--set K=V]...
 *            [--format nccl-tests|omb|omb-latency] [--runtime NAME]
 * A table in the layout of nccl-tests (out-of-place and in-place columns, the footer), with
 * the algorithm and protocol the model picked, so that dlsim calibrate --nccl reads it; or in
 * the layout of the OSU Micro-Benchmarks (osu_allreduce ... --full, osu_bw, osu_latency), which
 * dlsim calibrate --omb reads. The group is the first N GPUs; --group-size splits them into N/G
 * groups that run at once (and contend). */
#include "cli/cli.h"
#include "calibration/calibration.h"
#include "collectives/collectives.h"
#include "engine/engine.h"
#include "report/report.h"
#include "units/units.h"


#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  double size, time, algbw, busbw;
  const char *algo;
  const char *proto;
} coll_row;

typedef struct {
  cfg_cluster *cluster;
  hw_cluster *hw;
  prog_coll op;
  int gpus, group;
  eng_options opt;
  cfg_collectives runtime_cfg; /* --runtime: the profile's keys */
  coll_runtime *runtime;
  int window; /* osu_bw's messages in flight, or 0: one collective at a time */
} coll_setup;

/* osu_bw's time per message, streamed over its window from the closed form's schedule (one
 * pair of GPUs contends with nothing: the DES gives the same schedule). */
static bool coll_streamed_time(const coll_setup *s, double bytes, eng_coll_result *r, GError **err)
{
  coll_planner *pl = coll_planner_new(s->hw, s->opt.algo, s->opt.proto, true);
  coll_planner_set_runtime(pl, s->runtime);
  const int pair[] = {0, 1};
  const coll_schedule *sc = coll_planner_get(pl, s->op, pair, 2, 0, bytes, NULL, err);
  if (sc) {
    r->time = coll_schedule_streamed(sc, s->runtime, s->window);
    r->algo = sc->plan->algo;
    r->proto = sc->proto;
  }
  coll_planner_free(pl);
  return sc != NULL;
}

static bool coll_measure(const coll_setup *s, double bytes, coll_row *row, GError **err)
{
  eng_coll_result r;
  if (s->window > 1 ? !coll_streamed_time(s, bytes, &r, err)
                    : !eng_collective_time(s->hw, &s->opt, s->op, s->gpus, s->group, bytes, &r, err))
    return false;
  row->size = bytes;
  row->time = r.time;
  row->algo = coll_algo_name(r.algo);
  row->proto = r.proto >= 0 ? cfg_proto_name((cfg_proto)r.proto) : "-";
  row->algbw = row->time > 0 ? bytes / row->time / 1e9 : 0;
  row->busbw = row->algbw * coll_busbw_factor(s->op, s->op == PROG_COLL_SENDRECV ? 2 : s->group);
  return true;
}

/* nccl-tests' time column: fewer decimals as the time grows. */
static void coll_time_str(double seconds, char *buf, size_t len)
{
  double us = seconds * 1e6;
  g_snprintf(buf, len, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
}

/* nccl-tests' redop, root and count columns: reductions say "sum", the rooted collectives
 * root at 0, and a collective that splits its buffer over the ranks counts one rank's part. */
static void coll_op_columns(const coll_setup *s, double size, const char **redop, int *root,
                            double *count)
{
  bool reduces = s->op == PROG_COLL_ALLREDUCE || s->op == PROG_COLL_REDUCESCATTER ||
                 s->op == PROG_COLL_REDUCE;
  bool split = s->op == PROG_COLL_ALLGATHER || s->op == PROG_COLL_REDUCESCATTER ||
               s->op == PROG_COLL_ALLTOALL;
  *redop = reduces ? "sum" : "none";
  *root = s->op == PROG_COLL_BROADCAST || s->op == PROG_COLL_REDUCE ? 0 : -1;
  *count = floor(size / 4 / (split ? s->group : 1));
}

/* What was modelled, as a comment line above either layout. */
static void coll_print_title(const coll_setup *s)
{
  const cfg_cluster *c = s->cluster;
  int nodes = (s->gpus + c->node.gpus_per_node - 1) / c->node.gpus_per_node;
  printf("# dlsim coll: %s on %d GPUs (%d node%s x %d) of %s, ", prog_coll_name(s->op), s->gpus,
         nodes, nodes == 1 ? "" : "s", MIN(s->gpus, c->node.gpus_per_node), c->name);
  if (c->node.nvlink_domain > c->node.gpus_per_node)
    printf("NVLink domains of %d GPUs, ", c->node.nvlink_domain);
  if (s->group != s->gpus)
    printf("%d groups of %d at once, ", s->gpus / s->group, s->group);
  if (s->runtime)
    printf("runtime %s, ", coll_runtime_name(s->runtime));
  printf("engine %s, algorithm %s\n", eng_kind_name(s->opt.kind), coll_algo_name(s->opt.algo));
}

static void coll_print_header(const coll_setup *s)
{
  coll_print_title(s);
  printf("#\n");
  printf("#%62s%-35s%s\n", "", "out-of-place", "in-place");
  printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int run = 0; run < 2; run++)
    printf("  %7s  %6s  %6s %6s", "time", "algbw", "busbw", "#wrong");
  printf("  %-10s %s\n", "algorithm", "protocol");
  printf("#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int run = 0; run < 2; run++)
    printf("  %7s  %6s  %6s%s", "(us)", "(GB/s)", "(GB/s)", run ? "\n" : "       ");
}

/* The rows and footer of nccl-tests: the model times a collective the same in place or not,
 * and checks no data (#wrong N/A, as nccl-tests prints it without -c). */
static void coll_print_text(const coll_setup *s, const GArray *rows)
{
  coll_print_header(s);
  double busbw_sum = 0;
  for (guint i = 0; i < rows->len; i++) {
    const coll_row *r = &g_array_index(rows, coll_row, i);
    const char *redop;
    int root;
    double count;
    char time[32];
    coll_op_columns(s, r->size, &redop, &root, &count);
    coll_time_str(r->time, time, sizeof time);
    printf("%12.0f  %12.0f  %8s  %6s  %6d", r->size, count, "float", redop, root);
    for (int run = 0; run < 2; run++)
      printf("  %7s  %6.2f  %6.2f  %5s", time, r->algbw, r->busbw, "N/A");
    printf("  %-10s %s\n", r->algo, r->proto);
    busbw_sum += r->busbw;
  }
  printf("# Out of bounds values : 0 OK\n");
  printf("# Avg bus bandwidth    : %g\n#\n", rows->len ? busbw_sum / rows->len : 0);
}

/* ---- the OSU Micro-Benchmarks' layout ------------------------------------------------------ */

typedef enum { COLL_FORMAT_NCCL, COLL_FORMAT_OMB, COLL_FORMAT_OMB_LATENCY } coll_format;

/* OMB's allgather and alltoall sizes are what one rank sends to one other (allgather: its
 * share), a rank's whole buffer over the group; every other benchmark's is the whole buffer,
 * as nccl-tests' is. */
static double coll_omb_share(const coll_setup *s, coll_format f)
{
  bool split = s->op == PROG_COLL_ALLGATHER || s->op == PROG_COLL_ALLTOALL;
  return f != COLL_FORMAT_NCCL && split ? s->group : 1;
}

/* The benchmark OMB would run: its title, and whether it reports a bandwidth. */
static const char *coll_omb_title(prog_coll op, coll_format f, bool *bandwidth)
{
  static const char *const titles[] = {
      [PROG_COLL_ALLREDUCE] = "Allreduce Latency Test",
      [PROG_COLL_ALLGATHER] = "Allgather Latency Test",
      [PROG_COLL_REDUCESCATTER] = "Reduce_scatter Latency Test",
      [PROG_COLL_ALLTOALL] = "All-to-All Personalized Exchange Latency Test",
      [PROG_COLL_BROADCAST] = "Broadcast Latency Test",
      [PROG_COLL_REDUCE] = "Reduce Latency Test",
      [PROG_COLL_SENDRECV] = "Bandwidth Test",
  };
  *bandwidth = op == PROG_COLL_SENDRECV && f == COLL_FORMAT_OMB;
  return op == PROG_COLL_SENDRECV && f == COLL_FORMAT_OMB_LATENCY ? "Latency Test" : titles[op];
}

/* As OMB 7.5 prints it with -d cuda (and --full for collectives: one evaluation of a model
 * has min = max = avg and 1 iteration): sizes in bytes, %-10d, values %18.2f. */
static void coll_print_omb(const coll_setup *s, const GArray *rows, coll_format f)
{
  bool bandwidth = false;
  const char *title = coll_omb_title(s->op, f, &bandwidth);
  bool full = s->op != PROG_COLL_SENDRECV;
  double share = coll_omb_share(s, f);
  coll_print_title(s);
  printf("# OSU MPI-CUDA %s v7.5\n", title);
  if (bandwidth)
    printf("# Size      Bandwidth (MB/s)\n");
  else
    printf("# Size       Avg Latency(us)%s\n",
           full ? "   Min Latency(us)   Max Latency(us)  Iterations" : "");
  for (guint i = 0; i < rows->len; i++) {
    const coll_row *r = &g_array_index(rows, coll_row, i);
    double size = r->size / share, us = r->time * 1e6;
    printf("%-10.0f%18.2f", size, bandwidth ? r->size / us : us);
    if (full)
      printf("%18.2f%18.2f%12d", us, us, 1);
    printf("\n");
  }
}

static bool coll_format_choice(const char *value, const coll_setup *s, coll_format *out,
                               GError **err)
{
  const char *names[] = {"nccl-tests", "omb", "omb-latency"};
  int i = value ? cli_choice("--format", value, names, G_N_ELEMENTS(names), err) : 0;
  if (i < 0)
    return false;
  if (i == COLL_FORMAT_OMB_LATENCY && s->op != PROG_COLL_SENDRECV) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--format omb-latency is osu_latency, point to point: it needs --op sendrecv "
                "(--format omb prints %s as OMB does)", prog_coll_name(s->op));
    return false;
  }
  *out = (coll_format)i;
  return true;
}

static void coll_print_json(const GArray *rows, bool csv)
{
  cJSON *a = cJSON_CreateArray();
  for (guint i = 0; i < rows->len; i++) {
    const coll_row *r = &g_array_index(rows, coll_row, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "size_bytes", r->size);
    cJSON_AddNumberToObject(o, "time_us", r->time * 1e6);
    cJSON_AddNumberToObject(o, "algbw_GBps", r->algbw);
    cJSON_AddNumberToObject(o, "busbw_GBps", r->busbw);
    cJSON_AddStringToObject(o, "algorithm", r->algo);
    cJSON_AddStringToObject(o, "protocol", r->proto);
    cJSON_AddItemToArray(a, o);
  }
  if (csv)
    cli_csv_print(stdout, a);
  else
    rep_json_print(stdout, a);
  cJSON_Delete(a);
}

static bool coll_algo_choice(const char *value, coll_algo *out, GError **err)
{
  const char *names[COLL_NALGOS];
  for (int a = 0; a < COLL_NALGOS; a++)
    names[a] = coll_algo_name((coll_algo)a);
  int i = cli_choice("--algo", value, names, COLL_NALGOS, err);
  *out = i >= 0 ? (coll_algo)i : *out;
  return i >= 0;
}

static bool coll_proto_choice(const char *value, int *out, GError **err)
{
  const char *names[CFG_NPROTOS + 1] = {"auto"};
  for (int p = 0; p < CFG_NPROTOS; p++)
    names[p + 1] = cfg_proto_name((cfg_proto)p);
  int i = cli_choice("--proto", value, names, CFG_NPROTOS + 1, err);
  *out = i > 0 ? i - 1 : i == 0 ? COLL_PROTO_AUTO : *out;
  return i >= 0;
}

/* --runtime NAME: a profile of configs/runtimes (or a file), whose choices and costs the
 * collective then runs with. */
static bool coll_runtime_load(coll_setup *s, const char *name, GError **err)
{
  if (!name)
    return true;
  if (!cfg_runtime_load(name, &s->runtime_cfg, err))
    return false;
  g_free(s->runtime_cfg.runtime);
  s->runtime_cfg.runtime = g_strdup(name);
  s->runtime = coll_runtime_new(&s->runtime_cfg, NULL, err);
  s->opt.runtime = s->runtime;
  return s->runtime != NULL;
}

static bool coll_setup_load(coll_setup *s, const char *cluster, char **sets, const char *op,
                            const char *algo, const char *proto, const char *engine, GError **err)
{
  s->opt.algo = COLL_ALGO_AUTO;
  s->opt.proto = COLL_PROTO_AUTO;
  if (!cli_coll_op(op, &s->op, err) || !cli_engine(engine, &s->opt.kind, err) ||
      (algo && !coll_algo_choice(algo, &s->opt.algo, err)) ||
      (proto && !coll_proto_choice(proto, &s->opt.proto, err)) ||
      !cfg_load_with(cluster, NULL, sets, &s->cluster, NULL, err))
    return false;
  s->hw = hw_cluster_new(s->cluster);
  return true;
}

static bool coll_check_group(coll_setup *s, GError **err)
{
  int total = hw_gpus(s->hw);
  if (s->gpus < 1 || s->gpus > total) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--gpus %d: the cluster has %d GPUs (1..%d)",
                s->gpus, total, total);
    return false;
  }
  if (s->group <= 0)
    s->group = s->gpus;
  if (s->gpus % s->group != 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--group-size %d does not divide --gpus %d",
                s->group, s->gpus);
    return false;
  }
  if (s->op == PROG_COLL_SENDRECV && s->gpus < 2) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "sendrecv needs --gpus 2 or more");
    return false;
  }
  if (s->opt.algo != COLL_ALGO_AUTO) {
    g_autofree int *ranks = g_new(int, s->group);
    for (int i = 0; i < s->group; i++)
      ranks[i] = i;
    if (!coll_algo_applies(s->hw, s->op, ranks, s->group, s->opt.algo)) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--algo %s cannot run %s on %d GPUs of this cluster",
                  coll_algo_name(s->opt.algo), prog_coll_name(s->op), s->group);
      return false;
    }
  }
  return true;
}

/* nccl-tests prints a few dozen rows; ten thousand is already more than anyone reads. */
#define COLL_MAX_ROWS 10000

/* The next size of the sweep: whole bytes, and always larger (a factor near 1 would otherwise
 * round back to the same size forever). */
static double coll_next_size(double size, double factor)
{
  return MAX(floor(size * factor), size + 1);
}

/* Rows of the sweep, counted up to one past the limit. */
static long coll_count_rows(double lo, double hi, double factor)
{
  long n = 0;
  for (double size = lo; size <= hi * (1 + 1e-12) && n <= COLL_MAX_ROWS;
       size = coll_next_size(size, factor))
    n++;
  return n;
}


/* The default sweep: nccl-tests' -b 8 -e 8G of the README, or OMB's own defaults (1 B to
 * 1 MiB for collectives, 4 MiB point to point). */
static void coll_default_sizes(const coll_setup *s, coll_format f, const char **min, const char **max)
{
  if (f == COLL_FORMAT_NCCL) {
    *min = *min ? *min : "8";
    *max = *max ? *max : "8GiB";
  } else {
    *min = *min ? *min : "1";
    *max = *max ? *max : s->op == PROG_COLL_SENDRECV ? "4MiB" : "1MiB";
  }
}

static bool coll_sizes(const char *min, const char *max, double factor, double *lo, double *hi,
                       GError **err)
{
  g_autofree char *why = NULL;
  if (!units_parse(min, UNITS_BYTES, lo, &why) || !units_parse(max, UNITS_BYTES, hi, &why)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "--min/--max: %s", why);
    return false;
  }
  if (!(*lo >= 1 && *hi >= *lo && isfinite(*hi) && factor > 1.0 && isfinite(factor))) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "sizes: need 1 <= --min <= --max and a finite --factor > 1");
    return false;
  }
  long rows = coll_count_rows(*lo, *hi, factor);
  if (rows > COLL_MAX_ROWS) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--factor %.9g from %.0f to %.0f bytes makes more than %d rows (a larger factor, "
                "or a narrower --min/--max)", factor, *lo, *hi, COLL_MAX_ROWS);
    return false;
  }
  return true;
}

int cli_coll(int argc, char **argv)
{
  g_autofree char *cluster = NULL, *op = NULL, *algo = NULL, *proto = NULL, *engine = NULL;
  g_autofree char *min = NULL, *max = NULL, *format = NULL, *runtime = NULL;
  g_auto(GStrv) sets = NULL;
  gboolean json = FALSE, csv = FALSE;
  int gpus = 0, group = 0;
  double factor = 2.0;
  GOptionEntry entries[] = {
      cli_opt(CLI_CLUSTER, &cluster, NULL),
      {"op", 0, 0, G_OPTION_ARG_STRING, &op, "allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv", "OP"},
      cli_opt(CLI_GPUS, &gpus, "GPUs taking part (the first N)"),
      cli_opt(CLI_GROUP_SIZE, &group, "Split them into groups of G running at once"),
      {"min", 0, 0, G_OPTION_ARG_STRING, &min, "Smallest size (default 8B; OMB: 1B)", "SIZE"},
      {"max", 0, 0, G_OPTION_ARG_STRING, &max, "Largest size (default 8GiB; OMB: 1MiB, 4MiB for sendrecv)", "SIZE"},
      {"factor", 0, 0, G_OPTION_ARG_DOUBLE, &factor, "Size multiplier between rows (default 2)", "F"},
      cli_opt(CLI_ALGO, &algo, "auto, ring, tree, rhd, hierarchical, nvls, nvls-tree, sharp, pairwise, direct, rd, multi-leader"),
      cli_opt(CLI_PROTO, &proto, NULL),
      cli_opt(CLI_ENGINE, &engine, NULL),
      {"format", 0, 0, G_OPTION_ARG_STRING, &format,
       "nccl-tests (default), omb (osu_allreduce --full ..., osu_bw for sendrecv) or omb-latency "
       "(osu_latency); OMB's allgather/alltoall size is one rank's share", "F"},
      {"runtime", 0, 0, G_OPTION_ARG_STRING, &runtime,
       "Communication runtime: nccl (default), mpi-mvapich, mpi-ucx, mpi-cxi, gloo "
       "(configs/runtimes) or a profile file", "NAME"},
      cli_opt(CLI_JSON, &json, "Print JSON rows"),
      cli_opt(CLI_CSV, &csv, "Print CSV rows (size_bytes, time_us, algbw_GBps, busbw_GBps, ...)"),
      cli_opt(CLI_SET, &sets, "Override a cluster key, repeatable"),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- a collective's time vs size, as nccl-tests prints it", &argc, &argv, &code))
    return code;
  if (!cluster || !op || gpus == 0) {
    fprintf(stderr, "dlsim: error: dlsim coll needs -c CLUSTER, --op OP and --gpus N (see --help)\n");
    return 2;
  }
  if (format && (json || csv)) {
    fprintf(stderr, "dlsim: error: --format is a text layout; --json and --csv print rows of their own\n");
    return 2;
  }
  coll_setup s = {.gpus = gpus, .group = group};
  coll_format f = COLL_FORMAT_NCCL;
  GError *err = NULL;
  double lo = 0, hi = 0;
  bool ok = coll_setup_load(&s, cluster, sets, op, algo, proto, engine, &err) &&
            coll_runtime_load(&s, runtime, &err) && coll_format_choice(format, &s, &f, &err) && coll_check_group(&s, &err);
  const char *from = min, *to = max;
  if (ok)
    coll_default_sizes(&s, f, &from, &to);
  if (ok && f == COLL_FORMAT_OMB && s.op == PROG_COLL_SENDRECV)
    s.window = CALIB_OMB_WINDOW;
  ok = ok && coll_sizes(from, to, factor, &lo, &hi, &err);
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(coll_row));
  double share = ok ? coll_omb_share(&s, f) : 1;
  for (double size = lo; ok && size <= hi * (1 + 1e-12); size = coll_next_size(size, factor)) {
    coll_row row;
    ok = coll_measure(&s, size * share, &row, &err);
    if (ok)
      g_array_append_val(rows, row);
  }
  if (ok && f != COLL_FORMAT_NCCL)
    coll_print_omb(&s, rows, f);
  else if (ok)
    json || csv ? coll_print_json(rows, csv) : coll_print_text(&s, rows);
  g_array_free(rows, TRUE);
  coll_runtime_free(s.runtime);
  cfg_collectives_clear(&s.runtime_cfg);
  hw_cluster_free(s.hw);
  cfg_cluster_free(s.cluster);
  return ok ? 0 : cli_fail(err);
}
