#!/usr/bin/env python3
"""The sixth batch of unseen runs (MLPerf Training v3.x / v5.x logs, TensorRT-LLM's 2023 blog tables)
as case files in validation/cases/: one per row dlsim can express, each a check (nothing in dlsim is
fitted on them). Standard library only; run from anywhere, then commit validation/cases/."""
import functools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the data
sys.path.insert(0, os.path.dirname(HERE))
import casegen  # noqa: E402  (validation/casegen.py: what the batches' scripts share)
from casegen import A100, H100, listed, node_sets, write_check  # noqa: E402

rows = functools.partial(casegen.rows, HERE)
KV_BLOCK = 16  # TensorRT-LLM's paged KV block, in tokens
# An H200 SXM is an H100 SXM's GPU with 141 GB of HBM3e at 4.8 TB/s (NVIDIA H200 datasheet), as
# the earlier H200 cases set it over the dgx-h100 preset.
H200_SETS = ["gpu.memory=141GB", "gpu.memory_bandwidth=4.8TB/s"]


MLPERF_REPO = {"v3.0": "mlcommons/training_results_v3.0 @ 63e326c400f5d8bb8c6070a9ab08332d4931152e",
               "v3.1": "mlcommons/training_results_v3.1 @ d06288b2bd675a9d88e0e6181f5bb5626b71ec19",
               "v5.0": "mlcommons/training_results_v5.0 @ 0fdc28f013256aea84fa36fdaf1e0fa46094b18c",
               "v5.1": "mlcommons/training_results_v5.1 @ 441d65f4445cd59687466533fd9f55399136e7a4"}
MLPERF_MODEL = {"llama31_405b": ("llama3.1-405b", "../unseen6/workloads/mlperf-llama3.1-405b.yaml"),
                "llama31_8b": ("llama3.1-8b", "../unseen6/workloads/mlperf-llama3.1-8b.yaml"),
                "gpt3": ("gpt3-175b", "../unseen6/workloads/mlperf-gpt3-175b-v3.yaml")}
MLPERF_IMPL = {"llama31_405b": "implementations/{system}", "llama31_8b": "implementations/nemo",
               "gpt3": "implementations/pytorch"}
MLPERF_TABLES = {"llama31_405b": "mlperf_training_v5.0_v5.1_llama3.1_h100_h200.csv",
                 "llama31_8b": "mlperf_training_v5.0_v5.1_llama3.1_h100_h200.csv",
                 "gpt3": "mlperf_training_v3.0_v3.1_gpt3_h100.csv"}
MLPERF_NET = {
    "NVIDIA": "Eos: 8 x ConnectX-7 IB NDR 400 Gb/s a node (the submission's system JSON), the dgx-h100 "
              "preset's network as it stands",
    "Nebius": "8 x ConnectX-7 IB NDR 400 Gb/s a node (the system JSON): the dgx-h100 preset with the "
              "H200's memory (141 GB, 4.8 TB/s: gpu.memory, gpu.memory_bandwidth)",
    "NVIDIA_CoreWeave": "CoreWeave HGX H100: 8 x ConnectX-7 IB NDR 400 Gb/s a node (the system JSON), the "
                        "dgx-h100 preset's network",
    "Azure+NVIDIA": "ND H100 v5: 8 x Quantum-2 CX7 InfiniBand 400 Gb/s a VM (the system JSON), the dgx-h100 "
                    "preset's network",
    "Cisco": "8 x ConnectX-7 400 Gb/s a node on a Cisco Silicon One G200 Ethernet fabric (the system "
             "JSON): RoCE, run on the dgx-h100 preset's InfiniBand fat tree (no key for the fabric)"}


# a case of another submitter than NVIDIA is named after it (two systems of one size in a round)
SUBMITTER_TAG = {"NVIDIA_CoreWeave": "-coreweave", "Azure+NVIDIA": "-azure", "Nebius": "-nebius", "Cisco": "-cisco"}


# The attention kernels of the GPT-3 submissions' containers (Transformer Engine's DotProductAttention
# runs flash-attn's kernel whenever it is installed and NVTE_FLASH_ATTN is not 0, before cuDNN's fused
# one, which TE 0.8 did not have): v3.0 installs flash_attn==1.0.5 (NVIDIA/.../pytorch/requirements.txt:5,
# NVIDIA_CoreWeave's the same) under TE release_v0.8 (Dockerfile:47; transformer.py:461-465 and 552
# there); v3.1 installs flash-attn==2.0.8 (Dockerfile:96, Azure+NVIDIA's Dockerfile:97) under TE
# 09ba842 / 4ee8e8e (attention.py:1747, the flash-attn branch, returns before the fused one at
# 1773), and config_common.sh:45 leaves NVTE_FLASH_ATTN=0 commented out. The workload's own
# (cuDNN, the nemo profile's) stays for rounds not listed.
GPT3_ATTENTION = {"v3.0": "fa1", "v3.1": "fa2"}


def mlperf_sets(r):
    nodes, tp, pp, cp, vp = (int(r[k]) for k in ("nodes", "tp", "pp", "cp", "vp"))
    sets = node_sets(nodes * 8) + [
        f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.cp={cp}",
        f"parallel.dp={nodes * 8 // (tp * pp * cp)}", f"training.global_batch={r['gbs']}",
        f"training.micro_batch={r['mbs']}", f"model.seq_len={r['seq']}"]
    if vp > 1:
        sets += [f"parallel.virtual_stages={vp}", "parallel.schedule=interleaved"]
    if tp == 1:
        sets += ["parallel.sequence_parallel=false", "parallel.tp_comm_overlap=false"]
    if r["benchmark"] == "gpt3" and r["round"] in GPT3_ATTENTION:
        sets.append(f"training.attention={GPT3_ATTENTION[r['round']]}")
    return sets + (H200_SETS if r["gpu"] == "h200" else [])


def mlperf_rows():
    for table in sorted(set(MLPERF_TABLES.values())):
        yield from rows(table)


def mlperf_cases():
    for r in mlperf_rows():
        gpus = int(r["nodes"]) * 8
        model, workload = MLPERF_MODEL[r["benchmark"]]
        impl = MLPERF_IMPL[r["benchmark"]].format(system=r["system"])
        write_check(
            f"mlperf-{r['round']}-{model}-{r['gpu']}-{gpus}gpu{SUBMITTER_TAG.get(r['submitter'], '')}",
            f"MLPerf Training {r['round']} closed, {MLPERF_REPO[r['round']]}: {r['submitter']}/results/"
            f"{r['system']}/{r['benchmark']}/result_*.txt ({r['runs']} runs) and {r['submitter']}/benchmarks/"
            f"{r['benchmark']}/{impl}/{r['config']} (validation/unseen6/{MLPERF_TABLES[r['benchmark']]}): {model} pre-training on {r['nodes']} nodes x 8 {r['gpu'].upper()}, TP {r['tp']} "
            f"PP {r['pp']} VP {r['vp']} CP {r['cp']}, global batch {r['gbs']}, micro-batch {r['mbs']}, sequence "
            f"{r['seq']}: median train_step_time {r['step_s']} s (mean over the runs), "
            f"{r['tokens_per_s']} tokens/s",
            f"The submission's own config and its config_common.sh state the layout, FP8 (delayed scaling) "
            f"{'without' if r['benchmark'] == 'gpt3' else 'with'} FP8 parameters, the distributed optimizer "
            f"with overlapped reduce and all-gather, TP overlap, no recomputation, no CUDA graphs (workload "
            f"{os.path.basename(workload)}, which says what is assumed). Network: {MLPERF_NET[r['submitter']]}. "
            "Measured: global batch x sequence / the median step time; evaluation is outside train_step_time.",
            [("cluster", H100), ("workload", workload), ("set", listed(mlperf_sets(r))),
             ("engine", "analytic"), ("metric", "tokens_per_s"), ("measured", r["tokens_per_s"]),
             ("tolerance", "0.10")])


BLOG = {"h200launch": "NVIDIA/TensorRT-LLM docs/source/blogs/H200launch.md @ 1555478c1b417a0b34de05209862ea5a2ab9add1, "
                      "H200 FP8 Max throughput (TensorRT-LLM v0.5.0)",
        "falcon": "NVIDIA/TensorRT-LLM docs/source/blogs/Falcon180B-H200.md @ 3c44cb974badec8966108b16054a99c0923e410d, "
                  "H200 6.7x A100 (TensorRT-LLM v0.7a, batch sizes from the table's footnote)",
        "h100vsa100": "NVIDIA/TensorRT-LLM docs/source/blogs/H100vsA100.md @ 15ed78097ea2c14b3831ca017935a32dec54476e, "
                      "Max Throughput & Min Latency (TensorRT-LLM v0.5.0, H100 FP8, A100 FP16, SXM 80GB, TP 1)"}
# Llama 2 13B (Touvron et al. 2023, Table 1; HF meta-llama/Llama-2-13b-hf): 40 layers of 5120, 40
# heads (no GQA), SwiGLU FFN 13824; the workload's llama2-7b otherwise (vocabulary 32000, context
# 4096). GPT-J 6B is its workload's own model (workloads/trtllm-gptj-6b-*-static.yaml).
MODEL_SETS = {
    "llama2-70b": ["model=llama2-70b"],
    "llama2-13b": ["model.layers=40", "model.hidden=5120", "model.heads=40", "model.kv_heads=40",
                   "model.ffn_hidden=13824"],
    "gpt-j-6b": []}
TRT_STATIC = ("one static batch of fixed lengths as gptSessionBenchmark runs it (serving.scheduler static), "
              "the KV cache of the whole batch at its full lengths (each sequence's input and output and "
              "the block its last token opens, 16 tokens a block)")
SERVE_WORKLOAD = {"h100": "../unseen5/workloads/trtllm-h100-fp8-static.yaml",
                  "h200": "../unseen5/workloads/trtllm-h100-fp8-static.yaml",
                  "a100": "../serving/trtllm-v0.6.1-a100.yaml"}


def serve_workload(r):
    if r["model"] == "gpt-j-6b":
        return f"../unseen6/workloads/trtllm-gptj-6b-{r['gpu']}-static.yaml"
    return SERVE_WORKLOAD[r["gpu"]]
PRECISION = {"h100": "FP8 weights and KV cache", "h200": "FP8 weights and KV cache",
             "a100": "FP16 weights and KV cache"}


def static_sets(r):
    batch, tp, isl, osl = (int(r[k]) for k in ("batch", "tp", "isl", "osl"))
    sets = MODEL_SETS[r["model"]] + [
        f"serving.tp={tp}", f"serving.max_batch={batch}", f"serving.requests.count={batch}",
        f"serving.requests.prompt_tokens={isl}", f"serving.requests.output_tokens={osl}",
        f"serving.kv_blocks={batch * ((isl + osl) // KV_BLOCK + 1)}"]
    if isl + osl > 4096:
        sets.append(f"serving.max_model_len={isl + osl}")
    # The workloads read each KV head once per query head, as TensorRT-LLM's masked MHA did before
    # its GQA generation kernel; the v0.7a blog states that kernel ("TensorRT-LLM has improved its
    # Group Query Attention (GQA) kernels, in the generation phase ... leverages Tensor Cores,
    # including in the generation phase"), so its rows read a KV head once for its group.
    if r["version"] == "v0.7a":
        sets.append("serving.decode_attention_per_query_head=false")
    return sets + (H200_SETS if r["gpu"] == "h200" else [])


def blog_case_name(r):
    short = "gptj-6b" if r["model"] == "gpt-j-6b" else r["model"]
    name = f"trtllm-{r['version']}-{r['gpu']}-{short}-tp{r['tp']}-b{r['batch']}-{r['isl']}"
    return name + (f"-{r['osl']}" if r["metric"] == "tok_s_per_gpu" else "-ttft")


def blog_cases():
    for r in rows("trtllm_blogs_v0.5_v0.7a_h200_h100_a100.csv"):
        tp = int(r["tp"])
        what = (f"{r['model']}, batch size {r['batch']}, TP {tp}, input {r['isl']}, output {r['osl']}, "
                f"{r['gpu'].upper()}: ")
        if r["metric"] == "tok_s_per_gpu":
            job = round(float(r["value"]) * tp)
            what += f"{r['value']} output tokens/s per GPU, {job} for the job"
            metric = [("metric", "output_tokens_per_s"), ("measured", f"{job}"), ("tolerance", "0.15")]
        else:
            what += f"1st token latency {r['value']} ms"
            metric = [("metric", "ttft_s.mean"), ("unit", "ms"), ("measured", r["value"]), ("tolerance", "0.25")]
        write_check(
            blog_case_name(r),
            f"{BLOG[r['blog']]} (validation/unseen6/trtllm_blogs_v0.5_v0.7a_h200_h100_a100.csv): {what}",
            f"{TRT_STATIC}; {PRECISION[r['gpu']]} (workload {os.path.basename(serve_workload(r))})"
            + ("; the H200 as the dgx-h100 preset with 141 GB at 4.8 TB/s" if r["gpu"] == "h200" else "")
            + ("; the 1st token latency of a batch is its one prefill pass (all sequences prompted at once)"
               if r["metric"] == "ttft_ms" else "")
            + ("; the GQA generation kernel the blog states for v0.7a: serving.decode_attention_per_query_head "
               "false (added after the first prediction, which ran the workload's pre-XQA reads)"
               if r["version"] == "v0.7a" else "")
            + (". The blog states no KV-cache dtype: FP8, as the v0.5 performance page's Hopper build"
               if r["gpu"] != "a100" else ". The blog states no KV-cache dtype: FP16, as its weights"),
            [("cluster", A100 if r["gpu"] == "a100" else H100), ("workload", serve_workload(r)),
             ("command", "serve"), ("set", listed(static_sets(r)))] + metric)


if __name__ == "__main__":
    mlperf_cases()
    blog_cases()
