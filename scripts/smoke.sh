#!/usr/bin/env bash
# smoke.sh — runs every command the README's quick start and examples advertise, each with tiny
# settings (a few hundred samples, a few steps), and fails if one exits non-zero or gnuplot
# warns. It checks that they run and plot, not what they compute (tests/ does that). Like the
# commands themselves it writes into runs/. Once built: about 70 s on 2 idle cores (docs/results.md).
# CI runs it after the tests.
#   scripts/smoke.sh          # all of them
#   scripts/smoke.sh gpt      # only the commands whose line contains "gpt"
set -euo pipefail
cd "$(dirname "$0")/.."
filter=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()

# check COMMAND...: runs it from the repository root; a non-zero exit or a gnuplot warning
# ("Warning: empty x range", "line 9: warning: ...") fails it and shows its last lines.
check() {
  [[ -z $filter || "$*" == *"$filter"* ]] || return 0
  local start=$SECONDS status=0
  "$@" >"$work/log" 2>&1 || status=$?
  if ((status == 0)) && ! grep -qE '^Warning: |line [0-9]+: warning:' "$work/log"; then
    printf 'ok   %3d s  %s\n' $((SECONDS - start)) "$*"
  else
    printf 'FAIL %3d s  %s  (exit %d)\n' $((SECONDS - start)) "$*" "$status"
    tail -n 15 "$work/log" | sed 's/^/       | /'
    failed+=("$*")
  fi
}

echo "smoke: building the examples"
AMPGRAD_QUIET=1 scripts/build.sh mnist amp_step underflow memory gpt

# The quick start's trainer and the flags the README passes through it: 2 epochs of 256 samples.
tiny=(--epochs 2 --limit-train 256 --limit-test 256)
check scripts/run-mnist.sh "${tiny[@]}"
for flags in "--amp off" "--amp bf16" "--model cnn" "--model cnn-bn" "--model cnn-gn" "--dataset fashion" \
             "--data data-cache/mnist" "--optimizer adam" "--accum-steps 2" "--clip-grad 1.0" "--grad-penalty 1" \
             "--fgsm 0.1" "--float8" "--autocast-log" "--profile" "--memory-peak" "--checkpoint 2"; do
  # shellcheck disable=SC2086  # the flags split into words on purpose
  check scripts/run-mnist.sh "${tiny[@]}" $flags
done
check scripts/run-mnist.sh --amp-policy
check scripts/run-mnist.sh --epochs 1 --limit-train 256 --limit-test 256 --save "$work/mnist.safetensors"
check scripts/run-mnist.sh "${tiny[@]}" --resume "$work/mnist.safetensors" --save "$work/mnist.safetensors"
check build/examples/mnist --help
check scripts/run-mnist.sh "${tiny[@]}" --profile-trace "$work/mnist-trace.json"
check test -s "$work/mnist-trace.json"

# The five programs that teach by showing, and their plots.
check build/examples/amp_step --steps 2
rm -f runs/underflow.csv
check build/examples/underflow --steps 30
check test -s runs/underflow.csv  # written without asking, so the plot does not train again
check scripts/plot-underflow.sh
check build/examples/memory --at-peak --steps 1 --blocks 4 --width 128 --batch 256 --timeline runs/memory-timeline.dat
check scripts/plot-memory.sh
gpt_tiny=(--steps 6 --eval-every 3 --eval-batches 2 --sample 40)
for flags in "--amp bf16" "--amp off" "--amp fp16" "--autocast-log" "--profile" "--checkpoint 2" "--accum-steps 2"; do
  # shellcheck disable=SC2086
  check build/examples/gpt "${gpt_tiny[@]}" $flags
done
check build/examples/gpt "${gpt_tiny[@]}" --profile-trace "$work/gpt-trace.json"
check build/examples/gpt "${gpt_tiny[@]}" --stop-after 3 --save "$work/gpt.safetensors"
check build/examples/gpt "${gpt_tiny[@]}" --resume "$work/gpt.safetensors"

# Data-parallel, as the README runs it: 2 ranks under mpirun, where distributed/ was built (MPI found).
if grep -q '^AMPGRAD_WITH_DISTRIBUTED:INTERNAL=ON' build/CMakeCache.txt; then
  mpirun=(mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS=1)
  [ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)
  check "${mpirun[@]}" build/examples/mnist --ddp --batch-size 128 "${tiny[@]}"
  check "${mpirun[@]}" build/examples/gpt --ddp "${gpt_tiny[@]}"
else
  echo "skip      the mpirun commands: this build has no distributed/ (no MPI found)"
fi

if ((${#failed[@]})); then
  echo "smoke: ${#failed[@]} command(s) failed"
  exit 1
fi
echo "smoke: every command ran, ${SECONDS} s"
