#!/bin/sh
# Fits the calibration files in traces/calibration/ from the real traces in traces/data/
# (dlsim calibrate --trace; method in traces/README.md). Each file is fitted on the ProfilerSteps
# or the trace named in its name; validation/cases/trace-*.yaml check it on the others.
# Usage: traces/fit.sh [path to dlsim] (default build/release/dlsim, else build/dev/dlsim)
set -eu
cd "$(dirname "$0")/.."
DLSIM=${1:-build/release/dlsim}
[ -x "$DLSIM" ] || DLSIM=build/dev/dlsim
export DLSIM_DATA_DIR="$PWD"
D=traces/data
C=traces/clusters
O=traces/calibration
K=traces/kernels

# Every fit starts from dlsim's uncalibrated values (the clusters point at the fitted files):
# the A100 defaults of configs/calibration/a100.yaml, the documented defaults for the V100.
A100=configs/calibration/a100.yaml

fit() { # out trace cluster steps|"" prior [kernels.csv]
  out=$1 trace=$2 cluster=$3 steps=$4 prior=$5 kernels=${6:-}
  echo "== $out"
  $DLSIM calibrate --trace "$D/$trace.json.gz" -c "$C/$cluster.yaml" --set "gpu.calibration=$prior" \
    ${steps:+--steps "$steps"} -o "$O/$out.yaml" ${kernels:+--kernels "$K/$kernels.csv"}
}

# 16 ranks (2 nodes) of A100-80GB: fitted on the first two steps, checked on the last three
fit negq-a100-80gb-steps550-551 negative_queue_length_values_check_rank0 zionex-a100-80gb 550-551 \
  $A100 negative_queue_length_values_check_rank0
# 8 ranks of A100-40GB: the first three steps (checked on the last three), and the whole trace
# (checked on the other A100 traces)
fit control-a100-40gb-steps1009-1011 trace_diff_control_control zionex-a100-40gb 1009-1011 \
  $A100 trace_diff_control_control
fit control-a100-40gb trace_diff_control_control zionex-a100-40gb "" $A100
# 2 ranks of V100: the first three steps, checked on the last three
fit test-v100-steps1009-1011 trace_diff_test_test dgx1-v100 1009-1011 none trace_diff_test_test
# 2 ranks of A100-40GB (a CNN): the first step, checked on the other two
fit nccl-parser-a100-40gb-step4 nccl_parser_config_nccl_data zionex-a100-40gb 4 $A100 \
  nccl_parser_config_nccl_data
# 128 ranks: rank 0's trace, checked on rank 1's, and the other way round
fit sampled-rank0-a100-80gb trace_filter_sampled_rank-0 zionex-a100-80gb "" $A100 trace_filter_sampled_rank-0
fit sampled-rank1-a100-80gb trace_filter_sampled_rank-1 zionex-a100-80gb "" $A100 trace_filter_sampled_rank-1
