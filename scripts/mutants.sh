#!/usr/bin/env bash
# mutants.sh [--gpu | --applies] [NAME...] — the tests' mutation harness. Each tests/mutants/NAME.patch is a
# wrong implementation (or a weakened test) that the suites must catch; the patch opens with
#   # target: <cmake target to build>
#   # expect-fail: <ctest -R regex of the tests that must fail>
#   # why: <what the mutant breaks>
# and, for a wrong CUDA kernel whose case can only fail on a GPU, "# device: cuda".
# For each patch (all the CPU ones, or with --gpu all the CUDA ones, or the NAMEs given) it applies
# the patch to the working tree, builds the target, runs the tests and takes the patch back out:
# CAUGHT when the tests fail, SURVIVED when they pass, NOT RUN when they skipped. Not run in CI:
# each mutant rebuilds its target (a minute or two here). The tree is left as it was (the revert
# also runs on Ctrl-C and errors); the build folder keeps the last mutant's objects until the
# next build. Exit status 1 when a mutant was not caught or a patch no longer applies or builds.
# Logs: <build>/mutants/NAME.log.
# The CPU mutants build in ./build (scripts/build.sh); --gpu builds in $BUILD_DIR (build-gpu, as
# scripts/gpu-check.sh configures it, which runs this as its mutant stage), refuses without a GPU
# (exit 77: the cases would only skip), and takes patches of headers last: such a mutant
# recompiles every file that includes the header, once more after its revert. Outside a git
# checkout (a copy on a GPU machine) patches go in with patch(1) if git is missing.
# --applies only checks that every patch, CPU and CUDA, still applies, building nothing: a
# .ci/run step, since a patch whose code moved would otherwise rot unseen (nine had).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --applies ]]; then
  stale=0
  for p in tests/mutants/*.patch; do
    git apply --check "$p" 2>/dev/null || { echo "mutants.sh: $p no longer applies: make it again on the code it guards" >&2; stale=1; }
  done
  exit "$stale"
fi

gpu=0
if [[ ${1:-} == --gpu ]]; then gpu=1; shift; fi
build=build
((gpu)) && build=${BUILD_DIR:-build-gpu}

header() { sed -n "s/^# $1: //p" "$2" | head -n 1; }
names=("$@")
if ((${#names[@]} == 0)); then
  later=()
  for p in tests/mutants/*.patch; do
    [[ $(header device "$p") == cuda ]] && is_gpu=1 || is_gpu=0
    ((is_gpu == gpu)) || continue
    if ((gpu)) && grep -qE '^\+\+\+ b/.*\.(cuh|h)$' "$p"; then later+=("$(basename "$p" .patch)"); else names+=("$(basename "$p" .patch)"); fi
  done
  names+=(${later[@]+"${later[@]}"})
fi
if ((gpu)) && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "mutants.sh --gpu: no GPU here (nvidia-smi lists none): the CUDA cases would skip, not fail" >&2
  exit 77
fi

# apply [--check | -R] PATCH: git apply, which needs no checkout; patch(1) where git is missing.
apply() {
  if command -v git >/dev/null; then git apply "$@"; return; fi
  local flags=()
  [[ $1 == --check ]] && flags=(--dry-run)
  [[ $1 == -R ]] && flags=(-R)
  patch -p1 --batch --quiet "${flags[@]}" <"${!#}" >/dev/null
}
# built TARGET: the CPU mutants' scripts/build.sh in ./build, or the GPU check's build folder
if ((gpu)); then built() { cmake --build "$build" -j"$(nproc)" --target "$1"; }; else built() { AMPGRAD_QUIET=1 scripts/build.sh "$1"; }; fi
applied=""
revert() { if [[ -n $applied ]]; then apply -R "$applied"; applied=""; fi; }
trap revert EXIT
trap 'exit 130' INT TERM

in_checkout=0
git rev-parse --is-inside-work-tree >/dev/null 2>&1 && in_checkout=1
for name in "${names[@]}"; do  # before any is applied: each patch is there, with its header, on committed files
  patch=tests/mutants/$name.patch
  [[ -f $patch ]] || { echo "mutants.sh: no $patch" >&2; exit 2; }
  [[ -n $(header target "$patch") && -n $(header expect-fail "$patch") ]] ||
    { echo "mutants.sh: $patch lacks '# target:' or '# expect-fail:'" >&2; exit 2; }
  ((in_checkout)) || continue
  mapfile -t files < <(git apply --numstat "$patch" 2>/dev/null | cut -f3)
  if ((${#files[@]})) && ! git diff --quiet HEAD -- "${files[@]}"; then
    echo "mutants.sh: $name patches files with uncommitted changes (${files[*]}): commit or stash them first" >&2
    exit 2
  fi
done

mkdir -p "$build/mutants"
rows=()
status=0
for name in "${names[@]}"; do
  patch=tests/mutants/$name.patch
  target=$(header target "$patch") regex=$(header expect-fail "$patch") why=$(header why "$patch")
  log=$build/mutants/$name.log
  echo "mutants.sh: $name (build $target, ctest -R '$regex')" >&2
  if ! apply --check "$patch" 2>"$log"; then
    result="DOES NOT APPLY"
  else
    apply "$patch" && applied=$patch
    if ! built "$target" >"$log" 2>&1; then
      result="DOES NOT BUILD"
    elif (cd "$build" && ctest -j2 --output-on-failure -R "$regex" >>"mutants/$name.log" 2>&1); then
      if grep -q '\*\*\*Skipped' "$log"; then result="NOT RUN (skipped)"; else result=SURVIVED; fi
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
