"""Run one independent analysis pass on the machine's second core while this process does the
others: the pass runs in a forked child (which shares the trace with this process, copy on
write) and sends its result back pickled through a pipe.

Same rules as the forked trace decoder (collectors.kineto.parallel): PERF_JOBS=1 turns it off;
anything that goes wrong in the child, or no fork, and the pass runs here instead, so the result
never depends on whether the child ran. Only a single-threaded process forks (a forked child of
a threaded server could inherit a lock held by another thread).
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from typing import TypeVar

from collectors.kineto.parallel import jobs

T = TypeVar("T")


def in_background(fn: Callable[[], T], worth_it: bool = True) -> Callable[[], T]:
    """Start `fn()` in a forked child and return a function that waits for its result; where
    forking is off, not worth it or impossible, the returned function calls `fn()` itself."""
    if not worth_it or jobs() < 2 or threading.active_count() > 1:
        return fn
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return fn
    if pid == 0:  # the child: compute, send, leave without cleanup (the parent owns the process's state)
        try:
            os.close(read_end)
            try:
                message = ("ok", fn())
            except BaseException as e:  # noqa: BLE001 - the parent redoes the work and raises it there
                message = ("error", repr(e))
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(message, pipe, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            os._exit(0)
    os.close(write_end)

    def join() -> T:
        try:
            with os.fdopen(read_end, "rb") as pipe:
                payload = pipe.read()
        finally:
            os.waitpid(pid, 0)
        try:
            status, result = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - a child killed mid-write: do the pass here
            status, result = "lost", None
        return result if status == "ok" else fn()

    return join
