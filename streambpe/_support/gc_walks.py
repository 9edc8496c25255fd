"""Lists of ids kept out of the cyclic garbage collector's walks while a batch is built.

CPython's cyclic garbage collector runs after every few hundred new
containers and walks every item of every young list, holding the GIL. A
list of ids holds no cycle, but a walk still reads each id: ``encode_batch``
on two threads built a thousand lists (2 million o200k ids), and the
collections along the way walked them for 20-70 ms of a 300-400 ms batch,
while the other thread waited for the GIL to hand over its own lists
(``gc.callbacks`` and ``perf sched``, measured).

:func:`untrack` takes the lists out of the collector's sight as each thread
makes them, and :func:`track` puts them back before the caller gets them,
so the caller holds ordinary lists; a caller that drops them before the
next collection spares the walk altogether. Where the interpreter does not
offer the two calls (not CPython), both leave the lists as they are.

>>> import gc
>>> ids = [[1, 2], [3]]
>>> untrack(ids); [gc.is_tracked(each) for each in ids]
[False, False]
>>> track(ids); [gc.is_tracked(each) for each in ids]
[True, True]
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any


@cache
def _c_api(name: str) -> Callable[[Any], None] | None:
    """CPython's ``name`` (``PyObject_GC_Track`` or ``PyObject_GC_UnTrack``), or None elsewhere."""
    if sys.implementation.name != "cpython":
        return None
    import ctypes  # imported on first use: most programs never build a batch

    function = getattr(ctypes.pythonapi, name, None)
    if function is None:
        return None
    function.argtypes = [ctypes.py_object]
    function.restype = None
    return function  # type: ignore[no-any-return]


def untrack(lists: Iterable[list[int]]) -> None:
    """Keep ``lists`` (of ints only, so in no cycle) out of the collector's walks."""
    untrack_one = _c_api("PyObject_GC_UnTrack")
    if untrack_one is None:
        return
    for each in lists:
        untrack_one(each)


def track(lists: Iterable[list[int]]) -> None:
    """Undo :func:`untrack`: the collector sees ``lists`` again, as any list."""
    track_one = _c_api("PyObject_GC_Track")
    if track_one is None:
        return
    for each in lists:
        # Tracking a tracked object is a fatal error in CPython: a list that
        # came back from a worker process, say, was never untracked.
        if not gc.is_tracked(each):
            track_one(each)
