#!/usr/bin/env bash
# build.sh [TARGET...] — configures ./build once (Release, ccache) and builds the TARGETs (the
# mnist trainer, a test suite, ...) or, given none, everything. It shows CMake's own progress
# lines ([ 42%] Building ...); AMPGRAD_QUIET=1 hides them and shows a failed build's last lines.
# AMPGRAD_CUDA=AUTO|ON|OFF in the environment sets the CUDA backend: AUTO, the default, builds it
# only where nvcc and an NVIDIA driver are; CI passes ON, so it is compiled on every landing.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

cached_cuda=$(sed -n 's/^AMPGRAD_CUDA:STRING=//p' build/CMakeCache.txt 2>/dev/null || true)
if [[ ! -f build/CMakeCache.txt || ( -n ${AMPGRAD_CUDA:-} && ${AMPGRAD_CUDA:-} != "$cached_cuda" ) ]]; then
  echo "build.sh: configuring ./build (Release${AMPGRAD_CUDA:+, AMPGRAD_CUDA=$AMPGRAD_CUDA})"
  # Only ampgrad's own lines (vector flags, CUDA, oneDNN); CMake's errors go to stderr and show.
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${AMPGRAD_CUDA:+-DAMPGRAD_CUDA="$AMPGRAD_CUDA"} | { grep '^-- ampgrad:' || true; }
fi

targets=()
for t in "$@"; do targets+=(--target "$t"); done
if [[ -n ${AMPGRAD_QUIET:-} ]]; then
  cmake --build build -j"$jobs" "${targets[@]}" >build/build.log 2>&1 || { tail -n 40 build/build.log; exit 1; }
else
  cmake --build build -j"$jobs" "${targets[@]}"
fi
