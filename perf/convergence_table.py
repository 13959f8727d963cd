"""The convergence study's table (perf/convergence.sh): one row per run of OUTDIR, in the study's
order, from its RUN.json (train_fmnist --json) or RUN.skipped.

    python3 perf/convergence_table.py OUTDIR
    python3 perf/convergence_table.py --seeds OUTDIR...

Columns: final test accuracy, its difference from the uncompressed run ("none") in percentage
points, the best accuracy of any epoch, the last epoch's mean training loss (less noisy than the
accuracy of one pass over the test set), the gradient bytes all ranks sent over the whole run, the
wire ratio (those bytes / what uncompressed ring allreduces would have sent), and the mean
seconds of an epoch's training steps. With --seeds, the OUTDIRs are the same study with other
seeds (convergence.sh -s): per run the mean final accuracy, its range, and the mean's difference
from uncompressed's mean, beside the seed-to-seed spread that difference must be read against,
and the mean of the last epoch's training loss.
"""
import json
import os
import sys

ORDER = ["none", "fp16", "int8", "int4", "mxfp8", "mxfp4", "nvfp4", "sign_ef", "topk1_ef",
         "topk1_no_ef", "dgc0.1", "powersgd4", "per_layer"]


def runs(directory):
    names = {f.rsplit(".", 1)[0] for f in os.listdir(directory)
             if f.endswith(".json") or f.endswith(".skipped")}
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def load(directory, name):
    path = os.path.join(directory, name + ".json")
    if not os.path.exists(path):
        with open(os.path.join(directory, name + ".skipped")) as handle:
            return None, handle.read().strip()
    with open(path) as handle:
        return json.load(handle), None


def seeds_table(directories):
    studies = [{name: load(d, name)[0] for name in runs(d)} for d in directories]
    names = [n for n in runs(directories[0]) if all(study.get(n) for study in studies)]
    finals = {n: [study[n]["epochs"][-1]["test_accuracy"] for study in studies] for n in names}
    seeds = [study[names[0]]["seed"] for study in studies] if names else []
    print(f"final test accuracy over seeds {', '.join(str(s) for s in seeds)} "
          f"({len(studies[0][names[0]]['epochs']) if names else 0} epochs)\n")
    losses = {n: [study[n]["epochs"][-1]["train_loss"] for study in studies] for n in names}
    print("| run | mean acc | min | max | mean vs none (points) | per seed vs none (points) "
          "| mean train loss |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
    base = finals.get("none")
    for name in names:
        accs = finals[name]
        mean = sum(accs) / len(accs)
        if base:
            diff = f"{100 * (mean - sum(base) / len(base)):+.2f}"
            each = ", ".join(f"{100 * (a - b):+.2f}" for a, b in zip(accs, base))
        else:
            diff = each = "n/a"
        loss = sum(losses[name]) / len(losses[name])
        print(f"| {name} | {mean:.4f} | {min(accs):.4f} | {max(accs):.4f} | {diff} | {each} "
              f"| {loss:.4f} |")


def main(args):
    if args and args[0] == "--seeds":
        if len(args) < 2:
            sys.exit(__doc__)
        seeds_table(args[1:])
        return
    if len(args) != 1:
        sys.exit(__doc__)
    directory = args[0]
    loaded = {name: load(directory, name) for name in runs(directory)}
    base = loaded.get("none", (None, None))[0]
    base_acc = base["epochs"][-1]["test_accuracy"] if base and base["epochs"] else None
    first = next((run for run, _ in loaded.values() if run), None)
    if first:
        print(f"{first['model']}, {first['ranks']} ranks, {first['batch_per_rank']} samples per "
              f"rank and step, {first['steps_per_epoch']} steps per epoch, lr "
              f"{first['learning_rate']}, momentum {first['momentum']}, seed {first['seed']}\n")
    print("| run | epochs | test acc | vs none (points) | best epoch acc | train loss "
          "| bytes sent (MB) | wire ratio | s / epoch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, (run, skipped) in loaded.items():
        if run is None:
            print(f"| {name} | skipped: {skipped} | | | | | | | |")
            continue
        epochs = run["epochs"]
        if not epochs:
            print(f"| {name} | 0 | | | | | | | |")
            continue
        acc = epochs[-1]["test_accuracy"]
        diff = f"{100 * (acc - base_acc):+.2f}" if base_acc is not None else "n/a"
        sent = sum(e["bytes_sent"] for e in epochs)
        dense = sum(e["uncompressed_bytes"] for e in epochs)
        seconds = sum(e["seconds"] for e in epochs) / len(epochs)
        print(f"| {name} | {len(epochs)} | {acc:.4f} | {diff} | "
              f"{max(e['test_accuracy'] for e in epochs):.4f} | {epochs[-1]['train_loss']:.4f} | "
              f"{sent / 1e6:.1f} | "
              f"{sent / dense if dense else 0:.4f} | {seconds:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
