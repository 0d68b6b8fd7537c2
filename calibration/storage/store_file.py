"""A SQLite store file replaced or removed while a Store holds connections to it (calibration.storage.store).

SQLite finds a database's write-ahead log and its index by name: `<file>-wal` and `<file>-shm`, beside the file,
whatever file now has that name. After `mv backup.db store.db` under a running app, the replaced file's -wal (its
last transactions, not yet copied into it) sits beside the backup. Closing the old connections does not remove it:
SQLite skips the checkpoint, and the deletion that follows it, for a file that has moved (sqlite3PagerClose's
databaseIsUnmoved). The next connection to open the name then reads that log as the backup's: the backup comes back
with the replaced file's pages in it, and `PRAGMA integrity_check` still says "ok".

So a Store watches the file by (device, inode) and keeps the -wal it saw beside the file its connections opened
held open: an open file keeps its inode number, so "the -wal now beside the file is the one held" is an exact test
of identity, never a number reused by a new file. When the file is replaced, that -wal and the -shm beside it are
removed before any connection opens the new file (connections still open on the old file keep theirs; what they
write goes with the old file). A -wal that is not the held one belongs to the new file (another process opened it
already) and is left alone, with its -shm. Removals take a lock on the folder, so two processes that notice the
replacement at once cannot remove a log the other just created.

Not covered: a process that never opened the old file (started after the `mv`) while another process still holds the
old file open cannot tell the logs apart. Restore a backup with the app and jobs stopped, or through SQLite
(`sqlite3 store.db ".restore backup.db"`), never by moving a file over a store in use (README, "Backups").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

FileId = tuple[int, int]  # (st_dev, st_ino)


def file_id(path: Path | str) -> FileId | None:
    """(device, inode) of `path`, None when nothing has that name."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive flock on the folder (no extra file beside the store); none where flock is not available."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: no lock
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without flock (some network mounts): no lock
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


class FileWatch:
    """The SQLite file a Store's connections opened, and the -wal seen beside it (held open).

    Only the -wal is held: SQLite locks the -shm (POSIX locks, which closing any descriptor of the file would release
    for the whole process), never the -wal. The -shm goes with the held -wal: while that -wal still has its name, no
    other process has removed the old file's logs, and whatever -shm is beside it indexes that -wal."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file_id: FileId | None = None  # the file the Store's connections opened; None until first seen
        self._wal: BinaryIO | None = None
        self._lock = threading.Lock()

    def _side_path(self, suffix: str) -> Path:
        return Path(f"{self.path}{suffix}")

    def note_side_files(self) -> None:
        """After a connection used the file: hold the -wal now beside it. Nothing is noted when the file is no longer
        the one the connections opened (what is beside it may be the new file's)."""
        with self._lock:
            if self.file_id is None or file_id(self.path) != self.file_id:
                return
            p = self._side_path("-wal")
            now = file_id(p)
            if now is None or (self._wal is not None and _id_of(self._wal) == now):
                return
            try:
                f = open(p, "rb", buffering=0)  # noqa: SIM115 - held open on purpose: its inode is the identity
            except OSError:
                return
            if file_id(self.path) != self.file_id:  # replaced meanwhile: what was opened may be the new file's
                f.close()
                return
            if self._wal is not None:
                self._wal.close()
            self._wal = f

    def drop_stale_side_files(self) -> list[str]:
        """The file was replaced or removed: when the -wal held is still beside it (no one removed it yet), remove
        the -shm and that -wal, before any connection opens the new file; returns the names removed."""
        removed: list[str] = []
        with self._lock, _folder_lock(self.path.parent):
            held, self._wal = self._wal, None
            if held is None:
                return removed
            try:
                if file_id(self._side_path("-wal")) != _id_of(held):  # removed already: the logs there are new
                    return removed
                for suffix in ("-shm", "-wal"):  # the index first: a -shm without its -wal would be trusted
                    p = self._side_path(suffix)
                    try:
                        p.unlink()
                        removed.append(p.name)
                    except FileNotFoundError:
                        pass
                    except OSError:  # a folder this process cannot write: the next connection finds them
                        break
            finally:
                held.close()
        return removed


def _id_of(f: BinaryIO) -> FileId:
    st = os.fstat(f.fileno())
    return st.st_dev, st.st_ino
