#!/usr/bin/env bash
# Installs, cached, the real third-party clients the client tests run
# (tests/clients): Python packages into a private venv, and NVIDIA's driver
# libraries from Debian's non-free archive unpacked (never installed).
#
#   scripts/clients.sh [all|venv|debs]     default: all
#
# venv: .venv-clients/ with the pinned PIP_PINS below.
# debs: libcuda1 of each pinned driver series, fetched with `apt-get download`
#       through a private apt configuration in .clients/apt (the machine's
#       own mirrors plus the non-free component and the suites that carry
#       the series; /etc/apt is only read), unpacked with `dpkg -x` into
#       .clients/libcuda-SERIES/ (the directory holding libcuda.so.1).
# A second run with everything in place touches no network and takes well
# under a second.  VX_CLIENTS_DIR moves the cache (default: the repo root).
# Exit 0 when everything asked for is there; 1 (saying what is missing and
# why) otherwise: the tests then skip with that reason.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${VX_CLIENTS_DIR:-$root}

# cuda-bindings 13.0.x is the release line of the 13.0 toolkit headers vx is
# built against here (13.1.1 also runs on the simulator; pinned to match);
# nvidia-cuda-runtime-cu12 12.8 brings the 12.8 libcudart whose lookups the
# routing check replays.
PIP_PINS=(cuda-bindings==13.0.3 nvidia-ml-py==13.615.71 nvidia-cuda-runtime-cu12==12.8.90)
# Driver series -> pinned Debian version and the suite that carries it.  If
# the archive has moved on, the newest version of the same series is taken.
DRIVER_PINS=("535 535.261.03-1 bookworm" "550 550.163.01-2 trixie")

say() { echo "clients: $*" >&2; }

# ---- venv ----
venv_ok() {
  [ -x "$cache/.venv-clients/bin/python" ] &&
    [ "$(cat "$cache/.venv-clients/.pins" 2>/dev/null)" = "${PIP_PINS[*]}" ]
}

install_venv() {
  venv_ok && return 0
  local py=${VX_CLIENTS_PYTHON:-python3} v=$cache/.venv-clients
  command -v "$py" >/dev/null || { say "no $py: cannot make the venv"; return 1; }
  rm -rf "$v"
  "$py" -m venv "$v" 2>&1 | tail -2 >&2 || { say "python3 -m venv failed (python3-venv missing?)"; return 1; }
  [ -x "$v/bin/python" ] || { say "python3 -m venv made no interpreter"; return 1; }
  if ! "$v/bin/python" -m pip install -q --disable-pip-version-check "${PIP_PINS[@]}" >"$cache/.clients/venv.log" 2>&1; then
    say "pip install ${PIP_PINS[*]} failed (no network or no such version):"
    tail -3 "$cache/.clients/venv.log" >&2
    return 1
  fi
  echo "${PIP_PINS[*]}" >"$v/.pins"
}

# ---- Debian driver libraries ----
series_dir() { echo "$cache/.clients/libcuda-$1"; }
series_ok() { [ -e "$(series_dir "$1")/libcuda.so.1" ] && [ -s "$(series_dir "$1")/VERSION" ]; }

# The machine's Debian mirror (first URI serving a plain release suite), so
# that no host is written here.
debian_mirror() {
  {
    awk '/^URIs:/ {u=$2} /^Suites:/ {for (i=2;i<=NF;i++) if ($i !~ /-(security|updates|backports)$/) print u}' \
      /etc/apt/sources.list.d/*.sources 2>/dev/null
    awk '$1=="deb" {i=2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++; if ($(i+1) !~ /-security$/) print $i}' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
  } | grep -v security | head -1
}

apt_private() { # apt-get/apt-cache with the private configuration
  local tool=$1; shift
  "$tool" -o Dir::Etc::sourcelist="$cache/.clients/apt/sources.list" -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists="$cache/.clients/apt/lists" -o Dir::Cache="$cache/.clients/apt/cache" \
    -o Debug::NoLocking=1 -o APT::Get::List-Cleanup=0 "$@"
}

apt_update() {
  local a=$cache/.clients/apt mirror key=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -s "$a/updated" ] && return 0
  command -v apt-get >/dev/null && command -v dpkg >/dev/null || { say "no apt-get/dpkg (not Debian)"; return 1; }
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || { say "no Debian mirror in /etc/apt"; return 1; }
  [ -r "$key" ] || { say "no $key"; return 1; }
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
  : >"$a/sources.list"
  local s
  for s in bookworm trixie; do
    echo "deb [signed-by=$key] $mirror $s non-free" >>"$a/sources.list"
  done
  if ! apt_private apt-get -qq update >"$a/update.log" 2>&1; then
    say "apt-get update (private lists) failed:"; tail -3 "$a/update.log" >&2; return 1
  fi
  date -u +%FT%TZ >"$a/updated"
}

install_series() { # SERIES VERSION
  local series=$1 pin=$2 ver dir tmp
  series_ok "$series" && return 0
  apt_update || return 1
  ver=$(apt_private apt-cache madison libcuda1 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}' |
    grep -Fx -- "$pin" | head -1)
  if [ -z "$ver" ]; then
    ver=$(apt_private apt-cache madison libcuda1 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}' |
      grep "^$series\." | head -1)
    [ -n "$ver" ] || { say "libcuda1 of the $series series is not in the archive"; return 1; }
    say "libcuda1 $pin is gone from the archive; using $ver"
  fi
  tmp=$(mktemp -d "$cache/.clients/dl.XXXXXX") || return 1
  if ! (cd "$tmp" && apt_private apt-get -qq download "libcuda1=$ver") >"$tmp.log" 2>&1; then
    say "apt-get download libcuda1=$ver failed:"; grep -v '^W:' "$tmp.log" | tail -3 >&2
    rm -rf "$tmp" "$tmp.log" "$cache/.clients/apt/updated" # stale lists: refresh next time
    return 1
  fi
  dir=$(series_dir "$series")
  rm -rf "$dir" "$tmp/x" && dpkg -x "$tmp"/libcuda1_*.deb "$tmp/x" || { rm -rf "$tmp"; return 1; }
  local so
  so=$(find "$tmp/x" -name 'libcuda.so.1' | head -1)
  [ -n "$so" ] || { say "libcuda1=$ver holds no libcuda.so.1"; rm -rf "$tmp"; return 1; }
  mv "$(dirname "$so")" "$dir" && echo "$ver" >"$dir/VERSION"
  rm -rf "$tmp" "$tmp.log"
}

install_debs() {
  local row rc=0
  for row in "${DRIVER_PINS[@]}"; do
    set -- $row
    install_series "$1" "$2" || rc=1
  done
  return $rc
}

main() {
  local what=${1:-all} rc=0
  mkdir -p "$cache/.clients"
  # One installer at a time (tests run in parallel and may all call this).
  exec 9>"$cache/.clients/lock"
  flock 9 2>/dev/null || true
  case $what in
  venv) install_venv || rc=1 ;;
  debs) install_debs || rc=1 ;;
  all) install_venv || rc=1; install_debs || rc=1 ;;
  *) echo "usage: scripts/clients.sh [all|venv|debs]" >&2; return 2 ;;
  esac
  return $rc
}

main "$@"
