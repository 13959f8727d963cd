#!/usr/bin/env bash
# Asserts that libnccl-net-terse.so exports ncclNetPlugin_v11, _v10, _v9 and _v8 and nothing else
# (NCCL dlsym's those; anything else could clash with the application's or NCCL's own symbols).
set -euo pipefail
library="$1"
symbols=$(nm -D --defined-only "$library" | awk '{print $3}')
status=0
for name in ncclNetPlugin_v11 ncclNetPlugin_v10 ncclNetPlugin_v9 ncclNetPlugin_v8; do
  if ! grep -qx "$name" <<<"$symbols"; then
    echo "missing export: $name"
    status=1
  fi
done
stray=$(grep -Ev '^ncclNetPlugin_v(8|9|10|11)$' <<<"$symbols" |
  grep -Ev '^(_init|_fini|_edata|_end|__bss_start)$' || true)
if [ -n "$stray" ]; then
  echo "exports besides the ncclNetPlugin tables:"
  echo "$stray"
  status=1
fi
echo "$(wc -l <<<"$symbols") symbols checked"
exit $status
