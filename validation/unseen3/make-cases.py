#!/usr/bin/env python3
"""Writes validation/cases/ for the third batch of unseen runs, one case per row of the
tables in this folder (checking data only: nothing in dlsim is fitted on them)."""
import csv
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "cases")


def rows(name):
    with open(os.path.join(HERE, name)) as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def write_case(name, fields):
    with open(os.path.join(CASES, name + ".yaml"), "w") as f:
        for key, value in fields:
            f.write(f"{key}: {value}\n")


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


def node_sets(gpus):
    """A job of fewer GPUs than a DGX node runs on one node of that many."""
    return [f"node.count={gpus // 8}"] if gpus >= 8 else ["node.count=1", f"node.gpus_per_node={gpus}"]


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


if __name__ == "__main__":
    narayanan_cases()
    nemo_long_cases()
