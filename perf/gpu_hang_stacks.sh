#!/usr/bin/env bash
# Runs a command; if it is still running after SECONDS, writes every thread's stack of it and of
# each process it started (cuda-gdb where there is no gdb, as on the GPU machines) to LOG, then
# kills them all. A GPU test that hangs then says where, instead of only that it timed out.
#
# Usage: perf/gpu_hang_stacks.sh SECONDS LOG COMMAND [ARG...]
# Exit: the command's own status when it ends in time, 124 when it was stopped.
set -uo pipefail

[ $# -ge 3 ] || { sed -n '2,8p' "$0"; exit 2; }
seconds="$1"
log="$2"
shift 2

debugger="$(command -v gdb || command -v cuda-gdb || true)"
# The process and its descendants, parents first.
tree() {
  local pid="$1" child
  echo "$pid"
  for child in $(pgrep -P "$pid" 2>/dev/null); do tree "$child"; done
}

"$@" &
pid=$!
for _ in $(seq "$((seconds * 10))"); do
  kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit $?; }
  sleep 0.1
done

{
  echo "gpu_hang_stacks.sh: '$*' still running after ${seconds}s; stacks of its processes:"
  for p in $(tree "$pid"); do
    echo "=== pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    if [ -n "$debugger" ]; then
      timeout 60 "$debugger" -batch -p "$p" -ex "set pagination off" \
        -ex "thread apply all bt 30" 2>&1 | grep -vE '^\[New LWP|^warning: ' || true
    else
      echo "(no gdb or cuda-gdb: kernel stacks only)"
      for task in /proc/"$p"/task/*; do
        echo "--- thread ${task##*/} ($(cat "$task/comm" 2>/dev/null)): $(cat "$task/wchan" 2>/dev/null)"
      done
    fi
  done
} >"$log" 2>&1
for p in $(tree "$pid"); do kill -9 "$p" 2>/dev/null; done
wait "$pid" 2>/dev/null
exit 124
