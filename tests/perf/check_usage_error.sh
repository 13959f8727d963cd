#!/usr/bin/env bash
# A bad command line: the binary must exit with code 1 (EXPECTED_EXIT when set: 3 for a
# refused NCCL call, as nccl-tests exits) and say what is wrong on stderr.
#
#   check_usage_error.sh "EXPECTED TEXT" COMMAND [ARGS...]
set -uo pipefail

expected=$1
shift
errors=$("$@" 2>&1 >/dev/null)
code=$?
printf '%s\n' "$errors"
want=${EXPECTED_EXIT:-1}
[[ $code -eq $want ]] || { echo "check_usage_error.sh: exit code $code, expected $want" >&2; exit 1; }
grep -qF -- "$expected" <<<"$errors" || {
  echo "check_usage_error.sh: stderr does not say '$expected'" >&2
  exit 1
}
