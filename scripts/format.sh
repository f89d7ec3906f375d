#!/usr/bin/env bash
# format.sh: clang-format (the repo's .clang-format) over the production
# sources: core/ interpose/ tiers/ obs/ policy/ nvme/ tools/ (*.c, *.h).
#
#   scripts/format.sh           rewrite them in place
#   scripts/format.sh --check   change nothing; list the files that differ,
#                               exit 1 if any does (scripts/test.sh runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is not installed"; exit 2; }
mapfile -t files < <(git ls-files 'core/*.[ch]' 'obs/*.[ch]' 'interpose/*.[ch]' 'tiers/*.[ch]' 'policy/*.[ch]' 'nvme/*.[ch]' \
                                  'tools/*.[ch]' 2>/dev/null || true)
[ "${#files[@]}" -gt 0 ] || { echo "format: no sources found (not a git checkout?)"; exit 2; }
if [ "${1:-}" != --check ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "format: $f is not clang-formatted"; bad=1; }
done
[ $bad -eq 0 ] && echo "format: ${#files[@]} production sources clang-formatted"
[ $bad -eq 0 ] || echo "format: run scripts/format.sh to fix"
exit $bad
