#!/usr/bin/env python3
"""The tables of perf/emulated_cluster.sh, from the files it wrote: link_RATE_RTT.json (what
each link measured) and RATE_RTT_CODEC.json (all_reduce_perf -J; RATE_CODEC.json, from before
RTTs, reads as RTT 0). One row per run: the largest size of each file, out-of-place half.

Columns: time per call; effective algbw = uncompressed bytes / time (what the application
sees); speed-up over the uncompressed run at the same rate and RTT; the traffic ratio (bytes
sent / what an uncompressed ring sends); and where rank 0's time went: encode, decode, and the
rest, which is the wire and waiting for peers. A codec that ran as another (`auto`) shows what
it ran: `auto (int8)`.

    emulated_cluster_table.py [link_*.json] RATE_RTT_CODEC.json...
"""
import json
import os
import sys


def name_parts(path):
    """(rate, rtt, codec) of RATE_RTT_CODEC.json or RATE_CODEC.json."""
    parts = os.path.basename(path)[: -len(".json")].split("_")
    if len(parts) == 2:
        return parts[0], "0", parts[1]
    return parts[0], parts[1], "_".join(parts[2:])


def rows_of(paths):
    rows = []
    for path in paths:
        rate, rtt, codec = name_parts(path)
        with open(path) as handle:
            document = json.load(handle)
        row = document["results"][-1]
        half = row["out_of_place"]
        ran = half.get("codec") or "none"
        rows.append({
            "rate": rate, "rtt": rtt, "codec": codec if ran == codec else f"{codec} ({ran})",
            "uncompressed": codec == "none", "size": row["size"], "nranks": document["nranks"],
            "time_us": half["time_us"], "ratio": half.get("ratio", 1.0),
            "encode_us": half.get("encode_us", 0.0), "decode_us": half.get("decode_us", 0.0),
            "wrong": half.get("wrong"), "rel_err": half.get("rel_err", 0.0),
        })
    return rows


def size_text(size):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def link_table(paths):
    print("| link | RTT asked | ping RTT min / avg / max (ms) | TCP node 0 -> 1 (Mbit/s) "
          "| TCP every node to the next at once, mean / slowest flow (Mbit/s) |")
    print("| --- | --- | --- | --- | --- |")
    for path in paths:
        with open(path) as handle:
            link = json.load(handle)
        ping = link["ping_ms"]
        ring = link.get("tcp_ring")  # absent from files written before it was measured
        ring_text = f"{ring['mean_mbit']:.0f} / {ring['min_mbit']:.0f}" if ring else "-"
        print(f"| {link['rate']} | {link['rtt']} | {ping['min']:.3f} / {ping['avg']:.3f} / "
              f"{ping['max']:.3f} | {link['tcp']['mbit']:.0f} | {ring_text} |")
    print()


def main(paths):
    links = [p for p in paths if os.path.basename(p).startswith("link_")]
    runs = [p for p in paths if p not in links]
    if links:
        link_table(links)
    if not runs:
        return
    rows = rows_of(runs)
    base = {(row["rate"], row["rtt"]): row["time_us"] for row in rows if row["uncompressed"]}
    print("| link | RTT | codec | size | time (ms) | effective algbw (GB/s) | vs uncompressed | "
          "wire ratio | encode (ms) | decode (ms) | wire + wait (ms) | rel_err | #wrong |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        time_ms = row["time_us"] / 1e3
        algbw = row["size"] / (row["time_us"] * 1e-6) / 1e9
        speedup = base.get((row["rate"], row["rtt"]), row["time_us"]) / row["time_us"]
        codec_ms = (row["encode_us"] + row["decode_us"]) / 1e3
        print(f"| {row['rate']} x {row['nranks']} | {row['rtt']} | {row['codec']} | "
              f"{size_text(row['size'])} | {time_ms:.1f} | {algbw:.3f} | {speedup:.2f}x | "
              f"{row['ratio']:.4f} | {row['encode_us'] / 1e3:.1f} | {row['decode_us'] / 1e3:.1f} | "
              f"{max(time_ms - codec_ms, 0):.1f} | {row['rel_err']:.2e} | {row['wrong']} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
