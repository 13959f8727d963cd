"""Charts of the convergence study (perf/convergence.sh), through perf/plot --convergence, which
provides matplotlib:

    perf/plot --convergence OUTDIR RUN.json...

OUTDIR/accuracy_vs_epoch.png: test accuracy after each epoch, one line per run;
OUTDIR/accuracy_vs_bytes.png: the same against the gradient bytes all ranks had sent by then
(log scale), which shows what each codec pays for its accuracy.
"""
import json
import os
import sys

import matplotlib

from convergence_table import ORDER

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as handle:
        return os.path.basename(path)[: -len(".json")], json.load(handle)


def chart(runs, out, x_of, xlabel, log_x):
    figure, axis = plt.subplots(figsize=(9, 5.5))
    colors = plt.get_cmap("tab20").colors
    for index, (name, run) in enumerate(runs):
        epochs = run["epochs"]
        # Uncompressed is the yardstick: black and thicker than the rest.
        baseline = name == "none"
        axis.plot([x_of(e) for e in epochs], [100 * e["test_accuracy"] for e in epochs],
                  marker="o", markersize=3, linewidth=2.5 if baseline else 1.2,
                  color="black" if baseline else colors[index % len(colors)],
                  linestyle="-" if index % 2 == 0 else "--", label=name)
    if log_x:
        axis.set_xscale("log")
    first = runs[0][1]
    axis.set_title(f"Fashion-MNIST, {first['model']}, {first['ranks']} ranks: test accuracy")
    axis.set_xlabel(xlabel)
    axis.set_ylabel("test accuracy (%)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, ncol=2, loc="lower right")
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main(args):
    if len(args) < 2:
        sys.exit(__doc__)
    out_dir = args[0]
    runs = [load(p) for p in args[1:]]
    runs = [(name, run) for name, run in runs if run.get("epochs")]
    runs.sort(key=lambda item: (ORDER.index(item[0]) if item[0] in ORDER else len(ORDER), item[0]))
    if not runs:
        sys.exit("plot_convergence: no run with a finished epoch")
    chart(runs, os.path.join(out_dir, "accuracy_vs_epoch.png"), lambda e: e["epoch"], "epoch",
          False)
    chart(runs, os.path.join(out_dir, "accuracy_vs_bytes.png"),
          lambda e: e["bytes_sent_cumulative"], "gradient bytes sent by all ranks", True)


if __name__ == "__main__":
    main(sys.argv[1:])
