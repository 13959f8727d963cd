#!/usr/bin/env bash
# Line coverage of codecs/cuda/*.cu and *.cuh by the host-built kernels' runs, from the gcov data
# a build configured with -DTERSE_HOST_KERNELS_COVERAGE=ON left after its tests ran (the
# translated sources carry #line directives, so gcov counts the original files' lines).
#   tests/host_kernels/coverage.sh BUILD_DIR
set -euo pipefail
build="$(cd "${1:?usage: coverage.sh BUILD_DIR}" && pwd)"
objects="$build/tests/host_kernels/CMakeFiles/terse_host_kernel_objects.dir"
[ -d "$objects" ] || { echo "coverage.sh: no $objects" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
find "$objects" -name '*.gcda' -print0 | xargs -0 -r -n 1 gcov -p >/dev/null 2>&1 || true
# Every .gcov of a codecs/cuda source, merged per source line: covered if any object ran it.
total=0
covered=0
for source in $(ls ./*codecs#cuda#*.gcov 2>/dev/null | sed 's/.*codecs#cuda#//' | sort -u); do
  read -r lines hit < <(cat ./*"codecs#cuda#$source" | awk -F: '
    { count = $1; gsub(/ /, "", count); line = $2 + 0 }
    count == "-" || line == 0 { next }
    { seen[line] = 1; if (count != "#####" && count != "=====") ran[line] = 1 }
    END { n = 0; h = 0; for (l in seen) { n++; if (l in ran) h++ } print n, h }')
  printf '%-32s %5d of %5d lines\n' "${source%.gcov}" "$hit" "$lines"
  total=$((total + lines))
  covered=$((covered + hit))
done
[ "$total" -gt 0 ] || { echo "coverage.sh: no gcov data for codecs/cuda (tests not run?)" >&2; exit 1; }
awk -v c="$covered" -v t="$total" 'BEGIN { printf "codecs/cuda: %d of %d lines run (%.1f%%)\n", c, t, 100 * c / t }'
