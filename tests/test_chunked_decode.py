"""Decoding traceEvents in chunks gives exactly the tables of decoding it whole."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from collectors.kineto import chunks
from profiler import load_trace
from tests.conftest import real_trace, x


def load_with_chunk_bytes(monkeypatch, path, n):
    monkeypatch.setattr(chunks, "CHUNK_BYTES", n)
    return load_trace(path)


def assert_same(a, b):
    for table in ("events", "counters", "flows", "devices"):
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_categorical=False)
    assert a.problems.counts == b.problems.counts


@pytest.mark.parametrize("folder", ["nccl_meta_a100", "resnet50_legacy_v100"])
def test_small_chunks_match_whole(monkeypatch, folder):
    path = real_trace(folder)
    whole = load_with_chunk_bytes(monkeypatch, path, 1 << 40)  # one chunk
    small = load_with_chunk_bytes(monkeypatch, path, 64 << 10)  # ~150 to 500 chunks of 64 KiB
    assert_same(whole, small)


def test_boundary_inside_an_event_falls_back_to_whole(monkeypatch, tmp_path):
    # Each event's args object starts on its own line, so "\n{" also matches inside events:
    # such a split leaves unbalanced brackets, and the reader decodes the array whole instead.
    events = [x(f"op{i}", "cpu_op", i * 10, 5, **{"External id": i}) for i in range(400)]
    events.append({"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1, "ts": 1})  # no dur
    body = ",\n".join(json.dumps(e).replace('"args": {', '"args":\n{') for e in events)
    path = tmp_path / "odd.json"
    path.write_text('{"traceEvents": [\n' + body + "\n]}")
    whole = load_with_chunk_bytes(monkeypatch, path, 1 << 40)
    small = load_with_chunk_bytes(monkeypatch, path, 1000)
    assert_same(whole, small)
    assert len(small.events) == 400 and small.problems.counts == {"events skipped: missing dur": 1}


def test_forked_half_matches_one_process(monkeypatch):
    # ddp (51 MiB of events, 13 chunks of 4 MiB): the second half is decoded in a forked child.
    from collectors.kineto import parallel

    path = real_trace("ddp_allreduce_v100")
    monkeypatch.setenv("PERF_JOBS", "1")
    alone = load_trace(path)
    monkeypatch.setenv("PERF_JOBS", "2")
    assert len(chunks.spans(_events_raw(path))) >= parallel.MIN_CHUNKS  # so the fork really runs
    forked = load_trace(path)
    assert_same(alone, forked)


def test_a_failing_child_is_redone_here(monkeypatch):
    from collectors.kineto import parallel

    path = real_trace("ddp_allreduce_v100")
    monkeypatch.setenv("PERF_JOBS", "1")
    alone = load_trace(path)
    monkeypatch.setenv("PERF_JOBS", "2")
    monkeypatch.setattr(parallel, "_child", lambda *a: parallel.os._exit(3))  # dies, sends nothing
    assert_same(alone, load_trace(path))


def _events_raw(path):
    from collectors.kineto import decode
    from profiler.model.trace import Problems

    return decode.split_top(path, decode.read_bytes(path), Problems())["traceEvents"]
