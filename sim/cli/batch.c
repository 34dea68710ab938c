/* dlsim batch FILE [-o OUT]: one job per line of FILE (a dlsim command line without `dlsim`;
 * blank lines and # comments skipped), each run in this process with its --json output
 * captured, one JSON line per job in the file's order: {"line", "command", "exit", "result"}
 * or, when the job failed, "error" (what it wrote on stderr). A bad job is a record, not the
 * end of the batch. Under mpirun the jobs are shared over the ranks and rank 0 writes, in the
 * same order. The exit code is the worst job's. */
#include "cli/cli_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Jobs per rank between two gathers: rank 0 writes the records as the batch goes (a batch cut
 * short by its allocation keeps what it did), and ranks wait for each other only that often. */
#define BATCH_ROUND 16

typedef struct {
  int line;
  char *text;
} batch_job;

static void batch_jobs_free(GArray *jobs)
{
  for (guint i = 0; jobs && i < jobs->len; i++)
    g_free(g_array_index(jobs, batch_job, i).text);
  if (jobs)
    g_array_free(jobs, TRUE);
}

/* Every line of FILE but blank ones and comments, with its number. */
static GArray *batch_read(const char *path, GError **err)
{
  g_autofree char *text = NULL;
  GError *e = NULL;
  if (!g_file_get_contents(path, &text, NULL, &e)) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s", e->message);
    g_error_free(e);
    return NULL;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  GArray *jobs = g_array_new(FALSE, FALSE, sizeof(batch_job));
  for (int i = 0; lines[i]; i++) {
    const char *l = g_strstrip(lines[i]);
    if (*l && *l != '#') {
      batch_job j = {.line = i + 1, .text = g_strdup(l)};
      g_array_append_val(jobs, j);
    }
  }
  return jobs;
}

/* ---- a job's stdout and stderr, captured in process ------------------------------------------ */

/* The commands print with printf and fprintf(stderr): while a job runs, file descriptors 1
 * and 2 point at temporary files. */
typedef struct {
  FILE *file[2];
  int saved[2];
} batch_capture;

static bool batch_capture_start(batch_capture *c)
{
  fflush(stdout);
  fflush(stderr);
  for (int k = 0; k < 2; k++) {
    c->file[k] = tmpfile();
    c->saved[k] = c->file[k] ? dup(STDOUT_FILENO + k) : -1;
  }
  bool ok = c->saved[0] >= 0 && c->saved[1] >= 0;
  for (int k = 0; k < 2; k++) {
    if (ok) {
      dup2(fileno(c->file[k]), STDOUT_FILENO + k);
      continue;
    }
    if (c->saved[k] >= 0)
      close(c->saved[k]);
    if (c->file[k])
      fclose(c->file[k]);
  }
  return ok;
}

static char *batch_read_back(FILE *f)
{
  long n = ftell(f);
  char *text = g_malloc((gsize)MAX(n, 0) + 1);
  rewind(f);
  size_t got = n > 0 ? fread(text, 1, (size_t)n, f) : 0;
  text[got] = '\0';
  fclose(f);
  return text;
}

/* Restores stdout and stderr; `text` gets what the job wrote on each. */
static void batch_capture_stop(batch_capture *c, char *text[2])
{
  fflush(stdout);
  fflush(stderr);
  for (int k = 0; k < 2; k++) {
    dup2(c->saved[k], STDOUT_FILENO + k);
    close(c->saved[k]);
    fseek(c->file[k], 0, SEEK_END);
    text[k] = batch_read_back(c->file[k]);
  }
}

/* ---- one job ------------------------------------------------------------------------------ */

/* Runs the command with the job's arguments (and --json when it takes it and the job did not
 * ask), capturing what it prints. */
static int batch_exec(const cli_command *cmd, char **words, char *text[2])
{
  GPtrArray *args = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(args, g_strdup_printf("dlsim %s", cmd->name));
  bool json = false;
  for (int i = 1; words[i]; i++) {
    g_ptr_array_add(args, g_strdup(words[i]));
    json |= strcmp(words[i], "--json") == 0;
  }
  if (cmd->json && !json)
    g_ptr_array_add(args, g_strdup("--json"));
  /* the command's option parser moves pointers around in argv: it gets a copy */
  g_autofree char **argv = g_new0(char *, args->len + 1);
  memcpy(argv, args->pdata, args->len * sizeof(char *));
  batch_capture c;
  int code = 1;
  if (batch_capture_start(&c)) {
    code = cmd->run((int)args->len, argv);
    batch_capture_stop(&c, text);
  } else {
    text[0] = g_strdup("");
    text[1] = g_strdup_printf("cannot capture the job's output: %s", g_strerror(errno));
  }
  g_ptr_array_free(args, TRUE);
  return code;
}

/* The record's outcome: the command's JSON (or its text when it printed no JSON) and, when it
 * failed, its message (stderr); stderr of a job that succeeded is kept as "stderr". */
static void batch_outcome(cJSON *rec, int code, char *text[2])
{
  cJSON_AddNumberToObject(rec, "exit", code);
  cJSON *result = *text[0] ? cJSON_ParseWithOpts(text[0], NULL, true) : NULL;
  if (result)
    cJSON_AddItemToObject(rec, "result", result);
  else if (*text[0])
    cJSON_AddStringToObject(rec, "output", text[0]);
  const char *message = g_strstrip(text[1]);
  if (g_str_has_prefix(message, "dlsim: error: ")) /* the record says it is an error */
    message += strlen("dlsim: error: ");
  if (code != 0) {
    g_autofree char *none = g_strdup_printf("exit code %d, no message", code);
    cJSON_AddStringToObject(rec, "error", *message ? message : none);
  } else if (*message) {
    cJSON_AddStringToObject(rec, "stderr", message);
  }
}

/* Why a job cannot run (its line does not parse, or names no command), or NULL. */
static char *batch_refusal(const char *path, const batch_job *j, char ***words,
                           const cli_command **cmd)
{
  GError *e = NULL;
  if (!g_shell_parse_argv(j->text, NULL, words, &e)) {
    char *why = g_strdup_printf("%s:%d: %s", path, j->line, e->message);
    g_error_free(e);
    return why;
  }
  if (strcmp((*words)[0], "dlsim") == 0 && (*words)[1]) { /* a pasted `dlsim ...` line */
    g_free((*words)[0]);
    memmove(*words, *words + 1, g_strv_length(*words) * sizeof(char *));
  }
  *cmd = cli_command_find((*words)[0], &e);
  if (!*cmd) {
    char *why = g_strdup_printf("%s:%d: %s", path, j->line, e->message);
    g_error_free(e);
    return why;
  }
  if ((*cmd)->run == cli_batch)
    return g_strdup_printf("%s:%d: a batch job cannot be a batch", path, j->line);
  return NULL;
}

/* The job's record as one line of JSON, after its exit code (how it travels to rank 0). */
static GBytes *batch_run_job(const char *path, const batch_job *j)
{
  cJSON *rec = cJSON_CreateObject();
  cJSON_AddNumberToObject(rec, "line", j->line);
  cJSON_AddStringToObject(rec, "command", j->text);
  g_auto(GStrv) words = NULL;
  const cli_command *cmd = NULL;
  g_autofree char *refusal = batch_refusal(path, j, &words, &cmd);
  gint32 code = 2;
  if (refusal) {
    cJSON_AddNumberToObject(rec, "exit", code);
    cJSON_AddStringToObject(rec, "error", refusal);
  } else {
    char *text[2] = {NULL, NULL};
    code = batch_exec(cmd, words, text);
    batch_outcome(rec, code, text);
    g_free(text[0]);
    g_free(text[1]);
  }
  char *line = cJSON_PrintUnformatted(rec);
  cJSON_Delete(rec);
  GByteArray *b = g_byte_array_new();
  g_byte_array_append(b, (const guint8 *)&code, sizeof code);
  g_byte_array_append(b, (const guint8 *)line, (guint)strlen(line) + 1);
  cJSON_free(line);
  return g_byte_array_free_to_bytes(b);
}

/* ---- the batch ------------------------------------------------------------------------------ */

typedef struct {
  int worst, failed;
  FILE *out;
} batch_tally;

/* Rank 0 writes a round's records in file order. */
static void batch_write(GPtrArray *items, batch_tally *t)
{
  for (guint i = 0; i < items->len; i++) {
    gsize n = 0;
    const char *p = items->pdata[i] ? g_bytes_get_data(items->pdata[i], &n) : NULL;
    gint32 code = 1;
    if (n > sizeof code) {
      memcpy(&code, p, sizeof code);
      fprintf(t->out, "%s\n", p + sizeof code);
    }
    t->worst = MAX(t->worst, code);
    t->failed += code != 0;
  }
  fflush(t->out);
}

static void batch_run(const cli_mpi *m, const char *path, const GArray *jobs, batch_tally *t)
{
  guint round = BATCH_ROUND * (guint)m->size;
  for (guint first = 0; first < jobs->len; first += round) {
    guint n = MIN(round, jobs->len - first);
    GPtrArray *items = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    g_ptr_array_set_size(items, (gint)n);
    for (guint i = 0; i < n; i++)
      if (cli_mpi_takes(m, i))
        items->pdata[i] = batch_run_job(path, &g_array_index(jobs, batch_job, first + i));
    cli_mpi_gather_items(m, items);
    if (m->rank == 0)
      batch_write(items, t);
    g_ptr_array_free(items, TRUE);
  }
}

/* Rank 0's output: stdout or -o FILE, opened before any job runs. */
static bool batch_open(const cli_mpi *m, const char *output, FILE **out, GError **err)
{
  *out = stdout;
  if (output && m->rank == 0 && !(*out = fopen(output, "w")))
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "-o %s: %s", output, g_strerror(errno));
  return cli_mpi_share_int(m, *out != NULL);
}

int cli_batch(int argc, char **argv)
{
  g_autofree char *output = NULL;
  GOptionEntry entries[] = {
      cli_opt(CLI_OUTPUT, &output, "Write the records to FILE (default stdout)"),
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "FILE - many dlsim jobs, one per line of FILE, one JSON line each", &argc,
                 &argv, &code))
    return code;
  if (argc != 2) {
    fprintf(stderr, "dlsim: error: dlsim batch needs one FILE of jobs (see --help)\n");
    return 2;
  }
  cli_mpi m;
  cli_mpi_init(&m);
  GError *err = NULL;
  GArray *jobs = batch_read(argv[1], &err);
  batch_tally t = {0};
  if (jobs && batch_open(&m, output, &t.out, &err)) {
    batch_run(&m, argv[1], jobs, &t);
    if (m.rank == 0 && t.failed)
      fprintf(stderr, "dlsim batch: %d of %u jobs failed (their records say why)\n", t.failed,
              jobs->len);
    if (t.out != stdout)
      fclose(t.out);
    code = t.worst;
  }
  batch_jobs_free(jobs);
  return cli_mpi_finish(&m, code, err);
}
