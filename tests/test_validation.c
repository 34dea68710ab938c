/* The validation targets, on real measurements (validation/cases/). */
#include "helpers.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>

static cJSON *validate(const char *cases)
{
  g_autofree char *args = g_strdup_printf("validate --json %s", cases);
  th_proc p = th_dlsim(args);
  cJSON *j = cJSON_Parse(p.out);
  cr_assert_not_null(j, "%s", p.out);
  th_proc_clear(&p);
  return j;
}

static double case_error(cJSON *j, const char *name)
{
  cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases"))
  {
    if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, name) == 0) {
      cJSON *e = cJSON_GetObjectItem(c, "error");
      cr_assert(cJSON_IsNumber(e), "%s did not run", name);
      return e->valuedouble;
    }
  }
  cr_assert_fail("no case %s", name);
  return NAN;
}

Test(validation, horovod_resnet50_two_nodes_scales_within_5_percent, .timeout = 60)
{
  cJSON *j = validate("horovod-resnet50-v100-1gpu horovod-resnet50-v100-2node "
                      "horovod-resnet50-v100-2node-scaling");
  /* the fit reproduces its own number; the checks were not fitted */
  cr_assert(fabs(case_error(j, "horovod-resnet50-v100-1gpu")) < 0.001);
  cr_assert(fabs(case_error(j, "horovod-resnet50-v100-2node-scaling")) <= 0.05);
  cr_assert(fabs(case_error(j, "horovod-resnet50-v100-2node")) <= 0.05);
  cJSON_Delete(j);
}

Test(validation, bad_case_names_are_usage_errors)
{
  th_proc p = th_dlsim("validate no-such-case");
  cr_assert_eq(p.status, 2);
  cr_assert(strstr(p.out, "no validation case 'no-such-case'"), "%s", p.out);
  th_proc_clear(&p);
}
