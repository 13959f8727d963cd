#!/bin/bash
# The wrap-mode routing tests (plugin/comm_mode.h), without a GPU: an application linked to the
# recording stand-in libnccl.so.2 runs under LD_PRELOAD=libterse.so in each mode and launch
# style; the application checks its results and the stand-in's log of the calls it received
# (wrap_routing_app.cpp); this script checks what only a comparison of runs can show (wrap's
# compressed results equal engine's bit for bit) and the mode errors and logs.
#
# usage: routing_test.sh LIBTERSE RECORDING_LIBNCCL APP APP_LINKED_TO_TERSE POLICY_YAML
set -u
libterse=$1
standin=$2
app=$3
app_terse=$4
policy=$5

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RECORDING_NCCL_DIR=$work TERSE_POLICY=$policy TERSE_DEBUG=NONE
# One algorithm whatever the planner's measured codec speeds say, so that two runs compress
# alike and their results can be compared bit for bit.
export TERSE_COMPRESSED_ALGO=sra
# Without a device even where there is one: the stand-in works on host memory.
export CUDA_VISIBLE_DEVICES=
failed=0

# run NAME ENV... -- COMMAND...: runs it with the stand-in logging to $work/NAME.log.
run() {
  local name=$1
  shift
  local settings=()
  while [ "$1" != "--" ]; do settings+=("$1"); shift; done
  shift
  if env RECORDING_NCCL_LOG="$work/$name.log" "${settings[@]}" "$@" >"$work/$name.out" 2>&1; then
    echo "ok   $name"
  else
    echo "FAIL $name"
    sed 's/^/     /' "$work/$name.out" | tail -40
    failed=1
  fi
}

expect_in_output() {
  local name=$1 text=$2
  if ! grep -q -- "$text" "$work/$name.out"; then
    echo "FAIL $name: its output does not say \"$text\""
    failed=1
  fi
}

# Every call the policy leaves alone reaches the stand-in, compressed allreduces do not, and
# every result is right: ranks as processes, as threads, created in one group, by InitAll.
for launch in "processes 2" "processes 4" "threads 3" "group-init 2" "init-all 4"; do
  set -- $launch
  mkdir -p "$work/wrap-$1-$2"
  run "wrap-$1-$2" LD_PRELOAD="$libterse" TERSE_MODE=wrap WRAP_EXPECT=wrap \
    WRAP_RESULT_DIR="$work/wrap-$1-$2" -- "$app" routing "$2" "$1"
done

# Engine mode: the stand-in gets nothing, and the compressed results are wrap's, bit for bit
# (the same terse code ran them; only the way the ranks met differs).
for n in 2 4; do
  mkdir -p "$work/engine-$n"
  run "engine-processes-$n" LD_PRELOAD="$libterse" TERSE_MODE=engine WRAP_EXPECT=engine \
    WRAP_RESULT_DIR="$work/engine-$n" -- "$app" routing "$n" processes
  for result in "$work/engine-$n"/*.bin; do
    if ! cmp -s "$result" "$work/wrap-processes-$n/$(basename "$result")"; then
      echo "FAIL engine-processes-$n: $(basename "$result") differs from wrap mode's"
      failed=1
    fi
  done
  count=$(ls "$work/engine-$n"/*.bin 2>/dev/null | wc -l)
  if [ "$count" -ne $((2 * n)) ]; then
    echo "FAIL engine-processes-$n: $count result files, expected $((2 * n))"
    failed=1
  fi
done

# ncclCommShrink and ncclCommRevoke: the real NCCL shrinks, terse's side of the new
# communicator is made from it, and its calls route as any communicator's; revoking reaches both.
run shrink-processes-3 LD_PRELOAD="$libterse" TERSE_MODE=wrap -- "$app" shrink 3 processes
run shrink-threads-4 LD_PRELOAD="$libterse" TERSE_MODE=wrap -- "$app" shrink 4 threads

# A policy of `auto`: the calls it leaves uncompressed go to the real NCCL as well, decided on
# codec speeds the ranks agreed at creation. With codecs this slow, auto compresses nothing
# (every allreduce reaches the stand-in); with codecs this fast, and shared memory said to be as
# slow as a 1 Gbit/s network, it compresses the 4096 and 8192 ones (predicted 3x faster, far
# from auto's 1.2x threshold), which stay in terse. The reduction's speed is pinned too: measured,
# it moved the prediction at the default link speed across that threshold.
printf 'fp16 0.05 0.05\nbf16 0.05 0.05\nint8 0.05 0.05\nreduce 5\n' >"$work/slow_codecs.txt"
printf 'fp16 1000 1000\nbf16 1000 1000\nint8 1000 1000\nreduce 5\n' >"$work/fast_codecs.txt"
run wrap-auto-slow LD_PRELOAD="$libterse" TERSE_MODE=wrap TERSE_POLICY= TERSE_CODEC=auto \
  TERSE_CODEC_SPEED="$work/slow_codecs.txt" WRAP_EXPECT=wrap-uncompressed -- \
  "$app" routing 2 processes
run wrap-auto-fast LD_PRELOAD="$libterse" TERSE_MODE=wrap TERSE_POLICY= TERSE_CODEC=auto \
  TERSE_CODEC_SPEED="$work/fast_codecs.txt" TERSE_SHM_GBPS=1 WRAP_EXPECT=wrap -- \
  "$app" routing 2 processes

# ncclGroupSimulateEnd in wrap mode: the stand-in simulates its part, terse adds its own, and
# hand-offs of a simulated group do not count as their tensors' steps, nor do those the stand-in
# refuses (the allreduces of 5000); a nonblocking group runs (wrap_routing_app.cpp).
for n in 2 3; do
  run "wrap-simulate-processes-$n" LD_PRELOAD="$libterse" TERSE_MODE=wrap \
    RECORDING_NCCL_REFUSE_COUNT=5000 \
    TERSE_POLICY="$(dirname "$policy")/simulate_schedule.yaml" -- "$app" simulate "$n" processes
done
run wrap-simulate-threads-2 LD_PRELOAD="$libterse" TERSE_MODE=wrap \
  RECORDING_NCCL_REFUSE_COUNT=5000 \
  TERSE_POLICY="$(dirname "$policy")/simulate_schedule.yaml" -- "$app" simulate 2 threads

# auto without a CUDA device: engine, and it says why.
run auto-no-device LD_PRELOAD="$libterse" TERSE_DEBUG=INFO WRAP_EXPECT=engine -- \
  "$app" routing 2 threads
expect_in_output auto-no-device "TERSE_MODE=auto: engine (no CUDA device is present)"
expect_in_output auto-no-device "rank 0 of 2: engine mode"

# Each communicator's mode is logged.
run wrap-logged LD_PRELOAD="$libterse" TERSE_MODE=wrap TERSE_DEBUG=INFO WRAP_EXPECT=wrap -- \
  "$app" routing 2 threads
expect_in_output wrap-logged "rank 1 of 2: wrap mode: uncompressed calls on the real NCCL"

# An application linked to libterse, with the real library named by TERSE_NCCL_LIBRARY.
run linked-to-terse TERSE_NCCL_LIBRARY="$standin" TERSE_MODE=wrap WRAP_EXPECT=wrap -- \
  "$app_terse" routing 3 processes

# The real side's asynchronous failure is the communicator's.
run async-error-processes LD_PRELOAD="$libterse" TERSE_MODE=wrap \
  RECORDING_NCCL_ASYNC_ERROR_COUNT=777 -- "$app" async_error 2 processes
run async-error-threads LD_PRELOAD="$libterse" TERSE_MODE=wrap \
  RECORDING_NCCL_ASYNC_ERROR_COUNT=777 -- "$app" async_error 3 threads

# Mode errors: a result code and a message naming the setting, never a crash.
run bad-mode LD_PRELOAD="$libterse" TERSE_MODE=bogus WRAP_EXPECT_ERROR=4 \
  WRAP_EXPECT_WORDS="TERSE_MODE=bogus" -- "$app" mode_error 1 threads
run wrap-without-nccl TERSE_MODE=wrap WRAP_EXPECT_ERROR=5 \
  WRAP_EXPECT_WORDS="TERSE_MODE TERSE_NCCL_LIBRARY" -- "$app_terse" mode_error 1 threads
run wrap-over-itself TERSE_MODE=wrap TERSE_NCCL_LIBRARY="$libterse" WRAP_EXPECT_ERROR=5 \
  WRAP_EXPECT_WORDS="TERSE_MODE TERSE_NCCL_LIBRARY" -- "$app_terse" mode_error 1 threads
run wrap-missing-library TERSE_MODE=wrap TERSE_NCCL_LIBRARY="$work/none.so" WRAP_EXPECT_ERROR=5 \
  WRAP_EXPECT_WORDS="TERSE_MODE TERSE_NCCL_LIBRARY" -- "$app_terse" mode_error 1 threads

exit $failed
