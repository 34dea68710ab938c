#!/usr/bin/env python3
"""The seventh batch of unseen runs (NeMo 24.09 / 25.02 performance tables on DGX H100, NeMo AutoModel's
FSDP2 pre-training table on DGX H100, XTuner's DeepSpeed ZeRO-3 fine-tuning speed tables on A100, Qwen2.5's
vLLM 0.6.3 single-request speed table on A100) as case
files in validation/cases/: one per row dlsim can express, each a check (nothing in dlsim is fitted on
them). Standard library only; run from anywhere, then commit validation/cases/."""
import functools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the data
sys.path.insert(0, os.path.dirname(HERE))
import casegen  # noqa: E402  (validation/casegen.py: what the batches' scripts share)
from casegen import A100, H100, listed, node_sets, write_check  # noqa: E402

rows = functools.partial(casegen.rows, HERE)

# --- NeMo 24.09 / 25.02 on DGX H100 -------------------------------------------------------------
NEMO_TABLE = "nemo_24.09_25.02_h100_pretraining.csv"
NEMO_PAGE = {"24.09": "NVIDIA NeMo Framework User Guide 24.09, Performance Summary, Pretraining "
                      "(https://docs.nvidia.com/nemo-framework/user-guide/24.09/performance/performance_summary.html)",
             "25.02": "NVIDIA NeMo Framework User Guide (latest as stored), Performance Summary, Pretraining, "
                      "'Container: NeMo 25.02', 'System: DGX-H100' (https://docs.nvidia.com/nemo-framework/"
                      "user-guide/latest/performance/performance_summary.html)"}
# The row's model as validation/nemo_h100's workloads (NeMo 24.07's launcher settings, each of which
# says where its settings come from) and the settings the 24.07 case of the same layout sets over them.
NEMO_MODEL = {
    "GPT3-5B": ("nemo-gpt3-5b", ["parallel.sequence_parallel=false", "parallel.overlap_param_gather=true",
                                 "parallel.gradient_bucket=400MiB", "training.attention=fa2"]),
    "GPT3-20B": ("nemo-gpt3-20b", ["parallel.tp_comm_overlap=true", "parallel.overlap_param_gather=true",
                                   "parallel.gradient_bucket=220MiB", "training.attention=fa2"]),
    "GPT3-175B": ("nemo-gpt3-175b", ["parallel.overlap_param_gather=true", "parallel.gradient_bucket=220MiB"]),
    "LLAMA2-7B": ("nemo-llama2-7b", ["parallel.sequence_parallel=false", "parallel.overlap_param_gather=true",
                                     "training.attention=fa2"]),
    "LLAMA2-13B": ("nemo-llama2-13b", ["parallel.sequence_parallel=false", "parallel.overlap_param_gather=true",
                                       "training.attention=fa2"]),
    "LLAMA2-70B": ("nemo-llama2-70b", ["parallel.tp_comm_overlap=true", "parallel.overlap_param_gather=true",
                                       "training.attention=fa2"]),
    "LLAMA3-8B": ("nemo-llama3-8b", ["parallel.sequence_parallel=false", "parallel.overlap_param_gather=true",
                                     "training.attention=fa2"]),
    "LLAMA3-70B": ("nemo-llama3-70b", ["parallel.tp_comm_overlap=true", "parallel.overlap_param_gather=true",
                                       "training.attention=fa2"])}


def nemo_sets(r):
    gpus, tp, pp, cp, vp = (int(r[k]) for k in ("gpus", "tp", "pp", "cp", "vp"))
    sets = node_sets(gpus) + [
        f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.cp={cp}", f"parallel.dp={gpus // (tp * pp * cp)}",
        f"training.global_batch={r['gbs']}", f"training.micro_batch={r['mbs']}", f"model.seq_len={r['seq_len']}"]
    if vp > 1:
        sets += ["parallel.schedule=interleaved", f"parallel.virtual_stages={vp}"]
    return sets + NEMO_MODEL[r["model"]][1]


def nemo_cases():
    for r in rows(NEMO_TABLE):
        if r["case"] != "yes":
            continue
        gpus = int(r["gpus"])
        job = round(float(r["tokens_per_s_per_gpu"]) * gpus)
        workload = NEMO_MODEL[r["model"]][0]
        write_check(
            f"nemo-{r['container']}-h100-{r['model'].lower()}-{gpus}gpu",
            f"{NEMO_PAGE[r['container']]} (validation/unseen7/{NEMO_TABLE}): NeMo {r['container']}, DGX-H100, FP8, "
            f"{r['model']} on {gpus} GPUs, GBS {r['gbs']}, MBS {r['mbs']}, sequence {r['seq_len']}, TP {r['tp']} "
            f"PP {r['pp']} CP {r['cp']} VP {r['vp']}: {r['tokens_per_s_per_gpu']} tokens/s per GPU "
            f"({r['model_tflops_per_gpu']} model TFLOP/s per GPU), {job} tokens/s of the job",
            "Stated by the row: the layout, FP8" + (f", gradient accumulation {r['ga']}" if r["ga"] else "")
            + ". Not stated: the container's settings. Assumed as the NeMo 24.07 case of "
            f"the same model and layout (validation/nemo_h100/workloads/{workload}.yaml and its case's settings: "
            "the distributed optimizer with overlapped parameter all-gather, the launcher's TP overlap, buckets and "
            "attention kernel); " + ("the 25.02 row is NeMo 2.0's recipe, whose settings are not rechecked. "
                                     if r["container"] == "25.02" else
                                     "the page's stored copy drops its 'System' line: DGX-H100 as the 24.07 table "
                                     "it replaces. ")
            + "The model TFLOP/s column is not judged.",
            [("cluster", H100), ("workload", f"../nemo_h100/workloads/{workload}.yaml"),
             ("set", listed(nemo_sets(r))), ("engine", "analytic"), ("metric", "tokens_per_s"),
             ("measured", f"{job}"), ("tolerance", "0.10")])


# --- NeMo AutoModel (FSDP2) on DGX H100 -----------------------------------------------------------
AUTO_TABLE = "automodel_h100_bf16_pretraining.csv"
AUTO_SOURCE = ("NVIDIA-NeMo/Automodel docs/performance-summary.mdx @ 36044ad3d139363fb6c73c24af2e7c6b65ec52f6, "
               "Pre-Training Performance, System: DGX-H100, Precision: BF16")
AUTO_MODEL = {"Llama3 70B": ("llama3-70b", "automodel-llama3-70b.yaml"),
              "Qwen3 MoE 30B": ("qwen3-30b-a3b", "automodel-moe.yaml"),
              "DeepSeek V3 671B": ("deepseek-v3", "automodel-deepseek-v3.yaml")}
AUTO_MOE = ("Force-balanced routing (the recipe's fake balanced gate). Not expressible: DeepEP / HybridEP's "
            "dispatch kernels (dlsim's all-to-all). ")
AUTO_NOTES = {
    "Llama3 70B": "Context parallelism 2 through SDPA (the recipe: attn_implementation sdpa, rms_norm torch_fp32; the "
                  "profile's exchange). ",
    "Qwen3 MoE 30B": AUTO_MOE,
    "DeepSeek V3 671B": AUTO_MOE + "VP is chunks a pipeline rank (4 x 8 chunks of about 2 of the 61 layers: the "
                        "256-GPU recipe's layers_per_stage 2; the 1024-GPU recipe at this commit says 4, the table VP "
                        "8, which is kept). "}


def auto_sets(r):
    gpus, gbs, mbs, pp, cp = (int(r[k]) for k in ("gpus", "gbs", "mbs", "pp", "cp"))
    dp = gpus // (pp * cp)
    sets = node_sets(gpus) + [
        f"parallel.pp={pp}", f"parallel.cp={cp}", f"parallel.dp={dp}", f"training.global_batch={gbs}",
        f"training.micro_batch={mbs}", f"model.seq_len={r['seq_len']}"]
    if r["ep"] != "-":
        sets.append(f"parallel.ep={r['ep']}")
    if r["vp"] != "-" and int(r["vp"]) > 1:
        # 61 layers in 4 x 8 chunks: the recipe's layers_per_stage (2) splits them unevenly
        sets += ["parallel.schedule=interleaved", f"parallel.virtual_stages={r['vp']}", "parallel.uneven_stages=true"]
    return sets


def auto_cases():
    for r in rows(AUTO_TABLE):
        if r["case"] != "yes":
            continue
        gpus = int(r["gpus"])
        model, workload = AUTO_MODEL[r["model"]]
        write_check(
            f"automodel-h100-{model}-{gpus}gpu",
            f"{AUTO_SOURCE} (validation/unseen7/{AUTO_TABLE}): {r['model']} on {gpus} H100, GBS {r['gbs']}, MBS "
            f"{r['mbs']}, LBS {r['lbs']}, GA {r['ga']}, sequence {r['seq_len']}, TP {r['tp']} PP {r['pp']} CP "
            f"{r['cp']} EP {r['ep']} VP {r['vp']} FSDP {r['fsdp']}, {r['kernels']}: {r['step_s']} s a global step, "
            f"{r['tokens_per_s_per_gpu']} tokens/s per GPU ({r['model_tflops_per_gpu']} model TFLOP/s per GPU)",
            f"Stated: the layout, BF16, the kernels column. From the recipe (workload {workload}, which says what is "
            "assumed): FSDP2 as the torchtitan profile, full activation checkpointing, torch.compile. "
            + AUTO_NOTES[r["model"]] + "Measured: GBS x sequence / the step time (the table's tokens/s per GPU x GPUs "
            "agrees).",
            [("cluster", H100), ("workload", f"../unseen7/workloads/{workload}"),
             ("set", listed(auto_sets(r))), ("engine", "analytic"), ("metric", "tokens_per_s"),
             ("measured", f"{round(int(r['gbs']) * int(r['seq_len']) / float(r['step_s']))}"),
             ("tolerance", "0.10")])


# --- XTuner (DeepSpeed ZeRO-3) on A100 ----------------------------------------------------------------
XT_README = ("InternLM/xtuner xtuner/configs/llama/llama3_8b/README.md @ 1cc5ef98cd7f052053b97581970fa7377df355bc, "
             "Full Parameter Fine-tune / Speed")
XT_BENCH = ("InternLM/xtuner docs/zh_cn/acceleration/benchmark.rst @ 4d2758ec5738910b130a9c7c62f2b14375f6d90b, "
            "speed benchmark")
XT_WORKLOAD = {"llama3-8b": "xtuner-deepspeed-zero3.yaml", "llama2-7b": "xtuner-deepspeed-zero3-llama2-7b.yaml",
               "llama2-70b": "xtuner-deepspeed-zero3-llama2-70b.yaml", "yi-34b": "xtuner-deepspeed-zero3-yi-34b.yaml"}


def xtuner_sets(gpus, seq, accum):
    return node_sets(gpus) + [
        f"parallel.dp={gpus}", f"training.global_batch={gpus * accum}", "training.micro_batch=1",
        f"model.seq_len={seq}"]


def xtuner_case(name, source, notes, model, gpus, seq, accum, tgs):
    write_check(
        name, source, notes,
        [("cluster", A100), ("workload", f"../unseen7/workloads/{XT_WORKLOAD[model]}"),
         ("set", listed(xtuner_sets(gpus, seq, accum))), ("engine", "analytic"),
         ("metric", "tokens_per_s"), ("measured", f"{round(tgs * gpus)}"), ("tolerance", "0.10")])


XT_COMMON = ("A100-80G nodes of 8 (the network of the 16- and 32-GPU rows is not stated: the dgx-a100 preset's). "
             "Assumed (workload xtuner-deepspeed-zero3.yaml): ZeRO-3, fp16, full activation checkpointing, "
             "flash-attn 2. Measured: tokens/s per GPU x GPUs.")


def case_rows(table):
    """The rows of a table marked as cases, with their GPU count and sequence length."""
    for r in rows(table):
        if r["case"] == "yes":
            yield r, int(r["gpus"]), int(r["seq_len"])


XT_README_NOTES = ("Config llama3_8b_instruct_full_alpaca_e3.py (@ bbcd94bb0b; the speed run's 8k variant, named by "
                   "the Chinese README, is not in the stored snapshot): batch 1 per GPU, 16 accumulation steps, packed "
                   "to the maximum length with use_varlen_attn False (full causal attention over the packed sequence). ")
XT_BENCH_NOTES = ("Config: batch 1 per GPU, 1 accumulation step, Alpaca en+zh packed to the length with use_varlen_attn "
                  "True: each sample attends only to itself, which dlsim cannot express (no key for packed-document "
                  "attention), so the case runs full causal attention over the whole length (more work than the run "
                  "did). ")
# table, its source, the notes of its configs, the accumulation steps, the rate column
XT_TABLES = [("xtuner_llama3_8b_a100_zero3.csv", XT_README, XT_README_NOTES, 16, "tokens_per_s_per_gpu"),
             ("xtuner_speed_benchmark_a100_zero3.csv", XT_BENCH, XT_BENCH_NOTES, 1, "tgs")]


def xtuner_cases():
    for table, source, notes, accum, rate in XT_TABLES:
        for r, gpus, seq in case_rows(table):
            config = f", config {r['config']}" if "config" in r else ""
            xtuner_case(
                f"xtuner-a100-{r['model']}-{seq // 1024}k-{gpus}gpu-zero3",
                f"{source} (validation/unseen7/{table}): {r['model']}, sequence {seq}, {gpus} GPUs, ZeRO-3, "
                f"sequence parallel 1{config}: {r[rate]} tokens/s per GPU ({r['tflops']} TFLOPs)",
                notes + XT_COMMON, r["model"], gpus, seq, accum, float(r[rate]))

# --- Qwen2.5 with vLLM 0.6.3 on A100, one request at a time ------------------------------------------
QWEN_TABLE = "qwen2.5_speed_benchmark_vllm_a100.csv"
QWEN_SOURCE = ("QwenLM/Qwen2.5 docs/source/benchmark/speed_benchmark.rst @ a912d23, Qwen2.5 Speed Benchmark, vLLM "
               "(NVIDIA A100 80GB, vLLM 0.6.3, BF16, batch size 1, 2048 generated tokens)")
# Qwen2.5 Instruct shapes from their Hugging Face config.json files (Qwen/Qwen2.5-{14B,32B,72B}-Instruct):
# 128-wide heads, 8 KV heads, vocabulary 152064, untied; the 7B is the qwen2.5-7b preset.
QWEN_SHAPE = {"Qwen2.5-7B-Instruct": ("qwen2.5-7b", []),
              "Qwen2.5-14B-Instruct": ("qwen2.5-14b", ["model.layers=48", "model.hidden=5120", "model.heads=40",
                                                      "model.kv_heads=8", "model.ffn_hidden=13824"]),
              "Qwen2.5-32B-Instruct": ("qwen2.5-32b", ["model.layers=64", "model.hidden=5120", "model.heads=40",
                                                      "model.kv_heads=8", "model.ffn_hidden=27648"]),
              "Qwen2.5-72B-Instruct": ("qwen2.5-72b", ["model.layers=80", "model.hidden=8192", "model.heads=64",
                                                      "model.kv_heads=8", "model.ffn_hidden=29568"])}


def qwen_cases():
    for r in rows(QWEN_TABLE):
        if r["case"] != "yes":
            continue
        short, shape = QWEN_SHAPE[r["model"]]
        gpus, prompt = int(r["gpus"]), int(r["input_len"])
        write_check(
            f"vllm-0.6.3-a100-{short}-tp{gpus}-in{prompt}-b1",
            f"{QWEN_SOURCE} (validation/unseen7/{QWEN_TABLE}): {r['model']}, input length {prompt}, BF16, {gpus} "
            f"GPU{'s' if gpus > 1 else ''}, default setting: {r['tokens_per_s']} tokens/s",
            "Stated: A100 80GB, vLLM 0.6.3, batch size 1, 2048 generated tokens, the input length, BF16, the GPU "
            "count (tensor parallel assumed: vLLM's way to use more GPUs for one model), gpu_memory_utilization 0.9, "
            "max_model_len 32768, CUDA graphs on. Assumed (workload vllm-0.6.3-a100-qwen2.5-batch1.yaml, which says "
            "why): V0's offline engine, no chunked prefill, no API-server time, no scheduler overlap. Measured: "
            "generated tokens / the request's time (the page's speed); dlsim's output tokens/s of the one request.",
            [("cluster", A100), ("workload", "../unseen7/workloads/vllm-0.6.3-a100-qwen2.5-batch1.yaml"),
             ("command", "serve"),
             ("set", listed(shape + node_sets(gpus) + [f"serving.tp={gpus}",
                                                      f"serving.requests.prompt_tokens={prompt}"])),
             ("metric", "output_tokens_per_s"), ("measured", r["tokens_per_s"]), ("tolerance", "0.15")])


if __name__ == "__main__":
    nemo_cases()
    auto_cases()
    xtuner_cases()
    qwen_cases()
