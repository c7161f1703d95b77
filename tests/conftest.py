"""Test order for runs spread over cores (scripts/test.sh: pytest-xdist, ``--dist load``).

The slowest tests start first, each on its own worker: ``--dist load`` hands out the first
tests one per worker in turn, so the regeneration of the largest REPRODUCTION.md sections
(minutes each; the rest of the suite is thousands of tests of seconds) runs beside the rest
instead of after it. In the CI run of stop 48 (one process) and a two-worker run here, Hermod's
and LEO's sections were the longest tests; with the default order they ran one after the other
on one worker. One process keeps the same tests, in this order too. They regenerate only a
stale section (tests/test_reproduction_md.py); a current one is skipped at once."""

SLOWEST_FIRST = (
    "tests/test_reproduction_md.py::test_committed_quick_section_is_what_the_code_produces[hermod]",
    "tests/test_reproduction_md.py::test_committed_quick_section_is_what_the_code_produces[leo]",
    "tests/test_reproduction_md.py::test_committed_quick_section_is_what_the_code_produces[dgtp]",
    "tests/test_reproduction_md.py::test_committed_quick_section_is_what_the_code_produces[dgcl]",
)


def pytest_collection_modifyitems(items):
    rank = {nodeid: i for i, nodeid in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))  # stable: the others keep their order
