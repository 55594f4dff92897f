#!/usr/bin/env bash
# Tokens/s of bakeoff-trainer against the same LoRA step in Python PyTorch (the project's
# venv, scripts/python: the same LibTorch 2.7.1 the trainer links), same thread count,
# same data and model.
# Usage: bench/trainer/compare_python.sh [BUILD_DIR] > table.md
# A 7th column adds trainer flags to the C++ side only (e.g. --bf16-matmul native: LibTorch's
# own bf16 kernels, the same ones the Python reference runs).
# Each configuration runs REPEATS times alternating C++ and Python (ABAB, cancels drift);
# the figure is the median of the runs' median step times. The last column is the median
# over the ABAB pairs of Python's step time over C++'s: each pair ran back to back, so a
# slow spell of the host hits both sides of it alike.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
threads=${THREADS:-2}
repeats=${REPEATS:-3}
warmup=${WARMUP:-3}  # optimizer steps before measuring, both trainers
py=${PYTHON:-scripts/python}  # the project's venv: the trainer's own LibTorch

# One configuration a line: model mode precision seq batch steps [C++-only flags].
# CONFIGS (same format) replaces the list, e.g. to rerun a few rows.
default_configs="tiny eager fp32 128 4 40
tiny jit fp32 128 4 40
tiny jit fp32 128 4 40 --jit-executor profiling
tiny eager bf16 128 4 40
tiny jit bf16 128 4 40
tiny eager bf16 128 4 40 --bf16-matmul native
small eager fp32 128 2 6
small jit fp32 128 2 6
small jit fp32 128 2 6 --jit-executor profiling
small eager bf16 128 2 6
small jit bf16 128 2 6
small eager bf16 128 2 4 --bf16-matmul native
"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Both trainers write JSON lines; Python's json.dumps puts a space after each colon.
summary_field() { grep -E '"event": ?"summary"' | sed -E "s/.*\"$1\": ?([0-9.e+-]+).*/\1/"; }

echo "| model | compile | precision | seq x batch | C++ tokens/s | Python tokens/s | C++/Python | pairs |"
echo "|---|---|---|---|---|---|---|---|"
while read -r model mode precision seq batch steps extra; do
  [ -z "$model" ] && continue
  cpp=(); pyv=()
  for _ in $(seq "$repeats"); do
    cpp+=("$("$build/bakeoff-trainer" --model "$model" --compile-mode "$mode" --precision "$precision" \
      --seq-len "$seq" --micro-batch "$batch" --steps "$steps" --warmup-steps "$warmup" --threads "$threads" \
      ${extra:-} 2>/dev/null | summary_field step_s_median)")
    if [ -z "${extra:-}" ]; then
      pyv+=("$("$py" experiments/python/reference_trainer.py --model "$model" --compile-mode "$mode" --precision "$precision" \
        --seq-len "$seq" --micro-batch "$batch" --steps "$steps" --warmup-steps "$warmup" --threads "$threads" \
        2>/dev/null | summary_field step_s_median)")
    fi
  done
  cpp_s=$(printf '%s\n' "${cpp[@]}" | median)
  tokens=$((seq * batch))
  cpp_tps=$(awk -v t="$tokens" -v s="$cpp_s" 'BEGIN {printf "%.0f", t / s}')
  if [ ${#pyv[@]} -gt 0 ]; then
    py_s=$(printf '%s\n' "${pyv[@]}" | median)
    echo "$py_s" > "/tmp/bakeoff-bench-py-$model-$mode-$precision-$seq-$batch"
  else
    py_s=$(cat "/tmp/bakeoff-bench-py-$model-$mode-$precision-$seq-$batch")
  fi
  py_tps=$(awk -v t="$tokens" -v s="$py_s" 'BEGIN {printf "%.0f", t / s}')
  ratio=$(awk -v a="$py_s" -v b="$cpp_s" 'BEGIN {printf "%.2f", a / b}')
  pairs="-"  # rows with C++-only flags reuse the Python runs of the row before: no pairs
  if [ ${#pyv[@]} -gt 0 ]; then
    pairs=$(for i in "${!cpp[@]}"; do awk -v a="${pyv[$i]}" -v b="${cpp[$i]}" 'BEGIN {print a / b}'; done |
      median | awk '{printf "%.2f", $1}')
  fi
  echo "| $model | $mode${extra:+ ($extra)} | $precision | ${seq} x ${batch} | $cpp_tps | $py_tps | $ratio | $pairs |"
done <<< "${CONFIGS:-$default_configs}"
