#!/usr/bin/env python3
"""Interference between NCCL kernels and compute kernels in real PyTorch-profiler traces.

For every compute kernel that recurs with the same name, grid, block and input shapes (those of
the CPU op that launched it, where the trace recorded them: one "shape"), compare
its duration while an NCCL kernel of the same GPU runs (at least --min-overlap of the kernel's
time) with its duration while none does. A shape with at least --min-each kernels on both sides
gives one ratio (median overlapped / median alone); a kernel class's slowdown is the median of
its shapes' ratios weighted by the overlapped count, with the 10th and 90th percentiles of the
shapes' ratios (spread) and a 90 % bootstrap interval of that median (shapes resampled,
--resamples times, seed 1). NCCL kernels are compared the same way: covered by compute kernels
or not.

Kernels shorter than --min-dur microseconds are left out (the trace's rounding and launch noise).
Usage: measure.py [--min-each N] [--min-overlap F] [--min-dur US] [--csv] ROLE=TRACE.json.gz ...
ROLE is "fit" or "check": the table reports them apart.
Python 3 standard library only.
"""
import argparse
import gzip
import json
import random
import re
import statistics
import sys
from collections import defaultdict

# Order matters: the first rule that matches names the class (as sim/trace/classify.c does).
CLASSES = [
    ("nccl", r"nccl"),
    ("attention", r"flash|fmha|attention"),
    ("conv", r"conv|implicit_gemm|scudnn|winograd|fprop|dgrad|wgrad|fft2d"),
    ("embedding", r"embedding|fbgemm_gpu::"),
    ("optimizer", r"multi_tensor_apply|adam|adagrad|sgd|lamb"),
    ("gemm", r"gemm|gemv|cutlass|cublas|nvjet|s1688|h16816|s884|h884|splitkreduce"),
    ("memory", r"elementwise|reduce|norm|softmax|sort|scan|copy|fill|gather|scatter|index|cat|"
               r"relu|gelu|silu|sigmoid|tanh|dropout|bn_|batch_norm|pool|transpose|vectorized"),
]


def kernel_class(name):
    low = name.lower()
    for cls, pattern in CLASSES:
        if re.search(pattern, low):
            return cls
    return "other"


def load_kernels(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    # the CPU op that launched a kernel (same External id) gives its tensors' shapes where the
    # profiler recorded them: a GEMM's grid alone does not fix its K
    dims = {e["args"]["External id"]: json.dumps(e["args"].get("Input Dims"))
            for e in events if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    per_gpu = defaultdict(list)
    for e in events:
        if e.get("cat") != "kernel" or e.get("ph") != "X" or not e.get("dur"):
            continue
        args = e.get("args", {})
        gpu = args.get("device", e.get("pid"))
        shape = (e["name"], tuple(args.get("grid", ())), tuple(args.get("block", ())),
                 dims.get(args.get("External id")))
        per_gpu[gpu].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), shape,
                             kernel_class(e["name"]), args.get("stream")))
    return per_gpu


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def covered(start, end, merged, starts):
    """Time of [start, end] that the merged intervals cover (starts: their start times)."""
    import bisect
    i = max(0, bisect.bisect_right(starts, start) - 1)
    total = 0.0
    while i < len(merged) and merged[i][0] < end:
        total += max(0.0, min(end, merged[i][1]) - max(start, merged[i][0]))
        i += 1
    return total


def split_by_overlap(kernels, others, min_overlap, min_dur):
    """Per shape: durations of kernels that `others` cover >= min_overlap, and of those they
    do not touch; plus each kernel's class."""
    merged = union([(s, e) for s, e, *_ in others])
    starts = [m[0] for m in merged]
    beside, alone, cls_of = defaultdict(list), defaultdict(list), {}
    for s, e, shape, cls, _ in kernels:
        if e - s < min_dur:
            continue  # a few microseconds: the trace's 1 us rounding and launch noise dominate
        f = covered(s, e, merged, starts) / (e - s)
        cls_of[shape] = cls
        if f >= min_overlap:
            beside[shape].append(e - s)
        elif f == 0:
            alone[shape].append(e - s)
    return beside, alone, cls_of


def ratios(traces, min_each, min_overlap, min_dur, nccl_side):
    """(class, ratio, overlapped count, alone count, trace) per shape with enough of both."""
    rows = []
    for name, per_gpu in traces:
        for kernels in per_gpu.values():
            nccl = [k for k in kernels if k[3] == "nccl"]
            comp = [k for k in kernels if k[3] != "nccl"]
            if not nccl:
                continue
            subject, others = (nccl, comp) if nccl_side else (comp, nccl)
            beside, alone, cls_of = split_by_overlap(subject, others, min_overlap, min_dur)
            for shape, b in beside.items():
                a = alone.get(shape, [])
                if len(b) >= min_each and len(a) >= min_each:
                    r = statistics.median(b) / statistics.median(a)
                    rows.append((cls_of[shape], r, len(b), len(a), name))
    return rows


def weighted_median(pairs):
    pairs = sorted(pairs)
    half, acc = sum(w for _, w in pairs) / 2, 0
    for v, w in pairs:
        acc += w
        if acc >= half:
            return v
    return float("nan")


def quantile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


def bootstrap(xs, resamples, seed=1):
    """90 % interval of the class's weighted median, resampling its shapes (fixed seed)."""
    rng = random.Random(seed)
    meds = sorted(weighted_median([(r, nb) for r, nb, _ in rng.choices(xs, k=len(xs))])
                  for _ in range(resamples))
    return quantile(meds, 0.05), quantile(meds, 0.95)


def summarise(rows, resamples):
    by = defaultdict(list)
    for cls, r, nb, na, _ in rows:
        by[cls].append((r, nb, na))
    out = []
    for cls in sorted(by):
        xs = by[cls]
        rs = [r for r, _, _ in xs]
        out.append((cls, len(xs), sum(nb for _, nb, _ in xs), sum(na for _, _, na in xs),
                    weighted_median([(r, nb) for r, nb, _ in xs]), quantile(rs, 0.1),
                    quantile(rs, 0.9)) + bootstrap(xs, resamples))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-each", type=int, default=3)
    ap.add_argument("--min-overlap", type=float, default=0.5)
    ap.add_argument("--min-dur", type=float, default=30.0, help="microseconds")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument("--csv", action="store_true")
    ap.add_argument("traces", nargs="+", metavar="ROLE=TRACE")
    a = ap.parse_args()
    loaded = defaultdict(list)
    for spec in a.traces:
        role, _, path = spec.partition("=")
        if role not in ("fit", "check") or not path:
            sys.exit(f"measure.py: {spec}: expected fit=TRACE or check=TRACE")
        loaded[role].append((path.rsplit("/", 1)[-1].split(".json")[0], load_kernels(path)))
    sep = "," if a.csv else " | "
    head = ["role", "subject", "class", "shapes", "beside_n", "alone_n", "slowdown", "p10", "p90",
            "ci90_low", "ci90_high"]
    print(sep.join(head) if a.csv else "| " + sep.join(head) + " |")
    if not a.csv:
        print("|" + "---|" * len(head))
    for role in ("fit", "check"):
        for nccl_side, subject in ((False, "compute"), (True, "nccl")):
            for cls, n, nb, na, med, lo, hi, clo, chi in summarise(
                    ratios(loaded[role], a.min_each, a.min_overlap, a.min_dur, nccl_side),
                    a.resamples):
                cells = [role, subject, cls, str(n), str(nb), str(na), f"{med:.3f}", f"{lo:.3f}",
                         f"{hi:.3f}", f"{clo:.3f}", f"{chi:.3f}"]
                print(sep.join(cells) if a.csv else "| " + sep.join(cells) + " |")


if __name__ == "__main__":
    main()
