"""A table of the schema (profiler.model.schema) from a list of row dicts: the one way collectors
that build their events row by row (scalesim, onnx) turn them into the Trace's DataFrames."""

from __future__ import annotations

import pandas as pd

from profiler.model.schema import Column


def rows_frame(rows: list[dict], cols: tuple[Column, ...]) -> pd.DataFrame:
    """The declared required columns of `rows` (a missing key takes the column's `missing` value,
    else '' or 0); text categories over object-dtype categories, as every collector builds them
    (redaction and concatenation expect them)."""
    data = {}
    for c in cols:
        if not c.required:
            continue
        default = c.missing if c.missing is not None else ("" if c.dtype in ("category", "object") else 0)
        values = [r.get(c.name, default) for r in rows]
        if c.dtype == "category":
            data[c.name] = pd.Categorical(values, categories=pd.Index(sorted(set(values)), dtype=object))
        else:
            data[c.name] = pd.Series(values, dtype=c.dtype)
    return pd.DataFrame(data)
