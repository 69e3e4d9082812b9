"""The error a user sees for input the tool cannot read: one line naming the file and the problem."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Input that cannot be read. The CLI prints `perf: <path>: <problem>` and exits 2."""

    def __init__(self, path: str | Path | None, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)
