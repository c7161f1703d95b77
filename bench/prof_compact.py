"""Profile the compaction of bench_scale's job (Mixtral-8x22B, one iteration, ``hermod``): where
``compact_arrays`` spends its time (docs/performance.md, "Where the compaction's time goes").

    python bench/prof_compact.py 1024     # GPUs; about 4 minutes and 6 GB at 1024
"""

import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_scale import ARGS, cluster  # noqa: E402

from schedulers import by_name  # noqa: E402
from simulator.rules import compact_arrays  # noqa: E402
from workloads.moe import moe_arrays  # noqa: E402


def main() -> int:
    gpus = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    t = time.perf_counter()
    aj = moe_arrays(dp=gpus // 64, **ARGS)
    print(f"generate {time.perf_counter() - t:.1f} s", flush=True)
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    cj = compact_arrays(aj, by_name("hermod"), cluster(gpus))
    prof.disable()
    print(f"compact {time.perf_counter() - t:.1f} s (profiled), {cj.items:,} items", flush=True)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
