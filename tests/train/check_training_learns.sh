#!/usr/bin/env bash
# check_training_learns.sh LEVEL COMMAND [ARGS...]: runs train_fmnist and passes when it exits 0,
# every epoch line reads exactly "epoch E train_loss L test_acc A wire_ratio R" with E counting
# from 1, and the last epoch's train_loss is below LEVEL (tests/train/CMakeLists.txt says why
# that level). WIRE_BELOW=X also requires the last wire_ratio below X (compression happened);
# WIRE_EQUALS=X requires every epoch's wire_ratio to equal X (an exact traffic model);
# HEADER_HAS=TEXT requires the "# train_fmnist:" line to contain TEXT (e.g. the sync scheme ran).
set -uo pipefail
level=$1
shift
output=$("$@" 2>&1)
code=$?
printf '%s\n' "$output"
if ((code != 0)); then
  echo "check_training_learns: the trainer exited with $code (its output is above)" >&2
  exit 1
fi
if [[ -n ${HEADER_HAS:-} ]] && ! printf '%s\n' "$output" | grep '^# train_fmnist:' |
  grep -qF -- "$HEADER_HAS"; then
  echo "check_training_learns: the '# train_fmnist:' line does not say '$HEADER_HAS'" >&2
  exit 1
fi
printf '%s\n' "$output" | awk -v level="$level" -v wire_below="${WIRE_BELOW:-}" \
  -v wire_equals="${WIRE_EQUALS:-}" '
  /^epoch / {
    if (NF != 8 || $3 != "train_loss" || $5 != "test_acc" || $7 != "wire_ratio" ||
        $2 != epochs + 1) {
      print "check_training_learns: malformed epoch line: " $0 > "/dev/stderr"
      bad = 1
    }
    if (wire_equals != "" && $8 + 0 != wire_equals + 0) {
      printf "check_training_learns: epoch %s: wire_ratio %s is not %s\n", $2, $8,
             wire_equals > "/dev/stderr"
      bad = 1
    }
    epochs = $2; loss = $4; ratio = $8
  }
  END {
    if (bad) exit 1
    if (epochs == 0) { print "check_training_learns: no epoch line" > "/dev/stderr"; exit 1 }
    if (!(loss + 0 < level + 0)) {
      printf "check_training_learns: train_loss %s after epoch %d is not below %s\n", loss,
             epochs, level > "/dev/stderr"
      exit 1
    }
    if (wire_below != "" && !(ratio + 0 < wire_below + 0)) {
      printf "check_training_learns: wire_ratio %s is not below %s\n", ratio,
             wire_below > "/dev/stderr"
      exit 1
    }
    printf "check_training_learns: train_loss %s < %s after epoch %d\n", loss, level, epochs
  }'
