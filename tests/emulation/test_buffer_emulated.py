"""``fabric.buffer`` on the emulator: a 16-to-1 incast of 50 KB each into one 100 Gbit/s port at
k = 1000 (100 Mbit/s real), 800 KB arriving at once (about 530 frames). The default leaf queue
holds 64 frames (5 ms at the real rate, 5 us of model time): the switch drops (86-124 packets in
8 runs here). With ``buffer: 1.3MB`` (859 frames, an even share of an SN3700's 42 MB over 32
ports) it holds the whole incast: no drop."""

from emulator.runtime import run
from emulator.testbed import Testbed
from railbed.job import Job, Location
from railbed.spec import ClusterSpec
from schedulers import SchedulerSpec, make

K = 1000
SENDERS = 16


def star(**fabric) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"name": "incast", "servers": [{"count": SENDERS + 1, "gpus": 1, "nic_rate": "100Gbit"}],
         "fabric": {"type": "single_switch", **fabric}}  # fmt: skip
    )


def incast() -> Job:
    """Every sender to server 0 at once."""
    job = Job("incast")
    for s in range(SENDERS + 1):
        job.endpoint(f"s{s}", pin=Location(s, "gpu0", 0))
    for s in range(1, SENDERS + 1):
        job.flow(f"f{s}", f"s{s}", "s0", 50_000)
    return job.validate()


def drops(spec: ClusterSpec) -> int:
    with Testbed(spec, scale=K) as tb:
        result = run(incast(), make(SchedulerSpec("fifo")), tb)
    return result.fidelity_report["loss"]["drops"]


def test_a_switch_buffer_holds_an_incast_the_default_queue_drops():
    assert drops(star()) > 20
    assert drops(star(buffer="1.3MB")) == 0
