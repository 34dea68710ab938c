#!/usr/bin/env python3
"""Fits gpu.efficiency.gemm_stream and gemm_stream_overhead of the H100 (sim/hardware/compute.c:
a 16-bit GEMM that reading its weights bounds takes bytes / (HBM x gemm_stream) + overhead) on
Vidur's decode GEMM times, and reports fit and check errors. Python 3 standard library only; a
developer tool, not part of the build.

Data: vidur_h100_decode_gemm.csv (Vidur's per-operator profiles on one H100-SXM-80GB, fp16, 1-32
tokens, TP 1-8). Bytes as dlsim's serving model counts them: 2 x weights + 2 x tokens x (input +
output width). FIT: the five models with tensor parallelism (Llama-2-7B/70B, CodeLlama-34B,
InternLM-20B, Qwen-72B); CHECK: phi-2 (TP 1 only). Least squares on relative errors, closed form.

usage: validation/kernels/fit-gemm-stream.py   (prints the fit; values go in
       configs/calibration/h100.yaml)"""
import csv
import os
import statistics

HBM = 3.35e12  # H100 SXM5 datasheet
HERE = os.path.dirname(os.path.abspath(__file__))


def rows():
    with open(os.path.join(HERE, 'vidur_h100_decode_gemm.csv')) as f:
        for r in csv.DictReader(line for line in f if not line.startswith('#')):
            w, h, n = int(r['weights']), int(r['hidden']), int(r['tokens'])
            yield r['model'], 2 * w + 2 * n * (h + w / h), float(r['median_ms']) * 1e-3


def fit(points):
    """a, c minimising sum(((a x + c) - y) / y)^2."""
    sxx = sum((x / y) ** 2 for x, y in points)
    sx1 = sum(x / y / y for x, y in points)
    s11 = sum(1 / y / y for _, y in points)
    sxy = sum(x / y for x, y in points)
    s1y = sum(1 / y for _, y in points)
    det = sxx * s11 - sx1 * sx1
    return (sxy * s11 - sx1 * s1y) / det, (sxx * s1y - sx1 * sxy) / det


def report(label, points, model):
    errs = [(model(x) - y) / y for x, y in points]
    print('%-34s %4d GEMMs: median |error| %5.1f %%, mean %+5.1f %%' % (
        label, len(errs), 100 * statistics.median(abs(e) for e in errs), 100 * statistics.mean(errs)))


def main():
    data = list(rows())
    fitp = [(x, y) for m, x, y in data if m != 'phi-2']
    check = [(x, y) for m, x, y in data if m == 'phi-2']
    a, c = fit(fitp)
    print('gemm_stream: %.3f  gemm_stream_overhead: %.2fus' % (1 / (a * HBM), c * 1e6))
    report('fit (five models, TP 1-8)', fitp, lambda x: a * x + c)
    report('check (phi-2, TP 1)', check, lambda x: a * x + c)
    before = lambda x: x / (HBM * 0.80) + 5.759e-6  # memory 0.80, XLA-fitted launch_overhead
    report('before: memory 0.80 + 5.76 us, fit', fitp, before)
    report('before, check', check, before)


if __name__ == '__main__':
    main()
