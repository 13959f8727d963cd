#!/usr/bin/env bash
# A compressed all_reduce_perf run (-Z or TERSE_CODEC), checked as check_perf_run.sh checks any
# run (exit 0, no element apart from the reference model, ROWS rows), plus the compression
# columns: every row names CODEC, and the largest row's traffic ratio is below MAX_RATIO.
#
#   check_compressed_run.sh ROWS CODEC MAX_RATIO COMMAND [ARGS...]
set -uo pipefail

rows_expected=$1
codec=$2
max_ratio=$3
shift 3
output=$("$(dirname "$0")/check_perf_run.sh" "$rows_expected" "$@")
code=$?
printf '%s\n' "$output"
fail() {
  echo "check_compressed_run.sh: $*" >&2
  exit 1
}
[[ $code -eq 0 ]] || fail "the run failed its checks"
grep -qE '^# +size .* codec +ratio +rel_err +mean_err$' <<<"$output" ||
  fail "no codec/ratio/rel_err/mean_err header"
rows=$(grep -E '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ ' <<<"$output")
named=$(awk -v codec="$codec" '$(NF-3) == codec' <<<"$rows" | wc -l)
[[ $named -eq $rows_expected ]] || fail "$named of $rows_expected rows name codec $codec"
last_ratio=$(tail -n 1 <<<"$rows" | awk '{print $(NF-2)}')
awk -v r="$last_ratio" -v m="$max_ratio" 'BEGIN { exit !(r > 0 && r < m) }' ||
  fail "the largest row's ratio $last_ratio is not in (0, $max_ratio)"
echo "check_compressed_run.sh: codec $codec on every row, largest ratio $last_ratio"
