"""How a call's bytes reach a profiles.sandbox worker: each bytes argument through a pipe whose read end the worker
receives. The parent hands the pipe its own pages (vmsplice: no copy on its side) and the worker reads them straight
into its bytes (one copy in all). A memory file (memfd) costs a second copy and fresh pages on both sides: on a 43
MiB upload, ~60 ms of CPU and ~150 ms of wall time against ~30 ms and ~65 ms (measured on 2 shared CPU cores).
A large upload is read into a bytes object the worker asks the kernel to back with huge pages (MADV_HUGEPAGE: 22
faults of 2 MiB instead of ~11,000 of 4 KiB for 43 MiB; the pipe's read took ~31 ms, ~17 ms so, measured on 2 shared
CPU cores), since its pages are fresh on every call (glibc maps any buffer over 32 MiB anew).
The catalogue the fork server keeps (profiles.sandbox.Kept) still travels in a memory file: once, not per call."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import select
import socket
import time

F_SETPIPE_SZ = 1031  # linux/fcntl.h
PIPE_BYTES = 1 << 20  # /proc/sys/fs/pipe-max-size's default: the largest pipe an unprivileged process may ask for
SPLICE_F_NONBLOCK = 2  # linux/splice.h
MADV_HUGEPAGE = 14  # linux/mman.h
HUGE_PAGE = 2 << 20  # x86-64 and arm64 (4 KiB base pages): a transparent huge page
HUGE_FROM = 8 << 20  # smaller uploads: the plain read (a few huge pages would not pay their zeroing)


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


try:
    _vmsplice = ctypes.CDLL(None, use_errno=True).vmsplice
    _vmsplice.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_size_t, ctypes.c_uint]
    _vmsplice.restype = ctypes.c_ssize_t
except (OSError, AttributeError):  # not glibc on Linux: plain writes
    _vmsplice = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _read, _madvise = _libc.read, _libc.madvise
    _read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    _read.restype = ctypes.c_ssize_t
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    # CPython's C API: a bytes object of a given size whose contents the caller writes before anyone else sees it
    _new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
    _new_bytes.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
    _new_bytes.restype = ctypes.py_object
except (OSError, AttributeError):  # not glibc, or not CPython: the plain read
    _read = None
_BYTES_DATA = bytes.__basicsize__ - 1  # where a bytes object's contents start (its basic size counts the final NUL)


def receive_blobs(sock_fd: int, sizes: list[int]) -> list[bytes]:
    """In the worker: the call's bytes arguments, each read from its pipe straight into its bytes."""
    if not sizes:
        return []
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        _msg, fds, _flags, _addr = socket.recv_fds(sock, 1, len(sizes))
    out = []
    for fd, size in zip(fds, sizes, strict=True):
        if _read is not None and size >= HUGE_FROM:
            try:
                data = _read_huge(fd, size)
            finally:
                os.close(fd)
        else:
            with open(fd, "rb") as fh:  # a buffered read of `size` reads into the result itself past its small buffer
                data = fh.read(size)
        if len(data) != size:
            raise EOFError(f"the upload's pipe ended at byte {len(data):,} of {size:,}")
        out.append(data)
    return out


def _read_huge(fd: int, size: int) -> bytes:
    """`size` bytes from the pipe `fd`, read straight into a new bytes object backed by huge pages where the kernel
    has them (a hint: without them, the same read with 4 KiB pages)."""
    data = _new_bytes(None, size)
    addr = id(data) + _BYTES_DATA
    start, end = -(-addr // HUGE_PAGE) * HUGE_PAGE, (addr + size) // HUGE_PAGE * HUGE_PAGE
    if end > start:
        _madvise(start, end - start, MADV_HUGEPAGE)
    at = 0
    while at < size:
        n = _read(fd, addr + at, size - at)
        if n < 0:
            err = ctypes.get_errno()
            if err == errno.EINTR:
                continue
            raise OSError(err, os.strerror(err))
        if n == 0:
            raise EOFError(f"the upload's pipe ended at byte {at:,} of {size:,}")
        at += n
    return data


def send_blobs(sock_fd: int, blobs: list, deadline: float) -> None:
    """In the parent: each bytes argument into a pipe whose read end goes to the child, written while it reads. Stops
    quietly at `deadline` (the caller's wall limit then stops the child); a child that died raises BrokenPipeError.
    The pipe refers to the argument's pages until the child has read them or is gone; the caller returns only after
    either, so no later content of those pages can reach the child."""
    if not blobs:
        return
    pipes = [os.pipe() for _ in blobs]
    try:
        for r, w in pipes:
            with contextlib.suppress(OSError):
                fcntl.fcntl(w, F_SETPIPE_SZ, PIPE_BYTES)
            os.set_blocking(w, False)
            os.set_inheritable(r, False)
        with socket.socket(fileno=os.dup(sock_fd)) as sock:
            socket.send_fds(sock, [b"F"], [r for r, _w in pipes])
        for (r, w), blob in zip(pipes, blobs, strict=True):
            os.close(r)
            if not _fill(w, memoryview(blob).cast("B"), deadline):
                return
    finally:
        for r, w in pipes:
            for fd in (r, w):
                with contextlib.suppress(OSError):
                    os.close(fd)


def _fill(w: int, view: memoryview, deadline: float) -> bool:
    """Write `view` into the pipe `w` (non-blocking); False when `deadline` came first."""
    import numpy as np

    base = np.frombuffer(view, np.uint8).ctypes.data if len(view) else 0  # read-only buffers have an address too
    splice, at = _vmsplice is not None, 0
    while at < len(view):
        try:
            if splice:
                iov = _IoVec(base + at, len(view) - at)
                n = _vmsplice(w, ctypes.byref(iov), 1, SPLICE_F_NONBLOCK)
                if n < 0:
                    err = ctypes.get_errno()
                    if err in (errno.ENOSYS, errno.EPERM, errno.EINVAL):  # not allowed here: plain writes
                        splice = False
                        continue
                    raise OSError(err, os.strerror(err))
            else:
                n = os.write(w, view[at:])
            at += n
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [w], [], left)[1]:
                return False
    return True


def memory_file(data: bytes) -> int:
    """A memory file holding `data` (the kernel's one copy)."""
    fd = os.memfd_create("specplan-kept", os.MFD_CLOEXEC)
    view, at = memoryview(data).cast("B"), 0
    try:
        while at < len(view):
            at += os.write(fd, view[at:])
    except OSError:
        os.close(fd)
        raise
    return fd


def read_memory_file(fd: int) -> bytes:
    """A memory file's bytes, read from its start; closes it."""
    size, parts, at = os.fstat(fd).st_size, [], 0
    try:
        while at < size:
            piece = os.pread(fd, size - at, at)
            if not piece:
                raise EOFError(f"the memory file ended at byte {at:,} of {size:,}")
            parts.append(piece)
            at += len(piece)
    finally:
        os.close(fd)
    return parts[0] if len(parts) == 1 else b"".join(parts)
