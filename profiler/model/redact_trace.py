"""Redact a whole `Trace` once, as a collector finishes building it, so no output can forget to.

Every string a trace carries reaches some output (text, JSON, Perfetto and Chrome exports, the
dashboard), so every string is scrubbed here, at load: the text columns of every table (event
names, categories, the recorded 'Input Dims' / 'Input type' / 'Concrete Inputs' / collective
texts, device names, track and counter names), the metadata (keys and values, at any depth, the
file names included) and the problem reasons (they quote category names). Outputs then show
what the Trace holds; `redact_text` stays available to them for text that did not come from a
trace (an exception message, a path typed by the user).

Cheap: categorical columns are redacted per distinct value, and `redact_text` turns away almost
every trace string with a few substring checks.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from profiler.model.redact import might_hold_secret, redact, redact_text
from profiler.model.trace import Problems, Trace

__all__ = ["redact_json_text", "redact_trace"]

#: Event columns holding a recorded JSON value as compact text (collectors/kineto/extract.py).
JSON_COLUMNS = frozenset({"shapes", "dtypes", "concrete"})


def redact_trace(trace: Trace) -> Trace:
    """The same trace with every string redacted (tables' text columns, metadata, problems).

    The tables are changed in place (the collector that calls this owns them); a column whose
    values all survive is left untouched.
    """
    for table in (trace.events, trace.counters, trace.flows, trace.devices):
        for col in table.columns:
            fix = redact_json_text if table is trace.events and col in JSON_COLUMNS else redact_text
            _redact_column(table, col, fix)
    problems = Problems(Counter())
    for reason, n in trace.problems.counts.items():
        problems.add(redact_text(reason), n)
    return replace(trace, metadata=redact(trace.metadata), problems=problems)


def _redact_column(df: pd.DataFrame, col: str, fix: Any) -> None:
    s = df[col]
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories
        if cats.dtype != object:
            return
        new = [fix(c) if isinstance(c, str) else c for c in cats]
        if all(a is b or a == b for a, b in zip(new, cats)):
            return
        uniq, inverse = np.unique(np.array(new, dtype=object), return_inverse=True)  # two secrets may meet in one value
        codes = s.cat.codes.to_numpy()
        df[col] = pd.Categorical.from_codes(
            np.where(codes >= 0, inverse[codes], -1), categories=pd.Index(uniq, dtype=object)
        )
    elif s.dtype == object:
        values = s.to_numpy()
        new = [fix(v) if isinstance(v, str) else v for v in values]
        if any(a is not b for a, b in zip(new, values)):
            df[col] = pd.Series(new, index=s.index, dtype=object)


def redact_json_text(text: str) -> str:
    """A recorded JSON value's text ('Concrete Inputs', 'Input type'), redacted and still JSON.

    Read as JSON when it parses, so the structure's rules apply (an argv list's value after
    '--api-key', a secret-named dict key); compact JSON comes back, as the collector wrote it.
    Text that is not JSON goes through `redact_text`.
    """
    out = redact_text(text)
    if not might_hold_secret(text):
        return text  # nothing a pattern or a structure rule could find
    try:
        value = json.loads(text)
    except ValueError:
        return out
    clean = redact(value)
    if clean == value:
        return text
    return json.dumps(clean, separators=(",", ":"), ensure_ascii=False)
