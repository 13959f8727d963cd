#!/usr/bin/env python3
"""The parameter-server study's tables (perf/ps_study.sh): per --sync scheme, test accuracy
after every epoch and the gap to allreduce after the last (loopback runs), and on the emulated
cluster with a straggler the cumulative training time per epoch and the time to reach the
accuracy every scheme reached (the lowest of their best accuracies), its speed-up over
allreduce. Reads OUTDIR/loop/*.json and OUTDIR/cluster/*/*.json (train_fmnist --json).
--seeds OUTDIR...: the loopback runs' final accuracy over several seeds (one OUTDIR each)."""
import glob
import json
import os
import sys

ORDER = ["allreduce", "downpour", "easgd", "ssp"]


def load(paths):
    runs = {}
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        if run.get("program") != "train_fmnist":  # the cluster's link_*.json
            continue
        runs[run.get("sync", "allreduce")] = run
    return dict(sorted(runs.items(), key=lambda kv: (ORDER.index(kv[0].split(":")[0])
                                                     if kv[0].split(":")[0] in ORDER else 9,
                                                     kv[0])))


def accuracy_table(runs):
    if not runs:
        return "(no loopback runs)\n"
    epochs = max(len(r["epochs"]) for r in runs.values())
    lines = ["| sync | " + " | ".join(f"epoch {e + 1}" for e in range(epochs)) +
             " | vs allreduce | final train loss |",
             "| --- " * (epochs + 3) + "|"]
    base = runs.get("allreduce")
    for sync, run in runs.items():
        accs = [e["test_accuracy"] for e in run["epochs"]]
        cells = [f"{100 * a:.2f}" for a in accs] + [""] * (epochs - len(accs))
        gap = ""
        if base and base["epochs"] and len(accs) == len(base["epochs"]):
            gap = f"{100 * (accs[-1] - base['epochs'][-1]['test_accuracy']):+.2f}"
        loss = f"{run['epochs'][-1]['train_loss']:.4f}" if run["epochs"] else ""
        lines.append(f"| {sync} | " + " | ".join(cells) + f" | {gap} | {loss} |")
    return "\n".join(lines) + "\n"


def time_table(runs):
    if not runs:
        return "(no cluster runs)\n"
    target = min(max(e["test_accuracy"] for e in r["epochs"]) for r in runs.values() if r["epochs"])
    lines = [f"Target accuracy: {100 * target:.2f} % (the lowest of the schemes' best epochs).", "",
             "| sync | seconds per epoch | test accuracy per epoch | time to target (s) | "
             "speed-up vs allreduce |", "| --- | --- | --- | --- | --- |"]
    reach = {}
    for sync, run in runs.items():
        elapsed, when = 0.0, None
        for e in run["epochs"]:
            elapsed += e["seconds"]
            if when is None and e["test_accuracy"] >= target:
                when = elapsed
        reach[sync] = when
    base = reach.get("allreduce")
    for sync, run in runs.items():
        seconds = ", ".join(f"{e['seconds']:.1f}" for e in run["epochs"])
        accs = ", ".join(f"{100 * e['test_accuracy']:.2f}" for e in run["epochs"])
        when = reach[sync]
        speed = f"{base / when:.2f}x" if base and when else ""
        lines.append(f"| {sync} | {seconds} | {accs} | "
                     f"{'' if when is None else f'{when:.1f}'} | {speed} |")
    return "\n".join(lines) + "\n"


def seeds_table(outs):
    """Final accuracy of the loopback runs of several OUTDIRs (one seed each), and the mean gap."""
    per_dir = [load(glob.glob(os.path.join(out, "loop", "*.json"))) for out in outs]
    syncs = []
    for runs in per_dir:
        syncs += [s for s in runs if s not in syncs]
    lines = ["| sync | " + " | ".join(f"seed {r['seed']}" for r in
                                      (next(iter(runs.values())) for runs in per_dir if runs)) +
             " | mean | mean vs allreduce (points) | per seed vs allreduce |",
             "| --- " * (len(per_dir) + 4) + "|"]
    for sync in syncs:
        finals, gaps = [], []
        for runs in per_dir:
            run, base = runs.get(sync), runs.get("allreduce")
            final = run["epochs"][-1]["test_accuracy"] if run and run["epochs"] else None
            finals.append(final)
            if final is not None and base and base["epochs"]:
                gaps.append(100 * (final - base["epochs"][-1]["test_accuracy"]))
        known = [f for f in finals if f is not None]
        mean = f"{100 * sum(known) / len(known):.2f}" if known else ""
        mean_gap = f"{sum(gaps) / len(gaps):+.2f}" if gaps else ""
        lines.append(f"| {sync} | " + " | ".join("" if f is None else f"{100 * f:.2f}"
                                                 for f in finals) +
                     f" | {mean} | {mean_gap} | " + ", ".join(f"{g:+.2f}" for g in gaps) + " |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--seeds":
        print(seeds_table(sys.argv[2:]))
        return 0
    if len(sys.argv) != 2:
        print("usage: ps_study_table.py OUTDIR | --seeds OUTDIR...", file=sys.stderr)
        return 2
    out = sys.argv[1]
    loop = load(glob.glob(os.path.join(out, "loop", "*.json")))
    cluster = load(glob.glob(os.path.join(out, "cluster", "*", "*.json")))
    print("### Accuracy after the same epochs (loopback)\n")
    print(accuracy_table(loop))
    print("### Time to accuracy with a straggler (emulated cluster)\n")
    print(time_table(cluster))
    return 0


if __name__ == "__main__":
    sys.exit(main())
