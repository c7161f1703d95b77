"""The generator registries (workloads/__init__.py): names -> "module:function", imported on first use,
each generator's item estimate beside it in its own module."""

import sys

import pytest

from railbed.errors import SpecError
from workloads import ARRAY_FORMS, DESCRIPTIONS, GENERATORS, MAX_ITEMS, SIZE_HINTS, checked_args, generate


def test_every_table_names_registered_generators_and_loads():
    assert set(SIZE_HINTS) <= set(GENERATORS) and set(ARRAY_FORMS) <= set(GENERATORS)
    assert set(DESCRIPTIONS) <= set(GENERATORS)
    for table in (GENERATORS, SIZE_HINTS, ARRAY_FORMS, DESCRIPTIONS):
        for name, fn in table.items():
            assert callable(fn), name
    for name, gen in GENERATORS.items():
        assert gen.__name__ == name  # the registered name is the function's own


def test_naming_a_generator_imports_its_module_only(tmp_path):
    import subprocess

    code = "import sys, workloads; workloads.generate('all_to_all', {'n': 2}); print(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'workloads.synthetic'" in out and "'workloads.moe'" not in out and "'workloads.gnn'" not in out


def test_hybrid_parallels_estimate_is_its_own():
    """Two estimators shared a name in workloads/__init__.py and hybrid_parallel's was gnn_hybrid's, a
    constant 2660 items whatever the job: a 314-million-item job was built, not refused."""
    small = checked_args("hybrid_parallel", {"dp": 2}, "job")[3]
    big = checked_args("hybrid_parallel", {"dp": 64, "pp": 16, "tp": 8, "microbatches": 64, "iterations": 100}, "job")
    assert big[3] == 100 * 8 * 64 * 16 * (4 * 64 + 2 * 64) and small < big[3]
    with pytest.raises(SpecError) as err:
        generate("hybrid_parallel", {"dp": 64, "pp": 16, "tp": 8, "microbatches": 64, "iterations": 100})
    assert err.value.field == "job.args" and f"at most {MAX_ITEMS}" in str(err.value)


@pytest.mark.parametrize(
    "name, args",
    [
        ("hybrid_parallel", {"dp": 4, "pp": 2, "tp": 2, "microbatches": 3}),
        ("all_to_all", {"n": 5, "iterations": 2}),
        ("collective", {"ranks": 6}),
        ("requests", {"requests": 50}),
    ],
)
def test_an_estimate_bounds_the_items_made(name, args):
    assert checked_args(name, args, "job")[3] >= len(generate(name, args).items)


def test_an_unknown_generator_is_named_by_field():
    with pytest.raises(SpecError) as err:
        generate("nope")
    assert err.value.field == "job.generator" and "known:" in str(err.value)
