#!/usr/bin/env bash
# Runs N copies of a command as the ranks of one job on this machine, torchrun style: each gets
# RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (on loopback; that
# port and the next are free: terse's perf binaries put their bootstrap root on MASTER_PORT + 1). If any rank fails, the others are stopped and the exit code is the first failure's.
#
#   perf/launch.sh 4 build/perf/all_reduce_perf -b 8 -e 64M -f 2
set -uo pipefail

if [[ $# -lt 2 || ! "$1" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 NRANKS COMMAND [ARGS...]" >&2
  exit 2
fi
nranks=$1
shift

free_port_pair() {
  python3 - <<'PY'
import socket
while True:
    first = socket.socket()
    first.bind(("127.0.0.1", 0))
    port = first.getsockname()[1]
    if port >= 65535:
        continue
    second = socket.socket()
    try:
        second.bind(("127.0.0.1", port + 1))
    except OSError:
        continue
    print(port)
    break
PY
}
port=$(free_port_pair)

pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
}
trap 'stop_all; exit 130' INT TERM

for ((rank = 0; rank < nranks; ++rank)); do
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=$nranks LOCAL_WORLD_SIZE=$nranks \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
  pids+=($!)
done

status=0
remaining=$nranks
while ((remaining > 0)); do
  wait -n -p finished
  code=$?
  ((remaining--))
  if ((code != 0 && status == 0)); then
    status=$code
    echo "launch.sh: a rank (pid $finished) exited with $code; stopping the others" >&2
    stop_all
  fi
done
exit $status
