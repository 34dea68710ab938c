#!/usr/bin/env python3
"""How many of the fourth unseen batch's cases land inside the 80 % interval that `dlsim run` /
`dlsim serve` print for them (their JSON `intervals`), by kind and by source, with the signed
errors. Run from the repository root after a build (python3 standard library only):

    python3 validation/unseen4/coverage.py [--dlsim BINARY] [--verbose] [BATCH]

It reruns each case as a user would (the case's cluster, workload, --set list and engine) rather
than reading `dlsim validate`, so it checks the band the report prints with today's
validation/intervals.tsv. Cases are those whose source names validation/BATCH/ (unseen4 by
default; e.g. unseen3 for the third batch, unseen5 for the fifth). A collective table (nccl-tests
output) is judged as `dlsim validate` judges it, on its median busbw error, with no band."""
import argparse
import csv
import glob
import io
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.normpath(os.path.join(HERE, "..", "cases"))
UNIT = {"ms": 1e-3, "us": 1e-6, "s": 1.0, "GiB": 2.0 ** 30, "GB": 1e9}
RATES = {"tokens_per_s", "samples_per_s", "model_tflops_per_gpu", "mfu", "output_tokens_per_s"}


def read_case(path):
    """The flat `key: value` case files make-cases.py writes (a list is `[a, b, ...]`)."""
    case = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(": ")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = [v.strip() for v in value[1:-1].split(",") if v.strip()]
            elif value.startswith('"') and value.endswith('"'):
                value = value[1:-1]
            case[key] = value
    return case


def command(dlsim, case):
    cmd = [dlsim, case.get("command", "run"), "--json",
           "-c", os.path.join(CASES, case["cluster"]), "-w", os.path.join(CASES, case["workload"])]
    for s in case.get("set", []):
        cmd += ["--set", s]
    if case.get("engine") and case.get("command", "run") == "run":
        cmd += ["-e", case["engine"]]
    return cmd


def band(out, metric):
    """The interval the report printed for this metric, and the kind of run it came from; a rate
    the run report brackets only as tokens/s scales that band (the same ratio)."""
    iv = out.get("intervals")
    if not iv:
        return None, None, "none"
    if "kind" in iv:  # dlsim run
        key = metric if metric in iv else "tokens_per_s"
        lo, hi = iv[key]
        if key != metric:
            scale = lookup(out, metric) / lookup(out, key)
            lo, hi = lo * scale, hi * scale
        return lo, hi, iv["kind"]
    if metric not in iv:
        return None, None, "none"
    kind = {"ttft_s.mean": "serve.ttft", "tbt_s.mean": "serve.tbt"}.get(metric, "serve.throughput")
    lo, hi = iv[metric]
    return lo, hi, kind


def lookup(out, metric):
    value = out
    for part in metric.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return float(value)


def evaluate_table(dlsim, case):
    """A collective table (nccl-tests output): judged as `dlsim validate` judges it, on the median
    busbw error of its rows; no kind of run prints a band for it."""
    res = subprocess.run([dlsim, "validate", "--csv", case["name"]], capture_output=True, text=True)
    found = [r for r in csv.DictReader(io.StringIO(res.stdout)) if r["name"] == case["name"]]
    if not found:
        return {"name": case["name"], "failure": res.stderr.strip().splitlines()[-1:]}
    optimism = float(found[0]["optimism"])
    return {"name": case["name"], "source": case["source"].split(" @ ")[0].split(",")[0].split(" (")[0],
            "kind": "collectives", "measured": float("nan"), "predicted": float("nan"),
            "error": optimism, "optimism": optimism, "band": (None, None), "inside": None}


def evaluate(dlsim, path):
    case = read_case(path)
    if "table" in case:
        return evaluate_table(dlsim, case)
    res = subprocess.run(command(dlsim, case), capture_output=True, text=True)
    if res.returncode != 0:
        return {"name": case["name"], "failure": res.stderr.strip().splitlines()[-1:]}
    out = json.loads(res.stdout)
    metric = case["metric"]
    measured = float(case["measured"]) * UNIT.get(case.get("unit", "s"), 1.0)
    predicted = lookup(out, metric)
    lo, hi, kind = band(out, metric)
    optimism = (predicted / measured - 1) if metric in RATES else (measured / predicted - 1)
    return {"name": case["name"], "source": case["source"].split(" @ ")[0].split(",")[0],
            "kind": kind, "measured": measured, "predicted": predicted,
            "error": predicted / measured - 1, "optimism": optimism, "band": (lo, hi),
            "inside": None if lo is None else lo <= measured <= hi}


def summarise(results, key):
    groups = {}
    for r in results:
        groups.setdefault(r[key], []).append(r)
    for name, rs in sorted(groups.items()):
        banded = [r for r in rs if r["inside"] is not None]
        inside = sum(r["inside"] for r in banded)
        opt = sum(r["optimism"] for r in rs) / len(rs)
        errors = sorted(abs(r["error"]) for r in rs)
        median = (errors[(len(errors) - 1) // 2] + errors[len(errors) // 2]) / 2
        share = f"{100 * inside / len(banded):3.0f} %" if banded else "  -  "
        print(f"  {name[:46]:46s} {len(rs):4d} cases  {inside:3d} of {len(banded):3d} in the band "
              f"({share})  median |error| {100 * median:5.1f} %  mean optimism {100 * opt:+6.1f} %")


def default_dlsim():
    root = os.path.dirname(os.path.dirname(HERE))
    for build in ("release", "dev"):
        path = os.path.join(root, "build", build, "dlsim")
        if os.access(path, os.X_OK):
            return path
    return "dlsim"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dlsim", default=default_dlsim(),
                    help="the binary (default: build/release/dlsim, else build/dev/dlsim)")
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("batch", nargs="?", default="unseen4")
    args = ap.parse_args()
    paths = [p for p in sorted(glob.glob(os.path.join(CASES, "*.yaml")))
             if f"validation/{args.batch}/" in read_case(p).get("source", "")]
    results, failed = [], []
    for p in paths:
        r = evaluate(args.dlsim, p)
        (failed if "failure" in r else results).append(r)
    if args.verbose:
        for r in results:
            lo, hi = r["band"]
            where = "-" if lo is None else ("in" if r["inside"] else ("BELOW" if r["measured"] < lo else "ABOVE"))
            print(f"{r['name'][:70]:70s} {r['kind']:16s} measured {r['measured']:.4g} predicted "
                  f"{r['predicted']:.4g} error {100 * r['error']:+6.1f} % band "
                  f"{'-' if lo is None else f'{lo:.4g}-{hi:.4g}'} {where}")
    banded = [r for r in results if r["inside"] is not None]
    inside = sum(r["inside"] for r in banded)
    print(f"validation/{args.batch}: {len(results)} cases, {inside} of {len(banded)} inside the printed "
          f"80 % band ({100 * inside / max(len(banded), 1):.0f} %)")
    for r in results:
        r["command"] = ("serve" if r["kind"].startswith("serve") else "coll" if r["kind"] == "collectives"
                        else "run" if r["kind"] != "none" else "no band")
    print("by command:")
    summarise(results, "command")
    print("by kind:")
    summarise(results, "kind")
    print("by source:")
    summarise(results, "source")
    for r in failed:
        print(f"FAILED {r['name']}: {' '.join(r['failure'])}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
