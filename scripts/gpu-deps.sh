#!/usr/bin/env bash
# gpu-deps.sh — stages the Debian packages ampgrad builds against (Eigen, doctest, CLI11,
# nlohmann-json, zlib, Google Benchmark) in .gpu-deps/root, unpacked and git-ignored, for a GPU
# machine that reaches no package registry. Run it here, carry .gpu-deps (and data-cache) to the
# machine; scripts/gpu-check.sh builds against it when it is there. About 15 MB. oneDNN (38 MB)
# is left out: the CPU's bfloat16 GEMMs there widen to float32, and the GPU's run on cuBLAS.
#
#   scripts/gpu-deps.sh && du -sh .gpu-deps
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libeigen3-dev doctest-dev libcli11-dev nlohmann-json3-dev zlib1g-dev zlib1g libbenchmark-dev libbenchmark1debian)
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
rm -rf .gpu-deps/debs .gpu-deps/root/usr/share/doc .gpu-deps/root/usr/share/man
echo "gpu-deps: ${pkgs[*]} in .gpu-deps/root ($(du -sh .gpu-deps | cut -f1))"
