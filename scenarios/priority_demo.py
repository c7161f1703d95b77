"""Demo: two DSCP classes through one shaped rail-switch port.

Builds a rail-optimized cluster, then, on the rail-0 switch port towards
``h0`` (the shared bottleneck), runs: the low class alone, the high class
alone, and both together. Prints configured vs achieved wire rates and the
priority split, and writes ``result.json`` into the output directory.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from emulator.loadtest import Flow, measure
from emulator.testbed import Testbed
from railbed.errors import SpecError
from railbed.spec import ClusterSpec
from railbed.units import format_rate
from tc_policies.plan import validate_dscp

HIGH_DSCP = 46  # EF: class 5
LOW_DSCP = 0


def run(
    spec: ClusterSpec,
    out_dir: Path,
    scale: float | None = None,
    window: float = 3.0,
    policy: str = "dscp-priority",
    high_dscp: int = HIGH_DSCP,
    low_dscp: int = LOW_DSCP,
    echo=print,
) -> dict:
    validate_dscp(high_dscp, "high_dscp")
    validate_dscp(low_dscp, "low_dscp")
    if spec.fabric.kind != "rail_optimized" or len(spec.servers) < 3:
        raise SpecError("cluster", "the demo needs a rail-optimized cluster of at least 3 servers")
    rows = []
    with Testbed(spec, policy=policy, scale=scale) as tb:
        echo(spec.summary())
        echo(
            f"scale k = {tb.scale.k:g} (real rate = model rate / k); policy {tb.policy.name}; "
            f"built in {tb.build_seconds:.1f} s"
        )
        port = ("rail0", tb.topology.path((1, 0), (0, 0))[-1].ifname)
        classes = tb.policy.compile(1e6)
        high_class, low_class = classes.classify(high_dscp), classes.classify(low_dscp)
        cases = [
            ("low class alone", [Flow((2, 0), (0, 0), low_dscp)]),
            ("high class alone", [Flow((1, 0), (0, 0), high_dscp)]),
            ("both classes", [Flow((1, 0), (0, 0), high_dscp), Flow((2, 0), (0, 0), low_dscp)]),
        ]
        for label, flows in cases:
            echo(f"  running: {label} ({window:g} s) ...")
            m = measure(tb, flows, [port], window=window)
            p = m.ports[port]
            high, low = p.share(high_class), p.share(low_class)
            rows.append(
                {
                    "case": label,
                    "port": f"{port[0]}:{port[1]}",
                    "configured_real_bps": p.configured_bps,
                    "achieved_real_bps": p.wire_bps,
                    "configured_model_bps": tb.scale.model_rate(p.configured_bps),
                    "achieved_model_bps": tb.scale.model_rate(p.wire_bps),
                    "high_share": high,
                    "low_share": low,
                    "goodput_real_bps": m.goodput_bps,
                    "drops": p.drops,
                }
            )
        result = {
            "cluster": spec.to_dict(),
            "scale": tb.scale.k,
            "policy": tb.policy.name,
            "build_seconds": tb.build_seconds,
            "rows": rows,
            "time": time.time(),
        }
    result["teardown_seconds"] = tb.teardown_seconds
    echo("")
    echo(f"{'case':<18} {'configured':>14} {'achieved':>14} {'error':>7} {'high':>7} {'low':>7}  (model rates)")
    for r in rows:
        err = r["achieved_real_bps"] / r["configured_real_bps"] - 1
        echo(
            f"{r['case']:<18} {format_rate(r['configured_model_bps']):>14} "
            f"{format_rate(r['achieved_model_bps']):>14} {err:>+7.1%} {r['high_share']:>7.1%} "
            f"{r['low_share']:>7.1%}"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "result.json").write_text(json.dumps(result, indent=2, default=_jsonable))
    echo(f"\nresults: {out_dir / 'result.json'}")
    return result


def _jsonable(obj):
    try:
        return asdict(obj)
    except TypeError:
        return str(obj)
