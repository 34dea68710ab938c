#!/usr/bin/env python3
"""Writes validation/cases/ for the third batch of unseen runs, one case per row of the
tables in this folder (checking data only: nothing in dlsim is fitted on them)."""
import functools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the data
sys.path.insert(0, os.path.dirname(HERE))
import casegen  # noqa: E402  (validation/casegen.py: what the batches' scripts share)
from casegen import node_sets, write_case  # noqa: E402

rows = functools.partial(casegen.rows, HERE)


NARAYANAN_SRC = ("NVIDIA/Megatron-LM README.md, images/cases_april2021.png @ "
                 "2e90a342f5006a3e4f8cacf44002dbae0e10aa17 (validation/unseen3/"
                 "megatron_narayanan2021_a100_weak_scaling.csv; heads and the TP x PP split from "
                 "Narayanan et al. 2021, arXiv:2104.04473, Table 1)")


def narayanan_step_time(r):
    """Seconds per iteration from the row's TFLOP/s: the paper's FLOP count (its eq. 3, which
    counts the recomputed forward), over the job's GPUs."""
    h, l, b, s, v = int(r["hidden"]), int(r["layers"]), int(r["batch"]), 2048, 51200
    flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    return flops / (float(r["tflops_per_gpu"]) * 1e12 * int(r["gpus"]))


def narayanan_cases():
    for r in rows("megatron_narayanan2021_a100_weak_scaling.csv"):
        tp, pp, gpus = int(r["tp"]), int(r["pp"]), int(r["gpus"])
        dp = gpus // (tp * pp)
        name = f"megatron-a100-2021-weak-{r['model'].lower()}"
        sets = [f"node.count={gpus // 8}", f"model.layers={r['layers']}",
                f"model.hidden={r['hidden']}", f"model.heads={r['heads']}",
                f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.dp={dp}",
                f"training.global_batch={r['batch']}"]
        if int(r["layers"]) % pp:
            sets.append("parallel.uneven_stages=true")
        write_case(name, [
            ("name", name), ("role", "check"),
            ("source", f"\"{NARAYANAN_SRC}: GPT {r['model']}, {r['heads']} heads, hidden "
                       f"{r['hidden']}, {r['layers']} layers, TP {tp} x PP {pp} x DP {dp} on "
                       f"{gpus} A100, batch {r['batch']}: {r['tflops_per_gpu']} TFLOP/s per GPU "
                       f"({r['pct_peak']} % of peak)\""),
            ("notes", f"\"Measured step time derived, not printed: the paper's FLOPs per "
                      f"iteration (96 B s l h^2 (1 + s/6h + V/16lh), recomputation included) over "
                      f"{r['tflops_per_gpu']} TFLOP/s x {gpus} GPUs; the TFLOP/s are rounded to "
                      f"3 digits (+-0.4 %). Assumed (not published): micro-batch 1, plain 1F1B, "
                      f"full recomputation, fp16 without fused attention (see the workload).\""),
            ("cluster", "../../configs/clusters/dgx-a100.yaml"),
            ("workload", "../unseen3/workloads/gpt-2021-weak-scaling.yaml"),
            ("set", "[" + ", ".join(sets) + "]"),
            ("engine", "analytic"), ("metric", "step_time_s"),
            ("measured", f"{narayanan_step_time(r):.3f}"), ("tolerance", "0.10")])


NEMO_LONG_SRC = ("NVIDIA/NeMo docs/source/performance/performance_long_sequence.md @ "
                 "a2c4cc8ee64eb98d83684fc616dd0225c25bdfa1, LLAMA2-7B (FP8) - H100 (validation/"
                 "unseen3/nemo_24.03_h100_llama2_7b_long_sequence.csv)")


def nemo_long_cases():
    for r in rows("nemo_24.03_h100_llama2_7b_long_sequence.csv"):
        tp, pp, dp, cp, gpus = (int(r[k]) for k in ("tp", "pp", "dp", "cp", "gpus"))
        seq = int(r["seq_k"]) * 1024
        name = f"nemo-h100-llama2-7b-{r['seq_k']}k-cp{cp}"
        sets = node_sets(gpus) + [
            f"model.seq_len={seq}", f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.dp={dp}",
            f"parallel.cp={cp}", f"training.global_batch={r['batch']}",
            f"parallel.sequence_parallel={'true' if tp > 1 else 'false'}"]
        write_case(name, [
            ("name", name), ("role", "check"),
            ("source", f"\"{NEMO_LONG_SRC}: NeMo 24.03.01, DGX-H100, FP8, Llama 2 7B, sequence "
                       f"{r['seq_k']}K on {gpus} GPUs, global batch {r['batch']}, TP {tp} PP {pp} "
                       f"DP {dp} CP {cp}: {r['tflops_cp']} TFLOP/s per GPU\""),
            ("notes", "\"NeMo's FLOP count is dlsim's (full attention): the 24.07 summary's "
                      "Llama 2 7B row (776 TFLOP/s at 16,847 tokens/s per GPU, 46.06 GFLOP a token) "
                      "is NeMo's later llama2 formula (nemo/utils/flops_formulas.py, 46.09) with its "
                      "12 s/h attention term whole. NVIDIA/NeMo-Framework-Launcher @ tag 24.03.01 "
                      "(5c7e280a4b7be0afe3c0b0295cc7b1586125f6d4): launcher_scripts/conf/config.yaml "
                      "line 68 NVTE_FUSED_ATTN: 0 (flash-attn 2, training.attention=fa2); "
                      "conf/training/llama/llama2_7b.yaml: micro-batch 1 (line 57), no recomputation "
                      "(line 123), distributed optimizer with overlap_grad_sync and overlap_param_sync "
                      "(lines 150-151), bucket_cap_mb 125 (workload nemo-llama2-7b). Assumed (not "
                      "published): the runs used those defaults; sequence parallelism wherever "
                      "TP > 1 (the config, at TP 1, sets it false).\""),
            ("cluster", "../../configs/clusters/dgx-h100.yaml"),
            ("workload", "../nemo_h100/workloads/nemo-llama2-7b.yaml"),
            ("set", "[" + ", ".join(sets + ["parallel.overlap_param_gather=true",
                                            "training.attention=fa2"]) + "]"),
            ("engine", "analytic"), ("metric", "model_tflops_per_gpu"),
            ("measured", r["tflops_cp"]), ("tolerance", "0.10")])


TITAN_SRC = {
    "perf": ("pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @ "
             "820504e20d1149fbf0b98c567af24c4b0433b22d (docs/performance.md before it), Table "
             "{table}: torch 1963fc8, torchtitan 9dec370, Grand Teton H100"),
    "asynctp": ("pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md @ "
                "820504e20d1149fbf0b98c567af24c4b0433b22d, Llama3 {table} table: torch 38410cf9, "
                "torchtitan 820504e, Grand Teton H100"),
    "trainy": ("pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md @ "
               "820504e20d1149fbf0b98c567af24c4b0433b22d: torchtitan e7c0cae, WhiteFiber H200 "
               "(8 a host, 400 Gb/s per GPU)"),
}

# torchtitan @ 9dec370 (the 2024-12 page) compiles each TransformerBlock but not loss_fn
# (train.py: "compiling loss function causes CUDA errors"); from 2025 (820504e, e7c0cae:
# components/loss.py) torch.compile takes the loss too.
TITAN_LOSS = {"perf": ["training.eager_loss=true"], "asynctp": [], "trainy": []}

# Grand Teton's H100 (96 GB HBM2e at 2.4 TB/s, 500 W power limit, stated by both torchtitan
# pages) and the H200 (141 GB at 4.8 TB/s, NVIDIA's datasheet, as the SGLang H200 cases set it).
TITAN_H100 = ["gpu.memory=96GiB", "gpu.memory_bandwidth=2.4TB/s", "gpu.power_limit=500W"]
TITAN_GPU = {"perf": TITAN_H100, "asynctp": TITAN_H100,
             "trainy": ["gpu.memory=141GB", "gpu.memory_bandwidth=4.8TB/s"]}


def titan_layout_sets(r):
    fsdp, tp, pp, cp, lb = (int(r[k]) for k in ("fsdp", "tp", "pp", "cp", "local_batch"))
    sets = [f"parallel.dp={fsdp}", f"parallel.tp={tp}", f"parallel.pp={pp}",
            f"parallel.cp={cp}", f"model.seq_len={r['seq']}", f"training.global_batch={lb * fsdp}"]
    if tp > 1:
        sets.append("parallel.sequence_parallel=true")
    if pp > 1:
        # torchtitan splits the local batch into as many micro-batches as there are pipeline
        # ranks, interleaved or not: pipelining_utils.py @ 9dec370 (build_pipeline_schedule)
        # sets n_microbatches to pipeline_parallel_degree when pipeline_parallel_microbatches is
        # unset, whatever its help text in config_manager.py says ("the number of stages")
        sets += [f"training.micro_batch={max(lb // pp, 1)}", f"parallel.schedule={r['schedule']}",
                 "parallel.uneven_stages=true"]
        if r["schedule"] == "interleaved":
            sets.append("parallel.virtual_stages=2")
    else:
        sets.append(f"training.micro_batch={lb}")
    return sets


def titan_precision_sets(r):
    sets = ["training.recompute=" + ("full" if r["ac"] == "full" else "selective")]
    if r["fp8"] == "tensorwise":
        sets += ["training.dtype=fp8", "training.fp8_recipe=current"]
    if r["fp8_allgather"] == "true":
        sets.append("training.fp8_params=true")
    if r["async_tp"] == "true":
        sets.append("parallel.tp_comm_overlap=true")
    return sets


def titan_name(r):
    parts = [f"torchtitan-{'h200' if r['source'] == 'trainy' else 'h100'}", r["model"],
             f"{r['gpus']}gpu", f"fsdp{r['fsdp']}"]
    parts += [f"{k}{r[k]}" for k in ("tp", "pp", "cp") if int(r[k]) > 1]
    if int(r["cp"]) > 1 or int(r["seq"]) > 8192:
        parts.append(f"s{int(r['seq']) // 1024}k")
    if r["schedule"] == "interleaved":
        parts.append("interleaved")
    parts.append("fp8" if r["fp8"] == "tensorwise" else "bf16")
    if r["async_tp"] == "true" and r["model"] != "llama3.1-405b":  # every 405B row runs it
        parts.append("asynctp")
    return "-".join(parts)


def titan_cases():
    for r in rows("torchtitan_h100_2d_3d_cp.csv"):
        gpus = int(r["gpus"])
        name = titan_name(r)
        sets = (node_sets(gpus) + TITAN_GPU[r["source"]] + titan_layout_sets(r)
                + titan_precision_sets(r) + TITAN_LOSS[r["source"]] + ["model.rotary=fused"])
        src = TITAN_SRC[r["source"]].format(table=r["table"])
        what = (f"{r['model']}, {gpus} GPUs, FSDP {r['fsdp']} TP {r['tp']} PP {r['pp']} CP {r['cp']}, "
                f"sequence {r['seq']}, local batch {r['local_batch']}, {r['ac']} activation "
                f"checkpointing, torch.compile, {'Float8 tensorwise' if r['fp8'] != 'none' else 'bf16'}"
                f"{', FSDP float8 all-gather' if r['fp8_allgather'] == 'true' else ''}"
                f"{', async TP' if r['async_tp'] == 'true' else ''}"
                f"{', ' + r['schedule'] if r['schedule'] != '-' else ''}: {r['tps_per_gpu']} "
                f"tokens/s per GPU")
        notes = ("torch.compile as training.eager_ops false (fused elementwise ops; compile's other "
                 "graph changes have no key), async TP as parallel.tp_comm_overlap, Float8 "
                 "(torchao, tensorwise dynamic scaling) as fp8 with current scaling, the FSDP "
                 "float8 all-gather as training.fp8_params. Measured: tokens/s per GPU x GPUs.")
        if TITAN_LOSS[r["source"]]:
            notes += (" torchtitan 9dec370 compiles each block but not its fp32 loss "
                      "(train.py): training.eager_loss.")
        if int(r["pp"]) > 1:
            notes += (" Assumed: the local batch split into one micro-batch per pipeline rank "
                      "(torchtitan's default), 2 virtual stages a rank when interleaved.")
        if int(r["cp"]) > 1:
            notes += (" torchtitan's CP exchanges K/V shards by all-gather "
                      "(context_parallel_rotate_method allgather, its default @ 9dec370); dlsim's "
                      "context parallelism is a ring of sends (no key picks the all-gather).")
        if r["source"] == "perf" and r["table"] == "4":
            # the async-TP page's Float8 rows are the same runs measured again by a later torch:
            # they are the throughput cases, these rows give their memory
            titan_memory_case(r, name, src, what, sets)
            continue
        write_case(name, [
            ("name", name), ("role", "check"), ("category", "fsdp"),
            ("source", f"\"{src} (validation/unseen3/torchtitan_h100_2d_3d_cp.csv): {what}\""),
            ("notes", f"\"{notes}\""),
            ("cluster", "../../configs/clusters/dgx-h100.yaml"),
            ("workload", f"../unseen3/workloads/torchtitan-{r['model']}.yaml"),
            ("set", "[" + ", ".join(sets) + "]"),
            ("engine", "analytic"), ("metric", "tokens_per_s"),
            ("measured", f"{float(r['tps_per_gpu']) * gpus:.0f}"), ("tolerance", "0.10")])
        if r["memory_gib"]:
            titan_memory_case(r, name, src, what, sets)


def titan_memory_case(r, name, src, what, sets):
    """The same run's memory: torchtitan logs torch.cuda's peak reservation (train.py @ 9dec370,
    max_reserved_gib), the maximum over the GPUs for pipelines (the page's footnote 1)."""
    write_case(name + "-memory", [
        ("name", name + "-memory"), ("role", "check"),
        ("source", f"\"{src} (validation/unseen3/torchtitan_h100_2d_3d_cp.csv): {what.rsplit(':', 1)[0]}: "
                   f"Memory {r['memory_gib']} GiB (the caching allocator's peak reservation, the "
                   f"maximum over the GPUs)\""),
        ("notes", f"\"The run of {name}, as dlsim memory sees it, its busiest pipeline stage "
                  f"(peak_bytes), as the source takes the maximum over the GPUs; measured is the "
                  f"caching allocator's peak reservation, which dlsim's total (with "
                  f"memory.fragmentation) stands for.\""),
        ("command", "memory"),
        ("cluster", "../../configs/clusters/dgx-h100.yaml"),
        ("workload", f"../unseen3/workloads/torchtitan-{r['model']}.yaml"),
        ("set", "[" + ", ".join(sets) + "]"),
        ("metric", "peak_bytes"), ("unit", "GiB"),
        ("measured", r["memory_gib"]), ("tolerance", "0.10")])


TRTLLM_MODEL = {"Llama 3.1 8B": "llama3-8b", "Llama 3.3 70B": "llama3-70b",
                "Llama 3.1 405B": "llama3.1-405b"}

# the doc's number of requests for each ISL/OSL ("Preparing a Dataset")
TRTLLM_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500,
                   (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000,
                   (500, 2000): 3000, (20000, 2000): 1000}


def trtllm_h200_cases():
    for r in rows("trtllm_v1.0_h200_max_throughput.csv"):
        isl, osl, tp = int(r["isl"]), int(r["osl"]), int(r["tp"])
        model = TRTLLM_MODEL[r["model"]]
        count = TRTLLM_REQUESTS[(isl, osl)]
        slug = r["model"].lower().replace("llama ", "llama").replace(" ", "-")
        name = f"trtllm-v1.0-h200-{slug}-tp{tp}-{isl}-{osl}"
        write_case(name, [
            ("name", name), ("role", "check"),
            ("source", f"\"NVIDIA/TensorRT-LLM @ 00f37686aa docs/source/performance/perf-overview.md, "
                       f"Throughput Measurements (validation/unseen3/trtllm_v1.0_h200_max_throughput.csv): "
                       f"TensorRT-LLM v1.0, trtllm-bench throughput, {r['model']} FP8 on H200 SXM "
                       f"141GB, TP {tp}, ISL/OSL {isl}/{osl}, {count} requests at once: "
                       f"{r['output_tok_per_s']} output tokens/s\""),
            ("notes", "\"The H100 cases' workload (trtllm-h100.yaml: max_batch 2048 and max_tokens "
                      "8192 assumed, trtllm-bench's heuristics are not published) on the H200's "
                      "141 GB at 4.8 TB/s (NVIDIA's H200 datasheet), set over the dgx-h100 preset "
                      "as the SGLang H200 cases do; the doc's number of requests for this ISL/OSL.\""),
            ("cluster", "../../configs/clusters/dgx-h100.yaml"),
            ("workload", "../serving/trtllm-h100.yaml"),
            ("command", "serve"),
            ("set", f"[gpu.memory=141GB, gpu.memory_bandwidth=4.8TB/s, model={model}, serving.tp={tp}, "
                    f"serving.max_model_len={isl + osl}, serving.requests.count={count}, "
                    f"serving.requests.prompt_tokens={isl}, serving.requests.output_tokens={osl}]"),
            ("metric", "output_tokens_per_s"),
            ("measured", r["output_tok_per_s"]), ("tolerance", "0.15")])


BRIDGE_SRC = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ "
              "067f987df03b8355b03192d88d70f1709fedf51a (validation/unseen3/"
              "megatron_bridge_h100_pretraining.csv)")


def bridge_cases():
    for r in rows("megatron_bridge_h100_pretraining.csv"):
        tp, pp, cp, vp, ep, gpus = (int(r[k]) for k in ("tp", "pp", "cp", "vp", "ep", "gpus"))
        dp = gpus // (tp * pp * cp)
        name = f"bridge-{r['container']}-h100-{r['model']}-{gpus}gpu"
        sets = [f"node.count={gpus // 8}", f"parallel.tp={tp}", f"parallel.pp={pp}",
                f"parallel.cp={cp}", f"parallel.dp={dp}", f"parallel.ep={ep}",
                f"parallel.virtual_stages={vp}",
                f"parallel.schedule={'interleaved' if vp > 1 else '1f1b'}",
                f"training.global_batch={r['gbs']}", f"training.micro_batch={r['mbs']}",
                f"model.seq_len={r['seq']}"]
        if tp == 1:
            sets += ["parallel.sequence_parallel=false", "parallel.tp_comm_overlap=false"]
        if r["model"] == "llama3.1-405b":
            sets.append("parallel.uneven_stages=true")
        write_case(name, [
            ("name", name), ("role", "check"),
            ("source", f"\"{BRIDGE_SRC}: NeMo {r['container']} container, DGX-H100, "
                       f"{r['precision'].upper()}, {r['model']} on {gpus} GPUs, GBS {r['gbs']}, MBS "
                       f"{r['mbs']}, sequence {r['seq']}, TP {tp} PP {pp} CP {cp} VP {vp} EP {ep}: "
                       f"{r['tokens_per_s_per_gpu']} tokens/s per GPU ({r['model_tflops_per_gpu']} "
                       f"model TFLOP/s per GPU)\""),
            ("notes", "\"Stated: the layout, FP8 (current scaling). Assumed (workload "
                      "bridge-llama3-70b.yaml): NeMo's 2024 H100 settings: distributed optimizer with "
                      "overlapped all-gather, TP overlap, no recomputation, cuDNN attention. "
                      "Measured: tokens/s per GPU x GPUs.\""),
            ("cluster", "../../configs/clusters/dgx-h100.yaml"),
            ("workload", f"../unseen3/workloads/bridge-{r['model']}.yaml"),
            ("set", "[" + ", ".join(sets) + "]"),
            ("engine", "analytic"), ("metric", "tokens_per_s"),
            ("measured", f"{int(r['tokens_per_s_per_gpu']) * gpus}"), ("tolerance", "0.10")])


if __name__ == "__main__":
    bridge_cases()
    trtllm_h200_cases()
    titan_cases()
    narayanan_cases()
    nemo_long_cases()
