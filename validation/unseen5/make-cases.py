#!/usr/bin/env python3
"""Writes validation/cases/ for the fifth batch of unseen runs, one case per row of the tables in
this folder that dlsim can express (checking data only: nothing in dlsim is fitted on them).
Python 3 standard library only; run it from anywhere, commit what it writes."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the data
sys.path.insert(0, os.path.dirname(HERE))
from casegen import A100, H100, node_sets, quoted, write_case  # noqa: E402  (validation/casegen.py)
import casegen  # noqa: E402


def rows(name):
    return casegen.rows(HERE, name)


KV_BLOCK = 16  # TensorRT-LLM's and vLLM's paged KV block, in tokens


def write_check(name, source, notes, prediction):
    write_case(name, [("name", name), ("role", "check"), ("source", quoted(source)),
                      ("notes", quoted(notes))] + prediction)


def listed(sets):
    return "[" + ", ".join(sets) + "]"


def serving(cluster, workload, sets, metric, measured, tolerance, unit=None):
    return ([("cluster", cluster), ("workload", workload), ("command", "serve"), ("set", listed(sets)),
             ("metric", metric)] + ([("unit", unit)] if unit else [])
            + [("measured", measured), ("tolerance", tolerance)])


BRIDGE_SRC = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ "
              "067f987df03b8355b03192d88d70f1709fedf51a (validation/unseen5/"
              "megatron_bridge_h100_other_containers.csv)")
BRIDGE_WORKLOAD = {"llama3-8b": "../unseen5/workloads/bridge-llama3-8b.yaml",
                   "llama3-70b": "../unseen3/workloads/bridge-llama3-70b.yaml",
                   "llama3.1-405b": "../unseen3/workloads/bridge-llama3.1-405b.yaml",
                   "qwen3-30b-a3b": "../unseen3/workloads/bridge-qwen3-30b-a3b.yaml"}


def bridge_sets(r):
    """The row's layout over its workload, as validation/unseen3/make-cases.py sets its rows."""
    tp, pp, cp, vp, ep, gpus = (int(r[k]) for k in ("tp", "pp", "cp", "vp", "ep", "gpus"))
    sets = node_sets(gpus) + [
        f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.cp={cp}", f"parallel.dp={gpus // (tp * pp * cp)}",
        f"parallel.ep={ep}", f"parallel.virtual_stages={vp}",
        f"parallel.schedule={'interleaved' if vp > 1 else '1f1b'}", f"training.global_batch={r['gbs']}",
        f"training.micro_batch={r['mbs']}", f"model.seq_len={r['seq']}"]
    if tp == 1:
        sets += ["parallel.sequence_parallel=false", "parallel.tp_comm_overlap=false"]
    if r["model"] == "llama3.1-405b":
        sets.append("parallel.uneven_stages=true")
    return sets


def bridge_cases():
    for r in rows("megatron_bridge_h100_other_containers.csv"):
        if r["case"] != "yes":
            continue
        gpus = int(r["gpus"])
        name = f"bridge-{r['container']}-h100-{r['model']}-{gpus}gpu"
        what = (f"NeMo {r['container']} container, DGX-H100, precision {r['precision'].upper()}, {r['model']} on "
                f"{gpus} GPUs, GBS {r['gbs']}, MBS {r['mbs']}, sequence {r['seq']}, FSDP {r['fsdp']}, TP {r['tp']} "
                f"PP {r['pp']} CP {r['cp']} VP {r['vp']} EP {r['ep']}: {r['tokens_per_s_per_gpu']} tokens/s per "
                f"GPU ({r['model_tflops_per_gpu']} model TFLOP/s per GPU)")
        write_check(
            name, f"{BRIDGE_SRC}: {what}",
            "Stated: the layout and the precision (25.09 states none: FP8 with current scaling as its 25.11 "
            "rows; the 26.06 table has no FSDP column: DDP with the distributed optimizer, as the other "
            "containers' rows of that layout). Assumed as in validation/unseen3 (workload "
            "bridge-llama3-70b.yaml): NeMo's 2024 H100 settings, TP overlap, no recomputation, cuDNN "
            "attention; FSDP 8 as ZeRO-3 (bridge-llama3-8b.yaml). Measured: tokens/s per GPU x GPUs.",
            [("cluster", H100), ("workload", BRIDGE_WORKLOAD[r["model"]]), ("set", listed(bridge_sets(r))),
             ("engine", "analytic"), ("metric", "tokens_per_s"),
             ("measured", f"{int(r['tokens_per_s_per_gpu']) * gpus}"), ("tolerance", "0.10")])


TRT_PAGE = {"v0.6.1": "NVIDIA/TensorRT-LLM @ 138f96d45f90b9667426f7c47297d8c06bafac73 docs/source/performance.md",
            "v0.5": "NVIDIA/TensorRT-LLM release/0.5.0 docs/source/performance.md"}
TRT_WORKLOAD = {"h100": "../unseen5/workloads/trtllm-h100-fp8-static.yaml",
                "a100": "../serving/trtllm-v0.6.1-a100.yaml"}
TRT_STATIC = ("one static batch of fixed lengths as gptSessionBenchmark runs it (serving.scheduler static), "
              "the KV cache of the whole batch at its full lengths (each sequence's input and output and "
              "the block its last token opens, 16 tokens a block)")


def kv_blocks(batch, isl, osl):
    return batch * ((isl + osl) // KV_BLOCK + 1)


def static_sets(model, tp, batch, isl, osl):
    return [f"model={model}", f"serving.tp={tp}", f"serving.max_batch={batch}", f"serving.requests.count={batch}",
            f"serving.requests.prompt_tokens={isl}", f"serving.requests.output_tokens={osl}",
            f"serving.kv_blocks={kv_blocks(batch, isl, osl)}"]


def trtllm_peak_cases():
    for r in rows("trtllm_v0.6.1_h100_fp8_and_first_token_latency.csv"):
        if r["table"] != "peak":
            continue
        tp, batch, isl, osl = (int(r[k]) for k in ("tp", "batch", "isl", "osl"))
        write_check(
            f"trtllm-v0.6.1-h100-{r['model']}-tp{tp}-{isl}-{osl}",
            f"{TRT_PAGE['v0.6.1']}, Peak Throughput, H100 GPUs (FP8), TensorRT-LLM v0.6.1 (validation/unseen5/"
            f"trtllm_v0.6.1_h100_fp8_and_first_token_latency.csv): {r['model']}, batch size {batch}, TP {tp}, "
            f"input {isl}, output {osl}: {r['value']} output tokens/s per GPU, {int(r['value']) * tp} for the job",
            f"{TRT_STATIC}; FP8 weights and KV cache (workload trtllm-h100-fp8-static.yaml). "
            "Measured: tokens/s per GPU x TP.",
            serving(H100, TRT_WORKLOAD["h100"], static_sets(r["model"], tp, batch, isl, osl),
                    "output_tokens_per_s", f"{int(r['value']) * tp}", "0.15"))


def trtllm_v05_cases():
    for r in rows("trtllm_v0.5_h100_fp8_high_throughput.csv"):
        tp, batch, isl, osl = (int(r[k]) for k in ("tp", "batch", "isl", "osl"))
        write_check(
            f"trtllm-v0.5-h100-{r['model']}-tp{tp}-b{batch}-{isl}-{osl}",
            f"{TRT_PAGE['v0.5']}, High Throughput, H100 GPUs (FP8), TensorRT-LLM v0.5 (validation/unseen5/"
            f"trtllm_v0.5_h100_fp8_high_throughput.csv): {r['model']}, batch size {batch}, TP {tp}, input {isl}, "
            f"output {osl}: {r['output_tok_per_s']} output tokens/s",
            f"{TRT_STATIC}; FP8 weights and KV cache (workload trtllm-h100-fp8-static.yaml). The column "
            "(out tok/s, no /GPU) read as the job's (the CSV says why).",
            serving(H100, TRT_WORKLOAD["h100"], static_sets(r["model"], tp, batch, isl, osl),
                    "output_tokens_per_s", r["output_tok_per_s"], "0.15"))


def trtllm_ttft_cases():
    for r in rows("trtllm_v0.6.1_h100_fp8_and_first_token_latency.csv"):
        if r["table"] != "ttft":
            continue
        tp, isl = int(r["tp"]), int(r["isl"])
        precision = "FP8" if r["gpu"] == "h100" else "FP16"
        write_check(
            f"trtllm-v0.5-{r['gpu']}-{r['model']}-tp{tp}-{isl}-ttft",
            f"{TRT_PAGE['v0.6.1']}, Low Latency (data from TensorRT-LLM v0.5), {r['gpu'].upper()} GPUs "
            f"({precision}) (validation/unseen5/trtllm_v0.6.1_h100_fp8_and_first_token_latency.csv): "
            f"{r['model']}, batch size 1, TP {tp}, input {isl}: first token latency {r['value']} ms",
            f"gptSessionBenchmark with one output token (the page's First Token Latency Benchmark), one "
            f"request: {TRT_STATIC}; {precision} weights and KV cache (workload "
            f"{os.path.basename(TRT_WORKLOAD[r['gpu']])}); no server in the loop.",
            serving(H100 if r["gpu"] == "h100" else A100, TRT_WORKLOAD[r["gpu"]],
                    static_sets(r["model"], tp, 1, isl, 1), "ttft_s.mean", r["value"], "0.25", "ms"))


VLLM_SRC = ("vllm-project/vllm-project.github.io _posts/2026-04-22-fp8-kvcache.md @ "
            "c3a01c4a5807c8d900ae468897e45263373e534e, Throughput under Load, Table 4 (validation/unseen5/"
            "vllm_blog_2026-04_fp8_kvcache_h100_llama3.1-8b.csv): vLLM (v0.19.1), Llama-3.1-8B on one H100, "
            "150 requests at concurrency 8, about 20k input and 2k output tokens (+-15 %), KV cache {kv}: {what}")
VLLM_METRICS = [("ttft", "ttft_s.p50", "ms", "ttft_p50_ms", "median TTFT {} ms", "0.25"),
                ("itl", "tbt_s.p50", "ms", "itl_p50_ms", "median ITL {} ms", "0.15"),
                ("tput", "output_tokens_per_s", None, "output_tok_per_s", "{} output tokens/s", "0.15")]


def vllm_cases():
    for r in rows("vllm_blog_2026-04_fp8_kvcache_h100_llama3.1-8b.csv"):
        for short, metric, unit, col, text, tol in VLLM_METRICS:
            write_check(
                f"vllm-blog-h100-llama3.1-8b-20k-2k-c8-kv{r['kv_dtype']}-{short}",
                VLLM_SRC.format(kv=r["kv_dtype"].upper(), what=text.format(r[col])),
                "The vllm engine profile with vLLM's API-server defaults on an 80 GB Hopper GPU (workload "
                "vllm-llama3.1-8b-h100.yaml: max_num_batched_tokens 8192, max_num_seqs 1024), a closed loop "
                "of 8 clients (serving.requests.concurrency), lengths uniform within +-15 %; the KV "
                "cache's dtype of the row.",
                serving(H100, "../unseen5/workloads/vllm-llama3.1-8b-h100.yaml",
                        [f"serving.kv_dtype={r['kv_dtype']}"], metric, r[col], tol, unit))


def nccl_cases():
    name = "nccl-h100-128node-allreduce-ring"
    write_case(name, [
        ("name", name), ("role", "check"),
        ("source", quoted("https://github.com/NVIDIA/nccl-tests/issues/322 (2025, the opening post): "
                          "all_reduce_perf on 128 nodes x 8 H100 (1024 ranks, RoCE), NCCL_ALGO=Ring "
                          "NCCL_PROTO=LL128 NCCL_MIN_NCHANNELS=32, 1-16 GiB "
                          "(validation/unseen5/nccl-tests_issue322_h100_1024gpu_allreduce.csv)")),
        ("notes", quoted("The dgx-h100 preset (8 x 400 Gb/s NICs a node and its rail-optimized two-tier fat "
                         "tree assumed: the issue states neither) with the run's forced ring (the case's "
                         "algorithm). A table case has no key for the protocol: NCCL_PROTO=LL128 is left to "
                         "dlsim's tuner; NCCL_MIN_NCHANNELS has no key either.")),
        ("cluster", H100), ("set", listed(["node.count=128"])),
        ("table", "../unseen5/nccl-tests_issue322_h100_1024gpu_allreduce.csv"),
        ("time_column", "oop_time_us|ip_time_us"), ("op", "allreduce"), ("algorithm", "ring"),
        ("gpus", "1024")])


if __name__ == "__main__":
    bridge_cases()
    trtllm_peak_cases()
    trtllm_v05_cases()
    trtllm_ttft_cases()
    vllm_cases()
    nccl_cases()
