#!/usr/bin/env bash
# The check can fail: with corrupt_allreduce.so preloaded (one element of every float
# allreduce off by one, on every rank), all_reduce_perf must count one wrong element per rank
# in every half of every row, report the out-of-bounds checks as FAILED, and exit 7.
#
#   check_wrong_detected.sh CORRUPT_ALLREDUCE_SO ALL_REDUCE_PERF [MORE ARGS, e.g. -B device]
set -uo pipefail

preload=$1
binary=$2
shift 2
output=$(LD_PRELOAD="$preload" "$binary" -b 8 -e 1K -f 4 -n 2 -w 1 -t 2 "$@" 2>&1)
code=$?
printf '%s\n' "$output"

fail() {
  echo "check_wrong_detected.sh: $*" >&2
  exit 1
}

[[ $code -eq 7 ]] || fail "exit code $code, expected 7 (wrong elements)"
# 8, 32, 128, 512 B: 4 rows, each half with 2 wrong elements (one per rank), 16 failed checks.
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +float +sum +-1 +.* 2$' <<<"$output")
[[ $rows -eq 4 ]] || fail "$rows rows end with #wrong 2, expected 4"
grep -qx '# Out of bounds values : 16 FAILED' <<<"$output" || fail "no '# Out of bounds values : 16 FAILED'"
echo "check_wrong_detected.sh: the corrupted element was found in every check"
