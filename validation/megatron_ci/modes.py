#!/usr/bin/env python3
"""The megatron-ci cases' misses by how each CI test runs, which dlsim has no key for yet.

Reads the cases (validation/cases/mci-*.yaml), the run-mode columns of model_flags.csv
(model-flags.py: --deterministic-mode, the ENV_VARS' NVTE_ALLOW_NONDETERMINISTIC_ALGO,
--no-gradient-accumulation-fusion, --test-mode) and the summary's attention and
context-parallel columns, and the predictions of `dlsim validate --csv` (the file given).
Prints, per platform, the mean optimism of each group of check cases, and the measured step
times of the rows that share a platform and a dlsim description but differ in one run mode:
what that mode costs on that machine, measured, not modelled; and, for the tests with a row on
each machine, GB200's step over H100's by run mode. Python 3 standard library only;
run it from the repository root:
  dlsim validate --csv > /tmp/v.csv && python3 validation/megatron_ci/modes.py /tmp/v.csv"""
import csv
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(os.path.dirname(HERE), 'cases')


def case_name(r):
    return 'mci-%s-%s' % (r['platform'], r['test_case'].replace('_', '-'))


def load_rows(predictions):
    with open(os.path.join(HERE, 'model_flags.csv')) as f:
        flags = {(r['model_dir'], r['test_case']): r for r in csv.DictReader(f)}
    with open(predictions) as f:
        pred = {r['name']: r for r in csv.DictReader(f) if r['category'] == 'megatron-ci'}
    rows = []
    with open(os.path.join(HERE, 'megatron_ci_iteration_time_summary.csv')) as f:
        for r in csv.DictReader(f):
            name = case_name(r)
            if r['second'] == 'True' or name not in pred:
                continue
            with open(os.path.join(CASES, name + '.yaml')) as fh:
                desc = re.search(r'^set: (.*)$', fh.read(), re.M).group(1)
            fl = flags.get((r['model_dir'], r['test_case']), {})
            rows.append({'name': name, 'platform': r['platform'], 'desc': desc,
                         'role': pred[name]['role'], 'measured': float(pred[name]['measured']),
                         'optimism': float(pred[name]['optimism']),
                         'deterministic': fl.get('deterministic-mode') == 'true',
                         'fusion': fl.get('no-gradient-accumulation-fusion') != 'true',
                         'test_mode': fl.get('test-mode') == 'true',
                         'unfused': 'flash_attention=false' in desc,
                         'cp': 'parallel.cp=2' in desc})
    return rows


def attention_of(r):
    return 'unfused or local' if r['unfused'] else 'TE fused'


GROUPS = [
    ('deterministic, TE fused attention, no CP',
     lambda r: r['deterministic'] and not r['unfused'] and not r['cp']),
    ('deterministic, unfused or local attention',
     lambda r: r['deterministic'] and r['unfused']),
    ('non-deterministic, no CP', lambda r: not r['deterministic'] and not r['cp']),
    ('non-deterministic, CP 2', lambda r: not r['deterministic'] and r['cp']),
]


def print_groups(rows):
    print('check cases by run mode: n, mean optimism, median |optimism|')
    for platform in ('h100', 'gb200'):
        for label, pick in GROUPS:
            sel = [r['optimism'] for r in rows
                   if r['platform'] == platform and r['role'] == 'check' and pick(r)]
            if sel:
                print('  %-6s %-44s %3d  %+6.1f %%  %5.1f %%' % (
                    platform, label, len(sel), 100 * statistics.mean(sel),
                    100 * statistics.median(abs(x) for x in sel)))


def mode_of(r):
    return (r['deterministic'], r['fusion'], r['test_mode'])


def print_pairs(rows):
    """Rows of one platform and one dlsim description whose run modes differ."""
    print('same platform and description, different run mode: median measured step (s)')
    groups = {}
    for r in rows:
        groups.setdefault((r['platform'], r['desc']), []).append(r)
    for (platform, desc), rs in sorted(groups.items()):
        modes = {}
        for r in rs:
            modes.setdefault(mode_of(r), []).append(r['measured'])
        if len(modes) < 2:
            continue
        layout = ' '.join(re.findall(r'parallel\.(?:tp|pp|cp)=\d+', desc))
        print('  %-6s %-38s %s' % (platform, layout, attention_of(rs[0])))
        for (det, fusion, test), ms in sorted(modes.items()):
            print('         deterministic %-5s grad-acc fusion %-5s test-mode %-5s n %d  %.4f' % (
                det, fusion, test, len(ms), statistics.median(ms)))


def print_platform_ratios(rows):
    """The same test on both machines: GB200's measured step over H100's, by run mode."""
    print('the same test on GB200 and H100: measured GB200 / H100 step, by run mode')
    by = {}
    for r in rows:
        by.setdefault(r['name'].split('-', 2)[2], {})[r['platform']] = r
    ratios = {}
    for pair in by.values():
        if 'h100' in pair and 'gb200' in pair:
            h, g = pair['h100'], pair['gb200']
            key = ('deterministic' if h['deterministic'] else 'non-deterministic', attention_of(h))
            ratios.setdefault(key, []).append(g['measured'] / h['measured'])
    for key, rs in sorted(ratios.items()):
        print('  %-18s %-17s n %2d  median %.2f  (%.2f - %.2f)' % (
            key[0], key[1], len(rs), statistics.median(rs), min(rs), max(rs)))


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: modes.py VALIDATE_CSV   (dlsim validate --csv > VALIDATE_CSV)')
    rows = load_rows(sys.argv[1])
    print_groups(rows)
    print_platform_ratios(rows)
    print_pairs(rows)
    return 0


if __name__ == '__main__':
    sys.exit(main())
