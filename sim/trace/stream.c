/* A streaming reader for Chrome-trace JSON. Kineto writes one object whose "traceEvents" array
 * holds every event; documents reach hundreds of megabytes. Parsing the whole document into a
 * tree would take ten times that in memory, so the reader walks the top level itself, cuts
 * each element of "traceEvents" out of the byte stream (tracking strings and nesting only) and
 * hands it to cJSON alone: memory stays at one event plus what the caller keeps. gzip is
 * decompressed on the fly with GIO's zlib converter. */
#include "trace/trace_internal.h"

#include <string.h>

#define TRC_READ_CHUNK 65536
/* An event larger than this is not a profiler event: refuse it rather than buffer it. */
#define TRC_MAX_EVENT (64u << 20)

typedef struct {
  GInputStream *in;
  guint8 buf[TRC_READ_CHUNK];
  gsize len, pos;
  bool eof;
  guint64 consumed;
  int line, col;
  const char *origin;
  GError *io_error;
  guint64 nevents;
} trc_rd;

static bool rd_fill(trc_rd *r)
{
  if (r->eof)
    return false;
  gssize n = g_input_stream_read(r->in, r->buf, sizeof r->buf, NULL, &r->io_error);
  if (n <= 0) {
    r->eof = true;
    return false;
  }
  r->len = (gsize)n;
  r->pos = 0;
  return true;
}

static inline int rd_peek(trc_rd *r)
{
  if (r->pos == r->len && !rd_fill(r))
    return -1;
  return r->buf[r->pos];
}

static inline int rd_get(trc_rd *r)
{
  int c = rd_peek(r);
  if (c < 0)
    return c;
  r->pos++;
  r->consumed++;
  if (c == '\n') {
    r->line++;
    r->col = 1;
  } else {
    r->col++;
  }
  return c;
}

static void rd_ws(trc_rd *r)
{
  int c;
  while ((c = rd_peek(r)) == ' ' || c == '\n' || c == '\t' || c == '\r')
    rd_get(r);
}

/* The error for what the reader met at its position: the end of input (truncated, or an I/O
 * or decompression failure) or an unexpected character. */
static bool rd_fail(trc_rd *r, const char *expected, GError **err)
{
  int c = rd_peek(r);
  if (r->io_error && g_error_matches(r->io_error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT))
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s:%d:%d: the trace is truncated: its gzip stream ends early (after %" G_GUINT64_FORMAT
                " events)", r->origin, r->line, r->col, r->nevents);
  else if (r->io_error)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: cannot read the trace: %s", r->origin,
                r->line, r->col, r->io_error->message);
  else if (c < 0 && r->consumed == 0)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: the file is empty (expected %s)", r->origin,
                expected);
  else if (c < 0)
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                "%s:%d:%d: the trace is truncated: it ends where %s was expected (after %" G_GUINT64_FORMAT
                " events)",
                r->origin, r->line, r->col, expected, r->nevents);
  else
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: expected %s, found '%c'", r->origin,
                r->line, r->col, expected, g_ascii_isprint((char)c) ? c : '?');
  return false;
}

static bool rd_expect(trc_rd *r, char want, const char *expected, GError **err)
{
  rd_ws(r);
  if (rd_peek(r) != want)
    return rd_fail(r, expected, err);
  rd_get(r);
  return true;
}

/* Consumes (and appends to `cap`) the run of bytes up to the next one in `stop`, within the
 * buffer: the fast path of the scanner, which otherwise goes byte by byte. */
static void rd_run(trc_rd *r, GString *cap, const guint8 *stop)
{
  const guint8 *p = r->buf + r->pos, *end = r->buf + r->len, *q = p;
  while (q < end && !stop[*q])
    q++;
  gsize n = (gsize)(q - p);
  if (cap && n)
    g_string_append_len(cap, (const char *)p, (gssize)n);
  r->pos += n;
  r->consumed += n;
  r->col += (int)n;
}

/* Bytes that end a run inside a string, and inside an object or array. */
static const guint8 rd_stop_string[256] = {['"'] = 1, ['\\'] = 1, ['\n'] = 1};
static const guint8 rd_stop_nested[256] = {['"'] = 1, ['{'] = 1, ['}'] = 1, ['['] = 1, [']'] = 1,
                                           ['\n'] = 1};

/* The rest of a string after its opening quote. */
static bool rd_string_body(trc_rd *r, GString *cap, GError **err)
{
  for (;;) {
    rd_run(r, cap, rd_stop_string);
    int c = rd_get(r);
    if (c < 0)
      return rd_fail(r, "the end of a string", err);
    if (cap)
      g_string_append_c(cap, (char)c);
    if (c == '"')
      return true;
    if (c == '\\') {
      c = rd_get(r);
      if (c < 0)
        return rd_fail(r, "the end of a string", err);
      if (cap)
        g_string_append_c(cap, (char)c);
    }
  }
}

/* Consumes one JSON value, appending its text to `cap` (if not NULL). Only strings and
 * nesting are tracked: the value's content is checked by cJSON when it is parsed. */
static bool rd_value(trc_rd *r, GString *cap, GError **err)
{
  rd_ws(r);
  int c = rd_peek(r);
  if (c == '"') {
    rd_get(r);
    if (cap)
      g_string_append_c(cap, '"');
    return rd_string_body(r, cap, err);
  }
  if (c == '{' || c == '[') {
    long depth = 0;
    do {
      if (depth > 0)
        rd_run(r, cap, rd_stop_nested);
      c = rd_get(r);
      if (c < 0)
        return rd_fail(r, "the end of an object or array", err);
      if (cap) {
        g_string_append_c(cap, (char)c);
        if (cap->len > TRC_MAX_EVENT) {
          g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT,
                      "%s:%d:%d: a value larger than %u MiB: not a profiler event", r->origin,
                      r->line, r->col, TRC_MAX_EVENT >> 20);
          return false;
        }
      }
      if (c == '"') {
        if (!rd_string_body(r, cap, err))
          return false;
      } else if (c == '{' || c == '[') {
        depth++;
      } else if (c == '}' || c == ']') {
        depth--;
      }
    } while (depth > 0);
    return true;
  }
  if (c < 0 || !strchr("-0123456789tfn", c))
    return rd_fail(r, "a JSON value", err);
  while ((c = rd_peek(r)) >= 0 && !strchr(",}] \t\r\n", c)) {
    rd_get(r);
    if (cap)
      g_string_append_c(cap, (char)c);
  }
  return true;
}

/* A key of the top-level object (no unescaping needed for the keys that matter). */
static bool rd_key(trc_rd *r, GString *key, GError **err)
{
  if (!rd_expect(r, '"', "a key string", err))
    return false;
  g_string_truncate(key, 0);
  if (!rd_string_body(r, key, err))
    return false;
  g_string_truncate(key, key->len - 1); /* the closing quote */
  return rd_expect(r, ':', "':' after a key", err);
}

static bool rd_event(trc_rd *r, GString *ev, const trc_sink *sink, GError **err)
{
  rd_ws(r);
  int line = r->line, col = r->col;
  if (rd_peek(r) != '{')
    return rd_fail(r, "an event object", err);
  g_string_truncate(ev, 0);
  if (!rd_value(r, ev, err))
    return false;
  cJSON *j = cJSON_ParseWithLength(ev->str, ev->len);
  if (!j) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: event %" G_GUINT64_FORMAT
                " is not valid JSON", r->origin, line, col, r->nevents + 1);
    return false;
  }
  r->nevents++;
  bool ok = sink->event(sink->ctx, j, line, col, err);
  cJSON_Delete(j);
  return ok;
}

/* The elements of an array of events, after its '['. A top-level array may lack its closing
 * bracket (Chrome's trace format allows it); "traceEvents" may not. */
static bool rd_events(trc_rd *r, const trc_sink *sink, bool open_end, GError **err)
{
  g_autoptr(GString) ev = g_string_sized_new(1024);
  rd_ws(r);
  if (rd_peek(r) == ']') {
    rd_get(r);
    return true;
  }
  for (;;) {
    if (!rd_event(r, ev, sink, err))
      return false;
    rd_ws(r);
    int c = rd_get(r);
    if (c == ',')
      continue;
    if (c == ']' || (c < 0 && open_end && !r->io_error))
      return true;
    if (c >= 0) {
      g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: expected ',' or ']' after an event",
                  r->origin, r->line, r->col - 1);
      return false;
    }
    return rd_fail(r, "',' or ']' after an event", err);
  }
}

static bool rd_member(trc_rd *r, GString *key, const trc_sink *sink, GError **err)
{
  if (!rd_key(r, key, err))
    return false;
  if (strcmp(key->str, "traceEvents") == 0)
    return rd_expect(r, '[', "'[' opening traceEvents", err) && rd_events(r, sink, false, err);
  if (!sink->want || !sink->want(sink->ctx, key->str))
    return rd_value(r, NULL, err);
  g_autoptr(GString) text = g_string_new(NULL);
  int line = r->line, col = r->col;
  if (!rd_value(r, text, err))
    return false;
  cJSON *j = cJSON_ParseWithLength(text->str, text->len);
  if (!j) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s:%d:%d: the value of \"%s\" is not valid JSON",
                r->origin, line, col, key->str);
    return false;
  }
  sink->meta(sink->ctx, key->str, j);
  cJSON_Delete(j);
  return true;
}

static bool rd_object(trc_rd *r, const trc_sink *sink, GError **err)
{
  g_autoptr(GString) key = g_string_new(NULL);
  rd_ws(r);
  if (rd_peek(r) == '}') {
    rd_get(r);
    return true;
  }
  for (;;) {
    if (!rd_member(r, key, sink, err))
      return false;
    rd_ws(r);
    int c = rd_peek(r);
    if (c == ',' || c == '}') {
      rd_get(r);
      if (c == '}')
        return true;
      continue;
    }
    return rd_fail(r, "',' or '}' in the top-level object", err);
  }
}

static GInputStream *rd_open(GInputStream *in, GError **err)
{
  GBufferedInputStream *b = G_BUFFERED_INPUT_STREAM(g_buffered_input_stream_new(in));
  if (g_buffered_input_stream_fill(b, 2, NULL, err) < 0) {
    g_object_unref(b);
    return NULL;
  }
  gsize avail = 0;
  const guint8 *head = g_buffered_input_stream_peek_buffer(b, &avail);
  if (avail < 2 || head[0] != 0x1f || head[1] != 0x8b)
    return G_INPUT_STREAM(b);
  GZlibDecompressor *z = g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP);
  GInputStream *s = g_converter_input_stream_new(G_INPUT_STREAM(b), G_CONVERTER(z));
  g_object_unref(z);
  g_object_unref(b);
  return s;
}

bool trc_stream_read(GInputStream *in, const char *origin, const trc_sink *sink,
                     guint64 *bytes_read, GError **err)
{
  GError *io = NULL;
  GInputStream *s = rd_open(in, &io);
  if (!s) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s: cannot read: %s", origin, io->message);
    g_error_free(io);
    return false;
  }
  trc_rd *r = g_new0(trc_rd, 1);
  r->in = s;
  r->line = r->col = 1;
  r->origin = origin;
  rd_ws(r);
  int c = rd_peek(r);
  bool ok;
  if (c == '{' || c == '[') {
    rd_get(r);
    ok = c == '{' ? rd_object(r, sink, err) : rd_events(r, sink, true, err);
  } else {
    ok = rd_fail(r, "a JSON object with \"traceEvents\"", err);
  }
  if (ok) {
    rd_ws(r);
    if (rd_peek(r) >= 0 || r->io_error)
      ok = rd_fail(r, "the end of the document", err);
  }
  *bytes_read = r->consumed;
  g_clear_error(&r->io_error);
  g_object_unref(s);
  g_free(r);
  return ok;
}
