/* Writing a text the CLI produced (calibration, kernel table, Chrome trace) to a file. */
#include "config/config.h"

bool cfg_write_text(const char *option, const char *path, const GString *text, GError **err)
{
  GError *io = NULL;
  bool ok = g_file_set_contents(path, text->str, (gssize)text->len, &io);
  if (!ok) { /* named by the option that gave the path, so the user knows which one to fix */
    g_set_error(err, CFG_ERROR, CFG_ERROR_INPUT, "%s %s: %s", option, path, io->message);
    g_error_free(io);
  }
  return ok;
}
