#!/usr/bin/env python3
"""What the links of perf/emulated_cluster.sh carry, printed as one JSON object.

    link_check.py FROM TO ADDRESS BYTES         # one TCP transfer of BYTES from namespace FROM
                                                # to ADDRESS in namespace TO (Mbit/s, seconds)
    link_check.py --ring NS:ADDRESS ... BYTES   # every node sends BYTES to the next one at once
                                                # (the last to the first), as a ring allreduce's
                                                # steps do: each flow's Mbit/s, their mean and
                                                # the slowest

As root; namespaces are `ip netns` names. One process does every end: a listening socket is made
inside the receiver's namespace, the connecting one inside the sender's (a socket stays in the
namespace it was made in), on a port the kernel picks, so nothing has to be agreed or reserved.
A flow's time runs from its first byte received to its last, so it includes TCP's slow start: on
a long, fast link a short transfer reads low. With every node sending and receiving at once, the
ring shows what the machine itself sustains: the nodes' TCP stacks, the switch and the delay
line share its cores.
"""
import ctypes
import json
import os
import socket
import sys
import threading
import time

CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)


def enter(namespace):
    fd = os.open(f"/var/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            sys.exit(f"link_check.py: cannot enter {namespace}: {os.strerror(error)}")
    finally:
        os.close(fd)


def connect(source, target, address):
    """A connected (sender, receiver) socket pair from namespace `source` to `address` in
    namespace `target`; the caller returns to its own namespace afterwards."""
    enter(target)
    server = socket.socket()
    server.bind((address, 0))
    server.listen(1)
    enter(source)
    client = socket.socket()
    client.connect(server.getsockname())
    peer, _ = server.accept()
    server.close()
    return client, peer


def transfer(pairs, total):
    """Sends `total` bytes through every (sender, receiver) pair at once; Mbit/s per pair."""
    received = [{"bytes": 0, "first": None, "last": None} for _ in pairs]

    def receive(peer, into):
        while True:
            chunk = peer.recv(1 << 20)
            if not chunk:
                break
            now = time.monotonic()
            if into["first"] is None:
                into["first"] = now
            into["bytes"] += len(chunk)
            into["last"] = now

    def send(client):
        block = b"\0" * (1 << 20)
        left = total
        while left > 0:
            left -= client.send(block[: min(left, len(block))])
        client.close()

    threads = [threading.Thread(target=receive, args=(peer, into))
               for (_, peer), into in zip(pairs, received)]
    threads += [threading.Thread(target=send, args=(client,)) for client, _ in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flows = []
    for into in received:
        if into["first"] is None:  # nothing arrived: a dead link reads 0
            flows.append({"bytes": 0, "seconds": 0, "mbit": 0.0})
            continue
        seconds = max(into["last"] - into["first"], 1e-9)
        flows.append({"bytes": into["bytes"], "seconds": round(seconds, 4),
                      "mbit": round(into["bytes"] * 8 / seconds / 1e6, 1)})
    return flows


def main(source, target, address, total):
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    pair = connect(source, target, address)
    libc.setns(home, CLONE_NEWNET)
    print(json.dumps(transfer([pair], total)[0]))


def ring(nodes, total):
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    pairs = []
    for i, (source, _) in enumerate(nodes):
        target, address = nodes[(i + 1) % len(nodes)]
        pairs.append(connect(source, target, address))
    libc.setns(home, CLONE_NEWNET)
    mbit = [flow["mbit"] for flow in transfer(pairs, total)]
    print(json.dumps({"bytes": total, "flows": len(mbit), "mbit": mbit,
                      "mean_mbit": round(sum(mbit) / len(mbit), 1), "min_mbit": min(mbit)}))


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--ring":
        ring([tuple(node.split(":", 1)) for node in sys.argv[2:-1]], int(sys.argv[-1]))
    elif len(sys.argv) == 5:
        main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)
