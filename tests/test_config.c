/* YAML errors with file:line:column, did-you-mean, --set overrides, defaults, cross-checks. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static const char *const good_cluster =
    "name: t\n"
    "gpu:\n"
    "  memory: 80GiB\n"
    "  memory_bandwidth: 3.35TB/s\n"
    "  flops: {bf16: 989TFLOPS}\n"
    "node:\n"
    "  count: 2\n"
    "  gpus_per_node: 8\n"
    "  intra: {kind: nvswitch, bandwidth: 450GB/s}\n"
    "network:\n"
    "  nic_bandwidth: 400Gb/s\n";

static const char *const good_workload =
    "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
    "training: {global_batch: 32, micro_batch: 2}\n";

static void expect_error(const char *cluster_text, const char *workload_text,
                         const char *const *sets, const char *needle)
{
  g_autofree char *c = th_write("c.yaml", cluster_text ? cluster_text : good_cluster);
  g_autofree char *w = th_write("w.yaml", workload_text ? workload_text : good_workload);
  g_autofree char *msg = th_load_error(c, w, sets);
  cr_assert_not_null(msg, "expected an error containing '%s'", needle);
  cr_assert(strstr(msg, needle), "error '%s' should contain '%s'", msg, needle);
}

Test(config, good_files_load_with_defaults)
{
  g_autofree char *c = th_write("c.yaml", good_cluster);
  g_autofree char *w = th_write("w.yaml", good_workload);
  cfg_cluster *cl = NULL;
  cfg_workload *wl = NULL;
  cr_assert(th_load(c, w, NULL, &cl, &wl));
  cr_assert_float_eq(cl->gpu.memory, 80.0 * 1073741824.0, 1);
  cr_assert_float_eq(cl->network.nic_bandwidth, 50e9, 1);
  cr_assert_eq(cl->node.nics_per_node, 8);
  cr_assert_eq(wl->parallel.dp, 16);
  cr_assert_eq(wl->model.kv_heads, 4);
  cr_assert_eq(wl->model.ffn_hidden, 1024);
  cr_assert_eq(wl->training.dtype, CFG_BF16);
  cr_assert_float_eq(wl->parallel.gradient_bucket, 25.0 * 1048576, 1e-6);
  cfg_cluster_free(cl);
  cfg_workload_free(wl);
}

Test(config, unknown_key_names_position_and_suggests)
{
  const char *bad = "name: t\n"
                    "gpu:\n"
                    "  memroy: 80GiB\n";
  expect_error(bad, NULL, NULL, "c.yaml:3:3: unknown key 'memroy' in gpu (did you mean 'memory'?)");
}

Test(config, unknown_top_level_key_lists_known_keys)
{
  expect_error("name: t\nzzz: 1\n", NULL, NULL, "c.yaml:2:1: unknown key 'zzz' in cluster (known keys: name, gpu, node, network, nccl, reliability, power, storage, cost, stragglers)");
}

Test(config, wrong_type_names_expectation)
{
  char *bad = g_strdup(good_cluster);
  char *at = strstr(bad, "80GiB");
  memcpy(at, "80Gb/s", 5); /* "80Gb/siB" */
  expect_error(bad, NULL, NULL, "c.yaml:3:11: gpu.memory: expected a size");
  g_free(bad);
  expect_error(NULL, "model: {layers: two, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 32}\n",
               NULL, "w.yaml:1:17: model.layers: expected an integer, got 'two'");
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 32, dtype: bf61}\n",
               NULL, "training.dtype: expected one of fp32 | tf32 | bf16 | fp16 | fp8 | int8 | int4 | fp4 | fp8-block | mxfp8 | nvfp4, got 'bf61' (did you mean 'bf16'?)");
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: [1, 2]\n",
               NULL, "w.yaml:2:11: training: expected a mapping, found a list");
}

Test(config, missing_required_key)
{
  expect_error("name: t\ngpu: {memory: 80GiB, flops: {bf16: 1TFLOPS}}\nnode: {gpus_per_node: 1}\n",
               NULL, NULL, "c.yaml:2:6: gpu: missing required key 'memory_bandwidth'");
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {micro_batch: 2}\n",
               NULL, "w.yaml:2:11: training: missing required key 'global_batch'");
  expect_error(NULL, "model: {layers: 2, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 2}\n",
               NULL, "model: missing required key 'hidden'");
}

Test(config, inconsistent_parallel_sizes)
{
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 32}\n"
                     "parallel: {dp: 8}\n",
               NULL, "w.yaml:3:16: parallel: tp*pp*dp*cp = 1*1*8*1 = 8, but the cluster has 16 GPUs");
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 32, micro_batch: 3}\n",
               NULL, "training.micro_batch = 3 does not divide the per-replica batch 2");
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 33}\n",
               NULL, "training.global_batch = 33 is not divisible by dp = 16");
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 3, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 32}\n",
               NULL, "model.heads = 3 does not divide hidden = 256");
}

Test(config, empty_and_not_yaml)
{
  expect_error("", NULL, NULL, "c.yaml: empty document");
  expect_error("# only a comment\n", NULL, NULL, "c.yaml: empty document");
  expect_error("name: [unclosed\n", NULL, NULL, "c.yaml:2:1: not valid YAML");
  expect_error("just a sentence\n", NULL, NULL, "c.yaml:1:1: expected a mapping of keys at the top level, found a single value");
  expect_error("- a\n- b\n", NULL, NULL, "expected a mapping of keys at the top level, found a list");
  expect_error("a: 1\na: 2\n", NULL, NULL, "c.yaml:2:1: duplicate key 'a'");
  expect_error("a: &x 1\nb: *x\n", NULL, NULL, "c.yaml:2:4: YAML aliases");
  expect_error("\t\x01\x02garbage: :\n", NULL, NULL, "c.yaml:");
}

Test(config, missing_file_lists_presets)
{
  g_autofree char *msg = th_load_error("no-such-cluster", NULL, NULL);
  cr_assert_not_null(msg);
  cr_assert(strstr(msg, "no-such-cluster: no such file, and no preset of that name in configs/clusters (presets: dgx-a100"), "%s", msg);
}

Test(config, overrides_apply_to_the_right_file)
{
  g_autofree char *c = th_write("c.yaml", good_cluster);
  g_autofree char *w = th_write("w.yaml", good_workload);
  const char *sets[] = {"gpu.memory_bandwidth=4.8TB/s", "network.nic_bandwidth=800Gb/s",
                        "parallel.dp=16",              "training.micro_batch=1",
                        "model.layers=4",              "gpu.flops.fp8=1979TFLOPS",
                        "network.tiers=[{name: leaf, latency: 2us}]",
                        "parallel.placement=[tp, pp, cp, dp]", NULL};
  cfg_cluster *cl = NULL;
  cfg_workload *wl = NULL;
  cr_assert(th_load(c, w, sets, &cl, &wl));
  cr_assert_float_eq(cl->gpu.memory_bandwidth, 4.8e12, 1);
  cr_assert_float_eq(cl->network.nic_bandwidth, 100e9, 1);
  cr_assert_float_eq(cl->gpu.flops[CFG_FP8], 1979e12, 1);
  cr_assert_float_eq(cl->network.tiers[0].latency, 2e-6, 1e-15);
  cr_assert_eq(wl->model.layers, 4);
  cr_assert_eq(wl->training.micro_batch, 1);
  cr_assert_eq(wl->parallel.placement[1], CFG_DIM_PP);
  cfg_cluster_free(cl);
  cfg_workload_free(wl);
}

Test(config, bad_overrides)
{
  const char *s1[] = {"gpu.memroy=1GiB", NULL};
  expect_error(NULL, NULL, s1, "--set gpu.memroy: unknown key 'memroy' in gpu (did you mean 'memory'?)");
  const char *s2[] = {"paralel.tp=2", NULL};
  expect_error(NULL, NULL, s2, "--set paralel.tp: unknown key 'paralel' (did you mean 'parallel'?)");
  const char *s3[] = {"parallel.tp", NULL};
  expect_error(NULL, NULL, s3, "--set parallel.tp: expected KEY=VALUE");
  const char *s4[] = {"gpu.memory=lots", NULL};
  expect_error(NULL, NULL, s4, "--set: gpu.memory: expected a size");
  const char *s5[] = {"gpu=1", NULL};
  expect_error(NULL, NULL, s5, "'gpu' is a mapping; set one of its keys instead");
  const char *s6[] = {"gpu.flops.fp9=1", NULL};
  expect_error(NULL, NULL, s6, "--set gpu.flops.fp9: expected gpu.flops.(fp32 | tf32");
}

/* A kernel beside a collective is never faster than alone: a factor below 1 is refused by
 * its key, one above the table's ceiling by the range. */
Test(config, an_interference_factor_below_one_is_refused)
{
  const char *low[] = {"gpu.efficiency.interference.gemm=0.9", NULL};
  expect_error(NULL, NULL, low, "gpu.efficiency.interference.gemm = 0.9: expected a factor >= 1");
  const char *high[] = {"gpu.efficiency.interference.optimizer=4", NULL};
  expect_error(NULL, NULL, high, "gpu.efficiency.interference.optimizer: expected a value from 0 to 3");
}

Test(config, model_preset_by_name)
{
  g_autofree char *c = th_write("c.yaml", good_cluster);
  g_autofree char *w = th_write("w.yaml", "model: resnet50\ntraining: {global_batch: 64, dtype: fp32}\n");
  cfg_cluster *cl = NULL;
  cfg_workload *wl = NULL;
  const char *sets[] = {"gpu.flops.fp32=67TFLOPS", NULL};
  cr_assert(th_load(c, w, sets, &cl, &wl));
  cr_assert_eq(wl->model.kind, CFG_MODEL_CNN);
  cr_assert_str_eq(wl->model.preset, "resnet50");
  cr_assert_str_eq(wl->model.name, "resnet50");
  cfg_cluster_free(cl);
  cfg_workload_free(wl);
  expect_error(NULL, "model: gpt99\ntraining: {global_batch: 32}\n", NULL,
               "w.yaml:1:8: model: no model file 'gpt99'");
}

Test(config, dtype_needs_a_peak)
{
  expect_error(NULL, "model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, seq_len: 128}\n"
                     "training: {global_batch: 32, dtype: fp32}\n",
               NULL, "training.dtype = fp32, but the cluster's gpu.flops has no fp32 entry");
}

Test(config, calibration_file_merges_under_inline_values)
{
  g_autofree char *cal = th_write("cal.yaml", "gpu: x\nefficiency: {flops: {gemm: 0.9, conv: 0.7}, memory: 0.7}\n");
  g_autofree char *c = th_write("c.yaml", good_cluster);
  g_autofree char *w = th_write("w.yaml", good_workload);
  g_autofree char *set_cal = g_strdup_printf("gpu.calibration=%s", cal);
  const char *sets[] = {set_cal, "gpu.efficiency.flops.conv=0.5", NULL};
  cfg_cluster *cl = NULL;
  cfg_workload *wl = NULL;
  cr_assert(th_load(c, w, sets, &cl, &wl));
  cr_assert_float_eq(cl->gpu.efficiency.flops_efficiency[CFG_KCLASS_GEMM], 0.9, 1e-12);
  cr_assert_float_eq(cl->gpu.efficiency.flops_efficiency[CFG_KCLASS_CONV], 0.5, 1e-12);
  cr_assert_float_eq(cl->gpu.efficiency.memory_efficiency, 0.7, 1e-12);
  cr_assert_float_eq(cl->gpu.efficiency.flops_efficiency[CFG_KCLASS_ATTENTION], 0.55, 1e-12);
  cfg_cluster_free(cl);
  cfg_workload_free(wl);
  const char *bad[] = {"gpu.calibration=/nonexistent/cal.yaml", NULL};
  expect_error(NULL, NULL, bad, "gpu.calibration: /nonexistent/cal.yaml: cannot read");
}

/* Presets run together: a preset cluster takes the workload's size (its dp stated, or the most
 * nodes whose data parallelism divides the batch), and says so; a cluster file does not. */
Test(config, a_preset_cluster_is_sized_to_the_job)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-a100", "megatron-22b", NULL, &c, &w));
  cr_assert_eq(c->node.count, 1, "TP 8 x DP 1 on one node of the four-node preset");
  cr_assert(c->sized_to_job);
  cfg_workload_free(w);
  cfg_cluster_free(c);
  cr_assert(th_load("dgx-a100", "gpt3-1.3b-dp", NULL, &c, &w));
  cr_assert_eq(c->node.count, 2, "dp 16 divides 128 sequences into micro-batches of 8");
  cfg_workload_free(w);
  cfg_cluster_free(c);
  const char *pinned[] = {"node.count=4", NULL};
  g_autofree char *err = th_load_error("dgx-a100", "megatron-22b", pinned);
  cr_assert(err && strstr(err, "but the cluster has 32 GPUs"), "a node count the user set stays: %s",
            err ? err : "loaded");
  g_autofree char *file = g_build_filename(DLSIM_SOURCE_DIR, "configs", "clusters", "dgx-a100.yaml", NULL);
  g_autofree char *err2 = th_load_error(file, "megatron-22b", NULL);
  cr_assert(err2 && strstr(err2, "but the cluster has 32 GPUs"), "a cluster file is not resized");
}

/* model: {preset: NAME, KEY: VALUE}: the preset with those keys changed, errors where they are. */
Test(config, a_model_preset_takes_overrides)
{
  g_autofree char *path = th_write("preset-w.yaml", "model: {preset: llama3-70b, seq_len: 8192}\n"
                                                    "training: {global_batch: 64}\n"
                                                    "parallel: {tp: 8, pp: 4}\n");
  const char *nodes[] = {"node.count=8", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-h100", path, nodes, &c, &w));
  cr_assert_eq(w->model.seq_len, 8192);
  cr_assert_eq(w->model.layers, 80, "the rest comes from the preset");
  cr_assert_str_eq(w->model.name, "llama3-70b");
  cfg_workload_free(w);
  cfg_cluster_free(c);
  g_autofree char *bad = th_write("preset-bad.yaml", "model: {preset: llama3-70b, heads: 7}\n"
                                                     "training: {global_batch: 64}\n");
  g_autofree char *err = th_load_error("dgx-h100", bad, nodes);
  cr_assert(err && strstr(err, "preset-bad.yaml:1:") && strstr(err, "model.heads = 7"), "%s", err);
}

/* ---- framework profiles (configs/frameworks) ---------------------------------------------- */

static cfg_workload *framework_load(const char *const *sets)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("dgx-a100", "gpt3-1.3b-dp", sets, &c, &w));
  cfg_cluster_free(c);
  return w;
}

Test(config, a_framework_profile_gives_its_defaults)
{
  const char *sets[] = {"training.framework=fsdp", NULL};
  cfg_workload *w = framework_load(sets);
  cr_assert_eq(w->parallel.zero, 3, "FSDP's FULL_SHARD is ZeRO-3");
  cr_assert_eq(w->training.grad_dtype, CFG_FP32);
  cr_assert_eq(w->training.attention, 1 + CFG_ATTN_FA2);
  cr_assert_str_eq(w->training.framework, "fsdp");
  cfg_workload_free(w);
  const char *horovod[] = {"training.framework=horovod", NULL};
  w = framework_load(horovod);
  cr_assert_float_eq(w->parallel.gradient_bucket, 128e6, 1, "Horovod's 128 MB fusion buffer");
  cfg_workload_free(w);
}

Test(config, the_workload_and_its_overrides_win_over_the_profile)
{
  const char *sets[] = {"training.framework=fsdp", "parallel.zero=2", "training.attention=fa3", NULL};
  cfg_workload *w = framework_load(sets);
  cr_assert_eq(w->parallel.zero, 2);
  cr_assert_eq(w->training.attention, 1 + CFG_ATTN_FA3);
  cfg_workload_free(w);
  const char *none[] = {NULL};
  w = framework_load(none);
  cr_assert_str_eq(w->training.framework, "none");
  cr_assert_float_eq(w->parallel.gradient_bucket, 25 * 1048576.0, 1, "dlsim's generic default");
  cfg_workload_free(w);
}

Test(config, an_unknown_framework_lists_the_profiles)
{
  const char *sets[] = {"training.framework=fsd", NULL};
  g_autofree char *msg = th_load_error("dgx-a100", "gpt3-1.3b-dp", sets);
  cr_assert(msg && strstr(msg, "no framework profile 'fsd'") && strstr(msg, "fsdp"), "%s", msg);
}

Test(config, a_profile_holds_only_workload_defaults)
{
  g_autofree char *path = th_write("bad-framework.yaml", "gpu: {memory: 1GiB}\n");
  g_autofree char *set = g_strdup_printf("training.framework=%s", path);
  const char *sets[] = {set, NULL};
  g_autofree char *msg = th_load_error("dgx-a100", "gpt3-1.3b-dp", sets);
  cr_assert(msg && strstr(msg, "may hold only the sections") && strstr(msg, "'gpu'"), "%s", msg);
}

Test(config, a_serving_engine_profile_gives_its_defaults)
{
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  const char *sets[] = {"serving.engine=trtllm", "serving.max_batch=64", NULL};
  cr_assert(th_load("dgx-h100", "llama3-70b-tp8", sets, &c, &w));
  cr_assert_str_eq(w->serving.engine, "trtllm");
  cr_assert_float_eq(w->serving.kv_cache_free_fraction, 0.9, 1e-12, "KvCacheConfig's default");
  cr_assert_eq(w->serving.preemption, CFG_PREEMPT_NONE, "GUARANTEED_NO_EVICT");
  cr_assert_eq(w->serving.max_batch, 64, "the override wins");
  cr_assert_eq(w->serving.scheduler, CFG_SCHEDULER_CONTINUOUS, "the workload's own key wins");
  cfg_workload_free(w);
  cfg_cluster_free(c);
  const char *bad[] = {"serving.engine=vlm", NULL};
  g_autofree char *msg = th_load_error("dgx-h100", "llama3-70b-tp8", bad);
  cr_assert(msg && strstr(msg, "no serving engine profile 'vlm'") && strstr(msg, "vllm"), "%s", msg);
}

Test(config, a_preset_set_on_a_transformer_is_refused_not_ignored)
{
  /* it used to be grafted under the model already there and change nothing */
  const char *sets[] = {"model.preset=gpt3-1.3b", NULL};
  g_autofree char *msg = th_load_error("dgx-a100", "megatron-22b", sets);
  cr_assert(msg && strstr(msg, "model.preset names a CNN") && strstr(msg, "--set model=gpt3-1.3b"),
            "%s", msg);
  const char *cnn[] = {"model.preset=resnet18", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("v100-edr", "resnet50-horovod", cnn, &c, &w),
            "a CNN's architecture is what model.preset is for");
  cr_assert_str_eq(w->model.preset, "resnet18");
  cr_assert_str_eq(w->model.name, "resnet18", "named after what runs, not after the file");
  cfg_workload_free(w);
  cfg_cluster_free(c);
}

/* network.background: a selector of existing links, one rate, a direction. */
Test(config, background_traffic_names_real_links_and_one_rate)
{
  const char *bad[][2] = {
      {"network.background=[{links: rack 1, fraction: 0.5}]", "links = 'rack 1': expected node N"},
      {"network.background=[{links: node 2, fraction: 0.5}]", "'node 2': no such links"},
      {"network.background=[{links: rail 8, fraction: 0.5}]", "'rail 8': no such links"},
      {"network.background=[{links: spine, fraction: 0.5}]", "'spine': no such links"},
      {"network.background=[{links: node 0}]", "give either 'fraction' or 'bandwidth'"},
      {"network.background=[{links: node 0, fraction: 1.5}]", "fraction = 1.5: expected a share"},
      {"network.background=[{links: node 0, fraction: 0.5, direction: in}]",
       "direction = 'in': expected up, down or both"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    const char *sets[] = {bad[i][0], NULL};
    expect_error(NULL, NULL, sets, bad[i][1]);
  }
}

Test(config, an_unknown_runtime_is_placed_in_its_file_with_the_closest_profile)
{
  g_autofree char *w = th_write("rt.yaml", "model: resnet50\n"
                                           "training: {global_batch: 64, micro_batch: 64}\n"
                                           "collectives:\n"
                                           "  runtime: mpi-mvapch\n");
  g_autofree char *msg = th_load_error("v100-edr", w, NULL);
  cr_assert(msg && strstr(msg, "rt.yaml:4:12: collectives.runtime: no runtime profile "
                               "'mpi-mvapch' (did you mean 'mpi-mvapich'?)"),
            "%s", msg ? msg : "(loaded)");
}

Test(config, a_runtime_profile_gives_its_keys_and_the_workload_wins)
{
  const char *const sets[] = {"collectives.runtime=mpi-ucx", "collectives.eager_limit=4KiB", NULL};
  cfg_cluster *c = NULL;
  cfg_workload *w = NULL;
  cr_assert(th_load("v100-edr", "resnet50-horovod", sets, &c, &w));
  cr_assert_eq(w->collectives.progress, CFG_PROGRESS_CPU);
  cr_assert_float_eq(w->collectives.call_latency, 8e-6, 1e-15);
  cr_assert_float_eq(w->collectives.eager_limit, 4096, 1e-9, "the --set wins over the profile");
  cr_assert_str_eq(w->collectives.allreduce, "rd < 8KiB, rhd");
  cfg_workload_free(w);
  cfg_cluster_free(c);
}
