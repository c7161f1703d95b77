#!/usr/bin/env python3
"""Re-run the mutants a mutation check once found surviving, and show each is now caught.

Every mutant is a one-line change to the code (a priority inversion in the
compiled tc plan, a weaker cycle check, a wrong rate unit, contention not
added up, a skipped priority class). For each, this script copies the
repository (the files git knows, committed or not; never the working tree
in place) into a temporary directory, applies the change there, runs the
pure tests that should notice, and reports ``caught`` (some test failed) or
``SURVIVED`` (all passed), and whether the test written for that mutant was
among the failures (a mutant only other tests catch counts as survived: the
gap it names is not closed). An unmutated copy runs first: if its tests fail,
a "caught" would mean nothing, and the script stops.

Each copy gets its own numba cache directory, so a cached compilation of
the unmutated kernel can never stand in for the mutated one.

    /opt/railbed/venv/bin/python scripts/mutants.py            # all mutants (about 2-3 minutes)
    /opt/railbed/venv/bin/python scripts/mutants.py --list
    /opt/railbed/venv/bin/python scripts/mutants.py --only mbit-1e3 --only prio-bands-reversed

Exit status: 0 every mutant caught, 1 one survived, 2 the baseline failed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 900


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    original: str  # must occur exactly once in the file
    mutated: str
    tests: tuple[str, ...]
    what: str
    killer: str  # the test written to catch it: its id must contain this and it must fail


TC_TESTS = ("tests/test_tc_plan.py",)
MAXMIN_TESTS = ("tests/test_maxmin.py",)
UNIT_TESTS = ("tests/test_units.py",)

MUTANTS = (
    Mutant(
        "prio-bands-reversed",
        "tc_policies/plan.py",
        "target = {c: handle(2, PRIORITY_CLASSES - c) for c in range(PRIORITY_CLASSES)}",
        "target = {c: handle(2, c + 1) for c in range(PRIORITY_CLASSES)}",
        TC_TESTS,
        "prio qdisc: class 7 in the last band, class 0 in the first (priority inversion)",
        "test_rendered_plan_serves_higher_classes_first[True]",
    ),
    Mutant(
        "htb-default-class-7",
        "tc_policies/plan.py",
        'items = [Qdisc("htb", root, None, {"default": 0x10}), HtbClass(',
        'items = [Qdisc("htb", root, None, {"default": 0x17}), HtbClass(',
        TC_TESTS,
        "HTB priority: unmatched traffic (DSCP 0-7) goes to the class-7 leaf",
        "test_rendered_plan_puts_dscp_zero_in_the_lowest_queue[False]",
    ),
    Mutant(
        "priomap-band-0",
        "tc_policies/plan.py",
        '"priomap": [PRIORITY_CLASSES - 1] * 16',
        '"priomap": [0] * 16',
        TC_TESTS,
        "prio qdisc: unmatched traffic (DSCP 0-7) goes to the top band",
        "test_rendered_plan_puts_dscp_zero_in_the_lowest_queue[True]",
    ),
    Mutant(
        "ack-leaf-no-netem",
        "tc_policies/plan.py",
        "leaf_queue(handle(ACK_QDISC_MAJOR), ack, queue, rate, delay_s)",
        'Qdisc("pfifo", handle(ACK_QDISC_MAJOR), ack, {"limit": queue})',
        TC_TESTS,
        "the ACK class's queue is a plain pfifo: SYNs and ACKs skip netem (the bug the VM lane found)",
        "test_every_packet_meets_the_link_latency[policy0]",
    ),
    Mutant(
        "cycle-not-order",
        "railbed/job.py",
        "if len(order) != len(self.items):",
        "if not order:",
        ("tests/test_job.py",),
        "Job.topological_order: a cycle behind a root item is not detected",
        "test_a_cycle_among_some_items_is_an_error",
    ),
    *(
        Mutant(
            f"{unit}-{wrong}",
            "railbed/units.py",
            f'"{prefix}": {right}',
            f'"{prefix}": {wrong}',
            UNIT_TESTS,
            f"1{unit} read as {wrong}",
            f"test_every_rate_suffix_means_its_power_of_ten[{unit}]",
        )
        for unit, prefix, right, wrong in (
            ("mbit", "m", "1e6", "1e3"),  # tc's lower-case prefixes (_TC_LOWER)
            ("kbit", "k", "1e3", "1e6"),
            ("tbit", "t", "1e12", "1e9"),
        )
    ),
    Mutant(
        "dgcl-no-contention",
        "hwmodels/dgcl.py",
        "load[k, h] += 8.0 * req.nbytes[v] * f",
        "load[k, h] = 8.0 * req.nbytes[v] * f",
        ("tests/test_dgcl.py",),
        "DGCL cost model: transfers sharing a hop in a stage are not added up (the last one wins)",
        "test_cost_model_contention_on_a_shared_hop",
    ),
    Mutant(
        "dgcl-max-not-sum",
        "hwmodels/dgcl.py",
        "load[k, h] += 8.0 * req.nbytes[v] * f",
        "load[k, h] = max(load[k, h], 8.0 * req.nbytes[v] * f)",
        ("tests/test_dgcl.py",),
        "DGCL cost model: a shared hop costs its largest transfer, not their sum",
        "test_cost_model_contention_on_a_shared_hop",
    ),
    Mutant(
        "ifs-bound-plus-one",
        "schedulers/dgtp_alg.py",
        "bound = min(bound, q)",
        "bound = min(bound, q + 1)",
        ("tests/test_dgtp.py",),
        "DGTP's IFS: η lets a machine at capacity take one more task of a kind (issue 31)",
        "test_per_machine_bound_agrees_with_fits_on_random_fractions",
    ),
    Mutant(
        "maxmin-skip-class-7",
        "railbed/maxmin.py",
        "for c in range(CLASSES - 1, -1, -1):",
        "for c in range(CLASSES - 2, -1, -1):",
        MAXMIN_TESTS,
        "numba max-min kernel: priority class 7 gets no rate",
        "test_maxmin_kernel_agrees_with_the_reference_on_edge_cases",
    ),
    Mutant(
        "alg3-scan-from-first-column",
        "schedulers/hermod_alg.py",
        "remaining[k] = n - k - 1",
        "remaining[k] = k",
        ("tests/test_hermod_alg.py",),
        "Hermod's Alg. 3 solver scans columns from the first: another optimal matching on ties than scipy's",
        "test_the_numba_loop_takes_scipys_matching_at_every_subphase",
    ),
)


def copy_tree(dest: Path) -> None:
    """Copy the files git knows (tracked, and new ones not ignored) of the repository into ``dest``."""
    listing = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout.decode()
    for rel in filter(None, listing.split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def apply(mutant: Mutant, tree: Path) -> None:
    path = tree / mutant.path
    text = path.read_text()
    count = text.count(mutant.original)
    if count != 1:
        raise SystemExit(f"mutant {mutant.name}: expected the original text once in {mutant.path}, found {count}")
    path.write_text(text.replace(mutant.original, mutant.mutated))


def run_tests(tree: Path, tests: tuple[str, ...], python: str, module: str) -> tuple[bool, list[str], float]:
    """Run ``tests`` in the copy (whose code comes first on sys.path); (passed, failed test ids, seconds)."""
    env = dict(
        os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(tree / ".numba-cache"), PYTHONDONTWRITEBYTECODE="1"
    )
    env.pop("CI", None)
    where = subprocess.run(
        [python, "-c", f"import importlib; print(importlib.import_module({module!r}).__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not where.stdout.strip().startswith(str(tree)):
        raise SystemExit(f"the copy's {module} is not the one imported: {where.stdout.strip() or where.stderr}")
    start = time.monotonic()
    result = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not emulation", "-rf", *tests],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    failed = re.findall(r"^FAILED (\S+)", result.stdout, flags=re.M)
    if result.returncode not in (0, 1) or (result.returncode == 1 and not failed):
        raise SystemExit(f"pytest did not run cleanly (exit {result.returncode}):\n{result.stdout[-3000:]}")
    return result.returncode == 0, failed, time.monotonic() - start


def module_of(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def check(mutants: list[Mutant], python: str) -> int:
    """Baseline, then every mutant; returns the exit status."""
    tests = tuple(dict.fromkeys(t for m in mutants for t in m.tests))
    with tempfile.TemporaryDirectory(prefix="railbed-mutants-") as tmp:
        base = Path(tmp) / "baseline"
        copy_tree(base)
        ok, failed, secs = run_tests(base, tests, python, module_of(mutants[0].path))
        print(f"{'baseline (no mutant)':24} {'passes' if ok else 'FAILS'}  {secs:6.1f} s  {' '.join(tests)}")
        if not ok:
            print("the unmutated tests fail, so no mutant result means anything:", *failed, sep="\n  ")
            return 2
        shutil.rmtree(base)
        survived = []
        for m in mutants:
            tree = Path(tmp) / m.name
            copy_tree(tree)
            apply(m, tree)
            ok, failed, secs = run_tests(tree, m.tests, python, module_of(m.path))
            verdict = "SURVIVED" if ok else "caught"
            print(f"{m.name:24} {verdict:8} {secs:6.1f} s  {m.what}")
            ours = [t for t in failed if m.killer in t]
            if not ok:
                print(f"{'':24}   {len(failed)} tests failed; {ours[0] if ours else m.killer + ': DID NOT FAIL'}")
            if ok or not ours:
                survived.append(m.name)
            shutil.rmtree(tree)
    print(
        f"{len(mutants) - len(survived)} of {len(mutants)} mutants caught"
        + (f"; survived: {survived}" if survived else "")
    )
    return 1 if survived else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this mutant (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--python", default=sys.executable, help="interpreter with pytest and the project's deps")
    args = parser.parse_args(argv)
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:24} {m.path}: {m.what}")
        return 0
    names = {m.name for m in MUTANTS}
    unknown = set(args.only or []) - names
    if unknown:
        parser.error(f"unknown mutant(s) {sorted(unknown)}; known: {sorted(names)}")
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    return check(chosen, args.python)


if __name__ == "__main__":
    sys.exit(main())
