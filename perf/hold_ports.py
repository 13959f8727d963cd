#!/usr/bin/env python3
"""Holds COUNT consecutive TCP ports on HOST for a job started on this machine: prints the first,
then keeps them all bound until its standard input closes (the launcher's end of the pipe, when
the launcher exits).

    coproc PORTS { exec python3 perf/hold_ports.py [COUNT [HOST]]; }   # default 1 127.0.0.1
    read -r port <&"${PORTS[0]}"

A port a job is told before it starts (MASTER_PORT, TERSE_COMM_ID) must never be free between
the moment it is chosen and the moment its user binds it: a port found free and released at
once can be taken by any other process meanwhile (an outgoing connection's local port, say),
and rank 0 then fails at once. Each port here is bound without SO_REUSEADDR, so no other process
can bind it (nor does bind to port 0 or connect() ever pick it), and only then gets SO_REUSEADDR,
so that its user, which sets SO_REUSEADDR as well (terse's bootstrap root does), can bind and
listen on it: Linux lets a listening socket share its port with bound sockets that do not
listen. These never listen, so a connection made before the user listens is refused, as it
would be on a free port.
"""
import socket
import sys


def bind(family, host, port):
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        return None
    return sock


def hold(host, count):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    while True:
        first = bind(family, host, 0)
        if first is None:
            sys.exit(f"hold_ports.py: cannot bind a port on {host}")
        port = first.getsockname()[1]
        held = [first]
        while len(held) < count and port + len(held) <= 65535:
            sock = bind(family, host, port + len(held))
            if sock is None:
                break
            held.append(sock)
        if len(held) == count:
            for sock in held:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            return port, held
        for sock in held:  # the next port is taken: start again elsewhere
            sock.close()


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    port, held = hold(host, count)
    print(port, flush=True)
    sys.stdin.read()  # until the launcher ends
    for sock in held:
        sock.close()


main()
