"""A one-line progress bar on stderr for long commands (`perf simulate --prompt/--decode`): shown
when stderr is a terminal or the user asks (--progress), never on stdout, so `--json` output and
pipes stay clean. Redrawn in place with a carriage return; `close()` ends the line."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class Progress:
    """`stage(text)` names what runs now; `update(done, total)` draws `[####    ] done/total`;
    both at most ~10 times a second, except the last update. Silent when not `enabled`."""

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(self.stream.isatty()) if enabled is None else enabled
        self.text, self.drawn, self.last = "", False, 0.0

    def stage(self, text: str) -> None:
        self.text = text
        self._draw(text, force=True)

    def update(self, done: int, total: int) -> None:
        if not self.enabled or (done < total and time.monotonic() - self.last < 0.1):
            return
        filled = WIDTH * done // max(total, 1)
        self._draw(f"{self.text} [{'#' * filled}{' ' * (WIDTH - filled)}] {done}/{total}", force=True)

    def close(self) -> None:
        if self.enabled and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False

    def _draw(self, line: str, force: bool = False) -> None:
        if not self.enabled:
            return
        self.last = time.monotonic()
        self.stream.write("\r\033[K" + line)
        self.stream.flush()
        self.drawn = True
