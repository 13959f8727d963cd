#!/usr/bin/env bash
# A bad command line: the binary must exit with code 1 and say what is wrong on stderr.
#
#   check_usage_error.sh "EXPECTED TEXT" COMMAND [ARGS...]
set -uo pipefail

expected=$1
shift
errors=$("$@" 2>&1 >/dev/null)
code=$?
printf '%s\n' "$errors"
[[ $code -eq 1 ]] || { echo "check_usage_error.sh: exit code $code, expected 1" >&2; exit 1; }
grep -qF -- "$expected" <<<"$errors" || {
  echo "check_usage_error.sh: stderr does not say '$expected'" >&2
  exit 1
}
