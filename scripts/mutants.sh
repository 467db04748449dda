#!/usr/bin/env bash
# mutants.sh [NAME...] — the tests' mutation harness. Each tests/mutants/NAME.patch is a wrong
# implementation (or a weakened test) that the suites must catch; the patch opens with
#   # target: <cmake target to build>
#   # expect-fail: <ctest -R regex of the tests that must fail>
#   # why: <what the mutant breaks>
# For each patch (all, or the NAMEs given) it applies the patch to the working tree, builds the
# target, runs the tests and takes the patch back out: CAUGHT when the tests fail, SURVIVED when
# they pass. Not run in CI: each mutant rebuilds its target (a minute or two here). The tree is
# left as it was (the revert also runs on Ctrl-C and errors); build/ keeps the last mutant's
# objects until the next build. Exit status 1 when a mutant survived or a patch no longer applies
# or builds. Logs: build/mutants/NAME.log.
set -euo pipefail
cd "$(dirname "$0")/.."

names=("$@")
if ((${#names[@]} == 0)); then
  for p in tests/mutants/*.patch; do names+=("$(basename "$p" .patch)"); done
fi

applied=""
revert() { if [[ -n $applied ]]; then git apply -R "$applied"; applied=""; fi; }
trap revert EXIT
trap 'exit 130' INT TERM

header() { sed -n "s/^# $1: //p" "$2" | head -n 1; }
for name in "${names[@]}"; do  # before any is applied: each patch is there, with its header, on committed files
  patch=tests/mutants/$name.patch
  [[ -f $patch ]] || { echo "mutants.sh: no $patch" >&2; exit 2; }
  [[ -n $(header target "$patch") && -n $(header expect-fail "$patch") ]] ||
    { echo "mutants.sh: $patch lacks '# target:' or '# expect-fail:'" >&2; exit 2; }
  mapfile -t files < <(git apply --numstat "$patch" 2>/dev/null | cut -f3)
  if ((${#files[@]})) && ! git diff --quiet HEAD -- "${files[@]}"; then
    echo "mutants.sh: $name patches files with uncommitted changes (${files[*]}): commit or stash them first" >&2
    exit 2
  fi
done

mkdir -p build/mutants
rows=()
status=0
for name in "${names[@]}"; do
  patch=tests/mutants/$name.patch
  target=$(header target "$patch") regex=$(header expect-fail "$patch") why=$(header why "$patch")
  log=build/mutants/$name.log
  echo "mutants.sh: $name (build $target, ctest -R '$regex')" >&2
  if ! git apply --check "$patch" 2>"$log"; then
    result="DOES NOT APPLY"
  else
    git apply "$patch" && applied=$patch
    if ! AMPGRAD_QUIET=1 scripts/build.sh "$target" >"$log" 2>&1; then
      result="DOES NOT BUILD"
    elif (cd build && ctest -j2 --output-on-failure -R "$regex" >>"mutants/$name.log" 2>&1); then
      result=SURVIVED
    else
      result=CAUGHT
    fi
    revert
  fi
  [[ $result == CAUGHT ]] || status=1
  rows+=("$(printf '%-32s %-15s %s' "$name" "$result" "$why")")
done

printf '%-32s %-15s %s\n' mutant result breaks
printf '%s\n' "${rows[@]}"
exit "$status"
