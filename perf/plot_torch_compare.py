"""The PyTorch side-by-side's chart (run through perf/plot --torch-compare OUTDIR, which provides
matplotlib): time per step, bytes sent per step and test accuracy of each variant, from
OUTDIR/summary.json (perf/torch_compare_table.py). Writes OUTDIR/torch_compare.png."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "summary.json")) as f:
        rows = json.load(f)
    names = [r["name"] for r in rows]
    colors = ["tab:gray" if n.startswith("gloo") else "tab:blue" for n in names]
    fig, axes = plt.subplots(1, 3, figsize=(15, 5), sharey=True)
    panels = [("time per step (ms)", [1e3 * r["step_seconds"] for r in rows]),
              ("MB sent per node per step", [r["sent_bytes_per_step"] / 1e6 for r in rows]),
              ("test accuracy", [r["accuracy"] for r in rows])]
    for ax, (title, values) in zip(axes, panels):
        ax.barh(range(len(rows)), values, color=colors)
        ax.set_title(title)
        for i, v in enumerate(values):
            ax.text(v, i, " %.3g" % v, va="center", fontsize=8)
    axes[0].set_yticks(range(len(rows)))
    axes[0].set_yticklabels(names)
    axes[0].invert_yaxis()
    axes[2].set_xlim(min(r["accuracy"] for r in rows) - 0.05, 1.0)
    fig.suptitle("DDP, Fashion-MNIST CNN, 4 emulated nodes at 1 Gbit/s (gloo grey, terse blue)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "torch_compare.png"), dpi=110)


if __name__ == "__main__":
    main()
