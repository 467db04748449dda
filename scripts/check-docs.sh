#!/usr/bin/env bash
# check-docs.sh — fails when README.md or a page under docs/ (docs/course/ too) names something the code no longer has, so the
# docs cannot drift silently: a file or folder path (`tensor/ops.def`, a link), a `file:line` whose
# line no longer holds the symbol written after it, a C++ name (`amp::GradScaler`, `unscale_()`)
# that no source defines or uses, a `--flag` that no program, script or build file knows, and the
# policy table of docs/amp-policy.md against what `mnist --amp-policy` prints from tensor/ops.def,
# and docs/features.md's "Every op" list against the same ops.
# Each finding names the doc, its line and what is missing. Run by .ci/run after the build.
#
# It also holds the counts the docs state about the code: the README tour's files and lines (the
# definitions each hop names, in the file before them), "N library files" beside an op (what
# `git grep -lw` finds), and the scripts "Checking it" lists against .ci/run's steps.
#
#   scripts/check-docs.sh                  # uses build/examples/mnist for the policy table
#   MNIST=build-x/examples/mnist scripts/check-docs.sh
#   scripts/check-docs.sh --self-test      # plants a wrong count, pair and step in a README copy: each must be caught
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --self-test ]; then
  copy=$(mktemp)
  trap 'rm -f "$copy" "$copy.out"' EXIT
  failed=0
  # plant SED EXPECTED: the README with SED applied must fail, saying EXPECTED
  plant() {
    sed "$1" README.md >"$copy"
    if CHECK_DOCS_README=$copy "$0" >"$copy.out" 2>&1 || ! grep -qF "$2" "$copy.out"; then
      echo "check-docs self-test: planted '$1', expected \"$2\"; got:"; tail -3 "$copy.out"; failed=1
    else
      echo "check-docs self-test: caught '$1': $(grep -F "$2" "$copy.out" | head -1)"
    fi
  }
  plant 's/in 10 files and [0-9]* lines/in 10 files and 430 lines/' "the tour says 430 lines"
  plant 's/in 10 files and/in 9 files and/' "the tour says 9 files"
  plant 's/`autograd\/linalg.cpp`, `linear`/`autograd\/linalg.cpp`, `linear_3d`/' "does not define it"
  plant 's/a composite: 2 library files/a composite: 3 library files/' "says silu is in 3 library files"
  plant 's/`amp\/grad_scaler.cpp`, `GradScaler::scale`/`amp\/scale_math.h`, `GradScaler::scale`/' "which does not define it"
  plant 's/`scripts\/smoke.sh`, //' "leaves out 'scripts/smoke.sh'"
  plant 's/(`autograd\/node.h`, `Catches`)/(`autograd\/node.h`, `Throws`)/' "puts 'Throws' in 'autograd/node.h'"
  exit $failed
fi
mnist=${MNIST:-build/examples/mnist}
[ -x "$mnist" ] || { echo "check-docs: $mnist is not built (scripts/build.sh mnist)" >&2; exit 2; }
"$mnist" --amp-policy >/tmp/check-docs-policy.$$ 2>&1 || { echo "check-docs: $mnist --amp-policy failed" >&2; exit 2; }
trap 'rm -f /tmp/check-docs-policy.$$' EXIT

python3 - /tmp/check-docs-policy.$$ <<'EOF'
import os, re, subprocess, sys

docs = ["README.md"] + sorted(os.path.join(d, f) for d, _, files in os.walk("docs") for f in files if f.endswith(".md"))  # docs/course/ too
# CHECK_DOCS_README reads README.md's text from another file (the self-test's planted copies)
def doc_file(doc):
    return os.environ.get("CHECK_DOCS_README", doc) if doc == "README.md" else doc
tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
tracked_set = set(tracked)
folders = {os.path.dirname(p) for p in tracked}
folders |= {f[: i] for f in list(folders) for i in range(len(f)) if f[i] == "/"}
by_name = {}
for p in tracked:
    by_name.setdefault(os.path.basename(p), []).append(p)
sources = [p for p in tracked if re.search(r"\.(h|cpp|cu|cuh|inc|def)$", p)]
source_text = "\n".join(open(p, errors="replace").read() for p in sources)
# code without its comments and literals (raw strings, strings, chars), scanned left to right
code_pattern = re.compile(r'R"\((?:.*?)\)"|//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.S)
def code_of(text):
    return code_pattern.sub(" ", text)
source_words = set(re.findall(r"[A-Za-z_]\w*", code_of(source_text)))
# where a flag may be defined or passed: programs, scripts, build files, benchmarks, CI
flag_text = "\n".join(open(p, errors="replace").read() for p in tracked
                      if not p.endswith(".md") and re.search(r"\.(cpp|h|sh|py|txt|cmake|js)$|^\.ci/", p))
flags_known = set(re.findall(r"--[a-z][a-z0-9-]*", flag_text))
# the flags of other tools that the docs show beside ours
foreign_flags = {"--help", "--version", "--output-on-failure", "--test-case", "--test-case-exclude", "--allow-run-as-root",
                 "--oversubscribe", "--target", "--build", "--config", "--prefix", "--depth", "--no-deps", "--tool",
                 "--print-limit", "--benchmark_filter", "--showme", "--recursive"}
# other projects' files that the docs cite by name (PyTorch's, llm.c's)
foreign_files = {"autocast_mode.cpp", "grad_scaler.py", "common_methods_invocations.py", "native_functions.yaml", "train_gpt2.c",
                 "engine.py", "ops.py", "mlops.py", "tensor.py", "operators.py", "tensor_ops.py", "autodiff.py", "Functions.h",
                 "TensorBackend.h", "ggml.h", "test-backend-ops.cpp", "unary-ops.cpp", "unary.cu"}
source_ext = r"(?:h|cpp|cu|cuh|def|inc|sh|py|md|js|cmake|dict)"
problems = []

def say(doc, n, what):
    problems.append(f"{doc}:{n}: {what}")

def check_path(doc, n, path):
    path = path.split("#")[0].rstrip("/")
    if not path or re.match(r"(https?:|mailto:|/|~|\$|build|CMakeFiles|data-cache|runs/|\.gpu-deps|\.whl|\.gl)", path) or any(c in path for c in "*?{}<>"):
        return
    if os.path.basename(path) in foreign_files:
        return
    for base in ("", os.path.dirname(doc)):
        p = os.path.normpath(os.path.join(base, path))
        if p in tracked_set or p in folders:
            return
    if "/" not in path and path in by_name:
        return
    say(doc, n, f"names '{path}', which is not in the repository")

def text_of(path):
    return open(path, errors="replace").read()

for doc in docs:
    in_code = cpp = False
    for n, line in enumerate(open(doc_file(doc)), 1):
        if line.lstrip().startswith("```"):
            in_code, cpp = not in_code, line.strip() == "```cpp"
            continue
        if cpp:  # a C++ block quotes or uses the library: every name in it must exist (comments aside)
            for word in set(re.findall(r"[A-Za-z_]\w*", re.sub(r'//.*|"[^"]*"', "", line))) - source_words:
                say(doc, n, f"its C++ block names '{word}', which no source file has")
        # `name` in `file`, and `file`, `name`: the file must hold the name
        pairs = re.findall(r"`([A-Za-z_][\w:~]*)(?:\(\))?` in `([\w./-]+)`", line)
        pairs += [(name, path) for path, name in re.findall(r"`([\w./-]+\.(?:h|cpp|cu|cuh|inc|def))`, `([A-Za-z_][\w:~]*)(?:\(\))?`", line)]
        for name, path in pairs:
            if path not in tracked_set:
                continue
            *qualifier, last = name.split("::")
            text = code_of(text_of(path))
            # ns::f: the file says ns::f, or declares namespace ns and has f
            in_ns = not qualifier or qualifier and (name in text or re.search(r"^\s*namespace\s+[\w:]*\b" + qualifier[-1] + r"\b[\w:]*\s*\{", text, re.M))
            if last not in text or not in_ns:
                say(doc, n, f"puts '{name}' in '{path}', which does not have it")
        # `tests/x.cpp` ("a test's name"): the suite must still have that case
        for path, case in re.findall(r"`(tests/[\w./-]+)` \(\"([^\"]+)\"\)", line):
            if path in tracked_set and case not in text_of(path):
                say(doc, n, f"cites the case \"{case}\" of '{path}', which it no longer has")
        spans = re.findall(r"`([^`]+)`", line) if not in_code else [line]
        # links: [text](target)
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            check_path(doc, n, target)
        # file:line, which must be followed by the symbol it points at: `x.cpp:42 name`
        for m in re.finditer(r"([\w./-]+\." + source_ext + r"):(\d+)(?:\s+`?([A-Za-z_][\w:]*))?", line):
            path, num, sym = m.group(1), int(m.group(2)), m.group(3)
            if path not in tracked_set:
                continue  # reported as a path below
            lines = text_of(path).split("\n")
            if sym is None:
                say(doc, n, f"'{path}:{num}' names no symbol: write the symbol after it (`{path}:{num} name`) or drop the line number")
            elif num > len(lines) or sym.split("::")[-1] not in lines[num - 1]:
                say(doc, n, f"'{path}:{num}' no longer holds '{sym}'")
        for span in spans:
            for path in re.findall(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+|[\w-]+\." + source_ext + r")(?![\w/-])", span):
                if re.search(r"\.\w+$", path) or path.endswith("/") or path in folders or "/" in path:
                    if re.match(r"^[\d.]+$", path) or path.count("/") and re.match(r"^(e\.g|i\.e|\d)", path):
                        continue
                    if "/" in path and not re.search(r"\.\w+$", path) and not re.match(r"^(amp|autograd|bench|cmake|data|distributed|docs|examples|nn|optim|scripts|tensor|tests|\.ci)(/|$)", path):
                        continue  # a ratio or a phrase with a slash, not a path of ours
                    check_path(doc, n, path)
            # C++ names: qualified (ns::name) or called (name())
            if not in_code:
                for name in re.findall(r"(?<![\w.])((?:[A-Za-z_]\w*::)+[A-Za-z_~]\w*|[A-Za-z_]\w*(?=\(\)))", span):
                    if re.match(r"(std|torch|at|c10|Eigen|CLI|doctest|nlohmann|benchmark|cuda[A-Z]|nccl|MPI)", name):
                        continue
                    last = name.split("::")[-1].lstrip("~")
                    if last not in source_words:
                        say(doc, n, f"names '{name}', which no source file has")
        if not in_code:  # a doc named in prose, outside backticks
            for path in re.findall(r"(?<![\w/`.-])([\w-]+\.md)\b(?![`\]])", re.sub(r"`[^`]*`|\]\([^)]*\)", "", line)):
                check_path(doc, n, path)
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", " ".join(spans)):
            if flag not in flags_known and flag not in foreign_flags:
                say(doc, n, f"names the flag '{flag}', which no program, script or build file has")

# ---- counts the docs state about the code ----
def definition_lines(path, name):
    """The lines of name's definition in path (a function, struct, macro or a list's row), or 0."""
    lines = open(path, errors="replace").read().split("\n")
    *qual, last = name.split("::")
    full = re.escape(name) if qual else r"(?<![\w:])" + re.escape(last)
    starts = [r"^#define\s+" + re.escape(last) + r"\(",                                   # a macro
              r"^[A-Z_]+\(\s*(?:\w+,\s*)?" + re.escape(last) + r"\s*,",                    # a row of ops.def or primitives.inc
              r"^(?:struct|class)\s+" + re.escape(last) + r"\b[^;]*$",                     # a struct
              r"^(?![\s/#]).*" + full + r"\s*\("]                                          # a function, defined at column 0
    for i, text in enumerate(lines):
        if not any(re.search(p, text) for p in starts) or text.rstrip().endswith(";"):
            continue
        if text.startswith("#define"):
            j = i
            while lines[j].rstrip().endswith("\\"):
                j += 1
            return j - i + 1
        if re.match(r"^[A-Z_]+\(", text) and not text.startswith(("struct", "class")):
            j, depth = i, 0
            while True:
                depth += lines[j].count("(") - lines[j].count(")")
                if depth <= 0:
                    return j - i + 1
                j += 1
        j, depth, opened = i, 0, False
        while j < len(lines):
            code = code_of(lines[j])
            depth += code.count("{") - code.count("}")
            opened |= "{" in code
            if opened and depth <= 0:
                return j - i + 1
            if not opened and code.rstrip().endswith(";"):
                break
            j += 1
    return 0

readme = open(doc_file("README.md")).read().split("\n")
# The tour: "**The AMP step in N files and M lines**", then its hops, each `file`, `name`, `name` ...:
# every name defined in the file before it, N the files named, M their definitions' lines (within 5%).
for at, text in enumerate(readme, 1):
    m = re.search(r"\*\*The AMP step in (\d+) files and (\d+) lines\*\*", text)
    if not m:
        continue
    files, total, current = [], 0, None
    i = at
    while i < len(readme) and not re.match(r"^\d+\. ", readme[i]):
        i += 1
    while i < len(readme) and (re.match(r"^\d+\. ", readme[i]) or readme[i].startswith("   ")):
        for token in re.findall(r"`([^`]+)`", readme[i]):
            if token in tracked_set:
                current = token
                files.append(token)
            elif re.fullmatch(r"[A-Za-z_][\w:~]*", token) and current:
                n = definition_lines(current, token)
                if n == 0:
                    say("README.md", i + 1, f"the tour reads '{token}' in '{current}', which does not define it")
                total += n
        i += 1
    if len(set(files)) != int(m.group(1)):
        say("README.md", at, f"the tour says {m.group(1)} files; its hops name {len(set(files))}")
    if abs(total - int(m.group(2))) > 0.05 * total:
        say("README.md", at, f"the tour says {m.group(2)} lines; its hops' definitions hold {total}")

# "`op(...)`..., N library files": the files `git grep -lw op` finds in the library
library_dirs = ["tensor", "autograd", "amp", "nn", "optim", "data", "distributed", "diagnostics"]
for doc in docs:
    for n, line in enumerate(open(doc_file(doc)), 1):
        for op, count in re.findall(r"`(\w+)(?:\([^`]*\))?`[^`]*?\b(\d+) library files?\b", line):
            found = subprocess.run(["git", "grep", "-lw", op, "--"] + library_dirs, capture_output=True, text=True).stdout.split()
            found = [f for f in found if "/tests/" not in f]
            if len(found) != int(count):
                say(doc, n, f"says {op} is in {count} library files; git grep -lw finds {len(found)} ({' '.join(found)})")

# The README's list of what .ci/run runs: the same scripts as its steps
ci_scripts = set(re.findall(r"^step\s+(?:env\s+\S+\s+)?(scripts/[\w.-]+)", open(".ci/run").read(), re.M))
section = "\n".join(readme)
checking = re.search(r"^## Checking it\n(.*?)(?=^## )", section, re.S | re.M)
listed_scripts = set(re.findall(r"(scripts/[\w.-]+\.sh)", checking.group(1))) if checking else set()
at = section[: checking.start()].count("\n") + 1 if checking else 0
for script in sorted(ci_scripts - listed_scripts):
    say("README.md", at, f"'Checking it' leaves out '{script}', which .ci/run runs")
for script in sorted(listed_scripts - ci_scripts):
    say("README.md", at, f"'Checking it' lists '{script}', which .ci/run does not run")

# docs/amp-policy.md's table against the one tensor/ops.def generates
printed = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 3 and parts[0] != "op":
        printed[parts[0]] = (parts[1], parts[2])
documented = {}
for n, line in enumerate(open("docs/amp-policy.md"), 1):
    cells = [c.strip().replace("*", "") for c in line.strip().strip("|").split("|")]
    if len(cells) == 3 and cells[0] not in ("op", "---") and not cells[0].startswith("-"):
        for op in cells[0].split(","):
            documented[op.strip()] = ((cells[1], cells[2]), n)
for op, row in printed.items():
    if op not in documented:
        say("docs/amp-policy.md", 0, f"the table lacks '{op}' ({row[0]} on cuda, {row[1]} on cpu in tensor/ops.def)")
    elif documented[op][0] != row:
        say("docs/amp-policy.md", documented[op][1], f"'{op}' is {documented[op][0]}, tensor/ops.def says {row}")
for op, (row, n) in documented.items():
    if op not in printed:
        say("docs/amp-policy.md", n, f"the table has '{op}', which tensor/ops.def does not register")

# docs/features.md's "Every op" paragraph names every op tensor/ops.def registers
features = open("docs/features.md").read()
every = re.search(r"^Every op\b.*?(?=\n\n)", features, re.S | re.M)
at = features[: every.start()].count("\n") + 1 if every else 0
listed = set(re.findall(r"\w+", every.group(0))) if every else set()
for op in printed:
    if op not in listed:
        say("docs/features.md", at, f"the 'Every op' list lacks '{op}' (tensor/ops.def registers it)")

for p in problems:
    print(p)
print(f"check-docs: {len(docs)} docs, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
EOF
