#!/bin/sh
# Leave-one-source-out for the collectives category, for real: `dlsim validate --loso` undoes a
# fit only on the case it was fitted on, so no check case moves. Here each source's constants are
# undone in a copy of configs/ and validation/ (DLSIM_DATA_DIR points dlsim at it) and every
# collectives case runs again; one line per source: median |error| of all cases, mean optimism
# of all cases and of the checks, and the cases whose optimism moved by a point or more.
# The table "Why the collectives' leave-one-source-out optimism is about +43 %" in
# validation/README.md is its output.
# usage: validation/loso-collectives.sh [path/to/dlsim]
set -eu
DLSIM=$(realpath "${1:-build/release/dlsim}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# name|what it undoes|sed script|files it applies to (relative to the copy)
SOURCES='issue309-2node|base and per-step latencies, chunks: code defaults|/^  base_latency:/d;/^  hop_latency:/,/^    network:/d;/^  chunk:/d|configs/calibration/h100.yaml configs/calibration/a100.yaml
azure-nvls|nvls_latency 25 us, nvls_efficiency 0.69|s/nvls_latency: .*/nvls_latency: 25us/;s/nvls_efficiency: .*/nvls_efficiency: 0.69/|configs/calibration/h100.yaml
vidur-2gpu|no copy_bandwidth|/copy_bandwidth:/d|configs/calibration/h100.yaml
xla-allgather-4|call_latency 0|s/call_latency: 11.9us/call_latency: 0us/|validation/nccl/xla-on-nccl.yaml
liplus-sendrecv|p2p_efficiency 0.82|s/p2p_efficiency: .*/p2p_efficiency: 0.82/|configs/calibration/h100.yaml configs/calibration/a100.yaml
jsc-no-ucc|no core_bandwidth|s/core_bandwidth: [0-9.]*GB\/s/core_bandwidth: 0GB\/s/|configs/clusters/dgx-a100.yaml'

copy_tree() {
  rm -rf "$1" && mkdir -p "$1"
  cp -r "$ROOT/configs" "$ROOT/validation" "$ROOT/traces" "$1/"
}

# CSV of every collectives case in the tree $1 (validate exits 1 on a missed pin: not an error)
run_cases() {
  (cd "$WORK" && DLSIM_DATA_DIR="$1" "$DLSIM" validate --csv $CASES > "$2") || true
}

summary() {
  python3 - "$WORK/base.csv" "$1" <<'EOF'
import csv, statistics, sys
base = {r["name"]: r for r in csv.DictReader(open(sys.argv[1]))}
rows = list(csv.DictReader(open(sys.argv[2])))
opt = lambda r: 100 * float(r["optimism"])
checks = [r for r in rows if r["role"] == "check"]
moved = sorted((r for r in rows if abs(opt(r) - opt(base[r["name"]])) >= 1),
               key=lambda r: -abs(opt(r) - opt(base[r["name"]])))
print("  median |error| %.1f %%, mean optimism %+.1f %% (checks %+.1f %%)" % (
    statistics.median(100 * abs(float(r["error"])) for r in rows),
    statistics.mean(opt(r) for r in rows), statistics.mean(opt(r) for r in checks)))
for r in moved:
    print("    %-42s %-5s %+7.1f -> %+7.1f %%" % (r["name"], r["role"], opt(base[r["name"]]), opt(r)))
EOF
}

copy_tree "$WORK/base"
CASES=$(cd "$WORK" && DLSIM_DATA_DIR="$WORK/base" "$DLSIM" validate --csv 2>/dev/null |
        python3 -c 'import csv, sys; print(" ".join(r["name"] for r in csv.DictReader(sys.stdin) if r["category"] == "collectives"))')
run_cases "$WORK/base" "$WORK/base.csv"
echo "none left out"
summary "$WORK/base.csv"
echo "$SOURCES" | while IFS='|' read -r name what script files; do
  copy_tree "$WORK/$name"
  for f in $files; do
    sed -i "$script" "$WORK/$name/$f"
  done
  run_cases "$WORK/$name" "$WORK/$name.csv"
  echo "$name left out ($what)"
  summary "$WORK/$name.csv"
done
