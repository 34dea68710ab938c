#!/usr/bin/env python3
"""The floor of the megatron-ci cases: how close any model of dlsim's inputs can come.

Cases whose cluster, workload and `set` lines are the same get one prediction, whatever the
model. Per group of such cases, the best single prediction (the measured value that minimises
the group's summed |error|) and, for each case, the median of the others of its group show how
far the CI's own rows of one layout are apart. Python 3 standard library only; run it from the
repository root."""
import os
import re
import statistics
import sys

CASES = os.path.join('validation', 'cases')


def groups():
    out = {}
    for f in sorted(os.listdir(CASES)):
        if not f.startswith('mci-'):
            continue
        with open(os.path.join(CASES, f)) as fh:
            text = fh.read()
        key = tuple(re.search(r'^%s: (.*)$' % k, text, re.M).group(1)
                    for k in ('cluster', 'workload', 'set'))
        measured = float(re.search(r'^measured: (.*)$', text, re.M).group(1))
        out.setdefault(key, []).append((f[:-5], measured))
    return out


def best_errors(ms):
    best = min(ms, key=lambda p: sum(abs(p / m - 1) for m in ms))
    return [abs(best / m - 1) for m in ms]


def loo_errors(ms):
    return [abs(statistics.median(ms[:i] + ms[i + 1:]) / m - 1) for i, m in enumerate(ms)]


def main():
    shared = [[m for _, m in v] for v in groups().values() if len(v) > 1]
    best = [e for ms in shared for e in best_errors(ms)]
    loo = [e for ms in shared for e in loo_errors(ms)]
    print('%d cases share their inputs with another, in %d groups' % (len(best), len(shared)))
    for what, errs in (('best single prediction per group', best),
                       ('median of the others of the group', loo)):
        print('  %s: median |error| %.1f %%, mean %.1f %%' % (
            what, 100 * statistics.median(errs), 100 * statistics.mean(errs)))
    print('  widest group: %.2fx' % max(max(ms) / min(ms) for ms in shared))
    return 0


if __name__ == '__main__':
    sys.exit(main())
