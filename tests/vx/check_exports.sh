#!/bin/sh
# vx_exports: the dynamic symbols libvx.so defines are exactly the VX_HOOK
# rows of core/hooks.def (no more, no fewer).
set -eu
lib=$1 names=$2
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u > exports.got
tr ';' '\n' < "$names" | sed '/^$/d' | sort -u > exports.want
[ "$(wc -l < exports.want)" -ge 30 ] || { echo "hook list too short"; exit 1; }
if ! diff -u exports.want exports.got; then
  echo "vx_exports: libvx.so exports differ from hooks.def"
  exit 1
fi
echo "vx_exports: $(wc -l < exports.got) symbols, as listed"
