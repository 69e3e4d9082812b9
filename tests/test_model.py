"""The model: schema declarations, validation, and the generated column reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler import load_trace
from profiler.model.schema import TABLES
from profiler.model.trace import TraceInvalid
from tests.conftest import real_trace

ROOT = Path(__file__).resolve().parents[1]


def test_tables_have_declared_columns_and_dtypes():
    t = load_trace(real_trace("sglang_qwen3_decode_mi300x"))
    for table, cols in TABLES.items():
        df = getattr(t, table)
        for c in cols:
            if c.required:
                assert str(df[c.name].dtype) == c.dtype, (table, c.name)


@pytest.fixture(scope="module")
def small():
    return load_trace(real_trace("sglang_qwen3_decode_mi300x"))


def test_validate_rejects_a_wrong_dtype(small):
    bad = type(small)(small.events.astype({"ts": "float64"}), small.counters, small.flows, small.devices)
    with pytest.raises(TraceInvalid, match="events.ts: dtype float64"):
        bad.validate()


def test_validate_rejects_dangling_references(small):
    ev = small.events.copy()
    ev.loc[0, "parent_id"] = 10**12
    with pytest.raises(TraceInvalid, match="parent_id refers"):
        type(small)(ev, small.counters, small.flows, small.devices).validate()


def test_validate_rejects_undeclared_columns(small):
    with pytest.raises(TraceInvalid, match="undeclared"):
        type(small)(small.events.assign(extra=1), small.counters, small.flows, small.devices).validate()


def test_memory_counters_from_profile_memory():
    t = load_trace(real_trace("resnet50_legacy_v100"))
    # The 2021 trace's 12,838 [memory] events carry only Bytes (the allocation delta):
    # 8,220 on the GPU (Device Type 1) and 4,618 on the CPU (Device Type 0), counted with grep.
    sizes = t.counters.groupby(["name", "device"], observed=True).size().to_dict()
    assert sizes == {("alloc_delta", "cpu"): 4618, ("alloc_delta", "gpu0"): 8220}
    assert t.counters["track"].iloc[0].startswith("rank0/")
