"""A tiny TCP load tool run inside emulated hosts (``python -m emulator.blaster``).

``sink``  accepts connections on ``--bind``:``--port`` and records the bytes
          received over time (a timeline sampled every ``--sample`` seconds)
          as JSON on stdout when it ends (after ``--seconds`` or SIGTERM; it
          first reads each connection to its end, for up to ``DRAIN`` seconds,
          so bytes already on the wire are counted).
``send``  opens one TCP connection from ``--bind`` to ``--to``:``--port``,
          marks it with ``IP_TOS = dscp << 2``, optionally paces it with
          ``SO_MAX_PACING_RATE``, prints a ``connected`` line, and sends for
          ``--seconds`` from then (or ``--bytes``); then half-closes and waits (up to
          ``DRAIN`` seconds) for the sink to close after reading everything, so
          the bytes it sent have left the host when it exits; its byte count is
          the last line.

Used by the platform demo and the shaping/priority tests; the traffic
agents of the run-time build on the same socket options.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
import time

from emulator.sockopts import SO_MAX_PACING_RATE, set_congestion

CHUNK = 256 * 1024
# Seconds a sender waits for its sink to have read everything, and a stopped sink for its
# connections' ends. At 10 Mbit/s an autotuned send buffer held about 0.5 s of data when the
# sender's loop ended: the wire counters read then, and a sink stopped then, missed its tail
# (payload/wire 0.9513 against 0.9564 in tests/emulation/test_shaping.py, in the suite).
DRAIN = 10.0


def open_flow(
    bind: str, dst: str, port: int, dscp: int = 0, pace_bps: float | None = None, timeout: float = 5.0, tcp: str = ""
) -> socket.socket:
    """A connected TCP socket bound to ``bind``, marked with ``dscp``, optionally paced, running
    congestion control ``tcp`` (default: the namespace's)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if tcp:
        set_congestion(sock, tcp)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)
    if pace_bps:
        sock.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, int(pace_bps / 8))
    sock.bind((bind, 0))
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock.connect((dst, port))
            break
        except (ConnectionRefusedError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.settimeout(None)
    return sock


def send(args: argparse.Namespace) -> dict:
    sock = open_flow(args.bind, args.to, args.port, args.dscp, args.pace, tcp=args.tcp)
    print(json.dumps({"role": "send", "connected": True}), flush=True)  # measure() starts its warm-up now
    buf = b"\0" * CHUNK
    sent = 0
    start = time.time()
    end = start + args.seconds if args.seconds else float("inf")
    try:
        while time.time() < end and (not args.bytes or sent < args.bytes):
            n = CHUNK if not args.bytes else min(CHUNK, args.bytes - sent)
            sock.sendall(buf[:n])
            sent += n
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        close_delivered(sock)
    return {"role": "send", "bytes": sent, "start": start, "end": time.time()}


def close_delivered(sock: socket.socket, wait: float = DRAIN) -> None:
    """Half-close, wait (at most ``wait`` s) for the peer to close after reading what was sent,
    then close: what the sender wrote has then left its host and been read."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(wait)
        while sock.recv(4096):
            pass
    except OSError:  # a timeout, or a reset: the peer went first
        pass
    finally:
        sock.close()


def sink(args: argparse.Namespace) -> dict:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((args.bind, args.port))
    server.listen(64)
    server.settimeout(0.2)
    counts: list[int] = []
    live = [0]  # connections not yet at their end
    lock = threading.Condition()
    stop = threading.Event()

    def serve(conn: socket.socket, slot: int) -> None:
        buf = bytearray(CHUNK)
        with conn:
            while n := conn.recv_into(buf):  # to the end, stopped or not (the main thread bounds it)
                with lock:
                    counts[slot] += n
        with lock:
            live[0] -= 1
            lock.notify_all()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with lock:
                counts.append(0)
                live[0] += 1
                slot = len(counts) - 1
            threading.Thread(target=serve, args=(conn, slot), daemon=True).start()

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=accept, daemon=True).start()
    timeline = []
    end = time.time() + args.seconds
    print(json.dumps({"role": "sink", "ready": True}), flush=True)
    while not stop.is_set() and time.time() < end:
        with lock:
            timeline.append((time.time(), list(counts)))
        stop.wait(args.sample)
    stop.set()
    with lock:
        lock.wait_for(lambda: live[0] == 0, timeout=DRAIN)
        timeline.append((time.time(), list(counts)))
    return {"role": "sink", "bytes": list(counts), "timeline": timeline}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.blaster")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--bind", required=True)
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--dscp", type=int, default=0)
    s.add_argument("--pace", type=float, default=None, help="bit/s")
    s.add_argument("--seconds", type=float, default=0)
    s.add_argument("--bytes", type=int, default=0)
    s.add_argument("--tcp", default="", help="congestion control (default: the namespace's)")
    k = sub.add_parser("sink")
    k.add_argument("--bind", required=True)
    k.add_argument("--port", type=int, required=True)
    k.add_argument("--seconds", type=float, default=60)
    k.add_argument("--sample", type=float, default=0.1)
    args = parser.parse_args(argv)
    if args.cmd == "send" and not 0 <= args.dscp <= 63:
        print("dscp: DSCP must be in 0..63", file=sys.stderr)
        return 2
    result = send(args) if args.cmd == "send" else sink(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
