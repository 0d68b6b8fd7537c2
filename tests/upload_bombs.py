"""Every hostile upload the benchmarks build, by label: the tabular and JSON bombs (benchmarks.bench_traffic_ingest),
the xlsx bombs (benchmarks.bench_xlsx_ingest) and the per-reader cases (benchmarks.bench_reader_bombs, at the
sizes the tests use). The running app (tests/app/test_bombs_upload_browser.py) and the CLI
(tests/cli/test_cli_bombs.py) must refuse each one in words.

Each set is written once per test run (`built_once`), into a folder every xdist worker of the run shares, and read by
every test file that needs it: the tabular set takes ~12 s and the reader set ~17 s to write, and five files read
them (tests/profiles/test_traffic_bombs.py, test_reader_bombs.py, test_xlsx_bombs.py and the two above)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This test run's folder: under pytest-xdist each worker's base temp is `<run>/popen-gwN` (the run's folder
    is its parent), without it the base temp is the run's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], dict[str, Path]]) -> dict[str, Path]:
    """label -> path of the set `name`, written by `build(folder)` the first time a test of this run asks for it;
    a worker that asks while another writes it waits for the file lock, then reads the finished set. The files
    are only read afterwards."""
    root = _run_folder(tmp_path_factory) / "upload-bombs"
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not manifest.exists():
            built = build(root / name)
            tmp = manifest.with_suffix(".tmp")
            tmp.write_text(json.dumps({label: str(path) for label, path in built.items()}))
            tmp.replace(manifest)
    return {label: Path(path) for label, path in json.loads(manifest.read_text()).items()}


def tabular_bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from benchmarks.bench_traffic_ingest import make_bombs

    return built_once(tmp_path_factory, "tabular", make_bombs)


def xlsx_bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from benchmarks.bench_xlsx_ingest import make_xlsx_bombs

    return built_once(tmp_path_factory, "xlsx", make_xlsx_bombs)


def reader_bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from benchmarks.bench_reader_bombs import make_reader_bombs

    return built_once(tmp_path_factory, "reader", lambda d: make_reader_bombs(d, small=True))


def _nested_xlsx(d: Path) -> dict[str, Path]:
    from benchmarks.bench_traffic_ingest import make_nested_xlsx

    d.mkdir(parents=True, exist_ok=True)
    # ~825 KB that an in-process XML reader turns into a 1.4 GB peak; refused by the reader's depth bound
    return {"10,000,000 nested <a> elements": make_nested_xlsx(d / "nested.xlsx")}


def every_upload_bomb(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every set above, by label."""
    out = dict(tabular_bombs(tmp_path_factory))
    out.update({f"xlsx: {k}": v for k, v in xlsx_bombs(tmp_path_factory).items()})
    out.update({f"xlsx: {k}": v for k, v in built_once(tmp_path_factory, "nested", _nested_xlsx).items()})
    # xlsx elements before row 1 and far shared strings, Mooncake ids past ceil(input_length / 512) and negative
    # timestamps, Parquet dictionaries, long JSON numbers, deep nesting, files that are not text tables: each class,
    # not each size, is what must be refused
    out.update({f"reader: {k}": v for k, v in reader_bombs(tmp_path_factory).items()})
    return out
