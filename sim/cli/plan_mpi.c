/* Sharing dlsim plan's candidates over MPI ranks (when built with DLSIM_MPI): every rank screens
 * the candidates whose index is its rank modulo the size, rank 0 gathers the best of each and
 * merges them. The merge keeps the same best set, in the same order, as one process would. */
#include "cli/cli_internal.h"

#include <string.h>

#ifdef DLSIM_MPI
#include <mpi.h>

/* Launched by mpirun (OpenMPI, or a PMI-based launcher)? Without it dlsim stays one process and
 * never starts MPI, which would otherwise cost a second and print warnings. */
static bool plan_mpi_launched(void)
{
  return g_getenv("OMPI_COMM_WORLD_SIZE") || g_getenv("PMI_SIZE") || g_getenv("PMIX_RANK");
}

void plan_mpi_init(plan_mpi *m, int *argc, char ***argv)
{
  m->rank = 0;
  m->size = 1;
  m->active = plan_mpi_launched();
  if (!m->active)
    return;
  int up = 0;
  MPI_Initialized(&up);
  if (!up)
    MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m->size);
}

/* A rank's screening as bytes: its counters, then its best candidates. */
typedef struct {
  long candidates, valid, fits;
  double elapsed_s;
  int nbest;
} plan_mpi_head;

bool plan_mpi_merge(plan_mpi *m, plan_screen_result *r, int refine, GError **err)
{
  (void)err;
  if (m->size == 1)
    return true;
  plan_mpi_head h = {r->candidates, r->valid, r->fits, r->elapsed_s, (int)r->best->len};
  int bytes = (int)(sizeof h + r->best->len * sizeof(plan_candidate));
  g_autofree char *mine = g_malloc(bytes);
  memcpy(mine, &h, sizeof h);
  memcpy(mine + sizeof h, r->best->data, r->best->len * sizeof(plan_candidate));
  g_autofree int *sizes = m->rank == 0 ? g_new(int, m->size) : NULL;
  MPI_Gather(&bytes, 1, MPI_INT, sizes, 1, MPI_INT, 0, MPI_COMM_WORLD);
  g_autofree int *offsets = m->rank == 0 ? g_new0(int, m->size) : NULL;
  g_autofree char *all = NULL;
  if (m->rank == 0) {
    for (int i = 1; i < m->size; i++)
      offsets[i] = offsets[i - 1] + sizes[i - 1];
    all = g_malloc(offsets[m->size - 1] + sizes[m->size - 1]);
  }
  MPI_Gatherv(mine, bytes, MPI_BYTE, all, sizes, offsets, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (m->rank != 0)
    return true;
  for (int i = 1; i < m->size; i++) {
    plan_mpi_head o;
    memcpy(&o, all + offsets[i], sizeof o);
    plan_screen_result other = {.candidates = o.candidates, .valid = o.valid, .fits = o.fits,
                                .elapsed_s = o.elapsed_s,
                                .best = g_array_new(FALSE, FALSE, sizeof(plan_candidate))};
    g_array_append_vals(other.best, all + offsets[i] + sizeof o, (guint)o.nbest);
    plan_merge(r, &other, refine);
    plan_screen_clear(&other);
  }
  return true;
}

void plan_mpi_finalize(plan_mpi *m)
{
  if (m->active)
    MPI_Finalize();
}

#else

void plan_mpi_init(plan_mpi *m, int *argc, char ***argv)
{
  (void)argc, (void)argv;
  m->rank = 0;
  m->size = 1;
  m->active = false;
}

bool plan_mpi_merge(plan_mpi *m, plan_screen_result *r, int refine, GError **err)
{
  (void)m, (void)r, (void)refine, (void)err;
  return true;
}

void plan_mpi_finalize(plan_mpi *m)
{
  (void)m;
}

#endif
