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


if __name__ == "__main__":
    narayanan_cases()
