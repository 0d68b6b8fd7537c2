"""One-way dependencies (docs/architecture.md): planner imports numpy/scipy only; only app.py and views/ import
streamlit; report/ (the board report) reads the planner and no page; torch and vllm are imported inside the
functions that need them; no import cycle between files; no file so long that a newcomer cannot hold it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)
PACKAGES = ("planner", "profiles", "calibration", "views", "cli", "report", "i18n")
MAX_FILE_LINES = 600
MAX_PLAN_LINES = 300  # planner/plan.py orchestrates; the formulas live in the files named after them


def _imports(path: Path, top_level_only: bool):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]


def _files(pkg: str):
    return sorted((ROOT / pkg).rglob("*.py"))


def test_planner_imports_only_numpy_scipy_and_itself():
    allowed = STDLIB | {"numpy", "scipy", "planner"}
    for f in _files("planner"):
        bad = set(_imports(f, top_level_only=False)) - allowed
        if f.relative_to(ROOT).as_posix() == "planner/__main__.py":
            bad -= {"cli"}  # `python -m planner` runs the CLI package (cli/), which joins planner, profiles, report
        assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_board_report_reads_the_planner_and_no_page():
    for f in _files("report"):
        bad = set(_imports(f, top_level_only=False)) & {"views", "streamlit", "profiles", "calibration", "app"}
        assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_app_and_views_import_streamlit():
    for pkg in ("planner", "profiles", "calibration", "report"):
        for f in _files(pkg):
            assert "streamlit" not in set(_imports(f, top_level_only=False)), f"{f.relative_to(ROOT)}"


def test_torch_and_vllm_are_never_imported_at_module_level():
    for pkg in PACKAGES:
        for f in _files(pkg):
            top = set(_imports(f, top_level_only=True))
            assert not top & {"torch", "vllm", "transformers"}, f"{f.relative_to(ROOT)} imports {top}"


def test_profiles_do_not_import_calibration_or_views():
    for f in _files("profiles"):
        assert not set(_imports(f, top_level_only=False)) & {"calibration", "views", "streamlit"}


def test_the_translations_read_the_planner_and_no_page():
    """i18n (the catalogues, tr, the reader's number formats) sits under views/ and report/: it reads the standard
    library, PyYAML and the planner only."""
    for f in _files("i18n"):
        bad = set(_imports(f, top_level_only=False)) - (STDLIB | {"yaml", "planner", "i18n"})
        assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}"


# --- import cycles between files ------------------------------------------------------------------------------


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The file-module an import of `name` loads: the longest prefix of `name` that is a module under root."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in modules:
            return cand
    return None


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules (files under root, in `packages`) it imports, at module level or inside a function.

    `from pkg import name` counts pkg.name where that is a module, else pkg (its __init__); relative imports are
    resolved against the importing module's package. A package's __init__ is a file like any other.
    """
    files = [f for pkg in packages for f in sorted((root / pkg).rglob("*.py"))]
    modules = {_module_name(root, f): f for f in files}
    graph: dict[str, set[str]] = {}
    for mod, f in modules.items():
        is_pkg = f.name == "__init__.py"
        here = mod.split(".") if is_pkg else mod.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), filename=str(f))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if base else a.name for a in node.names]
            for t in targets:
                dep = _resolve(t, modules)
                if dep is not None and dep != mod:
                    deps.add(dep)
        graph[mod] = deps
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module, as one cycle through it (a -> b -> ... -> a)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's algorithm; the graphs here are a few hundred nodes, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return [_cycle_through(graph, set(c)) for c in sorted(comps)]


def _cycle_through(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest cycle from the component's first module back to itself, staying inside the component."""
    start = min(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {sorted(comp)}")  # a strongly connected component always has one


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_cycle_finder_finds_no_cycle_in_a_one_way_package(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\nimport numpy\n",
                      "pkg/b.py": "from . import c\n", "pkg/c.py": "import os\n",
                      "other/__init__.py": "", "other/d.py": "from pkg.a import x\n"})
    graph = import_graph(tmp_path, ("pkg", "other"))
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c"} and graph["other.d"] == {"pkg.a"}
    assert find_cycles(graph) == []


def test_cycle_finder_names_a_cycle_through_function_level_and_relative_imports(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import f\n",
                      "pkg/b.py": "def f():\n    from .c import g\n    return g\n",
                      "pkg/c.py": "import pkg.a\n", "pkg/d.py": "from pkg import a\n",
                      "pkg/sub/__init__.py": "from ..d import x\n", "pkg/e.py": "from pkg.sub import y\n"})
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.sub"] == {"pkg.d"} and graph["pkg.e"] == {"pkg.sub"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_cycle_finder_counts_a_package_init_that_imports_back(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "from pkg.a import x\n", "pkg/a.py": "from pkg import helper\n",
                      "pkg/helper.py": "", "pkg/b.py": "from pkg import nothing_here\n"})
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == {"pkg.helper"} and graph["pkg.b"] == {"pkg"}
    _write(tmp_path, {"pkg/helper.py": "import pkg\n"})
    assert find_cycles(import_graph(tmp_path, ("pkg",))) == [["pkg", "pkg.a", "pkg.helper", "pkg"]]


def test_no_import_cycle_between_files():
    cycles = find_cycles(import_graph(ROOT, PACKAGES))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


# --- file sizes -------------------------------------------------------------------------------------------------


def _long_files(root: Path, packages: tuple[str, ...], limit: int) -> list[str]:
    out = []
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            n = len(f.read_text(encoding="utf-8").splitlines())
            if n > limit:
                out.append(f"{f.relative_to(root).as_posix()} ({n} lines)")
    return out


def test_line_counter_names_only_the_long_files(tmp_path):
    _write(tmp_path, {"pkg/short.py": "x = 1\n" * 3, "pkg/long.py": "x = 1\n" * 4, "pkg/sub/long.py": "y\n" * 9})
    assert _long_files(tmp_path, ("pkg",), 3) == ["pkg/long.py (4 lines)", "pkg/sub/long.py (9 lines)"]


@pytest.mark.parametrize("pkg", (*PACKAGES, "tests"))
def test_no_file_over_600_lines(pkg):
    long = _long_files(ROOT, (pkg,), MAX_FILE_LINES)
    assert not long, f"over {MAX_FILE_LINES} lines: {', '.join(long)}"


def test_plan_py_is_orchestration_only():
    n = len((ROOT / "planner" / "plan.py").read_text(encoding="utf-8").splitlines())
    assert n < MAX_PLAN_LINES, f"planner/plan.py has {n} lines; at most {MAX_PLAN_LINES - 1}"


# --- floors: each package's sub-packages import only their own floor and the floors below ------------------------

# bottom to top; a module belongs to the longest prefix listed (the package root's own modules are listed by name)
FLOORS = {
    "planner": [
        ("planner.types",),
        ("planner.physics",),  # per-step time of one replica: roofline, networks, serving, engines, deploy flags
        ("planner.request", "planner.answer", "planner.context", "planner.formatting", "planner.price",
         "planner.fleet", "planner"),  # the spine: what goes in, what comes out, the fleet record, the price rule
        ("planner.acceptance",),  # acceptance rates, tiers, the measured library, trees
        ("planner.search",),  # operating points: candidates, drafting cost, memory, the K x batch search
        ("planner.money",),  # fleet sizing, bills, spend, economics, K per hour
        ("planner.uncertainty",),  # Monte Carlo, sensitivity, risk, payback draws
        ("planner.decision",),  # verdict, levers, hardware choice, assumptions
        ("planner.plan",),  # the one answer
        ("planner.checks",),  # what re-runs the plan: published claims, the SLO knee
        ("planner.__main__",),
    ],
    "calibration": [
        ("calibration.fitting",),  # fits of shipped parameters to published data (tools/fit_*.py)
        ("calibration.storage",),  # the store, its records, kept uploads, calibrated profiles
        ("calibration.harness",),  # engine settings and checks, child processes, the protocol, metrics, machine load
        ("calibration.targets",),  # what can be measured: registry, catalogue, model assets, heads
        ("calibration.measure",),  # one measurement: its spec, the engine and serve paths, the microbenchmark
        ("calibration.run",),  # jobs, runners, admission, progress
        ("calibration.analysis",),  # fits of stored runs, predicted vs measured, reports
        ("calibration", "calibration.__main__"),
    ],
}
MAX_MODULES_PER_FOLDER = 15


def _floor(mod: str, floors: list[tuple[str, ...]]) -> int | None:
    best, rank = -1, None
    for i, names in enumerate(floors):
        for n in names:
            if (mod == n or mod.startswith(n + ".")) and len(n) > best:
                best, rank = len(n), i
    return rank


def floor_violations(graph: dict[str, set[str]], floors: list[tuple[str, ...]]) -> list[str]:
    out = []
    for mod, deps in sorted(graph.items()):
        a = _floor(mod, floors)
        for dep in sorted(deps):
            b = _floor(dep, floors)
            if a is not None and b is not None and b > a:
                out.append(f"{mod} -> {dep}")
    return out


def test_floor_checker_names_an_import_that_runs_up(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/low/__init__.py": "", "pkg/low/a.py": "from pkg.high import b\n",
                      "pkg/high/__init__.py": "", "pkg/high/b.py": "from pkg.low import a\n"})
    graph = import_graph(tmp_path, ("pkg",))
    assert floor_violations(graph, [("pkg.low",), ("pkg.high",)]) == ["pkg.low.a -> pkg.high.b"]


@pytest.mark.parametrize("pkg", sorted(FLOORS))
def test_imports_never_run_up_a_floor(pkg):
    graph = {m: d for m, d in import_graph(ROOT, (pkg,)).items()}
    every = set(graph)
    unplaced = sorted(m for m in every if _floor(m, FLOORS[pkg]) is None)
    assert not unplaced, f"modules on no floor of {pkg}: {unplaced}"
    bad = floor_violations(graph, FLOORS[pkg])
    assert not bad, "imports that run up a floor: " + "; ".join(bad)


@pytest.mark.parametrize("pkg", (*PACKAGES, "cli"))
def test_no_folder_holds_more_than_15_modules(pkg):
    for folder in [ROOT / pkg, *[p for p in (ROOT / pkg).rglob("*") if p.is_dir()]]:
        mods = [f for f in folder.glob("*.py") if f.name not in ("__init__.py", "__main__.py")]
        assert len(mods) <= MAX_MODULES_PER_FOLDER, f"{folder.relative_to(ROOT)} holds {len(mods)} modules"


def private_imports(root: Path, packages: tuple[str, ...]) -> list[str]:
    """Imports of an underscore name (or attribute reads `module._name`) from another module."""
    files = [f for pkg in packages for f in sorted((root / pkg).rglob("*.py"))]
    modules = {_module_name(root, f): f for f in files}
    out = []
    for mod, f in modules.items():
        aliases: dict[str, str] = {}
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    if target in modules:
                        aliases[a.asname or a.name] = target
                    elif a.name.startswith("_") and not a.name.startswith("__") and node.module in modules:
                        out.append(f"{mod} imports {node.module}.{a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in modules:
                        aliases[a.asname] = a.name
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                out.append(f"{mod} reads {aliases[node.value.id]}.{node.attr}")
    return sorted(set(out))


def test_private_import_checker_sees_names_and_module_attributes(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "_x = 1\ny = 2\n", "pkg/b.py": "from pkg.a import _x\n",
                      "pkg/sub/__init__.py": "", "pkg/sub/c.py": "from pkg.a import _x, y\n",
                      "pkg/sub/d.py": "from pkg import a as m\nz = m._x + m.y\n"})
    assert private_imports(tmp_path, ("pkg",)) == ["pkg.b imports pkg.a._x", "pkg.sub.c imports pkg.a._x",
                                                  "pkg.sub.d reads pkg.a._x"]


def test_no_module_imports_another_modules_private_names():
    bad = private_imports(ROOT, (*PACKAGES, "cli"))
    assert not bad, "private names used outside their module: " + "; ".join(bad)
