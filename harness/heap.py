"""Give freed heap memory back to the kernel between the stages of a long run.

A design run holds many arms one after the other in one process. Each arm frees what it built when it closes, but
glibc's allocator keeps freed chunks below the top of its heap (and in its per-thread arenas) mapped, so the
process's resident memory only ever grows: measured with ``python -m benchmarks.arm_memory``, a LoCoMo worker's
private memory climbed arm after arm and never came down. ``malloc_trim(0)`` returns every whole free page of those
heaps to the kernel (``madvise``), which changes no object, value or result: only how much memory the process
keeps resident. Python's own small-object arenas are released by CPython when they empty; this covers the rest
(torch tensors, numpy arrays, large strings and lists, pickled buffers).

Where the C library is not glibc (musl, macOS) there is nothing to call and :func:`release_freed_heap` says so by
returning ``False``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.cache
def _malloc_trim() -> Any:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def release_freed_heap() -> bool:
    """Return the C heap's free pages to the kernel (glibc ``malloc_trim(0)``); ``True`` when it could be asked,
    ``False`` where the C library has no such call. Its cost grows with the heap it walks; it runs once per arm."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
