#!/usr/bin/env python3
"""Writes validation/cases/mci-*.yaml from Megatron-LM's CI step times
(megatron_ci_iteration_time_summary.csv beside this file: one row per functional test case of
NVIDIA/Megatron-LM @ d98e8a64ddf34856e74b24714e3bedb2f5a39553,
tests/functional_tests/test_cases/**/golden_values_dev_dgx_{h100,gb200}.json, the median of the
per-step 'iteration-time' values after the first step, with each case's model_config.yaml
arguments and the node counts of tests/test_utils/recipes/{h100,gb200}/*.yaml). Python 3
standard library only; run it from the repository root and commit what it writes.

Mapping of a row onto dlsim:
  platform h100 -> configs/clusters/dgx-h100.yaml (8 GPUs per node), gb200 -> gb200-nvl72.yaml
  (4 GPUs per compute tray), node.count = the recipe's nodes
  --tensor/pipeline/context-parallel-size, --sequence-parallel, --num-layers-per-virtual-
  pipeline-stage (virtual stages = layers / pp / it), --micro/global-batch-size,
  --seq-length, --num-layers, --hidden-size, --ffn-hidden-size, --num-attention-heads,
  --num-query-groups: the keys of the same meaning
  --use-distributed-optimizer -> parallel.zero 1; --overlap-param-gather -> the same key;
  --tp-comm-overlap -> the same key; --recompute-granularity full -> training.recompute full
  --fp8-format -> training.dtype fp8; --bf16 / --fp16 -> that dtype; --fp8-recipe tensorwise
  -> training.fp8_recipe current; --fp8-param-gather -> training.fp8_params
  from model_flags.csv (model-flags.py: arguments the summary has no column for):
  --swiglu -> model.activation swiglu (and, without --ffn-hidden-size, Megatron's
  int(4 h 2/3 / 64) x 64); --untie-embeddings-and-output-weights -> model.tied_embeddings false;
  --position-embedding-type rope -> model.rotary fused (Megatron-LM's default --apply-rope-fusion,
  Transformer Engine's kernel), with --no-rope-fusion unfused; --qk-layernorm -> model.qk_norm;
  --test-mode -> training.test_mode (with qk-layernorm: Attention.run_realtime_tests' checks);
  --export-kd-teacher-load -> training.distill (the teacher checkpoint's own config is not
  public: ModelOpt then takes the student's architecture); --deterministic-mode ->
  training.deterministic (megatron/training/determinism.py: torch.use_deterministic_algorithms
  and NVTE_ALLOW_NONDETERMINISTIC_ALGO=0) and collectives.algorithm ring (every such test's
  ENV_VARS set NCCL_ALGO: Ring, as that file would); --no-gradient-accumulation-fusion ->
  training.grad_accum_fusion false (the hook's add into main_grad per micro-batch);
  --cross-entropy-loss-fusion -> training.loss_fusion true (the workloads' default is false,
  Megatron-LM's unfused vocabulary-parallel cross-entropy)
  vocabulary: --vocab-size padded to a multiple of 128 x tp where the row has one, else GPT-2
  BPE (50257 padded to 50304) for gpt, BERT's WordPiece (30522 -> 30592) for bert
  transformer-impl transformer_engine -> training.attention cudnn (TE's fused attention on
  Hopper and Blackwell); local (Megatron's own modules), --attention-backend unfused, or
  --attention-backend local (with --spec local: megatron/core/models/bert/bert_layer_specs.py
  bert_layer_local_spec, Megatron's unfused DotProductAttention) -> training.flash_attention
  false; --attention-backend flash -> training.attention fa2, and so does TE's own choice on
  GB200 for a deterministic test with attention dropout (model_flags.csv's attention-dropout,
  Megatron's 0.1 when absent: cuDNN's deterministic backward on Blackwell takes no dropout)
Skipped, each counted by reason in SKIPS (printed): models dlsim has no kind for (T5's
encoder-decoder, Mamba hybrids, multimodal and MiMo), the MoE suites (left to the MoE cases),
GRPO rows (generation and training in one step), interleaved rows whose micro-batches are not
a multiple of pp (dlsim refuses them), MLA and Megatron-FSDP rows (not mapped), second golden
files of the same case (_2nd: a rerun, not a new layout), rows without a
measurement or without a node count, and GB200 one-tray rows (_1node): 2-32x (median 7x)
slower than the same case on two trays, where half the GPUs explain 2x (0.4-3.1 s a step for a
12-layer hidden-512 model): something outside the model (the CI's shared one-tray
allocation), not a layout dlsim can represent.
Role: the H100 gpt rows of TP 1 and PP 1 are the fit set of training.host_dispatch in
gpt-ci.yaml, the GB200 ones that of node.cpu.dispatch_scale in the gb200-nvl72 preset (UNFIT:
what dlsim validate --loso puts back for each); the six H100 TP 2 x PP 2 rows of DETERMINISM_FIT
are the fit set of the H100's gpu.efficiency.attention.deterministic_bwd (fit-determinism.py);
the local row of each TP 1, PP 1 set also fits the host time of Megatron's own modules
(LOCAL_HOST_DISPATCH, and on GB200 LOCAL_GRACE_SCALE), which every local row is given;
every other row checks them."""
import collections
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
COMMIT = 'd98e8a64ddf34856e74b24714e3bedb2f5a39553'
SOURCE = ('NVIDIA/Megatron-LM @ %s '
          'tests/functional_tests/test_cases/%s/%s/golden_values_dev_dgx_%s.json')
CLUSTERS = {'h100': 'dgx-h100', 'gb200': 'gb200-nvl72'}
VOCAB = {'gpt': 50304, 'bert': 30592}
FIT_MODEL = 'gpt'
UNFIT = {'h100': 'unfit: [training.host_dispatch=0]\n',  # what dlsim validate --loso puts back
         'gb200': 'unfit: [node.cpu.dispatch_scale=1]\n'}
# fit-determinism.py's pairs: their measured step ratios fit the deterministic attention cost
DETERMINISM_FIT = {'gpt3_mcore_te_tp2_pp2_' + t for t in (
    'resume_torch_dist', 'resume_torch_dist_reshard_1x4xNone',
    'resume_torch_dist_ddp_average_in_collective', 'resume_torch_dist_cross_entropy_loss_fusion',
    'resume_torch_dist_no_create_attention_mask_in_dataloader', 'cross_entropy_loss_fusion')}
UNFIT_DETERMINISM = 'unfit: [gpu.efficiency.attention.deterministic_bwd=0]\n'
# Host time per modelled kernel of Megatron's own modules (transformer-impl local), which issue
# an op in less Python than Transformer Engine's (TransformerEngine issue #2053: a TE Linear's
# forward 99.7 us of CPU against torch.nn.Linear's 37.1 us on GB200): fitted on the one H100
# TP 1, PP 1 row of them, where gpt-ci.yaml's 185 us made it 37 % too slow; checked on every
# other local row (validation/README.md, "Megatron's own modules").
LOCAL_HOST_DISPATCH = '130us'
# The Graces issue those plain PyTorch ops 1.43x as slowly as the DGX H100's x86 hosts (TE's:
# the preset's 1.15; the same issue measures torch.nn.Linear's forward 2.75x as slow there):
# fitted on the one GB200 TP 1, PP 1 row of Megatron's own modules.
LOCAL_GRACE_SCALE = '1.43'
SKIPS = collections.Counter()


def load_runs():
    """golden-history.py's runs of each test, newest first, per (platform, model_dir, test_case)."""
    runs = collections.defaultdict(list)
    with open(os.path.join(HERE, 'golden_history.csv')) as f:
        for r in csv.DictReader(f):
            runs[(r['platform'], r['model_dir'], r['test_case'])].append(r)
    return runs


RUNS = load_runs()


def measurement_of(r):
    """The row's step times, or, where the CI run that last wrote its golden file was out of
    line with the runs before it (golden-history.py's `outlier`: its files 1.3x or more off
    their previous versions, whatever the test), the newest run of the test that was not."""
    runs = RUNS.get((r['platform'], r['model_dir'], r['test_case']), [])
    if not runs or runs[0]['outlier'] != 'true':
        return {'median': r['iter_time_median_s'], 'min': r['iter_time_min_s'],
                'n': r['n_iter_time'], 'steps': r['steps'], 'commit': COMMIT, 'note': ''}
    kept = next(run for run in runs if run['outlier'] != 'true')
    skipped = ', '.join('%s (median %s s, its files %sx their previous versions)' %
                        (run['run'], run['median_s'], run['run_ratio'])
                        for run in runs[:runs.index(kept)])
    return {'median': kept['median_s'], 'min': kept['min_s'], 'n': kept['n'],
            'steps': 'after the first', 'commit': kept['run'],
            'note': '; the CI run of %s, not the later out-of-line run(s) %s' % (kept['date'], skipped)}


def load_flags():
    with open(os.path.join(HERE, 'model_flags.csv')) as f:
        return {(r['model_dir'], r['test_case']): r for r in csv.DictReader(f)}


FLAGS = load_flags()


def skip_reason(r):
    if r['model_dir'] not in VOCAB:
        return 'model %s: %s' % (r['model_dir'], 'MoE (MoE cases)' if r['model_dir'] in
                                 ('moe', 'mixtral') else 'no dlsim model kind')
    if r['second'] == 'True':
        return 'second golden file of the same case'
    if not r['nodes']:
        return 'no node count in the recipes'
    if not (float(r['iter_time_median_s'] or 0) > 0):
        return 'no iteration time'
    if r['platform'] == 'gb200' and r['nodes'] == '1':
        return 'GB200 one-tray row (2-32x slower than on two trays)'
    if r['transformer-impl'] not in ('transformer_engine', 'local', ''):
        return 'transformer-impl %s' % r['transformer-impl']
    if 'grpo' in r['test_case']:
        return 'GRPO (reinforcement learning: generation and training in one step)'
    if ('tunable_overlap' in r['test_case'] and
            int(r['global-batch-size']) // int(r['micro-batch-size']) % 4):
        return 'interleaving with micro-batches not a multiple of pp (dlsim refuses it)'
    if 'mla' in r['test_case'] or 'fsdp' in r['test_case']:
        return 'MLA or Megatron-FSDP (not mapped)'
    layers, pp = int(r['num-layers']), int(r['pipeline-model-parallel-size'] or 1)
    if layers % pp:
        return 'layers not divisible by pipeline stages (uneven split)'
    return None


def int_or(v, d):
    return int(v) if v not in ('', None) else d


def vocab_of(r, tp):
    # Megatron pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by)
    if not r['vocab-size']:
        return VOCAB[r['model_dir']]
    step = 128 * tp
    return (int(r['vocab-size']) + step - 1) // step * step


def sets_of(r):
    tp, pp = int_or(r['tensor-model-parallel-size'], 1), int_or(r['pipeline-model-parallel-size'], 1)
    cp, layers = int_or(r['context-parallel-size'], 1), int(r['num-layers'])
    gpus = int(r['nodes']) * int(r['gpus_per_node'])
    s = ['node.count=%s' % r['nodes'], 'parallel.tp=%d' % tp, 'parallel.pp=%d' % pp,
         'parallel.cp=%d' % cp, 'parallel.dp=%d' % (gpus // (tp * pp * cp)),
         'model.layers=%d' % layers, 'model.hidden=%s' % r['hidden-size'],
         'model.heads=%s' % r['num-attention-heads'], 'model.seq_len=%s' % r['seq-length'],
         'model.vocab=%d' % vocab_of(r, tp),
         'training.micro_batch=%s' % r['micro-batch-size'],
         'training.global_batch=%s' % r['global-batch-size']]
    flags = FLAGS.get((r['model_dir'], r['test_case']), {})
    if r['ffn-hidden-size']:
        s.append('model.ffn_hidden=%s' % r['ffn-hidden-size'])
    elif flags.get('swiglu') == 'true':
        # Megatron's default width for a gated MLP (megatron/training/arguments.py)
        s.append('model.ffn_hidden=%d' % (int(4 * int(r['hidden-size']) * 2 / 3 / 64) * 64))
    if flags.get('swiglu') == 'true':
        s.append('model.activation=swiglu')
    if flags.get('untie-embeddings-and-output-weights') == 'true':
        s.append('model.tied_embeddings=false')
    if flags.get('position-embedding-type') == 'rope':
        s.append('model.rotary=%s' % ('unfused' if flags.get('no-rope-fusion') == 'true' else 'fused'))
    if flags.get('qk-layernorm') == 'true':
        s.append('model.qk_norm=true')
    if flags.get('test-mode') == 'true':
        s.append('training.test_mode=true')
    if flags.get('export-kd-teacher-load'):
        s.append('training.distill=true')
    if flags.get('deterministic-mode') == 'true':
        s += ['training.deterministic=true', 'collectives.algorithm=ring']
    if flags.get('no-gradient-accumulation-fusion') == 'true':
        s.append('training.grad_accum_fusion=false')
    if flags.get('cross-entropy-loss-fusion') == 'true':
        s.append('training.loss_fusion=true')
    if r['num-query-groups']:
        s.append('model.kv_heads=%s' % r['num-query-groups'])
    if r['num-layers-per-virtual-pipeline-stage'] and pp > 1:
        vs = layers // pp // int(r['num-layers-per-virtual-pipeline-stage'])
        if vs > 1:
            s += ['parallel.virtual_stages=%d' % vs, 'parallel.schedule=interleaved']
    if r['sequence-parallel'] == 'True' and tp > 1:
        s.append('parallel.sequence_parallel=true')
    if r['use-distributed-optimizer'] == 'True':
        s.append('parallel.zero=1')
        if r['overlap-param-gather'] == 'True':
            s.append('parallel.overlap_param_gather=true')
    if r['tp-comm-overlap'] == 'True' and tp > 1 and r['sequence-parallel'] == 'True':
        s.append('parallel.tp_comm_overlap=true')
    if r['recompute-granularity'] == 'full':
        s.append('training.recompute=full')
    s.append('training.dtype=%s' % ('fp8' if r['fp8-format'] else 'fp16' if r['fp16'] == 'True'
                                    else 'bf16'))
    if r['fp8-format'] and r['fp8-recipe'] == 'tensorwise':
        s.append('training.fp8_recipe=current')
    if r['fp8-format'] and flags.get('fp8-param-gather') == 'true':
        s.append('training.fp8_params=true')
    if r['transformer-impl'] == 'local' or r['attention-backend'] in ('unfused', 'local'):
        s.append('training.flash_attention=false')
    if megatron_modules(r):
        s.append('training.host_dispatch=%s' % LOCAL_HOST_DISPATCH)
        if r['platform'] == 'gb200':
            s.append('node.cpu.dispatch_scale=%s' % LOCAL_GRACE_SCALE)
    elif r['attention-backend'] == 'flash' or te_falls_back_to_flash(r, flags):
        s.append('training.attention=fa2')
    return s


def megatron_modules(r):
    """Megatron's own modules instead of Transformer Engine's (--transformer-impl local, or
    BERT's --spec local with its attention)."""
    return r['transformer-impl'] == 'local' or r['attention-backend'] == 'local'


def te_falls_back_to_flash(r, flags):
    """Transformer Engine's own choice (attention-backend auto) on Blackwell: cuDNN's
    deterministic backward there takes no dropout (TE's fused_attn.cpp, "determinism on
    Blackwell"), and Megatron's attention dropout is 0.1 unless the test sets it, so a
    deterministic test runs FlashAttention-2's deterministic backward instead."""
    return (r['platform'] == 'gb200' and r['transformer-impl'] == 'transformer_engine' and
            not r['attention-backend'] and flags.get('deterministic-mode') == 'true' and
            float(flags.get('attention-dropout') or 0.1) != 0.0)


def notes_of(r):
    """Where the settings the summary has no column for came from, for the cases that use them."""
    flags = FLAGS.get((r['model_dir'], r['test_case']), {})
    if not (r['fp8-format'] and flags.get('fp8-param-gather') == 'true'):
        return ''
    return ('notes: "fp8 recipe and parameters from the test\'s model_config.yaml (--fp8-recipe '
            '%s, --fp8-param-gather true; model_flags.csv): training.fp8_recipe=current, '
            'training.fp8_params=true"\n' % r['fp8-recipe'])


def unfit_of(r):
    if role_of(r) != 'fit':
        return ''
    if r['platform'] == 'h100' and r['test_case'] in DETERMINISM_FIT:
        return UNFIT_DETERMINISM
    return UNFIT[r['platform']]


def role_of(r):
    if r['platform'] == 'h100' and r['test_case'] in DETERMINISM_FIT:
        return 'fit'
    fit = (r['model_dir'] == FIT_MODEL and
           int_or(r['tensor-model-parallel-size'], 1) == 1 and
           int_or(r['pipeline-model-parallel-size'], 1) == 1)
    return 'fit' if fit else 'check'


def case(r):
    name = 'mci-%s-%s' % (r['platform'], r['test_case'].replace('_', '-'))
    m = measurement_of(r)
    src = SOURCE % (m['commit'], r['model_dir'], r['test_case'], r['platform'])
    text = ('name: %s\nrole: %s\ncategory: megatron-ci\nsource: "%s; median of %s steps (%s), '
            'min %s s%s; %s node(s) x %s GPUs"\n'
            'cluster: ../../configs/clusters/%s.yaml\nworkload: ../megatron_ci/%s-ci.yaml\n'
            '%sset: [%s]\n%sengine: analytic\nmetric: step_time_s\nmeasured: %s\ntolerance: 0.25\n' %
            (name, role_of(r), src, m['n'], m['steps'], m['min'], m['note'], r['nodes'],
             r['gpus_per_node'], CLUSTERS[r['platform']], r['model_dir'], notes_of(r),
             ', '.join(sets_of(r)), unfit_of(r), m['median']))
    with open(os.path.join(ROOT, 'validation', 'cases', name + '.yaml'), 'w') as f:
        f.write(text)


def main():
    with open(os.path.join(HERE, 'megatron_ci_iteration_time_summary.csv')) as f:
        rows = list(csv.DictReader(f))
    written = 0
    for r in rows:
        why = skip_reason(r)
        if why:
            SKIPS[why] += 1
            continue
        case(r)
        written += 1
    print('%d rows: %d cases written' % (len(rows), written))
    for why, n in SKIPS.most_common():
        print('  skipped %3d: %s' % (n, why))
    return 0


if __name__ == '__main__':
    sys.exit(main())
