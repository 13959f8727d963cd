#!/usr/bin/env bash
# -T: two ranks as processes (torchrun style); once rows are coming, rank 1 is stopped
# (SIGSTOP), so rank 0's next call cannot complete. Rank 0 must then abort its communicator
# and exit with code 4 ("Test timeout") within the -T limit plus a few seconds, not hang.
#
#   check_timeout.sh ALL_REDUCE_PERF
set -uo pipefail

binary=$1
limit=2
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
  echo $((20000 + RANDOM % 20000)))
log0=$(mktemp)
log1=$(mktemp)
pid0=
pid1=
trap 'kill -9 ${pid0} ${pid1} 2>/dev/null; rm -f "$log0" "$log1"' EXIT

args=(-b 64K -e 64K -n 1000000 -w 0 -c 0 -T "$limit")
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$binary" "${args[@]}" >"$log1" 2>&1 &
pid1=$!
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$binary" "${args[@]}" >"$log0" 2>&1 &
pid0=$!

fail() {
  echo "check_timeout.sh: $*" >&2
  echo "--- rank 0 output:" >&2
  cat "$log0" >&2
  exit 1
}

# Wait for the column header: the communicator exists and calls are running.
for ((i = 0; i < 300; ++i)); do
  grep -q '(elements)' "$log0" && break
  kill -0 $pid0 2>/dev/null || fail "rank 0 ended before the rows began"
  sleep 0.1
done
grep -q '(elements)' "$log0" || fail "no rows after 30 s"
kill -STOP $pid1
start=$SECONDS
wait $pid0
code=$?
took=$((SECONDS - start))
cat "$log0"
[[ $code -eq 4 ]] || fail "rank 0 exited with $code, expected 4 (timeout)"
grep -q "Test timeout (${limit}s) in AllReduce" "$log0" || fail "no 'Test timeout' line"
((took <= limit + 8)) || fail "rank 0 took ${took} s to give up with -T $limit"
echo "check_timeout.sh: rank 0 aborted and exited 4 after ${took} s"
