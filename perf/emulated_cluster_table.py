#!/usr/bin/env python3
"""The table of perf/emulated_cluster.sh: one row per (rate, codec) from the -J files it wrote
(named RATE_CODEC.json), largest size of each file, out-of-place half.

Columns: time per call; effective algbw = uncompressed bytes / time (what the application
sees); speed-up over the uncompressed run at the same rate; the traffic ratio (bytes sent /
what an uncompressed ring sends); and where rank 0's time went: encode, decode, and the rest,
which is the wire and waiting for peers.
"""
import json
import os
import sys


def rows_of(paths):
    rows = []
    for path in paths:
        rate, codec = os.path.basename(path)[: -len(".json")].split("_", 1)
        with open(path) as handle:
            document = json.load(handle)
        row = document["results"][-1]
        half = row["out_of_place"]
        rows.append({
            "rate": rate, "codec": codec, "size": row["size"], "nranks": document["nranks"],
            "time_us": half["time_us"], "ratio": half.get("ratio", 1.0),
            "encode_us": half.get("encode_us", 0.0), "decode_us": half.get("decode_us", 0.0),
            "wrong": half.get("wrong"), "rel_err": half.get("rel_err", 0.0),
        })
    return rows


def main(paths):
    rows = rows_of(paths)
    base = {row["rate"]: row["time_us"] for row in rows if row["codec"] == "none"}
    print("| link | codec | size | time (ms) | effective algbw (GB/s) | vs uncompressed | "
          "wire ratio | encode (ms) | decode (ms) | wire + wait (ms) | rel_err | #wrong |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        time_ms = row["time_us"] / 1e3
        algbw = row["size"] / (row["time_us"] * 1e-6) / 1e9
        speedup = base.get(row["rate"], row["time_us"]) / row["time_us"]
        codec_ms = (row["encode_us"] + row["decode_us"]) / 1e3
        print(f"| {row['rate']} x {row['nranks']} | {row['codec']} | {row['size'] >> 20} MiB | "
              f"{time_ms:.1f} | {algbw:.3f} | {speedup:.2f}x | {row['ratio']:.4f} | "
              f"{row['encode_us'] / 1e3:.1f} | {row['decode_us'] / 1e3:.1f} | "
              f"{max(time_ms - codec_ms, 0):.1f} | {row['rel_err']:.2e} | {row['wrong']} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
