"""String tests over an event column, run once per distinct value.

Event names are categoricals with a few thousand distinct values over hundreds of thousands of
rows; `.astype(str).str.match(...)` re-encodes every row (an Arrow string array in pandas 3) and
matches each. These decode and test the distinct values only, then index by code.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd


def distinct(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, distinct values as an object array of str): values[i] == distinct[codes[i]].
    A missing value gets the last entry, ''."""
    codes, uniq = pd.factorize(values)
    return codes, np.array([str(x) for x in uniq] + [""], dtype=object)


def matches(values: pd.Series, pattern: str | re.Pattern[str]) -> np.ndarray:
    """Boolean array: re.match(pattern, value) per row ('' for missing values)."""
    codes, uniq = distinct(values)
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    return np.array([rx.match(u) is not None for u in uniq], dtype=bool)[codes]


def contains(values: pd.Series, pattern: str | re.Pattern[str]) -> np.ndarray:
    """Boolean array: re.search(pattern, value) per row ('' for missing values)."""
    codes, uniq = distinct(values)
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    return np.array([rx.search(u) is not None for u in uniq], dtype=bool)[codes]


def startswith(values: pd.Series, prefix: str) -> np.ndarray:
    """Boolean array: value.startswith(prefix) per row."""
    codes, uniq = distinct(values)
    return np.array([u.startswith(prefix) for u in uniq], dtype=bool)[codes]
