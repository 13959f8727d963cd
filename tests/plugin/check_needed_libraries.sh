#!/usr/bin/env bash
# What the dynamic loader must find for libterse.so to load: cuBLAS is not among them (PowerSGD's
# device path loads it when first used, codecs/cuda/cublas_library.h), so a process that links
# libterse does not pay cuBLAS's start-up cost, nor need it installed.
#   check_needed_libraries.sh LIBRARY
set -euo pipefail
library="${1:?usage: check_needed_libraries.sh LIBRARY}"
[ -f "$library" ] || { echo "check_needed_libraries.sh: no $library" >&2; exit 2; }
needed="$(readelf -d "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
echo "$library needs: $(echo "$needed" | tr '\n' ' ')"
if echo "$needed" | grep -q '^libcublas'; then
  echo "$library links cuBLAS; it must load it only when PowerSGD runs on a device"
  exit 1
fi
