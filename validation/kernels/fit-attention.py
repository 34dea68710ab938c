#!/usr/bin/env python3
"""Fits dlsim's fused-attention model (gpu.efficiency.attention) on the FlashAttention papers'
figures and reports fit and check errors. Python 3 standard library only; a developer tool,
not part of the build.

Data: flashattention_paper_figures_tflops.csv (bar labels of the FlashAttention-2 paper, arXiv
2307.08691 Figs. 4-7, A100 80GB SXM4 and H100 80GB SXM5, and the FlashAttention-3 paper, arXiv
2407.08608 Figs. 5-6, H100 80GB SXM5; TFLOP/s with FLOPs = 4 s^2 d heads batch, halved if
causal, x2.5 for backward; batch x seqlen = 16k tokens, hidden 2048).

Model (sim/hardware/compute.c, hw_attention_efficiency):
  rate = peak16 * frac[pass] * L / (L + half[pass]) * (d64 if head dim <= 64)
         * (causal / (1 + 128 / s) if causal),   L = s, or s / 2 if causal.
Fit: per GPU, implementation and pass, frac and half on the non-causal head-dim-128 curves;
d64 on the non-causal head-dim-64 ones; the causal factor on A100 FlashAttention-2's causal
head-dim-128 forward and backward curves. FlashAttention (v1) on H100 was measured only
forward+backward together: its A100 curves are scaled by one factor fitted on the H100
non-causal head-dim-128 fwd+bwd curve. The Triton kernel (FlashAttention in Triton, what MPT and
llm-foundry ran through 2023) was not measured on H100: like FlashAttention v1 it was written
for Ampere's tensor-core instructions, so it takes v1's A100-to-H100 factor (an assumption no
point here checks). Check: every other point (causal curves on H100,
head dims 64 with a causal mask and 256, and the fwd+bwd figures, which combine both passes).
usage: validation/kernels/fit-attention.py
"""
import csv
import math
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
PEAK = {'A100': 312.0, 'H100': 989.4}
IMPL = {'FlashAttention-2': 'fa2', 'FlashAttention-3': 'fa3', 'cuDNN': 'cudnn',
        'FlashAttention': 'fa1', 'FlashAttention-Triton': 'triton'}
IMPLS = ('fa2', 'fa3', 'cudnn', 'triton', 'fa1')
TILE = 128


def load():
    pts = []
    with open(os.path.join(HERE, 'flashattention_paper_figures_tflops.csv')) as f:
        for r in csv.DictReader(f):
            fig, sub = r['figure'], r['subplot']
            if r['implementation'] not in IMPL or r['tflops_per_s'] in ('OOM', ''):
                continue
            if 'FP8' in fig and 'Fig.6' not in fig:
                continue
            if 'Fig.6' in fig and 'FA3' in fig and 'Forward' in sub:
                continue  # the FP8 forward panels printed beside the backward ones
            if 'fwd+bwd' in fig:
                ps = 'both'
            elif 'Backward' in sub or 'Fig.6 backward' in fig:
                ps = 'bwd'
            else:
                ps = 'fwd'
            pts.append(dict(gpu='H100' if 'H100' in fig else 'A100', impl=IMPL[r['implementation']],
                            ps=ps, causal='ith causal' in sub,
                            hd=int(re.search(r'dim(?:ension)? (\d+)', sub).group(1)),
                            s=int(r['seqlen']), tf=float(r['tflops_per_s']),
                            src='FA3' if 'FA3' in fig else 'FA2'))
    return pts


def rate(p, par, causal):
    def one(ps):
        frac, half, d64 = par[(p['gpu'], p['impl'], ps)]
        rows = p['s'] / 2 if p['causal'] else p['s']
        r = PEAK[p['gpu']] * frac * rows / (rows + half)
        if p['hd'] <= 64:
            r *= d64
        if p['causal']:
            r *= causal / (1 + TILE / p['s'])
        return r
    if p['ps'] == 'both':
        return 3.5 / (1 / one('fwd') + 2.5 / one('bwd'))
    return one(p['ps'])


def fit_curve(sel, peak):
    best = None
    for frac in [x / 1000 for x in range(100, 1000, 2)]:
        for half in range(0, 1200, 10):
            err = sum(math.log(peak * frac * p['s'] / (p['s'] + half) / p['tf']) ** 2 for p in sel)
            if best is None or err < best[0]:
                best = (err, frac, half)
    return best[1], best[2]


def is_fit(p):
    if p['gpu'] == 'H100' and p['impl'] == 'fa1':
        return not p['causal'] and p['hd'] == 128
    nc128 = not p['causal'] and p['hd'] == 128 and p['ps'] != 'both'
    nc64 = not p['causal'] and p['hd'] == 64 and p['ps'] != 'both'
    a100_causal = p['gpu'] == 'A100' and p['causal'] and p['hd'] == 128 and p['ps'] != 'both'
    return nc128 or nc64 or a100_causal


def main():
    pts = load()
    # FlashAttention-2 on H100 appears in both papers; the FA3 paper's panels split the passes
    usable = [p for p in pts if not (p['gpu'] == 'H100' and p['impl'] == 'fa2' and p['src'] == 'FA2'
                                     and p['ps'] != 'both')]
    par = {}
    print('gpu   impl   pass  frac   half   d64')
    for gpu in PEAK:
        for impl in IMPLS:
            for ps in ('fwd', 'bwd'):
                key = lambda p, hd: (p['gpu'], p['impl'], p['ps'], p['causal'], p['hd']) == (gpu, impl, ps, False, hd)
                sel = [p for p in usable if key(p, 128)]
                if not sel:
                    continue
                frac, half = fit_curve(sel, PEAK[gpu])
                s64 = [p for p in usable if key(p, 64)]
                base = lambda p: PEAK[gpu] * frac * p['s'] / (p['s'] + half)
                d64 = math.exp(statistics.mean(math.log(p['tf'] / base(p)) for p in s64)) if s64 else 1
                par[(gpu, impl, ps)] = (frac, half, d64)
                print('%-5s %-6s %-4s %6.3f %5d %6.3f' % (gpu, impl, ps, frac, half, d64))
    # Ampere kernels on H100: FlashAttention v1's speed-up, fitted on its fwd+bwd curve
    v1 = [p for p in usable if (p['gpu'], p['impl'], p['ps'], p['causal'], p['hd']) == ('H100', 'fa1', 'both', False, 128)]
    best = None
    for k in [x / 1000 for x in range(1000, 2500, 5)]:
        for impl in ('fa1', 'triton'):
            for ps in ('fwd', 'bwd'):
                frac, half, d64 = par[('A100', impl, ps)]
                par[('H100', impl, ps)] = (frac * k * PEAK['A100'] / PEAK['H100'], half, d64)
        err = sum(math.log(rate(p, par, 1.0) / p['tf']) ** 2 for p in v1)
        if best is None or err < best[0]:
            best = (err, k)
    for impl in ('fa1', 'triton'):
        for ps in ('fwd', 'bwd'):
            frac, half, d64 = par[('A100', impl, ps)]
            par[('H100', impl, ps)] = (frac * best[1] * PEAK['A100'] / PEAK['H100'], half, d64)
            print('%-5s %-6s %-4s %6.3f %5d %6.3f  (A100 x %.3f TFLOP/s)' % ('H100', impl, ps, par[('H100', impl, ps)][0], half, d64, best[1]))
    # one head-dim factor per GPU and implementation (gpu.efficiency.attention.d64): the mean
    for gpu, impl, ps in list(par):
        frac, half, _ = par[(gpu, impl, ps)]
        both = [par[(gpu, impl, q)][2] for q in ('fwd', 'bwd')]
        par[(gpu, impl, ps)] = (frac, half, statistics.mean(both))
    print('d64 as configured (mean of the passes): ' + ', '.join(
        '%s %s %.3f' % (g, i, par[(g, i, 'fwd')][2]) for g, i, q in par if q == 'fwd'))
    causal_pts = [p for p in usable if p['gpu'] == 'A100' and p['causal'] and p['hd'] == 128 and p['ps'] != 'both']
    causal = min((sum(math.log(rate(p, par, c) / p['tf']) ** 2 for p in causal_pts), c)
                 for c in [x / 100 for x in range(70, 111)])[1]
    print('causal %.2f' % causal)
    print('\n%-34s %4s %14s %12s %8s' % ('points', 'n', 'median |err|', 'mean signed', 'worst'))

    def report(name, sel):
        e = [rate(p, par, causal) / p['tf'] - 1 for p in sel if (p['gpu'], p['impl'], 'fwd') in par]
        if e:
            print('%-34s %4d %13.1f%% %+11.1f%% %7.1f%%' % (name, len(e), 100 * statistics.median(map(abs, e)),
                                                        100 * statistics.mean(e), 100 * max(map(abs, e))))
    report('fit', [p for p in usable if is_fit(p)])
    report('check: all', [p for p in usable if not is_fit(p)])
    for gpu in PEAK:
        for impl in IMPLS:
            report('check: %s %s' % (gpu, impl), [p for p in usable if not is_fit(p) and (p['gpu'], p['impl']) == (gpu, impl)])
    report('check: causal (H100, and hd 64/256)', [p for p in usable if not is_fit(p) and p['causal']])
    report('check: fwd+bwd figures', [p for p in usable if p['ps'] == 'both'])
    report('check: head dim 256', [p for p in usable if p['hd'] == 256])


if __name__ == '__main__':
    main()
