#!/usr/bin/env python3
"""Fits serving.decode_attention_bandwidth and decode_attention_half (sim/serving/cost.c,
srv_decode_attention: a paged decode attention kernel takes launch + bytes / (HBM x rate), rate =
bandwidth x items / (items + half), items = sequences x KV heads, split in chunks of 256 keys up
to 4 x half when short) on decode_attention_h100.csv, and reports fit and check errors. Python 3
standard library only; a developer tool, not part of the build.

FIT: vLLM 0.19's own decode attention on H100 (LLMServingSim's table, GQA, head dim 256).
FIT-MHA: FlashAttention-3's paged decode with MHA (head dim 128, pages of 8 tokens), the
decode_attention_mha_* pair: its three rows share one item count (512), which fixes the rate
there but not bandwidth and half apart, so bandwidth is held at the H100's generic
efficiency.memory (0.80: what the kernel reaches with items to spare, as every other streaming
kernel) and half is fitted. Grid search on squared log errors.

usage: validation/kernels/fit-decode-attention.py   (prints the fit)"""
import csv
import math
import os
import statistics

HBM = 3.35e12        # H100 SXM5 datasheet
SMS = 132            # H100 SXM5
MEMORY = 0.80        # configs/calibration/h100.yaml, efficiency.memory
LAUNCH = 5.759e-6    # configs/calibration/h100.yaml, efficiency.launch_overhead
HERE = os.path.dirname(os.path.abspath(__file__))


def rows():
    with open(os.path.join(HERE, 'decode_attention_h100.csv')) as f:
        for r in csv.DictReader(line for line in f if not line.startswith('#')):
            n, keys, kv, d = (int(r[k]) for k in ('sequences', 'keys', 'kv_heads', 'head_dim'))
            yield {'role': r['role'], 'source': r['source'], 'n': n, 'keys': keys,
                   'items': n * kv, 'chunks': kv * max(n * keys / 256, n),
                   'bytes': n * keys * kv * d * 2 * 2, 't': float(r['time_us']) * 1e-6}


def predict(r, bandwidth, half, fa_splits=False):
    # fa_splits: FlashAttention's num_splits_heuristic (flash_api.cpp), no split once the items
    # fill 0.8 of the SMs (the MHA rows are FlashAttention-3's own kernel)
    if fa_splits and r['items'] >= 0.8 * SMS:
        items = r['items']
    else:
        items = max(r['items'], min(r['chunks'], 4 * half))
    return LAUNCH + r['bytes'] / (HBM * bandwidth * items / (items + half))


def loss(points, bandwidth, half, fa_splits=False):
    return sum(math.log(predict(r, bandwidth, half, fa_splits) / r['t']) ** 2 for r in points)


def main():
    data = list(rows())
    fit = [r for r in data if r['role'] == 'fit']
    _, bw, half = min((loss(fit, b / 1000, h), b / 1000, h)
                      for b in range(300, 1001, 5) for h in range(4, 401, 4))
    print(f'decode_attention_bandwidth {bw:.3f}, decode_attention_half {half}')
    mha = [r for r in data if r['role'] == 'fit-mha']
    _, mha_half = min((loss(mha, MEMORY, h, True), h) for h in range(4, 1001, 4))
    print(f'decode_attention_mha_bandwidth {MEMORY:.3f}, decode_attention_mha_half {mha_half}')
    figures = {'fit': (bw, half, False), 'fit-mha': (MEMORY, mha_half, True)}
    for role, (b, h, fa) in figures.items():
        errs = [predict(r, b, h, fa) / r['t'] - 1 for r in data if r['role'] == role]
        print(f'{role:7} {len(errs):3} rows: median |error| {statistics.median(map(abs, errs)):.1%}'
              f', mean {statistics.mean(errs):+.1%}')
    for r in mha:
        p = predict(r, MEMORY, mha_half, True)
        print(f"  fit-mha {r['source']} {r['n']} x {r['keys']} keys: {r['t'] * 1e6:.1f} us "
              f"measured, {p * 1e6:.1f} predicted ({p / r['t'] - 1:+.1%}); reached "
              f"{r['bytes'] / (r['t'] - LAUNCH) / HBM:.1%} of HBM; with the GQA fit "
              f"{predict(r, bw, half) / r['t'] - 1:+.1%}")


if __name__ == '__main__':
    main()
