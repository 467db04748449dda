#!/usr/bin/env bash
# sanitize.sh — the test suites under AddressSanitizer and UndefinedBehaviorSanitizer: clang 14,
# -O1, CUDA and distributed/ off (Open MPI's own allocations would read as leaks), in build-asan
# (examples and benchmarks are not built; the tests link the two trainer libraries). Any report fails its test: the sanitizers halt on the first one.
#   scripts/sanitize.sh            # what CI runs after scripts/test.sh
#   scripts/sanitize.sh -R test_ops   # extra arguments go to ctest
# The whole suite runs: 57 s of ctest on 2 cores here, after a 10.5-minute build from nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --clang
jobs=$(nproc 2>/dev/null || echo 2)
[ -f build-asan/CMakeCache.txt ] ||
  cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug -DAMPGRAD_CUDA=OFF -DAMPGRAD_DISTRIBUTED=OFF \
    -DCMAKE_CXX_FLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" >/dev/null
suites=$(for f in tests/test_*.cpp; do basename "$f" .cpp; done | grep -v '^test_main$')
cmake --build build-asan -j"$jobs" --target $suites
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir build-asan --output-on-failure -j"$jobs" "$@"
