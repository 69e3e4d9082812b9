"""Output: renderers over the result objects (pyinstrument's session / processors / renderers
split). The analysis builds results once (profiler.api.Analysis, analysis.diff tables, gate
verdicts, the compile report); each module here turns them into one format and computes nothing:

- verdict.py: the verdict block and the short default report of `perf analyze`;
- text.py: `perf analyze` sections (trace, device time, top ops), dispatching to roofline.py
  (advice, wall equation, timeline, by-bound tables) and insight.py (critical path, memory,
  LLM, modules);
- compare.py: `perf diff` and `perf gate` tables;
- compile.py: the torch.compile report and eager-vs-compiled tables;
- json.py: every `--json` document (perf.analyze, perf.diff, perf.gate, perf.compare_compile).

Numbers are formatted by profiler.model.numfmt only. This module imports nothing heavy: the
JSON path never loads Rich.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: Width when stdout is not a terminal (a CI log, a pipe, a file): wide enough that no table is
#: cut; Rich's default there is 80 columns, which truncated names and 'REGRESSION'. COLUMNS wins.
PIPE_WIDTH = 240


def console(stderr: bool = False) -> Console:
    """The Console every command prints with: the terminal's width on a tty, else COLUMNS or
    PIPE_WIDTH (never cut at 80); emoji codes in names stay text (':fire:')."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty():
        cols = os.environ.get("COLUMNS", "")
        width = int(cols) if cols.isdigit() and int(cols) > 0 else PIPE_WIDTH
    return Console(file=stream, soft_wrap=False, emoji=False, width=width)
