"""How a results directory was made: ``provenance.json``.

Written by ``railbed run``, ``simulate``, ``crosscheck``, every sweep point
and ``railbed reproduce``, so a result can be traced to the code and the
machine that produced it:

``railbed``   version and git commit of the code that ran (``dirty`` when
              the work tree had uncommitted changes), and where it lives
``command``   the command line (``sys.argv``) and working directory
``machine``   kernel (``uname -r`` and version), machine, CPU count (and the
              CPUs this process may use), Python version
``scale``     k and how it was chosen (``--scale``, the scenario's ``scale``,
              or the default for this machine); the simulator has no k
``packages``  versions of numba, numpy, pyroute2, mininet (and matplotlib,
              scapy, ray where installed)
``seeds``     every ``seed`` key of the scenario (railbed's generators and
              the simulator are deterministic; a sweep adds its point's seed),
              and the defaults of the generator's and schedulers' ``seed``
              arguments the scenario leaves out (``scenarios.catalog.default_seeds``)
``created``   UTC time
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("numba", "numpy", "pyroute2", "mininet", "matplotlib", "scapy", "ray")
REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_version() -> dict[str, Any]:
    try:
        version = metadata.version("railbed")
    except metadata.PackageNotFoundError:
        version = None
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "version": version,
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
        "path": str(REPO),
    }


# railbed's other top-level import names (setup.cfg's packages): generic enough that a user's own
# module of the same name, earlier on sys.path (a notebook's folder), would be imported instead
TOP_LEVEL = ("cli", "emulator", "hwmodels", "scenarios", "schedulers", "simulator", "tc_policies", "workloads")


def shadowed_packages() -> dict[str, str]:
    """Name -> where Python would import it from, for each of :data:`TOP_LEVEL` found outside this
    code's tree (``importlib.util.find_spec``: nothing is imported)."""
    from importlib.util import find_spec

    out = {}
    for name in TOP_LEVEL:
        spec = find_spec(name)
        origin = spec.origin if spec is not None else None
        where = Path(origin).resolve() if origin else None
        if where is None or REPO not in where.parents:
            out[name] = str(where) if where else "nowhere (not found)"
    return out


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine() -> dict[str, Any]:
    uname = platform.uname()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    return {
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "hostname": uname.node,
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "python": platform.python_version(),
    }


def find_seeds(data: Any, prefix: str = "") -> dict[str, Any]:
    """Every key named ``seed`` or ``seeds`` (at any depth) of a scenario mapping, by dotted path."""
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if str(key) in ("seed", "seeds"):
                out[path] = value
            else:
                out.update(find_seeds(value, path))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.update(find_seeds(value, f"{prefix}[{i}]"))
    return out


def scale_record(k: float | None, given: float | None, scenario: float | None) -> dict[str, Any]:
    """``k`` and how it was chosen; ``k`` None means a simulated run (model time, no k)."""
    if k is None:
        return {"k": None, "chosen": "none: the simulator runs in model time"}
    if given is not None:
        how = "--scale on the command line"
    elif scenario is not None:
        how = "the scenario's scale"
    else:
        how = "default for this machine (RateScale.default_for: link rates, NIC rates, CPU count)"
    return {"k": k, "chosen": how}


def collect(
    scale: dict[str, Any] | None = None, scenario: Any = None, extra_seeds: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "railbed": code_version(),
        "command": {"argv": list(sys.argv), "cwd": os.getcwd()},
        "machine": machine(),
        "scale": scale or {},
        "packages": package_versions(),
        "seeds": {**find_seeds(scenario or {}), **(extra_seeds or {})},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write(out_dir: Path, **kwargs: Any) -> Path:
    """``provenance.json`` in ``out_dir`` (arguments as :func:`collect`)."""
    path = Path(out_dir) / "provenance.json"
    path.write_text(json.dumps(collect(**kwargs), indent=1) + "\n")
    return path
