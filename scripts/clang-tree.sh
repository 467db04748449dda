#!/usr/bin/env bash
# clang-tree.sh — configures build-asan: the clang 14 tree (ASan + UBSan, -O1, CUDA, distributed/
# and the benchmarks off) that scripts/sanitize.sh runs the suites in and scripts/fuzz.sh builds its
# libFuzzer harnesses in. One tree, so CI compiles the library under clang once, not twice:
# - Its objects count the edges they run (libFuzzer's inline 8-bit counters), which the suites run
#   with and ignore. Only the loaders the harnesses parse with also trace every comparison
#   (tests/fuzz/CMakeLists.txt): tracing them all made the sanitized suites 3x slower.
# - Debug info is line tables only, all a sanitizer's stack trace reads (full -g compiles 10% slower);
#   -fdebug-prefix-map writes the source tree as "." in it, so that ccache reuses these objects in
#   another clone (with the build directory's path in the debug info, ccache keys them by it).
# - A unity build (CMake's, a few sources to a translation unit) parses Eigen and the library's
#   headers once per batch, not once per source. ./build stays one source to a translation unit, so
#   a file that leans on another's includes still fails there.
# - -Wno-pass-failed: at -O1 under the sanitizers clang does not vectorise, and would warn at every
#   instantiation of a loop marked `#pragma omp simd` (image.cpp's max pooling) that it did not.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --clang
flags="-O1 -fsanitize=address,undefined -fsanitize-coverage=inline-8bit-counters,pc-table -fno-omit-frame-pointer \
-fno-sanitize-recover=all -fdebug-prefix-map=$PWD=. -Wno-pass-failed"
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug -DAMPGRAD_CUDA=OFF -DAMPGRAD_DISTRIBUTED=OFF \
  -DAMPGRAD_BUILD_BENCH=OFF -DAMPGRAD_FUZZ=ON -DCMAKE_UNITY_BUILD=ON -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -DCMAKE_CXX_FLAGS="$flags" >/dev/null
