"""Command-line values of the plain types read without pydantic.

Typer 0.2x turns each parameter's text into its value through a pydantic TypeAdapter built on
first use, for every parameter of the command run, given or not: for `perf analyze` that is
importing pydantic and building eleven adapters, ~0.3 s of CPU before any work (a tenth of
`perf analyze --json` on a 51 MiB trace; benchmarks/README.md, "Issue 11 figures, fourth pass").

The parameters of plain types (str, int with optional bounds, bool flags, Path without checks, a
`parser=`, `list[...]` of those; `X | None` of each) need no pydantic.
`seed(command)` gives each such parameter a coercion of its own that returns what Typer's returns
for the values it takes at once (tests/test_cli_plain_values.py compares the two) and hands every
other value (a number that does not parse or is out of bounds, a path that exists but cannot be
read, a parser's error) to Typer's own coercion, so Typer's messages and exit codes stay the only
ones. Typers without `_runtime_param` (before 0.2x, no pydantic either) are left as they are.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, get_args, get_origin

_SLOW = object()  # this value goes to Typer's own coercion
_INT = re.compile(r"-?[0-9]{1,18}")  # what int() and pydantic read alike (no '_', blanks, '+')


def seed(command: Any, ctx: Any) -> None:
    """Give `command`'s plain parameters (its --help too: `get_params`) the coercion below,
    before click parses its arguments. `ctx` may be the parent's: click makes (and caches) the
    --help option from the context's help names, which a command inherits unless its
    context_settings name its own; then only its declared parameters are seeded."""
    if not hasattr(command, "get_params"):
        return
    own_help = "help_option_names" in (getattr(command, "context_settings", None) or {})
    params = command.params if own_help else command.get_params(ctx)
    for param in params:
        if getattr(param, "_runtime_param", False) is None and hasattr(param, "get_runtime_param"):
            plain = _plain(param)
            if plain is not None:
                param._runtime_param = plain


class _Plain:
    """Typer's RuntimeParam contract (`coerce(value, param=, ctx=)`) for one plain parameter."""

    def __init__(self, convert: Any, multi: bool):
        self.convert, self.multi = convert, multi

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # as Typer's RuntimeParam.coerce: not given
            return () if self.multi else None
        if self.multi:
            if isinstance(value, (list, tuple)):
                items = [self.convert(v) for v in value]
                if not any(v is _SLOW for v in items):
                    return items
        else:
            out = self.convert(value)
            if out is not _SLOW:
                return out
        param._runtime_param = None  # Typer builds its own, which says what is wrong
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)


def _plain(param: Any) -> _Plain | None:
    """The plain coercion of `param`, or None when its type or options need Typer's."""
    desc = param.type_descriptor
    info = desc.parameter_info
    if desc.file_annotation is not None or getattr(info, "click_type", None) is not None:
        return None
    annotation, multi = desc.annotation, bool(param.multiple or param.nargs == -1)
    if multi:
        if get_origin(annotation) is not list or len(get_args(annotation)) != 1:
            return None
        annotation = get_args(annotation)[0]
    convert = _converter(annotation, info)
    return None if convert is None else _Plain(convert, multi)


def _converter(annotation: Any, info: Any) -> Any:
    if getattr(info, "parser", None) is not None:
        parser = info.parser

        def parsed(text: Any) -> Any:
            try:
                return parser(text)
            except Exception:  # noqa: BLE001 - Typer runs it again and reports the error
                return _SLOW

        return parsed
    if annotation is str:
        return lambda text: text if isinstance(text, str) else _SLOW
    if annotation is bool:  # a flag: click gives True or False
        return lambda flag: flag if isinstance(flag, bool) else _SLOW
    if annotation is int:
        return _integer(info.min, info.max, getattr(info, "clamp", False))
    if annotation is Path:
        return _path(info)
    return None


def _integer(low: Any, high: Any, clamp: bool) -> Any:
    if clamp:
        return None

    def integer(text: Any) -> Any:
        if isinstance(text, int) and not isinstance(text, bool):  # a default
            n = text
        elif isinstance(text, str) and _INT.fullmatch(text):
            n = int(text)
        else:
            return _SLOW
        return _SLOW if (low is not None and n < low) or (high is not None and n > high) else n

    return integer


def _path(info: Any) -> Any:
    """Path(text) where Typer would return just that: no existence, resolve, dash or write check,
    files and folders both accepted; a path that is missing, or exists and is readable (as
    Typer checks it: os.stat, then os.access)."""
    if info.exists or info.resolve_path or info.allow_dash or info.writable or info.path_type is not None:
        return None
    if not (info.file_okay and info.dir_okay):
        return None
    readable = info.readable

    def path(text: Any) -> Any:
        if not isinstance(text, str) or not text:
            return _SLOW
        try:
            os.stat(text)
        except (OSError, ValueError):  # missing: Typer returns the path too (ValueError: a NUL in it)
            return Path(text) if "\0" not in text else _SLOW
        return _SLOW if readable and not os.access(text, os.R_OK) else Path(text)

    return path
