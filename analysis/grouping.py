"""Group rows by several object columns fast: one int code per distinct key tuple.

pandas' groupby on object (string) columns costs milliseconds per call in its machinery; the
analysis groups the same few columns (name, shapes) many times, so it factorizes each column
once and takes the distinct rows of the codes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def key_codes(frame: pd.DataFrame, keys: tuple[str, ...] | list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): codes[i] is row i's group, numbered in order of first appearance (as
    pd.factorize numbers values); first[g] is the first row of group g."""
    key = np.zeros(len(frame), dtype=np.int64)
    for k in keys:  # mixed radix: distinct tuples get distinct int64 keys (a trace has far fewer than 2^63)
        codes, uniq = pd.factorize(frame[k].to_numpy(dtype=object))
        key = key * (len(uniq) + 1) + codes
    codes, uniq = pd.factorize(key)  # hash-based, numbered in order of first appearance
    first = np.full(len(uniq), len(frame), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(frame)))
    return codes.astype(np.int64), first
