#!/usr/bin/env bash
# plot-metrics.sh METRICS.csv OUT.png [SCALE.csv] — loss and accuracy per epoch from the
# trainer's --metrics file and, given its --scale-history file, the GradScaler's scale per
# step with the skipped steps marked (gnuplot).
set -euo pipefail
csv=${1:?usage: plot-metrics.sh metrics.csv out.png [scale.csv]}
png=${2:-${csv%.csv}.png}
scale=${3:-}
panels=2
# The scale panel only for a history with rows: without a GradScaler (bf16, off) it is a header alone.
[[ -n $scale && -f $scale ]] && (($(wc -l <"$scale") > 1)) && panels=3
source "$(dirname "$0")/plot-support.sh"
plot_png "$png" $((500 * panels)),420 "$csv" ${scale:+"$scale"} <<GP
set datafile separator ","
set multiplot layout 1,$panels title "$(basename "$csv")"
set xlabel "epoch"; set ylabel "cross-entropy"; set grid
stats "$csv" using 1 nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min - 1 : STATS_max + 1] }  # one epoch: a point, not an empty range
plot "$csv" using 1:2 with linespoints title "train loss", "" using 1:3 with linespoints title "test loss"
set ylabel "test accuracy"; set yrange [*:1]
plot "$csv" using 1:4 with linespoints title "test accuracy"
if ($panels == 3) {
  set xrange [*:*]; set yrange [*:*]  # a one-column stats keeps only the values inside the y range
  stats "$scale" using 1 nooutput
  if (STATS_min == STATS_max) { set xrange [STATS_min - 1 : STATS_max + 1] }  # one step
  stats "$scale" using 2 nooutput
  if (STATS_min == STATS_max) { set yrange [STATS_min / 4 : STATS_max * 4] }  # a flat scale: show it flat
  set logscale y 2
  set xlabel "optimizer step"; set ylabel "loss scale"
  plot "$scale" using 1:2 with steps lw 2 title "scale", \
       "" using 1:(\$3 > 0 ? \$2 : 1/0) with points pt 7 title "skipped (inf/NaN)"
}
unset multiplot
GP
