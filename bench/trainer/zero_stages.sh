#!/usr/bin/env bash
# Step time and communication share per ZeRO stage and world size, CPU ranks over Gloo
# on loopback. Usage: bench/trainer/zero_stages.sh [BUILD_DIR] > table.md
# MODEL defaults to a d256 4-layer model; every rank gets one thread (OMP_NUM_THREADS=1),
# so world size 2 uses both cores of this machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
model=${MODEL:-'{"dim":256,"layers":4,"heads":4,"kv_heads":2,"ffn_dim":688,"vocab":4096}'}
steps=${STEPS:-10}
field() { grep '"event":"summary"' | sed -E "s/.*\"$1\":([0-9.e+-]+).*/\1/"; }

echo "| world | stage | step s (median, rank 0) | comm s/step | comm share | comm MB/step | grad MB | optimizer MB | frozen MB |"
echo "|---|---|---|---|---|---|---|---|---|"
for world in 1 2; do
  for stage in 0 1 2 3; do
    port=$((29700 + world * 10 + stage))
    out=$(mktemp)
    for rank in $(seq 0 $((world - 1))); do
      OMP_NUM_THREADS=1 "$build/bakeoff-trainer" --model "$model" --seq-len 128 --micro-batch 2 \
        --grad-accum 2 --steps "$steps" --warmup-steps 2 --threads 1 --zero-stage "$stage" \
        --lora-rank 64 --lora-targets '["q","k","v","o","gate","up","down"]' \
        --world-size "$world" --rank "$rank" --store "127.0.0.1:$port" \
        > "$out.$rank" 2>/dev/null &
    done
    wait
    s=$(field step_s_median < "$out.0")
    c=$(field comm_s_per_step < "$out.0")
    b=$(field comm_bytes_per_step < "$out.0")
    g=$(field grad_bytes < "$out.0"); o=$(field optimizer_bytes < "$out.0"); f=$(field frozen_bytes < "$out.0")
    awk -v w="$world" -v st="$stage" -v s="$s" -v c="$c" -v b="$b" -v g="$g" -v o="$o" -v f="$f" 'BEGIN {
      printf "| %d | %d | %.4f | %.4f | %.1f%% | %.2f | %.2f | %.2f | %.2f |\n", w, st, s, c, 100 * c / s, b / 1e6, g / 1e6, o / 1e6, f / 1e6 }'
    rm -f "$out" "$out".*
  done
done
