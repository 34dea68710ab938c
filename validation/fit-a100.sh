#!/bin/sh
# Reproduces configs/calibration/a100.yaml. The A100 has no GEMM table and no nccl-tests table of
# its own here, so it takes what transfers from the H100 fit (configs/calibration/h100.yaml:
# NCCL's software latencies and chunks, the GEMM K ramp and per-kernel fixed cost), and two
# A100 measurements:
#  - flops.gemm 0.9141: the A100-SXM maximum achievable matmul throughput, 271.2 of 312 TFLOP/s
#    at its best shape (stas00/ml-engineering MAMF table), i.e. 0.869, divided by what that shape
#    (1024 x 10240 x 5120) reaches on 108 SMs in the wave model: 320 tiles in 3 waves of 108, times
#    the K ramp (K = 5120 against gemm_k_half 199.5).
#  - sustained: FITTED on two end-to-end runs, the FlashAttention-2 paper's GPT3-1.3B and
#    GPT3-2.7B at 2k context with FlashAttention-2 on 8 A100 (Table 1). Every other end-to-end
#    case (the same table's 8k and no-FlashAttention rows, Korthikanti et al. Table 5, MT-NLG)
#    is a check of it.
#  - fused attention: FlashAttention-2, its Triton version and v1 on A100
#    (validation/kernels/fit-attention.py; the same values are dlsim's defaults), not the H100's.
# usage: validation/fit-a100.sh [path/to/dlsim]
set -eu
DLSIM=${1:-build/release/dlsim}
$DLSIM calibrate --case fa2-gpt3-1.3b-2k-fa2 --case fa2-gpt3-2.7b-2k-fa2 \
  --param gpu.efficiency.sustained=0.9 \
  --set gpu.calibration=configs/calibration/h100.yaml --set gpu.efficiency.flops.gemm=0.9141 \
  --set gpu.efficiency.gemm_waves=true --set gpu.efficiency.gemm_tile_load=66.8 \
  --set gpu.efficiency.attention.fwd.fa2=0.724 --set gpu.efficiency.attention.bwd.fa2=0.634 \
  --set gpu.efficiency.attention.fwd_half.fa2=30 --set gpu.efficiency.attention.bwd_half.fa2=240 \
  --set gpu.efficiency.attention.d64.fa2=0.865 \
  --set gpu.efficiency.attention.fwd.triton=0.522 --set gpu.efficiency.attention.bwd.triton=0.264 \
  --set gpu.efficiency.attention.fwd.fa1=0.230 --set gpu.efficiency.attention.bwd.fa1=0.272 \
  -o configs/calibration/a100.yaml
