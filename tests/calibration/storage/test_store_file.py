"""A SQLite store file removed or replaced while a Store (an app's, kept for hours) lives: the next write goes to a
file that exists, and reads show that file, never the removed one. Real files, one Store object throughout."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from calibration.storage import kept_traffic as K
from calibration.storage.store import Store


def _paths(path: Path) -> list[Path]:
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


def test_a_write_after_the_file_is_removed_lands_in_a_new_file(tmp_path: Path):
    path = tmp_path / "cal.db"
    s = Store(f"sqlite:///{path}")
    first = s.create_run("engine", {"n": 1})
    assert [r.run_id for r in s.list_runs()] == [first]
    os.remove(path)  # what `rm calibration.db` does while the app runs; the -wal and -shm files stay
    assert s.list_runs() == []  # a read shows the file that is there: none
    second = s.create_run("engine", {"n": 2})
    assert path.is_file()
    fresh = Store(f"sqlite:///{path}")
    assert [r.run_id for r in fresh.list_runs()] == [second]
    assert s.get_run(second).spec == {"n": 2}
    assert s.set_status(second, "running")  # later writes reach the new file too
    assert fresh.get_run(second).status == "running"


def test_every_file_of_the_store_removed_between_two_writes(tmp_path: Path):
    path = tmp_path / "cal.db"
    s = Store(f"sqlite:///{path}")
    s.create_run("engine", {})
    for p in _paths(path):
        p.unlink(missing_ok=True)
    run = s.create_run("engine", {"after": True})
    assert [r.run_id for r in Store(f"sqlite:///{path}").list_runs()] == [run]


def test_a_replaced_file_is_read_and_written_in_its_place(tmp_path: Path):
    path, other = tmp_path / "cal.db", tmp_path / "other.db"
    s = Store(f"sqlite:///{path}")
    s.create_run("engine", {"store": "first"})
    o = Store(f"sqlite:///{other}")
    kept = o.create_run("engine", {"store": "second"})
    o.close()
    for p in _paths(path):
        p.unlink(missing_ok=True)
    shutil.copy(other, path)  # a backup restored over the store
    assert [r.run_id for r in s.list_runs()] == [kept]
    new = s.create_run("engine", {"store": "restored"})
    assert {r.run_id for r in Store(f"sqlite:///{path}").list_runs()} == {kept, new}


def test_a_kept_profile_after_the_store_file_is_removed(tmp_path: Path, monkeypatch):
    path = tmp_path / "cal.db"
    monkeypatch.setenv("SPECPLAN_STORE_URL", f"sqlite:///{path}")
    first = K.keep("a.csv", b"timestamp,workload\n1,chat\n", None)
    assert K.kept(first) is not None
    os.remove(path)
    assert K.kept(first) is None  # the removed file's profiles are gone with it
    second = K.keep("b.csv", b"timestamp,workload\n2,code\n", None)
    name, data, _ = K.get(Store(f"sqlite:///{path}"), second)
    assert (name, data) == ("b.csv", b"timestamp,workload\n2,code\n")


def _backup(path: Path, to: Path) -> None:
    """`sqlite3 store.db ".backup copy.db"`: SQLite's online backup, a consistent copy of a store in use."""
    src, dst = sqlite3.connect(path), sqlite3.connect(to)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def test_a_backup_moved_over_a_running_store_is_read_as_the_backup(tmp_path: Path):
    """The running store's last writes are still in its -wal when the backup is moved over the file: the store reads
    the backup's runs (not the replaced file's log replayed into it), and writes to it."""
    path, copy = tmp_path / "store.db", tmp_path / "copy.db"
    s = Store(f"sqlite:///{path}")
    backed_up = [s.create_run("engine", {"i": i}) for i in range(5)]
    _backup(path, copy)
    later = [s.create_run("engine", {"i": i}) for i in range(5, 8)]
    assert Path(f"{path}-wal").stat().st_size > 0  # the later runs sit in the log beside the file
    os.replace(copy, path)  # `mv copy.db store.db` under the running app
    assert sorted(r.run_id for r in s.list_runs()) == sorted(backed_up)
    with pytest.raises(KeyError):
        s.get_run(later[0])
    new = s.create_run("engine", {"after": "restore"})
    s.close()
    with sqlite3.connect(path) as c:  # a fresh reader: the backup and the write made after it, a sound file
        ids = {r[0] for r in c.execute("SELECT run_id FROM runs")}
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert ids == {*backed_up, new}


def test_a_backup_moved_over_the_store_while_another_store_object_holds_it(tmp_path: Path):
    """Two Store objects (the app and a job) hold the file when it is replaced: the first to notice removes the old
    log; the other then leaves alone the log the new file has since, and neither reads the old file's runs."""
    path, copy = tmp_path / "store.db", tmp_path / "copy.db"
    app, job = Store(f"sqlite:///{path}"), Store(f"sqlite:///{path}")
    backed_up = [app.create_run("engine", {"i": i}) for i in range(5)]
    assert len(job.list_runs()) == 5
    _backup(path, copy)
    job.create_run("engine", {"late": 1})
    app.create_run("engine", {"late": 2})
    os.replace(copy, path)
    assert sorted(r.run_id for r in app.list_runs()) == sorted(backed_up)
    after = app.create_run("engine", {"after": "restore"})  # in the new file's own log
    assert sorted(r.run_id for r in job.list_runs()) == sorted([*backed_up, after])
    assert job.create_run("engine", {"job": "after"}) in {r.run_id for r in app.list_runs()}


def _job(url: str, wrote, replaced, out) -> None:
    """A job process: writes through its own Store, keeps its connection while the file is replaced, writes again."""
    s = Store(url)
    s.create_run("engine", {"job": "before"})
    wrote.set()
    replaced.wait(60)
    try:
        out.put(s.create_run("engine", {"job": "after"}))
    except Exception as exc:  # noqa: BLE001 - the parent reports what the store raised
        out.put(f"{type(exc).__name__}: {exc}")


def test_a_backup_moved_over_the_store_while_a_job_process_holds_it(tmp_path: Path):
    """The job's last write is in the log when the backup is moved over the file, and the job still holds its
    connection: the app reads the backup, and the job's next write lands in the backup's file."""
    import multiprocessing as mp

    path, copy = tmp_path / "store.db", tmp_path / "copy.db"
    url = f"sqlite:///{path}"
    app = Store(url)
    backed_up = [app.create_run("engine", {"i": i}) for i in range(5)]
    _backup(path, copy)
    ctx = mp.get_context("spawn")
    wrote, replaced, out = ctx.Event(), ctx.Event(), ctx.Queue()
    job = ctx.Process(target=_job, args=(url, wrote, replaced, out))
    job.start()
    try:
        assert wrote.wait(60)
        assert len(app.list_runs()) == 6  # the app sees the job's run (and holds the log too)
        os.replace(copy, path)
        assert sorted(r.run_id for r in app.list_runs()) == sorted(backed_up)
        replaced.set()
        after = out.get(timeout=60)
    finally:
        job.join(60)
    assert sorted(r.run_id for r in app.list_runs()) == sorted([*backed_up, after])
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
