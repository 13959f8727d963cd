#!/usr/bin/env bash
# Does compressed training still learn? (issue 14.) Trains train_fmnist on Fashion-MNIST with
# every gradient codec of the study, the same ranks, epochs, seed and hyper-parameters, and
# writes a table and two charts (accuracy against epoch and against bytes sent).
#
#   perf/convergence.sh [-e EPOCHS] [-m mlp|cnn] [-r RANKS] [-s SEED] [-B BUILDDIR] [-o OUTDIR]
#                       [-k "RUN ..."]
#
# Defaults: 10 epochs, the MLP, 4 ranks (threads of one process), seed 1, build/, output in
# perf/results/convergence/MODEL/; -k runs only the named runs. The runs:
#   none fp16 int8 int4 mxfp8 mxfp4 nvfp4   TERSE_CODEC=name (codec defaults)
#   sign_ef                                 sign, residual memory (error feedback)
#   topk1_ef                                topk:ratio=0.01, residual memory
#   topk1_no_ef                             the same without memory (perf/policies/topk_without_ef.yaml)
#   dgc0.1                                  dgc:ratio=0.001 (its momentum correction replaces SGD's)
#   powersgd4                               powersgd:rank=4
#   per_layer                               first and last layers uncompressed, the others topk 1%
#                                           + EF (perf/policies/fmnist_MODEL_first_last_dense.yaml)
# The planner plans from perf/convergence_codec_speeds.txt (TERSE_CODEC_SPEED, unless set), so
# that a run's algorithms, and so its results, do not depend on the machine's load.
# Each run leaves RUN.json (train_fmnist --json) and RUN.log; a run whose codec this build does not
# register is skipped, its reason in RUN.skipped and in the table; any other failure fails the
# script (after the remaining runs). Then OUTDIR/table.md (perf/convergence_table.py) and
# OUTDIR/accuracy_vs_epoch.png, OUTDIR/accuracy_vs_bytes.png (perf/plot --convergence).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

epochs=10
model=mlp
ranks=4
seed=1
build=build
out=
only=
while getopts "e:m:r:s:B:o:k:h" flag; do
  case $flag in
    e) epochs=$OPTARG ;;
    m) model=$OPTARG ;;
    r) ranks=$OPTARG ;;
    s) seed=$OPTARG ;;
    B) build=$OPTARG ;;
    o) out=$OPTARG ;;
    k) only=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
if [[ $model != mlp && $model != cnn ]]; then
  echo "convergence.sh: -m $model: the model is mlp or cnn" >&2
  exit 2
fi
trainer=$build/perf/train_fmnist
if [[ ! -x $trainer ]]; then
  echo "convergence.sh: no $trainer: build it (cmake --build $build --target train_fmnist) or" \
    "name the build directory with -B" >&2
  exit 2
fi
out=${out:-perf/results/convergence/$model}
mkdir -p "$out"

# name, then the variable and value that choose its compression.
runs=(
  "none TERSE_CODEC=none"
  "fp16 TERSE_CODEC=fp16"
  "int8 TERSE_CODEC=int8"
  "int4 TERSE_CODEC=int4"
  "mxfp8 TERSE_CODEC=mxfp8"
  "mxfp4 TERSE_CODEC=mxfp4"
  "nvfp4 TERSE_CODEC=nvfp4"
  "sign_ef TERSE_CODEC=sign"
  "topk1_ef TERSE_CODEC=topk:ratio=0.01"
  "topk1_no_ef TERSE_POLICY=perf/policies/topk_without_ef.yaml"
  "dgc0.1 TERSE_CODEC=dgc:ratio=0.001"
  "powersgd4 TERSE_CODEC=powersgd:rank=4"
  "per_layer TERSE_POLICY=perf/policies/fmnist_${model}_first_last_dense.yaml"
)

failed=()
for entry in "${runs[@]}"; do
  read -r name setting <<<"$entry"
  if [[ -n $only && " $only " != *" $name "* ]]; then continue; fi
  rm -f "$out/$name.json" "$out/$name.log" "$out/$name.skipped"
  echo "== $name ($setting)"
  # Only this run's setting: an inherited TERSE_CODEC or TERSE_POLICY would conflict with it.
  if env -u TERSE_CODEC -u TERSE_POLICY TERSE_SOCKET_IFNAME="${TERSE_SOCKET_IFNAME:-lo}" \
    TERSE_SOCKET_FAMILY="${TERSE_SOCKET_FAMILY:-AF_INET}" \
    TERSE_CODEC_SPEED="${TERSE_CODEC_SPEED:-perf/convergence_codec_speeds.txt}" "$setting" \
    "$trainer" --epochs "$epochs" --ranks "$ranks" --model "$model" --seed "$seed" \
    --json "$out/$name.json" 2>&1 | tee "$out/$name.log"; then
    continue
  fi
  if grep -q "unknown codec" "$out/$name.log"; then
    # The codec is not in this build's registry (e.g. one still being written): say so.
    reason=$(grep -m1 -o "TERSE_CODEC=[^ ]*: unknown codec '[^']*'" "$out/$name.log")
    echo "$reason (not registered in this build)" >"$out/$name.skipped"
    rm -f "$out/$name.json"
    echo "== $name skipped: $(cat "$out/$name.skipped")"
  else
    failed+=("$name")
  fi
done

python3 perf/convergence_table.py "$out" | tee "$out/table.md"
perf/plot --convergence "$out" "$out"/*.json
if ((${#failed[@]} > 0)); then
  echo "convergence.sh: failed: ${failed[*]} (their logs are in $out)" >&2
  exit 1
fi
