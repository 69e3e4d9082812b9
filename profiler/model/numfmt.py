"""One number format for every output (text, dashboard, compiler report): SI prefixes with units.

Durations: '812 ns', '3.40 µs', '12.1 ms', '1.73 s' (three significant digits, none past the
point from 100 up). Quantities: '2.26 GB', '310 TFLOP/s'. Bytes are decimal SI throughout
(1 GB = 1e9 B, as vendors quote memory bandwidth): one base, chosen once, never GiB beside GB.
Unknown values (None, NaN, infinity) print as MISSING.
"""

from __future__ import annotations

import math

MISSING = "-"
_TIME = (("s", 1e9), ("ms", 1e6), ("µs", 1e3))
_PREFIX = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def _known(v: object) -> bool:
    try:
        return v is not None and math.isfinite(float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _digits(v: float) -> str:
    """Three significant digits; whole numbers from 100 up (no '1.23e+03')."""
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def fmt_ns(ns: float | None) -> str:
    """A duration given in ns: '812 ns', '3.40 µs', '12.1 ms', '1.73 s'."""
    if not _known(ns):
        return MISSING
    v = float(ns)  # type: ignore[arg-type]
    for unit, scale in _TIME:
        if abs(v) >= scale:
            return f"{_digits(v / scale)} {unit}"
    return f"{v:.0f} ns"


def fmt_si(v: float | None, unit: str = "") -> str:
    """A quantity with an SI prefix: fmt_si(3.2e14, 'FLOP/s') = '320 TFLOP/s'."""
    if not _known(v):
        return MISSING
    x = float(v)  # type: ignore[arg-type]
    for p, scale in _PREFIX:
        if abs(x) >= scale:
            return f"{_digits(x / scale)} {p}{unit}"
    return f"{_digits(x)} {unit}".strip()


def fmt_bytes(v: float | None) -> str:
    """Bytes in decimal SI: '2.26 GB', '512 kB', '64 B'."""
    return fmt_si(v, "B")


def fmt_pct(v: float | None, digits: int = 1) -> str:
    """A fraction 0..1 as a percentage: fmt_pct(0.4731) = '47.3%'."""
    return f"{100 * float(v):.{digits}f}%" if _known(v) else MISSING  # type: ignore[arg-type]


def fmt_count(v: float | None) -> str:
    """An integer count with thousands separators: '12,345'."""
    return f"{int(v):,}" if _known(v) else MISSING  # type: ignore[arg-type]
