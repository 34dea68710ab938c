/* The request stream: arrival times and lengths, drawn from the workload's distributions with
 * its seed (GLib's Mersenne twister), or replayed from a CSV trace. Arrivals, lengths and
 * prefix groups draw from separate generators, so that changing the rate moves the arrivals
 * and nothing else: at another rate the same requests arrive at scaled times. */
#include "serving/serving_internal.h"

#include <math.h>
#include <string.h>

/* ---- CSV ------------------------------------------------------------------------------------ */

/* Reads the named numeric columns of a CSV file with a header line into rows of `ncols`
 * doubles. */
static bool srv_csv_read(const char *path, const char *const *cols, int ncols, const char *key,
                         GArray *rows, GError **err)
{
  g_autofree char *text = NULL;
  GError *io = NULL;
  if (!g_file_get_contents(path, &text, NULL, &io)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s", key, io->message);
    g_error_free(io);
    return false;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int at[8] = {0};
  bool header = false;
  for (int l = 0; lines[l]; l++) {
    g_strstrip(lines[l]);
    if (lines[l][0] == '\0' || lines[l][0] == '#')
      continue;
    g_auto(GStrv) cells = g_strsplit(lines[l], ",", -1);
    int n = (int)g_strv_length(cells);
    if (!header) {
      for (int c = 0; c < ncols; c++) {
        at[c] = -1;
        for (int k = 0; k < n; k++)
          if (strcmp(g_strstrip(cells[k]), cols[c]) == 0)
            at[c] = k;
        if (at[c] < 0) {
          g_autofree char *want = g_strjoinv(", ", (char **)cols);
          g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                      "%s:%d: %s: no column '%s' in the header (expected columns %s)", path,
                      l + 1, key, cols[c], want);
          return false;
        }
      }
      header = true;
      continue;
    }
    double v[8];
    for (int c = 0; c < ncols; c++) {
      char *end = NULL;
      const char *cell = at[c] < n ? g_strstrip(cells[at[c]]) : "";
      v[c] = g_ascii_strtod(cell, &end);
      if (end == cell || *end != '\0' || !isfinite(v[c]) || v[c] < 0) {
        g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                    "%s:%d: %s: column %s: expected a number >= 0, got '%s'", path, l + 1, key,
                    cols[c], cell);
        return false;
      }
    }
    g_array_append_vals(rows, v, 1);
  }
  if (rows->len == 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: %s: no rows", path, key);
    return false;
  }
  return true;
}

/* ---- lengths --------------------------------------------------------------------------------- */

static int srv_uniform_length(GRand *g, int mean, double spread)
{
  double x = mean * (1 + spread * (2 * g_rand_double(g) - 1));
  return MAX(1, (int)lround(x));
}

static bool srv_draw_lengths(const cfg_requests *q, srv_request *reqs, int n, GError **err)
{
  g_autoptr(GRand) g = g_rand_new_with_seed((guint32)q->seed);
  GArray *rows = NULL;
  if (q->distribution == CFG_LENGTHS_FILE) {
    const char *cols[] = {"prompt_tokens", "output_tokens", NULL};
    rows = g_array_new(FALSE, FALSE, 2 * sizeof(double));
    if (!srv_csv_read(q->lengths_file, cols, 2, "serving.requests.lengths_file", rows, err)) {
      g_array_free(rows, TRUE);
      return false;
    }
  }
  for (int i = 0; i < n; i++) {
    srv_request *r = &reqs[i];
    if (rows) {
      const double *row = (const double *)rows->data + 2 * g_rand_int_range(g, 0, (gint32)rows->len);
      r->prompt = MAX(1, (int)lround(row[0]));
      r->output = MAX(1, (int)lround(row[1]));
    } else if (q->distribution == CFG_LENGTHS_UNIFORM) {
      r->prompt = srv_uniform_length(g, q->prompt_tokens, q->spread);
      r->output = srv_uniform_length(g, q->output_tokens, q->spread);
    } else {
      r->prompt = q->prompt_tokens;
      r->output = q->output_tokens;
    }
  }
  if (rows)
    g_array_free(rows, TRUE);
  return true;
}

/* ---- arrivals -------------------------------------------------------------------------------- */

static double srv_normal(GRand *g)
{
  /* Box-Muller */
  double u = 1 - g_rand_double(g), v = g_rand_double(g);
  return sqrt(-2 * log(u)) * cos(2 * G_PI * v);
}

/* A Gamma(shape, 1) variate: Marsaglia and Tsang, boosted below shape 1. */
static double srv_gamma(GRand *g, double shape)
{
  if (shape < 1)
    return srv_gamma(g, shape + 1) * pow(1 - g_rand_double(g), 1 / shape);
  double d = shape - 1.0 / 3, c = 1 / sqrt(9 * d);
  for (;;) {
    double x = srv_normal(g), v = 1 + c * x;
    if (v <= 0)
      continue;
    v = v * v * v;
    double u = 1 - g_rand_double(g);
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
      return d * v;
  }
}

static void srv_draw_arrivals(const cfg_requests *q, double rate, srv_request *reqs, int n)
{
  g_autoptr(GRand) g = g_rand_new_with_seed((guint32)q->seed ^ 0x5eed5eedu);
  double t = 0;
  for (int i = 0; i < n; i++) {
    if (q->concurrency > 0) {
      /* client i's first request; the rest are sent when a client is free. A ramp keeps a
       * closed loop of fixed lengths from running as one convoy of prompts for ever */
      reqs[i].arrival = i < q->concurrency ? q->ramp * i / q->concurrency : NAN;
      continue;
    }
    reqs[i].arrival = t;
    switch (q->arrival) {
    case CFG_ARRIVAL_POISSON:
      t += -log(1 - g_rand_double(g)) / rate;
      break;
    case CFG_ARRIVAL_GAMMA:
      t += srv_gamma(g, q->burstiness) / (q->burstiness * rate);
      break;
    case CFG_ARRIVAL_UNIFORM:
      t += 1 / rate;
      break;
    case CFG_ARRIVAL_BURST:
      break;
    }
  }
}

static void srv_draw_groups(const cfg_requests *q, srv_request *reqs, int n)
{
  g_autoptr(GRand) g = g_rand_new_with_seed((guint32)q->seed ^ 0x9e3779b9u);
  for (int i = 0; i < n; i++)
    reqs[i].group = q->prefix_tokens > 0 ? g_rand_int_range(g, 0, q->prefix_groups) : -1;
}

/* Conversations of `turns` requests (ids c x turns ...): the arrival process starts them, a turn
 * arrives after the answer to the one before (sim.c). Turn j's prompt is the conversation so
 * far, turn j-1's prompt and answer, and a new user message: a drawn prompt less the shared
 * prefix, which the conversation's first prompt holds once. */
static void srv_make_conversations(const cfg_requests *q, srv_request *reqs, int n)
{
  int turns = MAX(q->turns, 1);
  g_autofree double *starts = g_new(double, n);
  for (int i = 0; i < n; i++)
    starts[i] = reqs[i].arrival;
  for (int i = 0; i < n; i++) {
    srv_request *r = &reqs[i];
    int turn = i % turns;
    r->conv = i - turn;
    r->next_turn = turn < turns - 1 && i + 1 < n ? i + 1 : -1;
    if (turn == 0) {
      r->arrival = starts[i / turns];
      continue;
    }
    const srv_request *prev = &reqs[i - 1];
    r->group = prev->group;
    r->prompt = prev->prompt + prev->output + MAX(1, r->prompt - q->prefix_tokens);
    r->arrival = NAN;
  }
}

/* ---- a trace -------------------------------------------------------------------------------- */

static int srv_cmp_arrival(gconstpointer a, gconstpointer b)
{
  double x = ((const srv_request *)a)->arrival, y = ((const srv_request *)b)->arrival;
  return (x > y) - (x < y);
}

static bool srv_read_trace(const cfg_requests *q, srv_stream *out, GError **err)
{
  const char *cols[] = {"arrival_s", "prompt_tokens", "output_tokens", NULL};
  GArray *rows = g_array_new(FALSE, FALSE, 3 * sizeof(double));
  if (!srv_csv_read(q->trace, cols, 3, "serving.requests.trace", rows, err)) {
    g_array_free(rows, TRUE);
    return false;
  }
  out->n = (int)rows->len;
  out->reqs = g_new0(srv_request, out->n);
  for (int i = 0; i < out->n; i++) {
    const double *row = (const double *)rows->data + 3 * i;
    out->reqs[i].arrival = row[0];
    out->reqs[i].prompt = MAX(1, (int)lround(row[1]));
    out->reqs[i].output = MAX(1, (int)lround(row[2]));
  }
  g_array_free(rows, TRUE);
  /* a stable sort keeps the file's order among equal times */
  GArray *view = g_array_new(FALSE, FALSE, sizeof(srv_request));
  g_array_append_vals(view, out->reqs, (guint)out->n);
  g_array_sort(view, srv_cmp_arrival);
  memcpy(out->reqs, view->data, sizeof(srv_request) * (size_t)out->n);
  g_array_free(view, TRUE);
  double t0 = out->reqs[0].arrival;
  for (int i = 0; i < out->n; i++)
    out->reqs[i].arrival -= t0;
  return true;
}

bool srv_stream_build(const cfg_workload *w, double rate, srv_stream *out, GError **err)
{
  const cfg_requests *q = &w->serving.requests;
  memset(out, 0, sizeof *out);
  if (q->trace) {
    if (!srv_read_trace(q, out, err))
      return false;
    if (q->warmup >= out->n) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                  "serving.requests.warmup = %d: must leave requests to measure (%s has %d)",
                  q->warmup, q->trace, out->n);
      srv_stream_clear(out);
      return false;
    }
    double span = out->reqs[out->n - 1].arrival;
    out->offered_rate = span > 0 ? (out->n - 1) / span : 0;
  } else {
    out->n = q->count;
    out->reqs = g_new0(srv_request, out->n);
    if (!srv_draw_lengths(q, out->reqs, out->n, err)) {
      srv_stream_clear(out);
      return false;
    }
    srv_draw_arrivals(q, rate, out->reqs, out->n);
    out->concurrency = q->concurrency;
    bool open = q->concurrency == 0 && q->arrival != CFG_ARRIVAL_BURST;
    out->offered_rate = open ? rate : 0;
  }
  srv_draw_groups(q, out->reqs, out->n);
  srv_make_conversations(q, out->reqs, out->n);
  for (int i = 0; i < out->n; i++) {
    srv_request *r = &out->reqs[i];
    r->id = i;
    r->known = r->prompt;
    r->state = SRV_PENDING;
    r->first_token = r->last_token = r->finish = r->admitted = NAN;
    r->slot = -1;
  }
  return true;
}

void srv_stream_clear(srv_stream *s)
{
  g_free(s->reqs);
  memset(s, 0, sizeof *s);
}
