"""Where the memory of bench_scale's run goes (Mixtral-8x22B, one iteration, ``hermod``, the
array path): a thread samples the process's RSS every 20 ms together with the line the main
thread is on (its innermost frames in this repository), and the script prints the RSS at each
stage's end, the peak per line, and the overall peak with its stack (docs/performance.md, issue 23's
"Memory").

    python bench/prof_memory.py 1024            # GPUs; about 1 minute and 2 GB at 1024
    python bench/prof_memory.py 2048 --run      # also the run (analysis off)
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_scale import ARGS, cluster  # noqa: E402

ROOT = str(Path(__file__).resolve().parent.parent)
PAGE = resource.getpagesize()


def rss() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**30


class Sampler(threading.Thread):
    """RSS every ``dt`` seconds with the main thread's innermost frames inside the repository."""

    def __init__(self, dt: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.dt, self.main = dt, threading.main_thread().ident
        self.peak, self.peak_at = 0.0, ""
        self.by_line: dict[str, float] = {}
        self.stop = False
        self.trace: list[tuple[float, float, str]] = []  # (seconds, GB, stack) when the RSS moved 50 MB

    def where(self) -> tuple[str, str]:
        frame = sys._current_frames().get(self.main)
        lines = []
        while frame is not None:
            fn = frame.f_code.co_filename
            if fn.startswith(ROOT) and "bench/" not in fn:
                lines.append(f"{fn[len(ROOT) + 1 :]}:{frame.f_lineno} {frame.f_code.co_name}")
            frame = frame.f_back
        return (lines[0] if lines else "?"), " <- ".join(lines[:6])

    def run(self) -> None:
        while not self.stop:
            r = rss()
            line, stack = self.where()
            if r > self.by_line.get(line, 0.0):
                self.by_line[line] = r
            if r > self.peak:
                self.peak, self.peak_at = r, stack
            if not self.trace or abs(r - self.trace[-1][1]) > 0.05:
                self.trace.append((time.perf_counter(), r, stack))
            time.sleep(self.dt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gpus", type=int, nargs="?", default=1024)
    ap.add_argument("--run", action="store_true", help="also run the compacted job (analysis off)")
    ap.add_argument("--scheduler", default="hermod")
    ap.add_argument("--trace", action="store_true", help="print the RSS each time it moved by 50 MB, with the stack")
    args = ap.parse_args()
    from schedulers import by_name
    from simulator.rules import compact_arrays, run_compact
    from workloads.moe import moe_arrays

    s = Sampler()
    s.start()
    stages = []

    def mark(name: str, t0: float) -> None:
        stages.append((name, time.perf_counter() - t0, rss(), s.peak))
        print(f"{name:>10}: {stages[-1][1]:7.1f} s  RSS {stages[-1][2]:6.2f} GB  peak so far {s.peak:6.2f} GB",
              flush=True)  # fmt: skip

    t = time.perf_counter()
    aj = moe_arrays(dp=args.gpus // 64, **ARGS)
    mark("generate", t)
    print(f"            ArrayJob: {aj.items:,} items, columns {aj.nbytes() / 2**30:.2f} GB, "
          f"{len(aj.reps):,} rule classes", flush=True)  # fmt: skip
    t = time.perf_counter()
    cj = compact_arrays(aj, by_name(args.scheduler), cluster(args.gpus))
    mark("compact", t)
    print(f"            CompactJob: {cj.items:,} items, arrays {cj.nbytes() / 2**30:.2f} GB", flush=True)
    t = time.perf_counter()
    del aj
    mark("del aj", t)
    if args.run:
        t = time.perf_counter()
        res = run_compact(cj)
        mark("run", t)
        print(f"            makespan {res.makespan!r}", flush=True)
    s.stop = True
    s.join()
    print(f"peak {s.peak:.2f} GB (getrusage {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB) at "
          f"{s.peak_at}")  # fmt: skip
    if args.trace:
        t0 = s.trace[0][0] if s.trace else 0.0
        for t, r, stack in s.trace:
            print(f"  {t - t0:7.2f} s {r:6.2f} GB  {stack}")
    print("highest RSS seen per line (top 25):")
    for line, r in sorted(s.by_line.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {r:6.2f} GB  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
