"""The size of G3's Fig. 4.17 job (``products-pipeline.yaml``: ``gnn_hybrid``, 16 workers, bins of 11)
at growing graph scale, per pipeline: items, dependencies, build time (docs/g3.md, "Full size is not run").

    python bench/g3_size.py 0.005 0.01 0.02     # scales; about 5 minutes for these
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workloads.gnn_hybrid import gnn_hybrid  # noqa: E402


def main() -> int:
    scales = [float(a) for a in sys.argv[1:]] or [0.005, 0.01]
    print("scale pipeline items deps seconds")
    for scale in scales:
        for pipe in ("g3", "sequential", "intra", "inter"):
            t = time.perf_counter()
            job = gnn_hybrid(dataset="ogbn-products", workers=16, layers=2, hidden=16, epochs=1, partitioner="g3",
                             bin_size=11, scale=scale, seed=0, pipeline=pipe)  # fmt: skip
            deps = sum(len(i.deps) for i in job.items.values())
            print(scale, pipe, len(job.items), deps, f"{time.perf_counter() - t:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
