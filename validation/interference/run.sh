#!/bin/sh
# Measures interference in the real traces (validation/interference/README.md): the two A100
# traces with the most NCCL kernels beside compute fit, the others check.
# usage: validation/interference/run.sh [--csv]   (from the repository's root)
set -eu
D=traces/data
exec python3 validation/interference/measure.py "$@" \
  fit=$D/negative_queue_length_values_check_rank0.json.gz \
  fit=$D/trace_diff_control_control.json.gz \
  check=$D/nccl_parser_config_nccl_data.json.gz \
  check=$D/trace_filter_sampled_rank-0.json.gz \
  check=$D/trace_filter_sampled_rank-1.json.gz \
  check=$D/trace_diff_test_test.json.gz
