#!/usr/bin/env bash
# plot-underflow.sh [CSV] [PNG] — the underflow demo's six loss curves on a log scale.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/plot-support.sh
csv=${1:-runs/underflow.csv}
png=${2:-runs/underflow.png}
run_if_missing "$csv" build/examples/underflow --csv "$csv"
plot_png "$png" 800,480 "$csv" <<GP
set datafile separator ","
set logscale y; set grid
set xlabel "step"; set ylabel "mse (float32 evaluation)"
set title "float16 without loss scaling stalls: its gradients underflow to zero"
plot for [i=2:7] "$csv" using 1:i with lines lw 2 title columnhead(i)
GP
