"""Netlink sockets inside another network namespace, without forking.

pyroute2's ``IPRoute(netns=...)`` forks a helper process per socket; a fork
inherits the run's signal handlers and costs milliseconds. The network
namespace is per thread in Linux, so a short-lived thread can ``setns`` into
the target, open the socket and hand back its descriptor; the socket stays
in that namespace.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

from pyroute2 import IPRoute

CLONE_NEWNET = 0x40000000
NETLINK_ROUTE = 0
_libc = ctypes.CDLL(None, use_errno=True)


def netlink_fd(netns_path: str, proto: int = NETLINK_ROUTE) -> int:
    """A netlink socket (file descriptor) created inside the namespace at ``netns_path``."""
    result: dict[str, object] = {}

    def worker() -> None:
        try:
            nsfd = os.open(netns_path, os.O_RDONLY)
        except OSError as exc:
            result["error"] = exc
            return
        try:
            if _libc.setns(nsfd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns({netns_path}): {os.strerror(err)}")
            result["fd"] = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, proto).detach()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            result["error"] = exc
        finally:
            os.close(nsfd)

    thread = threading.Thread(target=worker, name="railbed-setns")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return int(result["fd"])  # type: ignore[arg-type]


def iproute_in(netns_path: str) -> IPRoute:
    """An ``IPRoute`` bound to the namespace at ``netns_path`` (use as a context manager)."""
    return IPRoute(fileno=netlink_fd(netns_path))
