"""The `perf` command line (Typer + Rich). Results on stdout; errors on stderr.

Exit codes: 0 success, 2 bad input (one line naming the file and the problem), 1 failed gate.
One module per command (`analyze`, `hardware` with `calibrate`, `diff`, `export`, `gate`,
`profile`, `serve` for `perf dashboard`, `compile` for `perf compile-report`, `accel_compile` for
`perf compile`, `simulate`, `counters`, `autotune`) on the app and the
shared options of `common`; importing them registers the commands, in the order `perf --help`
lists them. Each imports what it runs (the facade, a renderer) inside the command, so that
`perf --help` stays fast.
"""

from __future__ import annotations

from profiler.cli import analyze as _analyze
from profiler.cli import hardware as _hardware
from profiler.cli import diff as _diff
from profiler.cli import export as _export
from profiler.cli import gate as _gate
from profiler.cli import profile as _profile
from profiler.cli import serve as _serve
from profiler.cli import compile as _compile
from profiler.cli import accel_compile as _accel_compile
from profiler.cli import simulate as _simulate
from profiler.cli import autotune as _autotune
from profiler.cli import counters as _counters
from profiler.cli.common import app, fail, main, one_line_errors

__all__ = ["app", "fail", "main", "one_line_errors"]
_COMMANDS = (
    _analyze,
    _hardware,
    _diff,
    _export,
    _gate,
    _profile,
    _serve,
    _compile,
    _accel_compile,
    _simulate,
    _counters,
    _autotune,
)


def _full_short_help(typer_app) -> None:  # type: ignore[no-untyped-def]
    """Each command lists its help's first paragraph, wrapped: plain click help would cut it at
    45 characters ('What bounds the run (the verdict, first), then device...')."""
    import inspect

    def first_paragraph(doc: object) -> str | None:
        return " ".join(doc.split("\n\n")[0].split()) if isinstance(doc, str) and doc else None

    for info in typer_app.registered_commands:
        if info.short_help is None:
            info.short_help = first_paragraph(info.help or inspect.getdoc(info.callback))
    for group in typer_app.registered_groups:
        sub = group.typer_instance
        if sub is not None:
            _full_short_help(sub)
            if not isinstance(group.short_help, str):  # unset: typer's DefaultPlaceholder
                group.short_help = first_paragraph(group.help if isinstance(group.help, str) else sub.info.help)


_full_short_help(app)
