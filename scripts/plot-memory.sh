#!/usr/bin/env bash
# plot-memory.sh [DATA] [PNG] [BLOCKS] — the memory example's configurations, memory over one
# training step each: the forward's climb, the peak at the turn, the backward's descent, and
# checkpointing's humps (each segment's activations made again in backward, then dropped).
# BLOCKS picks configurations by their order in DATA (default "0 2 4 5": float32, bf16
# autocast, and both checkpointed).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/plot-support.sh
data=${1:-runs/memory-timeline.dat}
png=${2:-runs/memory.png}
blocks=${3:-0 2 4 5}
run_if_missing "$data" build/examples/memory --timeline "$data"
plot_png "$png" 800,480 "$data" <<GP
set grid
set key top right
set xlabel "ms into the step"; set ylabel "MiB allocated above the step's start"
set title "Memory over one training step of the memory example's MLP"
plot for [i in "$blocks"] "$data" index int(i) using 1:2 with steps lw 1.5 title columnheader(1)
GP
