/* dlsim schema [--markdown]: every key of cluster, workload, calibration and validation-case
 * files, with its type, unit, default, allowed values and what it is, from the loader's own
 * tables (docs/schema.md is the --markdown output). */
#include "cli/cli.h"
#include "config/config.h"

#include <stdio.h>

int cli_schema(int argc, char **argv)
{
  gboolean markdown = FALSE, keys = FALSE;
  GOptionEntry entries[] = {
      {"markdown", 0, 0, G_OPTION_ARG_NONE, &markdown, "Print Markdown (docs/schema.md)", NULL},
      {"keys", 0, 0, G_OPTION_ARG_NONE, &keys, "Print only the keys --set takes, one a line", NULL},
      CLI_OPT_END};
  int code = 0;
  if (!cli_parse(entries, "- every configuration key: type, default, allowed values", &argc, &argv,
                 &code))
    return code;
  if (argc > 1) {
    fprintf(stderr, "dlsim: error: unexpected argument '%s' (see dlsim schema --help)\n", argv[1]);
    return 2;
  }
  GString *out = g_string_new(NULL);
  if (keys)
    cfg_schema_set_keys(out);
  else
    cfg_schema_reference(out, markdown);
  fputs(out->str, stdout);
  g_string_free(out, TRUE);
  return 0;
}
