"""The KV cache of an LLM serving trace, from the shapes of its cache-write ops.

**KV cache** (``kv_cache_footprint``), from the cache-write op each attention layer calls once
per step (SGLang ``store_cache`` / ``set_kv_buffer``, vLLM ``reshape_and_cache[_flash]``), whose
inputs are (key, value, key_cache, value_cache) as recorded with ``record_shapes``:

    per_token_layer_bytes = numel(key)/T * esize(key_cache) + numel(value)/T * esize(value_cache)
                            (T = key.shape[0], the step's new tokens)
    per_layer_bytes       = numel(key_cache) * esize(key_cache) + numel(value_cache) * esize(value_cache)
    slots                 = numel(key_cache) / (numel(key)/T)     (tokens one layer's cache holds)
    layers                = cache-write calls per step (every step must agree)
    kv_cache_bytes        = per_layer_bytes * layers,   share = kv_cache_bytes / device memory

``kv_cache_bytes`` assumes each layer owns its cache (SGLang's token pool and vLLM's
per-layer allocation do); when the product exceeds device memory the layers must share
buffers (vLLM's hybrid allocator) and it is NaN with that reason.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.cost.base import DTYPES
from analysis.llm_steps import (
    KV_WRITE,
    annotated_steps,
    assign_windows,
    has_ancestor_in,
    loads_json,
    name_mask,
    shape_steps,
)
from profiler.model.schema import Kind
from profiler.model.trace import Trace

__all__ = ["KV_COLUMNS", "kv_cache_footprint"]

KV_COLUMNS = [
    "rank",
    "device",
    "op",
    "dtype",
    "per_token_layer_bytes",
    "per_layer_bytes",
    "slots",
    "layers",
    "bytes_per_token",
    "kv_cache_bytes",
    "capacity_bytes",
    "share",
    "note",
]


def kv_cache_footprint(trace: Trace, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank with LLM steps or cache-write ops: the KV cache from the cache-write ops' shapes
    (formulas in the module doc).

    Columns: rank, device, op (the cache-write op's name), dtype (of the cache as recorded),
      per_token_layer_bytes, per_layer_bytes, slots (tokens per layer's cache), layers (writes
      per step), bytes_per_token (= per_token_layer_bytes * layers), kv_cache_bytes,
      capacity_bytes (device memory), share (= kv_cache_bytes / capacity_bytes), note (why a
      figure is NaN). `steps` (internal) are the step windows, found here when not given.
    """
    if steps is None:
        steps = annotated_steps(trace)
        if steps.empty:
            steps = shape_steps(trace)
    ev = trace.events
    writes = np.flatnonzero(name_mask(ev, KV_WRITE.match) & (ev["kind"] == Kind.OP.value).to_numpy())
    writes = writes[~has_ancestor_in(ev, writes)]  # a wrapper and the op it calls are one write
    ranks = sorted(set(steps["rank"].tolist()) | set(ev["rank"].to_numpy()[writes].tolist()))
    rows = []
    for rank in ranks:
        mine = writes[ev["rank"].to_numpy()[writes] == rank]
        rows.append(_kv_row(trace, int(rank), mine, steps[steps["rank"] == rank]))
    return pd.DataFrame(rows, columns=KV_COLUMNS)


def _kv_row(trace: Trace, rank: int, writes: np.ndarray, steps: pd.DataFrame) -> dict:
    ev = trace.events
    devs = trace.devices[(trace.devices["rank"] == rank) & (trace.devices["device"] != "cpu")]
    device = str(devs["device"].iloc[0]) if len(devs) == 1 else ""
    capacity = float(devs["memory_bytes"].iloc[0]) if len(devs) == 1 and devs["memory_bytes"].iloc[0] > 0 else math.nan
    nan = math.nan
    row = {
        "rank": rank,
        "device": device,
        "op": "",
        "dtype": "",
        "per_token_layer_bytes": nan,
        "per_layer_bytes": nan,
        "slots": nan,
        "layers": nan,
        "bytes_per_token": nan,
        "kv_cache_bytes": nan,
        "capacity_bytes": capacity,
        "share": nan,
        "note": "",
    }
    if len(writes) == 0:
        row["note"] = (
            "no KV-cache write op with recorded shapes (attention inside a CUDA/HIP graph replay, or record_shapes off)"
        )
        return row
    first = writes[np.argmin(ev["ts"].to_numpy()[writes])]
    row["op"] = str(ev["name"].iat[first])
    sizes = _kv_sizes(loads_json(ev["shapes"].iat[first]), loads_json(ev["dtypes"].iat[first]))
    if sizes is None:
        row["note"] = f"{row['op']}: inputs are not (key, value, key_cache, value_cache) with known dtypes"
        return row
    row.update(sizes)
    which = assign_windows(
        steps["rank"].to_numpy(np.int64),
        steps["thread"].to_numpy(np.int64),
        steps["start_ns"].to_numpy(np.int64),
        steps["annot_end"].to_numpy(np.int64),
        ev["rank"].to_numpy()[writes],
        ev["thread"].to_numpy()[writes],
        ev["ts"].to_numpy()[writes],
    )
    counts = sorted(set(np.bincount(which[which >= 0]).tolist()) - {0}) if (which >= 0).any() else []
    if len(counts) != 1:
        row["note"] = "layers not derivable: " + (
            "no step holds a cache write"
            if not counts
            else f"steps write the cache different numbers of times {counts}"
        )
        return row
    layers = counts[0]
    total = row["per_layer_bytes"] * layers
    row.update(layers=layers, bytes_per_token=row["per_token_layer_bytes"] * layers)
    if not math.isnan(capacity) and total > capacity:
        row["note"] = (
            f"{layers} layers x {row['per_layer_bytes']:.0f} B exceeds device memory: "
            "the layers share cache buffers, which the trace does not record"
        )
        return row
    row.update(kv_cache_bytes=total, share=total / capacity)
    return row


def _kv_sizes(shapes: object, dtypes: object) -> dict | None:
    """Per-token and per-layer bytes from (key, value, key_cache, value_cache) inputs."""
    if not (isinstance(shapes, list) and isinstance(dtypes, list) and len(shapes) >= 4 and len(dtypes) >= 4):
        return None
    k, v, kc, vc = shapes[:4]
    if not all(isinstance(s, list) and s and all(isinstance(x, int) for x in s) for s in (k, v, kc, vc)):
        return None
    if k[0] == 0 or k[0] != v[0]:
        return None
    esize = [DTYPES.get(d, (None, None))[1] if isinstance(d, str) else None for d in dtypes[2:4]]
    if None in esize:
        return None
    ek, evv = math.prod(k) // k[0], math.prod(v) // v[0]  # elements per token of one layer
    nk, nv = math.prod(kc), math.prod(vc)
    if nk % ek or nv % evv or nk // ek != nv // evv:
        return None
    return {
        "dtype": str(dtypes[2]),
        "per_token_layer_bytes": float(ek * esize[0] + evv * esize[1]),
        "per_layer_bytes": float(nk * esize[0] + nv * esize[1]),
        "slots": float(nk // ek),
    }
