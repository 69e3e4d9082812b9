"""Bounded-memory analysis (perf analyze --memory-limit; profiler/api/stream.py): the streamed
path, forced onto real traces with chunks far smaller than them, gives the in-memory path's
numbers for every section it computes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import collectors.kineto.stream
from profiler.api import analyze, load_trace
from profiler.api.stream import analyze_streamed, decompressed_size, should_stream
from profiler.cli import app
from profiler.model.errors import InputError
from tests.conftest import real_trace

CHUNK = 64 << 10  # 64 KiB of JSON per chunk: every real trace here is cut into tens of chunks
FOLDERS = ["b200_eager", "nccl_meta_a100", "dlrm_8rank_v100", "sglang_qwen3_prefill_mi300x", "resnet50_legacy_v100"]


def keyed(frame, cols):
    return {tuple(r[:-2]): tuple(r[-2:]) for r in frame[[*cols, "count", "total_ns"]].itertuples(index=False)}


@pytest.mark.parametrize("folder", FOLDERS)
def test_streamed_sections_equal_the_in_memory_ones(folder: str):
    path = real_trace(folder)
    want = analyze(load_trace(path, cache=False), top=None, sections=("summary", "ops"))
    got, meta = analyze_streamed(path, memory_limit=1 << 30, top=None, cache=False, chunk=CHUNK)
    assert meta["streamed"]["chunks"] > 3  # really cut into chunks
    assert got.device_time.equals(want.device_time)  # busy, idle, window, work events per device
    for field in ("start_ns", "end_ns", "ranks", "devices", "world_size", "framework", "files"):
        assert getattr(got.overview, field) == getattr(want.overview, field), field
    assert dict(got.overview.events_by_kind) == dict(want.overview.events_by_kind)
    assert got.top_kernels.equals(want.top_kernels)  # every kernel, copy and memset: count, total, mean, share
    # host ops: the same count and inclusive host time per (name, shapes); device time not linked
    assert keyed(got.top_ops, ["name", "shapes"]) == keyed(want.top_ops, ["name", "shapes"])
    assert (got.top_ops["device_ns"] == -1).all()


def test_cli_streams_only_over_the_limit(tmp_path: Path):
    path = real_trace("nccl_meta_a100")
    need = 3 * decompressed_size(path)  # the in-memory path's estimate (profiler.api.stream)
    assert should_stream(path, need - 1) and not should_stream(path, need)
    runner = CliRunner()
    streamed = runner.invoke(app, ["analyze", str(path), "--json", "--memory-limit", str(need - 1)])
    whole = runner.invoke(app, ["analyze", str(path), "--json", "--memory-limit", str(need)])
    assert streamed.exit_code == whole.exit_code == 0, streamed.output
    s, w = json.loads(streamed.stdout), json.loads(whole.stdout)
    assert "streamed" in s["metadata"] and "streamed" not in w["metadata"]
    assert s["summary"]["busy_ns"] == w["summary"]["busy_ns"]
    assert w["verdict"] is not None and s["verdict"] is None  # said to be skipped, not invented
    text = runner.invoke(app, ["analyze", str(path), "--memory-limit", "1K"])
    assert text.exit_code == 0 and "Streamed" in text.output and "critical_path" in text.output


def test_gzip_size_estimate_reads_the_trailer(tmp_path: Path):
    body = b'{"traceEvents": []}' * 1000
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(body))
    assert decompressed_size(p) == len(body) == 19_000


def test_second_run_reads_the_streamed_parquet(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("PERF_NO_CACHE")
    monkeypatch.setenv("PERF_CACHE_DIR", str(tmp_path / "cache"))
    path = real_trace("b200_eager")
    first, _ = analyze_streamed(path, memory_limit=1 << 30, chunk=CHUNK)

    def parse(*_a, **_k):
        raise AssertionError("parsed again")

    monkeypatch.setattr(collectors.kineto.stream.StreamedFile, "chunks", parse)
    again, _ = analyze_streamed(path, memory_limit=1 << 30, chunk=CHUNK)
    assert again.device_time.equals(first.device_time) and again.top_kernels.equals(first.top_kernels)


def plain_copy(tmp_path: Path, folder: str = "b200_eager") -> bytes:
    return gzip.decompress(real_trace(folder).read_bytes())


def test_minified_json_is_cut_between_events(tmp_path: Path):
    """No newlines: cut at '},{' (sglang's traces are written so); args holding '},{' are kept whole."""
    doc = json.loads(plain_copy(tmp_path))
    doc["traceEvents"][5].setdefault("args", {})["nested"] = [{"a": "},{"}, {"b": 1}]  # a decoy cut
    p = tmp_path / "minified.json"
    p.write_bytes(json.dumps(doc, separators=(",", ":")).encode())
    got, meta = analyze_streamed(p, memory_limit=1 << 30, top=None, cache=False, chunk=CHUNK)
    want = analyze(load_trace(p, cache=False), top=None, sections=("summary", "ops"))
    assert meta["streamed"]["chunks"] > 3
    assert got.device_time.equals(want.device_time) and got.top_kernels.equals(want.top_kernels)


def test_one_blob_with_no_boundary_is_refused(tmp_path: Path):
    p = tmp_path / "blob.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "' + b"a" * 600_000 + b'"}]}')
    with pytest.raises(InputError, match="no boundary between events"):
        analyze_streamed(p, memory_limit=1 << 30, cache=False, chunk=CHUNK)


def test_truncated_trace_is_one_clear_error(tmp_path: Path):
    data = plain_copy(tmp_path)
    p = tmp_path / "cut.json"
    p.write_bytes(data[: len(data) // 2])
    r = CliRunner().invoke(app, ["analyze", str(p), "--memory-limit", "1K"])
    assert r.exit_code == 2
    assert "cut.json" in r.output and "not closed" in r.output and "Traceback" not in r.output


def test_no_secret_in_streamed_output(tmp_path: Path):
    from tests.test_secrets import SECRETS, planted_doc

    p = tmp_path / "planted.pt.trace.json"
    p.write_text(json.dumps(planted_doc(), indent=1))  # one event per line group: can be cut
    runner = CliRunner()
    outs = [
        runner.invoke(app, ["analyze", str(p), "--memory-limit", "1K", *extra], env={"COLUMNS": "500"})
        for extra in ([], ["--json"])
    ]
    for r in outs:
        assert r.exit_code == 0, r.output
        assert "Streamed" in r.output or '"streamed"' in r.output
        leaked = [k for k, secret in SECRETS.items() if secret in r.output]
        assert not leaked, leaked


def test_corrupt_gzip_is_one_clear_error(tmp_path: Path):
    data = bytearray(real_trace("b200_eager").read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # zeros in the middle of the deflate stream
    p = tmp_path / "corrupt.json.gz"
    p.write_bytes(bytes(data))
    r = CliRunner().invoke(app, ["analyze", str(p), "--memory-limit", "1K"])
    assert r.exit_code == 2, r.output
    assert "corrupt.json.gz" in r.output and "internal error" not in r.output, r.output
