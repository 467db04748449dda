#!/usr/bin/env bash
# gpu-deps.sh — stages the Debian packages ampgrad builds against (Eigen, doctest, CLI11,
# nlohmann-json, zlib, Google Benchmark, and Open MPI with the libraries mpirun loads) in
# .gpu-deps/root, unpacked and git-ignored, for a GPU machine that reaches no package registry.
# Run it here, carry .gpu-deps (and data-cache) to the machine; scripts/gpu-check.sh builds
# against it when it is there, and runs the staged mpirun (OPAL_PREFIX relocates it). About 45 MB.
# oneDNN (38 MB) is left out: the CPU's bfloat16 GEMMs there widen to float32, and the GPU's run
# on cuBLAS. NCCL (218 MB) is past what the device tool carries: gpu-check finds the GPU
# machine's own, in its CUDA toolkit or its PyTorch's nvidia-nccl wheel.
#
#   scripts/gpu-deps.sh && du -sh .gpu-deps
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libeigen3-dev doctest-dev libcli11-dev nlohmann-json3-dev zlib1g-dev zlib1g libbenchmark-dev libbenchmark1debian
  # Open MPI and what its mpirun and libmpi load (Debian 12's openmpi-bin / libopenmpi-dev closure, less compilers and Java)
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libhwloc15 libhwloc-plugins libevent-2.1-7 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2
  libpsm-infinipath1 libnuma1 libmunge2 libpciaccess0 libxnvctrl0 libltdl7)
rm -rf .gpu-deps
mkdir -p .gpu-deps/debs
sandbox=()
[ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)  # as root, apt's _apt user cannot write here
(cd .gpu-deps/debs && apt-get download -q "${sandbox[@]}" "${pkgs[@]}" >/dev/null)
for deb in .gpu-deps/debs/*.deb; do dpkg-deb -x "$deb" .gpu-deps/root; done
# Absolute links (libz.so -> /lib/...) would point into the GPU machine's own system: re-aim
# each at the staged file it names.
find .gpu-deps/root -type l -lname '/*' | while read -r link; do
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" ".gpu-deps/root$(readlink "$link")")" "$link"
done
# Debian's doctest config names its prefix as /usr outright (the others compute it from where
# the file lies): compute it, three folders above usr/lib/cmake/doctest/, and refuse to finish
# if any CMake config still pins one.
sed -i 's|^set(_IMPORT_PREFIX "/usr")$|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  .gpu-deps/root/usr/lib/cmake/doctest/doctestTargets.cmake
if grep -rlE '^(set\(_IMPORT_PREFIX|set\(PACKAGE_PREFIX_DIR) "/' .gpu-deps/root --include='*.cmake'; then
  echo "gpu-deps: the CMake configs above pin an absolute prefix" >&2
  exit 1
fi
# Debian names mpirun and mpicxx through /etc/alternatives, which is not staged: link them here.
for b in mpirun mpiexec mpicc mpicxx; do ln -sfn "$b.openmpi" ".gpu-deps/root/usr/bin/$b"; done
rm -rf .gpu-deps/debs .gpu-deps/root/usr/share/doc .gpu-deps/root/usr/share/man .gpu-deps/root/usr/lib/x86_64-linux-gnu/openmpi/lib/*java* \
  .gpu-deps/root/usr/lib/x86_64-linux-gnu/openmpi/lib/*mpifh* .gpu-deps/root/usr/lib/x86_64-linux-gnu/openmpi/lib/*usempi*
echo "gpu-deps: ${pkgs[*]} in .gpu-deps/root ($(du -sh .gpu-deps | cut -f1))"
