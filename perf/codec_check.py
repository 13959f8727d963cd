#!/usr/bin/env python3
"""Every codec's speed against a pinned baseline (issue 24): a codec that got slower fails.

Runs BUILD/perf/codec_perf --csv on fp32 (with the encoders' non-finite scan, and again with
--known-finite), REPEATS times each, and takes each row's best encode and decode speed over the
repeats as a ratio to memcpy's best over the same runs (so a slower machine moves both alike;
and a best, not a median, since a run that a neighbour's load or a timer tick slowed says nothing
about the code: a 4 MiB memcpy's median of 3 read 14 to 47 GB/s in five runs here).
A row fails when a ratio falls more than 30% (DROP) below the baseline's for the same size,
mode and codec, and still does when its mode is measured once more; rows the baseline lacks are
listed, not judged.

    perf/codec_check.py [--build build] [--size 16M | --quick] [--repeats 5] [--update]

--quick: 1M elements, 10 iterations (what the test command runs, a few seconds); the default
is 16M elements, 5 iterations, as perf/RESULTS.md's codec figures. --update rewrites the baseline's
rows for this size from this run (do it on a quiet machine, and commit it with the change that
moved the speed, saying why). Baseline: perf/codec_baseline.csv.
"""
import argparse
import csv
import io
import os
import subprocess
import sys

DROP = 0.30
HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.join(HERE, "codec_baseline.csv")
FIELDS = ["elements", "mode", "codec", "params", "encode_ratio", "decode_ratio"]


def elements_of(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KMGkmg")) * scale


def measure(binary, elements, iterations, known_finite):
    """{(codec, params): (encode GB/s, decode GB/s)} of one codec_perf run, memcpy's as ("memcpy", "")."""
    command = [binary, "-n", str(elements), "-i", str(iterations), "--csv"]
    if known_finite:
        command.append("--known-finite")
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return {(row["codec"], row["params"]): (float(row["encode_gbps"]), float(row["decode_gbps"]))
            for row in csv.DictReader(io.StringIO(text))}


def best_of(binary, elements, iterations, known_finite, repeats):
    """{(codec, params): (encode ratio, decode ratio)}: each row's best speed over the repeats
    against memcpy's best over the same repeats."""
    best = {}
    for _ in range(repeats):
        for key, (encode, decode) in measure(binary, elements, iterations, known_finite).items():
            old = best.get(key, (0.0, 0.0))
            best[key] = (max(old[0], encode), max(old[1], decode))
    copy = best.pop(("memcpy", ""))[0]
    return {key: (encode / copy, decode / copy) for key, (encode, decode) in best.items()}


def read_baseline():
    if not os.path.exists(BASELINE):
        return []
    with open(BASELINE) as handle:
        return [row for row in csv.DictReader(line for line in handle if not line.startswith("#"))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--size", default="16M")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--update", action="store_true")
    args = parser.parse_args()
    elements = elements_of("1M" if args.quick else args.size)
    iterations = 10 if args.quick else 5
    binary = os.path.join(args.build, "perf", "codec_perf")
    if not os.access(binary, os.X_OK):
        sys.exit(f"codec_check.py: {binary} is not built (cmake --build {args.build} --target codec_perf)")

    # --update pins the median of three such measurements: a typical best, not a lucky one.
    rounds = 3 if args.update else 1
    now = {}
    for mode, known_finite in (("scan", False), ("known_finite", True)):
        measured = [best_of(binary, elements, iterations, known_finite, args.repeats)
                    for _ in range(rounds)]
        for key in measured[0]:
            encode = sorted(m[key][0] for m in measured)[rounds // 2]
            decode = sorted(m[key][1] for m in measured)[rounds // 2]
            now[(mode,) + key] = (encode, decode)

    baseline = read_baseline()
    if args.update:
        kept = [row for row in baseline if int(row["elements"]) != elements]
        with open(BASELINE, "w") as handle:
            handle.write("# Each codec's encode and decode speed as a ratio to a memcpy of the same bytes in\n"
                         "# the same runs (the median of three bests of 5 runs), fp32; written by\n"
                         "# perf/codec_check.py --update.\n")
            writer = csv.DictWriter(handle, FIELDS, lineterminator="\n")
            writer.writeheader()
            for row in kept:
                writer.writerow({k: row[k] for k in FIELDS})
            for (mode, codec, params), (encode, decode) in sorted(now.items()):
                writer.writerow({"elements": elements, "mode": mode, "codec": codec, "params": params,
                                 "encode_ratio": f"{encode:.4f}", "decode_ratio": f"{decode:.4f}"})
        print(f"codec_check.py: baseline for {elements} elements written to {BASELINE}")
        return 0

    pinned = {(row["mode"], row["codec"], row["params"]): (float(row["encode_ratio"]),
                                                          float(row["decode_ratio"]))
              for row in baseline if int(row["elements"]) == elements}
    if not pinned:
        sys.exit(f"codec_check.py: {BASELINE} has no rows for {elements} elements (--update writes them)")

    def below(key):
        return key in pinned and any(value < (1 - DROP) * base
                                     for value, base in zip(now[key], pinned[key]))

    # A drop is confirmed before it fails: a mode with a row below its baseline is measured again
    # (twice at most) and each row keeps its better figure: a regression stays, a slow moment of
    # this machine does not (a single round failed a row at 0.69-0.70 about one run in 8 here).
    for _ in range(2):
        for mode, known_finite in (("scan", False), ("known_finite", True)):
            if not any(below(key) for key in now if key[0] == mode):
                continue
            again = best_of(binary, elements, iterations, known_finite, args.repeats)
            for key, (encode, decode) in again.items():
                old = now[(mode,) + key]
                now[(mode,) + key] = (max(old[0], encode), max(old[1], decode))
    failures = 0
    print(f"{'mode':<13} {'codec':<44} {'encode/memcpy (baseline)':>26} {'decode/memcpy (baseline)':>26}")
    for key in sorted(now):
        encode, decode = now[key]
        name = key[1] + (":" + key[2] if key[2] else "")
        if key not in pinned:
            print(f"{key[0]:<13} {name[:44]:<44} {encode:>11.3f} (none) {decode:>18.3f} (none)")
            continue
        base_encode, base_decode = pinned[key]
        marks = []
        for what, value, base in (("encode", encode, base_encode), ("decode", decode, base_decode)):
            if value < (1 - DROP) * base:
                marks.append(f"{what} {value / base:.2f}x of its baseline")
        failures += bool(marks)
        print(f"{key[0]:<13} {name[:44]:<44} {encode:>11.3f} ({base_encode:>7.3f}) "
              f"{decode:>18.3f} ({base_decode:>7.3f}){'  ** ' + '; '.join(marks) if marks else ''}")
    missing = sorted(set(pinned) - set(now))
    for key in missing:
        print(f"codec_check.py: the baseline's {key} was not measured", file=sys.stderr)
    if failures or missing:
        print(f"codec_check.py: {failures} codec(s) more than {DROP:.0%} below their baseline"
              f"{f', {len(missing)} missing' if missing else ''}", file=sys.stderr)
        return 1
    print(f"codec_check.py: every codec within {DROP:.0%} of its baseline ({elements} elements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
