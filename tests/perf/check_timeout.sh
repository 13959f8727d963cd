#!/usr/bin/env bash
# -T: two ranks as processes (torchrun style); once rows are coming, rank 1 is stopped
# (SIGSTOP), so rank 0's next call cannot complete. Rank 0 must then abort its communicator
# and exit with code 4 ("Test timeout") naming the call, not hang. Only the -T watchdog
# exits 4 with that line: the transport's deadline (TERSE_TIMEOUT_S, 30 s here) would have ended
# the call as an NCCL failure (exit 3), so no clock is read here.
#
#   check_timeout.sh ALL_REDUCE_PERF
set -uo pipefail

binary=$1
# Long enough that no call but the stalled one reaches it on a loaded machine (init waits for the
# other process to start: well under a second here, once the processes run), well below
# TERSE_TIMEOUT_S.
limit=5
dir=$(mktemp -d)
pid0=
pid1=
trap 'kill -9 ${pid0} ${pid1} 2>/dev/null; rm -rf "$dir"' EXIT

fail() {
  echo "check_timeout.sh: $*" >&2
  echo "--- rank 0 output:" >&2
  cat "$dir/rank0.log" >&2
  echo "--- rank 1 output:" >&2
  cat "$dir/rank1.log" >&2
  exit 1
}
touch "$dir/rank0.log" "$dir/rank1.log"

# MASTER_PORT and the port after it (the bootstrap root's) stay bound by hold_ports.py until this
# script ends; rank 0's root binds its port through that (see hold_ports.py). A port found free
# and released before rank 0 started could be taken meanwhile, and rank 0 then failed at once.
coproc PORTS { exec python3 "$(dirname "$0")/../../perf/hold_ports.py" 2; }
read -r port <&"${PORTS[0]}" || fail "hold_ports.py gave no port"
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port

args=(-b 64K -e 64K -n 1000000 -w 0 -c 0 -T "$limit")
RANK=1 "$binary" "${args[@]}" >"$dir/rank1.log" 2>&1 &
pid1=$!
# Rank 0's output comes through a pipe, read here line by line: the header is seen the moment
# rank 0 prints it.
mkfifo "$dir/rank0.pipe"
RANK=0 "$binary" "${args[@]}" >"$dir/rank0.pipe" 2>&1 &
pid0=$!
exec {rank0_output}<"$dir/rank0.pipe"

# The column header: rank 0 prints it after an allreduce with rank 1 (the memory limit every rank
# agrees on, perf_main.cpp), so rank 1 is past init and in its rows too, and stopping it now
# stalls rank 0 in the row's first barrier or in one of its AllReduces (which one depends on
# where rank 1 stopped: both are ncclAllReduce). The deadline only turns a hang into a failure.
header=0
deadline=$((SECONDS + 60))
while ((SECONDS < deadline)) && IFS= read -r -t $((deadline - SECONDS)) line <&"$rank0_output"; do
  printf '%s\n' "$line" >>"$dir/rank0.log"
  if [[ $line == *'(elements)'* ]]; then
    header=1
    break
  fi
done
((header)) || fail "rank 0 printed no column header (it ended, or hung for 60 s)"
cat <&"$rank0_output" >>"$dir/rank0.log" &
drain=$!
exec {rank0_output}<&-
kill -STOP $pid1
wait $pid0
code=$?
pid0=
wait $drain # the rest of rank 0's output, to its end
cat "$dir/rank0.log"
[[ $code -eq 4 ]] || fail "rank 0 exited with $code, expected 4 (timeout)"
grep -qE "Test timeout \(${limit}s\) in (AllReduce|the barrier \(ncclAllReduce\)) " "$dir/rank0.log" ||
  fail "no 'Test timeout' line naming the barrier or AllReduce"
echo "check_timeout.sh: rank 0 aborted and exited 4"
