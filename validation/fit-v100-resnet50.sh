#!/bin/sh
# Fits the one free parameter of the V100 ResNet-50 model: the fraction of peak FP32 FLOP/s that
# cuDNN convolutions reach (gpu.efficiency.flops.conv), by bisection, so that ONE V100 trains
# 336.0 images/s (HiDL tutorial lab, PyTorch + Horovod, batch 64, synthetic data).
# Only the 1-GPU number is used; the 2-node number stays a pure check (validation/README.md).
# usage: validation/fit-v100-resnet50.sh [path/to/dlsim]
set -eu
DLSIM=${1:-build/release/dlsim}
TARGET=336.0
lo=0.05 hi=1.0
i=0
while [ $i -lt 40 ]; do
  mid=$(echo "($lo + $hi) / 2" | bc -l)
  got=$($DLSIM run -c v100-edr -w resnet50-horovod --engine analytic --json \
        --set node.count=1 --set training.global_batch=64 \
        --set gpu.efficiency.flops.conv="$mid" |
        sed -n 's/.*"samples_per_s":[[:space:]]*\([0-9.e+-]*\).*/\1/p')
  if [ "$(echo "$got < $TARGET" | bc -l)" -eq 1 ]; then lo=$mid; else hi=$mid; fi
  i=$((i + 1))
done
printf 'gpu.efficiency.flops.conv = %.4f  (1 V100: %s images/s, measured %s)\n' "$mid" "$got" "$TARGET"
