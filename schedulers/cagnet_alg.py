"""CAGNET's broadcast as a pipelined ring (seed 001 §4.3.2), pure: the hops of one broadcast.

SANCUS runs CAGNET's 1-D algorithm "with the help of collective operations
such as ring-based pipelined Broadcast and AllReduce" (§4.3.2), and a
stale GPU is cut out of "the ring-based communication topology" (§4.3.4,
Fig. 13). A ring broadcast from root ``r`` over ``ring`` (the GPUs in ring
order) is a chain ``r -> ring[k+1] -> ...`` around the ring: each GPU
forwards what it receives to the next, in ``chunks`` pieces so that the
hops work at once (NCCL's pipelined broadcast). Hop ``k`` (the ``k``-th
link of the chain) sends chunk ``c`` after it received chunk ``c`` (hop
``k - 1``) and after it sent chunk ``c - 1`` (one send at a time per link);
the piece carries the bytes of every GPU after it on the chain (a
multicast hop, :class:`railbed.scheduler.SubFlow`'s ``carries``).

Where the paper is silent, our choices: the ring is the GPUs in rank
order (rank ``g`` on server ``g // gpus_per_server``: the ring crosses the
network once per server boundary, as NCCL's rings do), and ``chunks`` (8
by default) pieces of equal size (the last smaller); a skipped (STALE) root
makes no broadcast, so the ring of every other root still passes through
it (§4.3.4: "GPU 2 is still preserved in the graph").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RingHop:
    """Chunk ``chunk`` from ring position ``k`` to ``k + 1``: ``size`` bytes from GPU ``src`` to
    ``dst``, carrying ``size`` bytes for each GPU in ``serves``; ``deps`` index earlier hops."""

    k: int
    chunk: int
    src: int
    dst: int
    size: int
    serves: tuple[int, ...]
    deps: tuple[int, ...]


def chain(root: int, ring: list[int]) -> list[int]:
    """The ring read from ``root`` on: the order a broadcast from ``root`` visits the GPUs."""
    at = ring.index(root)
    return ring[at:] + ring[:at]


def chunk_sizes(size: int, chunks: int) -> list[int]:
    """``size`` bytes in at most ``chunks`` pieces of ``ceil(size / chunks)`` (the last smaller)."""
    if size <= 0:
        return []
    piece = -(-size // max(1, chunks))
    return [min(piece, size - c * piece) for c in range(-(-size // piece))]


def ring_broadcast(root: int, ring: list[int], size: int, chunks: int = 8) -> list[RingHop]:
    """The hops of a pipelined ring broadcast of ``size`` bytes from ``root`` (module docstring),
    in an order where every hop comes after its deps."""
    order = chain(root, ring)
    pieces = chunk_sizes(size, chunks)
    hops: list[RingHop] = []
    index: dict[tuple[int, int], int] = {}
    for c, piece in enumerate(pieces):
        for k in range(len(order) - 1):
            deps = [index[(k - 1, c)]] if k > 0 else []
            if c > 0:
                deps.append(index[(k, c - 1)])
            index[(k, c)] = len(hops)
            hops.append(RingHop(k, c, order[k], order[k + 1], piece, tuple(order[k + 1 :]), tuple(deps)))
    return hops


def delivered(hops: list[RingHop], gpus: int) -> list[int]:
    """Bytes each GPU receives for itself over ``hops`` (a broadcast delivers its size to every
    GPU but the root)."""
    out = [0] * gpus
    for h in hops:
        out[h.dst] += h.size
    return out
