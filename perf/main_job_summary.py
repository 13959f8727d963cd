#!/usr/bin/env python3
"""Side-by-side summary of the main job's all_reduce_perf runs (perf/run.sh).

Reads the -J files of an uncompressed run and of compressed runs (the first file is the
baseline; the last _-separated part of a file's name is the codec asked for, as in none.json or
perf/emulated_cluster.sh's 1gbit_0_auto.json, and a run that ran another codec shows both:
`auto(int8)`) and prints, per size, each run's out-of-place time and its speed-up over the baseline,
then what each codec put on the wire: its traffic ratio and the bytes one rank sends for one
allreduce of every size of the sweep, against what the uncompressed ring sends; and, at the
largest size, whether the codecs (encode and decode) or the link set each run's pace.

    main_job_summary.py none.json auto.json int8.json topk.json
"""
import json
import os
import sys


def load(path):
    with open(path) as handle:
        document = json.load(handle)
    rows = document["results"]
    codec = "none"
    for row in rows:
        half = row["out_of_place"]
        if half.get("codec"):
            codec = half["codec"]
    asked = os.path.basename(path)[: -len(".json")].split("_")[-1]
    if asked != codec:
        codec = f"{asked}({codec})"
    return {"path": path, "codec": codec, "nranks": document["nranks"], "rows": rows}


def mib(value):
    return value / (1 << 20)


def main(paths):
    runs = [load(path) for path in paths]
    base = runs[0]
    sizes = [row["size"] for row in base["rows"]]
    nranks = base["nranks"]
    names = [run["codec"] for run in runs]
    print(f"# allreduce, {nranks} ranks, float sum: out-of-place time per call (us), "
          "speed-up over uncompressed")
    header = f"{'size':>12}" + "".join(f"  {name:>10}  {'x':>5}" for name in names)
    print(header)
    for index, size in enumerate(sizes):
        base_time = base["rows"][index]["out_of_place"]["time_us"]
        line = f"{size:>12}"
        for run in runs:
            time_us = run["rows"][index]["out_of_place"]["time_us"]
            line += f"  {time_us:>10.1f}  {base_time / time_us:>5.2f}"
        print(line)
    # What a dense ring sends per rank: 2 (n-1)/n of the tensor.
    dense = sum(2 * (nranks - 1) / nranks * size for size in sizes)
    print()
    print(f"# bytes one rank sends for one allreduce of each size above "
          f"(uncompressed ring: {mib(dense):.1f} MiB)")
    for run in runs[1:]:
        sent = sum(2 * (nranks - 1) / nranks * row["size"] * row["out_of_place"].get("ratio", 1)
                   for row in run["rows"])
        largest = run["rows"][-1]["out_of_place"]
        print(f"{run['codec']:>10}: {mib(sent):8.1f} MiB sent, {mib(dense - sent):8.1f} MiB saved "
              f"({100 * (1 - sent / dense):.1f}%); largest size: ratio {largest.get('ratio', 1):.4f}, "
              f"rel_err {largest.get('rel_err', 0):.2e}, #wrong {largest.get('wrong')}")
    print()
    print(pace(runs[1:]))


def pace(runs):
    """What set each compressed run's pace at the largest size: the codecs, when encode plus
    decode take more than half the call, else the link (the rest: the wire, and waiting for the
    slowest rank)."""
    lines = ["# what set the pace at the largest size: encode + decode against the rest "
             "(wire and waiting)"]
    for run in runs:
        half = run["rows"][-1]["out_of_place"]
        total = half["time_us"]
        codecs = half.get("encode_us", 0) + half.get("decode_us", 0)
        rest = max(total - codecs, 0)
        who = "the codecs" if codecs > total / 2 else "the link"
        lines.append(f"{run['codec']:>10}: {who} ({codecs / 1000:.1f} ms in the codecs, "
                     f"{rest / 1000:.1f} ms on the wire or waiting, of {total / 1000:.1f} ms)")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:])
