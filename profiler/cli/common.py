"""What every `perf` command shares: the Typer app, the common options (--max-bytes, --force),
one-line errors (exit 2) and the entry point. Exit codes: 0 success, 2 bad input (one line
naming the file and the problem), 1 failed gate."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from profiler.cli_usage import OneLineUsage, one_line
from profiler.model.errors import InputError
from profiler.model.files import parse_size

app = typer.Typer(
    cls=OneLineUsage,
    add_completion=False,
    no_args_is_help=True,
    # plain help and errors: typer's rich rendering imports rich.markdown and markdown_it
    # (~0.1 s of the 0.3 s `perf --help` may take), and CI logs read it no worse
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Performance profiling and bottleneck analysis for ML compilers and accelerators.",
)

#: --max-bytes: the most a command reads of one file, decompressed (profiler.model.files).
MaxBytes = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        parser=parse_size,
        metavar="SIZE",
        help="Refuse a file larger than this once decompressed (e.g. 512M, 8G). Default: half the memory available.",
    ),
]
#: --no-cache: parse the trace again instead of reading (and writing) the columnar cache (profiler.api.cache).
NoCache = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Parse the trace instead of reading the columnar cache, and write none "
        "(the cache: $PERF_CACHE_DIR, default ~/.cache/perf-suite; PERF_NO_CACHE=1 turns it off too).",
    ),
]
#: --force: replace an existing output file (never an input).
Force = Annotated[
    bool, typer.Option("--force", help="Overwrite the output file if it exists (never one of the inputs).")
]


def Console(**options):  # noqa: N802 - rich's Console, imported only when text is printed (not for --json)
    from rich.console import Console as RichConsole

    return RichConsole(**options)


def fail(problem: str, path: str | None = None) -> None:
    """Print `perf: <path>: <problem>` on stderr (one line: control characters escaped) and exit 2."""
    msg = f"{path}: {problem}" if path else problem
    print(one_line(msg), file=sys.stderr)
    raise typer.Exit(2)


def require_torch(command: str) -> None:
    """`perf profile` and `perf calibrate` run torch, an optional extra: without it, one line, exit 2."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        print(f"perf {command} needs torch: pip install 'perf-suite[profile]'", file=sys.stderr)
        raise typer.Exit(2)


def _print_version(value: bool) -> None:
    if value:
        from profiler import __version__

        print(__version__)
        raise typer.Exit(0)


@contextmanager
def one_line_errors(path: Path) -> Iterator[None]:
    """Bad input -> `perf: <path>: <problem>`, exit 2. Our own bugs too: one line, never a
    traceback (set PERF_DEBUG=1 to see it)."""
    try:
        yield
    except InputError as e:
        fail(e.problem, e.path)
    except MemoryError:
        fail("out of memory while reading", str(path))
    except (typer.Exit, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as e:
        if os.environ.get("PERF_DEBUG"):
            raise
        fail(f"internal error ({type(e).__name__}: {e}); rerun with PERF_DEBUG=1 and report it", str(path))


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """perf: where the time goes in ML workloads, and why."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `perf` console script and `python -m profiler`."""
    try:
        app(args=argv, prog_name="perf", standalone_mode=True)
    except SystemExit as e:
        if argv is None or e.code not in (0, None):
            raise
