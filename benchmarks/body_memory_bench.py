#!/usr/bin/env python
"""Server memory under a 300 MiB request body sent without credentials.

    python benchmarks/body_memory_bench.py [--mib 300]

Starts a real ``jupyter server`` with the extension (demo teams, a fresh state dir), then sends
``POST quota/v1/namespaces/team-alpha/jobs`` with no token three ways: a ``Content-Length`` of
``--mib`` MiB, the same body chunked, and the same body with ``Expect: 100-continue``. The client
writes the body as fast as the server takes it and stops when the server answers or closes.
Prints the answer, the bytes the client got to send, and the server's resident memory
(``VmRSS``) and peak (``VmHWM``, reset before each request) from ``/proc/<pid>/status``.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from server_process import ServerProcess

PIECE = 1024 * 1024


def send(port: int, size: int, how: str) -> tuple[str, int]:
    """Send the request; the status line the server answered (or how it ended) and bytes sent."""
    headers = [
        "POST /quota/v1/namespaces/team-alpha/jobs HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
    ]
    headers += ["Transfer-Encoding: chunked"] if how == "chunked" else [f"Content-Length: {size}"]
    if how == "expect":
        headers.append("Expect: 100-continue")
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    with sock:
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        if how == "expect":
            first = sock.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
            if " 100 " not in first + " ":
                return first, 0
        piece = b"x" * PIECE
        if how == "chunked":
            piece = b"%x\r\n" % PIECE + piece + b"\r\n"
        sent = 0
        while sent < size and not select.select([sock], [], [], 0)[0]:
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError) as e:
                return f"connection closed by the server ({type(e).__name__})", sent
            sent += PIECE
        if how == "chunked" and sent >= size:
            sock.sendall(b"0\r\n\r\n")
        try:
            answer = sock.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
        except ConnectionResetError:
            answer = "connection reset by the server"
        return answer or "connection closed by the server", sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=300)
    args = parser.parse_args()
    size = args.mib * PIECE
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = ServerProcess(root / "state", root).start()
        try:
            print(f"server pid {server.proc.pid}, idle: VmRSS {server.memory_kb()['VmRSS'] / 1024:.0f} MB")
            for how in ("content-length", "chunked", "expect"):
                server.reset_peak_memory()
                before = {k: v / 1024 for k, v in server.memory_kb().items()}
                answer, sent = send(server.port, size, how)
                after = {k: v / 1024 for k, v in server.memory_kb().items()}
                print(
                    f"{args.mib} MiB, {how:>14}, no token: {answer!r} after {sent / PIECE:.0f} MiB sent; "
                    f"VmRSS {before['VmRSS']:.0f} -> {after['VmRSS']:.0f} MB, "
                    f"peak VmHWM {before['VmHWM']:.0f} -> {after['VmHWM']:.0f} MB "
                    f"(+{after['VmHWM'] - before['VmHWM']:.0f} MB)"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
