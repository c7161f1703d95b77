"""Draw the clusters of DGTP's simulations (seed 000 §VI-B) and write them as cluster files.

§VI-B: per machine, memory in [32, 128] GB, CPU cores in [4, 16], GPUs in
[1, 4], network bandwidth in {10, 20, 50} Gbit/s; all on one switch (the
paper names no other fabric). Integers are drawn uniformly (memory in whole
GB) with ``random.Random(seed)``. A draw that cannot hold the job's tasks
(IFS finds no placement: the ranges' means give 160 cores to 16 machines,
papers100M's tasks need 181) is drawn again with the next seed; the file
says which seed it kept. This biases the machines upward; the paper does
not say how it made its draws feasible.

    python -m scenarios.dgtp.draw_clusters      # writes sim-products-8.yaml, sim-papers-16.yaml
"""

from __future__ import annotations

import random
from pathlib import Path

import yaml

from railbed.spec import ClusterSpec
from schedulers import dgtp_alg as alg
from workloads.gnn import ROLE_DEMANDS

HERE = Path(__file__).resolve().parent
SETTINGS = {  # file: (machines, workers, samplers per worker), §VI-B
    "sim-products-8.yaml": (8, 16, 2),
    "sim-papers-16.yaml": (16, 20, 4),
}


def draw(machines: int, seed: int) -> dict:
    rng = random.Random(seed)
    servers = [
        {
            "gpus": (g := rng.randint(1, 4)),
            "nic_rate": f"{rng.choice((10, 20, 50))}Gbit",
            "resources": {"mem": rng.randint(32, 128), "cpu": rng.randint(4, 16), "gpu": g},
        }
        for m in range(machines)
    ]
    return {"name": f"dgtp-sim-{machines}", "servers": servers, "fabric": {"type": "single_switch"}}


def feasible(doc: dict, workers: int, per_worker: int) -> bool:
    capacity = [s["resources"] for s in doc["servers"]]
    demands = [ROLE_DEMANDS["sampler"], ROLE_DEMANDS["worker"], ROLE_DEMANDS["ps"]]
    return alg.ifs((workers * per_worker, workers, 1), demands, capacity, range(len(capacity))) is not None


def main() -> None:
    for name, (machines, workers, per_worker) in SETTINGS.items():
        seed = 0
        while not feasible(doc := draw(machines, seed), workers, per_worker):
            seed += 1
        head = (
            f"# DGTP §VI-B cluster: {machines} machines drawn by scenarios/dgtp/draw_clusters.py, seed {seed}\n"
            f"# (the first seed whose machines hold {workers} workers x {per_worker} samplers and a PS). mem in GB.\n"
        )
        (HERE / name).write_text(head + yaml.safe_dump(doc, sort_keys=False))
        ClusterSpec.load(HERE / name)
        print(name, "seed", seed)


if __name__ == "__main__":
    main()
