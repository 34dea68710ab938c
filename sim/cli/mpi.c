/* Sharing a command's items (plan's candidates, a sweep's points, validation cases, batch jobs)
 * over MPI ranks when built with DLSIM_MPI and launched by mpirun: item i is rank i mod R's,
 * every rank sends its items' results to rank 0 as bytes, and rank 0 puts them back in item
 * order and prints, so the output is one process's. Without MPI, or without mpirun, a command
 * is rank 0 of 1 and every function here is a no-op. */
#include "cli/cli_internal.h"

#include <string.h>

#ifdef DLSIM_MPI
#include <mpi.h>

/* Launched by mpirun (OpenMPI, or a PMI-based launcher)? Without it dlsim stays one process and
 * never starts MPI, which would otherwise cost a second and print warnings. */
static bool cli_mpi_launched(void)
{
  return g_getenv("OMPI_COMM_WORLD_SIZE") || g_getenv("PMI_SIZE") || g_getenv("PMIX_RANK");
}

void cli_mpi_init(cli_mpi *m)
{
  *m = (cli_mpi){.rank = 0, .size = 1, .active = false};
  if (!cli_mpi_launched())
    return;
  /* MPI already up: an enclosing command (dlsim batch) shares the work and gave this one whole
   * to this rank */
  int up = 0;
  MPI_Initialized(&up);
  if (up)
    return;
  MPI_Init(NULL, NULL);
  m->active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m->size);
}

/* Waits for a collective without spinning: OpenMPI busy-polls in blocking calls, and a rank
 * done with its share would take a core from the ranks (and their threads and DES children)
 * still working on the same node. */
static void cli_mpi_wait(MPI_Request *req)
{
  int done = 0;
  MPI_Test(req, &done, MPI_STATUS_IGNORE);
  while (!done) {
    g_usleep(2000);
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
  }
}

/* Every rank's bytes at rank 0, one after the other; `sizes` and `offsets` say where. */
static char *cli_mpi_gatherv(const cli_mpi *m, GBytes *mine, int *sizes, int *offsets)
{
  gsize n = 0;
  const void *data = g_bytes_get_data(mine, &n);
  int bytes = (int)n;
  MPI_Request req;
  MPI_Igather(&bytes, 1, MPI_INT, sizes, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  cli_mpi_wait(&req);
  char *all = NULL;
  if (m->rank == 0) {
    offsets[0] = 0;
    for (int i = 1; i < m->size; i++)
      offsets[i] = offsets[i - 1] + sizes[i - 1];
    all = g_malloc(MAX(offsets[m->size - 1] + sizes[m->size - 1], 1));
  }
  MPI_Igatherv(data, bytes, MPI_BYTE, all, sizes, offsets, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
  cli_mpi_wait(&req);
  return all;
}

GPtrArray *cli_mpi_gather(const cli_mpi *m, GBytes *mine)
{
  if (m->size == 1) {
    GPtrArray *one = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    g_ptr_array_add(one, g_bytes_ref(mine));
    return one;
  }
  g_autofree int *sizes = m->rank == 0 ? g_new(int, m->size) : NULL;
  g_autofree int *offsets = m->rank == 0 ? g_new(int, m->size) : NULL;
  g_autofree char *all = cli_mpi_gatherv(m, mine, sizes, offsets);
  if (m->rank != 0)
    return NULL;
  GPtrArray *r = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  for (int i = 0; i < m->size; i++)
    g_ptr_array_add(r, g_bytes_new(all + offsets[i], (gsize)sizes[i]));
  return r;
}

int cli_mpi_share_int(const cli_mpi *m, int value)
{
  if (m->size > 1) {
    MPI_Request req;
    MPI_Ibcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    cli_mpi_wait(&req);
  }
  return value;
}

static void cli_mpi_finalize(cli_mpi *m)
{
  if (m->active)
    MPI_Finalize();
  m->active = false;
}

#else

void cli_mpi_init(cli_mpi *m)
{
  *m = (cli_mpi){.rank = 0, .size = 1, .active = false};
}

GPtrArray *cli_mpi_gather(const cli_mpi *m, GBytes *mine)
{
  (void)m;
  GPtrArray *one = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
  g_ptr_array_add(one, g_bytes_ref(mine));
  return one;
}

int cli_mpi_share_int(const cli_mpi *m, int value)
{
  (void)m;
  return value;
}

static void cli_mpi_finalize(cli_mpi *m)
{
  (void)m;
}

#endif

bool cli_mpi_takes(const cli_mpi *m, guint item)
{
  return item % (guint)m->size == (guint)m->rank;
}

/* An item as it travels: its length (-1: the rank has no result for it), then its bytes. */
static void cli_mpi_put_item(GByteArray *out, GBytes *item)
{
  gsize n = 0;
  const guint8 *data = item ? g_bytes_get_data(item, &n) : NULL;
  gint64 len = item ? (gint64)n : -1;
  g_byte_array_append(out, (const guint8 *)&len, sizeof len);
  if (n)
    g_byte_array_append(out, data, (guint)n);
}

/* Rank r's items, in its order, back at their places r, r + R, r + 2R... */
static void cli_mpi_place_items(const cli_mpi *m, int r, GBytes *from, GPtrArray *items)
{
  gsize n = 0;
  const guint8 *p = g_bytes_get_data(from, &n), *end = p + n;
  for (guint i = (guint)r; i < items->len && p + sizeof(gint64) <= end; i += (guint)m->size) {
    gint64 len;
    memcpy(&len, p, sizeof len);
    p += sizeof len;
    if (len >= 0) {
      g_clear_pointer(&items->pdata[i], g_bytes_unref);
      items->pdata[i] = g_bytes_new(p, (gsize)len);
      p += len;
    }
  }
}

void cli_mpi_gather_items(const cli_mpi *m, GPtrArray *items)
{
  if (m->size == 1)
    return;
  GByteArray *mine = g_byte_array_new();
  for (guint i = (guint)m->rank; i < items->len; i += (guint)m->size)
    cli_mpi_put_item(mine, items->pdata[i]);
  GBytes *packed = g_byte_array_free_to_bytes(mine);
  GPtrArray *all = cli_mpi_gather(m, packed);
  g_bytes_unref(packed);
  for (int r = 1; all && r < m->size; r++)
    cli_mpi_place_items(m, r, all->pdata[r], items);
  if (all)
    g_ptr_array_free(all, TRUE);
}

GBytes *cli_mpi_pack_text(const char *text)
{
  GByteArray *b = g_byte_array_new();
  g_byte_array_append(b, (const guint8 *)"T", 1);
  g_byte_array_append(b, (const guint8 *)text, (guint)strlen(text) + 1);
  return g_byte_array_free_to_bytes(b);
}

/* An error as bytes: 'E', its code, its domain's name and its message (both NUL-ended). */
GBytes *cli_mpi_pack_error(const GError *e)
{
  GByteArray *b = g_byte_array_new();
  const char *domain = g_quark_to_string(e->domain);
  gint32 code = e->code;
  g_byte_array_append(b, (const guint8 *)"E", 1);
  g_byte_array_append(b, (const guint8 *)&code, sizeof code);
  g_byte_array_append(b, (const guint8 *)domain, (guint)strlen(domain) + 1);
  g_byte_array_append(b, (const guint8 *)e->message, (guint)strlen(e->message) + 1);
  return g_byte_array_free_to_bytes(b);
}

char *cli_mpi_unpack(GBytes *item, GError **err)
{
  gsize n = 0;
  const char *p = item ? g_bytes_get_data(item, &n) : NULL;
  if (n >= 2 && p[0] == 'T' && p[n - 1] == '\0')
    return g_strdup(p + 1);
  gint32 code = 0;
  if (n > 1 + sizeof code && p[0] == 'E' && p[n - 1] == '\0') {
    memcpy(&code, p + 1, sizeof code);
    const char *domain = p + 1 + sizeof code, *message = domain + strlen(domain) + 1;
    if (message < p + n) {
      g_set_error_literal(err, g_quark_from_string(domain), code, message);
      return NULL;
    }
  }
  g_set_error_literal(err, CFG_ERROR, CFG_ERROR_RUNTIME, "a rank sent no result for an item");
  return NULL;
}

int cli_mpi_finish(cli_mpi *m, int code, GError *err)
{
  if (err) {
    if (m->rank == 0) {
      code = cli_fail(err);
    } else {
      code = cli_error_code(err);
      g_error_free(err);
    }
  }
  code = cli_mpi_share_int(m, code);
  cli_mpi_finalize(m);
  return code;
}
