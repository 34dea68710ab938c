#!/usr/bin/env python3
"""Writes validation/cases/ for the fourth batch of unseen runs, one case per row of the tables
in this folder that dlsim can express (checking data only: nothing in dlsim is fitted on them).
Python 3 standard library only; run it from anywhere, commit what it writes."""
import functools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the data
sys.path.insert(0, os.path.dirname(HERE))
import casegen  # noqa: E402  (validation/casegen.py: what the batches' scripts share)
from casegen import node_sets, write_case  # noqa: E402

rows = functools.partial(casegen.rows, HERE)

H100 = "../../configs/clusters/dgx-h100.yaml"
A100 = "../../configs/clusters/dgx-a100.yaml"


def quoted(text):
    return '"' + text.replace('"', "'") + '"'


def write_check(name, source, notes, prediction, category=None):
    """A check case: its name, role, category if set, where the number is from and how the run
    is expressed, then how to predict it."""
    head = [("name", name), ("role", "check")] + ([("category", category)] if category else [])
    write_case(name, head + [("source", quoted(source)), ("notes", quoted(notes))] + prediction)


def training(cluster, workload, sets, measured):
    """A training run predicted by `dlsim run -e analytic`, judged on the job's tokens/s."""
    return [("cluster", cluster), ("workload", workload), ("set", "[" + ", ".join(sets) + "]"),
            ("engine", "analytic"), ("metric", "tokens_per_s"), ("measured", measured),
            ("tolerance", "0.10")]


def serving(sets, metric, measured, tolerance, unit=None):
    """A TensorRT-LLM H100 server predicted by `dlsim serve` (serving/trtllm-h100.yaml)."""
    return ([("cluster", H100), ("workload", "../serving/trtllm-h100.yaml"), ("command", "serve"),
             ("set", "[" + ", ".join(sets) + "]"), ("metric", metric)]
            + ([("unit", unit)] if unit else []) + [("measured", measured), ("tolerance", tolerance)])


def dims(layers, hidden, heads, kv_heads, ffn, vocab=None):
    """A model's shape over the workload's own (the same family: only what differs is set)."""
    sets = [f"model.layers={layers}", f"model.hidden={hidden}", f"model.heads={heads}",
            f"model.kv_heads={kv_heads}", f"model.ffn_hidden={ffn}"]
    return sets + ([f"model.vocab={vocab}"] if vocab else [])


FOUNDRY_SRC = ("mosaicml/llm-foundry scripts/train/benchmarking/README.md @ "
               "495218376830947dce625efabc4d86be7c47cc45, MPT training benchmarks, {table} table "
               "(validation/unseen4/llm-foundry_mpt_h100.csv)")
FOUNDRY_TABLE = {"h100-bf16-large": "H100 80GB BF16 (Large Scale, >= 128 GPUs)",
                 "h100-bf16": "H100 80GB BF16", "h100-fp8": "H100 80GB FP8"}


def foundry_cases():
    """llm-foundry's H100 tables, mapped as validation/fsdp/make-cases.py maps its A100 ones."""
    for r in rows("llm-foundry_mpt_h100.csv"):
        gpus, ac, fp8 = int(r["gpus"]), r["activation_checkpointing"] == "True", r["precision"] == "amp_fp8"
        name = (f"fsdp-mpt-{r['model']}-h100-{gpus}gpu-s{r['seq']}-mb{r['micro_batch']}"
                f"{'-ac' if ac else ''}{'-fp8' if fp8 else ''}")
        sets = node_sets(gpus) + [
            f"parallel.dp={gpus}", f"model.seq_len={r['seq']}", f"training.micro_batch={r['micro_batch']}",
            f"training.global_batch={r['global_batch']}",
            f"parallel.zero={3 if r['sharding'] == 'FULL_SHARD' else 2}",
            f"training.recompute={'full' if ac else 'none'}",
            f"training.grad_dtype={'fp32' if r['mp_mode'] == 'DEFAULT' else 'bf16'}"]
        if fp8:
            sets.append("training.dtype=fp8")
        what = (f"{r['model']}, seq {r['seq']}, {gpus} H100, micro-batch {r['micro_batch']} x "
                f"{r['grad_accum']} accumulation, global batch {r['global_batch']}, {r['precision']} "
                f"{r['mp_mode']}, {r['sharding']}, activation checkpointing {r['activation_checkpointing']}: "
                f"{r['tokens_per_s']} tokens/s (MFU {r['mfu']} %)")
        write_check(
            name, FOUNDRY_SRC.format(table=FOUNDRY_TABLE[r["table"]]) + "; " + what,
            "The A100 rows' mapping (validation/fsdp/make-cases.py) on the dgx-h100 preset; the H100 "
            "cluster is not stated. amp_fp8 (Composer's Transformer Engine fp8_autocast, delayed "
            "scaling) as training.dtype fp8.",
            training(H100, f"../fsdp/workloads/mpt-{r['model']}-fsdp.yaml", sets, r["tokens_per_s"]),
            category="fsdp")


FMS_SRC = {"eager": "cf6e42c7bed4ffa6af3a0faa1f72944998d721a5",
           "compile": "ed74fd5ddec00e309eac20f478de883464c86526"}
# fms_fsdp/utils/config_utils.py: 7b is the workload's llama2-7b
FMS_MODEL = {"7b": [], "34b": dims(48, 8192, 64, 8, 22016), "70b": dims(80, 8192, 64, 8, 28672)}
# the table's headers: "A100 80G 128 GPUs with 400Gbps", "H100 96 GPUs with 800 Gbps", read as
# the bandwidth of a node, split over its 8 NICs
FMS_GPU = {"a100": (A100, 128, "50Gb/s"), "h100": (H100, 96, "100Gb/s")}


def fms_cases():
    for r in rows("fms-fsdp_llama2_a100_h100.csv"):
        if r["case"] != "yes":
            continue
        for gpu, (cluster, gpus, nic) in FMS_GPU.items():
            name = f"fms-fsdp-{gpu}-llama2-{r['model']}-{gpus}gpu-{r['version']}"
            # the compiled table's "Selective AC" for 34b and 70b: its HFU / MFU (0.74 / 0.55 on
            # A100) is full recomputation's 4/3, so every block is checkpointed
            recompute = "none" if r["ac"] == "none" else "full"
            sets = node_sets(gpus) + FMS_MODEL[r["model"]] + [
                f"network.nic_bandwidth={nic}", f"parallel.dp={gpus}", "training.micro_batch=2",
                f"training.global_batch={2 * gpus}", f"training.recompute={recompute}",
                f"training.eager_ops={'true' if r['version'] == 'eager' else 'false'}"]
            mode = "torch.compile" if r["version"] == "compile" else "eager"
            write_check(
                name,
                f"foundation-model-stack/fms-fsdp README.md @ {FMS_SRC[r['version']]}, Training throughput "
                f"benchmarks (validation/unseen4/fms-fsdp_llama2_a100_h100.csv): Llama 2 {r['model']}, "
                f"{r['sharding']}, {mode}, {r['ac']} activation checkpointing, batch 2 per GPU, sequence "
                f"4096, {gpus} {gpu.upper()}: {r['tps_' + gpu]} tokens/s per GPU",
                "fms's Llama (fms_fsdp/utils/config_utils.py's shapes) under the fsdp profile; "
                "torch.compile as training.eager_ops false, eager as true. HSDP (7b: sharded in a node, "
                "replicated across) has no key: ZeRO-3 over all GPUs. The headers' 400 / 800 Gb/s read "
                "as per node. Selective AC of the compiled 34b / 70b rows as full (their HFU / MFU is "
                "4/3). Measured: tokens/s per GPU x GPUs.",
                training(cluster, "../unseen4/workloads/fms-llama2-7b.yaml", sets,
                         f"{int(r['tps_' + gpu]) * gpus}"),
                category="fsdp")


TITAN_SRC = ("pytorch/torchtitan docs/performance.md @ 3faaa1a0dee68ce028400e3dafd1735d152cb4f8 "
             "(validation/unseen4/torchtitan_2024-08_a100_h100.csv)")
# torchtitan/models/llama/__init__.py's flavors, over the workload's llama3-8b
TITAN_MODEL = {"llama3-8b": [], "llama3-70b": dims(80, 8192, 64, 8, 28672),
               "llama2-13b": dims(40, 5120, 40, 40, 13824, 32000),
               "llama2-70b": dims(80, 8192, 64, 8, 28672, 32000),
               "llama3.1-405b": dims(126, 16384, 128, 8, 53248)}


def titan_sets(r):
    gpus, fsdp, tp, lb = (int(r[k]) for k in ("gpus", "fsdp", "tp", "local_batch"))
    sets = node_sets(gpus) + TITAN_MODEL[r["model"]] + [
        f"parallel.dp={fsdp}", f"parallel.tp={tp}", f"model.seq_len={r['seq']}",
        f"training.micro_batch={lb}", f"training.global_batch={lb * fsdp}",
        "training.recompute=" + {"none": "none", "selective-op": "selective", "full": "full"}[r["ac"]]]
    if tp > 1:
        sets.append("parallel.sequence_parallel=true")
    if r["compile"] == "true":
        sets += ["training.eager_ops=false", "training.eager_loss=true", "model.rotary=fused"]
    if r["float8"] == "true":
        sets += ["training.dtype=fp8", "training.fp8_recipe=current", "training.fp8_params=true"]
    if r["async_tp"] == "true":
        sets.append("parallel.tp_comm_overlap=true")
    if r["model"] == "llama3.1-405b":
        sets += ["gpu.memory=95GiB", "gpu.memory_bandwidth=2.4TB/s", "gpu.power_limit=500W"]
    return sets


def titan_what(r):
    layout = f"FSDP2 {r['fsdp']}" + (f" x TP {r['tp']}" if int(r["tp"]) > 1 else "")
    opts = ("compiled" if r["compile"] == "true" else "eager") + \
        (", Float8" if r["float8"] == "true" else "") + (", async TP" if r["async_tp"] == "true" else "")
    return (f"{r['model']}, {layout} on {r['gpus']} {'H100' if r['model'] == 'llama3.1-405b' else 'A100'}, "
            f"local batch {r['local_batch']}, sequence {r['seq']}, {r['ac']} activation checkpointing, "
            f"{opts}: {r['wps']} tokens/s per GPU (MFU {r['mfu']} %)")


def titan_cases():
    for r in rows("torchtitan_2024-08_a100_h100.csv"):
        if r["case"] != "yes":
            continue
        gpus = int(r["gpus"])
        gpu = "h100" if r["model"] == "llama3.1-405b" else "a100"
        opt = ("-fp8" if r["float8"] == "true" else "-bf16") + ("-asynctp" if r["async_tp"] == "true" else "")
        name = (f"torchtitan-{gpu}-2024-{r['model']}-{gpus}gpu-fsdp{r['fsdp']}"
                + (f"-tp{r['tp']}" if int(r["tp"]) > 1 else "") + f"-lb{r['local_batch']}-{r['ac']}" + opt)
        write_check(
            name, f"{TITAN_SRC}: {titan_what(r)}",
            "The torchtitan profile (eager ops, per-op selective recomputation, fp32 gradient "
            "reduction). 405B: train_configs/llama3_405b.toml of the commit (compile, float8 with the "
            "FSDP float8 all-gather, async TP) expressed as in validation/unseen3 (eager_ops false with "
            "eager_loss, fp8 current scaling, fp8_params, tp_comm_overlap); Meta's lower-TDP HBM2e H100 "
            "95GB at 2.4 TB/s and 500 W (unseen3's Grand Teton figures) over dgx-h100. A100: the dgx-a100 preset, "
            "the cluster is not stated. Measured: tokens/s per GPU x GPUs.",
            training(H100 if gpu == "h100" else A100, "../unseen4/workloads/torchtitan-llama.yaml",
                     titan_sets(r), f"{int(r['wps']) * gpus}"),
            category="fsdp")


NIM_SRC = ("NVIDIA NIM for LLMs benchmarking guide 1.0.0, Performance, "
           "https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance.md "
           "(validation/unseen4/nim_1.8.0_llama3.3-70b_h100_tp2.csv): Llama-3.3-70b-instruct NIM 1.8.0, "
           "2 x H100 80G, fp8 TP2, 5000 input / 500 output tokens, concurrency {c}")


def nim_metrics(c):
    """Below the server's capacity the TTFT and ITL are the engine's; from concurrency 100 on the
    clients queue behind a full server (TTFT 8-89 s) and only the output rate is its own."""
    if c <= 50:
        return [("ttft", "ttft_s.mean", "ms", "ttft_ms", "mean TTFT {} ms", "0.25"),
                ("itl", "tbt_s.mean", "ms", "itl_ms", "mean ITL {} ms", "0.15")]
    return [("tput", "output_tokens_per_s", None, "output_tok_per_s", "{} output tokens/s", "0.15")]


def nim_cases():
    for r in rows("nim_1.8.0_llama3.3-70b_h100_tp2.csv"):
        c = int(r["concurrency"])
        sets = ["model=llama3-70b", "serving.tp=2", "serving.max_model_len=5500",
                f"serving.requests.concurrency={c}", f"serving.requests.count={max(100, 10 * c)}",
                "serving.requests.prompt_tokens=5000", "serving.requests.output_tokens=500"]
        for short, metric, unit, col, text, tol in nim_metrics(c):
            write_check(
                f"nim-1.8-h100-llama3.3-70b-tp2-5000-500-c{c}-{short}",
                NIM_SRC.format(c=c) + ": " + text.format(r[col]),
                "The TensorRT-LLM H100 workload (serving/trtllm-h100.yaml: fp8 weights and KV, "
                "max_batch 2048 and max_tokens 8192 assumed; NIM's own are not published) at TP 2, "
                "a closed loop of this many clients (serving.requests.concurrency); AIPerf's number "
                "of requests is not stated: 10 per client, at least 100.",
                serving(sets, metric, r[col], tol, unit))


NEMO_COMMIT = {"d4317ddd": "d4317dddae7f6b150e16423bc9915c48280ac033",
               "3579cdb3": "3579cdb3f2afdeaf23af3e0da6497555566c3f0c"}
# conf/training/gpt3/5b.yaml: 24 layers of 4096 with 32 heads, no recomputation (0 layers). At
# PP 1 NeMo turns gradient_accumulation_fusion off (NVIDIA/NeMo megatron_base_model.py @ v1.11.0,
# _validate_config), so each micro-batch's bf16 weight gradients are added into the fp32 main
# gradients by a hook, one add_ per tensor (optimizer_with_main_params.py param_hook; apex
# DistributedFusedAdam._grad_copy); at PP 8 (175B) the wgrad GEMMs accumulate into them in place.
NEMO_MODEL = {"5b": dims(24, 4096, 32, 32, 16384)
              + ["training.recompute=none", "training.grad_accum_dtype=fp32",
                 "training.grad_accum_pass=add"], "175b": []}
# distributed_fused_adam: apex's DistributedFusedAdam buckets its fp32 gradients by bucket_cap_mb,
# default 100 (1024 x 1024 x 100 bytes); NeMo v1.11.0's setup_optimization passes no other
NEMO_OPTIMIZER = {"true": ["parallel.zero=1", "parallel.gradient_bucket=100MiB"],
                  "false": ["parallel.zero=0"]}


def nemo_sets(r):
    nodes, tp, pp = int(r["nodes"]), int(r["tp"]), int(r["pp"])
    return ([f"node.count={nodes}", f"parallel.tp={tp}", f"parallel.pp={pp}",
            f"parallel.dp={nodes * 8 // (tp * pp)}", f"training.global_batch={r['global_batch']}",
            f"parallel.sequence_parallel={'true' if r['model'] == '175b' else 'false'}"]
            + NEMO_OPTIMIZER[r["distributed_optimizer"]] + NEMO_MODEL[r["model"]])


def nemo_cases():
    for r in rows("nemo-megatron-2022_a100_gpt3_scaling.csv"):
        nodes = int(r["nodes"])
        write_check(
            f"nemo-2022{r['table']}-a100-gpt3-{r['model']}-{nodes * 8}gpu",
            f"NVIDIA/NeMo-Framework-Launcher README.md @ {NEMO_COMMIT[r['commit']]}, 7.1.2 Training "
            f"Performance Results (validation/unseen4/nemo-megatron-2022_a100_gpt3_scaling.csv): GPT-3 "
            f"{r['model'].upper()} on {nodes} DGX A100 80GB nodes of a SuperPOD, TP {r['tp']} PP {r['pp']}, "
            f"global batch {r['global_batch']}: {r['tokens_per_s']} tokens per second",
            "Layout, batch and optimizer from the launcher's conf/training/gpt3 of the same commit "
            "(workload nemo-2022-gpt3.yaml); gradients accumulated and reduced in fp32 and, at PP 1, "
            "added into the fp32 buffer per micro-batch, as NeMo 1.x's O2 optimizers do (NVIDIA/NeMo "
            "@ v1.11.0, apex's DistributedFusedAdam: see make-cases.py); not stated: the NeMo "
            "container of the runs (2022), its attention kernels (no flash attention assumed).",
            training(A100, "../unseen4/workloads/nemo-2022-gpt3.yaml", nemo_sets(r), r["tokens_per_s"]))


TRTLLM_SRC = ("NVIDIA/TensorRT-LLM docs/source/developer-guide/perf-overview.md @ "
              "03e27c7d5ff0c6e89f8328838c0a8e64f1b34f9d, LLaMA v3.3 70B (validation/unseen4/"
              "trtllm_1.x_h100_h200_llama3.3-70b.csv)")
# the H200's 141 GB at 4.8 TB/s (NVIDIA's datasheet) over dgx-h100, as unseen3's H200 cases
TRTLLM_GPU = {"h100": [], "h200": ["gpu.memory=141GB", "gpu.memory_bandwidth=4.8TB/s"]}


def trtllm_cases():
    for r in rows("trtllm_1.x_h100_h200_llama3.3-70b.csv"):
        tp, isl, osl = int(r["tp"]), int(r["isl"]), int(r["osl"])
        sets = TRTLLM_GPU[r["gpu"]] + [
            "model=llama3-70b", f"serving.tp={tp}", f"serving.max_model_len={isl + osl}",
            f"serving.requests.count={r['requests']}", f"serving.requests.prompt_tokens={isl}",
            f"serving.requests.output_tokens={osl}"]
        write_check(
            f"trtllm-1.x-{r['gpu']}-llama3.3-70b-tp{tp}-{isl}-{osl}",
            f"{TRTLLM_SRC}: trtllm-bench throughput, PyTorch backend, Llama 3.3 70B FP8 on "
            f"{r['gpu'].upper()}, TP {tp}, ISL/OSL {isl}/{osl}, {r['requests']} requests at once: "
            f"{r['output_tok_per_s_per_gpu']} output tokens/s per GPU",
            "The v1.0 cases' workload (serving/trtllm-h100.yaml: max_batch 2048 and max_tokens "
            "8192 assumed) at TP 2; CUDA graphs have no key. Measured: tokens/s per GPU x TP.",
            serving(sets, "output_tokens_per_s", f"{int(r['output_tok_per_s_per_gpu']) * tp}", "0.15"))


if __name__ == "__main__":
    foundry_cases()
    fms_cases()
    titan_cases()
    nim_cases()
    nemo_cases()
    trtllm_cases()
