#!/usr/bin/env bash
# A compressed row's #wrong can fail: with corrupt_allreduce.so preloaded in CORRUPT_MODE=zero
# (every float allreduce result zeroed after the real call), all_reduce_perf -Z CODEC must count
# wrong elements in every half of every row (every element where the reference model is not
# zero: all of them for dense codecs, the kept ones for sparsifiers), report the checks as
# FAILED, and exit 7. Before the model, a zero result passed the stated bound of top-k, sign and
# PowerSGD.
#
#   check_compressed_wrong_detected.sh CORRUPT_ALLREDUCE_SO ALL_REDUCE_PERF CODEC [MORE ARGS]
set -uo pipefail

preload=$1
binary=$2
codec=$3
shift 3
output=$(CORRUPT_MODE=zero LD_PRELOAD="$preload" "$binary" -b 4K -e 64K -f 4 -n 2 -w 1 -t 2 \
  -Z "$codec" "$@" 2>&1)
code=$?
printf '%s\n' "$output"

fail() {
  echo "check_compressed_wrong_detected.sh: $*" >&2
  exit 1
}

[[ $code -eq 7 ]] || fail "exit code $code, expected 7 (wrong elements)"
# 4, 16, 64 KiB of floats: each half of a row must count at least 1% of its 2 ranks' elements.
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 == "float" {
  least = 0.02 * $2; if ($9 >= least && $13 >= least) n++ } END { print n + 0 }' <<<"$output")
[[ $rows -eq 3 ]] || fail "$rows rows count wrong elements in both halves, expected 3"
grep -qE '^# Out of bounds values : [1-9][0-9]* FAILED$' <<<"$output" ||
  fail "no '# Out of bounds values : N FAILED'"
echo "check_compressed_wrong_detected.sh: the zeroed $codec results were counted wrong"
