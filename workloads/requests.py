"""Request streams of LEO's case studies (seed 004, chapter 6: §6.2.1's application abstractions, §6.4).

A requester (server 0) sends open-loop requests to a responder (server 1).
Each request has a **type** (§6.2.1) with:

* the **paths** it may take (``cpu-cpu``, ``cpu-acc``, ``acc-cpu``, ``acc-acc``:
  requester device, then responder device);
* its **round trips**: ``(out bytes, back bytes)`` each; a KVS GET is two (an
  8 B key, then the 64 B value), all on the one path chosen for the request;
* the **functions** it runs: on the requester's device before the first
  message leaves, on the responder's device when the first message arrives;
  their times per device come from the servers' datapath (``compute`` table
  of the cluster file, :class:`hwmodels.leo.DatapathSpec`);
* a **dependency**: ``none``, ``addr`` (requests on the same address) or
  ``msg`` (chunks of one message); dependent requests stay on one path (the
  schedulers in :mod:`schedulers.leo` keep them there).

In the job, request *i* arrives with task ``a<i>`` (a wait of its arrival
time on the ``clock`` endpoint) and is one chain of flows, ``q<i>.<k>o``
(out) then ``q<i>.<k>b`` (back) per round trip *k*. Every flow offers the
request's allowed paths as :class:`~railbed.job.PathOption` s named after
them, with legs on the requester and the responder (device to NIC, NIC to
device). Flow tags: ``request`` (i), ``rtype``, ``rt`` (k), ``dir``
(``o``/``b``), ``last`` (the request's last flow), ``dep`` (its dependency
key or ``None``).

Arrivals are open-loop at ``load`` requests per second (model time):
``poisson`` (exponential gaps) or ``constant``, from ``seed``.

Presets (§6.4): ``kvs-c`` (YCSB-C: GETs only), ``kvs-b`` (YCSB-B: 95 % GETs,
5 % PUTs, PUTs only on the responder's CPU, §6.4.2), ``dfs`` (1 MB files in
256 KB chunks, compressed at the requester to 51.8 % and decompressed at the
responder; the four chunks of a file are one message), ``ebs-64k`` and
``ebs-4k`` (reads: a 64 B command out, 64 KB or 4 KB back, Solar's lookups
at the responder), ``dml`` (a two-host all-reduce of ``size`` bytes: half
out, reduced at the responder, half back). Where the thesis is silent we
chose: YCSB's key popularity is Zipf with exponent 1 over ``keys`` (log-
uniform ranks) instead of YCSB's 0.99; a PUT is two round trips (key, then
the 64 B value); the back message of a KVS index read is 8 B; EBS's command
is 64 B; DFS's acknowledgement is 8 B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from railbed.errors import SpecError
from railbed.job import Job, Leg, Location, PathOption

PATHS = ("cpu-cpu", "cpu-acc", "acc-cpu", "acc-acc")
DEPENDENCIES = ("none", "addr", "msg")
ARRIVALS = ("poisson", "constant")


@dataclass(frozen=True)
class RequestType:
    """One request type of §6.2.1's application abstractions."""

    name: str
    share: float  # fraction of requests of this type
    round_trips: tuple[tuple[int, int], ...]  # (out bytes, back bytes)
    paths: tuple[str, ...] = PATHS
    req_work: str | None = None  # function on the requester's device before sending
    resp_work: str | None = None  # function on the responder's device on the first arrival
    dependency: str = "none"
    group: int = 1  # msg: consecutive requests of this type that form one message


def presets(size: int = 1 << 20) -> dict[str, tuple[RequestType, ...]]:
    """§6.4's workloads (``size``: the DML all-reduce's bytes)."""
    chunk = 256 << 10
    half = max(1, size // 2)
    return {
        "kvs-c": (RequestType("get", 1.0, ((8, 8), (8, 64)), resp_work="kvs", dependency="addr"),),
        "kvs-b": (
            RequestType("get", 0.95, ((8, 8), (8, 64)), resp_work="kvs", dependency="addr"),
            RequestType("put", 0.05, ((8, 8), (64, 8)), ("cpu-cpu", "acc-cpu"), resp_work="kvs", dependency="addr"),
        ),
        "dfs": (
            RequestType(
                "chunk",
                1.0,
                ((round(chunk * 0.518), 8),),
                req_work="compress",
                resp_work="decompress",
                dependency="msg",
                group=4,
            ),
        ),  # fmt: skip
        "ebs-64k": (RequestType("read", 1.0, ((64, 64 << 10),), resp_work="ebs"),),
        "ebs-4k": (RequestType("read", 1.0, ((64, 4 << 10),), resp_work="ebs"),),
        "dml": (RequestType("allreduce", 1.0, ((half, half),), resp_work="reduce"),),
    }


def _check(value, name: str, ok: bool, want: str) -> None:
    if not ok:
        raise SpecError(name, f"must be {want}, got {value!r:.60}")


def arrivals(n: int, load: float, kind: str, seed: int) -> np.ndarray:
    """``n`` open-loop arrival times (s) at ``load`` requests/s: Poisson or constant gaps."""
    if kind == "constant":
        return np.arange(n) / load
    gaps = np.random.default_rng(seed).exponential(1.0 / load, n)
    return np.cumsum(gaps) - gaps[0]  # the first request at 0


def request_stream(
    types: tuple[RequestType, ...],
    load: float,
    n: int,
    arrival: str = "poisson",
    seed: int = 0,
    keys: int = 20_000_000,
    name: str = "requests",
    times: list[float] | None = None,
) -> Job:
    """The job of ``n`` requests of ``types`` (mixed by their shares) at ``load`` requests/s, or at
    the given arrival ``times`` (the mechanism tests' hand-made streams)."""
    rng = np.random.default_rng([seed, 1])
    at = arrivals(n, load, arrival, seed) if times is None else np.asarray(times, dtype=float)
    shares = np.array([t.share for t in types], dtype=float)
    kinds = rng.choice(len(types), size=n, p=shares / shares.sum())
    ranks = np.floor(np.exp(rng.random(n) * np.log(keys))).astype(np.int64)  # Zipf(1) ranks in 1..keys
    job = Job(name, capacity={"cpu": max(1, n)})
    job.endpoint("clock", pin=Location(0, "cpu"), role="clock")
    job.endpoint("client", pin=Location(0, "cpu"), role="requester")
    job.endpoint("server", pin=Location(1, "cpu"), role="responder")
    seen: dict[int, int] = {}
    for i in range(n):
        rt = types[int(kinds[i])]
        if rt.dependency == "addr":
            dep = f"a{ranks[i]}"
        elif rt.dependency == "msg":
            count = seen.get(int(kinds[i]), 0)
            seen[int(kinds[i])] = count + 1
            dep = f"m{rt.name}{count // rt.group}"
        else:
            dep = None
        prev = job.task(f"a{i}", "clock", float(at[i]), tags={"request": i})
        for k, (out, back) in enumerate(rt.round_trips):
            last = k == len(rt.round_trips) - 1
            for way, size in (("o", out), ("b", back)):
                opts = [_option(p, way, rt if k == 0 else None) for p in rt.paths]
                src, dst = ("client", "server") if way == "o" else ("server", "client")
                tags = {"request": i, "rtype": rt.name, "rt": k, "dir": way, "last": last and way == "b", "dep": dep}
                prev = job.flow(f"q{i}.{k}{way}", src, dst, size, [prev], options=opts, coflow=f"q{i}", tags=tags)
    return job.validate()


def _option(path: str, way: str, first: RequestType | None) -> PathOption:
    """The legs of one path for an out (requester -> responder) or back message; the first
    out message carries the request's functions."""
    req, resp = path.split("-")
    if way == "o":
        work = (first.req_work, first.resp_work) if first else (None, None)
        return PathOption(path, Leg(req, "nic", work=work[0]), Leg("nic", resp, work=work[1]))
    return PathOption(path, Leg(resp, "nic"), Leg("nic", req))


def request_count(load: float, requests: int | None = None, duration: float | None = None) -> int:
    """How many requests a stream has: ``requests``, or ``ceil(load * duration)`` (at least 1)
    when a ``duration`` of arrivals (model seconds) is given instead; 2000 when neither is."""
    if requests is not None and duration is not None:
        raise SpecError("duration", "give requests or duration, not both")
    if duration is None:
        return 2000 if requests is None else requests
    _check(duration, "duration", isinstance(duration, (int, float)) and 0 < duration < float("inf"), "positive")
    return max(1, math.ceil(load * duration))


def requests(
    preset: str = "kvs-c",
    load: float = 1e6,
    requests: int | None = None,
    arrival: str = "poisson",
    seed: int = 0,
    size: int = 1 << 20,
    keys: int = 20_000_000,
    duration: float | None = None,
) -> Job:
    """LEO's request stream ``preset`` (see the module docstring) at ``load`` requests/s (model):
    ``requests`` requests, or as many as arrive in ``duration`` (model seconds: a sweep over
    loads then runs every load for the same model time)."""
    table = presets(size)
    _check(preset, "preset", preset in table, f"one of {', '.join(table)}")
    _check(load, "load", isinstance(load, (int, float)) and 0 < load < float("inf"), "a positive rate (requests/s)")
    requests = request_count(load, requests, duration)
    _check(requests, "requests", isinstance(requests, int) and 1 <= requests <= 1_000_000, "in 1..1000000")
    _check(arrival, "arrival", arrival in ARRIVALS, f"one of {', '.join(ARRIVALS)}")
    _check(size, "size", isinstance(size, int) and size >= 2, "at least 2 bytes")
    _check(keys, "keys", isinstance(keys, int) and keys >= 1, "at least 1")
    return request_stream(table[preset], float(load), requests, arrival, seed, keys, name=f"{preset}-{load:g}rps")


def item_estimate(preset="kvs-c", requests=None, load=1e6, duration=None, **_) -> int:
    """requests' items: per request its arrival task and two flows per round trip."""
    types = presets().get(preset, ())
    trips = max((len(t.round_trips) for t in types), default=1)
    count = requests if duration is None else load * duration  # both given: the generator refuses it
    return int(count if count is not None else 2000) * (1 + 2 * trips)
