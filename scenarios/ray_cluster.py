"""A sweep's driver on a Ray cluster: the address, the token, and a probe that fails in seconds.

Ray (2.52 and later) authenticates every control-plane request with a token
when ``RAY_AUTH_MODE=token``, which must be set on every node and the driver.
The token comes, in this order, from ``RAY_AUTH_TOKEN``, from the file
``RAY_AUTH_TOKEN_PATH`` names (unreadable or empty: Ray aborts), or from
``~/.ray/auth_token`` ("Token Sources and Precedence",
https://docs.ray.io/en/master/ray-core/internals/token-authentication.html;
https://docs.ray.io/en/latest/ray-security/token-auth.html). Since 2.59 a
local cluster turns it on by default: ``ray start --head`` does when a token
file exists, and a local ``ray.init()`` writes one. But ``ray.init(address=...)``
with an explicit address never turns it on by itself (``ray/_private/worker.py``
of 2.60: "an explicit address (argument or RAY_ADDRESS) never does"; the gap
the review of ray-project/ray#64755 names), so a driver pointed at such a head
sends no token, and Ray retries for 20 s before a ``ConnectionError``.

railbed therefore: (1) keeps ``RAY_AUTH_MODE`` when it is set (``disabled`` is
the opt-out); (2) otherwise sets it to ``token`` when a token is found where
Ray looks, as ``ray start --head`` does (a cluster without authentication
accepts requests that carry one: measured with Ray 2.60); (3) probes the head
before ``ray.init``: a TCP connection to the GCS port (refused or silent:
exit 1, "cannot reach"), then one GCS request from a child process with Ray's
own client and the same environment, so Ray's retries and log lines stay
there and the wait is bounded (token refused or missing: exit 1, "refused";
no answer: exit 1). Nothing is written before the probe passes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from railbed.errors import EnvironmentProblem, SpecError
from railbed.safeload import describe

CONNECT_TIMEOUT = 3.0  # s: a TCP connection to the head's GCS port
PROBE_TIMEOUT = 8.0  # s: the child's one GCS request, Ray's import (~0.5 s) included
AUTH_MODE = "RAY_AUTH_MODE"

# Run in a child: Ray's GCS client (ray._raylet.GcsClient, what `ray status` and Ray's own
# processes use) asks the head for its cluster id and one key; an authentication error is
# Ray's AuthenticationError. One JSON line out.
_PROBE = """
import json, sys
try:
    from ray._raylet import GcsClient
    GcsClient(address=sys.argv[1]).internal_kv_get(b"railbed-probe", None, timeout=5)
    out = {"ok": True}
except Exception as exc:
    out = {"auth" if type(exc).__name__ == "AuthenticationError" else "error": str(exc).splitlines()[0][:300]}
print(json.dumps(out))
"""


def parse_address(address: str, where: str) -> tuple[str, int]:
    """``host:port`` of the head's GCS (``ray start --head --port``); anything else is a SpecError."""
    if address.startswith("ray://"):
        raise SpecError(where, "Ray Client addresses (ray://) are not supported: run railbed sweep on a node of "
                        "the cluster with the head's GCS address host:port")  # fmt: skip
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(where, f"expected the head's GCS address host:port, got {describe(address)}")
    return host.strip("[]"), int(port)


def find_token() -> tuple[str | None, str]:
    """(the token Ray would use, where it comes from), in Ray's order (module docstring);
    (None, the places looked at) when there is none."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return os.environ["RAY_AUTH_TOKEN"].strip(), "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as exc:
            raise EnvironmentProblem(f"RAY_AUTH_TOKEN_PATH names {path}: cannot read it ({exc.strerror})") from None
        if not token:
            raise EnvironmentProblem(f"RAY_AUTH_TOKEN_PATH names {path}, which is empty (Ray would abort)")
        return token, f"RAY_AUTH_TOKEN_PATH ({path})"
    default = Path.home() / ".ray" / "auth_token"
    try:
        token = default.read_text().strip()
    except OSError:
        token = ""
    if token:
        return token, str(default)
    return None, f"RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or {default}"


def auth_environment() -> tuple[dict[str, str], str]:
    """(environment variables the driver sets, a phrase saying what it sends) per the module docstring."""
    mode = os.environ.get(AUTH_MODE)
    token, where = find_token()
    if mode is not None and mode.lower() != "token":
        return {}, f"no token ({AUTH_MODE}={mode})"
    if token is None:
        if mode is not None:
            raise EnvironmentProblem(f"{AUTH_MODE}=token but no token was found in {where}")
        return {}, f"no token (none in {where})"
    return ({} if mode else {AUTH_MODE: "token"}), f"the token from {where}"


def probe(address: str, where: str = "--address") -> dict[str, str]:
    """Check that the head at ``address`` answers and accepts this driver's token; return the
    environment variables to set before ``ray.init`` (EnvironmentProblem, one line, if not)."""
    host, port = parse_address(address, where)
    env, sends = auth_environment()
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        why = "timed out" if isinstance(exc, socket.timeout) else exc.strerror or type(exc).__name__
        raise EnvironmentProblem(
            f"cannot reach the Ray cluster at {address}: {why} (is its head running: ray start --head --port {port}?)"
        ) from None
    child_env = {**os.environ, **env, "RAY_BACKEND_LOG_LEVEL": "fatal"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, f"{host}:{port}"],
            env=child_env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(
            f"{address} accepts connections but no Ray head answered in {PROBE_TIMEOUT:g} s (is it the GCS port?)"
        ) from None
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        answer = {}
    if "auth" in answer:
        raise EnvironmentProblem(
            f"the Ray cluster at {address} refused this driver: it sent {sends}; give the cluster's token "
            "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; docs/sweeps.md)"
        )
    if not answer.get("ok"):
        why = answer.get("error") or (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]
        raise EnvironmentProblem(f"the Ray cluster at {address} did not answer: {why}")
    return env


def connect(address: str, where: str, **kwargs):
    """``ray.init`` on the cluster at ``address`` after :func:`probe`; Ray's own failures as one line."""
    env = probe(address, where)
    os.environ.update(env)
    import ray

    if env:  # Ray reads RAY_AUTH_MODE once, when imported: refresh it (as Ray's own _enable_token_auth does)
        ray._raylet.Config.initialize("")
    try:
        ray.init(address=address, **kwargs)
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, AuthenticationError
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise EnvironmentProblem(f"could not join the Ray cluster at {address}: {first}") from None
    return ray
