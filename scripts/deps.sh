#!/usr/bin/env bash
# Installs, from Debian, what building and testing vx needs, if it is missing.
# Sourced by test.sh and demo.sh; safe to run on its own.
set -euo pipefail

VX_DEBS=(cmake pkg-config gcc make liburing-dev uthash-dev check libunwind-dev python3 groff-base
         dpkg-dev lintian) # the .deb: dpkg-shlibdeps for its Depends, lintian checks it (cli_deb)

vx_missing_debs() {
  local p missing=()
  for p in "${VX_DEBS[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

vx_install_deps() {
  local missing
  missing=$(vx_missing_debs "$@")
  if [ -n "$missing" ]; then
    echo "vx: installing $missing"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
  fi
  if [ ! -f "${VX_CUDA_INCLUDE:-/usr/local/cuda/include}/cuda.h" ]; then
    echo "vx: cuda.h not found in ${VX_CUDA_INCLUDE:-/usr/local/cuda/include}." >&2
    echo "vx: install the CUDA toolkit (its headers suffice) or set VX_CUDA_INCLUDE." >&2
    return 1
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  vx_install_deps "$@"
fi
