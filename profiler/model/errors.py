"""The error a user sees for input the tool cannot read: one line naming the file and the problem."""

from __future__ import annotations

import re
from pathlib import Path


class InputError(Exception):
    """Input that cannot be read. The CLI prints `perf: <path>: <problem>` and exits 2."""

    def __init__(self, path: str | Path | None, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """`text` with control characters (newline, ESC, ...) written as escapes (`\\n`, `\\x1b`), so
    a message stays one line and a file name cannot drive the terminal."""
    return _CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)
