#!/usr/bin/env python3
"""The PyTorch side-by-side's table (perf/torch_compare.sh): every OUTDIR/**/*.rankR.json that
perf/torch_compare.py wrote, grouped by variant (gloo and its hooks, terse and its codec), over
seeds: the median step time (the mean over seeds of each run's median, min-max across seeds),
the bytes each node sent per step, and the test accuracy (mean, min-max). Prints markdown and
writes OUTDIR/summary.json for perf/plot --torch-compare.

  python3 perf/torch_compare_table.py OUTDIR
"""
import glob
import json
import os
import sys

ORDER = ["gloo", "gloo-fp16", "gloo-powersgd", "terse none", "terse fp16", "terse int8",
         "terse topk", "terse powersgd", "terse-hook powersgd", "terse auto"]
LABELS = {"gloo": "gloo", "gloo-fp16": "gloo + fp16_compress_hook",
          "gloo-powersgd": "gloo + powerSGD_hook (rank 4, EF)"}


def key(record):
    if not record["variant"].startswith("terse"):
        return record["variant"]
    return record["variant"] + " " + record["codec"].split(":")[0]


def label(name, codecs):
    if name in LABELS:
        return LABELS[name]
    variant, codec = name.split(" ", 1)
    if variant == "terse-hook":
        return "terse %s, per-parameter hook" % codecs.get(name, codec)
    return "terse %s" % codecs.get(name, codec)


def main():
    out = sys.argv[1]
    runs = {}  # (variant key, seed) -> [records of every rank]
    codecs = {}
    for path in glob.glob(os.path.join(out, "**", "*.rank*.json"), recursive=True):
        with open(path) as f:
            try:
                record = json.load(f)
            except ValueError:
                continue
        if "variant" not in record:
            continue
        runs.setdefault((key(record), record["seed"]), []).append(record)
        if record["variant"].startswith("terse"):
            codecs[key(record)] = record["codec"]
    rows = {}
    for (name, seed), records in sorted(runs.items()):
        steps = records[0]["steps"]
        step = max(r["median_step_seconds"] for r in records)  # the slowest rank sets the pace
        sent = sum(r["sent_bytes"] for r in records) / len(records) / max(steps, 1)
        accuracy = records[0]["test_accuracy"]
        rows.setdefault(name, []).append({"seed": seed, "step": step, "sent": sent,
                                          "accuracy": accuracy, "ranks": len(records),
                                          "epochs": records[0]["epochs"]})
    base = rows.get("gloo")
    base_step = sum(r["step"] for r in base) / len(base) if base else None
    summary = []
    print("| variant | seeds | step ms (mean; min-max) | vs gloo | MB sent / node / step "
          "| test accuracy (mean; min-max) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in ORDER + sorted(set(rows) - set(ORDER)):
        if name not in rows:
            continue
        rs = rows[name]
        step = sum(r["step"] for r in rs) / len(rs)
        sent = sum(r["sent"] for r in rs) / len(rs)
        acc = sum(r["accuracy"] for r in rs) / len(rs)
        speed = "%.2fx" % (base_step / step) if base_step else "-"
        print("| %s | %d | %.1f; %.1f-%.1f | %s | %.3f | %.4f; %.4f-%.4f |" % (
            label(name, codecs), len(rs), 1e3 * step, 1e3 * min(r["step"] for r in rs),
            1e3 * max(r["step"] for r in rs), speed, sent / 1e6, acc,
            min(r["accuracy"] for r in rs), max(r["accuracy"] for r in rs)))
        summary.append({"name": label(name, codecs), "step_seconds": step,
                         "sent_bytes_per_step": sent, "accuracy": acc,
                         "seeds": [r["seed"] for r in rs], "epochs": rs[0]["epochs"]})
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
