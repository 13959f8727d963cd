#!/usr/bin/env python3
"""torch_terse as a user of torch.distributed meets it: `import torch_terse`, then
init_process_group("terse") on 2 and 4 processes (each a fresh Python, rendezvous through the
TCP store as torchrun's env:// does), every collective against values each rank computes itself,
DDP training equal to the same script over gloo, bad input refused with an error naming the call,
and a killed rank turning into an exception on the others within TERSE_TIMEOUT_S.

  PYTHONPATH=build/python /usr/bin/python3 tests/pytorch/test_torch_terse.py [-v] [Test.name]
"""
import os
import socket
import subprocess
import sys
import time
import unittest

HERE = os.path.abspath(__file__)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(scenario, world, extra_env=None, kill_rank=None, timeout=120):
    """Runs `scenario` on `world` fresh processes; returns [(returncode, output)] per rank."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), TERSE_SOCKET_IFNAME="lo", TERSE_TIMEOUT_S="10")
        env.update(extra_env or {})
        procs.append(subprocess.Popen([sys.executable, HERE, "--worker", scenario], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    if kill_rank is not None:
        # The victim says when it is inside its collectives' loop; then it is killed.
        line = procs[kill_rank].stdout.readline()
        assert line.strip() == "looping", line
        procs[kill_rank].kill()
    results = []
    deadline = time.time() + timeout
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            out += "\n(timed out)"
        results.append((proc.returncode, out))
    return results


# ---------------------------------------------------------------- the processes' side


def worker(scenario):
    import torch
    import torch.distributed as dist
    import torch_terse

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = "gloo" if scenario == "ddp_gloo" else "terse"
    dist.init_process_group(backend, init_method="env://")
    globals()["scenario_" + scenario](torch, dist, torch_terse, rank, world)
    dist.destroy_process_group()
    print("done")


def value(rank, i, dtype):
    """Rank `rank`'s i-th input, exact in every dtype tested (small integers)."""
    import torch
    v = (rank * 7 + i * 3) % 11 + 1
    return torch.tensor(v, dtype=dtype)


def scenario_collectives(torch, dist, torch_terse, rank, world):
    n = 37
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int32, torch.int64]
    ops = {dist.ReduceOp.SUM: sum, dist.ReduceOp.PRODUCT: None, dist.ReduceOp.MIN: min,
           dist.ReduceOp.MAX: max}
    for dtype in dtypes:
        for op, fold in ops.items():
            t = torch.stack([value(rank, i, dtype) for i in range(n)])
            dist.all_reduce(t, op=op)
            for i in range(n):
                inputs = [int(value(r, i, dtype)) for r in range(world)]
                if op == dist.ReduceOp.PRODUCT:
                    # Products of up to 4 factors <= 11 exceed int8/uint8; compare modulo the
                    # type's range as NCCL's wrapping arithmetic gives.
                    expect = 1
                    for x in inputs:
                        expect *= x
                    expect = torch.tensor(expect, dtype=torch.int64).to(dtype) \
                        if not dtype.is_floating_point else torch.tensor(float(expect)).to(dtype)
                else:
                    expect = torch.tensor(fold(inputs)).to(dtype)
                assert t[i] == expect, (dtype, op, i, t[i], expect)
    # Average of floats: the sum over world, rounded once.
    t = torch.stack([value(rank, i, torch.float32) for i in range(n)])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    for i in range(n):
        expect = sum(float(value(r, i, torch.float32)) for r in range(world)) / world
        assert abs(float(t[i]) - expect) < 1e-6, (i, t[i], expect)
    # Broadcast from every root.
    for root in range(world):
        t = torch.full((5,), float(rank))
        dist.broadcast(t, root)
        assert t.tolist() == [float(root)] * 5
    # Allgather into a list and into a tensor.
    outs = [torch.zeros(3, 2) for _ in range(world)]
    dist.all_gather(outs, torch.full((3, 2), float(rank)))
    assert [o.tolist() for o in outs] == [[[float(r)] * 2] * 3 for r in range(world)]
    flat = torch.zeros(world * 4, dtype=torch.int32)
    dist._all_gather_base(flat, torch.arange(4, dtype=torch.int32) + 10 * rank)
    assert flat.tolist() == [10 * r + j for r in range(world) for j in range(4)]
    # Reduce-scatter from a list and from a tensor.
    pieces = [torch.full((4,), float(rank * 10 + j)) for j in range(world)]
    out = torch.zeros(4)
    dist.reduce_scatter(out, pieces)
    assert out.tolist() == [float(sum(r * 10 + rank for r in range(world)))] * 4
    whole = torch.arange(world * 3, dtype=torch.float64) * (rank + 1)
    out = torch.zeros(3, dtype=torch.float64)
    dist._reduce_scatter_base(out, whole)
    scale = sum(r + 1 for r in range(world))
    assert out.tolist() == [float((rank * 3 + j) * scale) for j in range(3)]
    # Alltoall: equal shares, then uneven splits.
    send = torch.arange(world * 2, dtype=torch.int64) + 100 * rank
    recv = torch.zeros(world * 2, dtype=torch.int64)
    dist.all_to_all_single(recv, send)
    assert recv.tolist() == [100 * r + 2 * rank + j for r in range(world) for j in range(2)]
    in_splits = [r + 1 for r in range(world)]          # r+1 rows to rank r
    out_splits = [rank + 1] * world                    # rank+1 rows from each rank
    send = torch.full((sum(in_splits), 2), float(rank))
    recv = torch.zeros(sum(out_splits), 2)
    dist.all_to_all_single(recv, send, out_splits, in_splits)
    assert recv[:, 0].tolist() == [float(r) for r in range(world) for _ in range(rank + 1)]
    outs = [torch.zeros(2) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((2,), float(rank * world + r)) for r in range(world)])
    assert [o.tolist() for o in outs] == [[float(r * world + rank)] * 2 for r in range(world)]
    # Reduce to a root.
    t = torch.full((3,), float(rank + 1))
    dist.reduce(t, dst=world - 1)
    if rank == world - 1:
        assert t.tolist() == [float(world * (world + 1) // 2)] * 3
    # Send/recv around a ring, and a barrier.
    t = torch.full((6,), float(rank))
    got = torch.zeros(6)
    if rank % 2 == 0:
        dist.send(t, (rank + 1) % world)
        dist.recv(got, (rank - 1) % world)
    else:
        dist.recv(got, (rank - 1) % world)
        dist.send(t, (rank + 1) % world)
    assert got.tolist() == [float((rank - 1) % world)] * 6
    dist.barrier()
    # Asynchronous: the Work and its future.
    t = torch.ones(1000)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    assert work.is_completed() and work.is_success()
    assert fut.wait()[0].tolist() == [float(world)] * 1000
    # Coalesced.
    a, b = torch.ones(3), torch.full((2,), 2.0)
    dist.all_reduce_coalesced([a, b])
    assert a.tolist() == [float(world)] * 3 and b.tolist() == [2.0 * world] * 2
    stats = torch_terse.stats()
    assert stats["calls"] > 0 and stats["last_codec"] == "none", stats


def scenario_bad_input(torch, dist, torch_terse, rank, world):
    def refused(call, words):
        try:
            call()
        except (RuntimeError, ValueError) as error:
            assert all(w in str(error) for w in words), str(error)
            return
        raise AssertionError("accepted: %s" % words)
    strided = torch.zeros(4, 4).t()
    refused(lambda: dist.all_reduce(strided), ["allreduce", "not contiguous"])
    refused(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int16)), ["allreduce", "dtype"])
    refused(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int32), op=dist.ReduceOp.BAND),
            ["allreduce", "reduce op"])
    refused(lambda: dist.broadcast(torch.zeros(3), world + 2), ["broadcast"])
    refused(lambda: dist._all_gather_base(torch.zeros(5), torch.zeros(3)), ["allgather", "elements"])
    # The group still works afterwards.
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(world)] * 2


def scenario_storage_keys(torch, dist, torch_terse, rank, world):
    import numpy
    torch_terse.set_codec("topk:ratio=0.1")
    memory = numpy.zeros(4096, dtype=numpy.float32)
    a = torch.from_numpy(memory)
    a.copy_(torch.arange(4096, dtype=torch.float32) * (rank + 1))
    dist.all_reduce(a)
    dist.all_reduce(a)  # the same tensor again: its entry, not a new one
    assert torch_terse.stats()["residual_admitted"] == 1, torch_terse.stats()
    address = a.data_ptr()
    del a
    # The same memory under a new storage, as a bucket rebuilt where the old one was.
    b = torch.from_numpy(memory)
    assert b.data_ptr() == address
    dist.all_reduce(b)
    assert torch_terse.stats()["residual_admitted"] == 2, torch_terse.stats()
    # A view at an offset of a live storage is a tensor of its own.
    dist.all_reduce(b[1024:2048])
    assert torch_terse.stats()["residual_admitted"] == 3, torch_terse.stats()


def scenario_killed(torch, dist, torch_terse, rank, world):
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    print("looping", flush=True)
    try:
        for _ in range(100000):
            dist.all_reduce(t)
            time.sleep(0.001)
    except RuntimeError as error:
        assert "allreduce" in str(error), str(error)
        print("raised:", str(error).splitlines()[0], flush=True)
        os._exit(0)  # the communicator is broken; no orderly teardown
    raise AssertionError("no error after the peer died")


def ddp_train(torch, dist, rank, world, hook=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(10):
        x = torch.randn(16, 20, generator=g)
        y = torch.randint(0, 4, (16,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def scenario_ddp_terse(torch, dist, torch_terse, rank, world):
    params = ddp_train(torch, dist, rank, world)
    torch.save(params, os.environ["TT_OUT"] + ".terse.%d" % rank)


def scenario_ddp_gloo(torch, dist, torch_terse, rank, world):
    params = ddp_train(torch, dist, rank, world)
    torch.save(params, os.environ["TT_OUT"] + ".gloo.%d" % rank)


def scenario_ddp_hook(torch, dist, torch_terse, rank, world):
    # int8 through the comm hook: buckets keyed by index and generation, every rank equal.
    params = ddp_train(torch, dist, rank, world, torch_terse.hooks.compress(codec="int8"))
    stats = torch_terse.stats()
    assert stats["compressed_calls"] > 0 and stats["last_codec"].startswith("int8"), stats
    gathered = [torch.zeros_like(params) for _ in range(world)]
    dist.all_gather(gathered, params)
    for other in gathered:
        assert torch.equal(other, params), "ranks diverged"


def scenario_ddp_hook_per_parameter(torch, dist, torch_terse, rank, world):
    # PowerSGD per parameter: each matrix with its own shape, vectors uncompressed.
    hook = torch_terse.hooks.compress(codec="powersgd:rank=2", per_parameter=True)
    params = ddp_train(torch, dist, rank, world, hook)
    stats = torch_terse.stats()
    assert stats["compressed_calls"] > 0, stats
    gathered = [torch.zeros_like(params) for _ in range(world)]
    dist.all_gather(gathered, params)
    for other in gathered:
        assert torch.equal(other, params), "ranks diverged"


# ---------------------------------------------------------------- the tests


class TorchTerse(unittest.TestCase):
    def check_all(self, results, want="done"):
        for rank, (code, out) in enumerate(results):
            self.assertEqual(code, 0, "rank %d:\n%s" % (rank, out))
            self.assertIn(want, out, "rank %d:\n%s" % (rank, out))

    def test_collectives_on_2_and_4_processes(self):
        for world in (2, 4):
            self.check_all(launch("collectives", world))

    def test_bad_input_is_refused_naming_the_call(self):
        self.check_all(launch("bad_input", 2))

    def test_killed_rank_raises_on_the_others(self):
        start = time.time()
        results = launch("killed", 3, kill_rank=1, extra_env={"TERSE_TIMEOUT_S": "5"})
        for rank in (0, 2):
            code, out = results[rank]
            self.assertEqual(code, 0, out)
            self.assertIn("raised:", out)
        self.assertLess(time.time() - start, 60)

    def test_new_storage_at_an_old_address_gets_a_fresh_residual(self):
        self.check_all(launch("storage_keys", 2))

    def test_ddp_equals_gloo(self):
        import torch
        out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "torch_terse_ddp_%d" % os.getpid())
        for world in (2, 4):
            env = {"TT_OUT": out}
            self.check_all(launch("ddp_terse", world, env))
            self.check_all(launch("ddp_gloo", world, env))
            for rank in range(world):
                a = torch.load(out + ".terse.%d" % rank)
                b = torch.load(out + ".gloo.%d" % rank)
                os.remove(out + ".terse.%d" % rank)
                os.remove(out + ".gloo.%d" % rank)
                # Sums of fp32 gradients in another order: a few ulps per step, 10 steps.
                self.assertTrue(torch.allclose(a, b, rtol=1e-5, atol=1e-6),
                                float((a - b).abs().max()))

    def test_ddp_comm_hook_compresses(self):
        self.check_all(launch("ddp_hook", 2))

    def test_ddp_comm_hook_per_parameter(self):
        self.check_all(launch("ddp_hook_per_parameter", 2))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        unittest.main()
