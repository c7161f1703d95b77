"""Pure parts of the fidelity report: interval overlap between NIC groups."""

import random

import pytest

pytest.importorskip("pyroute2")

from emulator.fidelity import _merge, _overlapping  # noqa: E402


def brute(segments):
    out = set()
    for a in segments:
        for b in segments:
            if a[2] != b[2] and a[0] < b[1] and b[0] < a[1]:
                out.update((a[2], b[2]))
    return out


@pytest.mark.parametrize("seed", range(200))
def test_labels_that_overlap_another_label_match_brute_force(seed):
    rng = random.Random(seed)
    segments = []
    for label in range(rng.randint(1, 6)):
        ivs = []
        for _ in range(rng.randint(1, 4)):
            a = rng.uniform(0, 10)
            ivs.append((a, a + rng.uniform(0.01, 3)))
        segments += [(a, b, label) for a, b in _merge(ivs)]
    assert _overlapping(segments) == brute(segments)
