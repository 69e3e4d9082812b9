"""A `Trace` as Parquet files and back, exactly: same columns, dtypes, categories (in order, unused
ones kept), metadata and problems, so an analysis of the copy prints the same bytes as one of
the original (tests/test_trace_cache.py).

Layout of a folder (one file per table, plus two small ones):

    events.parquet, counters.parquet, flows.parquet, devices.parquet
        one column per declared column (profiler.model.schema); a categorical column is stored
        as its int32 codes, its categories in categories.parquet. Parquet's own dictionary
        encoding is not used for them: past its page-size limit it falls back to plain values
        and reads back with categories in order of appearance, which reorders group-bys.
    categories.parquet
        columns `column` ('<table>.<column>') and `value`, the categories of each, in order.
    meta.json
        {"metadata": Trace.metadata, "problems": {reason: count}} as JSON.

Writing raises `NotStorable` when the trace cannot be stored exactly (metadata that JSON would
change, strings Arrow cannot encode); the caller then simply does not store it.
"""

from __future__ import annotations

import io
import json
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from profiler.model.schema import TABLES
from profiler.model.trace import Problems, Trace

#: Bumped when the layout above changes (part of the cache key, profiler/api/cache.py).
FORMAT = 1
TABLE_FILES = tuple(f"{t}.parquet" for t in TABLES)
FILES = (*TABLE_FILES, "categories.parquet", "meta.json")


class NotStorable(ValueError):
    """The trace cannot be written so that it reads back identical."""


def to_files(trace: Trace) -> dict[str, bytes]:
    """The folder's files, name -> bytes (see the module docstring)."""
    meta = {"metadata": trace.metadata, "problems": dict(trace.problems.counts)}
    try:
        text = json.dumps(meta, ensure_ascii=False, allow_nan=False)
        if json.loads(text) != meta:  # tuples, non-str keys...: JSON would not give them back
            raise NotStorable("metadata does not survive JSON")
        blob = text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as e:
        raise NotStorable(f"metadata: {e}") from None
    out: dict[str, bytes] = {}
    cat_col: list[str] = []
    cat_val: list[str] = []
    for table in TABLES:
        df: pd.DataFrame = getattr(trace, table)
        arrays, kinds = {}, {}
        for name in df.columns:
            s = df[name]
            if isinstance(s.dtype, pd.CategoricalDtype):
                arrays[name] = pa.array(s.cat.codes.to_numpy().astype(np.int32))
                values = s.cat.categories.tolist()
                kinds[name] = [str(s.cat.categories.dtype), bool(s.cat.ordered)]
                cat_col += [f"{table}.{name}"] * len(values)
                cat_val += values
            elif s.dtype == object:
                arrays[name] = _strings(s.tolist(), f"{table}.{name}")
            else:
                arrays[name] = pa.array(s.to_numpy())
        out[f"{table}.parquet"] = _parquet(pa.table(arrays), {"rows": str(len(df)), "categories": json.dumps(kinds)})
    values = _strings(cat_val, "categories")
    out["categories.parquet"] = _parquet(pa.table({"column": pa.array(cat_col, pa.string()), "value": values}), {})
    out["meta.json"] = blob
    return out


def from_files(files: dict[str, bytes]) -> Trace:
    """The Trace stored by `to_files` (raises on malformed input: the caller treats any error as
    a corrupt copy)."""
    cats: dict[str, list[str]] = {}
    ct = pq.read_table(io.BytesIO(files["categories.parquet"]), use_threads=False)
    for col, value in zip(ct.column("column").to_pylist(), ct.column("value").to_pylist()):
        cats.setdefault(col, []).append(value)
    tables = {}
    for table, declared in TABLES.items():
        pf = pq.ParquetFile(io.BytesIO(files[f"{table}.parquet"]))
        t = pf.read()
        stored = pf.schema_arrow.metadata
        rows, kinds = int(stored[b"rows"]), json.loads(stored[b"categories"])
        dtypes = {c.name: c.dtype for c in declared}
        cols = {}
        for name in t.column_names:
            arr = t.column(name)
            if dtypes[name] == "category":
                dtype, ordered = kinds[name]
                categories = pd.Index(cats.get(f"{table}.{name}", []), dtype=dtype)
                codes = arr.to_numpy() if len(arr) else np.zeros(0, np.int32)
                cols[name] = pd.Categorical.from_codes(codes, categories=categories, ordered=ordered, validate=False)
            elif dtypes[name] == "object":
                cols[name] = pd.Series(arr.to_pylist(), dtype=object, index=pd.RangeIndex(rows))
            else:
                cols[name] = arr.to_numpy().astype(dtypes[name], copy=False)
        df = pd.DataFrame(cols, index=pd.RangeIndex(rows), copy=False)  # the columns as read: no 2-D block copy
        if df.shape[0] != rows:
            raise ValueError(f"{table}: {df.shape[0]} rows, stored {rows}")
        tables[table] = df
    meta = json.loads(files["meta.json"].decode("utf-8"))
    problems = Problems(Counter({str(k): int(v) for k, v in meta["problems"].items()}))
    return Trace(**tables, metadata=meta["metadata"], problems=problems)


def _strings(values: list, where: str) -> pa.Array:
    if not all(isinstance(v, str) for v in values):
        raise NotStorable(f"{where}: holds values that are not strings")
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowException, UnicodeEncodeError) as e:  # lone surrogates
        raise NotStorable(f"{where}: {e}") from None


def _parquet(table: pa.Table, meta: dict[str, str]) -> bytes:
    """One Parquet file in memory, LZ4: on ddp_allreduce_v100's events 2.7 MB read in 12 ms,
    against zstd's 1.1 MB in 45 ms and no compression's 19 MB (which the cache's digest then reads
    and hashes whole)."""
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="lz4", use_dictionary=False, write_statistics=False)
    return buf.getvalue()
