# plot-support.sh — what the examples' plot scripts share (sourced, from the repository root):
# making an example's data when it is missing, and gnuplot with their 800×480 PNG terminal.

# run_if_missing FILE COMMAND...: builds ampgrad and runs COMMAND when FILE does not exist yet.
run_if_missing() {
  local file=$1
  shift
  [[ -f $file ]] && return
  scripts/build.sh >/dev/null
  mkdir -p "$(dirname "$file")"
  "$@"
}

# plot_png PNG SIZE INPUT...: runs the gnuplot commands on stdin into PNG, SIZE pixels ("800,480").
# PNG must be a regular file or nothing (a FIFO would hang gnuplot, a device be overwritten) and
# none of the INPUTs it plots (compared as files: -ef); it is written beside itself and renamed,
# so a failed plot leaves no half-written PNG.
plot_png() {
  local png=$1 size=$2 input
  shift 2
  [[ ! -e $png || -f $png ]] || { echo "plot: $png exists and is not a regular file" >&2; return 1; }
  for input in "$@"; do
    [[ ! $png -ef $input ]] || { echo "plot: $png is the input $input" >&2; return 1; }
  done
  plot_tmp="$png.tmp.$$"
  trap 'rm -f "$plot_tmp"' EXIT
  { printf 'set terminal pngcairo size %s font ",10"\nset output "%s"\n' "$size" "$plot_tmp"; cat; } | gnuplot
  mv -f "$plot_tmp" "$png"
  echo "plot: $png"
}
