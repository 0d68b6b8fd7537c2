"""The server process's allocator, set once: uploads of up to 100 MiB pass through Streamlit's upload handler, which
holds several copies of the body while it parses it. glibc serves such buffers from its heap once its mmap threshold
has grown (it grows after each large free, up to 32 MiB), and a heap does not shrink below its highest live block, so
memory freed after one refused upload stayed with the process and the next upload's copies came on top (+293 MB peak
over the rendered page after 26 refused uploads, +228 MB with the threshold fixed:
tests/app/test_bombs_upload_browser.py). A fixed 128 KiB threshold (glibc's own default, made static:
mallopt(M_MMAP_THRESHOLD) also stops the dynamic adjustment) serves every large buffer with mmap, so it goes back to the
OS when it is freed."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

M_MMAP_THRESHOLD = -3  # glibc malloc.h
MMAP_THRESHOLD_BYTES = 128 * 1024


@functools.cache
def return_large_buffers_to_os() -> bool:
    """Fix glibc's mmap threshold for this process (once); False where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
