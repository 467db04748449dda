#!/usr/bin/env bash
# run-mnist.sh — the README's first command: install what is missing, fetch the MNIST digits,
# build, and train the MLP for 10 epochs under float16 AMP with the GradScaler (the whole
# pipeline), writing per-epoch metrics, the scale history and a plot to runs/.
# Extra arguments go to the trainer, e.g.  scripts/run-mnist.sh --amp bf16 --model cnn
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/get-data.sh
scripts/build.sh >/dev/null
mkdir -p runs
build/examples/mnist --amp fp16 --epochs 10 --metrics runs/mnist.csv --scale-history runs/scale.csv "$@"
scripts/plot-metrics.sh runs/mnist.csv runs/mnist.png runs/scale.csv
