#include "cli/cli_internal.h"
#include "config/config.h"
#include "program/program.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void cli_check_convention(const GOptionEntry *entries);

int cli_error_code(const GError *err)
{
  return err && err->domain == CFG_ERROR && err->code == CFG_ERROR_RUNTIME ? 1 : 2;
}

int cli_fail(GError *err)
{
  int code = cli_error_code(err);
  fprintf(stderr, "dlsim: error: %s\n", err ? err->message : "unknown error");
  if (err)
    g_error_free(err);
  return code;
}

/* The entry `arg` names (--long or -s, without a value attached), or NULL. */
static const GOptionEntry *cli_entry_of(const GOptionEntry *entries, const char *arg)
{
  for (const GOptionEntry *e = entries; e->long_name; e++) {
    if (g_str_has_prefix(arg, "--") && strcmp(arg + 2, e->long_name) == 0)
      return e;
    if (e->short_name && arg[0] == '-' && arg[1] == e->short_name && arg[2] == '\0')
      return e;
  }
  return NULL;
}

/* Whether an argument reads as an option rather than a value (negative numbers are values). */
static bool cli_looks_like_option(const char *arg)
{
  return arg[0] == '-' && arg[1] && !g_ascii_isdigit(arg[1]) && arg[1] != '.';
}

/* GOption gives an option that takes a value whatever follows it, even another option: `serve
 * --trace --json` wrote a trace file named "--json". Refuse that before parsing. */
static bool cli_values_present(const GOptionEntry *entries, int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const GOptionEntry *e = cli_entry_of(entries, argv[i]);
    if (!e || e->arg == G_OPTION_ARG_NONE)
      continue;
    if (i + 1 >= argc || cli_looks_like_option(argv[i + 1])) {
      fprintf(stderr, "dlsim: error: %s needs a value%s%s (see --help)\n", argv[i],
              i + 1 < argc ? ", but is followed by the option " : "", i + 1 < argc ? argv[i + 1] : "");
      return false;
    }
    i++;
  }
  return true;
}

/* GOption says "Unknown option --workoad"; say which one was meant. */
static bool cli_options_known(const GOptionEntry *entries, int argc, char **argv)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  for (const GOptionEntry *e = entries; e->long_name; e++)
    g_ptr_array_add(names, g_strdup_printf("--%s", e->long_name));
  bool ok = true;
  for (int i = 1; ok && i < argc && strcmp(argv[i], "--") != 0; i++) {
    g_autofree char *name = g_strndup(argv[i], strcspn(argv[i], "="));
    if (g_str_has_prefix(name, "--") && !g_str_has_prefix(name, "--help"))
      ok = cli_known("option", name, (const char *const *)names->pdata, (int)names->len);
  }
  return ok;
}

bool cli_parse(const GOptionEntry *entries, const char *summary, int *argc, char ***argv, int *code)
{
  cli_check_convention(entries);
  if (!cli_options_known(entries, *argc, *argv) || !cli_values_present(entries, *argc, *argv)) {
    *code = 2;
    return false;
  }
  GOptionContext *ctx = g_option_context_new(summary);
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *err = NULL;
  bool ok = g_option_context_parse(ctx, argc, argv, &err);
  g_option_context_free(ctx);
  if (ok)
    return true;
  fprintf(stderr, "dlsim: error: %s (see --help)\n", err->message);
  g_error_free(err);
  *code = 2;
  return false;
}

/* ---- the option convention ------------------------------------------------------------------ */

/* Every option that has a short letter is a row here, and cli_opt() is the only way a command
 * gets one, so a letter means one option in every command; the rest of each command's options
 * are long only. The help is the default; a command may word it for itself. */
typedef struct {
  const char *long_name;
  char short_name;
  GOptionArg arg;
  const char *help, *arg_description;
} cli_opt_row;

static const cli_opt_row cli_opt_rows[CLI_NOPTS] = {
    [CLI_CLUSTER] = {"cluster", 'c', G_OPTION_ARG_FILENAME, "Cluster file or preset name", "CLUSTER"},
    [CLI_WORKLOAD] = {"workload", 'w', G_OPTION_ARG_FILENAME, "Workload file or preset name", "WORKLOAD"},
    [CLI_MODEL] = {"model", 'm', G_OPTION_ARG_STRING, "Model file or preset name", "MODEL"},
    [CLI_SET] = {"set", 's', G_OPTION_ARG_STRING_ARRAY, "Override a key, repeatable: --set parallel.dp=8", "KEY=VALUE"},
    [CLI_ENGINE] = {"engine", 'e', G_OPTION_ARG_STRING, CLI_ENGINE_HELP, "ENGINE"},
    [CLI_OUTPUT] = {"output", 'o', G_OPTION_ARG_FILENAME, "File to write", "FILE"},
    [CLI_TRACE] = {"trace", 't', G_OPTION_ARG_FILENAME, "Write a Chrome/Perfetto trace", "FILE"},
    [CLI_GPUS] = {"gpus", 'n', G_OPTION_ARG_INT, "GPUs", "N"},
    [CLI_GROUP_SIZE] = {"group-size", 'g', G_OPTION_ARG_INT, "GPUs per group (groups run at once)", "G"},
    [CLI_GLOBAL_BATCH] = {"global-batch", 'b', G_OPTION_ARG_INT, "Global batch (sequences)", "B"},
    [CLI_TOP] = {"top", 'k', G_OPTION_ARG_INT, "How many to list", "K"},
    [CLI_ALGO] = {"algo", 'a', G_OPTION_ARG_STRING, "Collective algorithm", "ALGO"},
    [CLI_PROTO] = {"proto", 'p', G_OPTION_ARG_STRING, "NCCL protocol: auto, ll, ll128, simple", "PROTO"},
    [CLI_THREADS] = {"threads", 'j', G_OPTION_ARG_INT, "Threads", "N"},
    [CLI_VERBOSE] = {"verbose", 'v', G_OPTION_ARG_NONE, "Print more", NULL},
    [CLI_QUIET] = {"quiet", 'q', G_OPTION_ARG_NONE, "No progress on stderr", NULL},
    [CLI_YES] = {"yes", 'y', G_OPTION_ARG_NONE, "Run even if estimated to take long", NULL},
    [CLI_JSON] = {"json", 0, G_OPTION_ARG_NONE, "Print JSON (keys of docs/output.md)", NULL},
    [CLI_CSV] = {"csv", 0, G_OPTION_ARG_NONE,
                 "Print CSV: a header row, units in the column names (_s seconds, _GiB memory)", NULL},
    [CLI_MAX_MEMORY] = {"max-memory", 0, G_OPTION_ARG_STRING,
                        "Refuse runs estimated to need more (default 4GiB)", "SIZE"},
};

GOptionEntry cli_opt(cli_opt_id id, gpointer data, const char *help)
{
  const cli_opt_row *r = &cli_opt_rows[id];
  return (GOptionEntry){r->long_name, r->short_name, 0, r->arg, data, help ? help : r->help,
                        r->arg_description};
}

/* The convention, checked on every parse: a short letter that is not the table's for that
 * option is a programming error, caught by the first run of the command (and by test_cli.c). */
static void cli_check_convention(const GOptionEntry *entries)
{
  for (const GOptionEntry *e = entries; e->long_name; e++) {
    bool ok = !e->short_name;
    for (int i = 0; !ok && i < CLI_NOPTS; i++)
      ok = e->short_name == cli_opt_rows[i].short_name &&
           strcmp(e->long_name, cli_opt_rows[i].long_name) == 0;
    if (!ok)
      g_error("-%c, --%s breaks the option convention: short letters come from sim/cli/common.c",
              e->short_name, e->long_name);
  }
}

/* ---- enumerated values ---------------------------------------------------------------------- */

int cli_choice(const char *option, const char *value, const char *const *names, int n, GError **err)
{
  for (int i = 0; i < n; i++)
    if (strcmp(value, names[i]) == 0)
      return i;
  GString *all = g_string_new(NULL);
  for (int i = 0; i < n; i++)
    g_string_append_printf(all, "%s%s", i ? ", " : "", names[i]);
  const char *near = cfg_closest(value, names, (size_t)n);
  g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s %s: expected one of %s%s%s%s", option, value,
              all->str, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
  g_string_free(all, TRUE);
  return -1;
}

bool cli_known(const char *what, const char *name, const char *const *names, int n)
{
  for (int i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0)
      return true;
  const char *near = cfg_closest(name, names, (size_t)n);
  fprintf(stderr, "dlsim: error: unknown %s '%s'%s%s%s\n", what, name, near ? " (did you mean '" : "",
          near ? near : "", near ? "'?)" : "");
  return false;
}

bool cli_engine(const char *value, eng_kind *out, GError **err)
{
  const char *const names[] = {[ENG_ANALYTIC] = eng_kind_name(ENG_ANALYTIC),
                               [ENG_DES] = eng_kind_name(ENG_DES)};
  *out = CLI_DEFAULT_ENGINE;
  int i = value ? cli_choice("--engine", value, names, G_N_ELEMENTS(names), err) : (int)*out;
  if (i < 0)
    return false;
  *out = (eng_kind)i;
  return true;
}

bool cli_coll_op(const char *value, prog_coll *out, GError **err)
{
  const char *names[PROG_NCOLLS];
  for (int i = 0; i < PROG_NCOLLS; i++)
    names[i] = prog_coll_name((prog_coll)i);
  int i = cli_choice("--op", value, names, PROG_NCOLLS, err);
  *out = i >= 0 ? (prog_coll)i : *out;
  return i >= 0;
}

bool cli_dtype(const char *value, cfg_dtype *out, GError **err)
{
  const char *names[CFG_NDTYPES];
  for (int i = 0; i < CFG_NDTYPES; i++)
    names[i] = cfg_dtype_name((cfg_dtype)i);
  int i = cli_choice("--dtype", value, names, CFG_NDTYPES, err);
  *out = i >= 0 ? (cfg_dtype)i : *out;
  return i >= 0;
}

/* ---- CSV ------------------------------------------------------------------------------------ */

/* The leaves of a JSON object as (dotted key, value) pairs, in order; arrays are left out (a CSV
 * row is flat). */
void cli_json_leaves(const cJSON *o, const char *prefix, GPtrArray *keys, GPtrArray *values)
{
  const cJSON *x;
  cJSON_ArrayForEach(x, o)
  {
    if (!x->string) /* a member of an array, not of an object */
      continue;
    g_autofree char *key = prefix ? g_strdup_printf("%s.%s", prefix, x->string) : g_strdup(x->string);
    if (cJSON_IsObject(x)) {
      cli_json_leaves(x, key, keys, values);
    } else if (!cJSON_IsArray(x)) {
      g_ptr_array_add(keys, g_steal_pointer(&key));
      g_ptr_array_add(values, (gpointer)x);
    }
  }
}

void cli_json_prepend(cJSON *o, const char *key, cJSON *item)
{
  cJSON_AddItemToObject(o, key, item);
  cJSON_InsertItemInArray(o, 0, cJSON_DetachItemViaPointer(o, item));
}

/* A memory column: printed in GiB, named _GiB (a spreadsheet reads 64.26, not 68997279410).
 * Message sizes (size_bytes, as nccl-tests prints them) stay in bytes. */
static bool cli_csv_bytes_column(const char *key)
{
  return g_str_has_suffix(key, "_bytes") && !g_str_has_suffix(key, "size_bytes");
}

static void cli_csv_header(FILE *out, const char *key)
{
  if (cli_csv_bytes_column(key))
    fprintf(out, "%.*s_GiB", (int)(strlen(key) - strlen("_bytes")), key);
  else
    fputs(key, out);
}

static void cli_csv_cell(FILE *out, const char *key, const cJSON *x)
{
  if (!x || cJSON_IsNull(x))
    return;
  double v = x->valuedouble;
  if (cJSON_IsNumber(x) && cli_csv_bytes_column(key)) {
    fprintf(out, "%.4f", v / (1024.0 * 1024 * 1024));
    return;
  }
  if (cJSON_IsNumber(x) && (v == floor(v) || fabs(v) >= 1e6) && fabs(v) < 1e18)
    fprintf(out, "%.0f", v); /* counts as plain integers, never 1e+10 */
  else if (cJSON_IsNumber(x))
    fprintf(out, "%.10g", x->valuedouble);
  else if (cJSON_IsBool(x))
    fputs(cJSON_IsTrue(x) ? "true" : "false", out);
  else if (cJSON_IsString(x) && strpbrk(x->valuestring, ",\"\n")) {
    g_auto(GStrv) parts = g_strsplit(x->valuestring, "\"", -1);
    g_autofree char *quoted = g_strjoinv("\"\"", parts);
    fprintf(out, "\"%s\"", quoted);
  } else if (cJSON_IsString(x)) {
    fputs(x->valuestring, out);
  }
}

void cli_csv_print(FILE *out, const cJSON *rows)
{
  /* the header is every column any row has, in the order they first appear */
  GPtrArray *columns = g_ptr_array_new_with_free_func(g_free);
  const cJSON *row;
  cJSON_ArrayForEach(row, rows)
  {
    g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) values = g_ptr_array_new();
    cli_json_leaves(row, NULL, keys, values);
    for (guint k = 0; k < keys->len; k++)
      if (!g_ptr_array_find_with_equal_func(columns, keys->pdata[k], g_str_equal, NULL))
        g_ptr_array_add(columns, g_strdup(keys->pdata[k]));
  }
  for (guint c = 0; c < columns->len; c++) {
    if (c)
      fputc(',', out);
    cli_csv_header(out, columns->pdata[c]);
  }
  fputc('\n', out);
  cJSON_ArrayForEach(row, rows)
  {
    g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) values = g_ptr_array_new();
    cli_json_leaves(row, NULL, keys, values);
    for (guint c = 0; c < columns->len; c++) {
      guint k = 0;
      if (c)
        fputc(',', out);
      if (g_ptr_array_find_with_equal_func(keys, columns->pdata[c], g_str_equal, &k))
        cli_csv_cell(out, columns->pdata[c], values->pdata[k]);
    }
    fputc('\n', out);
  }
  g_ptr_array_free(columns, TRUE);
}
