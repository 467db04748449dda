#!/usr/bin/env bash
# clang-tree.sh — configures build-asan once: the clang 14 tree (ASan + UBSan, -O1, CUDA and
# distributed/ off) that scripts/sanitize.sh runs the suites in and scripts/fuzz.sh builds its
# libFuzzer harnesses in. One tree, so CI compiles the library under clang once, not twice: its
# objects carry libFuzzer's coverage (fuzzer-no-link), which the suites run with and ignore.
# Debug info is line tables only, all a sanitizer's stack trace reads (full -g compiles 10% slower);
# -fdebug-prefix-map writes the source tree as "." in it, so that ccache reuses these objects in
# another clone (with the build directory's path in the debug info, ccache keys them by it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --clang
grep -qs '^AMPGRAD_FUZZ:BOOL=ON' build-asan/CMakeCache.txt ||  # a tree of the sanitizers alone predates the fuzzers here
  cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug -DAMPGRAD_CUDA=OFF -DAMPGRAD_DISTRIBUTED=OFF \
    -DAMPGRAD_FUZZ=ON -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -DCMAKE_CXX_FLAGS="-O1 -fsanitize=fuzzer-no-link,address,undefined \
-fno-omit-frame-pointer -fno-sanitize-recover=all -fdebug-prefix-map=$PWD=." >/dev/null
