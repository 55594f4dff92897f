#!/usr/bin/env bash
# The GPU benchmark of issue 15, for a machine with one NVIDIA GPU and its own PyTorch 2.x
# (no network needed): builds bakeoff-trainer alone against that PyTorch's LibTorch, then
# runs bench/gpu/bench.py (the native trainer and the Python workloads on a
# Llama-7B-shaped LoRA) and leaves everything in one directory. bench/gpu/README.md.
#
#   bench/gpu/run.sh [--out DIR] [--python PY] [--jobs N] [bench.py options...]
#
# Time limits (seconds, environment): BUILD_LIMIT_S 240 for the build, BENCH_LIMIT_S 360
# for the runs; the script ends within their sum plus a few seconds whatever happens
# (each step has its own timeout inside bench.py; `timeout -k` backs them up).
# --dry-run: no build, no GPU; prints what would run. --device cpu --tiny: the whole path
# on a CPU with the `tiny` model (a smoke test; bench/gpu/README.md).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/bench-gpu-$(date -u +%Y%m%dT%H%M%SZ)}
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
build_limit=${BUILD_LIMIT_S:-240}
bench_limit=${BENCH_LIMIT_S:-360}
build_dir=""
pass=()
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;  # an existing build: skip building
    --dry-run) dry=1; pass+=("$1"); shift ;;
    *) pass+=("$1"); shift ;;
  esac
done
mkdir -p "$out"
log() { echo "[bench/gpu $(date -u +%H:%M:%S)] $*" | tee -a "$out/run.log" >&2; }

log "out=$out python=$python jobs=$jobs limits: build ${build_limit}s, bench ${bench_limit}s"
{
  echo "date_utc: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  echo "commit: $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "cores: $(nproc)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    | sed 's/^/gpu: /'
  "$python" -c 'import torch; print("torch:", torch.__version__, "cuda:", torch.version.cuda, "cxx11_abi:", torch._C._GLIBCXX_USE_CXX11_ABI)' 2>&1
  for m in transformers peft deepspeed; do  # metadata only: importing deepspeed takes ~20 s
    "$python" -c "import importlib.metadata as m; print('$m:', m.version('$m'))" 2>/dev/null || echo "$m: absent"
  done
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt" >&2

trainer=""
if [ -n "$build_dir" ]; then
  trainer=$(cd "$build_dir" && pwd)/bakeoff-trainer
elif [ $dry = 0 ]; then
  prefix=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>>"$out/run.log")
  cuda=ON
  case " ${pass[*]} " in *" --device cpu "*) cuda=OFF ;; esac
  build_dir=$out/build
  log "building bakeoff-trainer against $prefix (CUDA $cuda), -j$jobs, limit ${build_limit}s"
  start=$(date +%s)
  # Gloo off: one GPU needs no CPU collectives, and this PyTorch's Gloo may not match the
  # vendored headers (experiments/trainer/third_party/gloo/README.md).
  if timeout -k 10 "$build_limit" bash -c "
      cmake -S '$repo' -B '$build_dir' -DCMAKE_BUILD_TYPE=Release -DBAKEOFF_TRAINER_ONLY=ON \
        -DBAKEOFF_BUILD_TESTS=OFF -DBAKEOFF_CUDA=$cuda -DBAKEOFF_GLOO=OFF -DBAKEOFF_TORCH_PREFIX='$prefix' \
        \$(command -v ninja >/dev/null && echo -G Ninja) &&
      cmake --build '$build_dir' -j '$jobs' --target bakeoff-trainer" > "$out/build.log" 2>&1; then
    log "built in $(( $(date +%s) - start ))s"
    trainer=$build_dir/bakeoff-trainer
  else
    log "build failed or timed out after $(( $(date +%s) - start ))s (tail of build.log below); the Python workloads still run"
    tail -n 30 "$out/build.log" >&2
  fi
fi

timeout -k 15 "$bench_limit" "$python" "$repo/bench/gpu/bench.py" --repo "$repo" --out "$out" \
  --trainer "${trainer:-}" --limit-s $((bench_limit - 10)) "${pass[@]}"
rc=$?
[ $rc = 124 ] && log "bench.py hit the overall limit (${bench_limit}s); results so far are in $out"
log "done (rc=$rc); results: $out/results.json, $out/results.md"
exit $rc
