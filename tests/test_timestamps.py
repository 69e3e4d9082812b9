"""Kineto µs text -> exact int64 ns."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from collectors.kineto.timestamps import us_to_ns


def test_digits_not_floats():
    # 4458676522690.655 us is 4458676522690655 ns exactly; float64 * 1000 gives ...654.
    text = "4458676522690.655"
    ns, missing, invalid = us_to_ns([text])
    assert ns.tolist() == [4458676522690655]
    assert round(float(text) * 1000) != 4458676522690655  # the float path is off by one here
    assert not missing.any() and not invalid.any()


def test_forms():
    values = [5, "1.5", "1.25", "-0.5", "2.0004", "2.0005", "1e3", "1.5E-3", None, "NaN", "abc", "", "-"]
    ns, missing, invalid = us_to_ns(values)
    # 5 us; 1.5 us; 1.25 us; -0.5 us; 2.0004 rounds down; 2.0005 rounds half up; 1e3 us; 1.5e-3 us = 1.5 ns -> 2
    assert ns[:8].tolist() == [5000, 1500, 1250, -500, 2000, 2001, 1_000_000, 2]
    assert missing.tolist() == [False] * 8 + [True] + [False] * 4
    assert invalid.tolist() == [False] * 9 + [True] * 4


def test_exponents_past_decimal_limits_are_invalid_not_a_crash():
    # found by the fuzz test: '9E999999999' has an exponent past decimal's context limit, where
    # abs() raised decimal.Overflow; it is past int64 ns, so invalid. '1e-9999999999' is 0 ns.
    ns, missing, invalid = us_to_ns(["9E999999999", "-9E999999999", "10E1000", "1e-9999999999"])
    assert invalid.tolist() == [True, True, True, False] and not missing.any()
    assert ns.tolist() == [0, 0, 0, 0]


@given(st.lists(st.integers(min_value=0, max_value=9 * 10**17), min_size=1, max_size=50), st.integers(0, 3))
def test_round_trip_exact(ns_values, digits):
    # Write each ns value as Kineto would (µs with `digits` decimals, truncated) and read it back.
    scale = 10 ** (3 - digits)
    truncated = [v // scale * scale for v in ns_values]
    text = [f"{v // 1000}.{v % 1000:03d}"[: len(str(v // 1000)) + 1 + digits].rstrip(".") for v in truncated]
    ns, missing, invalid = us_to_ns(text)
    assert ns.tolist() == truncated
    assert not missing.any() and not invalid.any()


def test_integer_fast_path_dtype():
    ns, _, _ = us_to_ns((1, 2, 1623142623460111))
    assert ns.dtype == np.int64 and ns[-1] == 1623142623460111000
