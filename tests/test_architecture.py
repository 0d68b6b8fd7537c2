"""One-way dependencies (DESIGN.md): planner imports numpy/scipy only; only app.py and views/ import
streamlit; torch and vllm are imported inside the functions that need them."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)


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
        if f.name == "cli.py":
            bad -= {"profiles"}  # the CLI joins planner and profiles, inside a function
        assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_app_and_views_import_streamlit():
    for pkg in ("planner", "profiles", "calibration"):
        for f in _files(pkg):
            assert "streamlit" not in set(_imports(f, top_level_only=False)), f"{f.relative_to(ROOT)}"


def test_torch_and_vllm_are_never_imported_at_module_level():
    for pkg in ("planner", "profiles", "calibration", "views"):
        for f in _files(pkg):
            top = set(_imports(f, top_level_only=True))
            assert not top & {"torch", "vllm", "transformers"}, f"{f.relative_to(ROOT)} imports {top}"


def test_profiles_do_not_import_calibration_or_views():
    for f in _files("profiles"):
        assert not set(_imports(f, top_level_only=False)) & {"calibration", "views", "streamlit"}
