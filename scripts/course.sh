#!/usr/bin/env bash
# course.sh — the course's exercises (docs/course/). An exercise is a region of the library's own
# code between two comment lines,
#     // exercise N.k: NAME — HINT
#     // end exercise N.k
# and its tests are tests/test_course.cpp's cases named "exercise N.k ...".
#   scripts/course.sh start DIR   # a copy of this tree at DIR (a git repository, for `git diff`) in which
#                                 # every region's body is a stub throwing "exercise N.k NAME: not done yet (HINT)"
#   scripts/course.sh check N     # in any tree: builds lesson N's tests (incremental, ccache) and prints one
#                                 # line per exercise, "done", "not done yet (HINT)" or "fails: <first failed
#                                 # assertion>"; exits 0 only when every exercise of the lesson is done
#   scripts/course.sh verify      # CI: every lesson done here, and every exercise "not done yet" in a
#                                 # fresh learner's tree (built in its own build/, from ccache), then removed
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Every marker line of the tree: "file:line:indent// exercise N.k: NAME — HINT".
markers() {
  grep -rn --include='*.cpp' --include='*.h' --include='*.cu' --include='*.inc' -E '^\s*// exercise [0-9]+\.[0-9]+: ' \
    tensor autograd amp nn optim data diagnostics distributed examples || true
}
# The exercises of lesson N, one "N.k<TAB>NAME<TAB>HINT" a line, in order.
exercises() {
  markers | sed -E 's/^[^:]*:[0-9]+:\s*\/\/ exercise ([0-9]+\.[0-9]+): (\S+) — (.*)$/\1\t\2\t\3/' |
    awk -F'\t' -v n="$1" '$1 ~ "^" n "\\." ' | sort -t. -k2,2n
}

start() {
  local dir=$1
  [[ -e $dir ]] && { echo "course.sh: $dir exists; give a new directory" >&2; exit 1; }
  mkdir -p "$dir"
  # the project's files as git sees them (no build/), and the cached data sets as a link
  git ls-files -co --exclude-standard -z | grep -zv '^data-cache$' | xargs -0 cp --parents -P -t "$dir"
  [[ -d data-cache ]] && ln -s "$(realpath data-cache)" "$dir/data-cache"
  local file
  for file in $(markers | cut -d: -f1 | sort -u); do
    # a header shared with nvcc (AMPGRAD_HD) gets a stub that device code can compile too, and
    # <stdexcept> for its host side (nvcc's includes of it may not bring that in)
    local device=0
    grep -q AMPGRAD_HD "$file" && device=1
    awk -v device=$device '
      match($0, /^[ \t]*\/\/ exercise [0-9]+\.[0-9]+: /) {
        print; indent = substr($0, 1, index($0, "/") - 1)
        what = substr($0, RLENGTH + 1); split(substr($0, index($0, "exercise ") + 9), f, ":"); number = f[1]
        sub(/ — /, ": not done yet (", what); sub(/^/, number " ", what); gsub(/["\\]/, "", what)
        if (device) print "#ifdef __CUDA_ARCH__\n" indent "__trap();\n#else"
        print indent "throw std::logic_error(\"exercise " what ")\");  // your code here"
        if (device) print "#endif"
        skipping = 1; next
      }
      device && !included && /^#include/ { print; print "#include <stdexcept>  // the course'"'"'s stub below throws"; included = 1; next }
      /^[ \t]*\/\/ end exercise / { skipping = 0 }
      !skipping' "$file" >"$dir/$file"
  done
  (cd "$dir" && git init -q && git add -A && git -c user.name=learner -c user.email=learner@localhost commit -qm "the course's starting point")
  echo "course.sh: the learner's tree is $dir ($(markers | wc -l) exercises); next: cd $dir && scripts/course.sh check 1"
}

check() {
  local lesson=$1
  local list
  list=$(exercises "$lesson")
  [[ -n $list ]] || { echo "course.sh: lesson $lesson has no exercises (lessons: $(markers | sed -E 's/.*exercise ([0-9]+)\..*/\1/' | sort -u | tr '\n' ' '))" >&2; exit 2; }
  local all_done=1 number name hint out status
  out=$(AMPGRAD_QUIET=1 scripts/build.sh test_course 2>&1) || { echo "$out"; echo "course.sh: the build failed (above)"; exit 1; }
  while IFS=$'\t' read -r number name hint; do
    out=$(cd build/tests && OMP_NUM_THREADS=1 ./test_course --test-case="exercise $number *" --no-version 2>&1) && status=0 || status=$?
    if grep -q "exercise $number $name: not done yet" <<<"$out"; then
      echo "exercise $number $name: not done yet ($hint)"
    elif ((status != 0)); then
      # the first failed assertion with its values, or the exception, or the crash
      echo "exercise $number $name: fails: $(grep -m1 -A1 -E 'ERROR: |CRASHED|what\(\)' <<<"$out" | grep -v -E '^=+$' | sed -E 's/^.*tests\///; s/^\s+//' | paste -sd' ')"
    elif ! grep -qE 'test cases: +[1-9]' <<<"$out"; then
      echo "exercise $number $name: fails: no test case is named \"exercise $number ...\" (tests/test_course.cpp)"
    else
      echo "exercise $number $name: done"
      continue
    fi
    all_done=0
  done <<<"$list"
  ((all_done))
}

verify() {
  local lessons n
  lessons=$(markers | sed -E 's/.*exercise ([0-9]+)\..*/\1/' | sort -un)
  for n in $lessons; do check "$n"; done
  work=$(mktemp -d)  # global: the EXIT trap reads it after verify returns
  trap 'rm -rf "$work"' EXIT
  start "$work/learner" >/dev/null
  # the learner's tree is built as this one is (with or without the CUDA backend), so its stubs compile there too
  local cuda
  cuda=$(sed -n 's/^AMPGRAD_CUDA:STRING=//p' build/CMakeCache.txt 2>/dev/null || true)
  local noticed=0 total=0 line
  for n in $lessons; do
    while IFS= read -r line; do
      echo "learner's tree: $line"
      total=$((total + 1))
      [[ $line == *": not done yet ("* ]] && noticed=$((noticed + 1))
    done < <(cd "$work/learner" && AMPGRAD_CUDA=$cuda scripts/course.sh check "$n" | grep '^exercise ' || true)
  done
  ((total == $(markers | wc -l))) || { echo "course.sh: $total lines for $(markers | wc -l) exercises"; exit 1; }
  ((noticed == total)) || { echo "course.sh: $((total - noticed)) exercises' tests do not notice their stub (above)"; exit 1; }
  echo "course.sh: every lesson done here; in a learner's tree all $total exercises are not done yet"
}

case ${1:-} in
  start) start "${2:?usage: scripts/course.sh start DIR}" ;;
  check) check "${2:?usage: scripts/course.sh check N}" ;;
  verify) verify ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
