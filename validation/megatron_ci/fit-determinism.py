#!/usr/bin/env python3
"""Fits what Megatron-LM's --deterministic-mode costs (training.deterministic) on the CI rows,
then refits the host time that the deterministic rows had carried. Python 3 standard library;
run it from the repository root with a built dlsim:
  python3 validation/megatron_ci/fit-determinism.py [--dlsim build/dev/dlsim] [--loo]

1. gpu.efficiency.attention.deterministic_bwd (time a fused attention backward call takes on
   top of its model when deterministic) of H100: fitted on measured vs measured pairs, the
   H100 TP 2 x PP 2 rows with Transformer Engine that differ in the mode (PAIRS below, all
   three; every deterministic one is a resume test, so its twin is the resume test or the
   test nearest it): bisection until the mean predicted deterministic / non-deterministic
   step ratio of the pairs equals the mean measured one. The ratio cancels most of the host
   time per kernel, which the step of a host-bound row is mostly made of.
2. training.host_dispatch: the same one-parameter sweep (120-220 us, 5 us steps) on the same
   five H100 TP 1, PP 1 fit rows as before (validation/README.md), to the mean signed error
   (predicted / measured - 1) nearest 0, now with the mode modelled; then 1 again, until
   neither moves.
3. node.cpu.dispatch_scale of gb200-nvl72: the same sweep as before (in steps of 0.05, now
   1.0-2.0: the 1.0-1.2 of the first fit is too narrow once the host time has lost the H100
   deterministic cost) on the five GB200 TP 1, PP 1 rows.
--loo: leave one pair out: fit 1 on the others (host time as fitted), predict the pair left
out, and print its predicted and measured ratio. --det-bwd MS holds 1 at MS (0: only the
sourced fills of the mode) and refits 2 and 3 alone."""
import argparse
import json
import os
import re
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(os.path.dirname(HERE), 'cases')
DET_BWD = 'gpu.efficiency.attention.deterministic_bwd'

# (deterministic row, non-deterministic row), H100, TP 2 x PP 2, TE fused attention
PAIRS = [
    ('mci-h100-gpt3-mcore-te-tp2-pp2-resume-torch-dist',
     'mci-h100-gpt3-mcore-te-tp2-pp2-resume-torch-dist-reshard-1x4xNone'),
    ('mci-h100-gpt3-mcore-te-tp2-pp2-resume-torch-dist-ddp-average-in-collective',
     'mci-h100-gpt3-mcore-te-tp2-pp2-resume-torch-dist-cross-entropy-loss-fusion'),
    ('mci-h100-gpt3-mcore-te-tp2-pp2-resume-torch-dist-no-create-attention-mask-in-dataloader',
     'mci-h100-gpt3-mcore-te-tp2-pp2-cross-entropy-loss-fusion'),
]


def load_case(name):
    with open(os.path.join(CASES, name + '.yaml')) as f:
        text = f.read()
    get = lambda key: re.search(r'^%s: (.*)$' % key, text, re.M).group(1).strip()
    return {'name': name, 'cluster': os.path.join(CASES, get('cluster')),
            'workload': os.path.join(CASES, get('workload')),
            'set': [s.strip() for s in get('set').strip('[]').split(',')],
            'measured': float(get('measured'))}


def fit_rows(platform):
    rows = []
    for f in sorted(os.listdir(CASES)):
        if f.startswith('mci-%s-' % platform) and f.endswith('.yaml'):
            with open(os.path.join(CASES, f)) as fh:
                text = fh.read()
            # the host time's fit rows, not the pairs (role fit too)
            if re.search(r'^role: fit$', text, re.M) and 'parallel.tp=1, parallel.pp=1,' in text:
                rows.append(load_case(f[:-5]))
    return rows


class Model:
    def __init__(self, dlsim):
        self.dlsim, self.cache = dlsim, {}

    def step(self, case, params):
        key = (case['name'], tuple(sorted(params.items())))
        if key not in self.cache:
            cmd = [self.dlsim, 'run', '-q', '--json', '-e', 'analytic', '-c', case['cluster'],
                   '-w', case['workload']]
            for s in case['set'] + ['%s=%s' % kv for kv in sorted(params.items())]:
                cmd += ['--set', s]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            self.cache[key] = json.loads(out)['step_time_s']
        return self.cache[key]

    def ratio(self, pair, params):
        det, nondet = pair
        return self.step(det, params) / self.step(nondet, params)

    def mean_signed(self, rows, params):
        return statistics.mean(self.step(r, params) / r['measured'] - 1 for r in rows)


def fit_det_bwd(model, pairs, params):
    """Bisection (the predicted ratio grows with the per-call time) to the mean measured ratio."""
    target = statistics.mean(d['measured'] / n['measured'] for d, n in pairs)
    pred = lambda c: statistics.mean(model.ratio(p, dict(params, **{DET_BWD: '%.6fms' % c}))
                                     for p in pairs)
    lo, hi = 0.0, 20.0  # ms
    if pred(lo) >= target:
        return 0.0, target
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pred(mid) < target else (lo, mid)
    return round((lo + hi) / 2, 3), target


def sweep(model, rows, key, values, params, unit=''):
    best = min(values, key=lambda v: abs(model.mean_signed(rows, dict(params, **{key: '%g%s' % (v, unit)}))))
    return best, model.mean_signed(rows, dict(params, **{key: '%g%s' % (best, unit)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dlsim', default='build/dev/dlsim')
    ap.add_argument('--loo', action='store_true')
    ap.add_argument('--det-bwd', type=float, default=None, metavar='MS',
                    help='hold deterministic_bwd at MS instead of fitting it (only 2 and 3 run)')
    a = ap.parse_args()
    model = Model(a.dlsim)
    pairs = [(load_case(d), load_case(n)) for d, n in PAIRS]
    h100, gb200 = fit_rows('h100'), fit_rows('gb200')
    hd, c = 190.0, 0.0
    for it in range(6):
        if a.det_bwd is None:
            c, target = fit_det_bwd(model, pairs, {'training.host_dispatch': '%gus' % hd})
        else:
            c, target = a.det_bwd, statistics.mean(d['measured'] / n['measured'] for d, n in pairs)
        new_hd, err = sweep(model, h100, 'training.host_dispatch', [80 + 5 * i for i in range(29)],
                            {DET_BWD: '%gms' % c}, 'us')
        print('round %d: deterministic_bwd %.3f ms (pairs: measured ratio %.3f), host_dispatch '
              '%g us (H100 fit rows mean signed %+.1f %%)' % (it + 1, c, target, new_hd, 100 * err))
        if new_hd == hd:
            break
        hd = new_hd
    params = {'training.host_dispatch': '%gus' % hd, DET_BWD: '%gms' % c}
    for d, n in pairs:
        print('  pair %-90s measured %.3f predicted %.3f' % (
            d['name'][len('mci-h100-gpt3-mcore-te-tp2-pp2-'):], d['measured'] / n['measured'],
            model.ratio((d, n), params)))
    scale, err = sweep(model, gb200, 'node.cpu.dispatch_scale', [1.0 + 0.05 * i for i in range(21)],
                       {'training.host_dispatch': '%gus' % hd})
    print('dispatch_scale %.2f (GB200 fit rows mean signed %+.1f %%)' % (scale, 100 * err))
    if a.loo and a.det_bwd is None:
        print('leave one pair out (host_dispatch %g us):' % hd)
        for i, (d, n) in enumerate(pairs):
            ci, _ = fit_det_bwd(model, pairs[:i] + pairs[i + 1:], {'training.host_dispatch': '%gus' % hd})
            p = dict(params, **{DET_BWD: '%gms' % ci})
            print('  without pair %d: deterministic_bwd %.3f ms; its ratio measured %.3f, predicted '
                  '%.3f' % (i + 1, ci, d['measured'] / n['measured'], model.ratio((d, n), p)))
    return 0


if __name__ == '__main__':
    main()
