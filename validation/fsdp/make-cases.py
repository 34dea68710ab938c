#!/usr/bin/env python3
"""Writes validation/cases/fsdp-*.yaml and validation/fsdp/workloads/ from llm-foundry's
benchmark table (llm-foundry_mpt_a100.csv beside this file: mosaicml/llm-foundry
scripts/train/benchmarking/README.md @ 495218376830947dce625efabc4d86be7c47cc45, the A100 40GB
and 80GB tables, 1600 Gb/s RoCE between nodes of 8 GPUs). Python 3 standard library only; run
it from the repository root after changing the mapping below, and commit what it writes.

Mapping of a row onto dlsim (each from llm-foundry's own settings):
  Sharding Strategy FULL_SHARD -> parallel.zero 3 over all GPUs (PyTorch FSDP), SHARD_GRAD_OP -> 2
  Precision amp_bf16 / bf16 -> training.dtype bf16; MP Mode DEFAULT reduces gradients in fp32
  (Composer's FSDP mixed precision: reduce_dtype fp32), PURE in bf16 -> training.grad_dtype
  Activation Checkpointing True -> training.recompute full
  attention: training.attention triton. The tables were measured with submit_benchmarks.py as
  of a7d6a4475 (A100, July 2023) and b2a43a147 (H100, October 2023), whose --attn_impl
  defaulted to 'triton' (MPT's FlashAttention in Triton), on PyTorch 1.13.1
  A100 40GB: gpu.memory 40GiB, HBM 1.555 TB/s (A100 datasheet); 80GB: the dgx-a100 preset
  metric: tokens per second of the whole job (Throughput (T/s)), the number measured.
Role: every row is a check until a framework parameter is fitted on some of them; the rows
named in FIT below are then the fit set (none today)."""
import csv
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCE = ('mosaicml/llm-foundry scripts/train/benchmarking/README.md @ '
          '495218376830947dce625efabc4d86be7c47cc45, MPT training benchmarks, %s table')
FIT = set()


def workload(size):
    path = os.path.join(HERE, 'workloads', 'mpt-%s-fsdp.yaml' % size)
    with open(path, 'w') as f:
        f.write('# MPT-%s trained by llm-foundry with PyTorch FSDP (validation/fsdp/make-cases.py)\n'
                'model: mpt-%s\n'
                'training:\n  framework: fsdp\n  global_batch: 8\n  micro_batch: 1\n  dtype: bf16\n  optimizer: adam\n'
                '  flash_attention: true\n  attention: triton\n'
                'parallel:\n  zero: 3\n'
                '  zero3_backward_post: true  # Composer FSDPConfig: backward_prefetch BACKWARD_POST\n'
                % (size, size))


def case(r):
    gpus, gpu = int(r['# GPUs']), r['GPU']
    ac = r['Activation Checkpointing'] == 'True'
    name = 'fsdp-mpt-%s-%s-%dgpu-s%s-mb%s%s' % (r['Model'], gpu.replace('_', '-'), gpus,
                                               r['SeqLen (T)'], r['MicroBatchSize'], '-ac' if ac else '')
    sets = ['node.count=%d' % max(1, gpus // 8), 'parallel.dp=%d' % gpus,
            'model.seq_len=%s' % r['SeqLen (T)'], 'training.micro_batch=%s' % r['MicroBatchSize'],
            'training.global_batch=%s' % r['GlobalBatchSize'],
            'parallel.zero=%d' % (3 if r['Sharding Strategy'] == 'FULL_SHARD' else 2),
            'training.recompute=%s' % ('full' if ac else 'none'),
            'training.grad_dtype=%s' % ('fp32' if r['MP Mode'] == 'DEFAULT' else 'bf16')]
    if gpu == 'a100_40gb':
        sets += ['gpu.memory=40GiB', 'gpu.memory_bandwidth=1.555TB/s']
    table = 'A100 %s' % ('40GB' if gpu == 'a100_40gb' else '80GB')
    row = ('%s, seq %s, %d GPUs, micro-batch %s x %s accumulation, global batch %s, %s %s, %s, '
           'activation checkpointing %s: %s tokens/s (MFU %s %%)' %
           (r['Model'], r['SeqLen (T)'], gpus, r['MicroBatchSize'], r['GradAccum'], r['GlobalBatchSize'],
            r['Precision'], r['MP Mode'], r['Sharding Strategy'], r['Activation Checkpointing'],
            r['Throughput (T/s)'], r['MFU']))
    text = ('name: %s\nrole: %s\ncategory: fsdp\nsource: "%s; %s"\n'
            'cluster: ../../configs/clusters/dgx-a100.yaml\nworkload: ../fsdp/workloads/mpt-%s-fsdp.yaml\n'
            'set: [%s]\nengine: analytic\nmetric: tokens_per_s\nmeasured: %s\ntolerance: 0.10\n' %
            (name, 'fit' if name in FIT else 'check', SOURCE % table, row, r['Model'], ', '.join(sets),
             r['Throughput (T/s)']))
    return name, text


def main():
    os.makedirs(os.path.join(HERE, 'workloads'), exist_ok=True)
    with open(os.path.join(HERE, 'llm-foundry_mpt_a100.csv')) as f:
        rows = list(csv.DictReader(f))
    names = set()
    for r in rows:
        workload(r['Model'])
        name, text = case(r)
        if name in names:
            continue
        names.add(name)
        with open(os.path.join(ROOT, 'validation', 'cases', name + '.yaml'), 'w') as f:
            f.write(text)
    print('%d cases' % len(names))


if __name__ == '__main__':
    main()
