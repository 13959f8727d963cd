#!/usr/bin/env python3
"""perf/main_job_summary.py on made-up runs: the speed-ups it prints and, at the largest size,
whether the codecs or the link set each run's pace (the codecs when encode plus decode take more
than half the call).

    test_main_job_summary.py SUMMARY_SCRIPT
"""
import json
import os
import subprocess
import sys
import tempfile


def run_file(directory, codec, rows):
    results = []
    for size, time_us, encode_us, decode_us in rows:
        half = {"time_us": time_us, "wrong": 0, "ratio": 1.0 if codec == "none" else 0.25}
        if codec != "none":
            half.update(codec=codec, encode_us=encode_us, decode_us=decode_us, rel_err=0.01)
        results.append({"size": size, "out_of_place": half, "in_place": half})
    path = os.path.join(directory, f"1gbit_0_{codec}.json")
    with open(path, "w") as handle:
        json.dump({"nranks": 4, "results": results}, handle)
    return path


def main(script):
    with tempfile.TemporaryDirectory() as directory:
        paths = [
            run_file(directory, "none", [(1 << 20, 10000, 0, 0), (64 << 20, 800000, 0, 0)]),
            # 60 + 10 ms of 75: the codecs.
            run_file(directory, "topk", [(1 << 20, 2000, 500, 100), (64 << 20, 75000, 60000, 10000)]),
            # 20 + 10 ms of 200: the link.
            run_file(directory, "int8", [(1 << 20, 4000, 300, 100), (64 << 20, 200000, 20000, 10000)]),
        ]
        output = subprocess.run([sys.executable, script] + paths, check=True,
                                capture_output=True, text=True).stdout
    expected = [
        "      topk: the codecs (70.0 ms in the codecs, 5.0 ms on the wire or waiting, of 75.0 ms)",
        "      int8: the link (30.0 ms in the codecs, 170.0 ms on the wire or waiting, of 200.0 ms)",
        # 800000 / 75000 and 800000 / 200000 at 64 MiB.
        "    67108864    800000.0   1.00     75000.0  10.67    200000.0   4.00",
    ]
    missing = [line for line in expected if line not in output.splitlines()]
    if missing:
        print("main_job_summary.py printed:\n" + output + "\nmissing lines:\n" + "\n".join(missing))
        return 1
    print("main_job_summary.py: speed-ups and the pace as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
