"""Traffic agent: one process per emulated server, inside its namespace.

Started by the run-time (:mod:`emulator.runtime`) as
``python -m emulator.agent --server S --control PATH --tcp NAME``. It connects to the
controller's Unix socket (never the emulated data network) and speaks JSON
lines. Commands (controller -> agent):

``{"op": "wait", "key": k, "until": t}``
    a compute task or an intra-host leg: answer ``{"ev": "waited", "key": k,
    "t": t}`` at monotonic time ``t`` (the deadline, so control latency does
    not stretch compute).
``{"op": "send", "id": f, "n": i, "src": a, "dst": b, "size": s, "tos": x,
"pace": bytes/s or 0, "not_before": t, "mark": m, "short": 0}``
    open a TCP connection from address ``a`` to agent port on ``b``, mark it
    with ``IP_TOS`` = ``x``, pace it with ``SO_MAX_PACING_RATE`` when ``pace``
    is set, give it socket mark ``m`` when non-zero (the spine it must cross:
    ``railbed.topology.spine_mark``), send a 16-byte header (flow number, size) and ``s`` payload bytes
    (``short`` fewer: fault injection for the integrity tests), then wait
    for the receiver to close.
    With ``"persist": 1`` the message goes on the agent's persistent connection
    to ``b`` for (``a``, ``b``, ``tos``, ``mark``) instead: opened on first use
    with a 16-byte header (``PERSIST``, 0), then one frame per message (the
    16-byte header, then ``s`` payload bytes), messages on one connection in
    the order they were asked for, no pacing (LEO's request streams: millions
    of small messages in model time). ``short`` sends fewer bytes and closes
    the connection, so the receiver sees the frame end early.
``{"op": "rate", "id": f, "pace": bytes/s or 0, "hold": 0}``
    change the pacing rate of a live flow. With ``"hold": 1`` (also allowed
    in ``send``) the flow is held instead: the agent hands its socket no more
    payload until a ``rate`` without ``hold`` comes, and leaves the socket's
    pacing as it was, so what the kernel already queued (at most
    ``TCP_NOTSENT_LOWAT`` on a paced socket, see :func:`set_pacing`) leaves
    at the flow's last rate. A pacing rate near zero would not do: Linux
    books each packet's departure at ``len / rate`` ahead (``tcp_wstamp_ns``)
    and a later, faster rate does not cancel the booking, so a flow paced
    at a few bit/s and then freed stayed stuck for minutes (MRTF on the
    DGTP testbed, issue 13). A hold is answered with ``held``.
``{"op": "tos", "id": f, "tos": x}``
    re-mark a live flow (``IP_TOS`` on its socket: packets sent from now on).
``{"op": "quit"}``

Events (agent -> controller): ``hello`` (data listener ready; ``tcp``: the
congestion control the kernel reports for it, which ``--tcp`` sets on every
socket the agent makes or accepts), ``conn`` (a
persistent connection was opened), ``waited``,
``held`` (``n``, ``bytes``: the
flow's payload the kernel had queued but not sent when the hold came),
``recv`` (the receiver got every byte of flow ``n``, or the connection
ended early: ``bytes`` says how many), ``integrity`` (more bytes arrived
after completion), ``error``, and with ``--progress P`` a ``progress``
event (``n``, ``bytes``, ``t``) at most every ``P`` seconds per flow while
it receives (schedulers read it as the flow's progress). The receiver counts
payload bytes and, with ``--trace``, samples ``(t, bytes)`` for the run's traces. All times are
``time.monotonic()``, one clock for every process on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import socket
import struct
import sys
import time

from emulator.sockopts import SO_MAX_PACING_RATE, congestion_of, set_congestion

DATA_PORT = 7000
HEADER = struct.Struct("!QQ")
ZERO_FILE_BYTES = 8 << 20
RECV_BUFFER = 1 << 20
# A receiver is woken when this much of its flow (or the flow's rest) has arrived (SO_RCVLOWAT),
# not per segment: at 20-40 Mbit/s real a flow's segments arrive every 0.3-0.6 ms, and one asyncio
# round per segment was the agents' CPU (docs/performance.md, "Where a packet's time goes"). The
# kernel then ACKs as before; only the reader's wake-ups are fewer. Not with ``--trace``.
RCV_LOWAT = 256 << 10
UNLIMITED_PACING = 0xFFFFFFFF  # ~0U: the kernel's "no cap"
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
SIOCOUTQNSD = 0x894B  # bytes queued on a TCP socket and not yet sent
LOWAT_MIN = 128 << 10  # bytes
LOWAT_SECONDS = 0.05  # a paced socket queues at most this long of its rate unsent (or LOWAT_MIN)
TIMER_SLACK = 0.002
PERSIST = (1 << 64) - 1  # the first header's flow number on a persistent connection


def set_pacing(sock: socket.socket, bytes_per_s: float) -> None:
    """Cap a socket's pacing rate (0: remove the cap). An unsigned 32-bit option value.

    A paced socket also gets ``TCP_NOTSENT_LOWAT`` of :data:`LOWAT_SECONDS` of
    its rate (at least :data:`LOWAT_MIN`): the kernel then takes no more payload
    while that much is queued unsent, which bounds what still leaves after a
    hold. An unpaced socket keeps the kernel's default (no limit)."""
    value = min(int(bytes_per_s), UNLIMITED_PACING) if bytes_per_s else UNLIMITED_PACING
    sock.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, struct.pack("=I", max(1, value)))
    lowat = max(LOWAT_MIN, int(bytes_per_s * LOWAT_SECONDS)) if bytes_per_s else 0  # 0: the sysctl's
    sock.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, struct.pack("=I", lowat))


def unsent_bytes(sock: socket.socket) -> int:
    """Bytes the kernel holds for ``sock`` that have not been sent yet (``SIOCOUTQNSD``)."""
    return struct.unpack("=i", fcntl.ioctl(sock.fileno(), SIOCOUTQNSD, b"\0" * 4))[0]


def _zero_file() -> int:
    """A file of zeros to sendfile() from (zero-copy payload)."""
    fd = os.memfd_create("railbed-zeros")
    os.ftruncate(fd, ZERO_FILE_BYTES)
    return fd


class Agent:
    def __init__(
        self, server: int, control: str, port: int, trace: float, progress: float = 0.0, tcp: str = ""
    ) -> None:
        self.server = server
        self.tcp = tcp
        self.control = control
        self.port = port
        self.trace = trace
        self.progress = progress
        self.live: dict[str, socket.socket] = {}
        # flow id -> its pacing (bytes/s, 0: none) and TOS, from its "send" on: a "rate" or "tos"
        # that arrives before the flow's socket exists (it is still waiting or connecting) is kept
        # here and applied when the socket is made (before, such a change was lost: a flow capped in
        # the batch that started it ran uncapped, and OES's incast into a slow server overflowed it)
        self.settings: dict[str, dict[str, int]] = {}
        self.gates: dict[str, asyncio.Event] = {}  # flow id -> set unless the flow is held
        self.writer: asyncio.StreamWriter | None = None
        self.zeros = _zero_file()
        self.background: set[asyncio.Task] = set()
        self.pool: dict[tuple, socket.socket] = {}  # persistent connections by (src, dst, tos, mark)
        self.locks: dict[tuple, asyncio.Lock] = {}

    def tcp_socket(self, sock: socket.socket) -> None:
        """The run's congestion control on ``sock`` (a namespace's default is the host's)."""
        if self.tcp:
            set_congestion(sock, self.tcp)

    def emit(self, **event) -> None:
        assert self.writer is not None
        self.writer.write((json.dumps(event) + "\n").encode())

    def spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    # ------------------------------------------------------------ receiver
    async def accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            self.spawn(self.receive(conn))

    async def receive(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        head = b""
        try:
            while len(head) < HEADER.size:
                chunk = await loop.sock_recv(conn, HEADER.size - len(head))
                if not chunk:
                    return
                head += chunk
            n, size = HEADER.unpack(head)
            if n == PERSIST:
                await self.receive_frames(conn)
                return
            buf = bytearray(RECV_BUFFER)
            count, reported, lowat = 0, False, 1
            trace: list[tuple[float, int]] = []
            start = last = last_progress = time.monotonic()
            if self.trace:
                trace.append((last, 0))
            while True:
                if count >= size and not reported:
                    self.emit(ev="recv", n=n, bytes=count, t=time.monotonic(), trace=trace)
                    reported = True
                want = 1 if self.trace else max(1, min(RCV_LOWAT, size - count))
                if self.progress and want > 1:  # a progress report at least every half period
                    rate = count / max(time.monotonic() - start, 1e-3)
                    want = max(1, min(want, int(rate * self.progress / 2)))
                if want != lowat:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
                    lowat = want
                got = await loop.sock_recv_into(conn, buf)
                if got == 0:
                    break
                count += got
                if self.trace or self.progress:
                    now = time.monotonic()
                    if self.trace and now - last >= self.trace:
                        trace.append((now, count))
                        last = now
                    if self.progress and now - last_progress >= self.progress and count < size:
                        self.emit(ev="progress", n=n, bytes=count, t=now)
                        last_progress = now
            if not reported:
                self.emit(ev="recv", n=n, bytes=count, t=time.monotonic(), trace=trace)
            elif count != size:
                self.emit(ev="integrity", n=n, bytes=count)
        except OSError as exc:
            self.emit(ev="error", msg=f"receiving on h{self.server}: {exc}")
        finally:
            conn.close()

    async def receive_frames(self, conn: socket.socket) -> None:
        """A persistent connection: frames (header, payload) until the sender closes; a ``recv``
        per frame with the bytes its payload had (fewer when the connection ended inside it)."""
        loop = asyncio.get_running_loop()
        buf = bytearray(RECV_BUFFER)
        while True:
            head = await _read_exact(loop, conn, HEADER.size)
            if not head:
                return
            if len(head) < HEADER.size:
                self.emit(ev="error", msg=f"receiving on h{self.server}: a frame header cut short")
                return
            n, size = HEADER.unpack(head)
            count = await _count_exact(loop, conn, size, buf)
            self.emit(ev="recv", n=n, bytes=count, t=time.monotonic(), trace=[])
            if count < size:
                return

    # -------------------------------------------------------------- sender
    async def send_message(self, cmd: dict) -> None:
        """One message on the persistent connection of its (src, dst, tos, mark)."""
        loop = asyncio.get_running_loop()
        delay = cmd.get("not_before", 0) - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        key = (cmd["src"], cmd["dst"], int(cmd["tos"]), int(cmd.get("mark", 0)))
        lock = self.locks.setdefault(key, asyncio.Lock())
        async with lock:
            sock = self.pool.get(key)
            try:
                if sock is None:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    self.tcp_socket(sock)
                    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, key[2])
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    if key[3]:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, key[3])
                    sock.bind((key[0], 0))
                    sock.setblocking(False)
                    await loop.sock_connect(sock, (key[1], self.port))
                    await loop.sock_sendall(sock, HEADER.pack(PERSIST, 0))
                    self.pool[key] = sock
                    self.emit(ev="conn", src=key[0], dst=key[1], tos=key[2])
                size, short = int(cmd["size"]), int(cmd.get("short", 0))
                await loop.sock_sendall(sock, HEADER.pack(int(cmd["n"]), size))
                await self._payload(loop, sock, size - short)
                if short:  # fault injection: the frame ends early
                    self.pool.pop(key, None)
                    sock.close()
            except OSError as exc:
                self.pool.pop(key, None)
                if sock is not None:
                    sock.close()
                self.emit(ev="error", msg=f"message {cmd['id']} from h{self.server} ({key[0]} -> {key[1]}): {exc}")

    async def send(self, cmd: dict) -> None:
        loop = asyncio.get_running_loop()
        fid = cmd["id"]
        delay = cmd.get("not_before", 0) - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            settings = self.settings[fid]
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, settings["tos"])
            self.tcp_socket(sock)
            if cmd.get("mark"):  # pins the flow to one spine (policy routing by mark)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, int(cmd["mark"]))
            if settings["pace"]:
                set_pacing(sock, settings["pace"])
            self.live[fid] = sock  # later changes go to the socket itself
            sock.bind((cmd["src"], 0))
            sock.setblocking(False)
            await loop.sock_connect(sock, (cmd["dst"], self.port))
            await loop.sock_sendall(sock, HEADER.pack(int(cmd["n"]), int(cmd["size"])))
            await self._payload(loop, sock, int(cmd["size"]) - int(cmd.get("short", 0)), self.gates[fid])
            sock.shutdown(socket.SHUT_WR)
            # keep the socket (and its pacing) until the receiver has everything
            while await loop.sock_recv(sock, 4096):
                pass
        except OSError as exc:
            self.emit(ev="error", msg=f"flow {fid} from h{self.server} ({cmd['src']} -> {cmd['dst']}): {exc}")
        finally:
            self.live.pop(fid, None)
            self.settings.pop(fid, None)
            self.gates.pop(fid, None)
            sock.close()

    async def _payload(self, loop, sock: socket.socket, nbytes: int, gate: asyncio.Event | None = None) -> None:
        """``nbytes`` zeros into non-blocking ``sock`` with ``sendfile``, handing over nothing while
        ``gate`` is clear (the flow is held). What ``loop.sock_sendfile`` does, with the gate between calls."""
        fd = sock.fileno()
        while nbytes > 0:
            if gate is not None and not gate.is_set():
                await gate.wait()
            try:
                nbytes -= os.sendfile(fd, self.zeros, 0, min(nbytes, ZERO_FILE_BYTES))
            except BlockingIOError:
                await _writable(loop, fd)

    def start_flow(self, cmd: dict) -> None:
        fid = cmd["id"]
        self.settings[fid] = {"pace": int(cmd.get("pace") or 0), "tos": int(cmd["tos"]), "n": int(cmd["n"])}
        self.gates[fid] = asyncio.Event()
        if not cmd.get("hold"):
            self.gates[fid].set()
        self.spawn(self.send(cmd))

    def set_rate(self, fid: str, pace: int, hold: bool) -> None:
        """A new pace for flow ``fid``, or (``hold``) no more payload until the next un-held rate."""
        gate = self.gates.get(fid)
        if gate is None:
            return  # the flow just ended
        sock = self.live.get(fid)
        if hold:
            if gate.is_set():
                gate.clear()
                queued = 0
                if sock is not None:
                    try:
                        queued = unsent_bytes(sock)
                    except OSError:
                        pass  # not connected yet: nothing queued
                self.emit(ev="held", n=self.settings[fid]["n"], bytes=queued)
            return
        self.settings[fid]["pace"] = pace
        gate.set()
        if sock is not None:
            try:
                set_pacing(sock, pace)
            except OSError:
                pass  # the flow just ended

    def set_tos(self, fid: str, tos: int) -> None:
        if fid in self.settings:
            self.settings[fid]["tos"] = tos
        sock = self.live.get(fid)
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            except OSError:
                pass  # the flow just ended

    async def wait_until(self, key: str, until: float) -> None:
        delay = until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        now = time.monotonic()
        # epoll timers wake up to ~1 ms late: report the deadline unless truly late
        self.emit(ev="waited", key=key, t=until if now - until < TIMER_SLACK else now)

    # ---------------------------------------------------------------- main
    async def main(self) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp_socket(listener)  # accepted connections inherit it
        listener.bind(("0.0.0.0", self.port))
        listener.listen(4096)
        listener.setblocking(False)
        reader, self.writer = await asyncio.open_unix_connection(self.control)
        self.spawn(self.accept_loop(listener))
        self.emit(ev="hello", server=self.server, pid=os.getpid(), tcp=congestion_of(listener))
        while True:
            line = await reader.readline()
            if not line:
                return 0  # the controller went away: stop
            cmd = json.loads(line)
            op = cmd["op"]
            if op == "wait":
                self.spawn(self.wait_until(cmd["key"], cmd["until"]))
            elif op == "send":
                if cmd.get("persist"):
                    self.spawn(self.send_message(cmd))
                else:
                    self.start_flow(cmd)
            elif op == "rate":
                self.set_rate(cmd["id"], int(cmd["pace"] or 0), bool(cmd.get("hold")))
            elif op == "tos":
                self.set_tos(cmd["id"], int(cmd["tos"]))
            elif op == "quit":
                await self.writer.drain()
                return 0
            await self.writer.drain()


async def _writable(loop, fd: int) -> None:
    """Until ``fd`` can take more data."""
    ready = loop.create_future()
    loop.add_writer(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_writer(fd)


async def _read_exact(loop, conn: socket.socket, nbytes: int) -> bytes:
    """Up to ``nbytes`` from ``conn`` (fewer only at the end of the stream)."""
    out = b""
    while len(out) < nbytes:
        chunk = await loop.sock_recv(conn, nbytes - len(out))
        if not chunk:
            break
        out += chunk
    return out


async def _count_exact(loop, conn: socket.socket, nbytes: int, buf: bytearray) -> int:
    """Read and count ``nbytes`` payload bytes from ``conn`` (fewer at the end of the stream)."""
    count = 0
    view = memoryview(buf)
    while count < nbytes:
        got = await loop.sock_recv_into(conn, view[: min(len(buf), nbytes - count)])
        if got == 0:
            break
        count += got
    return count


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m emulator.agent")
    p.add_argument("--server", type=int, required=True)
    p.add_argument("--control", required=True, help="the controller's Unix socket")
    p.add_argument("--port", type=int, default=DATA_PORT)
    p.add_argument("--trace", type=float, default=0.0, help="sample received bytes every TRACE seconds (0: off)")
    p.add_argument("--progress", type=float, default=0.0, help="report received bytes every PROGRESS s (0: off)")
    p.add_argument("--tcp", default="", help="congestion control of every socket (default: the namespace's)")
    args = p.parse_args(argv)
    agent = Agent(args.server, args.control, args.port, args.trace, args.progress, args.tcp)
    return asyncio.run(agent.main())


if __name__ == "__main__":
    sys.exit(main())
