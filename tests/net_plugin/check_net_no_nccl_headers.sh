#!/usr/bin/env bash
# Asserts that nothing compiled into libnccl-net-terse.so included NCCL's or the CUDA toolkit's
# headers (issue 13: the plugin builds from the ncclNet ABI's facts alone, plugin/net/net_abi.h).
# An include-path check could not say so, since nccl.h may sit in a default include directory
# (/usr/local/include): the compiler's own dependency files (<object>.d, which CMake's Makefile
# and Ninja generators write) list every header each object actually read.
#   $1: the objects of the plugin and of the static libraries it links, ';'-separated
#   $2: the CUDA toolkit's include directories, ';'-separated (may be empty)
set -euo pipefail
IFS=';' read -r -a objects <<<"$1"
IFS=';' read -r -a cuda_dirs <<<"${2:-}"
status=0
checked=0
for object in "${objects[@]}"; do
  [ -n "$object" ] || continue
  depfile="$object.d"
  if [ ! -f "$depfile" ]; then
    echo "no dependency file $depfile: cannot tell what $object included"
    status=1
    continue
  fi
  checked=$((checked + 1))
  # One header per token; line continuations and the target name are noise.
  headers=$(tr ' \\' '\n\n' <"$depfile" | grep -E '\.(h|hpp|cuh)$' || true)
  # By name as well as by directory: copies of both live in /usr/local/include on some machines.
  if grep -qE '(^|/)(nccl|cuda)[^/]*\.h$' <<<"$headers"; then
    echo "$object included NCCL's or CUDA's headers:"
    grep -E '(^|/)(nccl|cuda)[^/]*\.h$' <<<"$headers" | sort -u
    status=1
  fi
  for dir in "${cuda_dirs[@]}"; do
    [ -n "$dir" ] || continue
    if grep -qF "${dir%/}/" <<<"$headers"; then
      echo "$object included headers from the CUDA toolkit ($dir):"
      grep -F "${dir%/}/" <<<"$headers" | sort -u
      status=1
    fi
  done
done
if [ "$checked" -eq 0 ]; then
  echo "no objects checked"
  status=1
fi
echo "$checked objects checked"
exit $status
