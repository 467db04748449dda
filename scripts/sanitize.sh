#!/usr/bin/env bash
# sanitize.sh — the test suites under AddressSanitizer and UndefinedBehaviorSanitizer: clang 14,
# -O1, CUDA and distributed/ off (Open MPI's own allocations would read as leaks), in build-asan,
# the tree scripts/clang-tree.sh configures (the fuzzers' too; benchmarks are not built). Any
# report fails its test: the sanitizers halt on the first one.
#   scripts/sanitize.sh            # what CI runs after scripts/test.sh
#   scripts/sanitize.sh -R test_ops   # extra arguments go to ctest
# From nothing on 2 cores: the tree builds in about 5.5 minutes, then its ctest takes 3.5 (docs/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/clang-tree.sh
jobs=$(nproc 2>/dev/null || echo 2)
# Everything the tree has (the suites, the programs they run, the fuzzers) in one parallel build:
# given a list of targets, make builds one after another, each on one core.
cmake --build build-asan -j"$jobs"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir build-asan --output-on-failure -j"$jobs" "$@"
