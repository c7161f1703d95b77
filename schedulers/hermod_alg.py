"""Hermod's pure parts (seed 004, chapter 5): the priority order, its 6-bit DSCP code, EP matching.

Nothing here knows about a run; :mod:`schedulers.hermod` is the thin class
that applies these functions to a job.

**Model factors** (§5.2.2): every coflow is named by its microbatch id
(MID), coflow type (CType: EP, PP, DP) and layer id (LID).

**Order** (§5.3.1, Tables 5.3-5.4): MID, then CType, then LID, lower MID
and LID first, EP & PP before DP (1F1B); interleaved 1F1B: EP > PP > DP.
The DP exception (§5.3.1, "Conflict between MID and LID"): a DP coflow is
produced after the last microbatch's backward pass, so its gradient
reduction (all-reduce, or ZeRO-2's reduce-scatter) carries the highest MID
of its iteration (the generator labels it so); a ZeRO-2 parameter
all-gather is consumed by the next iteration's first microbatch, and "DP
coflows correspond to microbatch-1 in the next iteration", so it is given
MID 0. The paper's sentence "if DP coflows are present, LID takes
precedence over MID" contradicts its own example (a layer-2 DP coflow is
put before a layer-1 EP coflow of microbatch 2); we follow the example and
the stated reason (the all-gather is microbatch 0 of the next iteration).
Between the all-gather and microbatch 0's EP/PP coflows the paper calls
the CType/LID conflict impossible (§5.3.1), so CType before LID is kept.

**DSCP** (§5.4): "the top three bits for microbatchID, one bit for coflow
type, and two bits for layerID". A switch serves ``dscp >> 3`` (the MID
bits) as 8 strict-priority queues, class 7 first (``tc_policies.plan``),
so every field is written as a *level*: higher = served first.
Where the paper is silent we chose:

* MID: level ``7 - min(mid, 7)``. Clamping is monotone (it never inverts
  two microbatches); microbatches from 7 on share the lowest level. (A
  modulo would wrap and invert neighbours inside the 1F1B window.)
* CType: 1 for EP and PP, 0 for DP (1F1B). Interleaved 1F1B needs three
  levels in one bit: EP is 1, PP and DP share 0 (PP is off the critical
  path there, §5.3.1); the hosts still order PP before DP by the full key.
* LID: 12-96 layers into 2 bits. Conflicts that LID settles are between
  coflows of one GPU (its own EP, DP and outgoing PP coflows share its
  NIC), so the level is the layer's *rank among the layers the sending GPU
  holds*, in quarters: ``3 - (4 * rank) // count``. Quarters of the whole
  model would give all layers of a pipeline stage one value (24 layers on
  8 stages: 3 layers per stage, all in one quarter), losing the order
  exactly where it matters.

The code is a monotone quantization of the key (``key(a) < key(b)`` implies
``dscp(a) >= dscp(b)``) while MIDs are below 8, with one exception in
interleaved 1F1B: PP and DP of one MID share the CType bit, so there LID
decides at the switches (tested over all such factor combinations). From
MID 7 on the MID levels tie and LID decides. The hosts order by the full
key (:mod:`schedulers.hermod`), so these ties only reach the switches.

**Hermod as run here** (``hermod``; the reading above is ``hermod-literal``).
Two changes, each from the thesis's text:

* *Which iteration consumes a DP coflow.* A DP coflow's data is used in
  the next iteration ("EP and PP coflows are consumed in the subsequent
  layer, whereas DP coflows are used in the next iteration", Case II), so
  its key is that of the next iteration's microbatch 0, type DP:
  ``(iteration + 1, 0, DP, LID)``; an EP or PP coflow's is ``(iteration,
  MID, CType, LID)``; keys compare iteration first. Against its own
  iteration's traffic a DP coflow (reduce-scatter and the ZeRO-2
  all-gather alike) is thus last, as "DP coflows always carry the highest
  MID value" (Table 5.4, MID + CType); against the next iteration's it
  stands as "microbatch-1" (1-based) there: after microbatch 0's EP and PP
  (Case III: "coflows from earlier layers should be prioritized,
  regardless of coflow type", and the CType/LID conflict cannot occur),
  before microbatch 1's (Table 5.4, MID + LID: "prioritizing them
  prevents blocking microbatch-1 in the subsequent iteration"). The literal
  reading gives the ZeRO-2 all-gather MID 0 with no iteration, so it
  outranks the current iteration's cooldown (its last microbatches'
  backward EP and PP on the other stages), whose data is consumed first.
  EP and PP coflows of two iterations never meet: stage 0 starts iteration
  i + 1 only after its own last backward of iteration i, which waits for
  every later stage's.
* *The switches' 8 queues.* §5.4 puts MID in the top three bits; a switch
  with 8 queues (the SN3700 of §5.5.1; railbed's ``dscp >> 3``, DiffServ's
  class selector) then serves CType and LID inside one queue, so PP and
  DP of one microbatch (Case II, where CType is the factor that decides)
  share a queue and a DP flow already on the wire takes half the link
  from a PP flow. The thesis says the order is "enforced at both endhosts
  and switches" (§5.4) but not how 64 codes meet 8 queues. Here the top
  three bits are the *queue level*: 0 for DP (the lowest MID of every
  iteration it meets first, see above), ``7 - min(position, 6)`` for EP
  and PP, where the position is the MID (1F1B) or ``2 MID + (PP ? 1 : 0)``
  (interleaved 1F1B: EP > PP inside a MID). The low three bits keep CType
  and LID as §5.4 writes them. Order kept at the switches: earlier
  microbatches' EP/PP first up to position 6, every EP/PP before DP. Lost
  there (the hosts still keep it): a DP coflow before the next iteration's
  microbatch >= 1 (the thesis calls this case "exceedingly rare": "DP
  coflows typically complete before microbatch-2 begins"), positions from
  6 on, and LID. Strict priority at the sending NIC is the host-side
  preemption: a DP flow in flight yields its NIC to a PP flow at once.

**EP matching** (§5.3.2, Alg. 3): repeatedly take a maximum-weight matching
of the residual transmission matrix (the thesis: Hungarian), subtract its
smallest positive matched entry from every matched entry, and make that a
sub-phase. The thesis does not say which matching where several are
optimal; we take scipy's ``linear_sum_assignment``'s (shortest augmenting
paths), and the loop runs in numba with a solver that follows scipy's order
step for step (:func:`_phases_kernel`; :func:`phases_reference` calls scipy,
and a test holds the two equal on tie-heavy matrices). Line 10 of Alg. 3 reads ``min({T_ij | T_ij > 0})``
and leaves ``matching_values`` (line 9) unused; we take the minimum over
the matched positive entries (line 9's values), which is what makes every
sub-phase carry equal portions; the minimum over the whole matrix would
only cut phases finer. Bytes are integers, so the sub-phases carry the
matrix exactly.

*Whose matrix* (the thesis: ``T`` over the EP group's n workers, "each
sub-phase forming a matching within the EP group"). Its stated purpose is
"to schedule all flows without incurring incast", and incast happens at a
port. The production cluster of §5.1.2 has one NIC per GPU, where a
matching of GPUs is one of ports; the testbed of §5.5.1 has two NICs per
eight GPUs, where it is not: a GPU matching on a stage spread over two
servers still sends up to two flows of each EP group into one NIC, and its
sub-phases do not pack the NICs' time (Mixtral-8x7B, testbed, strided
grid: the sum of the sub-phases' longest per-NIC load is 5.3 % above the
busiest NIC's bytes, while on the GPUs' matrix the sub-phases meet that
matrix's bound exactly). :func:`port_matching` takes the matrix between
the ports the flows leave and enter: GPUs as the thesis writes it
(``hermod-literal``), NICs for ``hermod`` (``match: nic``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit
from scipy.optimize import linear_sum_assignment

CTYPES = ("EP", "PP", "DP")
RANK_1F1B = {"EP": 0, "PP": 0, "DP": 1}  # Table 5.3, Case II: EP & PP > DP
RANK_INTERLEAVED = {"EP": 0, "PP": 1, "DP": 2}  # §5.3.1, interleaved 1F1B: EP > PP > DP


@dataclass(frozen=True)
class Factors:
    """A coflow's model factors (§5.2.2). ``mid`` is the effective MID (see module doc)."""

    mid: int
    ctype: str
    lid: int

    def __post_init__(self) -> None:
        if self.ctype not in CTYPES:
            raise ValueError(f"coflow type must be one of {CTYPES}, got {self.ctype!r}")
        if self.mid < 0 or self.lid < 0:
            raise ValueError(f"MID and LID must be >= 0, got {self.mid}, {self.lid}")


def factors_of(coflow_type: str | None, microbatch: int | None, layer: int | None, dp_phase: str | None) -> Factors:
    """Factors of a flow from its job attributes. ``dp_phase`` ``"ag"`` (ZeRO-2 parameter
    all-gather) is microbatch 0 of the next iteration; other DP flows keep the microbatch the
    generator gave them (the last). Flows without a type (the EP metadata all-gather) count
    as EP: they open an EP coflow (§5.3.2)."""
    ctype = coflow_type if coflow_type in CTYPES else "EP"
    mid = 0 if (ctype == "DP" and dp_phase == "ag") else (microbatch or 0)
    return Factors(mid, ctype, layer or 0)


def priority_key(f: Factors, interleaved: bool = False) -> tuple[int, int, int]:
    """Sort key, smaller first: MID > CType > LID (Tables 5.3-5.4)."""
    ranks = RANK_INTERLEAVED if interleaved else RANK_1F1B
    return (f.mid, ranks[f.ctype], f.lid)


def consumer_key(
    coflow_type: str | None, iteration: int | None, microbatch: int | None, layer: int | None, interleaved: bool = False
) -> tuple[int, int, int, int]:
    """``hermod``'s sort key, smaller first: ``(iteration, MID, CType, LID)`` of the microbatch
    that consumes the flow's data; a DP flow's is the next iteration's microbatch 0 (module
    docstring, "Hermod as run here"). Flows without a type (the EP metadata) count as EP."""
    ctype = coflow_type if coflow_type in CTYPES else "EP"
    rank = (RANK_INTERLEAVED if interleaved else RANK_1F1B)[ctype]
    it, lid = iteration or 0, layer or 0
    if ctype == "DP":
        return (it + 1, 0, rank, lid)
    return (it, microbatch or 0, rank, lid)


# ----------------------------------------------------------------- DSCP codec


def encode(mid_level: int, ctype_level: int, lid_level: int) -> int:
    """The 6-bit DSCP: 3 bits MID level, 1 bit CType level, 2 bits LID level (§5.4)."""
    for name, v, hi in (("mid_level", mid_level, 7), ("ctype_level", ctype_level, 1), ("lid_level", lid_level, 3)):
        if not 0 <= v <= hi:
            raise ValueError(f"{name} must be in 0..{hi}, got {v}")
    return mid_level << 3 | ctype_level << 2 | lid_level


def decode(dscp: int) -> tuple[int, int, int]:
    """(MID level, CType level, LID level) of a DSCP (0..63)."""
    if not 0 <= dscp <= 63:
        raise ValueError(f"DSCP must be in 0..63, got {dscp}")
    return dscp >> 3, dscp >> 2 & 1, dscp & 3


def mid_level(mid: int) -> int:
    return 7 - min(mid, 7)


def ctype_level(ctype: str, interleaved: bool = False) -> int:
    return 1 if ctype == "EP" or (ctype == "PP" and not interleaved) else 0


def lid_level(rank: int, count: int) -> int:
    """Quarter of the sending GPU's layers the layer falls in, first quarter highest."""
    if not 0 <= rank < count:
        raise ValueError(f"layer rank {rank} outside 0..{count - 1}")
    return 3 - (4 * rank) // count


def dscp_of(f: Factors, lid_rank: int, lid_count: int, interleaved: bool = False) -> int:
    """The DSCP Hermod marks a flow with: the quantized :func:`priority_key`."""
    return encode(mid_level(f.mid), ctype_level(f.ctype, interleaved), lid_level(lid_rank, lid_count))


def queue_level(mid: int, ctype: str, interleaved: bool = False) -> int:
    """``hermod``'s top three bits, the switch queue: 0 for DP, ``7 - min(position, 6)`` for EP
    and PP, position = MID (1F1B) or ``2 MID + (PP ? 1 : 0)`` (interleaved)."""
    if ctype not in CTYPES:
        raise ValueError(f"coflow type must be one of {CTYPES}, got {ctype!r}")
    if mid < 0:
        raise ValueError(f"MID must be >= 0, got {mid}")
    if ctype == "DP":
        return 0
    position = 2 * mid + (ctype == "PP") if interleaved else mid
    return 7 - min(position, 6)


def queued_dscp(f: Factors, lid_rank: int, lid_count: int, interleaved: bool = False) -> int:
    """The DSCP ``hermod`` marks a flow with: queue level, then CType and LID as §5.4 writes them."""
    return encode(queue_level(f.mid, f.ctype, interleaved), ctype_level(f.ctype, interleaved),
                  lid_level(lid_rank, lid_count))  # fmt: skip


# ------------------------------------------------------------ EP matching


Phase = list[tuple[int, int, int]]  # (sender, receiver, bytes)


def _checked_matrix(matrix) -> np.ndarray:
    t = np.array(matrix, dtype=np.int64)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or (t < 0).any() or np.diagonal(t).any():
        raise ValueError("expected a square matrix of byte counts >= 0 with a zero diagonal")
    return t


def _phases(matrix: np.ndarray) -> Iterator[tuple[list[int], list[int], list[int], int]]:
    """Alg. 3's loop on a copy of ``matrix``: per sub-phase the matching (senders, receivers), the
    residual bytes of its pairs before the phase (0: a pair the matching takes that has no bytes
    left, not part of the phase) and the portion every other pair carries. The loop runs in
    :func:`_phases_kernel`; :func:`phases_reference` is the same loop over scipy's solver."""
    cols, got, weight = _phases_kernel(np.ascontiguousarray(matrix, np.int64))
    rows = list(range(matrix.shape[0]))
    for c, g, w in zip(cols.tolist(), got.tolist(), weight.tolist()):
        yield rows, c, g, w


def phases_reference(matrix: np.ndarray) -> Iterator[tuple[list[int], list[int], list[int], int]]:
    """:func:`_phases`' twin: the loop in Python, each matching from scipy's
    ``linear_sum_assignment`` (``tests/test_hermod_alg.py`` holds the two equal)."""
    n = matrix.shape[1]
    t = matrix.astype(np.float64)  # what the Hungarian solver reads (it works in doubles)
    flat = t.reshape(-1)
    res = matrix.reshape(-1).tolist()  # the residual, exact; a matching is at most n entries: Python
    left = sum(1 for v in res if v)  # entries > 0 (all are >= 0)
    while left:
        rows, cols = linear_sum_assignment(t, maximize=True)
        rl, cl = rows.tolist(), cols.tolist()
        at = [r * n + c for r, c in zip(rl, cl)]
        got = [res[x] for x in at]
        weight = min(v for v in got if v) if 0 in got else min(got)
        for x, v in zip(at, got):
            if v:
                res[x] = flat[x] = v - weight
        left -= got.count(weight)
        yield rl, cl, got, weight


@njit(cache=True)
def _phases_kernel(matrix):  # pragma: no cover - numba
    """Alg. 3's loop over an n x n matrix of byte counts (int64): per sub-phase, row by row, the
    matched column and the residual before the phase, and the phase's portion (the smallest positive
    matched residual, subtracted from every positive matched entry), until the matrix is zero. At
    most one phase per positive entry (each phase zeroes one at least)."""
    n = matrix.shape[0]
    res = matrix.copy()
    left = 0
    for i in range(n):
        for j in range(n):
            if res[i, j] > 0:
                left += 1
    cols = np.empty((left, n), np.int64)
    got = np.empty((left, n), np.int64)
    weight = np.empty(left, np.int64)
    cost = np.empty((n, n), np.float64)
    col4row = np.empty(n, np.int64)
    scratch = (np.empty(n), np.empty(n), np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64),
               np.empty(n, np.bool_), np.empty(n, np.bool_), np.empty(n, np.int64))  # fmt: skip
    p = 0
    while left > 0:
        for i in range(n):
            for j in range(n):
                cost[i, j] = -np.float64(res[i, j])  # maximize: scipy negates the matrix
        _min_cost_matching(cost, col4row, *scratch)
        w = -1
        for i in range(n):
            g = res[i, col4row[i]]
            cols[p, i], got[p, i] = col4row[i], g
            if g > 0 and (w < 0 or g < w):
                w = g
        for i in range(n):
            g = got[p, i]
            if g > 0:
                res[i, col4row[i]] = g - w
                if g == w:
                    left -= 1
        weight[p] = w
        p += 1
    return cols[:p], got[:p], weight[:p]


@njit(cache=True)
def _min_cost_matching(cost, col4row, u, v, spc, path, row4col, sr, sc, remaining):  # pragma: no cover - numba
    """A minimum-cost perfect matching of the square ``cost`` into ``col4row`` (row i's column):
    the shortest augmenting path method of Crouse (IEEE TAES 52(4), 2016, the pseudocode of
    pp. 1685-1686), in the order scipy's ``linear_sum_assignment`` follows it: rows augmented in
    order, columns scanned from the last, a tie in path cost going to a free column, the dual
    variables updated after each row. Where several matchings are optimal it returns scipy's
    (``tests/test_hermod_alg.py``, on random and Alg.-3 matrices with many ties); the rest
    (u, v, ...) is scratch of length n. scipy's call costs about 15 us on an 8 x 8 matrix, most
    of it the call; Alg. 3 makes one per sub-phase, about 56 per 8 x 8 coflow."""
    n = cost.shape[0]
    u[:] = 0.0
    v[:] = 0.0
    path[:] = -1
    col4row[:] = -1
    row4col[:] = -1
    for cur in range(n):
        min_val = 0.0
        left = n
        for k in range(n):
            remaining[k] = n - k - 1
        sr[:] = False
        sc[:] = False
        spc[:] = np.inf
        sink = -1
        i = cur
        while sink == -1:
            index = -1
            lowest = np.inf
            sr[i] = True
            for k in range(left):
                j = remaining[k]
                r = min_val + cost[i, j] - u[i] - v[j]
                if r < spc[j]:
                    path[j] = i
                    spc[j] = r
                if spc[j] < lowest or (spc[j] == lowest and row4col[j] == -1):
                    lowest = spc[j]
                    index = k
            min_val = lowest
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            sc[j] = True
            left -= 1
            remaining[index] = remaining[left]
        u[cur] += min_val
        for i in range(n):
            if sr[i] and i != cur:
                u[i] += min_val - spc[col4row[i]]
        for j in range(n):
            if sc[j]:
                v[j] -= min_val - spc[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            j, col4row[i] = col4row[i], j
            if i == cur:
                break


def _memo_phases(memo: dict[bytes, tuple], matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_phases_kernel` of ``matrix`` (per sub-phase, row by row, the matched columns and the
    residuals before it; the portions), kept in ``memo`` by the matrix's bytes (a pure function of
    them)."""
    key = matrix.tobytes()
    got = memo.get(key)
    if got is None:
        got = memo[key] = _phases_kernel(matrix)
    return got


def matching_phases(matrix: Sequence[Sequence[int]] | np.ndarray) -> list[Phase]:
    """Alg. 3: the sub-phases of an EP transmission matrix (bytes ``matrix[i][j]`` from i to j).

    Each phase is a matching (no sender or receiver twice); per phase every
    sub-flow carries the same portion, the phase's weight. The diagonal
    (a GPU's tokens for its own experts) is not network traffic and must be 0."""
    return [
        [(i, j, w) for i, j, v in zip(rows, cols, got) if v] for rows, cols, got, w in _phases(_checked_matrix(matrix))
    ]


Piece = tuple[int, int, tuple[tuple[int, int], ...]]  # (phase, bytes, deps as (flow index, phase))


class Pieces(NamedTuple):
    """:func:`port_matching_arrays`' answer: piece ``x`` carries ``size[x]`` bytes of flow
    ``flow[x]`` in sub-phase ``phase[x]`` and waits for pieces ``dep[dep_ptr[x]:dep_ptr[x + 1]]``.
    Pieces are listed by flow, each flow's in phase order."""

    flow: np.ndarray  # int64
    phase: np.ndarray  # int64
    size: np.ndarray  # int64
    dep_ptr: np.ndarray  # int64, one more than pieces
    dep: np.ndarray  # int64


def port_matching_arrays(src: Sequence[Hashable], dst: Sequence[Hashable], size: Sequence[int]) -> Pieces:
    """Alg. 3 over the ports that carry an EP coflow, and the order its sub-phases keep.

    Flow ``n`` goes from port ``src[n]`` to ``dst[n]`` with ``size[n]`` bytes. The
    transmission matrix is built between ports (the bytes of every flow from one port to
    another, summed) and cut into sub-phases (:func:`matching_phases`); a sub-phase's portion
    of a port pair is filled from that pair's flows in the given order (a flow is split only
    where a portion ends inside it). A piece waits for every piece of the last earlier
    sub-phase of its source port and of its destination port, source's first (no global
    barrier: a pair starts as soon as both ports are free; the workers derive the same
    sequence, §5.3.2).

    With one GPU per port this is Alg. 3 on the GPUs' matrix as the thesis writes it
    (``T`` over the EP group's n workers); with GPUs sharing a NIC, the port is the NIC
    (``hermod``'s ``match: nic``, see :mod:`schedulers.hermod`). :func:`port_matching` is the
    same answer as lists; :func:`port_matching_batch` that of many coflows at once."""
    return port_matching_batch([(src, dst, size)])[0]


def port_matching_batch(coflows: Sequence[tuple[Sequence[Hashable], Sequence[Hashable], Sequence[int]]]):
    """:func:`port_matching_arrays` of every coflow ``(src, dst, size)``, as one :class:`Pieces`
    over their flows numbered in order (coflow after coflow; a piece's dependencies are pieces
    of its own coflow), and per coflow the index of its first piece (one more entry: the
    total). The sub-phases are found coflow by coflow; the pieces' order and dependencies
    with numpy over all of them."""
    # coflows with a flow per port pair (a GPU per NIC): a portion is a piece; their sub-phases'
    # entries are kept in flat lists (no list per sub-phase left for the garbage collector) and
    # placed with numpy at the end
    e_rows: list[np.ndarray] = []  # per such coflow, its sub-phases' entries row by row
    e_cols: list[np.ndarray] = []
    e_vals: list[np.ndarray] = []
    per_phase_l: list[np.ndarray] = []  # per sub-phase: its entries and portion
    e_weight: list[np.ndarray] = []
    e_phases: list[int] = []  # per such coflow: its sub-phases, ports, first port and first pair
    e_ports, e_port_base, e_pair_base = [], [], []
    pair_flow: list[int] = []  # those coflows' port pairs (flat, per coflow) -> flow
    p_flow, p_phase, p_size = [], [], []  # shared ports: pieces, in the order made
    g_send, g_recv, g_start = [], [], []  # and their port pairs' portions (pieces made together)
    flow_base = port_base = 0
    memo: dict[bytes, tuple] = {}  # matrix -> its sub-phases: coflows repeat (about 45 % of a
    # batch's at 512 GPUs, Mixtral under hermod); an n x n int64 matrix's bytes give n back
    for src, dst, size in coflows:
        if any(b < 0 or s == d for s, d, b in zip(src, dst, size)):
            raise ValueError("expected flows of >= 0 bytes between two different ports")
        ports = sorted(set(src) | set(dst))
        index = {p: k for k, p in enumerate(ports)}
        n_ports = len(ports)
        si, di = [index[s] for s in src], [index[d] for d in dst]
        matrix = np.zeros((n_ports, n_ports), dtype=np.int64)
        np.add.at(matrix, (np.asarray(si, np.intp), np.asarray(di, np.intp)), np.asarray(size, np.int64).reshape(-1))
        pairs = [i * n_ports + j for i, j in zip(si, di)]
        if len(set(pairs)) == len(pairs):  # one flow per port pair
            e_ports.append(n_ports)
            e_port_base.append(port_base)
            e_pair_base.append(len(pair_flow))
            pair_flow += [-1] * (n_ports * n_ports)
            for n, x in enumerate(pairs):
                pair_flow[e_pair_base[-1] + x] = flow_base + n
            cols, got, w = _memo_phases(memo, matrix)
            e_rows.append(np.tile(np.arange(n_ports, dtype=np.int64), len(w)))
            e_cols.append(cols.reshape(-1))
            e_vals.append(got.reshape(-1))
            per_phase_l.append(np.full(len(w), n_ports, np.int64))
            e_weight.append(w)
            e_phases.append(len(w))
        else:
            by_pair: dict[tuple[int, int], list[int]] = {}
            for n, (i, j) in enumerate(zip(si, di)):
                by_pair.setdefault((i, j), []).append(n)
            left = list(size)
            cols, got, weight = _memo_phases(memo, matrix)
            for k, (c, g, portion) in enumerate(zip(cols.tolist(), got.tolist(), weight.tolist())):
                for i, (j, v) in enumerate(zip(c, g)):
                    if not v:
                        continue
                    g_send.append(port_base + i)
                    g_recv.append(port_base + j)
                    g_start.append(len(p_flow))
                    rest = portion
                    for n in by_pair[(i, j)]:
                        take = min(rest, left[n])
                        if take:
                            left[n] -= take
                            rest -= take
                            p_flow.append(flow_base + n)
                            p_phase.append(k)
                            p_size.append(take)
                        if not rest:
                            break
        flow_base += len(src)
        port_base += n_ports

    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    # the entries of those sub-phases: their coflow's ports and pairs, phase within the coflow
    per_phase, e_weight_a = cat(per_phase_l), cat(e_weight)
    rows, cols, vals = cat(e_rows), cat(e_cols), cat(e_vals)
    e_phases_a = np.array(e_phases, np.int64)
    cof = np.repeat(np.repeat(np.arange(len(e_phases)), e_phases_a), per_phase)  # entry -> its coflow
    local = np.arange(len(e_weight_a)) - np.repeat(np.cumsum(e_phases_a) - e_phases_a, e_phases_a)
    keep = vals > 0
    n_ports_of = np.array(e_ports, np.int64)[cof]
    e_flow = np.array(pair_flow, np.int64)[(np.array(e_pair_base, np.int64)[cof] + rows * n_ports_of + cols)[keep]]
    base = np.array(e_port_base, np.int64)[cof]
    fast = int(keep.sum())
    flow = np.concatenate([e_flow, np.array(p_flow, np.int64)])
    phase = np.concatenate([np.repeat(local, per_phase)[keep], np.array(p_phase, np.int64)])
    size = np.concatenate([np.repeat(e_weight_a, per_phase)[keep], np.array(p_size, np.int64)])
    send = np.concatenate([(base + rows)[keep], np.array(g_send, np.int64)])
    recv = np.concatenate([(base + cols)[keep], np.array(g_recv, np.int64)])
    start = np.concatenate([np.arange(fast), fast + np.array(g_start, np.int64), [len(flow)]])
    # a portion waits for the last earlier portion of its source port, then of its destination
    # port (once if that is the same portion); a sub-phase is a matching, so "earlier" is "made before"
    count = np.diff(start)
    send, recv = _previous(send), _previous(recv)
    recv[recv == send] = -1
    na = np.where(send >= 0, count[send], 0)
    nb = np.where(recv >= 0, count[recv], 0)
    of = np.repeat(np.arange(len(count)), count)  # piece -> its portion
    lens = (na + nb)[of]
    total = int(lens.sum())
    owner = np.repeat(of, lens)
    at = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)  # place in the piece's deps
    first = na[owner]
    flat = np.where(at < first, start[send[owner]] + at, start[recv[owner]] + at - first)
    # made phase by phase; listed by flow (a stable sort keeps each flow's pieces in phase order)
    order = np.argsort(flow, kind="stable")
    new = np.empty(len(order), np.int64)
    new[order] = np.arange(len(order))
    old_ptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=old_ptr[1:])
    lens = lens[order]
    dep_ptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=dep_ptr[1:])
    at = np.repeat(old_ptr[:-1][order] - dep_ptr[:-1], lens) + np.arange(total)
    flow = flow[order]
    bases = np.cumsum([0] + [len(src) for src, _, _ in coflows])
    return Pieces(flow, phase[order], size[order], dep_ptr, new[flat[at]]), np.searchsorted(flow, bases)


def _previous(ports: np.ndarray) -> np.ndarray:
    """Per entry, the index of the last earlier entry with the same port (-1: none)."""
    order = np.argsort(ports, kind="stable")
    prev = np.full(len(ports), -1, np.int64)
    same = ports[order][1:] == ports[order][:-1]
    prev[order[1:][same]] = order[:-1][same]
    return prev


def port_matching(flows: Sequence[tuple[Hashable, Hashable, int]]) -> list[list[Piece]]:
    """:func:`port_matching_arrays` as lists: ``flows[n] = (source port, destination port,
    bytes)``; per flow its pieces ``(phase, bytes, deps)``, a dep named ``(flow index, phase)``."""
    pc = port_matching_arrays([s for s, _, _ in flows], [d for _, d, _ in flows], [b for _, _, b in flows])
    fl, ph, size, ptr, dep = pc.flow.tolist(), pc.phase.tolist(), pc.size.tolist(), pc.dep_ptr.tolist(), pc.dep.tolist()
    pieces: list[list[Piece]] = [[] for _ in flows]
    for x, n in enumerate(fl):
        pieces[n].append((ph[x], size[x], tuple((fl[d], ph[d]) for d in dep[ptr[x] : ptr[x + 1]])))
    return pieces


def phases_time(phases: list[Phase]) -> int:
    """Bytes-time of the phases run one after another (each as long as its largest sub-flow)."""
    return sum(max(b for _, _, b in p) for p in phases)
