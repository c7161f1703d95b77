"""A run in a child process, for clean-up tests: ``python child_run.py MODE [CLUSTER]``.

Prints ``READY`` once the testbed is up, then (after a line on stdin for
``exit`` and ``raise``): ``exit`` leaves the ``with``
block normally, ``raise`` raises inside it, ``wait`` sleeps until a signal
(SIGINT, SIGTERM or SIGKILL sent by the test). It also starts one process
inside h0, so the test sees that processes of the run are ended too.
"""

import signal
import sys
import time

from emulator.testbed import Interrupted, Testbed
from railbed.spec import ClusterSpec

signal.signal(signal.SIGINT, signal.default_int_handler)
mode = sys.argv[1]
spec = ClusterSpec.rail_optimized(servers=2, rails=2, spines=2, nic_rate=10e9)
try:
    with Testbed(spec, scale=100) as tb:
        tb.popen("h0", ["sleep", "600"])
        print("READY", flush=True)
        if mode in ("exit", "raise"):
            sys.stdin.readline()  # the test looks at the live run first, then says go
        if mode == "raise":
            raise RuntimeError("boom inside the run")
        if mode == "wait":
            time.sleep(600)
except RuntimeError as exc:
    print(f"CAUGHT {exc}", flush=True)
    sys.exit(3)
except KeyboardInterrupt:
    print("CAUGHT SIGINT", flush=True)
    sys.exit(130)
except Interrupted as exc:
    print(f"CAUGHT {exc}", flush=True)
    sys.exit(143)
print("EXITED", flush=True)
