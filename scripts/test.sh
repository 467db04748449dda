#!/usr/bin/env bash
# test.sh — the README's test command: install what is missing, build, run every doctest
# suite through ctest. Tests that need a GPU report themselves skipped on a CPU-only machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc 2>/dev/null || echo 2)" "$@"
