"""Guards around torch.profiler's native side: Kineto's stderr chatter and nested profilers.

Kineto's C++ code writes `USDT: ... profiler_start` / `STAGE: ... Completed Stage` lines straight
to file descriptor 2 on every start and stop, whatever KINETO_LOG_LEVEL says; they would break
the CLI's contract (stderr carries progress and one-line errors only). `filtered_stderr` captures
fd 2 around the profiler's transitions only and passes every other line through.

A second torch.profiler started while one runs corrupts Kineto's state and segfaults the process
(torch 2.13, seen here); `refuse_nested_profilers` turns that into a Python exception instead.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

#: Kineto's unconditional progress lines (and the INFO/STAGE ones at verbose log levels).
CHATTER = re.compile(rb"^(USDT|STAGE):\S* \S+ \d+:\d+ \S+\.cpp:\d+\]")

NESTED = (
    "a profiler is already running in this process (perf profile / profiler.profile); "
    "one process can run one torch.profiler at a time: mark steps with profiler.step() instead"
)


@contextmanager
def filtered_stderr() -> Iterator[None]:
    """Run the body with fd 2 captured; afterwards re-emit every line that is not Kineto chatter."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable fd 2 (closed, or a test harness without one)
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except ValueError:
                pass
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = b"".join(line for line in tmp if not CHATTER.match(line))
            if kept:
                os.write(2, kept)


def _refuse(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError(NESTED)


@contextmanager
def refuse_nested_profilers() -> Iterator[None]:
    """While the body runs, starting another torch.profiler raises RuntimeError(NESTED).

    Patched: torch.profiler.profile.start (what `with torch.profiler.profile()` calls),
    torch.profiler._KinetoProfile.start, and the legacy torch.autograd.profiler.profile.__enter__.
    Restored on exit.
    """
    import torch.autograd.profiler as legacy
    import torch.profiler.profiler as kineto

    targets = [(kineto.profile, "start"), (kineto._KinetoProfile, "start"), (legacy.profile, "__enter__")]
    saved = [(cls, name, cls.__dict__[name]) for cls, name in targets if name in cls.__dict__]
    for cls, name, _ in saved:
        setattr(cls, name, _refuse)
    try:
        yield
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)
