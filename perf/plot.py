"""Charts of all_reduce_perf -J files (run through perf/plot, which provides matplotlib).

    perf/plot OUT.png FILE.json...

Files named RATE_RTT_CODEC.json or RATE_CODEC.json (perf/emulated_cluster.sh) become one group
of bars per link (rate and RTT): left, the effective algbw (uncompressed bytes / time) of each
codec at the largest size; right, its speed-up over the uncompressed run on the same link. Its
link_*.json files are skipped. Any other files become lines of out-of-place algbw against size,
one per file.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as handle:
        return json.load(handle)


def cluster_chart(paths, out):
    groups = {}
    for path in paths:
        parts = os.path.basename(path)[: -len(".json")].split("_")
        rate, rtt, codec = (parts[0], "0", parts[1]) if len(parts) == 2 else parts[:3]
        link = rate if rtt == "0" else f"{rate}\n{rtt} RTT"
        row = load(path)["results"][-1]
        time_s = row["out_of_place"]["time_us"] * 1e-6
        groups.setdefault(link, {})[codec] = (row["size"] / time_s / 1e9, row["size"])
    rates = list(groups)
    codecs = list(dict.fromkeys(c for rate in rates for c in groups[rate]))
    figure, (left, right) = plt.subplots(1, 2, figsize=(max(12, 3 * len(rates)), 4.5))
    width = 0.8 / max(len(codecs), 1)
    for index, codec in enumerate(codecs):
        xs = [r + index * width for r in range(len(rates))]
        algbw = [groups[rate].get(codec, (0, 0))[0] for rate in rates]
        base = [groups[rate].get("none", (0, 0))[0] for rate in rates]
        speedup = [a / b if b else 0 for a, b in zip(algbw, base)]
        left.bar(xs, algbw, width, label=codec)
        right.bar(xs, speedup, width, label=codec)
    size = next(iter(groups[rates[0]].values()))[1] if rates else 0
    for axis, title in ((left, "effective algbw (GB/s)"), (right, "speed-up over uncompressed")):
        axis.set_xticks([r + 0.4 - width / 2 for r in range(len(rates))])
        axis.set_xticklabels(rates)
        axis.set_xlabel("link of each node")
        axis.set_title(f"{title}, {size >> 20} MiB fp32 allreduce")
        axis.grid(axis="y", alpha=0.3)
    right.axhline(1.0, color="black", linewidth=0.8)
    left.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def size_chart(paths, out):
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for path in paths:
        rows = load(path)["results"]
        axis.plot([r["size"] for r in rows], [r["out_of_place"]["algbw"] for r in rows],
                  marker="o", label=os.path.basename(path))
    axis.set_xscale("log", base=2)
    axis.set_xlabel("size (bytes)")
    axis.set_ylabel("algbw (GB/s)")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main(args):
    if len(args) < 2:
        sys.exit(__doc__)
    out = args[0]
    paths = [p for p in args[1:] if not os.path.basename(p).startswith("link_")]
    named = all("_" in os.path.basename(p) for p in paths)
    (cluster_chart if named else size_chart)(paths, out)
    print(f"plot: wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
