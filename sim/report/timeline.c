/* The step as a picture (dlsim run --timeline FILE.svg): the events --trace writes, drawn. One
 * band per GPU, a row per stream inside it, layer passes as labelled boxes and the kernels and
 * collectives of a pass as thinner ones, a time axis in ms and a legend. The boxes come from
 * the trace's own walk (rep_trace_walk), so the picture and the trace never disagree. */
#include "report/report_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Geometry, in pixels. */
enum {
  TL_WIDTH = 1400,
  TL_LEFT = 96,   /* the rows' names */
  TL_RIGHT = 24, /* half a tick label past the axis's end */
  TL_TOP = 104,   /* title, legend and axis above the first band */
  TL_BAND_HEAD = 18,
  TL_ROW_COMPUTE = 24,
  TL_ROW_COMM = 14,
  TL_BAND_GAP = 8,
  TL_BIG_JOB = 16, /* GPUs: above, the default shows fewer */
};
#define TL_PLOT (TL_WIDTH - TL_LEFT - TL_RIGHT)

/* TL_WGRAD: a zero-bubble schedule's weight-gradient half of a backward pass ("bwd-weight") */
typedef enum { TL_FWD, TL_BWD, TL_WGRAD, TL_RECOMPUTE, TL_PASS, TL_KERNEL, TL_COMM, TL_NKINDS } tl_kind;

typedef struct {
  int pid, tid, seq; /* seq: order in the trace, to sort stably */
  tl_kind kind;
  double t0, t1;     /* ms */
  char *name;
  const char *cat;   /* interned */
} tl_box;

typedef struct {
  int nranks;
  GArray *boxes;     /* tl_box */
  GHashTable *bands; /* pid -> its name (the trace's process name) */
  GHashTable *rows;  /* pid * 64 + tid -> the stream's name */
  int seq;
} tl_events;

static const char *tl_str(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItem(o, key);
  return cJSON_IsString(v) ? v->valuestring : cJSON_IsRaw(v) ? v->valuestring : "";
}

static int tl_int(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItem(o, key);
  return cJSON_IsNumber(v) ? v->valueint : -1;
}

/* A layer pass (its args say which), its recomputation (the compute row's "recompute" event
 * named "... recompute mbN", unlike the recomputed kernels), a kernel or a collective. */
static tl_kind tl_kind_of(const cJSON *e, const char *cat, int tid)
{
  if (strcmp(cat, "layer") == 0) {
    const char *pass = tl_str(cJSON_GetObjectItem(e, "args"), "pass");
    return g_str_has_prefix(pass, "fwd")          ? TL_FWD
           : g_str_has_prefix(pass, "bwd-weight") ? TL_WGRAD
           : g_str_has_prefix(pass, "bwd")        ? TL_BWD
                                                  : TL_PASS;
  }
  if (strcmp(cat, "recompute") == 0 && tid == 0 && strstr(tl_str(e, "name"), " recompute mb"))
    return TL_RECOMPUTE;
  const cJSON *args = cJSON_GetObjectItem(e, "args");
  return cJSON_GetObjectItem(args, "collective") ? TL_COMM : TL_KERNEL;
}

static void tl_meta(tl_events *v, const cJSON *e, int pid)
{
  const char *what = tl_str(e, "name"), *name = tl_str(cJSON_GetObjectItem(e, "args"), "name");
  if (strcmp(what, "process_name") == 0)
    g_hash_table_insert(v->bands, GINT_TO_POINTER(pid), g_strdup(name));
  else if (strcmp(what, "thread_name") == 0)
    g_hash_table_insert(v->rows, GINT_TO_POINTER(pid * 64 + tl_int(e, "tid")), g_strdup(name));
}

/* The sink: GPUs' metadata and complete events kept, counters (memory, links) left out. */
static void tl_sink(void *ctx, cJSON *e)
{
  tl_events *v = ctx;
  const char *ph = tl_str(e, "ph");
  int pid = tl_int(e, "pid");
  if (pid >= 0 && pid < v->nranks && strcmp(ph, "M") == 0)
    tl_meta(v, e, pid);
  if (pid >= 0 && pid < v->nranks && strcmp(ph, "X") == 0) {
    const char *cat = tl_str(e, "cat");
    int tid = tl_int(e, "tid");
    double ts = g_ascii_strtod(tl_str(e, "ts"), NULL) / 1e3;
    tl_box b = {.pid = pid, .tid = tid, .seq = v->seq++, .kind = tl_kind_of(e, cat, tid), .t0 = ts,
                .t1 = ts + g_ascii_strtod(tl_str(e, "dur"), NULL) / 1e3,
                .name = g_strdup(tl_str(e, "name")), .cat = g_intern_string(cat)};
    g_array_append_val(v->boxes, b);
  }
  cJSON_Delete(e);
}

static void tl_box_clear(gpointer p)
{
  g_free(((tl_box *)p)->name);
}

/* ---- the window ----------------------------------------------------------------------------- */

/* A layer's name as the trace's passes begin with it ("layer47", "output"). */
static bool tl_is_layer_name(const char *text)
{
  if (!g_ascii_isalpha(*text) && *text != '_')
    return false;
  for (const char *c = text; *c; c++)
    if (!g_ascii_isalnum(*c) && !strchr("_.-", *c))
      return false;
  return strlen(text) < 200;
}

bool rep_timeline_window_parse(const char *text, double window[2], GError **err)
{
  window[0] = window[1] = 0;
  if (tl_is_layer_name(text))
    return true; /* the span of that layer's passes, found once they are drawn */
  const char *colon = strchr(text, ':');
  char *end = NULL, *end2 = NULL;
  window[0] = colon ? g_ascii_strtod(text, &end) : NAN;
  window[1] = colon ? g_ascii_strtod(colon + 1, &end2) : NAN;
  if (!colon || end != colon || end == text || !end2 || *end2 || end2 == colon + 1 ||
      !isfinite(window[0]) || !isfinite(window[1]) || window[0] < 0) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--timeline-window: expected START:END in milliseconds from the step's start "
                "(e.g. 30:45) or a layer's name (e.g. layer5), got '%s'", text);
    return false;
  }
  if (window[1] <= window[0]) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--timeline-window: the window must end after it starts, got '%s'", text);
    return false;
  }
  return true;
}

/* From the start of `layer`'s first pass to the end of its last, on any GPU drawn, with a
 * margin of 2 % each side so that the passes' edges show. */
static bool tl_layer_window(const tl_events *v, const char *layer, double w[2], GError **err)
{
  g_autofree char *prefix = g_strdup_printf("%s ", layer);
  w[0] = INFINITY, w[1] = 0;
  for (guint i = 0; i < v->boxes->len; i++) {
    const tl_box *b = &g_array_index(v->boxes, tl_box, i);
    if (b->kind <= TL_PASS && g_str_has_prefix(b->name, prefix))
      w[0] = MIN(w[0], b->t0), w[1] = MAX(w[1], b->t1);
  }
  if (w[1] <= w[0]) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--timeline-window: no pass of a layer named '%s' on the GPUs drawn (layers are "
                "named as in the trace: layer0, layer1, ..., output)", layer);
    return false;
  }
  double pad = 0.02 * (w[1] - w[0]);
  w[0] = MAX(0, w[0] - pad), w[1] += pad;
  return true;
}

/* The drawn part of the step: the one asked for, else from 0 to the last event's end, or the
 * last layer pass's when only the first micro-batches are drawn (the optimizer at the step's end
 * would leave them a sliver). */
static bool tl_window(const tl_events *v, const char *asked, bool few, double w[2], GError **err)
{
  if (asked && tl_is_layer_name(asked))
    return tl_layer_window(v, asked, w, err);
  double given[2] = {0, 0};
  if (asked && !rep_timeline_window_parse(asked, given, err))
    return false;
  double last = 0, last_pass = 0;
  for (guint i = 0; i < v->boxes->len; i++) {
    const tl_box *b = &g_array_index(v->boxes, tl_box, i);
    last = MAX(last, b->t1);
    last_pass = b->kind <= TL_PASS ? MAX(last_pass, b->t1) : last_pass;
  }
  w[0] = asked ? given[0] : 0;
  w[1] = asked ? given[1] : few && last_pass > 0 ? last_pass : last;
  if (w[0] >= last) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "--timeline-window: starts at %g ms, but the traced events end at %.3f ms", w[0], last);
    return false;
  }
  return true;
}

/* ---- drawing -------------------------------------------------------------------------------- */

typedef struct {
  GString *o;
  GString *labels; /* a row's pass names, written over all its boxes */
  double w0, w1; /* the window, ms */
  int merged;    /* boxes folded into others */
} tl_svg;

static double tl_x(const tl_svg *s, double ms)
{
  return TL_LEFT + (MIN(MAX(ms, s->w0), s->w1) - s->w0) / (s->w1 - s->w0) * TL_PLOT;
}

static const char *tl_fill(tl_kind k, const char *cat)
{
  static const char *const kinds[] = {"#4e79a7", "#f28e2b", "#c46a12", "#59a14f", "#9c9c9c", "#2f3e4e", "#b07aa1"};
  static const char *const dims[][2] = {{"tp", "#b07aa1"}, {"cp", "#76b7b2"}, {"pp", "#7f7f7f"},
                                        {"dp", "#e15759"}, {"ep", "#edc948"}};
  for (size_t i = 0; k == TL_COMM && i < G_N_ELEMENTS(dims); i++)
    if (strcmp(cat, dims[i][0]) == 0)
      return dims[i][1];
  return kinds[k];
}

static void tl_text_to(GString *o, double x, double y, const char *attrs, const char *text)
{
  g_autofree char *esc = g_markup_escape_text(text, -1);
  g_string_append_printf(o, "<text x=\"%.1f\" y=\"%.1f\"%s>%s</text>\n", x, y, attrs, esc);
}

static void tl_text(tl_svg *s, double x, double y, const char *attrs, const char *text)
{
  tl_text_to(s->o, x, y, attrs, text);
}

/* A run of boxes of one row and level, drawn as one (`n` > 1: narrower than a pixel each). */
typedef struct {
  const tl_box *first;
  double x0, x1;
  int n;
} tl_run;

/* The vertical place of a box in its row: passes fill it, recomputation its upper half,
 * kernels and collectives a thinner strip. */
static void tl_slot(const tl_box *b, double row_y, double *y, double *h)
{
  bool compute = b->tid == 0;
  if (b->kind <= TL_PASS && b->kind != TL_RECOMPUTE) {
    *y = row_y + 1, *h = TL_ROW_COMPUTE - 2;
  } else if (b->kind == TL_RECOMPUTE) {
    *y = row_y + 1, *h = 11;
  } else {
    *y = compute ? row_y + 13 : row_y + 2, *h = compute ? 9 : TL_ROW_COMM - 4;
  }
}

static void tl_draw_run(tl_svg *s, const tl_run *r, double row_y)
{
  const tl_box *b = r->first;
  double y, h;
  tl_slot(b, row_y, &y, &h);
  double w = MAX(r->x1 - r->x0, 0.5);
  g_string_append_printf(s->o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"",
                         r->x0, y, w, h, tl_fill(b->kind, b->cat));
  if (b->kind >= TL_KERNEL)
    g_string_append(s->o, " stroke=\"#ffffff\" stroke-width=\"0.3\"");
  g_autofree char *name = g_markup_escape_text(b->name, -1);
  if (r->n > 1)
    g_string_append_printf(s->o, "><title>%d events from %.3f ms, each narrower than a pixel (the first: %s)</title></rect>\n",
                           r->n, b->t0, name);
  else
    g_string_append_printf(s->o, "><title>%s: %.3f ms, %.3f ms long</title></rect>\n", name, b->t0,
                           b->t1 - b->t0);
  /* a pass's name where it fits (10 px text, about 6 px a character) */
  if (r->n == 1 && b->kind <= TL_PASS && b->kind != TL_RECOMPUTE && w > 6.0 * (double)strlen(b->name) + 6)
    tl_text_to(s->labels, r->x0 + 3, y + 10, " class=\"pass\"", b->name);
}

/* Boxes of one row and level, in time order: a box narrower than a pixel joins the run before
 * it when that run is made of such boxes and they touch, so the file stays bounded by pixels. */
static void tl_draw_level(tl_svg *s, const tl_box *const *bs, guint n, double row_y)
{
  tl_run r = {0};
  for (guint i = 0; i < n; i++) {
    const tl_box *b = bs[i];
    double x0 = tl_x(s, b->t0), x1 = tl_x(s, b->t1);
    bool narrow = x1 - x0 < 1;
    if (r.n && narrow && (r.n > 1 || r.x1 - r.x0 < 1) && x0 - r.x1 < 1) {
      r.x1 = MAX(r.x1, x1);
      r.n++;
      s->merged++;
      continue;
    }
    if (r.n)
      tl_draw_run(s, &r, row_y);
    r = (tl_run){.first = b, .x0 = x0, .x1 = x1, .n = 1};
  }
  if (r.n)
    tl_draw_run(s, &r, row_y);
}

/* 0: a pass; 1: its recomputation; 2: a kernel or collective (drawn in that order). */
static int tl_level(const tl_box *b)
{
  return b->kind == TL_RECOMPUTE ? 1 : b->kind < TL_KERNEL ? 0 : 2;
}

static int tl_box_cmp(const void *a, const void *b)
{
  const tl_box *x = *(const tl_box *const *)a, *y = *(const tl_box *const *)b;
  int k[] = {x->pid - y->pid, x->tid - y->tid, tl_level(x) - tl_level(y)};
  for (size_t i = 0; i < G_N_ELEMENTS(k); i++)
    if (k[i])
      return k[i];
  if (x->t0 != y->t0)
    return x->t0 < y->t0 ? -1 : 1;
  return x->seq - y->seq;
}

static int tl_row_height(int tid)
{
  return tid == 0 ? TL_ROW_COMPUTE : TL_ROW_COMM;
}

/* One GPU's rows from `y`; `bs` (sorted) from index *i on are its boxes. Returns the next y. */
static double tl_draw_band(tl_svg *s, const tl_events *v, int pid, const tl_box *const *bs, guint n,
                           guint *i, double y)
{
  tl_text(s, 4, y + 13, " class=\"gpu\"", g_hash_table_lookup(v->bands, GINT_TO_POINTER(pid)));
  y += TL_BAND_HEAD;
  for (int tid = 0; tid < 64; tid++) {
    const char *row = g_hash_table_lookup(v->rows, GINT_TO_POINTER(pid * 64 + tid));
    if (!row)
      continue;
    g_string_append_printf(s->o, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" class=\"row\"/>\n",
                           TL_LEFT, y, TL_PLOT, tl_row_height(tid));
    tl_text(s, TL_LEFT - 4, y + tl_row_height(tid) / 2.0 + 3.5, " class=\"stream\"", row);
    while (*i < n && bs[*i]->pid == pid && bs[*i]->tid < tid)
      (*i)++; /* a stream without a name: not drawn */
    guint end = *i;
    while (end < n && bs[end]->pid == pid && bs[end]->tid == tid)
      end++;
    for (guint from = *i, to = *i; from < end; from = to) {
      while (to < end && tl_level(bs[to]) == tl_level(bs[from]))
        to++;
      tl_draw_level(s, bs + from, to - from, y);
    }
    g_string_append_len(s->o, s->labels->str, (gssize)s->labels->len);
    g_string_truncate(s->labels, 0);
    *i = end;
    y += tl_row_height(tid);
  }
  while (*i < n && bs[*i]->pid == pid)
    (*i)++;
  return y + TL_BAND_GAP;
}

/* A tick every 1, 2 or 5 times a power of ten, about ten across the window. */
static void tl_axis(tl_svg *s, double top, double bottom)
{
  double span = s->w1 - s->w0, raw = span / 10, mag = pow(10, floor(log10(raw)));
  double step = raw / mag <= 1 ? mag : raw / mag <= 2 ? 2 * mag : raw / mag <= 5 ? 5 * mag : 10 * mag;
  int decimals = (int)MAX(0, -floor(log10(step) + 1e-9));
  g_string_append_printf(s->o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"axis\"/>\n",
                         TL_LEFT, top, TL_LEFT + TL_PLOT, top);
  for (double t = ceil(s->w0 / step - 1e-9) * step; t <= s->w1 + step * 1e-9; t += step) {
    double x = tl_x(s, t);
    g_string_append_printf(s->o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n",
                           x, top - 4, x, bottom);
    g_autofree char *label = g_strdup_printf("%.*f ms", decimals, fabs(t) < step * 1e-9 ? 0.0 : t);
    tl_text(s, x, top - 7, " class=\"tick\"", label);
  }
}

/* The kinds drawn, each with its colour. */
static void tl_legend(tl_svg *s, const GArray *boxes, double y)
{
  static const char *const names[] = {"forward pass", "backward pass", "weight-gradient pass",
                                      "recomputation", "other pass", "kernel", NULL};
  bool seen[TL_NKINDS] = {0};
  GPtrArray *dims = g_ptr_array_new(); /* the collectives' dimensions, first seen first */
  for (guint i = 0; i < boxes->len; i++) {
    const tl_box *b = &g_array_index(boxes, tl_box, i);
    if (b->t1 <= s->w0 || b->t0 >= s->w1)
      continue;
    seen[b->kind] = true;
    if (b->kind == TL_COMM && !g_ptr_array_find(dims, b->cat, NULL))
      g_ptr_array_add(dims, (gpointer)b->cat);
  }
  double x = TL_LEFT;
  for (int k = 0; k <= TL_COMM; k++) {
    for (guint d = 0; k == TL_COMM && d < dims->len; d++) {
      g_autofree char *label = g_strdup_printf("%s collective", (const char *)dims->pdata[d]);
      g_string_append_printf(s->o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n",
                             x, y - 9, tl_fill(TL_COMM, dims->pdata[d]));
      tl_text(s, x + 16, y, "", label);
      x += 16 + 6.5 * (double)strlen(label) + 14;
    }
    if (k == TL_COMM || !seen[k])
      continue;
    g_string_append_printf(s->o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n",
                           x, y - 9, tl_fill((tl_kind)k, ""));
    tl_text(s, x + 16, y, "", names[k]);
    x += 16 + 6.5 * (double)strlen(names[k]) + 14;
  }
  g_ptr_array_free(dims, TRUE);
}

static const char tl_style[] =
    "<style>\n"
    "text { font-family: sans-serif; font-size: 11px; fill: #222222; }\n"
    ".title { font-size: 15px; font-weight: bold; }\n"
    ".gpu { font-weight: bold; }\n"
    ".stream { text-anchor: end; font-size: 10px; fill: #555555; }\n"
    ".tick { text-anchor: middle; font-size: 10px; fill: #555555; }\n"
    ".pass { font-size: 10px; fill: #ffffff; }\n"
    ".row { fill: #f4f4f4; }\n"
    ".axis { stroke: #555555; stroke-width: 1; }\n"
    ".grid { stroke: #d0d0d0; stroke-width: 0.5; }\n"
    "</style>\n";

/* Every band, then the axis's grid over them (drawn first so the boxes cover it). */
static void tl_draw(tl_svg *s, const tl_events *v, const char *title, const char *subtitle)
{
  g_autofree const tl_box **bs = g_new(const tl_box *, MAX(v->boxes->len, 1));
  guint n = 0;
  for (guint i = 0; i < v->boxes->len; i++) {
    const tl_box *b = &g_array_index(v->boxes, tl_box, i);
    if (b->t1 > s->w0 && b->t0 < s->w1)
      bs[n++] = b;
  }
  if (n > 1)
    qsort(bs, n, sizeof *bs, tl_box_cmp);
  g_autoptr(GString) bands = g_string_new(NULL);
  GString *head = s->o;
  s->o = bands;
  double y = TL_TOP;
  guint i = 0;
  for (int pid = 0; pid < v->nranks; pid++)
    if (g_hash_table_contains(v->bands, GINT_TO_POINTER(pid)))
      y = tl_draw_band(s, v, pid, bs, n, &i, y);
  s->o = head;
  g_string_append_printf(s->o,
                         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
                         "viewBox=\"0 0 %d %.0f\">\n",
                         TL_WIDTH, y + 8, TL_WIDTH, y + 8);
  g_string_append_printf(s->o,
                         "<!-- what dlsim run draws with its timeline option: the events of its trace; boxes narrower than a "
                         "pixel that touch are merged into one (%d merged here, each such box's "
                         "title says how many) -->\n", s->merged);
  g_string_append(s->o, tl_style);
  g_string_append_printf(s->o, "<rect width=\"%d\" height=\"%.0f\" fill=\"#ffffff\"/>\n", TL_WIDTH, y + 8);
  tl_text(s, 4, 20, " class=\"title\"", title);
  tl_text(s, 4, 40, "", subtitle);
  tl_legend(s, v->boxes, 64);
  tl_axis(s, TL_TOP - 6, y - TL_BAND_GAP);
  g_string_append_len(s->o, bands->str, (gssize)bands->len);
  g_string_append(s->o, "</svg>\n");
}

/* What the picture shows, under its title. */
static char *tl_subtitle(const sim_result *run, const rep_trace_options *o, const double w[2])
{
  g_autoptr(GString) t = g_string_new(NULL);
  g_string_printf(t, "%.3f ms to %.3f ms of a %.3f ms step", w[0], w[1], run->step_time * 1e3);
  if (o->ranks) {
    g_string_append(t, "; GPUs ");
    for (guint i = 0; i < o->ranks->len; i += 2) {
      int lo = g_array_index(o->ranks, int, i), hi = g_array_index(o->ranks, int, i + 1);
      g_string_append_printf(t, lo == hi ? "%s%d" : "%s%d-%d", i ? "," : "", lo, hi);
    }
    g_string_append_printf(t, " of %d", run->program->nranks);
  }
  if (o->steps)
    g_string_append_printf(t, "; each GPU's first %d micro-batch%s", o->steps, o->steps == 1 ? "" : "es");
  g_string_append(t, "; a box's tooltip gives its name and times");
  return g_string_free(g_steal_pointer(&t), FALSE);
}

bool rep_timeline_write(const char *path, const sim_result *run, const rep_trace_options *o,
                        const char *window, GError **err)
{
  /* a big job: the first GPUs simulated on their own (a pipeline's stages) and their first
   * micro-batches unless told otherwise, so that the picture stays readable */
  int nranks = run->program->nranks;
  bool big = nranks > TL_BIG_JOB;
  g_autoptr(GArray) first = big ? rep_trace_simulated(run, TL_BIG_JOB) : NULL;
  rep_trace_options use = {.ranks = o && o->ranks ? o->ranks : big ? first : NULL,
                           .steps = o && o->steps ? o->steps : big ? 2 : 0};
  tl_events v = {.nranks = nranks, .boxes = g_array_new(FALSE, FALSE, sizeof(tl_box)),
                 .bands = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free),
                 .rows = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free)};
  g_array_set_clear_func(v.boxes, tl_box_clear);
  tl_svg s = {.o = g_string_new("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"), .labels = g_string_new(NULL)};
  double w[2];
  bool ok = rep_trace_walk(run, &use, tl_sink, &v, err) && tl_window(&v, window, use.steps > 0, w, err);
  if (ok) {
    s.w0 = w[0], s.w1 = w[1];
    g_autofree char *title = g_strdup_printf("dlsim run: %s on %s", run->program->meta.description,
                                             run->cluster->name);
    g_autofree char *subtitle = tl_subtitle(run, &use, w);
    tl_draw(&s, &v, title, subtitle);
    ok = cfg_write_text("--timeline", path, s.o, err);
  }
  g_string_free(s.o, TRUE);
  g_string_free(s.labels, TRUE);
  g_array_unref(v.boxes);
  g_hash_table_destroy(v.bands);
  g_hash_table_destroy(v.rows);
  return ok;
}
