#!/usr/bin/env python3
"""How the 80 % bands of validation/intervals.tsv hold cases of sources they were not fitted on.
Run from the repository root after a build (python3 standard library only):

    python3 validation/intervals-cv.py [--json FILE] [--dlsim BINARY]

It reads every case's error from `dlsim validate --json` (or a saved copy of it) and rebuilds
the bands as sim/uncertainty does: per kind, the conformal band of the check cases' ratios
(predicted / measured time; a rate's measured / predicted), widened both ways by exp(offset),
the offset being a quantile of how far each source's median log ratio lies from its kind's
median of them (kinds with two sources or more, pooled). A source is the first word of a
case's `source` (a repository's owner/name, a paper's first author). It prints:

1. leave-one-source-out coverage on the validation cases without the unseen batches (the
   data the offset's level was chosen on), per level, counted per case and per source;
2. each unseen batch predicted with bands fitted without it and the batches after it (its
   own errors never shape its band): the old band (no offset) and today's level;
3. the bands fitted on every case, old and new, with their widths.
"""
import argparse
import collections
import json
import math
import os
import re
import subprocess

TIMES = {"step_time_s", "ttft_s.mean", "tbt_s.mean"}
LEVEL = 0.7  # UNC_SOURCE_OFFSET_LEVEL in sim/uncertainty/uncertainty.h
LEVELS = (None, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9)
BATCHES = ("unseen3", "unseen4")


def source_key(text):
    return re.split(r"[\s,(]", text.strip(), maxsplit=1)[0]


def residuals(cases):
    out = []
    for c in cases:
        kind = c.get("interval_kind")
        if not kind:
            continue
        ratio = c["predicted"] / c["measured"] if c["metric"] in TIMES else c["measured"] / c["predicted"]
        batch = re.search(r"validation/(unseen\d+)/", c["source"])
        out.append({"kind": kind, "source": source_key(c["source"]), "ratio": ratio,
                    "batch": batch.group(1) if batch else ""})
    return out


def conformal(ratios):
    v = sorted(ratios)
    n = len(v)
    klo, khi = max((n + 1) // 10, 1), min((9 * (n + 1) + 9) // 10, n)
    return v[klo - 1], v[khi - 1]


def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def quantile(v, p):
    v = sorted(v)
    at = p * (len(v) - 1)
    i = int(math.floor(at))
    return v[i] + (v[i + 1] - v[i]) * (at - i) if i + 1 < len(v) else v[-1]


def offset(res, level):
    if level is None:
        return 0.0
    offsets = []
    for kind in {r["kind"] for r in res}:
        by = collections.defaultdict(list)
        for r in res:
            if r["kind"] == kind:
                by[r["source"]].append(math.log(r["ratio"]))
        if len(by) >= 2:
            medians = [median(v) for v in by.values()]
            center = median(medians)
            offsets += [abs(m - center) for m in medians]
    return quantile(offsets, level) if offsets else 0.0


def band(res, kind, level):
    ratios = [r["ratio"] for r in res if r["kind"] == kind]
    if len(ratios) < 5:
        return None
    lo, hi = conformal(ratios)
    w = math.exp(offset(res, level))
    return lo / w, hi * w


def leave_one_source_out(res, level):
    held = tried = 0
    per_source = []
    for kind in sorted({r["kind"] for r in res}):
        for src in sorted({r["source"] for r in res if r["kind"] == kind}):
            b = band([r for r in res if r["source"] != src], kind, level)
            test = [r for r in res if r["kind"] == kind and r["source"] == src]
            if not b:
                continue
            h = sum(b[0] <= r["ratio"] <= b[1] for r in test)
            held, tried = held + h, tried + len(test)
            per_source.append(h / len(test))
    return held, tried, sum(per_source) / len(per_source)


def batch_coverage(res, batch, level):
    later = BATCHES[BATCHES.index(batch):]
    fit = [r for r in res if r["batch"] not in later]
    by = collections.Counter()
    for kind in sorted({r["kind"] for r in res}):
        b = band(fit, kind, level)
        for r in res:
            if r["kind"] == kind and r["batch"] == batch and b:
                by[kind, "in"] += b[0] <= r["ratio"] <= b[1]
                by[kind, "all"] += 1
    return by


def name(level):
    return "no offset (before)" if level is None else f"offset at {level:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="a saved `dlsim validate --json` (default: run it)")
    ap.add_argument("--dlsim", default=os.path.join("build", "release", "dlsim"))
    args = ap.parse_args()
    if args.json:
        with open(args.json) as f:
            data = json.load(f)
    else:
        out = subprocess.run([args.dlsim, "validate", "--json"], capture_output=True, text=True)
        data = json.loads(out.stdout)
    res = residuals(data["cases"])
    unseen_out = [r for r in res if r["batch"] not in BATCHES]
    print(f"1. leave-one-source-out, validation cases without {' / '.join(BATCHES)} "
          f"({len(unseen_out)} errors, {len({(r['kind'], r['source']) for r in unseen_out})} kind-sources)")
    for level in LEVELS:
        held, tried, per_source = leave_one_source_out(unseen_out, level)
        print(f"   {name(level):20s} offset {offset(unseen_out, level):.3f}: {held} of {tried} cases "
              f"({100 * held / tried:.1f} %), per source {100 * per_source:.1f} %")
    print("2. unseen batches, bands fitted without the batch and those after it")
    for batch in BATCHES:
        for level in (None, LEVEL):
            by = batch_coverage(res, batch, level)
            inside, total = sum(v for (k, w), v in by.items() if w == "in"), sum(v for (k, w), v in by.items() if w == "all")
            kinds = ", ".join(f"{k} {by[k, 'in']}/{by[k, 'all']}" for k in sorted({k for k, _ in by}))
            print(f"   {batch} {name(level):20s} {inside} of {total} ({100 * inside / total:.1f} %): {kinds}")
    print("3. bands on every case (low - high, width high - low)")
    for kind in sorted({r["kind"] for r in res}):
        cells = []
        for level in (None, LEVEL):
            lo, hi = band(res, kind, level)
            cells.append(f"{lo:.3f} - {hi:.3f} ({hi - lo:.3f})")
        print(f"   {kind:17s} before {cells[0]}   now {cells[1]}")


if __name__ == "__main__":
    main()
