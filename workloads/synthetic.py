"""Synthetic traffic patterns for experiments and tests.

``all_to_all``: ``n`` endpoints, each sends ``size`` bytes to every other one
after a compute task of ``compute`` s (an EP all-to-all coflow, seed 004
chapter 5, without the expert computation); ``iterations`` rounds, each
round's compute waiting for the previous round's flows into that endpoint.
"""

from __future__ import annotations

from railbed.errors import SpecError
from railbed.job import Job


def all_to_all(n: int = 4, size: int = 4 << 20, compute: float = 0.0, iterations: int = 1) -> Job:
    """``n`` endpoints (unpinned: the scheduler places them), each sending ``size`` bytes to every other.

    Per round, endpoint *i* computes ``compute`` s, then sends to the others (an EP coflow
    ``i<round>.a2a``); ``iterations`` rounds, a round's compute waiting for the flows into it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise SpecError("n", f"must be an integer >= 2, got {n!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise SpecError("iterations", f"must be an integer >= 1, got {iterations!r}")
    job = Job(f"all-to-all-{n}")
    for i in range(n):
        job.endpoint(f"e{i}")
    inbound: dict[int, list[str]] = {i: [] for i in range(n)}
    for it in range(iterations):
        nxt: dict[int, list[str]] = {i: [] for i in range(n)}
        for i in range(n):
            t = job.task(f"i{it}.c{i}", f"e{i}", compute, inbound[i], iteration=it)
            for j in range(n):
                if j != i:
                    f = job.flow(
                        f"i{it}.f{i}-{j}", f"e{i}", f"e{j}", size, [t],
                        iteration=it, coflow=f"i{it}.a2a", coflow_type="EP",
                    )  # fmt: skip
                    nxt[j].append(f)
        inbound = nxt
    return job.validate()


def item_estimate(n=4, iterations=1, **_) -> int:
    return iterations * n * n
