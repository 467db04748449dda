#!/usr/bin/env bash
# gpu-check.sh [--quick] — everything that needs a GPU, in one run on a fresh GPU machine.
# The full check (< 7 minutes; 108 s on an H200 on 2026-12-04, before the mutant stage, the build
# 54 s of it): configure and build for sm_90; the whole ctest suite (CPU and CUDA cases), and after
# failed tests the first failing suite again under compute-sanitizer with the caching allocator
# off (memcheck.log); the speed of one training step in each precision, of a 4 x 4096 MLP at batch
# 2048 and of a 6 x 384 GPT at block 256 and batch 64 (bench/gpu_step.cpp), beside PyTorch's when
# torch is installed (bench/torch_gpu_step.py); MNIST on CUDA in float32, float16 + GradScaler and
# bfloat16; the memory example on CUDA (memory.txt); NCCL with one rank, its collectives and mnist
# --ddp (nccl.log, where MPI is installed); the character GPT on CUDA under fp16 + GradScaler
# (gpt.txt); and last, a stage of its own, the GPU mutants: each wrong CUDA kernel of
# tests/mutants/ ("# device: cuda") built and shown to fail its case (scripts/mutants.sh --gpu,
# mutants.txt; it leaves the build folder with the last mutant's objects).
# --quick (4 minutes from a cold start, the build included: its budget): builds only the suites
# that have a CUDA case, mnist and gpu_step, and runs every CUDA case and the NCCL cases, the
# MLP's AMP step benchmark, one MNIST fp16 epoch on CUDA and the NCCL stage; the rest is listed
# as not run. Run it first: it leaves time for a fix and the full check in 15 minutes of GPU.
# Prints each stage's wall time; a failing stage is reported and the later ones still run. The
# whole run has a budget (GPU_CHECK_BUDGET_S: 420 s, 240 s with --quick; the device tool stops a
# command at 600 s) and every stage after configure a time limit within it (exit 124 in the
# table), so a kernel that hangs costs minutes, not the machine's whole lease; a stage that would
# get under 30 s is not started. At the end it lists every stage that did not run, and why. The
# logs (ctest's, memcheck's, mnist's, both benchmarks', the mutants', the step table, the stage
# table written as each stage ends) go to $OUT/gpu-check when the device tool sets OUT, so they
# come back, packed at the end into $OUT/gpu-check.tgz (the tool returns at most 8 files; a run
# stopped before its end leaves them loose); else to the build folder. The step table is written
# whatever failed: PyTorch's column needs no build. Without a GPU it says so and stops (exit 77).
# The GPU machine reaches no package registry: stage the build's libraries here with
# scripts/gpu-deps.sh and the MNIST data with scripts/get-data.sh, then carry both folders.
#
#   scripts/gpu-deps.sh && scripts/get-data.sh     # here, once
#   device run, carry [".gpu-deps", "data-cache"]: scripts/gpu-check.sh --quick, then scripts/gpu-check.sh
#   BUILD_DIR=build-x scripts/gpu-check.sh         # builds in build-gpu by default
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case ${1:-} in
  --quick) quick=1 ;;
  "") ;;
  *) echo "gpu-check.sh: unknown argument '$1' (--quick, or none for the full check)" >&2; exit 2 ;;
esac
build=${BUILD_DIR:-build-gpu}
jobs=$(nproc 2>/dev/null || echo 16)  # 16 on the H200 machines
log=${OUT:-$build}/gpu-check
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-$((quick ? 240 : 420))}))
failed=() skipped=() not_run=()
stage_out=$(mktemp)
trap 'rm -f "$stage_out"' EXIT
[ -d /usr/local/cuda/bin ] && PATH=/usr/local/cuda/bin:$PATH  # nvcc, compute-sanitizer

# limit CAP: the seconds a stage may run, CAP or what the budget has left (less 30 s: 10 for
# timeout's kill, 20 to write the tables), whichever is smaller.
limit() {
  local left=$((deadline - SECONDS - 30))
  echo $((left < $1 ? left : $1))
}

# timed NAME CMD...: runs CMD, prints its wall time and appends it to stages.txt, and notes a
# failure (or a skip: CMD exits 77 when the stage cannot run here, its last line saying why). A
# stage whose limit would be under 30 s is not started, and that counts as a failure.
timed() {
  local name=$1 t0 t1 rc=0 line
  shift
  echo
  echo "=== $name"
  t0=$(date +%s.%N)
  if (($(limit 30) < 30)); then
    echo "not started: the time budget is spent"
    rc=125
  else
    "$@" 2>&1 | tee "$stage_out" || rc=$?
  fi
  t1=$(date +%s.%N)
  line=$(awk -v a="$t0" -v b="$t1" -v n="$name" -v rc="$rc" \
    'BEGIN { printf "%-34s %7.1f s%s", n, b - a, rc == 77 ? "   SKIPPED" : rc == 125 ? "   NOT RUN (budget spent)" : rc ? "   FAILED (exit " rc ")" : "" }')
  echo "--- $line"
  echo "$line" >>"$log/stages.txt"
  if ((rc == 77)); then
    skipped+=("$name")
    not_run+=("$name: skipped, $(tail -n 1 "$stage_out")")
  elif ((rc == 125)); then
    failed+=("$name")
    not_run+=("$name: the time budget was spent")
  elif ((rc != 0)); then
    failed+=("$name")
  fi
  return 0
}

# stage NAME CMD...: timed, where the build succeeded; else listed as not run.
stage() { if ((built)); then timed "$@"; else not_run+=("$1: nothing was built (configure or build failed)"); fi; }
# full_stage NAME CMD...: a stage of the full check alone; --quick lists it as not run.
full_stage() { if ((quick)); then not_run+=("$1: not in --quick"); else stage "$@"; fi; }

# The cases --quick runs: every one a GPU runs (a "(cuda)" case, test_cuda*'s, a "CUDA ..." or
# "cuda::..." name, the NCCL cases and a rank's device), and none of a suite it did not build.
quick_cases='cuda|CUDA|NCCL|GPU|test_rank_device'
# The targets --quick builds: each suite with such a case (a device parameter, or a skip without
# a GPU or without enough of them), test_cuda_host (its name matches), mnist for the epoch and
# gpu_step for the AMP step.
quick_targets() {
  grep -lE 'DEVICE_TEST_CASE\(|SKIP_WITHOUT_GPU|SKIP_TEST_IF\(cuda::device_count' tests/test_*.cpp distributed/tests/test_*.cpp |
    xargs -n1 basename | sed 's/\.cpp$//'
  echo test_cuda_host mnist gpu_step
}

run_ctest() {
  # The slowest case takes seconds (a CPU training test ran past 60 s only while every case
  # started a thread per core); 120 s each, and the stage as a whole at most 240 s.
  local select=()
  ((quick)) && select=(-R "$quick_cases" -E '_NOT_BUILT-')
  (cd "$build" && timeout -k 10 "$(limit 240)" ctest --output-on-failure --timeout 120 -j"$jobs" "${select[@]}" 2>&1) | tee "$log/ctest.log"
  local rc=${PIPESTATUS[0]}
  ((rc == 124 || rc == 137)) && { echo "ctest stopped at its time limit"; return "$rc"; }
  # With a GPU present, a skipped CUDA case means the tests did not see it: that is a failure.
  if grep -qE "(test_cuda:|\(cuda\) ).*Skipped" "$log/ctest.log"; then
    echo "CUDA test cases were skipped although this machine should have a GPU; the tests say why:"
    "$build"/tests/test_tensor -tc='*(cuda)' 2>&1 | grep -m1 "SKIPPED" | tee -a "$log/ctest.log"
    return 1
  fi
  return "$rc"
}

# After a failed ctest: the first suite with failing cases (test_cuda if it is one) again, CUDA
# cases only, under compute-sanitizer's memcheck, which names the kernel, the source line
# (-lineinfo) and the bad access a failure may come from (an illegal address poisons the whole
# process, so later cases fail with it). The caching allocator is off for it, so every tensor is
# its own exact-size cudaMalloc and an access past its end is seen. The log is the evidence; its
# exit status says nothing more than ctest's did.
memcheck() {
  if ! command -v compute-sanitizer >/dev/null; then
    echo "no compute-sanitizer on this machine"
    return 77
  fi
  local suites suite
  suites=$(sed -n '/tests FAILED:/,$p' "$log/ctest.log" | grep -oE 'test_[a-z_]+:' | tr -d ':' | sort -u)
  suite=$(grep -qx test_cuda <<<"$suites" && echo test_cuda || head -1 <<<"$suites")
  [ -n "$suite" ] || { echo "ctest failed, but no failing case is listed"; return 77; }
  echo "--- $suite"
  AMPGRAD_NO_CUDA_MEMORY_CACHING=1 timeout -k 10 "$(limit 90)" compute-sanitizer --tool memcheck --print-limit 20 \
    "$build/tests/$suite" --test-case-exclude='*(cpu)' 2>&1 | tee "$log/memcheck.log" || true
}

mnist() {  # mnist AMP: epochs of the MLP on the GPU, two (one with --quick) (mnist AMP [FLAGS...])
  if [ ! -d data-cache/mnist ]; then
    echo "no data-cache/mnist here (scripts/get-data.sh, then carry data-cache)"
    return 77
  fi
  echo "=== --amp $*" >>"$log/mnist.log"
  timeout -k 10 "$(limit 120)" "$build/examples/mnist" --device cuda --amp "$1" "${@:2}" --epochs $((quick ? 1 : 2)) 2>&1 | tee -a "$log/mnist.log"
  return "${PIPESTATUS[0]}"
}

memory() {  # the memory example on the GPU: held and peak bytes through the caching allocator
  timeout -k 10 "$(limit 60)" "$build/examples/memory" --device cuda --steps 5 | tee "$log/memory.txt"
  return "${PIPESTATUS[0]}"
}

gpt() {  # the character GPT under fp16 + GradScaler, on this README: a text every checkout has
  timeout -k 10 "$(limit 60)" "$build/examples/gpt" --device cuda --amp fp16 --text README.md --steps 300 --eval-every 100 \
    --sample 200 | tee "$log/gpt.txt"
  local rc=${PIPESTATUS[0]}
  ((rc == 0)) || return "$rc"
  # it must have learnt: the last val_loss a number, and below the first evaluation's
  awk '/^step/ { v = $6; if (first == "") first = v }
       END { ok = v ~ /^[0-9]+\.[0-9]+$/ && first ~ /^[0-9]+\.[0-9]+$/ && v + 0 < first + 0
             if (!ok) print "gpt: val_loss went from " first " to " v ": no learning on the GPU"
             exit !ok }' "$log/gpt.txt"
}

nccl() {  # the NCCL path with one rank: one GPU here, and multi-rank NCCL needs a GPU per rank
  if [ ! -x "$build/distributed/test_collectives" ]; then
    echo "distributed/ was not built (CMake found no MPI on this machine), so the NCCL path cannot run"
    return 77
  fi
  if [ ! -d data-cache/mnist ]; then
    echo "no data-cache/mnist here (scripts/get-data.sh, then carry data-cache)"
    return 77
  fi
  local mpirun=(mpirun -np 1) rc
  [ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)
  { timeout -k 10 "$(limit 60)" "${mpirun[@]}" "$build/distributed/test_collectives" --test-case='*NCCL*' &&
    timeout -k 10 "$(limit 60)" "${mpirun[@]}" "$build/examples/mnist" --ddp --device cuda --amp fp16 --epochs 1; } 2>&1 | tee "$log/nccl.log"
  rc=${PIPESTATUS[0]}
  ! grep -q "SKIPPED" "$log/nccl.log" || { echo "the NCCL case skipped itself on a GPU machine"; return 1; }
  return "$rc"
}

mutants() {  # the GPU mutants: each wrong kernel must make its case fail (mutants.sh --gpu)
  if ! command -v git >/dev/null && ! command -v patch >/dev/null; then
    echo "neither git nor patch on this machine: the mutants cannot be applied"
    return 77
  fi
  BUILD_DIR=$build timeout -k 10 "$(limit 300)" scripts/mutants.sh --gpu 2>&1 | tee "$log/mutants.txt"
  return "${PIPESTATUS[0]}"
}

bench_ampgrad() {  # bench_ampgrad MODEL: gpu_step's three precisions of MODEL (mlp or gpt)
  if [ ! -x "$build/bench/gpu_step" ]; then
    echo "bench/gpu_step was not built"
    return 1
  fi
  timeout -k 10 "$(limit 180)" "$build/bench/gpu_step" --model "$1" | tee -a "$log/ampgrad.txt"
  return "${PIPESTATUS[0]}"
}

bench_torch() {  # bench_torch MODEL: the PyTorch twin (F.scaled_dot_product_attention, fused AdamW)
  if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "PyTorch with CUDA is not installed: ampgrad alone"
    return 77
  fi
  timeout -k 10 "$(limit 240)" python3 bench/torch_gpu_step.py --model "$1" | tee -a "$log/torch.txt"
  return "${PIPESTATUS[0]}"
}

# The step table from whatever lines the two benchmarks printed ("<library> <model> <precision>
# <ms>"; "-" where one is missing): per model and precision, both medians and their ratio.
step_table() {
  awk '
    { ms[$1 " " $2 " " $3] = $4 }
    END {
      printf "%-5s %-10s %12s %12s %14s %16s\n", "model", "precision", "ampgrad ms", "torch ms", "ampgrad/torch", "speedup vs fp32"
      split("mlp gpt", m, " "); split("fp32 fp16 bf16", p, " ")
      for (j = 1; j <= 2; ++j)
        for (i = 1; i <= 3; ++i) {
          a = ms["ampgrad " m[j] " " p[i]]; t = ms["torch " m[j] " " p[i]]; a32 = ms["ampgrad " m[j] " fp32"]
          printf "%-5s %-10s %12s %12s %14s %16s\n", m[j], p[i], (a != "" ? a : "-"), (t != "" ? t : "-"),
                 (a != "" && t != "" ? sprintf("%.2f", a / t) : "-"), (a != "" && a32 != "" ? sprintf("%.2f", a32 / a) : "-")
        }
    }' "$log/ampgrad.txt" "$log/torch.txt" | tee "$log/table.txt"
}

if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "gpu-check.sh: no GPU here (nvidia-smi lists none): nothing of this check can run; run it on a GPU machine" >&2
  exit 77
fi
mkdir -p "$log"
for f in stages.txt ctest.log memcheck.log ampgrad.txt torch.txt mnist.log memory.txt nccl.log gpt.txt mutants.txt; do : >"$log/$f"; done
echo "gpu-check.sh$( ((quick)) && echo " --quick"): $(date -u '+%Y-%m-%d %H:%M UTC')" | tee "$log/stages.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$log/stages.txt" || true
{ g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1; } || true
deps=() generator=()
if [ -d .gpu-deps/root ]; then  # staged by scripts/gpu-deps.sh: searched before the system
  root=$PWD/.gpu-deps/root/usr
  deps=("-DCMAKE_PREFIX_PATH=$root;$root/lib/x86_64-linux-gnu")
  if [ -x "$root/bin/mpirun" ] && ! command -v mpirun >/dev/null; then  # the staged Open MPI, relocated
    export OPAL_PREFIX=$root PATH=$root/bin:$PATH
    export LD_LIBRARY_PATH=$root/lib/x86_64-linux-gnu/openmpi/lib:$root/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi
# NCCL: the CUDA toolkit's, which CMake finds by itself, else the one PyTorch's nvidia-nccl wheel ships
nccl=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(s.submodule_search_locations[0])" 2>/dev/null || true)
if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ] && ! ls /usr/local/cuda/include/nccl.h >/dev/null 2>&1; then
  deps+=("-DNCCL_INCLUDE_DIR=$nccl/include" "-DNCCL_LIBRARY=$(ls "$nccl"/lib/libnccl.so* | head -1)")
  export LD_LIBRARY_PATH=$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if command -v ninja >/dev/null; then generator=(-G Ninja); fi  # the GPU image has ninja, maybe no make
built=0
timed "configure (sm_90)" cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DAMPGRAD_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-lineinfo "${deps[@]}"
if ((${#failed[@]} == 0)); then
  targets=()
  if ((quick)); then for t in $(quick_targets); do targets+=(--target "$t"); done; fi
  timed "build (-j$jobs$( ((quick)) && echo ", quick targets"))" timeout -k 10 "$(limit 300)" cmake --build "$build" -j"$jobs" "${targets[@]}"
  built=$((${#failed[@]} == 0))
else
  not_run+=("build: configure failed")
fi
stage "ctest ($( ((quick)) && echo "CUDA and NCCL cases" || echo "CPU + CUDA"))" run_ctest
if grep -q "tests FAILED:" "$log/ctest.log"; then stage "memcheck of a failing suite" memcheck; else not_run+=("memcheck of a failing suite: no test failed"); fi
stage "benchmark ampgrad (MLP step)" bench_ampgrad mlp
full_stage "benchmark ampgrad (GPT step)" bench_ampgrad gpt
if ((quick)); then
  not_run+=("benchmark PyTorch (MLP step): not in --quick" "benchmark PyTorch (GPT step): not in --quick")
else
  timed "benchmark PyTorch (MLP step)" bench_torch mlp
  timed "benchmark PyTorch (GPT step)" bench_torch gpt
fi
full_stage "mnist cuda fp32" mnist off
stage "mnist cuda fp16 + scaler" mnist fp16
full_stage "mnist cuda bf16" mnist bf16
full_stage "memory example cuda" memory
stage "nccl 1 rank + mnist --ddp" nccl
full_stage "gpt cuda fp16 + scaler" gpt
full_stage "mnist cuda bf16 + float8" mnist bf16 --float8  # late: the budget goes to the figures above first
full_stage "mutants (GPU kernels that must fail)" mutants  # last: it leaves the build with a mutant's objects

echo
echo "=== training step, ms (median)"
step_table
echo
echo "=== stages"
cat "$log/stages.txt"
{
  if ((${#not_run[@]})); then
    echo "NOT RUN:"
    printf '  %s\n' "${not_run[@]}"
  fi
  if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; fi
  if ((${#skipped[@]})); then echo "SKIPPED: ${skipped[*]}"; fi
  if ((${#failed[@]} == 0)); then echo "no stage failed"; fi
} | tee -a "$log/stages.txt"
if [ -n "${OUT:-}" ]; then tar -czf "$OUT/gpu-check.tgz" -C "$OUT" gpu-check && rm -r "$log"; fi
((${#failed[@]} == 0))
