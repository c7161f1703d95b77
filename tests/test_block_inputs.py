"""What a REPRODUCTION.md section's digest covers (scenarios/block.py, issue 41 item 3): the code its
runs can execute (scenarios/codegraph.py's import closure), not all code; the rule before still
judges the inputs lines it wrote; ``--refresh-inputs`` rewrites one only where git proves it.

The trees are small repositories written for each test (never the committed REPRODUCTION.md)."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from scenarios import block
from scenarios.codegraph import Graph
from scenarios.reproduce import BEGIN, END, HERE

ROOT = Path(__file__).resolve().parent.parent

TREE = {  # a repository in miniature: a registry of backends, a lazy import, a "module:attr" string
    "railbed/plugins.py": "class Registry:\n    pass\n",
    "railbed/backend.py": "from railbed.plugins import Registry\n\n"
    'BACKENDS = Registry("backend", {"emulate": "emulator.backend:EMULATE", "fluid": "simulator.fluid:FLUID",\n'
    '                               "packet": "simulator.packet:PACKET"}, aliases={"ns3": "packet"})\n\n\n'
    "def backend(name):\n    return BACKENDS.get(name)\n",
    "simulator/fluid.py": 'FLUID = None\nHELPER = "workloads.gen:make"\n',
    "simulator/packet/__init__.py": "PACKET = None\n",
    "simulator/packet/glue.cpp": "// compiled by simulator/packet/__init__.py\n",
    "emulator/backend.py": "EMULATE = None\n",
    "workloads/gen.py": "def make():\n    return 1\n",
    "schedulers/mine.py": "class Mine:\n    pass\n",
    "scenarios/reproduce.py": "from railbed.backend import BACKENDS\n\n\n"
    "def run():\n    from scenarios.runner import crosscheck\n\n    return crosscheck\n",
    "scenarios/runner.py": "from railbed.backend import backend\n\n\n"
    "def crosscheck():\n    return backend('emulate')\n\n\n"
    "def lazy():\n    from schedulers import mine\n\n    return mine\n",
    "scenarios/other.py": "X = 1\n",  # imported by no run
    "scenarios/p/claims.yaml": "title: p\nclaims:\n  - {claim: c, scenario: s.yaml}\n",
    "scenarios/p/s.yaml": "cluster: c.yaml\nschedulers: [fifo]\n",
    "scenarios/p/c.yaml": "servers: 2\n",
    "scenarios/q/claims.yaml": "title: q\nclaims: []\n",
    "scenarios/q/tool.py": "Y = 1\n",  # another paper's script
    "cli/main.py": "import railbed.plugins\n\n\ndef reproduce():\n    import scenarios.other\n",
}


def _tree(root: Path, files: dict[str, str] = TREE) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pkg in ("railbed", "simulator", "emulator", "workloads", "schedulers", "scenarios", "cli"):
        (root / pkg / "__init__.py").touch()
    return root


def _digest(root: Path, flags: str = " --quick", paper: str = "p", old: bool = False) -> str:
    return block.inputs_digest(paper, flags, root / "scenarios", root, old_style=old)


def _edit(root: Path, rel: str) -> None:
    path = root / rel
    path.write_text(path.read_text() + "# changed\n")


@pytest.mark.parametrize(
    "rel, flags, moves",
    [
        ("schedulers/mine.py", " --quick", True),  # imported inside a function
        ("workloads/gen.py", " --quick", True),  # named by a "module:attr" string
        ("schedulers/__init__.py", " --quick", True),  # the package a dotted import runs first
        ("scenarios/p/c.yaml", " --quick", True),  # a cluster its scenario names
        ("cli/main.py", " --quick", True),  # the command itself
        ("emulator/backend.py", " --quick", False),  # looked up by name, but only --emulate runs it
        ("emulator/backend.py", " --quick --emulate", True),
        ("simulator/packet/__init__.py", " --quick", False),  # a backend its claims do not name
        ("simulator/packet/glue.cpp", " --quick", False),
        ("scenarios/other.py", " --quick", False),  # imported only inside another command's function
        ("scenarios/q/tool.py", " --quick", False),  # another paper's script
        ("scenarios/q/claims.yaml", " --quick", False),
    ],
)
def test_a_change_marks_a_section_stale_only_if_its_runs_can_execute_it(tmp_path, rel, flags, moves):
    root = _tree(tmp_path)
    before = _digest(root, flags)
    assert re.fullmatch(r"v2_[0-9a-f]{12}", before)
    _edit(root, rel)
    assert (_digest(root, flags) != before) == moves


def test_a_backend_its_claims_name_counts_by_any_spelling_with_its_data_files(tmp_path):
    root = _tree(tmp_path)
    claims = root / "scenarios/p/claims.yaml"
    claims.write_text(claims.read_text().replace("scenario: s.yaml}", "scenario: s.yaml, engine: ns3}"))
    assert "simulator.packet" in block.code_modules("p", " --quick", root / "scenarios", root)
    for rel in ("simulator/packet/__init__.py", "simulator/packet/glue.cpp"):
        before = _digest(root)
        _edit(root, rel)
        assert _digest(root) != before, rel


def test_a_lookup_by_name_is_followed_unless_its_backend_needs_root(tmp_path):
    root = _tree(tmp_path)
    graph = Graph.read(root)
    assert graph.lookups["scenarios.runner"] == {"emulator.backend"}
    chosen = {"railbed.backend.BACKENDS": {"fluid"}}
    assert "emulator.backend" in graph.closure(["scenarios.reproduce"], chosen)
    assert "emulator.backend" not in graph.closure(["scenarios.reproduce"], chosen, {"emulator.backend"})
    assert "simulator.packet" not in graph.closure(["scenarios.reproduce"], chosen)
    assert "simulator.packet" in graph.closure(["scenarios.reproduce"], {})  # every entry when none chosen
    with pytest.raises(KeyError, match="no module scenarios.nothing"):
        graph.closure(["scenarios.nothing"], {})


def _section(paper: str, flags: str, digest: str, commit: str = "abc1234") -> str:
    return (f"<!-- reproduce:section {paper}{flags} -->\n<!-- reproduce:inputs {digest} made at {commit} -->\n\n"
            f"### {paper}: t\n\nrows\n")  # fmt: skip


def _md(path: Path, *sections: str) -> Path:
    path.write_text(f"# r\n{BEGIN}\n\n" + "\n".join(sections) + f"{END}\n")
    return path


def test_check_judges_an_old_style_digest_by_the_rule_before(tmp_path):
    """An old digest (all code) stays current only while no code changes; a new one (the closure)
    stays current through a change its runs cannot execute."""
    root = _tree(tmp_path / "repo")
    md = _md(tmp_path / "R.md", _section("p", " --quick", _digest(root, old=True)),
             _section("p", "", _digest(root, "")))  # fmt: skip
    said: list[str] = []
    assert block.check(md, root / "scenarios", said.append, root) == 0
    _edit(root, "scenarios/other.py")
    said.clear()
    assert block.check(md, root / "scenarios", said.append, root) == 1
    assert said == ["stale since abc1234: railbed reproduce p --quick --write R.md", "1 stale section(s)"]
    _edit(root, "schedulers/mine.py")
    assert block.check(md, root / "scenarios", lambda _: None, root) == 1
    assert len(block.stale(block.block_sections(md.read_text()), root / "scenarios", root)) == 2


def _git(root: Path, *args: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def test_refresh_rewrites_an_old_digest_only_where_git_proves_it(tmp_path):
    """Three old-style sections made at one commit: one whose code is unchanged since (refreshed,
    current), one whose code changed after (refreshed to the commit's digest: still stale), one
    whose digest is not the commit's (kept: nothing proves what it was made from)."""
    root = _tree(tmp_path / "repo", TREE | {"scenarios/r/claims.yaml": "title: r\nclaims: []\n"})
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "tree")
    commit = _git(root, "rev-parse", "--short", "HEAD")
    made = {flags: _digest(root, flags, old=True) for flags in (" --quick", " --quick --emulate")}
    md = _md(tmp_path / "R.md", _section("p", " --quick", made[" --quick"], commit),
             _section("p", " --quick --emulate", made[" --quick --emulate"], commit),
             _section("r", " --quick", "0123456789ab", commit))  # fmt: skip
    _edit(root, "emulator/backend.py")  # after the commit: only the --emulate section runs it
    said: list[str] = []
    assert block.refresh_inputs(md, root / "scenarios", said.append, root) == 1
    assert said[-1] == "2 stale section(s)"
    assert f"kept: r --quick: its digest is not the old rule's at {commit}" in said
    sections = block.block_sections(md.read_text().split(BEGIN, 1)[1].split(END, 1)[0])
    digest = {key: block.INPUTS.search(text).group(1) for key, text in sections.items()}
    assert digest[("p", " --quick")] == _digest(root, " --quick")  # unchanged since: current
    assert digest[("p", " --quick --emulate")].startswith(block.V2)  # the commit's digest, not today's
    assert digest[("p", " --quick --emulate")] != _digest(root, " --quick --emulate")
    assert digest[("r", " --quick")] == "0123456789ab"
    stale = block.stale(sections, root / "scenarios", root)
    assert stale == {("p", " --quick --emulate"): commit, ("r", " --quick"): commit}
    assert f"**Stale since {commit}**" in sections[("p", " --quick --emulate")]
    assert "Stale since" not in sections[("p", " --quick")]


def _scheduler_names(paper: str) -> set[str]:
    names = set()
    claims = yaml.safe_load((HERE / paper / "claims.yaml").read_text())["claims"]
    for scenario in {c["scenario"] for c in claims if c.get("scenario")}:
        for entry in yaml.safe_load((HERE / paper / scenario).read_text()).get("schedulers") or []:
            names.add(entry if isinstance(entry, str) else entry["name"])
    return names


def test_dgtps_section_depends_on_its_schedulers_not_on_hermods_scripts_or_the_emulators_runs():
    """DGTP's files name its schedulers (not Hermod's); its testbed files carry the emulator's
    ``timeout``, so loading them imports every backend for its keys (their modules' top-level
    imports count, the emulator's testbed and run-time do not)."""
    from schedulers import REGISTRY

    mods = block.code_modules("dgtp", " --quick", HERE)
    named = {REGISTRY[name].__module__ for name in _scheduler_names("dgtp")}
    assert "schedulers.dgtp" in named and named <= mods
    assert not {"schedulers.hermod", "schedulers.leo", "schedulers.varys"} & mods
    assert {"scenarios.reproduce", "scenarios.runner", "simulator.fluid.backend", "workloads.gnn"} <= mods
    assert not {m for m in mods if m.startswith(("scenarios.hermod", "scenarios.dgtp"))}
    on_import = block._graph(ROOT).imported_with(["emulator.backend"])
    assert "emulator.backend" in mods and {m for m in mods if m.startswith("emulator")} <= on_import
    assert not {"emulator.testbed", "emulator.runtime"} & mods
    files = {str(p.relative_to(ROOT)) for p in block._files("dgtp", " --quick", HERE)}
    assert "scenarios/dgtp/claims.yaml" in files and "scenarios/dgtp/sim-products.yaml" in files
    assert not {f for f in files if f.startswith(("scenarios/hermod/", "scenarios/dgtp/draw", "emulator/runtime"))}
    assert "emulator/backend.py" in {str(p.relative_to(ROOT)) for p in block._files("dgtp", " --quick --emulate", HERE)}
    assert "emulator/runtime.py" in {str(p.relative_to(ROOT)) for p in block._files("dgtp", " --quick --emulate", HERE)}


def test_a_scenario_with_a_backends_key_counts_what_importing_the_backends_runs(tmp_path):
    root = _tree(tmp_path, TREE | {"scenarios/p/s.yaml": "cluster: c.yaml\njob: {generator: g}\ntimeout: 5\n"})
    before = _digest(root)
    _edit(root, "emulator/backend.py")  # imported by railbed.backend.owners() for its keys
    assert _digest(root) != before


def test_the_refresh_command_leaves_a_section_without_inputs_stale(tmp_path, capsys):
    """``railbed reproduce --refresh-inputs FILE``: nothing proves a section made before inputs lines
    were recorded; it stays stale, marked under its heading, and the command exits 1."""
    from cli import main

    md = _md(tmp_path / "R.md", "<!-- reproduce:section dgtp --quick -->\n\n### dgtp: t\n\nold\n")
    assert main(["reproduce", "--refresh-inputs", str(md)]) == 1
    assert "1 stale section(s)" in capsys.readouterr().out
    assert "**Stale since unknown**" in md.read_text()
    (tmp_path / "no-block.md").write_text("# r\n")
    assert main(["reproduce", "--refresh-inputs", str(tmp_path / "no-block.md")]) == 2
