#!/usr/bin/env python3
"""Writes model_flags.csv beside this file: the model arguments of Megatron-LM's CI tests that
the step-time summary (megatron_ci_iteration_time_summary.csv) has no column for and that change
which kernels a layer runs, read from each gpt and bert test's model_config.yaml of
NVIDIA/Megatron-LM @ d98e8a64ddf34856e74b24714e3bedb2f5a39553
(tests/functional_tests/test_cases/{gpt,bert}/<test>/model_config.yaml). Python 3 standard
library and git; run it from the repository root with a Megatron-LM clone that has that
commit:  python3 validation/megatron_ci/model-flags.py /path/to/Megatron-LM
Columns (empty: the argument is absent): swiglu, untie-embeddings-and-output-weights,
position-embedding-type (learned_absolute when absent), no-rope-fusion, qk-layernorm,
export-kd-teacher-load (a distillation teacher's checkpoint), fp8-param-gather; and how the test
runs, which dlsim does not model yet (validation/README.md, "Megatron-LM's CI"):
deterministic-mode (megatron/training/determinism.py: NCCL_ALGO Ring, cuBLAS's fixed workspace,
TE's deterministic attention, torch.use_deterministic_algorithms), the ENV_VARS'
NVTE_ALLOW_NONDETERMINISTIC_ALGO, no-gradient-accumulation-fusion, test-mode (qk-layernorm's
per-layer consistency checks), num-distributed-optimizer-instances, attention-dropout
(TransformerConfig's 0.1 when absent; with determinism on Blackwell it decides TE's backend) and
cross-entropy-loss-fusion (Megatron-LM's vocabulary-parallel loss in one fused function instead
of its unfused passes over the fp32 logits)."""
import csv
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMMIT = 'd98e8a64ddf34856e74b24714e3bedb2f5a39553'
ROOT = 'tests/functional_tests/test_cases'
FLAGS = ['swiglu', 'untie-embeddings-and-output-weights', 'position-embedding-type',
         'no-rope-fusion', 'qk-layernorm', 'export-kd-teacher-load', 'fp8-param-gather',
         'deterministic-mode', 'no-gradient-accumulation-fusion', 'test-mode',
         'num-distributed-optimizer-instances', 'attention-dropout', 'cross-entropy-loss-fusion']
ENV = ['NVTE_ALLOW_NONDETERMINISTIC_ALGO']
ARG = re.compile(r'^\s+--([a-z0-9-]+):\s*([^#]*?)\s*(#.*)?$')


def git(repo, *args):
    return subprocess.run(['git', '-C', repo] + list(args), check=True, capture_output=True,
                          text=True).stdout


VAR = re.compile(r'^\s+([A-Z0-9_]+):\s*([^#]*?)\s*(#.*)?$')


def section(text, name, pattern):
    """The `key: value` lines of one top-level section (MODEL_ARGS, ENV_VARS) of a config."""
    args, inside = {}, False
    for line in text.splitlines():
        if not line.startswith(' '):
            inside = line.startswith(name + ':')
            continue
        m = pattern.match(line)
        if inside and m:
            args[m.group(1)] = m.group(2).strip('"\'')
    return args


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: model-flags.py MEGATRON_LM_CLONE')
    repo = sys.argv[1]
    rows = []
    for model in ('gpt', 'bert'):
        for path in git(repo, 'ls-tree', '-r', '--name-only', COMMIT, '%s/%s' % (ROOT, model)).split():
            if not path.endswith('/model_config.yaml'):
                continue
            text = git(repo, 'show', '%s:%s' % (COMMIT, path))
            args, env = section(text, 'MODEL_ARGS', ARG), section(text, 'ENV_VARS', VAR)
            rows.append([model, path.split('/')[-2]] + [args.get(k, '') for k in FLAGS] +
                        [env.get(k, '') for k in ENV])
    with open(os.path.join(HERE, 'model_flags.csv'), 'w', newline='') as f:
        w = csv.writer(f, lineterminator='\n')
        w.writerow(['model_dir', 'test_case'] + FLAGS + ENV)
        w.writerows(sorted(rows))
    print('%d tests' % len(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
