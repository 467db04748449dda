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

# plot_png PNG: runs the gnuplot commands on stdin into PNG.
plot_png() {
  { printf 'set terminal pngcairo size 800,480 font ",10"\nset output "%s"\n' "$1"; cat; } | gnuplot
  echo "plot: $1"
}
