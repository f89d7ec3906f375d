#!/bin/sh
# README.md must carry the options table exactly as `vx env --markdown`
# generates it from core/options.def.
# usage: readme_options.sh VX_BINARY README.md
vx=$1 readme=$2
table=$("$vx" env --markdown) || { echo "vx env --markdown failed"; exit 1; }
[ -n "$table" ] || { echo "vx env --markdown printed nothing"; exit 1; }
missing=0
printf '%s\n' "$table" | while IFS= read -r line; do
  grep -qxF -- "$line" "$readme" || { echo "README.md lacks: $line"; exit 1; }
done || missing=1
[ $missing -eq 0 ] && echo "README options table: $(printf '%s\n' "$table" | wc -l) rows present"
exit $missing
