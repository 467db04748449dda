#!/usr/bin/env bash
# gpu-check.sh — everything that needs a GPU, in one run on a fresh GPU machine (< 8 minutes):
# configure and build for sm_90, the whole ctest suite (CPU and CUDA cases), MNIST on CUDA in
# float32, float16 + GradScaler and bfloat16, then the speed of one training step of a
# 4 x 4096 MLP at batch 2048 in each precision, beside PyTorch's when torch is installed.
# Prints each stage's wall time; a failing stage is reported and the later ones still run, and
# each stage after the build has a time limit (exit 124 in the table), so a kernel that hangs
# costs minutes, not the machine's whole lease. The logs (ctest's, both benchmarks', the stage
# table) go to $OUT/gpu-check when the device tool sets OUT, so they come back; else to the
# build folder.
# After failed tests, their suites run again under compute-sanitizer (memcheck.log).
# The GPU machine reaches no package registry: stage the build's libraries here with
# scripts/gpu-deps.sh and the MNIST data with scripts/get-data.sh, then carry both folders.
#
#   scripts/gpu-deps.sh && scripts/get-data.sh     # here, once
#   device run, carry [".gpu-deps", "data-cache"]: scripts/gpu-check.sh
#   BUILD_DIR=build-x scripts/gpu-check.sh         # builds in build-gpu by default
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu}
jobs=$(nproc 2>/dev/null || echo 16)  # 16 on the H200 machines
log=${OUT:-$build}/gpu-check
summary=() failed=() skipped=()

# timed NAME CMD...: runs CMD, prints and records its wall time, and notes a failure (or a
# skip: CMD exits 77 when the stage cannot run here).
timed() {
  local name=$1 t0 t1 rc=0 line
  shift
  echo
  echo "=== $name"
  t0=$(date +%s.%N)
  "$@" || rc=$?
  t1=$(date +%s.%N)
  line=$(awk -v a="$t0" -v b="$t1" -v n="$name" -v rc="$rc" \
    'BEGIN { printf "%-28s %7.1f s%s", n, b - a, rc == 77 ? "   SKIPPED" : rc ? "   FAILED (exit " rc ")" : "" }')
  echo "--- $line"
  summary+=("$line")
  if ((rc == 77)); then skipped+=("$name"); elif ((rc != 0)); then failed+=("$name"); fi
  return 0
}

run_ctest() {
  (cd "$build" && ctest --output-on-failure --timeout 120 -j"$jobs" 2>&1) | tee "$log/ctest.log"
  local rc=${PIPESTATUS[0]}
  # With a GPU present, a skipped CUDA case means the tests did not see it: that is a failure.
  if grep -qE "(test_cuda:|\(cuda\) ).*Skipped" "$log/ctest.log"; then
    echo "CUDA test cases were skipped although this machine should have a GPU; the tests say why:"
    "$build"/tests/test_tensor -tc='*(cuda)' 2>&1 | grep -m1 "SKIPPED" | tee -a "$log/ctest.log"
    return 1
  fi
  return "$rc"
}

# After a failed ctest: the (first three) suites with failing cases again, CUDA cases only, under
# compute-sanitizer's memcheck, which names the kernel and the bad access a failure may come
# from (an illegal address poisons the whole process, so later cases fail with it). This run's
# log is the evidence; its exit status says nothing more than ctest's did.
memcheck() {
  if ! command -v compute-sanitizer >/dev/null; then
    echo "no compute-sanitizer on this machine"
    return 77
  fi
  local suites
  suites=$(sed -n '/tests FAILED:/,$p' "$log/ctest.log" | grep -oE 'test_[a-z_]+:' | tr -d ':' | sort -u | head -3)
  for suite in $suites; do
    echo "--- $suite"
    timeout 120 compute-sanitizer --tool memcheck --print-limit 20 "$build/tests/$suite" --test-case-exclude='*(cpu)' || true
  done 2>&1 | tee "$log/memcheck.log"
}

mnist() {  # mnist AMP: two epochs of the MLP on the GPU
  if [ ! -d data-cache/mnist ]; then
    echo "no data-cache/mnist here (scripts/get-data.sh, then carry data-cache)"
    return 77
  fi
  timeout 180 "$build/examples/mnist" --device cuda --amp "$1" --epochs 2
}

benchmark() {
  if [ ! -x "$build/bench/gpu_step" ]; then
    echo "bench/gpu_step was not built (bench/ is configured only where Google Benchmark is installed)"
    return 1
  fi
  timeout 180 "$build/bench/gpu_step" | tee "$log/ampgrad.txt"
  local rc=${PIPESTATUS[0]}
  ((rc == 0)) || return "$rc"
  : >"$log/torch.txt"
  if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    timeout 300 python3 bench/torch_gpu_step.py | tee "$log/torch.txt"
  else
    echo "PyTorch with CUDA is not installed: ampgrad alone"
  fi
  echo
  awk '
    { ms[$1 " " $2] = $3 }
    END {
      printf "%-10s %14s %14s %14s %16s\n", "precision", "ampgrad ms", "torch ms", "ampgrad/torch", "speedup vs fp32"
      split("fp32 fp16 bf16", p, " ")
      for (i = 1; i <= 3; ++i) {
        a = ms["ampgrad " p[i]]; t = ms["torch " p[i]]
        printf "%-10s %14s %14s %14s %16s\n", p[i], a, (t ? t : "-"), (t ? sprintf("%.2f", a / t) : "-"),
               (a ? sprintf("%.2f", ms["ampgrad fp32"] / a) : "-")
      }
    }' "$log/ampgrad.txt" "$log/torch.txt" | tee "$log/table.txt"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
{ g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1; } || true
mkdir -p "$log"
deps=() generator=()
if [ -d .gpu-deps/root ]; then  # staged by scripts/gpu-deps.sh: searched before the system
  root=$PWD/.gpu-deps/root/usr
  deps=("-DCMAKE_PREFIX_PATH=$root;$root/lib/x86_64-linux-gnu")
fi
if command -v ninja >/dev/null; then generator=(-G Ninja); fi  # the GPU image has ninja, maybe no make
timed "configure (sm_90)" cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DAMPGRAD_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 "${deps[@]}"
timed "build (-j$jobs)" cmake --build "$build" -j"$jobs"
if ((${#failed[@]} == 0)); then
  timed "ctest (CPU + CUDA)" run_ctest
  if grep -q "tests FAILED:" "$log/ctest.log"; then timed "memcheck of failing suites" memcheck; fi
  timed "mnist cuda fp32" mnist off
  timed "mnist cuda fp16 + scaler" mnist fp16
  timed "mnist cuda bf16" mnist bf16
  timed "benchmark (MLP step)" benchmark
fi

{
  echo
  echo "=== stages"
  printf '%s\n' "${summary[@]}"
  if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; fi
  if ((${#skipped[@]})); then echo "SKIPPED: ${skipped[*]}"; fi
  if ((${#failed[@]} == 0)); then echo "no stage failed"; fi
} | tee "$log/stages.txt"
((${#failed[@]} == 0))
