#!/usr/bin/env bash
# consumer-check.sh [DIR] — builds examples/consumer, a project of its own, both ways another
# project can take ampgrad: find_package against what `cmake --install build` installs (the
# library of ./build, built first if needed), and add_subdirectory of this source tree, there
# with no build type set (ampgrad must leave it alone and build no tests or examples). Each
# program trains a few AMP steps; the check fails unless its loss falls to under half.
# Work goes to DIR (default build-consumer); CI runs this after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-consumer}
jobs=$(nproc 2>/dev/null || echo 2)
rm -rf "$out/prefix" "$out/installed"
mkdir -p "$out"

# trains PROGRAM: runs it and checks that its last loss is under half its first.
trains() {
  "$1" | tee "$out/run.log"
  awk '/loss/ { for (i = 1; i < NF; ++i) if ($i == "loss") v[n++] = $(i + 1) }
       END { if (n < 2 || v[n - 1] >= v[0] / 2) { print "consumer-check: the loss did not fall to half: " v[0] " -> " v[n - 1]; exit 1 } }' "$out/run.log"
}

echo "consumer-check: 1/2 find_package(ampgrad) against cmake --install build"
AMPGRAD_QUIET=1 scripts/build.sh ampgrad
cmake --install build --prefix "$out/prefix" >/dev/null
cmake -S examples/consumer -B "$out/installed" -DCMAKE_PREFIX_PATH="$PWD/$out/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$out/installed" -j"$jobs" >"$out/installed.log" 2>&1 || { tail -n 30 "$out/installed.log"; exit 1; }
trains "$out/installed/consumer"

echo "consumer-check: 2/2 add_subdirectory(ampgrad), no build type set (the library builds once, then only what changed)"
# A unity build (CMake's own switch, which a consumer may set for its whole tree): the -O0 library
# from a few translation units takes under a minute on 2 cores, not two.
cmake -S examples/consumer -B "$out/subdir" -DAMPGRAD_SOURCE_DIR="$PWD" -DCMAKE_UNITY_BUILD=ON >/dev/null
grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$out/subdir/CMakeCache.txt" || { echo "consumer-check: ampgrad set the consumer's build type"; exit 1; }
if grep -qE '^AMPGRAD_BUILD_(TESTS|EXAMPLES|BENCH):BOOL=ON' "$out/subdir/CMakeCache.txt"; then
  echo "consumer-check: ampgrad builds its tests, examples or benchmarks inside another project"
  exit 1
fi
cmake --build "$out/subdir" -j"$jobs" --target consumer >"$out/subdir.log" 2>&1 || { tail -n 30 "$out/subdir.log"; exit 1; }
trains "$out/subdir/consumer"
echo "consumer-check: both builds train"
