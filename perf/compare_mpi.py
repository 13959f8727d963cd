#!/usr/bin/env python3
"""Prints the terse vs MPI_Allreduce table from compare_mpi.sh's JSON files (Markdown)."""
import json
import sys
from pathlib import Path


def rows(path):
    with open(path) as f:
        return {r["size"]: r for r in json.load(f)["results"]}


def out_of_place(row, field):
    """The out-of-place half, as nccl-tests results are usually quoted (both sides alike)."""
    return row["out_of_place"][field]


def human(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}iB"
    return f"{size} B"


def main():
    out = Path(sys.argv[1])
    ranks = [int(n) for n in sys.argv[2:]]
    print("| ranks | size | terse busbw (GB/s) | MPI busbw (GB/s) | terse / MPI |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in ranks:
        terse, mpi = rows(out / f"terse_bw_{n}.json"), rows(out / f"mpi_bw_{n}.json")
        for size in sorted(terse):
            t, m = out_of_place(terse[size], "busbw"), out_of_place(mpi[size], "busbw")
            print(f"| {n} | {human(size)} | {t:.2f} | {m:.2f} | {t / m:.2f}x |")
    print()
    print("| ranks | 8-byte allreduce | terse (us) | MPI (us) | terse / MPI |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in ranks:
        t = out_of_place(rows(out / f"terse_lat_{n}.json")[8], "time_us")
        m = out_of_place(rows(out / f"mpi_lat_{n}.json")[8], "time_us")
        print(f"| {n} | latency | {t:.2f} | {m:.2f} | {t / m:.2f}x |")


if __name__ == "__main__":
    main()
