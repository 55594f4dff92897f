#!/usr/bin/env bash
# The Python stack's figures (bench/README.md, "The stack users run"): torch-reference
# eager vs torch.compile modes on one rank, hf-peft at ZeRO 0 and 2 (eager and compiled)
# on two ranks, the native trainer against torch-reference on two ranks (an executor axis), each through `bakeoff local` and the shipped allowlist, then the reporting
# library's overhead and the executor's against torchrun by hand. Prints the reports
# (markdown) and one JSON line per overhead. Needs a build and scripts/setup.
# Usage: bench/python/run.sh [OUTDIR]   (default: a new temp dir)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-$(mktemp -d /tmp/bakeoff-bench-python-XXXXXX)}"
mkdir -p "$out"
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
echo "# flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | xargs)"
# One worker for the one-rank sweep: two would run two trials at once on the 2 cores.
for run in torch-reference-modes:1 hf-peft-zero:2 native-vs-torch-reference:2; do
  sweep=${run%%:*}
  start=$(date +%s)
  ./build/bakeoff local "bench/python/$sweep.yaml" --workers "${run##*:}" --db "$out/$sweep.db" \
    --format markdown --output "$out/$sweep.md" > "$out/$sweep.log" 2>&1 || true
  echo "## $sweep ($(( $(date +%s) - start )) s)"
  cat "$out/$sweep.md"
done
scripts/python bench/python/report_overhead.py
scripts/python bench/python/executor_overhead.py --bakeoff build/bakeoff --out "$out"
