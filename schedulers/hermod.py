"""Hermod (seed 004, chapter 5) and the baselines it is measured against.

Thin classes over :mod:`schedulers.hermod_alg`; jobs come from
:mod:`workloads.moe` (flows carry ``coflow_type``, ``microbatch``,
``layer``, and tags ``dp_phase``, ``pass``, ``metadata``).

``hermod`` (§5.3-5.4):

* **inter-coflow**: every flow is marked with a 6-bit DSCP whose top three
  bits are its switch queue (:func:`~schedulers.hermod_alg.queued_dscp`:
  DP below every EP and PP coflow, those by microbatch), so the switches'
  and the NICs' 8 strict-priority queues (``dscp >> 3``) keep MID and
  CType; at the hosts (``host_wait: queue``, the default) a flow waits while
  a flow of higher priority *in its own switch queue* (full key,
  :func:`~schedulers.hermod_alg.consumer_key`: iteration, MID, CType, LID,
  a DP flow as the next iteration's microbatch 0) is active on its source
  NIC or ready there and not itself waiting for its EP coflow ("each
  scheduler instance maintains a priority queue for coflows", §5.4): the
  host keeps the order the 8 queues cannot (LID, microbatches from 6 on,
  DP against DP). Flows of lower queues are not held: they transmit
  "underneath" at whatever the higher ones leave (§5.3.2, Fig. 5.6: "the
  PP coflow finishes simultaneously with the EP coflow, with DP coflows
  transmitting underneath"), and the NIC's strict-priority queues give a
  higher flow the link at once, also against a lower one already on the
  wire. ``host_wait: nic`` holds behind any higher flow on the NIC (the
  earlier reading, ``hermod-literal``'s), ``off`` never holds. Why the
  code and the key differ from §5.4's literal reading:
  :mod:`schedulers.hermod_alg`, "Hermod as run here"; the literal reading
  is ``hermod-literal`` (MID in the top bits,
  :func:`~schedulers.hermod_alg.dscp_of`; ZeRO-2's all-gather at MID 0;
  :func:`~schedulers.hermod_alg.priority_key`; the NIC-wide wait; Alg. 3
  over the GPUs).
* **rates**: no caps, line rate (§5.3.2, "Line-rate transmission is
  desirable"); a double binary tree all-reduce's flows (tag ``tree``) at
  half the source NIC's rate each, "each tree allocated half of the
  line-rate bandwidth" (§5.3.2).
* **intra-coflow**: an EP all-to-all's flows between servers (flows inside
  a server take NVLink, not the network, and start at once) are held until all are ready
  (the metadata all-gather has told every GPU the matrix, §5.3.2), then
  split into Alg. 3's sub-phases
  (:func:`~schedulers.hermod_alg.port_matching`): matchings of the NICs the
  flows leave and enter (``match: nic``; the thesis's matrix is the GPUs',
  ``match: gpu``, which is the same where every GPU has its own NIC: why
  the NICs, :mod:`schedulers.hermod_alg`, "Whose matrix"); each sub-flow
  waits for the previous sub-phase's sub-flows of its source NIC and of its
  destination NIC. Sub-flows start when their deps are done, without the
  host-side wait.

Each class writes its decisions once, as ``rule`` (a :class:`~railbed.scheduler.Rule`, a pure
function of the flow; Hermod's host wait: key = bar = its priority, queued; Lina's: key 0 for
backward EP, bar 1 for DP) and no ``on_ready``: the Dispatcher reads the rules on every
backend (:class:`railbed.rulebook.RuleBook`), the compact engine (:mod:`simulator.rules`)
in its kernel. The EP flows Alg. 3 splits (between servers) are gated by coflow, and
``gate_split`` makes their sub-flows.

``metadata`` (what the thesis leaves open): the EP metadata all-gather (512 bytes per GPU,
the token counts Alg. 3 reads, §5.3.2) goes in the top switch queue and never waits at its
host (``top``, the default), or is ordered as the EP coflow it opens (``ep``,
``hermod-literal``'s). §5.3.2 measures it as negligible ("~0.4ms vs. ~5s" of an iteration);
ordered as EP it waits behind every earlier microbatch's EP transfers on its NIC, a ring of
7 such waits before each dispatch (docs/hermod.md, "The metadata all-gather").

``subphases: flat`` (not the thesis; a probe): Alg. 3's sub-flows in the lowest class
(DSCP 0, no MID order between EP coflows once split), every other flow as ``hermod``.

``backward: reverse`` (not the thesis; a probe of its rule): §5.3.1 derives "earlier
microbatches first" from the forward pass (Case I: "earlier microbatches block more
computations on the critical path") and generalizes it "across all coflows within the same
iteration". In 1F1B's cooldown the chain left on the critical path is the *last*
microbatch's backward pass, which that order serves last. The option orders backward EP and
PP flows by microbatches counted from the last (DSCP and host key alike); forward flows and
DP keep the thesis's order. docs/hermod.md has what it measures.

Ablations (§5.5.2, Fig. 5.11): ``hermod-inter`` (priorities only) and
``hermod-intra`` (matching only, DSCP 0, no waits); ``hermod-literal``
(above).

Baselines (§5.5.1, Table 5.2):

* ``megatron``: Megatron-LM's default, FIFO (DSCP 0, nothing waits).
* ``lina``: EP all-to-alls of the backward pass before DP at the end hosts
  only (Lina works at the hosts, §5.1.3 Limitation #1): a DP flow waits
  while a backward EP flow is active on its source NIC; DP flows already
  sent finish (Lina pauses at its partitions' boundaries, here a ring
  step's chunk). No DSCP.
* ``dp-first``, ``pp-first``, ``ep-first``: naive cluster-wide priority
  (§5.1.3, Table 5.2): that coflow type's flows DSCP 56 (class 7), the
  rest 0; no host waits.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from railbed.errors import SpecError
from railbed.job import Flow
from railbed.scheduler import Rule, Scheduler, Split, SplitArrays, default_placement
from schedulers.hermod_alg import (
    CTYPES,
    Factors,
    consumer_key,
    dscp_of,
    factors_of,
    port_matching_batch,
    priority_key,
    queued_dscp,
)


def flow_factors(flow: Flow) -> Factors:
    return factors_of(flow.coflow_type, flow.microbatch, flow.layer, flow.tags.get("dp_phase"))


def is_ep_transfer(flow: Flow) -> bool:
    """An EP all-to-all flow (not the metadata all-gather before it)."""
    return flow.coflow_type == "EP" and not flow.tags.get("metadata") and flow.coflow is not None


HOST_WAITS = ("queue", "nic", "off")
KEY_BITS = 15  # per field of a priority key packed by key_number: 4 fields fit an int64


def key_number(key: tuple[int, ...]) -> int:
    """A priority key (up to 4 fields, each below 2**15) as one integer of the same order among
    keys of one length, for :class:`Rule`."""
    if len(key) > 4 or not all(0 <= k < 1 << KEY_BITS for k in key):
        raise ValueError(f"priority key {key} has more than 4 fields or a field outside 0..2**15-1")
    n = 0
    for k in key:
        n = n << KEY_BITS | k
    return n


def split_coflow(flows: list[Flow], dscp: dict[str, int], port: dict[str, object]) -> Split:
    """Alg. 3 on an EP coflow's flows over the ports ``port[endpoint]`` they leave and enter
    (:func:`~schedulers.hermod_alg.port_matching_arrays`): sub-flows per sub-phase, chained per
    port; :func:`split_arrays` of the one coflow as a :class:`Split`."""
    return split_arrays([flows], dscp, port).split(flows)


def split_arrays(coflows: list[list[Flow]], dscp: dict[str, int], port: dict[str, object]) -> SplitArrays:
    """:func:`split_coflow` of every coflow, in array form, as one
    :class:`~railbed.scheduler.SplitArrays` over their flows in order
    (:func:`~schedulers.hermod_alg.port_matching_batch`): piece ``k`` of flow ``f`` (sub-phase
    ``k``) is sub-flow ``f.id + ".h<k>"`` with ``dscp[f.id]``, waiting for its ports' previous pieces."""
    batch = [([port[f.src] for f in fl], [port[f.dst] for f in fl], [f.size or 0 for f in fl]) for fl in coflows]
    pc, _ = port_matching_batch(batch)
    marks = np.array([dscp[f.id] for fl in coflows for f in fl], np.int64)
    phases = int(pc.phase.max()) + 1 if len(pc.phase) else 0
    return SplitArrays(pc.flow, pc.size, pc.phase, phase_suffixes(phases), pc.dep_ptr, pc.dep, marks[pc.flow])


_SUFFIXES: list[tuple[str, ...]] = [()]


def phase_suffixes(n: int) -> tuple[str, ...]:
    """``(".h0", ".h1", ...)``, at least ``n`` of them: sub-phases' id suffixes (one shared
    tuple, grown by doubling; a :class:`~railbed.scheduler.SplitArrays` may list unused ones)."""
    if len(_SUFFIXES[0]) < n:
        _SUFFIXES[0] = tuple(f".h{k}" for k in range(max(n, 2 * len(_SUFFIXES[0]), 64)))
    return _SUFFIXES[0]


MATCHES = ("nic", "gpu")
METADATA = ("top", "ep")
TOP_DSCP = 7 << 3  # the top switch queue (class 7)
BACKWARDS = ("mid", "reverse")
SUBPHASES = ("ordered", "flat")


class Hermod(Scheduler):
    """Model factor-driven priorities (``inter``) and EP matching (``intra``); see module doc.
    ``interleaved``: the job runs interleaved 1F1B (EP > PP > DP, §5.3.1). ``host_wait``:
    ``"queue"`` (default) a flow waits at its host behind a higher-priority flow of its own
    switch queue (``dscp >> 3``) only, ``"nic"`` behind any on its NIC (the hosts'
    priority queue read as a strict gate, ``hermod-literal``), ``"off"`` never (the DSCP
    classes alone). ``match``: Alg. 3 over the NICs' matrix (``"nic"``) or the GPUs'
    (``"gpu"``, the thesis's, ``hermod-literal``). ``backward``: ``"mid"`` (the thesis) or
    ``"reverse"`` (backward EP/PP flows last microbatch first, a probe). ``subphases``:
    Alg. 3's sub-flows marked as their coflow (``"ordered"``) or all DSCP 0 (``"flat"``, a
    probe). ``metadata``: the EP metadata all-gather in the top queue without host waits
    (``"top"``) or ordered as EP (``"ep"``); see the module doc."""

    name = "hermod"

    def __init__(
        self,
        interleaved: bool = False,
        inter: bool = True,
        intra: bool = True,
        host_wait: str = "queue",
        literal: bool = False,
        match: str = "nic",
        backward: str = "mid",
        subphases: str = "ordered",
        metadata: str = "top",
    ) -> None:
        if host_wait not in HOST_WAITS:
            raise SpecError("host_wait", f"must be one of {', '.join(HOST_WAITS)}, got {host_wait!r}")
        if match not in MATCHES:
            raise SpecError("match", f"must be one of {', '.join(MATCHES)}, got {match!r}")
        if backward not in BACKWARDS or (literal and backward != "mid"):
            raise SpecError("backward", f"must be one of {', '.join(BACKWARDS)} (mid with literal), got {backward!r}")
        if subphases not in SUBPHASES:
            raise SpecError("subphases", f"must be one of {', '.join(SUBPHASES)}, got {subphases!r}")
        if metadata not in METADATA:
            raise SpecError("metadata", f"must be one of {', '.join(METADATA)}, got {metadata!r}")
        self.interleaved, self.inter, self.intra, self.literal = interleaved, inter, intra, literal
        self.match, self.backward, self.subphases = match, backward, subphases
        self.top_metadata = inter and metadata == "top"
        self.microbatches = 1
        self.host_wait = host_wait if inter else "off"
        self.hold_by_class = self.host_wait == "queue"
        self.layers_at: dict[str, list[int]] = {}  # endpoint -> the layers of the flows it sends
        self.members: dict[str, list[str]] = {}  # EP coflow -> its flows between servers
        self.matched: set[str] = set()  # those flows
        self.keys: dict[str, tuple[int, int, int]] = {}
        self._held_layers: dict[str, tuple[int, ...]] = {}  # layers_at as tuples, for rule()'s memo
        self._rules: dict[tuple, tuple[int, int]] = {}

    def place(self, job, cluster):
        placement = default_placement(job, cluster)
        layers = defaultdict(set)
        members = defaultdict(list)
        for f in job.flows:
            layers[f.src].add(f.layer or 0)
            if is_ep_transfer(f) and placement[f.src].server != placement[f.dst].server:
                members[f.coflow].append(f.id)  # flows inside a server do not cross the network
        self.layers_at = {e: sorted(ls) for e, ls in layers.items()}
        self.microbatches = 1 + max((f.microbatch or 0 for f in job.flows), default=0)
        self._held_layers = {e: tuple(ls) for e, ls in self.layers_at.items()}
        self._rules = {}
        self.members = dict(members)
        self.matched = {i for ids in members.values() for i in ids}
        return placement

    def key(self, flow: Flow) -> tuple[int, int, int, int]:
        """The host queue's order: :func:`~schedulers.hermod_alg.consumer_key`, or (literal)
        ``(0,) +`` :func:`~schedulers.hermod_alg.priority_key`."""
        k = self.keys.get(flow.id)
        if k is None:
            if self.literal:
                k = (0, *priority_key(flow_factors(flow), self.interleaved))
            else:
                k = consumer_key(flow.coflow_type, flow.iteration, self.mid(flow), flow.layer, self.interleaved)
            self.keys[flow.id] = k
        return k

    def dscp(self, flow: Flow) -> int:
        if not self.inter:
            return 0
        held = self.layers_at.get(flow.src) or [flow.layer or 0]
        rank = held.index(flow.layer or 0) if (flow.layer or 0) in held else 0
        if self.literal:
            return dscp_of(flow_factors(flow), rank, len(held), self.interleaved)
        ctype = flow.coflow_type if flow.coflow_type in CTYPES else "EP"
        return queued_dscp(Factors(self.mid(flow), ctype, flow.layer or 0), rank, len(held), self.interleaved)

    def mid(self, flow: Flow) -> int:
        """The MID that orders the flow: its microbatch, or with ``backward: reverse`` for a
        backward EP or PP flow the microbatches counted from the last (module doc)."""
        m = flow.microbatch or 0
        if self.backward == "reverse" and flow.coflow_type in ("EP", "PP") and flow.tags.get("pass") == "B":
            return self.microbatches - 1 - m
        return m

    @staticmethod
    def _rate(flow: Flow, src, cluster) -> float | None:
        """Line rate (no cap), except a double binary tree's flows: half the source NIC's each (§5.3.2)."""
        if "tree" not in flow.tags:
            return None
        return cluster.servers[src.server].nic_rates[src.nic] / 2

    def rule(self, flow: Flow, placement, cluster) -> Rule:
        """The decision for a flow as a :class:`Rule`: the DSCP and rate above, and the host-side
        wait (a flow waits for a better key held or active on its source NIC, with
        ``hold_by_class`` in its switch queue) as ``key = bar``, ``queued``. EP flows that
        Alg. 3 splits (between servers) are gated by their coflow (``Rule.gate``): held until
        the whole coflow is, then :meth:`gate_split`."""
        if self.intra and flow.id in self.matched:
            return Rule(key=self._marks(flow)[1], gate=flow.coflow)
        if self.top_metadata and flow.tags.get("metadata"):  # never waits; others see its key
            return Rule(TOP_DSCP, key=key_number(self.key(flow)))
        rate = self._rate(flow, placement[flow.src], cluster) if "tree" in flow.tags else None
        got = self._marks(flow)
        if self.host_wait != "off":
            return Rule(got[0], rate, key=got[1], bar=got[1], queued=True)
        return Rule(got[0], rate)

    def _marks(self, flow: Flow) -> tuple[int, int]:
        """The flow's DSCP and :func:`key_number` of its key, memoized after ``place`` on what
        they depend on alone (:func:`flow_factors`, the iteration, the source's layers)."""
        memo = (
            flow.coflow_type,
            flow.iteration,
            flow.microbatch,
            flow.layer,
            flow.tags.get("dp_phase"),
            flow.tags.get("pass"),
            self._held_layers.get(flow.src),
        )
        got = self._rules.get(memo)
        if got is None:
            got = self._rules[memo] = (self.dscp(flow), key_number(self.key(flow)))
        return got

    def gate_split(self, flows, placement, cluster) -> Split:
        """Alg. 3 (§5.3.2) on a gated EP coflow (its flows between servers, in job order, once
        all are ready): a pure function of the coflow's flows (their sizes, ends and DSCPs)."""
        flows = list(flows)
        return self._split_arrays([flows], placement.__getitem__).split(flows)

    def gate_split_arrays(self, gates, placement, cluster) -> SplitArrays:
        """:meth:`gate_split` of every gate at once as :class:`~railbed.scheduler.SplitArrays`
        (the compact engine's form)."""
        return self._split_arrays([list(g) for g in gates], placement.__getitem__)

    def _split_arrays(self, coflows: list[list[Flow]], location) -> SplitArrays:
        """Alg. 3 on each coflow over its NICs (``match: nic``) or GPUs (``gpu``); ``location``:
        endpoint -> its server and NIC."""
        flows = [f for fl in coflows for f in fl]
        ends = {e for f in flows for e in (f.src, f.dst)}
        if self.match == "gpu":
            port = {e: e for e in ends}
        else:
            port = {e: (location(e).server, location(e).nic) for e in ends}
        flat = self.subphases == "flat"
        return split_arrays(coflows, {f.id: 0 if flat else self._marks(f)[0] for f in flows}, port)


class HermodLiteral(Hermod):
    """§5.3.1, §5.3.2 and §5.4 as written (module doc of :mod:`schedulers.hermod_alg`): MID in
    the top three bits (the switch queue), the ZeRO-2 all-gather at MID 0, keys without the
    iteration, Alg. 3 on the GPUs' matrix."""

    name = "hermod-literal"

    def __init__(self, interleaved: bool = False, host_wait: str = "nic", match: str = "gpu") -> None:
        super().__init__(interleaved, host_wait=host_wait, literal=True, match=match, metadata="ep")


class HermodInter(Hermod):
    """Ablation: inter-coflow priorities only (§5.5.2, Fig. 5.11)."""

    name = "hermod-inter"

    def __init__(self, interleaved: bool = False) -> None:
        super().__init__(interleaved, inter=True, intra=False)


class HermodIntra(Hermod):
    """Ablation: intra-coflow EP matching only (§5.5.2, Fig. 5.11)."""

    name = "hermod-intra"

    def __init__(self, interleaved: bool = False) -> None:
        super().__init__(interleaved, inter=False, intra=True)


class Megatron(Scheduler):
    """Megatron-LM's default: FIFO, DSCP 0 (§5.5.1)."""

    name = "megatron"


class Lina(Scheduler):
    """Backward-pass EP before DP at the end hosts (§5.1.3, [100]); see module doc."""

    name = "lina"

    def rule(self, flow, placement, cluster) -> Rule:
        """A DP flow waits while a backward EP flow is active on its NIC: key 0 for those, bar 1 for DP."""
        backward_ep = flow.coflow_type == "EP" and flow.tags.get("pass") == "B"
        return Rule(key=0 if backward_ep else 1, bar=1 if flow.coflow_type == "DP" else 0)


class TypeFirst(Scheduler):
    """One coflow type in DSCP 56 (the highest class), all else 0 (Table 5.2)."""

    name = "type-first"
    first = "DP"

    def rule(self, flow, placement, cluster) -> Rule:
        return Rule(dscp=56 if flow.coflow_type == self.first else 0)


class DpFirst(TypeFirst):
    name, first = "dp-first", "DP"


class PpFirst(TypeFirst):
    name, first = "pp-first", "PP"


class EpFirst(TypeFirst):
    name, first = "ep-first", "EP"


SCHEDULERS = (Hermod, HermodLiteral, HermodInter, HermodIntra, Megatron, Lina, DpFirst, PpFirst, EpFirst)
