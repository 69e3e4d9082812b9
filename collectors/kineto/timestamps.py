"""Kineto's microsecond numbers -> exact int64 nanoseconds, from their decimal text.

Kineto writes `"ts": 4458676522690.655` (µs with up to three decimals) or integer µs in older
traces. Parsed as float64 and scaled, about one timestamp in seven of such a trace lands a
nanosecond off (4.4e15 ns is past 2**51, where doubles are 0.5 ns apart). So the integer part and
the fraction are read as digits, vectorised with numpy's string ufuncs:

    ns = int_part * 1000 + sign * round(fraction to 3 digits)

Values with more than three decimals round half away from zero to the nearest ns. Exponent forms
(`1.5e3`) are rare and go through `decimal.Decimal`, still exactly.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np

_MISSING = "None"
_MAX_US = 9 * 10**15  # |µs| at or past this: int64 ns would wrap (year 2255 after the epoch)


def us_to_ns(values: tuple | list | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert µs values (int, decimal text, or None) to ns.

    Returns (ns, missing, invalid): int64 nanoseconds (0 where not valid) and two boolean masks,
    `missing` for absent values and `invalid` for values that are not finite numbers.
    """
    n = len(values)
    try:  # integer-µs traces (2021 era and many since): one C loop, exact
        us = np.fromiter(values, dtype=np.int64, count=n)
        none = np.zeros(n, dtype=bool)
        big = (us >= _MAX_US) | (us <= -_MAX_US)  # as for text: ns past int64 would wrap around
        return np.where(big, 0, us) * 1000, none, big
    except (TypeError, ValueError, OverflowError):
        pass
    try:
        text = np.array(values, dtype=np.str_)
    except ValueError:  # a JSON array among the values: not a number (rare, so one by one)
        text = np.array(["[]" if isinstance(v, (list, tuple)) else str(v) for v in values], dtype=np.str_)
    if text.dtype.itemsize == 0:
        text = text.astype("<U1")
    missing = text == _MISSING
    head, _, frac = np.strings.partition(text, ".")
    negative = np.strings.startswith(head, "-")
    digits = np.strings.lstrip(head, "-")
    valid = np.strings.isdecimal(digits) & (np.strings.isdecimal(frac) | (frac == ""))
    valid &= np.strings.str_len(digits) <= 15  # beyond that int64 ns would overflow
    whole = np.where(valid, digits, "0").astype(np.int64)
    frac = np.where(valid, frac, "")
    ns_frac = np.strings.slice(np.strings.ljust(frac, 3, "0"), 0, 3).astype(np.int64)
    round_up = np.strings.slice(np.strings.ljust(frac, 4, "0"), 3, 4) >= "5"
    ns = whole * 1000 + ns_frac + round_up
    ns = np.where(negative, -ns, ns)
    odd = ~valid & ~missing  # exponent forms, '+1', garbage: decide one by one (rare)
    for i in np.flatnonzero(odd):
        exact = _decimal_ns(str(text[i]))
        if exact is not None:
            ns[i] = exact
            valid[i] = True
    invalid = ~valid & ~missing
    ns[~valid] = 0
    return ns, missing, invalid


def _decimal_ns(text: str) -> int | None:
    try:
        d = Decimal(text)
    except InvalidOperation:
        return None
    # copy_abs: no context rounding, so an exponent past the context's limit ('9E999999999')
    # cannot raise decimal.Overflow here; anything that big is past int64 ns anyway
    if not d.is_finite() or d.copy_abs() >= _MAX_US:
        return None
    try:
        return int((d * 1000).to_integral_value(rounding="ROUND_HALF_UP"))
    except ArithmeticError:  # an exponent below the context's limit ('1e-9999999999')
        return None
