#!/bin/sh
# Reproduces the one fitted serving parameter: serving.request_overhead of the vLLM engine
# profile (configs/engines/vllm.yaml, which validation/serving/vllm-v0.15-h100.yaml and the
# llama2-7b-vllm preset name), the time a request spends outside the engine (API
# server, tokenization, detokenization and streaming). It is FITTED on the mean TTFT of two
# rows only, one per tensor-parallel size (cases vllm-h100-llama2-7b-tp1-codegen-s0-ttft and
# vllm-h100-llama2-70b-tp4-codegen-s0-ttft, role fit); every other serving case is a check.
# TTFT = engine TTFT + overhead, so the least-squares fit of the relative errors is closed form:
#   overhead = sum((m_i - p_i) / m_i^2) / sum(1 / m_i^2)   (p_i: engine TTFT, no overhead)
# usage: validation/fit-serving.sh [path/to/dlsim]
set -eu
DLSIM=${1:-build/release/dlsim}
W=validation/serving/vllm-v0.15-h100.yaml
engine_ttft_ms() { # the mean TTFT with no overhead, in ms
  $DLSIM serve -c dgx-h100 -w $W --json --set serving.request_overhead=0 "$@" |
    awk '/"ttft_s"/ { on = 1 } on && /"mean"/ { gsub(/[",]/, ""); print $2 * 1000; exit }'
}
# Llama-2-7B TP1 codegen, stage 0 (5 req/s for 600 s): measured TTFT mean 25.0366 ms
P1=$(engine_ttft_ms --set model=llama2-7b --set serving.tp=1 --set serving.requests.rate=5/s \
  --set serving.requests.count=3000 --set serving.requests.prompt_tokens=592 \
  --set serving.requests.output_tokens=194 --set serving.requests.prefix_tokens=591 \
  --set serving.requests.prefix_groups=44)
# Llama-2-70B TP4 codegen, stage 0 (5 req/s for 600 s): measured TTFT mean 53.4028 ms
P2=$(engine_ttft_ms --set model=llama2-70b --set serving.tp=4 --set serving.requests.rate=5/s \
  --set serving.requests.count=3000 --set serving.requests.prompt_tokens=593 \
  --set serving.requests.output_tokens=245 --set serving.requests.prefix_tokens=592 \
  --set serving.requests.prefix_groups=44)
echo "engine TTFT (no overhead): $P1 ms (measured 25.0366), $P2 ms (measured 53.4028)"
awk -v p1="$P1" -v p2="$P2" 'BEGIN {
  m1 = 25.0366; m2 = 53.4028
  o = ((m1 - p1) / (m1 * m1) + (m2 - p2) / (m2 * m2)) / (1 / (m1 * m1) + 1 / (m2 * m2))
  printf "fitted serving.request_overhead: %.1fms (set it in %s)\n", o, "validation/serving/vllm-v0.15-h100.yaml"
}'
