#!/usr/bin/env python3
"""What one link of perf/emulated_cluster.sh carries: a TCP transfer of BYTES from namespace
FROM to ADDRESS in namespace TO, printed as one JSON object (megabits per second, seconds).

    link_check.py FROM TO ADDRESS BYTES       # as root; FROM and TO are `ip netns` names

One process does both ends: the listening socket is made inside TO, the connecting one inside
FROM (a socket stays in the namespace it was made in), on a port the kernel picks, so nothing
has to be agreed or reserved. The time runs from the first byte received to the last, so it
includes TCP's slow start: on a long, fast link a short transfer reads low.
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


def main(source, target, address, total):
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    enter(target)
    server = socket.socket()
    server.bind((address, 0))
    server.listen(1)
    enter(source)
    client = socket.socket()
    client.connect(server.getsockname())
    libc.setns(home, CLONE_NEWNET)
    peer, _ = server.accept()
    received = {"bytes": 0, "first": None, "last": None}

    def receive():
        while True:
            chunk = peer.recv(1 << 20)
            if not chunk:
                break
            now = time.monotonic()
            if received["first"] is None:
                received["first"] = now
            received["bytes"] += len(chunk)
            received["last"] = now

    reader = threading.Thread(target=receive)
    reader.start()
    block = b"\0" * (1 << 20)
    left = total
    while left > 0:
        left -= client.send(block[: min(left, len(block))])
    client.close()
    reader.join()
    seconds = max(received["last"] - received["first"], 1e-9)
    print(json.dumps({"bytes": received["bytes"], "seconds": round(seconds, 4),
                      "mbit": round(received["bytes"] * 8 / seconds / 1e6, 1)}))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
