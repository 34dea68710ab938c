/* Inputs that once broke dlsim, each the reproducer of a report: every one must end with a
 * clear message and exit 2 (bad input) or 1 (refused as too large), never a crash, a wrapped
 * number, a runaway or a non-number printed with exit 0. */
#include "helpers.h"
#include "run/run.h"

#include <criterion/criterion.h>
#include <string.h>

static void expect(const char *args, int status, const char *message)
{
  th_proc p = th_dlsim(args);
  cr_assert_eq(p.status, status, "`dlsim %s` returned %d, expected %d:\n%s", args, p.status,
               status, p.out);
  cr_assert(strstr(p.out, message), "`dlsim %s` printed:\n%s\nexpected '%s'", args, p.out, message);
  th_proc_clear(&p);
}

Test(robust, deeply_nested_yaml_is_an_error_not_a_stack_overflow)
{
  GString *text = g_string_new("x: ");
  for (int i = 0; i < 30000; i++)
    g_string_append_c(text, '[');
  g_autofree char *path = th_write("deep.yaml", text->str);
  g_string_free(text, TRUE);
  g_autofree char *args = g_strdup_printf("memory -c %s -w megatron-22b", path);
  expect(args, 2, "nested more than 64 levels deep");
}

Test(robust, counts_beyond_what_the_model_can_represent_are_input_errors)
{
  expect("run -c dgx-a100 -w resnet50-horovod --set node.count=536870912 --engine analytic", 2,
         "node.count = 536870912 is out of range [1, 1.04858e+06]");
  expect("run -c dgx-a100 -w resnet50-horovod --set node.count=1e9 --engine analytic", 2,
         "node.count = 1000000000 is out of range");
  /* within each key's range, the products still may not wrap */
  expect("run -c dgx-a100 -w resnet50-horovod --set node.count=200000 --engine analytic", 2,
         "= 1600000 GPUs: dlsim simulates clusters of at most 1048576 GPUs");
  expect("memory -c dgx-a100 -w megatron-22b --set node.count=1 --set parallel.dp=536870913 "
         "--set training.global_batch=536870913 --set training.micro_batch=1",
         2, "training.global_batch = 536870913 is out of range");
  expect("memory -c dgx-a100 -w megatron-22b --set node.count=1 --set parallel.dp=65536 "
         "--set training.global_batch=65536 --set training.micro_batch=1",
         2, "parallel.dp = 65536, but the cluster has 8 GPUs");
  expect("memory -c dgx-a100 -w megatron-22b --set model.hidden=1073741824", 2,
         "model.hidden = 1073741824 is out of range");
  expect("run -c dgx-a100 -w megatron-22b --set node.count=1 --set model.layers=1e7", 2,
         "model.layers = 10000000 is out of range [1, 10000]");
  expect("serve -c dgx-h100 -w llama2-7b-vllm --set node.nics_per_node=1e9", 2,
         "node.nics_per_node = 1000000000 is out of range [0, 64]");
  expect("plan -c dgx-h100 -m llama3-8b --gpus 2000000000 --global-batch 1024", 2,
         "--gpus 2000000000: dlsim simulates clusters of at most 1048576 GPUs");
}

Test(robust, quantities_need_their_unit_and_a_plausible_value)
{
  expect("run -c v100-edr -w resnet50-horovod --set network.nic_bandwidth=400", 2,
         "network.nic_bandwidth: '400' needs a unit");
  expect("serve -c dgx-h100 -w llama2-7b-vllm --set gpu.memory_bandwidth=1", 2,
         "gpu.memory_bandwidth: '1' needs a unit");
  expect("run -c v100-edr -w resnet50-horovod --set network.nic_bandwidth=1e-308B/s", 2,
         "network.nic_bandwidth = 1e-308B/s is out of range [1e+06, 1e+14]");
  expect("serve -c dgx-h100 -w llama2-7b-vllm --set serving.requests.rate=1e-300/s", 2,
         "serving.requests.rate = 1e-300/s is out of range");
  expect("run -c v100-edr -w resnet50-horovod --set gpu.memory=0GiB", 2,
         "gpu.memory: must be > 0");
}

Test(robust, an_option_that_takes_a_value_does_not_swallow_the_next_option)
{
  expect("serve -c dgx-h100 -w llama2-7b-vllm --trace --json", 2,
         "--trace needs a value, but is followed by the option --json");
  expect("run -c v100-edr -w", 2, "-w needs a value");
}

Test(robust, a_sweep_factor_near_one_or_not_a_number_is_refused)
{
  expect("coll -c dgx-h100 --op allreduce --gpus 8 --factor 1.0000001", 2,
         "makes more than 10000 rows");
  expect("coll -c dgx-h100 --op allreduce --gpus 8 --factor nan", 2, "a finite --factor > 1");
  th_proc p = th_dlsim("coll -c dgx-h100 --op allreduce --gpus 8 --min 8 --max 64 --factor 1.0000001");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert(strstr(p.out, "\n          64 "), "sizes grow by at least a byte: %s", p.out);
  th_proc_clear(&p);
}

/* The loader refuses implausible bandwidths now; the check on every figure stays behind it:
 * a cluster changed in memory past the loader must not report inf. */
Test(robust, a_result_that_is_not_a_number_is_a_runtime_error)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("v100-edr", "resnet50-horovod", NULL, &c, &w));
  c->network.nic_bandwidth = 1e-308;
  sim_options o = sim_options_for(ENG_ANALYTIC);
  sim_result r;
  GError *err = NULL;
  cr_assert_not(sim_run(c, w, &o, &r, &err));
  cr_assert(g_error_matches(err, CFG_ERROR, CFG_ERROR_RUNTIME) &&
                strstr(err->message, "the step time = inf, not a result"),
            "%s", err ? err->message : "");
  g_error_free(err);
  sim_result_clear(&r);
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

Test(robust, runs_too_large_are_refused_with_their_estimate)
{
  expect("serve -c dgx-h100 -w llama2-7b-vllm --set serving.requests.count=100000000", 1,
         "serving 100000000 requests would need about");
  expect("serve -c dgx-h100 -w llama2-7b-vllm --set serving.requests.count=10000000", 1,
         "(run it anyway with --yes, or ask for less)");
  expect("run -c dgx-a100 -w resnet50-horovod --set node.count=131072 "
         "--set training.global_batch=67108864",
         1, "simulating 1048576 GPUs on the des engine would need about");
  expect("serve -c dgx-h100 -w llama2-7b-vllm --max-memory 12parsecs", 2, "--max-memory 12parsecs");
}

/* DeepSpeed's estimator takes the parameter counts: a transformer's are counted from the model
 * (they were NaN, and it printed "nan GiB per GPU" with exit 0). 22B parameters, ZeRO-3 on 8
 * GPUs: 4 x the largest layer + 18 x 22e9 / 8 bytes, about 46 GiB. */
Test(robust, the_deepspeed_estimator_counts_a_transformers_parameters)
{
  th_proc p = th_dlsim("memory -c dgx-a100 -w megatron-22b --set node.count=1 --set parallel.zero=3 "
                       "--set parallel.tp=1 --set parallel.dp=8 --set training.global_batch=32 --deepspeed --json");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert_null(strstr(p.out, "nan"), "%s", p.out);
  double gpu = g_ascii_strtod(strstr(p.out, "\"gpu_bytes\":") + 12, NULL);
  cr_assert(gpu > 40.0 * (1 << 30) && gpu < 55.0 * (1 << 30), "%g bytes per GPU", gpu);
  th_proc_clear(&p);
}

/* A report must not contradict itself: offloaded optimizer states that the node's host memory
 * cannot hold make the job not fit (it said FITS next to OUT OF MEMORY), and a host memory the
 * cluster does not state is said to be unchecked, not exceeded. */
Test(robust, host_memory_that_cannot_hold_the_offload_means_the_job_does_not_fit)
{
  th_proc p = th_dlsim("memory -c dgx-a100 -w zero-7.5b --set parallel.offload=cpu "
                       "--set parallel.zero=2 --set node.host_memory=1GiB --json");
  cr_assert_eq(p.status, 0, "%s", p.out);
  cr_assert(strstr(p.out, "\"fits\":\tfalse") && strstr(p.out, "\"host_fits\":\tfalse"), "%s", p.out);
  th_proc_clear(&p);
  p = th_dlsim("memory -c dgx-a100 -w zero-7.5b --set parallel.offload=cpu --set parallel.zero=2 "
               "--set node.host_memory=1GiB");
  cr_assert(strstr(p.out, "the job does not fit: the GPUs hold their share, the nodes' host memory "
                          "does not"), "%s", p.out);
  th_proc_clear(&p);
  p = th_dlsim("memory -c dgx-a100 -w zero-7.5b --set parallel.offload=cpu --set parallel.zero=2 "
               "--set node.host_memory=0");
  cr_assert(strstr(p.out, "(node.host_memory is not stated: not checked)"), "%s", p.out);
  cr_assert_null(strstr(p.out, "OUT OF MEMORY"), "%s", p.out);
  th_proc_clear(&p);
}
