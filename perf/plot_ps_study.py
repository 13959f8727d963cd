"""Charts of the parameter-server study (perf/ps_study.sh), through perf/plot --ps-study, which
provides matplotlib:

    perf/plot --ps-study OUTDIR

OUTDIR/accuracy_vs_epoch.png: test accuracy after each epoch of the loopback runs, one line per
--sync scheme; OUTDIR/accuracy_vs_time.png: the cluster runs' test accuracy (with the straggler
ps_study.sh -S gave them, or none) against the training time so far: time to accuracy.
"""
import glob
import os
import sys

import matplotlib

from ps_study_table import load

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def chart(runs, out, x_of, xlabel, title):
    figure, axis = plt.subplots(figsize=(8, 5))
    for index, (sync, run) in enumerate(runs.items()):
        epochs = run["epochs"]
        baseline = sync == "allreduce"
        xs, elapsed = [], 0.0
        for e in epochs:
            elapsed += e["seconds"]
            xs.append(x_of(e, elapsed))
        axis.plot(xs, [100 * e["test_accuracy"] for e in epochs], marker="o", markersize=4,
                  linewidth=2.5 if baseline else 1.4, color="black" if baseline else f"C{index}",
                  label=sync)
    first = next(iter(runs.values()))
    axis.set_title(f"Fashion-MNIST, {first['model']}, {first['ranks']} ranks: {title}")
    axis.set_xlabel(xlabel)
    axis.set_ylabel("test accuracy (%)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=9, loc="lower right")
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main(args):
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    loop = load(glob.glob(os.path.join(out, "loop", "*.json")))
    cluster = load(glob.glob(os.path.join(out, "cluster", "*", "*.json")))
    if loop:
        chart(loop, os.path.join(out, "accuracy_vs_epoch.png"), lambda e, _: e["epoch"], "epoch",
              "test accuracy per epoch")
    if cluster:
        chart(cluster, os.path.join(out, "accuracy_vs_time.png"), lambda _, t: t,
              "training time so far (s), emulated cluster", "time to accuracy")
    if not loop and not cluster:
        sys.exit("plot_ps_study: no runs in " + out)


if __name__ == "__main__":
    main(sys.argv[1:])
