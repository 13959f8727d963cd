#!/usr/bin/env bash
# Runs a perf binary (or a launcher of it) and checks what it printed, as a reader of
# nccl-tests output would: exit code 0, "# Out of bounds values : 0 OK", and exactly ROWS rows
# (lines of numbers). With PERF_JSON set, the JSON file must also hold ROWS rows.
#
#   check_perf_run.sh ROWS COMMAND [ARGS...]
set -uo pipefail

rows_expected=$1
shift
output=$("$@" 2>&1)
code=$?
printf '%s\n' "$output"

fail() {
  echo "check_perf_run.sh: $*" >&2
  exit 1
}

[[ $code -eq 0 ]] || fail "exit code $code, expected 0"
grep -qx '# Out of bounds values : 0 OK' <<<"$output" || fail "no '# Out of bounds values : 0 OK'"
grep -q '^# Avg bus bandwidth    : [0-9]' <<<"$output" || fail "no '# Avg bus bandwidth' line"
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ ' <<<"$output")
[[ $rows -eq $rows_expected ]] || fail "$rows rows, expected $rows_expected"
if [[ -n "${PERF_JSON:-}" ]]; then
  json_rows=$(grep -o '"collective": ' "$PERF_JSON" | wc -l)
  [[ $json_rows -eq $rows_expected ]] || fail "$PERF_JSON holds $json_rows rows, expected $rows_expected"
fi
echo "check_perf_run.sh: exit 0, $rows rows, no wrong elements"
