#!/usr/bin/env bash
# fuzz.sh — builds the libFuzzer harnesses of tests/fuzz/ (clang 14, ASan + UBSan, in
# build-asan beside the sanitized suites: scripts/clang-tree.sh), writes their seed corpora with
# the library's own writers, and runs each harness for N seconds (default 60) under a 256 MB
# memory limit, all at once. Prints the executions and findings of each; exits non-zero on any
# crash, leak, out-of-memory or timeout. Inputs the fuzzer found interesting stay in
# build-asan/fuzz/corpus/ for the next run; findings go to build-asan/fuzz/findings/.
#   scripts/fuzz.sh            # 60 s each
#   scripts/fuzz.sh 600        # ten minutes each
#   scripts/fuzz.sh 20 -seed=1 # extra arguments go to every libFuzzer run
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift $(($# > 0 ? 1 : 0))
scripts/clang-tree.sh
build=build-asan
cmake --build $build -j"$(nproc 2>/dev/null || echo 2)" --target fuzzers

out=$build/fuzz
rm -rf $out/seeds $out/findings  # a finding of an earlier run is in its log; this run reports its own
$build/tests/fuzz/fuzz_write_seeds $out/seeds >/dev/null
# A smaller ASan quarantine (default 256 MB) keeps freed memory from counting against the RSS limit.
export ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=16 UBSAN_OPTIONS=print_stacktrace=1 OMP_NUM_THREADS=1
export TMPDIR=${TMPDIR:-$([ -d /dev/shm ] && echo /dev/shm || echo /tmp)}  # the harnesses' scratch files
names=(idx safetensors training_state)
# The harnesses run at once, sharing the cores: N seconds in all, not 3N.
for name in "${names[@]}"; do
  mkdir -p $out/corpus/$name $out/findings/$name
  { rc=0
    $build/tests/fuzz/fuzz_$name $out/corpus/$name $out/seeds/$name -dict=tests/fuzz/$name.dict \
      -max_total_time="$seconds" -rss_limit_mb=256 -malloc_limit_mb=256 -timeout=10 -print_final_stats=1 \
      -artifact_prefix=$out/findings/$name/ "$@" >$out/$name.log 2>&1 || rc=$?
    echo $rc >$out/$name.rc; } &
done
wait
failed=0
for name in "${names[@]}"; do
  log=$out/$name.log rc=$(cat $out/$name.rc)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  findings=$(find $out/findings/$name -type f | wc -l)
  printf '%-20s %10s executions  %s findings  (exit %s, log %s)\n' "$name" "${execs:-?}" "$findings" "$rc" "$log"
  if ((rc != 0 || findings > 0)); then
    failed=1
    grep -m3 -E 'ERROR: |runtime error:|==[0-9]+== ' "$log" | sed 's/^/    /' || true
    find $out/findings/$name -type f | sed 's/^/    finding: /'
  fi
done
exit $failed
