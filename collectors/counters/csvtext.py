"""Reading a counter CSV whole and strictly: every row as wide as the header, or one error line
naming the file and the row (a truncated file ends mid-row)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from profiler.model.errors import InputError
from profiler.model.files import read_bounded


def read_rows(
    path: str | Path, max_bytes: int | None, *, header_starts: str = "", min_fields: str = ""
) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the CSV at `path`, each row padded to the header's width. Lines before the
    header (a profiler's log lines such as '==PROF== Connected') are skipped when `header_starts`
    names the header's first field. A row must reach the column `min_fields` names (ncu leaves
    the trailing rule fields off metric rows), else every column."""
    data = read_bounded(path, max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not a text CSV file (byte {e.start} is not UTF-8)") from None
    lines = text.splitlines(keepends=True)
    start = 0
    if header_starts:
        start = next((i for i, ln in enumerate(lines) if ln.lstrip('"').startswith(header_starts)), -1)
        if start < 0:
            raise InputError(path, f"no CSV header found (expected a line starting with '{header_starts}')")
    try:
        rows = list(csv.reader(io.StringIO("".join(lines[start:])), strict=True))
    except csv.Error as e:
        raise InputError(path, f"malformed CSV ({e}); is the file truncated?") from None
    if not rows:
        raise InputError(path, "no CSV header")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if r]  # a blank line is no row
    need = header.index(min_fields) + 1 if min_fields in header else len(header)
    for i, r in enumerate(body):
        if len(r) < need or len(r) > len(header):
            raise InputError(
                path,
                f"row {start + i + 2} has {len(r)} fields, the header {len(header)}; is the file truncated?",
            )
        r.extend([""] * (len(header) - len(r)))
    return header, body


def require(path: str | Path, header: list[str], needed: tuple[str, ...], what: str) -> dict[str, int]:
    """Column name -> index for `needed`; a missing one is an error naming the file."""
    index = {h: i for i, h in enumerate(header)}
    missing = [n for n in needed if n not in index]
    if missing:
        raise InputError(
            path,
            f"not {what}: missing column(s) {', '.join(repr(m) for m in missing)} (columns: {', '.join(header[:12])}"
            + (", ..." if len(header) > 12 else "")
            + ")",
        )
    return index
