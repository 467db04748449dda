#!/usr/bin/env bash
# check-layers.sh — fails on an #include that points up the layer order the README draws:
#   0 tensor/                     DType, Storage, Tensor, the primitives and their backends
#   1 amp/ (the state)            autocast's thread-local state and THE policy table
#   2 autograd/                   the engine and every differentiable op
#   3 nn/  optim/  data/          layers, optimizers, files
#   4 amp/ (the step)             the GradScaler and its kernels (grad_scaler, amp_kernels, scale_math)
#   5 diagnostics/                instruments on the observer: profile, trace, memory history, logs
#   6 distributed/                process groups and DistributedDataParallel
#   7 examples/  bench/           programs
# A file may include its own layer and those below it, never one above: tensor/ includes nothing
# of autograd's, autograd/ nothing of nn's. Each finding names the file, the line and the layers.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import os, re, subprocess, sys
layer = {"tensor": 0, "autograd": 2, "nn": 3, "optim": 3, "data": 3, "diagnostics": 5, "distributed": 6, "examples": 7, "bench": 7}
step = ("grad_scaler", "amp_kernels", "scale_math")
def layer_of(path):
    top, _, rest = path.partition("/")
    if top == "amp":
        return 4 if os.path.basename(rest).startswith(step) else 1
    return layer.get(top)
include = re.compile(r'^\s*#\s*include\s+"([A-Za-z_]+/[^"]+)"')
files = [f for f in subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True, check=True).stdout.split()
         if f.endswith((".h", ".cpp", ".cu", ".cuh", ".inc", ".def")) and layer_of(f) is not None and "/tests/" not in f]
ups = []
for f in files:
    for n, line in enumerate(open(f, errors="replace"), 1):
        m = include.match(line)
        if m and layer_of(m.group(1)) is not None and layer_of(m.group(1)) > layer_of(f):
            ups.append(f"{f}:{n} includes {m.group(1)} (layer {layer_of(m.group(1))} above {layer_of(f)})")
for u in ups:
    print(u)
print(f"check-layers: {len(files)} files, {len(ups)} include(s) pointing up")
sys.exit(1 if ups else 0)
PY
