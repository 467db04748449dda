#!/usr/bin/env bash
# test.sh — the README's test command: install what is missing, build, run every doctest
# suite through ctest. Tests that need a GPU report themselves skipped on a CPU-only machine.
# Arguments go to ctest (-R test_ops); AMPGRAD_CUDA=ON (as CI sets it) builds the CUDA backend
# even without a GPU to run it (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The real data sets make a few more tests run; without network they report themselves skipped.
scripts/get-data.sh || echo "test.sh: could not fetch the MNIST digits; their tests will be skipped"
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc 2>/dev/null || echo 2)" "$@"
