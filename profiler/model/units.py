"""Units of the model's numbers as people read them: one formatter per unit, shared by every output."""

from __future__ import annotations

import math


def fmt_ns(ns: float | None, *, micro: str = "us", missing: str = "-") -> str:
    """A duration in ns for people: '812 ns', '3.4 us', '12.1 ms', '1.73 s' (3 significant
    digits, whole numbers from 100 up: '123 ms', '1234 s'); `missing` when None, NaN or infinite.
    `micro` spells the microsecond ('us' in a terminal, 'µs' on a web page)."""
    if ns is None or not math.isfinite(float(ns)):
        return missing
    v = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), (micro, 1e3)):
        if abs(v) >= scale:
            x = v / scale
            return f"{x:.3g} {unit}" if abs(x) < 100 else f"{x:.0f} {unit}"
    return f"{v:.0f} ns"
