#!/usr/bin/env bash
# Downloads (here, where Debian's mirror is reachable) the Debian packages that
# building vx needs, so they can travel to a GPU machine that has no network.
#
#   scripts/gpu-debs.sh [DIR]      default DIR: .debs (ignored by git)
#
# scripts/gpu-check.sh --debs DIR unpacks them with `dpkg -x` into a private
# prefix there; nothing is installed into /.  The list is the -dev packages
# the build uses, the runtime libraries they link (libvx.so needs liburing.so.2
# and libunwind.so.8 at run time), their -dev dependencies, and pkg-config
# (CMake's FindPkgConfig needs the program; the GPU image may lack it).
set -euo pipefail

VX_GPU_DEBS=(
  liburing-dev liburing2             # NVMe tier (io_uring)
  uthash-dev                         # allocation registry (header only)
  check libsubunit-dev libsubunit0   # unit tests: check.pc Requires libsubunit
  libunwind-dev libunwind8 liblzma-dev  # allocation sites; libunwind-dev Depends liblzma-dev
  pkg-config pkgconf pkgconf-bin libpkgconf3  # the pkg-config program itself
)

dir=${1:-.debs}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# apt-get download writes into the current directory; the _apt sandbox user
# may not write there, which apt only warns about.
if ! (cd "$dir" && apt-get download "${VX_GPU_DEBS[@]}"); then
  echo "gpu-debs: apt-get download failed; run 'apt-get update' first (as root)" >&2
  exit 1
fi
missing=0
for p in "${VX_GPU_DEBS[@]}"; do
  if ! compgen -G "$dir/${p}_*.deb" >/dev/null; then
    echo "gpu-debs: ${p} was not downloaded" >&2
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 1
echo "gpu-debs: ${#VX_GPU_DEBS[@]} packages in $dir ($(du -sh "$dir" | cut -f1)):"
ls -1 "$dir"
