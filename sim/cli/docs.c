/* The man page dlsim(1) and the bash completion, both read from what `dlsim --help` and `dlsim
 * COMMAND --help` print. GOption prints that help from each command's own option table, so the
 * man page and the completion follow every option added, renamed or removed without anyone
 * editing them (the build runs the hidden commands `dlsim man` and `dlsim completion`). */
#include "cli/cli_internal.h"
#include "config/config.h"

#include <stdio.h>
#include <string.h>

static void cli_doc_option_free(gpointer p)
{
  cli_doc_option *o = p;
  g_free(o->long_name);
  g_free(o->arg);
  g_free(o->desc);
  g_free(o);
}

static cli_doc_command *cli_doc_command_new(const char *name, const char *summary)
{
  cli_doc_command *c = g_new0(cli_doc_command, 1);
  c->name = g_strdup(name);
  c->summary = g_strdup(summary);
  c->options = g_ptr_array_new_with_free_func(cli_doc_option_free);
  c->text = g_string_new(NULL);
  return c;
}

void cli_doc_command_free(gpointer p)
{
  cli_doc_command *c = p;
  g_free(c->name);
  g_free(c->summary);
  g_free(c->synopsis);
  g_ptr_array_free(c->options, TRUE);
  g_string_free(c->text, TRUE);
  g_free(c);
}

/* "  NAME   summary" -> its two parts, or false for a line that is not one. */
static bool cli_doc_split_entry(const char *line, char **name, char **rest)
{
  const char *p = line;
  while (*p == ' ')
    p++;
  const char *end = p;
  while (*end && *end != ' ')
    end++;
  if (p == line || end == p)
    return false;
  *name = g_strndup(p, (gsize)(end - p));
  *rest = g_strstrip(g_strdup(end));
  return true;
}

GPtrArray *cli_doc_commands(const char *usage)
{
  GPtrArray *cmds = g_ptr_array_new_with_free_func(cli_doc_command_free);
  g_auto(GStrv) lines = g_strsplit(usage, "\n", -1);
  bool listing = false;
  for (int i = 0; lines[i]; i++) {
    if (!listing) {
      listing = strcmp(lines[i], "commands:") == 0;
      continue;
    }
    g_autofree char *name = NULL, *summary = NULL;
    if (!cli_doc_split_entry(lines[i], &name, &summary))
      break;
    g_ptr_array_add(cmds, cli_doc_command_new(name, summary));
  }
  return cmds;
}

/* "  -c, --cluster=CLUSTER    Cluster file" or "  --json    Print JSON" as GOption lays it out. */
static cli_doc_option *cli_doc_parse_option(const char *line)
{
  const char *p = line;
  while (*p == ' ')
    p++;
  char short_name = 0;
  if (p[0] == '-' && p[1] && p[1] != '-' && p[2] == ',' && p[3] == ' ') {
    short_name = p[1];
    p += 4;
  }
  if (p == line || !g_str_has_prefix(p, "--") || !g_ascii_isalnum(p[2]))
    return NULL;
  p += 2;
  const char *end = p + strcspn(p, "= ");
  cli_doc_option *o = g_new0(cli_doc_option, 1);
  o->short_name = short_name;
  o->long_name = g_strndup(p, (gsize)(end - p));
  if (*end == '=') {
    const char *arg = end + 1;
    end = arg + strcspn(arg, " ");
    o->arg = g_strndup(arg, (gsize)(end - arg));
  }
  o->desc = g_strstrip(g_strdup(end));
  return o;
}

/* "dlsim run [OPTION?] - simulate ..." -> "dlsim run [OPTION...]" (the summary comes from the
 * command list, which says more); GOption's ellipsis is "?" outside a UTF-8 locale. */
static char *cli_doc_synopsis(const char *usage)
{
  g_autofree char *s = g_strstrip(g_strdup(usage));
  char *dash = strstr(s, " - ");
  if (dash)
    *dash = '\0';
  g_autoptr(GString) out = g_string_new(s);
  g_string_replace(out, "[OPTION?]", "[OPTION...]", 0);
  g_string_replace(out, "[OPTION\u2026]", "[OPTION...]", 0);
  return g_strdup(out->str);
}

static bool cli_doc_blank(const char *line)
{
  return line[strspn(line, " ")] == '\0';
}

/* A description GOption continued on the next line, indented under the first. */
static void cli_doc_continue(cli_doc_option *o, const char *line)
{
  g_autofree char *more = g_strstrip(g_strdup(line));
  char *joined = g_strconcat(o->desc, *o->desc ? " " : "", more, NULL);
  g_free(o->desc);
  o->desc = joined;
}

void cli_doc_parse_help(cli_doc_command *c, const char *help)
{
  g_auto(GStrv) lines = g_strsplit(help, "\n", -1);
  bool help_section = false;
  cli_doc_option *last = NULL;
  for (int i = 0; lines[i]; i++) {
    char *l = lines[i];
    cli_doc_option *o = NULL;
    if (strcmp(l, "Usage:") == 0 && lines[i + 1]) {
      g_free(c->synopsis);
      c->synopsis = cli_doc_synopsis(lines[++i]);
    } else if (l[0] && l[0] != ' ' && g_str_has_suffix(l, "Options:")) {
      help_section = g_str_has_prefix(l, "Help ");
      last = NULL;
    } else if (cli_doc_blank(l)) {
      last = NULL;
    } else if (help_section && l[0] == ' ') {
      continue; /* -h, --help: every command has them */
    } else if (l[0] == ' ' && (o = cli_doc_parse_option(l))) {
      g_ptr_array_add(c->options, o);
      last = o;
    } else if (l[0] == ' ' && last) {
      cli_doc_continue(last, l);
    } else if (!g_str_has_prefix(l, "usage:")) {
      g_string_append_printf(c->text, "%s\n", g_strchug(l));
    }
  }
}

/* ---- roff ------------------------------------------------------------------------------- */

/* Text as roff prints it literally: backslashes escaped, hyphens as minus signs (so options
 * copy and paste), a leading dot or quote kept from reading as a request. */
static void cli_roff(GString *out, const char *text)
{
  if (text[0] == '.' || text[0] == '\'')
    g_string_append(out, "\\&");
  for (const char *p = text; *p; p++) {
    if (*p == '\\')
      g_string_append(out, "\\e");
    else if (*p == '-')
      g_string_append(out, "\\-");
    else
      g_string_append_c(out, *p);
  }
}

static void cli_roff_option(GString *out, const cli_doc_option *o)
{
  g_string_append(out, ".TP\n");
  if (o->short_name)
    g_string_append_printf(out, "\\fB\\-%c\\fR, ", o->short_name);
  g_string_append(out, "\\fB\\-\\-");
  cli_roff(out, o->long_name);
  g_string_append(out, "\\fR");
  if (o->arg) {
    g_string_append(out, "=\\fI");
    cli_roff(out, o->arg);
    g_string_append(out, "\\fR");
  }
  g_string_append_c(out, '\n');
  cli_roff(out, o->desc);
  g_string_append_c(out, '\n');
}

static void cli_roff_command(GString *out, const cli_doc_command *c)
{
  g_string_append(out, ".SS ");
  cli_roff(out, c->name);
  g_string_append(out, "\n");
  cli_roff(out, c->summary);
  size_t n = strlen(c->summary);
  bool ended = n && strchr(".?!", c->summary[n - 1]);
  g_string_append(out, ended ? "\n.PP\n" : ".\n.PP\n");
  g_autofree char *head = g_strdup_printf("dlsim %s", c->name);
  const char *syn = c->synopsis ? c->synopsis : head;
  g_string_append(out, "\\fB");
  cli_roff(out, head);
  g_string_append(out, "\\fR");
  cli_roff(out, g_str_has_prefix(syn, head) ? syn + strlen(head) : "");
  g_string_append_c(out, '\n');
  for (guint i = 0; i < c->options->len; i++)
    cli_roff_option(out, g_ptr_array_index(c->options, i));
  g_auto(GStrv) paras = g_strsplit(c->text->str, "\n", -1);
  for (int i = 0; paras[i]; i++)
    if (*paras[i]) {
      g_string_append(out, ".PP\n");
      cli_roff(out, paras[i]);
      g_string_append_c(out, '\n');
    }
}

static const char cli_man_head[] =
    ".SH NAME\n"
    "dlsim \\- simulate distributed deep\\-learning training and LLM serving on GPU clusters\n"
    ".SH SYNOPSIS\n"
    ".B dlsim\n.I COMMAND\n.RI [ OPTION ...]\n.br\n"
    ".B dlsim\n.BR \\-\\-help \" | \" \\-\\-version \" | \" \\-\\-data\\-dir\n"
    ".SH DESCRIPTION\n"
    "dlsim simulates a training step or a serving workload of a cluster (GPUs, NVLink/NVSwitch, "
    "InfiniBand) and a workload (a model and its parallel layout) described in YAML files, or "
    "named by the presets it ships. Any key of either can be changed with \\fB\\-\\-set\\fR "
    "\\fIKEY\\fR=\\fIVALUE\\fR; \\fBdlsim schema\\fR lists them all. "
    "\\fBdlsim \\-\\-data\\-dir\\fR prints where the presets are.\n"
    ".SH COMMANDS\n";

static const char cli_man_tail[] =
    ".SH ENVIRONMENT\n"
    ".TP\n.B DLSIM_DATA_DIR\n"
    "The directory holding \\fIconfigs/\\fR (the presets), \\fIvalidation/\\fR and "
    "\\fItraces/\\fR. Unset, dlsim uses \\fIshare/dlsim\\fR of the prefix it is installed in "
    "(found from its own executable, so the prefix can move), else the source tree it was "
    "built from.\n"
    ".TP\n.B DLSIM_DES_STALL\n"
    "Seconds a DES simulation (a child process) may go without using the CPU or sending a "
    "result before dlsim kills it and reports the run as failed (default 120).\n"
    ".TP\n.B DLSIM_PROGRESS_DELAY\n"
    "Seconds a run goes on before its progress line appears on a terminal (default 2).\n"
    ".TP\n.B DLSIM_SIMGRID_CONTEXTS\n"
    "SimGrid's context factory for the DES engine (\\fBthread\\fR, \\fBucontext\\fR, "
    "\\fBraw\\fR); SimGrid's default when unset.\n"
    ".SH FILES\n"
    "\\fIDATA\\fR is the data directory (\\fBdlsim \\-\\-data\\-dir\\fR prints it).\n"
    ".TP\n.I DATA/configs/clusters/NAME.yaml\n"
    "cluster presets (\\fB\\-c\\fR \\fINAME\\fR)\n"
    ".TP\n.I DATA/configs/workloads/NAME.yaml\n"
    "workload presets (\\fB\\-w\\fR \\fINAME\\fR)\n"
    ".TP\n.I DATA/configs/models/NAME.yaml\n"
    "model presets (\\fBmodel:\\fR \\fINAME\\fR, \\fB\\-m\\fR \\fINAME\\fR)\n"
    ".TP\n.I DATA/validation/cases/\n"
    "the measured cases \\fBdlsim validate\\fR runs\n"
    ".SH EXIT STATUS\n"
    "0 success; 1 the simulation failed or was refused as too large (out of memory is a "
    "result, not a failure); 2 bad input or usage.\n"
    ".SH EXAMPLES\n"
    ".EX\n"
    "dlsim run \\-c dgx\\-h100 \\-w llama3\\-405b\n"
    "dlsim run \\-c dgx\\-a100 \\-w megatron\\-175b \\-\\-set node.count=8 \\-\\-engine analytic\n"
    "dlsim plan \\-c dgx\\-a100 \\-m gpt3\\-175b \\-\\-gpus 1024 \\-\\-global\\-batch 1536\n"
    ".EE\n";

void cli_doc_man(GString *out, const GPtrArray *commands, const char *version)
{
  g_string_append_printf(out, ".\\\" generated by `dlsim man` from the commands' --help\n"
                              ".TH DLSIM 1 \"\" \"dlsim %s\" \"User Commands\"\n", version);
  g_string_append(out, cli_man_head);
  for (guint i = 0; i < commands->len; i++)
    cli_roff_command(out, g_ptr_array_index(commands, i));
  g_string_append(out, cli_man_tail);
}

/* ---- bash completion --------------------------------------------------------------------- */

/* What the value of an option names, by its metavariable: presets of the data directory,
 * configuration keys (KEY=VALUE: dlsim schema --keys), a file, or something else (none). */
static const char *cli_doc_value_kind(const cli_doc_option *o)
{
  static const char *const files[] = {"FILE", "TABLE", "TRACE", "CSV", "DIR", NULL};
  if (!o->arg)
    return NULL;
  if (strcmp(o->arg, "CLUSTER") == 0)
    return "clusters";
  if (strcmp(o->arg, "WORKLOAD") == 0)
    return "workloads";
  if (strcmp(o->arg, "MODEL") == 0)
    return "models";
  /* plan --fix KEY=VALUE pins a layout dimension (tp, pp, ...), not a configuration key */
  if (g_str_has_prefix(o->arg, "KEY=") && strcmp(o->long_name, "fix") != 0)
    return "keys";
  return g_strv_contains(files, o->arg) ? "file" : "none";
}

/* Only names bash reads as plain words go into the script. */
static bool cli_doc_word_ok(const char *w)
{
  for (const char *p = w; *p; p++)
    if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_' && *p != '.')
      return false;
  return *w != '\0';
}

static void cli_bash_words(GString *out, const cli_doc_command *c)
{
  g_string_append_printf(out, "    '%s') opts='--help", c->name);
  for (guint i = 0; i < c->options->len; i++) {
    const cli_doc_option *o = g_ptr_array_index(c->options, i);
    if (!cli_doc_word_ok(o->long_name))
      continue;
    if (o->short_name && g_ascii_isalnum(o->short_name))
      g_string_append_printf(out, " -%c", o->short_name);
    g_string_append_printf(out, " --%s", o->long_name);
  }
  g_string_append(out, "' ;;\n");
}

static void cli_bash_values(GString *out, const cli_doc_command *c)
{
  for (guint i = 0; i < c->options->len; i++) {
    const cli_doc_option *o = g_ptr_array_index(c->options, i);
    const char *kind = cli_doc_value_kind(o);
    if (!kind || !cli_doc_word_ok(o->long_name))
      continue;
    g_string_append(out, "    ");
    if (o->short_name && g_ascii_isalnum(o->short_name))
      g_string_append_printf(out, "'%s -%c'|", c->name, o->short_name);
    g_string_append_printf(out, "'%s --%s') kind=%s ;;\n", c->name, o->long_name, kind);
  }
}

/* "trace summary" is a command of two words: the first completes the second. */
static void cli_bash_subcommands(GString *out, const GPtrArray *commands)
{
  for (guint i = 0; i < commands->len; i++) {
    const cli_doc_command *c = g_ptr_array_index(commands, i);
    const char *space = strchr(c->name, ' ');
    if (space)
      g_string_append_printf(out, "  [[ $cmd == '%.*s' ]] && { ((COMP_CWORD == 2)) && subs='%s'; "
                                  "cmd='%s'; }\n",
                             (int)(space - c->name), c->name, space + 1, c->name);
  }
}

static const char cli_bash_head[] =
    "# bash completion for dlsim(1): generated by `dlsim completion` from the commands' --help\n"
    "\n"
    "# The presets of one kind (clusters, workloads, models) in dlsim's data directory.\n"
    "_dlsim_presets()\n"
    "{\n"
    "  local dir f\n"
    "  dir=$(command \"$1\" --data-dir 2>/dev/null) || return\n"
    "  for f in \"$dir/configs/$2\"/*.yaml; do\n"
    "    [[ -e $f ]] || continue\n"
    "    f=${f##*/}\n"
    "    printf '%s\\n' \"${f%.yaml}\"\n"
    "  done\n"
    "}\n"
    "\n"
    "_dlsim()\n"
    "{\n"
    "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} prog=${COMP_WORDS[0]}\n"
    "  local cmd=${COMP_WORDS[1]} subs= kind= opts=\n"
    "  COMPREPLY=()\n"
    "  # --option=value: bash makes the = a word of its own; after KEY= the value is free\n"
    "  if [[ $cur == = || $prev == = ]]; then\n"
    "    [[ $cur == = ]] && cur= || prev=${COMP_WORDS[COMP_CWORD-2]}\n"
    "    [[ $prev == -* ]] || return\n"
    "  fi\n";

static const char cli_bash_tail[] =
    "  case $kind in\n"
    "    clusters|workloads|models)\n"
    "      COMPREPLY=($(compgen -W \"$(_dlsim_presets \"$prog\" \"$kind\")\" -- \"$cur\")); return ;;\n"
    "    keys)\n"
    "      compopt -o nospace 2>/dev/null\n"
    "      COMPREPLY=($(compgen -S = -W \"$(command \"$prog\" schema --keys 2>/dev/null)\" -- \"$cur\"))\n"
    "      return ;;\n"
    "    file) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
    "    none) return ;;\n"
    "  esac\n"
    "  if [[ $cur == -* ]]; then\n"
    "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
    "  else\n"
    "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
    "  fi\n"
    "}\n"
    "complete -F _dlsim dlsim\n";

void cli_doc_bash(GString *out, const GPtrArray *commands)
{
  g_string_append(out, cli_bash_head);
  g_string_append(out, "  if ((COMP_CWORD == 1)); then\n    COMPREPLY=($(compgen -W '--help --version --data-dir");
  for (guint i = 0; i < commands->len; i++) {
    const cli_doc_command *c = g_ptr_array_index(commands, i);
    g_autofree char *first = g_strndup(c->name, strcspn(c->name, " "));
    if (cli_doc_word_ok(first))
      g_string_append_printf(out, " %s", first);
  }
  g_string_append(out, "' -- \"$cur\"))\n    return\n  fi\n");
  cli_bash_subcommands(out, commands);
  g_string_append(out, "  if [[ -n $subs ]]; then\n"
                       "    COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n    return\n  fi\n"
                       "  case \"$cmd $prev\" in\n");
  for (guint i = 0; i < commands->len; i++)
    cli_bash_values(out, g_ptr_array_index(commands, i));
  g_string_append(out, "  esac\n  case $cmd in\n");
  for (guint i = 0; i < commands->len; i++)
    cli_bash_words(out, g_ptr_array_index(commands, i));
  g_string_append(out, "  esac\n");
  g_string_append(out, cli_bash_tail);
}

/* ---- the commands: dlsim runs itself for each --help ------------------------------------- */

static char *cli_doc_help_of(const char *exe, const char *cmd, const char *sub, GError **err)
{
  const char *argv[] = {exe, cmd ? cmd : "--help", sub ? sub : "--help", "--help", NULL};
  if (!sub)
    argv[cmd ? 3 : 2] = NULL;
  char *out = NULL;
  int status = 0;
  if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL,
                    &status, err))
    return NULL;
  return out;
}

/* A command with subcommands lists them under "subcommands:" in its help; the first one's help
 * is the one with the options. */
static char *cli_doc_subcommand(const char *help)
{
  const char *list = strstr(help, "\nsubcommands:\n");
  if (!list)
    return NULL;
  const char *p = list + strlen("\nsubcommands:\n");
  p += strspn(p, " ");
  size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz-");
  return n ? g_strndup(p, n) : NULL;
}

static GPtrArray *cli_doc_collect(GError **err)
{
  g_autofree char *exe = g_file_read_link("/proc/self/exe", err);
  g_autofree char *usage = exe ? cli_doc_help_of(exe, NULL, NULL, err) : NULL;
  if (!usage)
    return NULL;
  GPtrArray *cmds = cli_doc_commands(usage);
  if (!cmds->len) { /* the build must not install a man page without commands */
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "no \"commands:\" list in dlsim --help:\n%s",
                usage);
    g_ptr_array_free(cmds, TRUE);
    return NULL;
  }
  for (guint i = 0; i < cmds->len; i++) {
    cli_doc_command *c = g_ptr_array_index(cmds, i);
    g_autofree char *help = cli_doc_help_of(exe, c->name, NULL, err);
    g_autofree char *sub = help ? cli_doc_subcommand(help) : NULL;
    if (sub) {
      g_free(help);
      help = cli_doc_help_of(exe, c->name, sub, err);
      char *name = g_strdup_printf("%s %s", c->name, sub);
      g_free(c->name);
      c->name = name;
    }
    if (!help) {
      g_ptr_array_free(cmds, TRUE);
      return NULL;
    }
    cli_doc_parse_help(c, help);
  }
  return cmds;
}

/* dlsim man|completion [-o FILE] */
static int cli_doc_write(int argc, char **argv, void (*gen)(GString *, const GPtrArray *))
{
  g_autofree char *output = NULL;
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write to FILE (default: stdout)", "FILE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  int code = 0;
  if (!cli_parse(entries, "- generated documentation (the build runs this)", &argc, &argv, &code))
    return code;
  GError *err = NULL;
  GPtrArray *cmds = cli_doc_collect(&err);
  if (!cmds)
    return cli_fail(err);
  g_autoptr(GString) out = g_string_new(NULL);
  gen(out, cmds);
  g_ptr_array_free(cmds, TRUE);
  if (!output) {
    fputs(out->str, stdout);
    return 0;
  }
  return cfg_write_text("-o", output, out, &err) ? 0 : cli_fail(err);
}

static void cli_doc_man_current(GString *out, const GPtrArray *commands)
{
  cli_doc_man(out, commands, DLSIM_VERSION);
}

bool cli_is_hidden(const char *command)
{
  static const char *const hidden[] = {"--data-dir", "man", "completion", NULL};
  return g_strv_contains(hidden, command);
}

int cli_hidden(int argc, char **argv)
{
  if (strcmp(argv[0], "--data-dir") == 0) {
    g_autofree char *dir = cfg_data_path(NULL, NULL);
    printf("%s\n", dir);
    return 0;
  }
  bool man = strcmp(argv[0], "man") == 0;
  g_autofree char *prog = g_strdup_printf("dlsim %s", argv[0]);
  argv[0] = prog;
  return cli_doc_write(argc, argv, man ? cli_doc_man_current : cli_doc_bash);
}
