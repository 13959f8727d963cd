#!/usr/bin/env bash
# Asserts that libterse.so exports the NCCL API and terse.h and nothing else: every defined
# dynamic symbol is nccl*, pnccl* or terse[A-Z]*, and ncclAllReduce, pncclAllReduce and
# terseAllReduceTensor are among them.
set -euo pipefail
library="$1"
symbols=$(nm -D --defined-only "$library" | awk '{print $3}')
status=0
for name in ncclAllReduce pncclAllReduce ncclCommInitRank pncclGroupEnd terseAllReduceTensor \
  terseCommGetStats; do
  if ! grep -qx "$name" <<<"$symbols"; then
    echo "missing export: $name"
    status=1
  fi
done
# Linker-made symbols a shared library may carry besides the API.
stray=$(grep -Ev '^(nccl|pnccl|terse[A-Z])' <<<"$symbols" | grep -Ev '^(_init|_fini|_edata|_end|__bss_start)$' || true)
if [ -n "$stray" ]; then
  echo "exports outside the NCCL API and terse.h:"
  echo "$stray"
  status=1
fi
echo "$(wc -l <<<"$symbols") symbols checked"
exit $status
