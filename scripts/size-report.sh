#!/usr/bin/env bash
# size-report.sh — how big ampgrad is, measured like its speed: library lines per folder, the
# largest files, the engine, the README, for each extra (an edge) the core files that name it, and
# how many files the op recipe's worked example (silu) touches. Beside raw lines (which the
# per-file budget counts), code lines: neither blank nor only a comment, so that splitting a file
# or writing a comment costs nothing and the core's code is what its budget measures.
#   scripts/size-report.sh            # this checkout
#   scripts/size-report.sh --check    # ... and exit 1 if a budget below is broken
# The core is what one AMP step on the CPU runs through: tensor/, autograd/, amp/, nn/, optim/,
# less the backends (tensor/cpu, tensor/cuda) and the edges' own files (FP8, MemoryHistory,
# Profile, the trace writer, checkpoint, functional, oneDNN), counted as the before-stop hook
# counts it (a code line: neither blank nor a // comment); diagnostics/ (the skip explainer and
# its locator) is an edge folder of its own. Budgets: core code lines ≤ 5402, no library file
# over 300 lines, engine.cpp ≤ 200, README ≤ 300, each extra named by ≤ 3 core files outside its
# own, and the op recipe's examples — silu (a composite) and leaky_relu (a fused kernel with a
# scalar argument) — each in ≤ 3 library files plus the OpInfo file.
set -euo pipefail
cd "$(dirname "$0")/.."
check=${1:-}
src='\.(h|cpp|cu|cuh|inc|def)$'
lines() { cat "$@" 2>/dev/null | wc -l; }
# lines that hold code: not blank, not a // comment, not inside or a line of a /* */ comment
code_lines() {
  cat "$@" 2>/dev/null | awk '{ t = $0; sub(/^[ \t]+/, "", t) }
    block { if (t ~ /\*\//) block = 0; next }
    t ~ /^\/\*/ { if (t !~ /\*\//) block = 1; next }
    t != "" && t !~ /^\/\// { n++ } END { print n + 0 }'
}
library() { git ls-files -co --exclude-standard tensor autograd amp nn optim data distributed diagnostics | grep -E "$src" | grep -v '/tests/' || true; }
edges='(^|/)(float8|memory_history|profile|trace|checkpoint|functional)\.|/onednn/|^tensor/(cpu|cuda)/'
core() { library | grep -E '^(tensor|autograd|amp|nn|optim)/' | grep -v -E "$edges" || true; }
core_budget=5402
fail=0

echo "== library lines per folder"
for d in tensor/cpu tensor/cuda tensor autograd amp nn optim data distributed diagnostics examples tests bench; do
  files=$(git ls-files -co --exclude-standard "$d" | grep -E "$src" || true)
  [ "$d" = tensor ] && files=$(grep -v -E '^tensor/(cpu|cuda)/' <<<"$files" || true)
  [ -n "$files" ] && printf '  %-14s %6d\n' "$d" "$(lines $files)"
done
printf '  %-14s %6d   (code lines: %d)\n' "library" "$(lines $(library))" "$(code_lines $(library))"
core_code=$(cat $(core) | grep -v -E '^\s*$' | grep -v -c -E '^\s*//')
printf '  %-14s %6d   (code lines: %d, budget %d)\n' "core" "$(lines $(core))" "$core_code" "$core_budget"
((core_code > core_budget)) && fail=1

echo "== largest library files (budget 300)"
for f in $(library); do echo "$(lines "$f") $f"; done | sort -rn | head -8 | while read -r n f; do
  printf '  %6d %s%s\n' "$n" "$f" "$( ((n > 300)) && echo '   OVER')"
done
over=$(for f in $(library); do (($(lines "$f") > 300)) && echo "$f"; done || true)
[ -n "$over" ] && fail=1

echo "== engine"
walk=$(awk '/^void run_backward\(/{on=1} on{n++} on&&/^}/{print n; exit}' autograd/engine.cpp)
printf '  %-32s %4d  (budget 200)\n' "autograd/engine.cpp" "$(lines autograd/engine.cpp)"
printf '  %-32s %4s  (budget 60)\n' "run_backward" "${walk:-?}"
(($(lines autograd/engine.cpp) > 200)) && fail=1
((${walk:-999} > 60)) && fail=1

echo "== README"
printf '  %-32s %4d lines, %d words  (budget 300 lines)\n' README.md "$(lines README.md)" "$(wc -w <README.md)"
(($(lines README.md) > 300)) && fail=1

# extra ; what names it (a regex) ; its own files (a regex over paths)
extras=(
  "float8;float8|Float8|fp8|FP8;(^|/)float8"
  "memory history;MemoryHistory|memory_history;(^|/)memory_history"
  "profile;Profile\\b|profile\\.h;(^|/)profile\\."
  "checkpoint;autograd/checkpoint|autograd::checkpoint|checkpoint_sequential;^autograd/checkpoint"
  "functional;autograd/functional|functional::(jacobian|hessian|vjp|jvp|hvp);^autograd/functional"
  "oneDNN;onednn|dnnl|oneDNN;/onednn/"
  "trace;TraceWriter|diagnostics/trace\\.h|nvtx|NVTX;(^|/)trace\\."
  "distributed;distributed/|DistributedDataParallel|ProcessGroup;^distributed/"
  "diagnostics;SkipWatch|NonFiniteLocator|diagnostics/;^diagnostics/"
)
echo "== extras: core files outside their own that name them (goal <= 3)"
for e in "${extras[@]}"; do
  IFS=';' read -r name pattern own <<<"$e"
  mine=$(core | grep -v -E "$own" | xargs grep -l -E "$pattern" 2>/dev/null || true)
  n=$(grep -c . <<<"$mine" || true)
  printf '  %-16s %3d  %s\n' "$name" "$n" "$(tr '\n' ' ' <<<"$mine")"
done
# The op recipe: each worked example in at most three library files plus the OpInfo file, as
# `git grep -lw NAME` finds them (docs, benchmarks and the other tests aside).
echo "== op recipe (budget 3 library files + the OpInfo file)"
for op in silu leaky_relu; do
  files=$(git grep -lw "$op" -- $(library) tests/test_opinfo.cpp || true)
  lib=$(grep -c -v '^tests/' <<<"$files" || true)
  printf '  %-16s %d + %d files  %s\n' "$op" "$lib" "$(grep -c '^tests/' <<<"$files" || true)" "$(tr '\n' ' ' <<<"$files")"
  ((lib > 3)) && fail=1
  grep -q '^tests/test_opinfo.cpp$' <<<"$files" || fail=1  # no OpInfo entry: untested
done

if [ "$check" = --check ] && ((fail)); then echo "size-report: a budget is broken (above)"; exit 1; fi
