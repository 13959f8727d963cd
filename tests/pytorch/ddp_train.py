#!/usr/bin/env python3
"""Trains a small MLP with DistributedDataParallel, uncompressed and with terse's codecs, and
compares the loss curves.

Each codec runs as its own job of N processes (torch.multiprocessing.spawn) with
TERSE_CODEC=<codec> in their environment; "none" leaves TERSE_CODEC unset, the uncompressed
reference. The data is synthetic and seeded (a fixed random "teacher" MLP plus noise; every rank
draws its own batches), so every job sees the same samples and the curves differ only by what
compression changed. Rank 0 evaluates a held-out set every --eval-every steps without any
collective, so the curve itself is never compressed.

On a GPU, under terse (several processes may share one GPU in engine mode):

  LD_PRELOAD=$PWD/build/plugin/libterse.so TERSE_MODE=engine \\
    python3 tests/pytorch/ddp_train.py --nproc 4 --steps 300 --codecs none,int8,topk --out DIR

Without a GPU (--device cpu) it runs on gloo, which never calls NCCL: a check of the script and
of the training set-up, not of terse.

Writes DIR/<codec>.json (the curve, the settings, whether libterse was loaded, each rank's final
parameter checksum) and DIR/summary.json, prints a table, and exits 1 when a codec's final loss
is not within --tolerance (relative) of the uncompressed one, or ranks ended with different
parameters.
"""

import argparse
import hashlib
import json
import math
import os
import socket
import sys
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=2, help="processes per job (2-4)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--codecs", default="none,int8,topk",
                        help="comma-separated TERSE_CODEC values; 'none' is the reference")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                        help="cuda: every rank on GPU 0 with backend nccl; cpu: gloo")
    parser.add_argument("--batch", type=int, default=256, help="samples per rank and step")
    parser.add_argument("--width", type=int, default=1024, help="hidden width of the MLP")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--tolerance", type=float, default=0.10,
                        help="allowed relative difference of the final loss to uncompressed")
    parser.add_argument("--out", default="ddp_train_out")
    parser.add_argument("--timeout-s", type=float, default=300,
                        help="process group timeout (a hang becomes an error)")
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error("--nproc must be at least 1")
    if "none" not in args.codecs.split(","):
        parser.error("--codecs must include 'none', the reference the others are compared to")
    return args


IN_FEATURES = 64
OUT_FEATURES = 16


def make_model(torch, width):
    nn = torch.nn
    return nn.Sequential(nn.Linear(IN_FEATURES, width), nn.ReLU(), nn.Linear(width, width),
                         nn.ReLU(), nn.Linear(width, OUT_FEATURES))


def teacher_data(torch, generator, count, teacher):
    x = torch.randn(count, IN_FEATURES, generator=generator)
    with torch.no_grad():
        y = teacher(x) + 0.05 * torch.randn(count, OUT_FEATURES, generator=generator)
    return x, y


def terse_loaded():
    """Whether libterse is mapped into this process (LD_PRELOAD took effect)."""
    try:
        with open("/proc/self/maps") as maps:
            return any("libterse" in line for line in maps)
    except OSError:
        return False


def worker(rank, args, codec, port, device_kind):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    backend = "nccl" if device_kind == "cuda" else "gloo"
    if device_kind == "cuda":
        # Every rank on GPU 0: terse's engine lets ranks share a GPU (real NCCL refuses it).
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    else:
        device = torch.device("cpu")
    import datetime
    dist.init_process_group(backend, rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(seconds=args.timeout_s))

    # The same teacher, initial model and held-out set on every rank and in every job.
    torch.manual_seed(args.seed)
    teacher = make_model(torch, 64)
    model = make_model(torch, args.width)
    held_out = teacher_data(torch, torch.Generator().manual_seed(args.seed + 1), 4096, teacher)
    batches = torch.Generator().manual_seed(args.seed + 1000 + rank)  # this rank's own samples

    model.to(device)
    ddp = DistributedDataParallel(model, device_ids=[0] if device_kind == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.MSELoss()
    eval_x, eval_y = held_out[0].to(device), held_out[1].to(device)

    curve = []
    train_losses = []
    started = time.perf_counter()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            if rank == 0:
                with torch.no_grad():
                    curve.append([step, loss_fn(model(eval_x), eval_y).item()])
        if step == args.steps:
            break
        x, y = teacher_data(torch, batches, args.batch, teacher)
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()  # DDP's gradient allreduce: ncclAllReduce, through terse under LD_PRELOAD
        optimizer.step()
        train_losses.append(loss.item())
    if device_kind == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started

    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().float().cpu().numpy().tobytes())
    record = {"rank": rank, "checksum": digest.hexdigest(), "seconds": seconds,
              "terse_loaded": terse_loaded(), "train_loss_last": train_losses[-1]
              if train_losses else None}
    if rank == 0:
        record["curve"] = curve
        record["train_loss"] = train_losses
    with open(os.path.join(args.out, f".{codec_file(codec)}.rank{rank}.json"), "w") as f:
        json.dump(record, f)
    dist.destroy_process_group()


def codec_file(codec):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in codec)


def free_port():
    # The job's rendezvous port: torch's store binds it in rank 0 right after; good enough for a
    # script (the test suite's rule of held ports applies to CTest).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(args, codec, device_kind):
    import torch.multiprocessing as mp

    if codec == "none":
        os.environ.pop("TERSE_CODEC", None)
    else:
        os.environ["TERSE_CODEC"] = codec
    os.environ.setdefault("TERSE_SOCKET_IFNAME", "lo")  # every rank is on this machine
    started = time.perf_counter()
    mp.spawn(worker, args=(args, codec, free_port(), device_kind), nprocs=args.nproc, join=True)
    wall = time.perf_counter() - started
    ranks = []
    for rank in range(args.nproc):
        path = os.path.join(args.out, f".{codec_file(codec)}.rank{rank}.json")
        with open(path) as f:
            ranks.append(json.load(f))
        os.remove(path)
    result = {
        "codec": codec,
        "device": device_kind,
        "nproc": args.nproc,
        "steps": args.steps,
        "settings": {k: v for k, v in vars(args).items()},
        "environment": {k: os.environ.get(k) for k in
                        ("LD_PRELOAD", "TERSE_MODE", "TERSE_CODEC", "TERSE_DEBUG")},
        "terse_loaded": all(r["terse_loaded"] for r in ranks),
        "ranks_agree": len({r["checksum"] for r in ranks}) == 1,
        "checksums": [r["checksum"] for r in ranks],
        "train_seconds": max(r["seconds"] for r in ranks),
        "wall_seconds": wall,
        "curve": ranks[0]["curve"],
        "train_loss": ranks[0]["train_loss"],
    }
    with open(os.path.join(args.out, f"{codec_file(codec)}.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def final_loss(result):
    # The mean of the last three evaluations: one evaluation alone is noisier than the codec.
    tail = [loss for _, loss in result["curve"][-3:]]
    return sum(tail) / len(tail)


def main(argv=None):
    args = parse_args(argv)
    import torch

    device_kind = args.device
    if device_kind == "auto":
        device_kind = "cuda" if torch.cuda.is_available() else "cpu"
    if device_kind == "cuda" and not torch.cuda.is_available():
        print("ddp_train.py: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    codecs = args.codecs.split(",")
    codecs.sort(key=lambda c: c != "none")  # the reference first
    print(f"ddp_train.py: {args.nproc} processes, {args.steps} steps, device {device_kind} "
          f"(backend {'nccl' if device_kind == 'cuda' else 'gloo'}), LD_PRELOAD="
          f"{os.environ.get('LD_PRELOAD', '')!r}, TERSE_MODE={os.environ.get('TERSE_MODE')!r}",
          flush=True)

    results = {}
    for codec in codecs:
        results[codec] = run_job(args, codec, device_kind)
        r = results[codec]
        print(f"  {codec:>10}: final eval loss {final_loss(r):.5f} (start {r['curve'][0][1]:.5f}), "
              f"{r['train_seconds']:.1f} s training, terse loaded {r['terse_loaded']}, "
              f"ranks agree {r['ranks_agree']}", flush=True)

    reference = final_loss(results["none"])
    failures = []
    rows = []
    for codec, r in results.items():
        loss = final_loss(r)
        relative = (loss - reference) / reference if reference > 0 else math.inf
        ok = abs(relative) <= args.tolerance and r["ranks_agree"]
        if not ok:
            failures.append(codec)
        rows.append({"codec": codec, "final_loss": loss, "relative_to_none": relative,
                     "within_tolerance": abs(relative) <= args.tolerance,
                     "ranks_agree": r["ranks_agree"], "terse_loaded": r["terse_loaded"],
                     "train_seconds": r["train_seconds"]})
    summary = {"nproc": args.nproc, "steps": args.steps, "device": device_kind,
               "tolerance": args.tolerance, "reference_final_loss": reference, "rows": rows,
               "passed": not failures}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)

    print(f"\n| codec | final eval loss | vs none | ranks agree | terse loaded | training s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['codec']} | {row['final_loss']:.5f} | {row['relative_to_none']:+.2%} | "
              f"{row['ranks_agree']} | {row['terse_loaded']} | {row['train_seconds']:.1f} |")
    if failures:
        print(f"ddp_train.py: outside {args.tolerance:.0%} of uncompressed, or ranks disagree: "
              f"{', '.join(failures)}", file=sys.stderr)
        return 1
    print(f"ddp_train.py: every codec within {args.tolerance:.0%} of uncompressed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
