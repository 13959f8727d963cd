#!/usr/bin/env python3
"""Device-buffer allreduces through torch.distributed (backend nccl) with several processes on
one GPU: the time, bandwidth and error of each size and codec. Under LD_PRELOAD=libterse.so every
call is terse's (engine mode lets ranks share a GPU), on CUDA tensors, as a training job makes them.

  LD_PRELOAD=$PWD/build/plugin/libterse.so TERSE_MODE=engine \\
    python3 tests/pytorch/allreduce_check.py --nproc 4 --sizes 1M,16M,64M --codecs none,int8,topk

Each codec is a job of its own (TERSE_CODEC in the environment, unset for 'none'). Inputs are
fp32, different on every rank and known to all, so each rank checks its result against the exact
sum: 'none' must match to fp32 rounding (relative error <= 1e-6), a codec reports its relative
error of the first call (empty residual memory). Writes DIR/allreduce_check.json and prints a
table in nccl-tests' units (algbw = bytes / time, busbw = algbw * 2(n-1)/n). Exit 1 when an
uncompressed result is wrong or a rank failed.
"""

import argparse
import json
import os
import socket
import sys
import time

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def elements(text):
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--sizes", default="1M,16M,64M", help="fp32 elements (K/M/G)")
    parser.add_argument("--codecs", default="none,int8,topk")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", default="allreduce_check_out")
    parser.add_argument("--timeout-s", type=float, default=300)
    return parser.parse_args(argv)


def rank_input(torch, rank, n, device):
    # Distinct per rank, reproducible by every rank: the exact sum needs no communication.
    i = torch.arange(n, device=device, dtype=torch.float64)
    return (torch.sin(i * (0.001 * (rank + 1))) * (rank + 1)).float()


def worker(rank, args, codec, port):
    import datetime

    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    device = torch.device("cuda", 0)
    dist.init_process_group("nccl", rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    rows = []
    for n in [elements(s) for s in args.sizes.split(",")]:
        source = rank_input(torch, rank, n, device)
        expected = sum(rank_input(torch, r, n, device).double() for r in range(args.nproc))
        buffer = source.clone()
        dist.all_reduce(buffer)  # the first call, from empty residual memory: its error
        torch.cuda.synchronize()
        diff = (buffer.double() - expected)
        rel_err = (diff.norm() / expected.norm()).item()
        max_abs = diff.abs().max().item()
        for _ in range(args.warmup):
            buffer.copy_(source)
            dist.all_reduce(buffer)
        torch.cuda.synchronize()
        dist.barrier()
        total = 0.0
        for _ in range(args.iters):
            buffer.copy_(source)
            torch.cuda.synchronize()
            started = time.perf_counter()
            dist.all_reduce(buffer)
            torch.cuda.synchronize()
            total += time.perf_counter() - started
        seconds = total / args.iters
        algbw = 4 * n / seconds / 1e9
        rows.append({"elements": n, "bytes": 4 * n, "time_us": seconds * 1e6, "algbw": algbw,
                     "busbw": algbw * 2 * (args.nproc - 1) / args.nproc, "rel_err": rel_err,
                     "max_abs_err": max_abs})
        del source, expected, buffer
    with open(os.path.join(args.out, f".{rank}.json"), "w") as f:
        json.dump(rows, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.multiprocessing as mp

    if not torch.cuda.is_available():
        print("allreduce_check.py: torch sees no CUDA device; nothing to check", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("TERSE_SOCKET_IFNAME", "lo")
    report = {"nproc": args.nproc, "gpu": torch.cuda.get_device_name(0),
              "LD_PRELOAD": os.environ.get("LD_PRELOAD"),
              "TERSE_MODE": os.environ.get("TERSE_MODE"), "jobs": []}
    failed = False
    print(f"| codec | bytes | time us | algbw GB/s | busbw GB/s | rel_err (first call) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for codec in args.codecs.split(","):
        if codec == "none":
            os.environ.pop("TERSE_CODEC", None)
        else:
            os.environ["TERSE_CODEC"] = codec
        try:
            mp.spawn(worker, args=(args, codec, free_port()), nprocs=args.nproc, join=True)
        except Exception as error:  # a failed rank: report it, go on with the next codec
            print(f"allreduce_check.py: {codec}: {error}", file=sys.stderr)
            report["jobs"].append({"codec": codec, "error": str(error)})
            failed = True
            continue
        ranks = []
        for rank in range(args.nproc):
            path = os.path.join(args.out, f".{rank}.json")
            with open(path) as f:
                ranks.append(json.load(f))
            os.remove(path)
        rows = []
        for i, row in enumerate(ranks[0]):
            row = dict(row)
            row["time_us"] = max(r[i]["time_us"] for r in ranks)  # the slowest rank's time
            row["algbw"] = row["bytes"] / row["time_us"] / 1e3
            row["busbw"] = row["algbw"] * 2 * (args.nproc - 1) / args.nproc
            row["rel_err"] = max(r[i]["rel_err"] for r in ranks)
            rows.append(row)
            if codec == "none" and row["rel_err"] > 1e-6:
                failed = True
            print(f"| {codec} | {row['bytes']} | {row['time_us']:.0f} | {row['algbw']:.2f} | "
                  f"{row['busbw']:.2f} | {row['rel_err']:.2e} |", flush=True)
        report["jobs"].append({"codec": codec, "rows": rows})
    with open(os.path.join(args.out, "allreduce_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
