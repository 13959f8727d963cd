#!/usr/bin/env bash
# Runs N copies of a command as the ranks of one job on this machine, torchrun style: each gets
# RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (on loopback; that
# port and the next are held for the job: terse's perf binaries put their bootstrap root on
# MASTER_PORT + 1). If any rank fails, the others are stopped and the exit code is the first
# failure's.
#
#   perf/launch.sh 4 build/perf/all_reduce_perf -b 8 -e 64M -f 2
set -uo pipefail

if [[ $# -lt 2 || ! "$1" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 NRANKS COMMAND [ARGS...]" >&2
  exit 2
fi
nranks=$1
shift

# MASTER_PORT and the port after it stay bound by hold_ports.py until this script ends, so that no
# other process can take them before the ranks bind them (hold_ports.py says how they still
# can). Ports found free and released at once could be taken meanwhile, and rank 0 then failed.
coproc PORTS { exec python3 "$(dirname "$0")/hold_ports.py" 2; }
if ! read -r port <&"${PORTS[0]}"; then
  echo "launch.sh: hold_ports.py gave no port" >&2
  exit 1
fi

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
running=("${pids[@]}")
while ((remaining > 0)); do
  # Only ranks still running: bash 5.2 prints "no such job" for each pid already waited for.
  wait -n -p finished "${running[@]}"
  code=$?
  ((remaining--))
  still=()
  for pid in "${running[@]}"; do [[ $pid != "$finished" ]] && still+=("$pid"); done
  running=("${still[@]}")
  if ((code != 0 && status == 0)); then
    status=$code
    echo "launch.sh: a rank (pid $finished) exited with $code; stopping the others" >&2
    stop_all
  fi
done
exit $status
