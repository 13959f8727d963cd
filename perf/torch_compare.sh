#!/usr/bin/env bash
# PyTorch's own compression beside terse's (issue 26): DDP training of a Fashion-MNIST CNN on the
# emulated cluster (perf/emulated_cluster.sh: NODES namespaces behind RATE links), the same model,
# data and seeds over gloo (uncompressed, fp16_compress_hook, powerSGD_hook rank 4 with error
# feedback) and over the terse backend (codecs none, fp16, int8, top-k 1%, PowerSGD rank 4, auto;
# and PowerSGD rank 4 per parameter through torch_terse.hooks.compress).
# Per variant: time per step, bytes each node sent per step, test accuracy after EPOCHS; a table
# (OUTDIR/table.md) and a chart (OUTDIR/torch_compare.png).
#
#   sudo perf/torch_compare.sh [-n NODES] [-r RATE] [-s "0 1 2"] [-e EPOCHS] [-o OUTDIR]
#
# Defaults: 4 nodes, 1gbit, seeds 0 1 2, 1 epoch, build/torch_compare/. Needs root (namespaces),
# a built tree with torch_terse (./cmake/build.sh) and Debian's python3-torch.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=4 rate=1gbit seeds="0 1 2" epochs=1 out=build/torch_compare
while getopts "n:r:s:e:o:h" flag; do
  case $flag in
    n) nodes=$OPTARG ;;
    r) rate=$OPTARG ;;
    s) seeds=$OPTARG ;;
    e) epochs=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
[[ -f build/python/torch_terse/__init__.py ]] || { echo "torch_compare.sh: build torch_terse first (./cmake/build.sh)" >&2; exit 1; }
mkdir -p "$out"
terse_codecs="none fp16 int8 topk:ratio=0.01 powersgd:rank=4 auto"
# Gloo finds its interface from the host name, which resolves to loopback in every namespace.
gloo_if="GLOO_SOCKET_IFNAME=eth0"
for seed in $seeds; do
  for variant in gloo gloo-fp16 gloo-powersgd; do
    echo "== seed $seed: $variant" >&2
    perf/emulated_cluster.sh -n "$nodes" -r "$rate" -c none -o "$out/$variant.s$seed" -e "$gloo_if" \
      -x "perf/torch_compare.py --variant $variant --seed $seed --epochs $epochs --json {out}"
  done
  echo "== seed $seed: terse ($terse_codecs)" >&2
  perf/emulated_cluster.sh -n "$nodes" -r "$rate" -c "$terse_codecs" -o "$out/terse.s$seed" -e "$gloo_if" \
    -x "perf/torch_compare.py --variant terse --seed $seed --epochs $epochs --json {out}"
  echo "== seed $seed: terse, PowerSGD per parameter through the comm hook" >&2
  perf/emulated_cluster.sh -n "$nodes" -r "$rate" -c "powersgd:rank=4" -o "$out/terse-hook.s$seed" \
    -e "$gloo_if" -x "perf/torch_compare.py --variant terse-hook --seed $seed --epochs $epochs --json {out}"
done
python3 perf/torch_compare_table.py "$out" | tee "$out/table.md"
perf/plot --torch-compare "$out" && echo "chart: $out/torch_compare.png"
