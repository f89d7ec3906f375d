#!/usr/bin/env bash
# exports_test.sh LIBCUDA PROCS_DEF: the simulator's SONAME is libcuda.so.1 and
# every exported cu* symbol has a cuGetProcAddress row (and vice versa).
set -u
lib=$1 def=$2
readelf -d "$lib" | grep -q 'SONAME.*\[libcuda.so.1\]' || { echo "FAIL: SONAME"; exit 1; }
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep '^cu' | sort -u)
table=$(grep -o '^SIM_PROC([^,]*, [^,]*' "$def" | awk '{print $2}' | sort -u)
missing=$(comm -23 <(echo "$exported") <(echo "$table"))
extra=$(comm -13 <(echo "$exported") <(echo "$table"))
[ -z "$missing" ] || { echo "FAIL: exported without a row: $missing"; exit 1; }
[ -z "$extra" ] || { echo "FAIL: rows without an export: $extra"; exit 1; }
other=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | grep -v '^cu' | grep -v '^simcuda_' || true)
[ -z "$other" ] || { echo "FAIL: unexpected exports: $other"; exit 1; }
echo "exports: $(wc -l <<<"$exported") cu* symbols, all in the table"
