"""How a call's bytes reach a profiles.sandbox child: each bytes argument through a pipe whose read end the child
receives. The parent hands the pipe its own pages (vmsplice: no copy on its side) and the child reads them straight
into its bytes (one copy in all). A memory file (memfd) costs a second copy and fresh pages on both sides: on a 43
MiB upload, ~60 ms of CPU and ~150 ms of wall time against ~30 ms and ~65 ms (measured on 2 shared CPU cores).
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


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


try:
    _vmsplice = ctypes.CDLL(None, use_errno=True).vmsplice
    _vmsplice.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_size_t, ctypes.c_uint]
    _vmsplice.restype = ctypes.c_ssize_t
except (OSError, AttributeError):  # not glibc on Linux: plain writes
    _vmsplice = None


def receive_blobs(sock_fd: int, sizes: list[int]) -> list[bytes]:
    """In the child: the call's bytes arguments, each read from its pipe straight into its bytes."""
    if not sizes:
        return []
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        _msg, fds, _flags, _addr = socket.recv_fds(sock, 1, len(sizes))
    out = []
    for fd, size in zip(fds, sizes, strict=True):
        with open(fd, "rb") as fh:  # a buffered read of `size` reads into the result itself past its small buffer
            data = fh.read(size)
        if len(data) != size:
            raise EOFError(f"the upload's pipe ended at byte {len(data):,} of {size:,}")
        out.append(data)
    return out


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
