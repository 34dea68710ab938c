#!/usr/bin/env python3
"""Groups the megatron-ci cases by the software (NGC container) of the CI run that measured
them, and measures how much each container moved the same tests.

Usage: dlsim validate --csv > v.csv; python3 validation/megatron_ci/eras.py v.csv [-v]

A case's run is the one of golden_history.csv (golden-history.py) whose median step is the
case's measured value (within 0.3 %: the case's median may be over other steps); runs of
October 2025 have no container in their golden files and are shown as "2025-10". For each
pair of containers of a platform, the median over the tests measured in both of the newer
run's median step over the older one's: that is the software's doing, since the tests, the
model and the machines are the same. Measured values only; no prediction enters the ratios.
Python 3 standard library only."""
import collections
import csv
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def runs_by_test():
    """(platform, case-style test name) -> the in-line runs of golden_history.csv, oldest first."""
    runs = collections.defaultdict(list)
    with open(os.path.join(HERE, 'golden_history.csv')) as f:
        for r in csv.DictReader(f):
            if r['outlier'] != 'true':
                runs[(r['platform'], r['test_case'].replace('_', '-'))].append(r)
    for v in runs.values():
        v.sort(key=lambda r: r['date'])
    return runs


def era(run):
    return run['container'] or run['date'][:7]


def case_eras(path, runs):
    """(platform, era) -> [(optimism, role, name)] of the megatron-ci cases in a validate CSV."""
    out = collections.defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if not r['name'].startswith('mci-') or not r['optimism']:
                continue
            platform, test = r['name'][4:].split('-', 1)
            measured = float(r['measured'])
            hits = [x for x in runs.get((platform, test), [])
                    if abs(float(x['median_s']) - measured) < 0.003 * measured]
            key = (platform, era(hits[-1]) if hits else 'unknown')
            out[key].append((float(r['optimism']), r['role'], r['name']))
    return out


def container_ratios(runs):
    """(platform, older era, newer era) -> the tests' newer / older median steps."""
    ratios = collections.defaultdict(list)
    for (platform, _), v in runs.items():
        last = {}
        for r in v:
            last[era(r)] = float(r['median_s'])
        eras = sorted(last)
        for i, a in enumerate(eras):
            for b in eras[i + 1:]:
                ratios[(platform, a, b)].append(last[b] / last[a])
    return ratios


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = runs_by_test()
    groups = case_eras(sys.argv[1], runs)
    print('platform  era          cases  check  mean optimism (check)')
    for key in sorted(groups):
        checks = [o for o, role, _ in groups[key] if role == 'check']
        mean = '%+6.1f %%' % (100 * statistics.mean(checks)) if checks else '   -'
        print('%-9s %-12s %5d  %5d  %s' % (key[0], key[1], len(groups[key]), len(checks), mean))
        if '-v' in sys.argv:
            for o, role, name in sorted(groups[key]):
                print('      %+6.1f %%  %-5s %s' % (100 * o, role, name))
    print('\nsame tests, newer container over older (median step): tests, median, 10th-90th percentile')
    for key, v in sorted(container_ratios(runs).items()):
        if len(v) < 5:
            continue
        v.sort()
        print('%-6s %-10s -> %-10s %3d  %.2f  %.2f-%.2f' % (key[0], key[1], key[2], len(v),
              statistics.median(v), v[len(v) // 10], v[(9 * len(v)) // 10]))


if __name__ == '__main__':
    main()
