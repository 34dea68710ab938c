#!/usr/bin/env python3
"""Writes golden_history.csv beside this file: every version, up to the summary's commit, of
the golden file of each gpt and bert row of megatron_ci_iteration_time_summary.csv, that is
each CI run that wrote that test's step times, and flags the runs that were out of line.
Python 3 standard library; needs a Megatron-LM clone:
  python3 validation/megatron_ci/golden-history.py /path/to/Megatron-LM

Why: a golden file holds the step times of the one CI run that last refreshed it, and the
files of the summary's commit were written by different runs over ten months. A run that
refreshed many files at once on machines slower (or faster) than usual shifts every one of
them alike, whatever the test. So each run is measured against the runs before it: its
run_ratio is the median, over every golden_values_dev*_dgx_<platform>.json it wrote, of the
file's median step over that of the file's previous version. A run beyond OUTLIER (1.3x
either way) is flagged `outlier`; make-cases.py takes the newest version of a test that no
flagged run wrote. Only measured step times decide it, no prediction of dlsim's.

Columns: platform, model_dir, test_case, run (the commit that wrote the values: of
consecutive versions with the same median, the oldest), date, container (the NGC PyTorch
image of docker/.ngc_version.dev at that commit), n, median_s and min_s of the iteration
times after the first step, run_ratio, outlier."""
import csv
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMMIT = 'd98e8a64ddf34856e74b24714e3bedb2f5a39553'
OUTLIER = 1.3
MODELS = ('gpt', 'bert')


class Repo:
    def __init__(self, path):
        self.path = path
        self.ratios = {}

    def git(self, *args):
        return subprocess.run(['git', '-C', self.path] + list(args), capture_output=True,
                              text=True).stdout

    def versions(self, path):
        lines = self.git('log', '--format=%h %ad', '--date=short', COMMIT, '--', path)
        return [line.split() for line in lines.splitlines() if line]

    def container(self, commit):
        last = self.git('log', '-1', '--format=%h', commit, '--', 'docker/.ngc_version.dev').strip()
        image = self.git('show', '%s:docker/.ngc_version.dev' % last).strip() if last else ''
        return image.rsplit(':', 1)[-1]

    def steps(self, commit, path):
        try:
            values = json.loads(self.git('show', '%s:%s' % (commit, path)))
        except json.JSONDecodeError:
            return []
        times = values.get('iteration-time', {}).get('values', {})
        return [t for step, t in times.items()
                if int(step) >= 2 and isinstance(t, (int, float)) and t == t]

    def median(self, commit, path):
        steps = self.steps(commit, path)
        return statistics.median(steps) if steps else None

    def run_ratio(self, commit, platform):
        key = (commit, platform)
        if key not in self.ratios:
            self.ratios[key] = self.measure_run(commit, platform)
        return self.ratios[key]

    def measure_run(self, commit, platform):
        suffix = '_dgx_%s.json' % platform
        files = [f for f in self.git('show', '--name-only', '--format=', commit).splitlines()
                 if os.path.basename(f).startswith('golden_values_dev') and f.endswith(suffix)]
        ratios = []
        for f in files:
            new, old = self.median(commit, f), self.median(commit + '^', f)
            if new and old:
                ratios.append(new / old)
        return statistics.median(ratios) if ratios else 1.0


def runs_of(repo, path):
    """The distinct runs that wrote the file, newest first."""
    runs = []
    for commit, date in repo.versions(path):
        steps = repo.steps(commit, path)
        if not steps:
            continue
        median = round(statistics.median(steps), 5)
        run = {'run': commit, 'date': date, 'n': len(steps), 'median_s': median,
               'min_s': round(min(steps), 5)}
        if runs and runs[-1]['median_s'] == median:
            runs[-1].update(run)        # an older commit wrote the same values
        else:
            runs.append(run)
    return runs


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: golden-history.py MEGATRON_LM_CLONE')
    repo = Repo(sys.argv[1])
    with open(os.path.join(HERE, 'megatron_ci_iteration_time_summary.csv')) as f:
        rows = [r for r in csv.DictReader(f) if r['second'] == 'False'
                and r['model_dir'] in MODELS and r['env'] == 'dev']
    out_rows = []
    for r in rows:
        path = 'tests/functional_tests/test_cases/%s/%s/golden_values_dev_dgx_%s.json' % (
            r['model_dir'], r['test_case'], r['platform'])
        for run in runs_of(repo, path):
            ratio = repo.run_ratio(run['run'], r['platform'])
            out_rows.append(dict(platform=r['platform'], model_dir=r['model_dir'],
                                 test_case=r['test_case'], container=repo.container(run['run']),
                                 run_ratio='%.3f' % ratio,
                                 outlier=str(not 1 / OUTLIER <= ratio <= OUTLIER).lower(), **run))
    fields = ['platform', 'model_dir', 'test_case', 'run', 'date', 'container', 'n', 'median_s',
              'min_s', 'run_ratio', 'outlier']
    with open(os.path.join(HERE, 'golden_history.csv'), 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator='\n')
        w.writeheader()
        w.writerows(out_rows)
    flagged = sorted({(r['run'], r['platform'], r['run_ratio']) for r in out_rows
                      if r['outlier'] == 'true'})
    for run, platform, ratio in flagged:
        print('outlier run %s on %s: its files %sx their previous versions' % (run, platform, ratio))


if __name__ == '__main__':
    main()
