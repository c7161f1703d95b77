"""SANCUS's skip-broadcast policies (seed 001 §4.3.4-§4.3.5, Alg. 4-6): which embedding broadcasts run.

SANCUS trains CAGNET's 1-D decomposition (§4.3.2, Alg. 3): in every layer
every GPU ``j`` broadcasts its block ``H_j`` of the previous layer's
embeddings. A GPU whose flag ``F(j)`` is STALE skips its broadcast and the
others use their cached copy (Skip-Broadcast, §4.3.4). The flags come from
one of three staleness bounds; this module turns each into a pattern
``broadcast[e, j]`` (epoch ``e``, GPU ``j``: True when ``j`` broadcasts its
forward blocks in epoch ``e``), which :func:`workloads.gnn_cagnet.gnn_cagnet`
reads to leave the skipped broadcasts out of the job.

``none`` (CAGNET)
    every GPU broadcasts in every epoch.
``epoch`` (SCS-E: Definition 1, Alg. 4)
    ``Ver - Ver(j) > eps_E`` sets ACTIVE: with every cache filled in epoch
    0, GPU ``j`` broadcasts in epochs ``0, eps+1, 2 (eps+1), ...`` (Fig.
    14(a), §5.3.3: "SCS-E1 ... broadcast the latest results in every 2
    iterations"). The seed's §5.3 calls this "Definition 2"; §4.3.5 numbers
    the epoch-fixed bound Definition 1, which Alg. 4 implements.
``adaptive`` (SCS-A: Definition 2, Alg. 5)
    a receiver finding ``Ver - Ver_i(j) > eps_A`` flags ``j`` ACTIVE and
    ``j`` broadcasts in the *next* epoch: Fig. 14(b), "In Epoch 9, the
    results H_{2,7} of worker 2 become too stale since 9 - 7 = 2 > 1, worker
    2 becomes ACTIVE and broadcasts updated results ... in Epoch 10". Every
    receiver gets every broadcast, so ``Ver_i(j)`` is the same for all ``i``.
    The check runs at the end of an epoch (Alg. 3 calls STALE after the
    layer's computation). ``versions`` gives each GPU's starting version
    (Fig. 14(b)'s workers start staggered); by default all broadcast in
    epoch 0, and the pattern is then periodic with period ``eps + 2``.
``trace`` (SCS-H: Definition 3, Alg. 6)
    ``||H_i - H~_i|| > eps_H`` needs the embeddings' values, which railbed
    does not compute; the decisions come from a trace given as input:
    epochs separated by ``,``, one character per GPU, ``1`` broadcast and
    ``0`` skip (``"1111,0101,1010"``), repeated when the run has more
    epochs than the trace. Epoch 0 must broadcast everything (no cache yet).

Where the paper is silent, our choices: the flag of GPU ``j`` applies to
all its forward blocks of the epoch (every layer's ``H_j^{(l-1)}``, the
input features included: Alg. 3 loops over every layer alike, and the
cache sizes of Table 6 include the features); the backward broadcasts of
gradients and the weight all-reduce are never skipped (Alg. 3's backward
pass broadcasts ``delta`` unconditionally; skipping gradients is SkipG, a
different baseline). The first epoch broadcasts everything under every
policy: the caches start empty.
"""

from __future__ import annotations

import numpy as np

from railbed.errors import SpecError

POLICIES = ("none", "epoch", "adaptive", "trace")


def epoch_fixed(epochs: int, gpus: int, eps: int) -> np.ndarray:
    """SCS-E (Alg. 4): every GPU broadcasts in epochs ``0, eps+1, 2(eps+1), ...``."""
    e = np.arange(epochs)[:, None]
    return np.broadcast_to(e % (eps + 1) == 0, (epochs, gpus)).copy()


def epoch_adaptive(epochs: int, gpus: int, eps: int, versions: list[int] | None = None) -> np.ndarray:
    """SCS-A (Alg. 5 with Fig. 14(b)'s timing): at the end of epoch ``e`` every GPU ``j`` with
    ``e - Ver(j) > eps`` is flagged and broadcasts in epoch ``e + 1``. ``versions``: the epoch
    of each GPU's cached block before epoch 0 (negative: earlier), default: broadcast in epoch 0."""
    out = np.zeros((epochs, gpus), dtype=bool)
    if versions is None:
        out[0] = True
        ver = np.zeros(gpus, dtype=np.int64)
    else:
        ver = np.asarray(versions, dtype=np.int64)
    flagged = np.zeros(gpus, dtype=bool)
    for e in range(epochs):
        out[e] |= flagged
        ver[out[e]] = e
        flagged = e - ver > eps
    return out


def parse_trace(trace: str, gpus: int, field: str = "trace") -> np.ndarray:
    """A skip trace (module docstring) as ``broadcast[e, j]`` for the trace's own epochs."""
    if not isinstance(trace, str) or not trace:
        raise SpecError(field, "expected epochs of '0'/'1' per GPU separated by ',', e.g. '1111,0101'")
    rows = trace.split(",")
    for k, row in enumerate(rows):
        if len(row) != gpus or set(row) - {"0", "1"}:
            raise SpecError(field, f"epoch {k} of the trace: expected {gpus} characters '0'/'1', got {row[:40]!r}")
    out = np.array([[c == "1" for c in row] for row in rows], dtype=bool)
    if not out[0].all():
        raise SpecError(field, "the first epoch must broadcast on every GPU (nothing is cached yet)")
    return out


def skip_pattern(
    policy: str, epochs: int, gpus: int, eps: int = 1, trace: str | None = None, versions: list[int] | None = None
) -> np.ndarray:
    """``broadcast[e, j]`` of ``policy`` (see the module docstring); errors name the argument."""
    if policy not in POLICIES:
        raise SpecError("staleness", f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    if isinstance(eps, bool) or not isinstance(eps, int) or eps < 0:
        raise SpecError("epsilon", f"must be a whole number >= 0, got {eps!r}")
    if policy == "none":
        return np.ones((epochs, gpus), dtype=bool)
    if policy == "epoch":
        return epoch_fixed(epochs, gpus, eps)
    if policy == "adaptive":
        if versions is not None and len(versions) != gpus:
            raise SpecError("versions", f"expected one starting version per GPU ({gpus}), got {len(versions)}")
        return epoch_adaptive(epochs, gpus, eps, versions)
    if trace is None:
        raise SpecError("trace", "policy 'trace' (SCS-H) needs a skip trace")
    rows = parse_trace(trace, gpus)
    return rows[np.arange(epochs) % len(rows)]
