#!/usr/bin/env bash
# The shipped libterse.so carries no test hook: it exports no symbol and holds no string named for
# tests (an environment variable such as TERSE_TEST_*, a factory such as terse_test_*, a mutation;
# tersePsTest is the parameter server's completion query, not a hook). Tests get
# their hooks by linking a test build (tests/host_kernels) or test-only objects.
#   check_no_test_hooks.sh LIBRARY
set -euo pipefail
library="${1:?usage: check_no_test_hooks.sh LIBRARY}"
[ -f "$library" ] || { echo "check_no_test_hooks.sh: no $library" >&2; exit 2; }
status=0
exported="$(nm -D --defined-only "$library" | awk '{print $3}' | grep -E '(^|_)[Tt]est_|_test($|_)|[Mm]utation' || true)"
if [ -n "$exported" ]; then
  echo "$library exports symbols named for tests:"
  echo "$exported"
  status=1
fi
strings_found="$(strings -a "$library" | grep -E 'TERSE_TEST_|terse_test_|_mutation' || true)"
if [ -n "$strings_found" ]; then
  echo "$library holds strings named for tests:"
  echo "$strings_found" | sort -u | head -20
  status=1
fi
[ "$status" -eq 0 ] && echo "$library: no test hook"
exit "$status"
