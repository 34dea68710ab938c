/* The configuration reference: generated from the loader's tables, committed as docs/schema.md,
 * every key documented; and every relative link of the repository's Markdown resolves inside
 * it. */
#include "config/config_internal.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <string.h>

Test(schema, docs_schema_md_is_the_generated_reference)
{
  GString *now = g_string_new(NULL);
  cfg_schema_reference(now, true);
  g_autofree char *path = g_build_filename(DLSIM_SOURCE_DIR, "docs", "schema.md", NULL);
  g_autofree char *committed = NULL;
  cr_assert(g_file_get_contents(path, &committed, NULL, NULL), "no %s", path);
  cr_assert_str_eq(committed, now->str,
                   "docs/schema.md is stale: regenerate it with dlsim schema --markdown > docs/schema.md");
  g_string_free(now, TRUE);
}

static void schema_all_documented(const cfg_schema *s, const char *prefix, int *keys)
{
  for (size_t i = 0; i < s->nfields; i++) {
    const cfg_field *f = &s->fields[i];
    g_autofree char *path = g_strdup_printf("%s%s", prefix, f->key);
    cr_assert(f->doc && *f->doc, "%s has no doc line", path);
    cr_assert(!(f->has_def && f->derived), "%s has a default both constant and derived", path);
    (*keys)++;
    if (f->sub) {
      g_autofree char *sub = g_strdup_printf("%s.", path);
      schema_all_documented(f->sub, sub, keys);
    }
  }
}

Test(schema, every_key_has_a_doc_line_and_one_default)
{
  int keys = 0;
  schema_all_documented(&cfg_schema_cluster, "", &keys);
  schema_all_documented(&cfg_schema_workload, "", &keys);
  schema_all_documented(&cfg_schema_calibration, "", &keys);
  schema_all_documented(&cfg_schema_case, "", &keys);
  cr_assert(keys > 150, "%d keys", keys);
}

/* A constant default in the table is what a file that leaves the key out gets. */
Test(schema, a_key_left_out_takes_the_tables_default)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("v100-edr", "resnet50-horovod", NULL, &c, &w));
  cr_assert_eq(w->memory.zero3_prefetch, 1e8);
  cr_assert_eq(w->memory.comm_bucket, 64.0 * 1048576, "derived from the workload's gradient_bucket");
  cr_assert_eq(w->serving.requests.count, 1000);
  cr_assert_str_eq(w->collectives.algorithm, "auto");
  cr_assert_eq(c->network.tiers[0].latency, 1e-6);
  cr_assert_eq(c->nccl.max_channels, 16);
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

Test(schema, the_command_prints_every_section)
{
  th_proc p = th_dlsim("schema");
  cr_assert_eq(p.status, 0, "%s", p.out);
  const char *want[] = {"Cluster", "Workload", "Calibration file", "Validation case",
                        "parallel.zero", "serving.requests.rate", "nccl.hop_latency.network"};
  for (size_t i = 0; i < G_N_ELEMENTS(want); i++)
    cr_assert(strstr(p.out, want[i]), "no '%s' in dlsim schema", want[i]);
  th_proc_clear(&p);
}

/* Relative links [text](target) of a Markdown file: each must name a file of the repository. */
static void schema_check_links(const char *md, const char *root, int *links)
{
  g_autofree char *text = NULL;
  cr_assert(g_file_get_contents(md, &text, NULL, NULL));
  g_autofree char *dir = g_path_get_dirname(md);
  g_autofree char *canon_root = g_canonicalize_filename(root, NULL);
  for (const char *p = strstr(text, "]("); p; p = strstr(p + 2, "](")) {
    const char *start = p + 2, *end = strchr(start, ')');
    if (!end)
      break;
    g_autofree char *target = g_strndup(start, (gsize)(end - start));
    char *hash = strchr(target, '#');
    if (hash)
      *hash = '\0';
    if (!*target || strstr(target, "://") || g_str_has_prefix(target, "mailto:") || strchr(target, ' '))
      continue;
    g_autofree char *full = g_canonicalize_filename(target, dir);
    cr_assert(g_str_has_prefix(full, canon_root), "%s: link '%s' leaves the repository", md, target);
    cr_assert(g_file_test(full, G_FILE_TEST_EXISTS), "%s: link '%s' is broken", md, target);
    (*links)++;
  }
}

static void schema_walk_markdown(const char *dir, const char *root, int *files, int *links)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *e;
  while (d && (e = g_dir_read_name(d))) {
    g_autofree char *path = g_build_filename(dir, e, NULL);
    if (e[0] == '.' || strcmp(e, "build") == 0)
      continue;
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
      schema_walk_markdown(path, root, files, links);
    } else if (g_str_has_suffix(e, ".md")) {
      schema_check_links(path, root, links);
      (*files)++;
    }
  }
  if (d)
    g_dir_close(d);
}

Test(schema, every_relative_markdown_link_resolves_inside_the_repository)
{
  int files = 0, links = 0;
  schema_walk_markdown(DLSIM_SOURCE_DIR, DLSIM_SOURCE_DIR, &files, &links);
  cr_assert(files >= 5 && links >= 3, "%d files, %d links", files, links);
}
