#!/usr/bin/env bash
# plot-metrics.sh METRICS.csv OUT.png [SCALE.csv] — loss and accuracy per epoch from the
# trainer's --metrics file and, given its --scale-history file, the GradScaler's scale per
# step with the skipped steps marked (gnuplot).
set -euo pipefail
csv=${1:?usage: plot-metrics.sh metrics.csv out.png [scale.csv]}
png=${2:-${csv%.csv}.png}
scale=${3:-}
panels=2
[[ -n $scale && -f $scale ]] && panels=3
gnuplot <<GP
set terminal pngcairo size $((500 * panels)),420 font ",10"
set output "$png"
set datafile separator ","
set multiplot layout 1,$panels title "$(basename "$csv")"
set xlabel "epoch"; set ylabel "cross-entropy"; set grid
plot "$csv" using 1:2 with linespoints title "train loss", "" using 1:3 with linespoints title "test loss"
set ylabel "test accuracy"; set yrange [*:1]
plot "$csv" using 1:4 with linespoints title "test accuracy"
if ($panels == 3) {
  set yrange [*:*]
  stats "$scale" using 2 nooutput
  if (STATS_min == STATS_max) { set yrange [STATS_min / 4 : STATS_max * 4] } else { set yrange [*:*] }  # a flat scale: show it flat
  set logscale y 2
  set xlabel "optimizer step"; set ylabel "loss scale"
  plot "$scale" using 1:2 with steps lw 2 title "scale", \
       "" using 1:(\$3 > 0 ? \$2 : 1/0) with points pt 7 title "skipped (inf/NaN)"
}
unset multiplot
GP
echo "plot: $png"
