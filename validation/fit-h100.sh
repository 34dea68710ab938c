#!/bin/sh
# Reproduces configs/calibration/h100.yaml from dlsim's defaults, on two real tables:
#  0. NVLink SHARP: nccl-tests all-reduce forced to NVLS on the 8 H100 of one Azure ND H100 v5
#     (validation/nccl/azure_ndh100v5_allreduce_nvls_8gpu.csv): its latency, with the efficiency
#     held at 0.6253 (fitted with it before NCCL's NVLS pipeline fill was modelled; refitted
#     with the fill it rises to 0.686, which NVLS-tree shares and the 2-node tables refuse).
#  0b. NCCL's copy bandwidth: torch.distributed all-reduce on 2 GPUs of a DGX H100 (Vidur's
#     table, validation/nccl/vidur_network__h100_dgx__all_reduce.csv, num_workers=2): the loads
#     and stores per second of one GPU's NCCL channels, which bound a ring of few GPUs. Vidur's
#     4- and 8-GPU rows and XLA's groups of 2, 4 and 8 check it.
#  1. NCCL: nccl-tests all_reduce_perf on 2 nodes x 8 H100 (issue 309). Only latencies and
#     pipeline chunks move, with step 0's NVLS figures held; the link efficiencies stay at the
#     values NVIDIA states (0.82 of NVLink for rings, 0.95 of NDR), and NVLS-tree's ceiling per
#     channel past two nodes at NCCL's own Hopper figure (perChMaxNVLSTreeBws in
#     src/graph/tuning.cc: 45.5 GB/s), copied, not fitted (its two-node 57.7 is below what the
#     2-node tables measured, so it is left off); likewise NCCL's ceilings of LL (llMaxBws: 39.0
#     and 20.4 GB/s of bus bandwidth on two and more nodes of Intel hosts, as a DGX H100's Xeons
#     are) and of a tree channel (perChMaxTreeBws 41.4 / 36.0, perChMaxTreeLL128Bws 36.7 / 29.0
#     GB/s for Hopper), copied, not fitted. With those ceilings in place only the network
#     latencies and the chunks are refitted; the base latencies and the NVLink latencies are held
#     at what this step fitted before the ceilings (base_latency and hop_latency fitted with the
#     chunks, no ceilings), since refitting them too moved twelve single-node cases (XLA's groups,
#     TensorRT-LLM TP 4) 1-3 points for no gain across nodes. Every other nccl table in
#     validation/cases (Vidur's, XLA's, issue 290's, 4- and 8-node runs) is a check of this fit.
#  2. GEMM: the XLA sm_90 matmul table, bf16, batch-1 rows only (125 shapes). The batch-2 and
#     batch-4 rows (250 shapes) are the check (validation/cases/gemm-h100-bf16-batched).
#     With gemm_waves on, GEMMs run in waves of cuBLAS's output tiles over the SMs, and the fit
#     takes gemm_tile_load too (validation/README.md, "GEMM time by shape"); Vidur's 3444
#     prefill GEMMs are a second check (validation/cases/gemm-h100-fp16-vidur-prefill).
# The send/recv efficiency (nccl.p2p_efficiency default 0.66) was fitted the same way on the
# A100 sendrecv table:
#   dlsim calibrate --nccl validation/nccl/liplus_a100_8gpu_sendrecv.csv -c dgx-a100 \
#     --set node.count=1 --set gpu.calibration=none --op sendrecv --gpus 8 --fit p2p_efficiency -o x.yaml
#  3. Fused attention: FlashAttention-2, FlashAttention-3 and cuDNN on H100 as
#     validation/kernels/fit-attention.py fits them on the FlashAttention papers' figures
#     (the values below are its output; the causal factor keeps its default, fitted on A100);
#     FlashAttention v1 and its Triton version at their A100 curves x 1.69 TFLOP/s (v1's
#     measured H100 / A100 ratio; no H100 measurement of the Triton kernel exists).
# usage: validation/fit-h100.sh [path/to/dlsim]
set -eu
DLSIM=${1:-build/release/dlsim}
A=gpu.efficiency.attention
NVLS=$(mktemp)
$DLSIM calibrate --nccl validation/nccl/azure_ndh100v5_allreduce_nvls_8gpu.csv -c dgx-h100 \
  --set node.count=1 --set gpu.calibration=none --op allreduce --gpus 8 --time-column ip_time_us \
  --algo nvls --set nccl.nvls_efficiency=0.6253 --fit nvls_latency -o "$NVLS"
nvls_latency=$(sed -n 's/^ *nvls_latency: *//p' "$NVLS")
nvls_efficiency=$(sed -n 's/^ *nvls_efficiency: *//p' "$NVLS")
rm -f "$NVLS"
COPY=$(mktemp)
$DLSIM calibrate --nccl validation/nccl/vidur_network__h100_dgx__all_reduce.csv -c dgx-h100 \
  --set node.count=1 --set gpu.calibration=none --filter num_workers=2 --size-column size \
  --time-column time_stats.all_reduce.median --time-unit ms --op allreduce --gpus 2 \
  --set nccl.nvls_latency=$nvls_latency --set nccl.nvls_efficiency=$nvls_efficiency \
  --fit copy_bandwidth -o "$COPY"
copy_bandwidth=$(sed -n 's/^ *copy_bandwidth: *//p' "$COPY")
rm -f "$COPY"
$DLSIM calibrate --nccl validation/nccl/issue309_h100_16gpu_2node_allreduce.csv \
  -c dgx-h100 --set node.count=2 --set gpu.calibration=none --op allreduce --gpus 16 \
  --set $A.fwd.fa2=0.380 --set $A.bwd.fa2=0.332 --set $A.fwd_half.fa2=100 --set $A.bwd_half.fa2=270 \
  --set $A.fwd.fa3=0.676 --set $A.bwd.fa3=0.598 --set $A.fwd_half.fa3=210 --set $A.bwd_half.fa3=430 \
  --set $A.fwd.cudnn=0.626 --set $A.bwd.cudnn=0.548 --set $A.fwd_half.cudnn=110 --set $A.bwd_half.cudnn=380 \
  --set $A.fwd.triton=0.278 --set $A.bwd.triton=0.141 --set $A.fwd.fa1=0.123 --set $A.bwd.fa1=0.145 \
  --set $A.d64.fa2=0.895 --set $A.d64.fa3=0.793 --set $A.d64.cudnn=0.759 \
  --set nccl.nvls_latency=$nvls_latency --set nccl.nvls_efficiency=$nvls_efficiency \
  --set nccl.copy_bandwidth=$copy_bandwidth \
  --set nccl.nvls_tree_channel.more_nodes=45.5GB/s \
  --set nccl.ll_max_bandwidth.two_nodes=39GB/s --set nccl.ll_max_bandwidth.more_nodes=20.4GB/s \
  --set nccl.tree_channel.two_nodes=41.4GB/s --set nccl.tree_channel.more_nodes=36GB/s \
  --set nccl.tree_ll128_channel.two_nodes=36.7GB/s --set nccl.tree_ll128_channel.more_nodes=29GB/s \
  --set nccl.base_latency.ll=3.526us --set nccl.base_latency.ll128=14us --set nccl.base_latency.simple=8.005us \
  --set nccl.hop_latency.intra.ll=0.1467us --set nccl.hop_latency.intra.ll128=0.6001us \
  --set nccl.hop_latency.intra.simple=2.499us \
  --fit hop_latency.network --fit chunk \
  -o configs/calibration/h100.yaml
$DLSIM calibrate --gemm validation/kernels/xla_matmul_perf_table_sm90.csv -c dgx-h100 \
  --set gpu.efficiency.gemm_waves=true --dtype bf16 --filter batch=1 --time-column bf16_time_ns_derived --time-unit ns \
  -o configs/calibration/h100.yaml
