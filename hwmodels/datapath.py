"""The ``datapath`` kind (:class:`railbed.hosts.HostKind`): a server group's LEO datapath (seed
004, chapter 6), a preset of §6.4 and overrides::

    datapath: {preset: bf-3, model: off-path, cpu_cores: 32, acc_cores: 1, pcie_rate: 200Gbit,
               axi_rate: 128Gbit, compute: {kvs: {cpu: 0.7us, acc: 5GB/s}}, jitter: [3us, 9us], seed: 0}

``compute`` gives a function's time per call or a processing rate per device; ``jitter`` the
delay range at the server's NIC. Its model is :class:`hwmodels.plugin.DatapathHost`: stateful
(its queues, eqs. 6.1/6.2, and its jitter draws), so a run has one per server.
"""

from __future__ import annotations

import math
from typing import Any

from hwmodels.leo import HOST_PRESETS, DatapathSpec, datapath_spec
from hwmodels.plugin import DatapathHost
from railbed.errors import SpecError
from railbed.safeload import describe, key_name
from railbed.spec import MAX_NAME_CHARS, check_int, check_mapping
from railbed.units import parse_duration, parse_rate

KEYS = {"preset", "model", "cpu_cores", "acc_cores", "pcie_rate", "axi_rate", "compute", "jitter", "seed"}
MODELS = ("direct", "on-path", "off-path")


class Datapath:
    field = "datapath"

    def parse(self, raw: Any, where: str, gpus: int) -> DatapathSpec:
        """A server's LEO datapath: a preset of §6.4 (f-nic, g+f-nic, bf-3) and overrides."""
        doc = check_mapping(raw, where, KEYS, required={"preset"})
        preset = doc["preset"]
        if not isinstance(preset, str) or preset not in HOST_PRESETS:
            known = ", ".join(HOST_PRESETS)
            raise SpecError(f"{where}.preset", f"unknown datapath preset {describe(preset)} (known: {known})")
        over: dict[str, Any] = {}
        if "model" in doc:
            if doc["model"] not in MODELS:
                known = ", ".join(MODELS)
                raise SpecError(f"{where}.model", f"unknown hardware model {describe(doc['model'])} (known: {known})")
            over["model"] = doc["model"]
        for key in ("cpu_cores", "acc_cores"):
            if key in doc:
                over[key] = check_int(doc[key], f"{where}.{key}", 1, 4096)
        for key in ("pcie_rate", "axi_rate"):
            if key in doc:
                rate = parse_rate(doc[key], f"{where}.{key}")
                if not 0 < rate < math.inf:
                    raise SpecError(f"{where}.{key}", "must be a positive rate")
                over[key.replace("_rate", "_gbps")] = rate / 8e9
        if "seed" in doc:
            over["seed"] = check_int(doc["seed"], f"{where}.seed", 0, 2**63 - 1)
        if "jitter" in doc:
            over["jitter"] = _jitter(doc["jitter"], f"{where}.jitter")
        over["compute"], over["rate"] = _functions(doc.get("compute", {}), f"{where}.compute")
        return datapath_spec(preset, **over)

    def to_doc(self, spec: DatapathSpec) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "preset": spec.preset,
            "model": spec.model,
            "cpu_cores": spec.cpu_cores,
            "acc_cores": spec.acc_cores,
            "pcie_rate": spec.pcie_gbps * 8e9,
            "axi_rate": spec.axi_gbps * 8e9,
            "seed": spec.seed,
            "compute": {f: dict(t) for f, t in spec.compute.items()},
        }
        for f, per in spec.rate.items():
            doc["compute"].setdefault(f, {}).update({dev: f"{r!r}bit/s" for dev, r in per.items()})
        doc["compute"] = {f: t for f, t in doc["compute"].items() if t}
        if spec.jitter is not None:
            doc["jitter"] = list(spec.jitter)
        return doc

    def describe(self, spec: DatapathSpec) -> str:
        jitter = f", jitter {spec.jitter[0] * 1e6:g}-{spec.jitter[1] * 1e6:g} us" if spec.jitter else ""
        return f"{spec.preset} ({spec.model}, {spec.cpu_cores} CPU cores, {spec.acc_cores} accelerator cores{jitter})"

    def devices(self, spec: DatapathSpec) -> tuple[str, ...]:
        return ()  # its legs run between the NIC and the server's cpu or its accelerator

    def model(self, spec: DatapathSpec, server: int) -> DatapathHost:
        return DatapathHost(spec, server)


def _jitter(value: object, where: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(where, f"expected [min, max] durations, got {describe(value)}")
    lo, hi = (parse_duration(j, f"{where}[{i}]") for i, j in enumerate(value))
    if hi < lo:
        raise SpecError(where, f"max {hi:g} s is below min {lo:g} s")
    return lo, hi


def _functions(value: object, where: str) -> tuple[dict, dict]:
    """``{function: {device: duration or rate}}`` -> (fixed times, rates)."""
    if not isinstance(value, dict):
        raise SpecError(where, f"expected a mapping of function to per-device times, got {describe(value)}")
    times: dict[str, dict[str, float]] = {}
    rates: dict[str, dict[str, float]] = {}
    for name, per_dev in value.items():
        fwhere = f"{where}.{key_name(name)}"
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            raise SpecError(fwhere, "a function name must be a short string")
        if not isinstance(per_dev, dict) or not per_dev:
            raise SpecError(fwhere, f"expected a mapping of device (cpu, acc) to time or rate, not {describe(per_dev)}")
        for dev, t in per_dev.items():
            dwhere = f"{fwhere}.{key_name(dev)}"
            if dev not in ("cpu", "acc"):
                raise SpecError(dwhere, "unknown device (known: cpu, acc)")
            if isinstance(t, str) and ("/" in t or t.rstrip().endswith(("bit", "Bps", "bps"))):
                rate = parse_rate(t, dwhere)
                if not 0 < rate < math.inf:
                    raise SpecError(dwhere, "a processing rate must be positive")
                rates.setdefault(name, {})[dev] = rate
            else:
                times.setdefault(name, {})[dev] = parse_duration(t, dwhere)
    return times, rates


KIND = Datapath()
