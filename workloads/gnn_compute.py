"""Task times of sampling-based GNN training from the hardware and the model's shapes (DGTP, seed 000).

The paper gives no task times; it states the hardware (§VI-A: "one 8-core
Intel E5-1660 CPU, two GTX 1080Ti GPUs and 48GB DDR4 RAM" per server) and
the model (GraphSAGE, three layers of hidden size 256, Table II's
fan-outs, mini-batch 2000). Every task here is the time its device needs
for the bytes and operations the sampled mini-batch implies, at
``efficiency`` of the device's peak (:data:`TESTBED`).

Peaks (public specifications, not in the paper)
    CPU: the 8-core E5-1660 is v3 (DDR4-2133) or v4 (DDR4-2400), both
    four memory channels; we take v4, 76.8 GB/s (v3: 68 GB/s, inside the
    efficiency sweep). A task of ``c`` cores gets ``c / 8`` of it.
    GPU: GTX 1080 Ti, 11.34 TFLOP/s FP32, 484 GB/s; PCIe 3.0 x16 to the
    host, 15.75 GB/s.

Work (per iteration; counts from the fan-out sampler of :mod:`workloads.gnn_graph`)
    store (sampling on its partition and gathering features, seed 000
    §III-A: "a graph store server samples among L-hop neighbors ... and
    sends the node/edge features back"): per request, one 64-byte cache
    line per sampled edge and per touched node (neighbour list and its
    offset), and ``ceil64(4 F)`` bytes read and written per touched node
    (the feature row into the reply), on ``store_cores`` cores;
    sampler (stitching the replies into sub-graphs, §III-A "forms
    sub-graphs"): the received bytes read and written once, a cache line
    per edge for the block index, on its 2 cores (§VI-A's demand);
    worker: the mini-batch over PCIe, then GraphSAGE forward and backward
    (backward = 2 x forward): per layer ``l`` with ``D_l`` destination
    nodes, ``E_l`` edges, ``a -> b`` features, ``4 D_l a b`` FLOPs (self and
    neighbour weights) and ``E_l a`` for the mean, against
    ``4 (E_l a + D_l (a + b))`` bytes, the slower of the two (roofline);
    PS: Adam over ``P`` parameters after summing ``W`` gradients, ``4 P (W
    + 6)`` bytes on one core.

Layers from hops
    The sampler starts at the seeds with the output layer's fan-out (DGL's
    ``MultiLayerNeighborSampler`` samples from the last layer back, and
    DGTP's fan-outs follow DGL's training script, §VI-A), so hop ``h``
    feeds layer ``l = L - h``: ``D_l`` = the nodes of hops ``0..h``, and
    ``E_l`` = hop ``h``'s sampled edges scaled by ``D_l`` over the nodes
    expanded at hop ``h`` (DGL samples for every destination node of a
    layer, the sampler expands only newly seen ones).

Efficiency (unstated; ``efficiency``, default 0.3)
    One fraction of peak for every device: irregular kernels (random
    gathers, sparse aggregation) reach around a tenth of peak and bulk
    copies most of it; 0.3 is a round value between, and the DGTP
    scenarios sweep it (0.1 .. 1) as the "compute speed" parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LINE = 64  # bytes of a cache line
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Hardware:
    """Peak rates of one server (see the module docstring for the figures' sources)."""

    cpu_cores: int
    cpu_bytes_per_s: float
    gpu_flops: float
    gpu_bytes_per_s: float
    pcie_bytes_per_s: float

    def core_rate(self, cores: float, efficiency: float) -> float:
        """Bytes/s of random-access memory work a task of ``cores`` cores does."""
        return self.cpu_bytes_per_s * min(cores, self.cpu_cores) / self.cpu_cores * efficiency


TESTBED = Hardware(8, 76.8e9, 11.34e12, 484e9, 15.75e9)  # E5-1660 v4, GTX 1080 Ti, PCIe 3.0 x16


@dataclass(frozen=True)
class Batch:
    """What one sampled sub-graph touched: per partition (nodes, edges) and per hop (new nodes,
    sampled edges), hop 0 at the seeds."""

    nodes: np.ndarray
    edges: np.ndarray
    hop_nodes: np.ndarray
    hop_edges: np.ndarray


def ceil_line(n: float) -> float:
    return LINE * math.ceil(n / LINE)


def store_seconds(nodes: float, edges: float, features: int, cores: float, efficiency: float, hw=TESTBED) -> float:
    """A store serving requests that touched ``nodes`` of its nodes and sampled ``edges`` of its edges."""
    work = LINE * (edges + nodes) + 2 * ceil_line(FLOAT_BYTES * features) * nodes
    return work / hw.core_rate(cores, efficiency)


def sampler_seconds(received: float, edges: float, efficiency: float, cores: float = 2, hw=TESTBED) -> float:
    """A sampler stitching ``received`` bytes with ``edges`` sampled edges into sub-graphs."""
    return (2 * received + LINE * edges) / hw.core_rate(cores, efficiency)


def layer_sizes(batch: Batch) -> list[tuple[float, float]]:
    """(D_l, E_l) for layers l = 1..L (input first): see "Layers from hops"."""
    hops = len(batch.hop_edges)
    out = []
    for layer in range(1, hops + 1):
        h = hops - layer
        dst = float(batch.hop_nodes[: h + 1].sum())
        expanded = float(batch.hop_nodes[h])
        out.append((dst, batch.hop_edges[h] * dst / expanded if expanded else 0.0))
    return out


def dims(features: int, hidden: int, layers: int, classes: int) -> list[tuple[int, int]]:
    d = [features] + [hidden] * (layers - 1) + [classes]
    return list(zip(d, d[1:]))


def forward_seconds(batches: list[Batch], shapes: list[tuple[int, int]], efficiency: float, hw=TESTBED) -> float:
    """GraphSAGE-mean forward over the worker's sub-graphs (roofline per layer)."""
    t = 0.0
    for b in batches:
        for (dst, edges), (a, out) in zip(layer_sizes(b), shapes):
            flops = 4.0 * dst * a * out + edges * a
            moved = FLOAT_BYTES * (edges * a + dst * (a + out))
            t += max(flops / (hw.gpu_flops * efficiency), moved / (hw.gpu_bytes_per_s * efficiency))
    return t


def worker_seconds(
    batches: list[Batch], minibatch_bytes: float, shapes: list[tuple[int, int]], efficiency: float, hw=TESTBED
) -> float:
    """Copy the mini-batch to the GPU, then forward and backward (backward = 2 x forward)."""
    return minibatch_bytes / (hw.pcie_bytes_per_s * efficiency) + 3 * forward_seconds(batches, shapes, efficiency, hw)


def update_seconds(params: int, workers: int, efficiency: float, hw=TESTBED) -> float:
    """The PS summing ``workers`` gradients and applying Adam (one core)."""
    return FLOAT_BYTES * params * (workers + 6) / hw.core_rate(1, efficiency)
