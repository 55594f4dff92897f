#!/usr/bin/env bash
# bf16 on this CPU: step time of each bf16 matrix-product path (native, fp32 widening),
# of what `bf16_matmul: auto` decides here, and of fp32, for the same model, interleaved
# round by round (ABCD ABCD ...) so drift on a shared machine falls on every row.
# Usage: bench/trainer/bf16_paths.sh [BUILD_DIR] > table.md
# MODEL (default: the cpu-example's d256 4-layer model), SEQ (128), MB (micro-batch, 2),
# STEPS (6), ROUNDS (3), THREADS (1).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
model=${MODEL:-'{"dim":256,"layers":4,"heads":4,"kv_heads":2,"ffn_dim":688,"vocab":4096}'}
seq=${SEQ:-128}; mb=${MB:-2}; steps=${STEPS:-6}; rounds=${ROUNDS:-3}; threads=${THREADS:-1}
summary() { grep '"event":"summary"' "$1"; }
num() { sed -E "s/.*\"$1\":([0-9.e+-]+).*/\1/"; }
declare -A times
decided=""; reason=""
rows=("fp32 -" "bf16 native" "bf16 fp32" "bf16 auto")
for r in $(seq 1 "$rounds"); do
  for row in "${rows[@]}"; do
    set -- $row
    args=(--precision "$1")
    [ "$2" != - ] && args+=(--bf16-matmul "$2")
    out=$(mktemp)
    "$build/bakeoff-trainer" --model "$model" --seq-len "$seq" --micro-batch "$mb" --steps "$steps" \
      --warmup-steps 2 --threads "$threads" "${args[@]}" > "$out" 2>/dev/null
    s=$(summary "$out" | num step_s_median)
    times["$row"]+="$s "
    if [ "$2" = auto ]; then
      decided=$(summary "$out" | sed -E 's/.*"bf16_matmul":\{"reason":"([^"]*)","value":"([^"]*)"\}.*/\2/')
      reason=$(summary "$out" | sed -E 's/.*"bf16_matmul":\{"reason":"([^"]*)","value":"([^"]*)"\}.*/\1/')
    fi
    rm -f "$out"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); bf16 flags: $(grep -m1 -o -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | xargs echo) (none listed = none)"
echo "model $model, seq $seq, micro-batch $mb, $threads thread(s), median of $rounds interleaved runs of $steps steps"
echo
echo "| precision | bf16_matmul | step s (median) |"
echo "|---|---|---|"
for row in "${rows[@]}"; do
  set -- $row
  echo "| $1 | $2 | $(echo "${times[$row]}" | median) |"
done
echo
echo "auto decided: $decided ($reason)"
