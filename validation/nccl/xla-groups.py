#!/usr/bin/env python3
"""What XLA's sm_90 collective table says about its groups of 2 and 4 (check data, nothing
fitted): the measured numbers behind "XLA's groups: what the tables rule out" in
validation/README.md. Reads only the two measured tables of this directory.

1. Large sizes (>= 256 MiB): bus bandwidth per op and group size, and reduce-scatter's time over
   all-gather's (the same bytes on the same links, one reduction apart).
2. The reduce-scatter's extra time over the all-gather per byte of one ring chunk (S/n): if it is
   one pass over a chunk that the ring does not hide, it is about the same rate at every n.
3. XLA's all-reduce against Vidur's (torch.distributed, one group alone on the node, same NCCL
   ring) at the sizes both measured: the gap is XLA's, not NCCL's ring on 2, 4 or 8 GPUs.

usage: validation/nccl/xla-groups.py
"""
import csv
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
XLA = os.path.join(HERE, "xla_collective_perf_table_sm90_8gpu.csv")
VIDUR = os.path.join(HERE, "vidur_network__h100_dgx__all_reduce.csv")
LARGE = 256 << 20


def busbw_factor(op, n):
    return {"all-reduce": 2.0 * (n - 1) / n, "all-to-all": (n - 1.0) / n}.get(op, (n - 1.0) / n)


def load_xla():
    t = {}
    with open(XLA) as f:
        for r in csv.DictReader(f):
            key = (r["collective"], int(r["devices_per_group"]))
            t.setdefault(key, {})[int(r["tensor_size_bytes"])] = float(r["time_ns_derived"]) / 1e3
    return t


def load_vidur():
    t = {}
    with open(VIDUR) as f:
        for r in csv.DictReader(f):
            t.setdefault(int(r["num_workers"]), {})[int(r["size"])] = \
                float(r["time_stats.all_reduce.median"]) * 1e3
    return t


def large_busbw(xla):
    print("1. bus bandwidth at >= 256 MiB (GB/s, median over sizes), RS time / AG time")
    print(f"   {'n':>2} {'all-gather':>11} {'reduce-scat':>11} {'all-reduce':>11} {'all-to-all':>11}"
          f" {'RS/AG':>6}")
    for n in (2, 4, 8):
        bw = {}
        for op in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all"):
            rows = xla[(op, n)]
            bw[op] = statistics.median(s / rows[s] / 1e3 * busbw_factor(op, n)
                                       for s in rows if s >= LARGE)
        ag, rs = xla[("all-gather", n)], xla[("reduce-scatter", n)]
        ratio = statistics.median(rs[s] / ag[s] for s in ag if s >= LARGE and s in rs)
        print(f"   {n:2d} {bw['all-gather']:11.0f} {bw['reduce-scatter']:11.0f}"
              f" {bw['all-reduce']:11.0f} {bw['all-to-all']:11.0f} {ratio:6.2f}")


def reduction_extra(xla):
    print("2. reduce-scatter minus all-gather, per byte of one chunk S/n (GB/s of S/n), >= 256 MiB")
    for n in (2, 4, 8):
        ag, rs = xla[("all-gather", n)], xla[("reduce-scatter", n)]
        rates = [s / n / (rs[s] - ag[s]) / 1e3 for s in ag if s >= LARGE and s in rs]
        print(f"   n={n}: {statistics.median(rates):5.0f} GB/s (sizes: "
              + ", ".join(f"{r:.0f}" for r in rates) + ")")


def against_vidur(xla, vidur):
    print("3. all-reduce, XLA (concurrent groups) minus Vidur (one group), us, 1-64 MiB")
    for n in (2, 4, 8):
        x, v = xla[("all-reduce", n)], vidur.get(n, {})
        both = sorted(s for s in x if s in v and s >= (1 << 20))
        print(f"   n={n}: " + ", ".join(f"{s >> 20} MiB {x[s] - v[s]:+.0f}" for s in both))


def main():
    xla, vidur = load_xla(), load_vidur()
    large_busbw(xla)
    reduction_extra(xla)
    against_vidur(xla, vidur)


if __name__ == "__main__":
    main()
