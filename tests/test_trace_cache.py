"""The columnar cache (profiler/api/cache.py, profiler/model/trace_parquet.py): exact round trip,
the same report with and without it, and every way an entry can go stale or bad is rebuilt."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import collectors.kineto
from profiler.api import load_trace
from profiler.api import cache as cache_mod
from profiler.cli import app
from profiler.model.trace import Trace
from profiler.model.trace_parquet import FILES, from_files, to_files
from tests.conftest import TRACES, real_trace, write_trace, x

REAL = sorted(d.name for d in TRACES.iterdir() if d.is_dir() and d.name != "LICENSES")


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache on, in a temporary folder (conftest turns it off for every other test)."""
    monkeypatch.delenv("PERF_NO_CACHE", raising=False)
    root = tmp_path / "cache"
    monkeypatch.setenv("PERF_CACHE_DIR", str(root))
    return root


def entries(root: Path) -> list[Path]:
    traces = root / "traces"
    return sorted(d for d in traces.iterdir() if not d.name.startswith(".")) if traces.is_dir() else []


def assert_same(a: Trace, b: Trace) -> None:
    for table in ("events", "counters", "flows", "devices"):
        left, right = getattr(a, table), getattr(b, table)
        pd.testing.assert_frame_equal(left, right, check_exact=True)
        for c in left.columns:  # categories in the same order, of the same dtype (group-by order)
            if isinstance(left[c].dtype, pd.CategoricalDtype):
                assert left[c].cat.categories.equals(right[c].cat.categories), (table, c)
                assert left[c].cat.categories.dtype == right[c].cat.categories.dtype, (table, c)
    assert a.metadata == b.metadata
    assert a.problems.counts == b.problems.counts


def forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(*_a, **_k):
        raise AssertionError("parsed: the cache was not read")

    monkeypatch.setattr(collectors.kineto, "load_kineto", parse)


@pytest.mark.parametrize("folder", REAL)
def test_round_trip_is_exact_on_real_traces(folder: str):
    t = load_trace(real_trace(folder), cache=False)
    assert_same(t, from_files(to_files(t)))


@pytest.mark.parametrize("folder", REAL)
def test_analyze_json_is_byte_identical_with_the_cache(folder: str, cache_dir: Path, monkeypatch):
    path = str(real_trace(folder))
    runner = CliRunner()
    parsed = runner.invoke(app, ["analyze", path, "--json", "--no-cache"])
    assert parsed.exit_code == 0, parsed.output
    assert entries(cache_dir) == []  # --no-cache writes nothing
    first = runner.invoke(app, ["analyze", path, "--json"])  # parses and writes the entry
    assert len(entries(cache_dir)) == 1
    forbid_parsing(monkeypatch)
    cached = runner.invoke(app, ["analyze", path, "--json"])  # reads it
    assert first.exit_code == cached.exit_code == 0, cached.output
    assert parsed.stdout_bytes == first.stdout_bytes == cached.stdout_bytes


def small_trace(path: Path, dur: float = 10.0) -> Path:
    return write_trace(
        path,
        [x("aten::mm", "cpu_op", 0, 20, tid=1), x("gemm_kernel", "kernel", 5, dur, pid=0, tid=7, device=0, stream=7)],
    )


def kernel_dur(t: Trace) -> int:
    ev = t.events
    return int(ev.loc[ev["name"] == "gemm_kernel", "dur"].iloc[0])


def test_changed_source_is_parsed_again(tmp_path: Path, cache_dir: Path):
    p = small_trace(tmp_path / "t.json", dur=10)
    assert kernel_dur(load_trace(p)) == 10_000  # 10 µs
    small_trace(p, dur=12)  # same size, new bytes
    assert kernel_dur(load_trace(p)) == 12_000
    assert len(entries(cache_dir)) == 2


def test_same_bytes_elsewhere_hit_the_same_entry(tmp_path: Path, cache_dir: Path, monkeypatch):
    a = small_trace(tmp_path / "a.json")
    first = load_trace(a)
    b = tmp_path / "b.json"
    b.write_bytes(a.read_bytes())  # another name and mtime, the same content
    forbid_parsing(monkeypatch)
    assert_same(first, load_trace(b))
    assert len(entries(cache_dir)) == 1


def test_another_tool_version_or_reader_code_misses(tmp_path: Path, cache_dir: Path, monkeypatch):
    p = small_trace(tmp_path / "t.json")
    load_trace(p)
    monkeypatch.setattr(cache_mod, "__version__", "999.0")
    load_trace(p)
    monkeypatch.setattr(cache_mod, "_code_digest", lambda: "another reader")
    load_trace(p)
    assert len(entries(cache_dir)) == 3


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _flip(f: Path) -> None:
    data = bytearray(f.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 8):  # eight bytes in the middle: inside the data pages
        data[i] ^= 0xFF
    f.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "manifest"])
@pytest.mark.parametrize("name", ["events.parquet", "categories.parquet", "meta.json"])
def test_damaged_entry_is_detected_and_rebuilt(tmp_path: Path, cache_dir: Path, damage: str, name: str):
    p = real_trace("b200_eager")
    want = load_trace(p, cache=False)
    load_trace(p)
    (entry,) = entries(cache_dir)
    f = entry / name
    if damage == "truncate":
        _truncate(f)
    elif damage == "flip":
        _flip(f)
    elif damage == "delete":
        f.unlink()
    else:
        (entry / "manifest.json").write_text("{not json")
    assert cache_mod.read_entry(entry) is None  # detected...
    assert not entry.exists()  # ...and removed
    assert_same(want, load_trace(p))  # parsed again, right
    assert_same(want, cache_mod.read_entry(entry))  # and stored whole again


def test_a_half_written_folder_of_a_killed_process_is_never_read(tmp_path: Path, cache_dir: Path):
    p = small_trace(tmp_path / "t.json")
    want = load_trace(p, cache=False)
    load_trace(p)
    (entry,) = entries(cache_dir)
    tmp = entry.parent / f".tmp-{entry.name}-1234-5"
    entry.rename(tmp)  # as if killed before the rename: only the temporary folder exists
    _truncate(tmp / "events.parquet")
    assert_same(want, load_trace(p))
    assert entries(cache_dir) == [entry]


def test_unwritable_cache_falls_back_to_parsing(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("PERF_NO_CACHE", raising=False)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PERF_CACHE_DIR", str(blocker))
    p = small_trace(tmp_path / "t.json")
    assert_same(load_trace(p, cache=False), load_trace(p))


def test_env_turns_it_off(tmp_path: Path, cache_dir: Path, monkeypatch):
    monkeypatch.setenv("PERF_NO_CACHE", "1")
    load_trace(small_trace(tmp_path / "t.json"))
    assert not cache_dir.exists()


def test_no_secret_lands_in_the_cache(tmp_path: Path, cache_dir: Path):
    from tests.test_secrets import SECRETS, planted_doc

    p = tmp_path / "planted.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(planted_doc()).encode()))
    load_trace(p)
    (entry,) = entries(cache_dir)
    texts = [(entry / "meta.json").read_text()]
    for name in FILES:
        if name.endswith(".parquet"):
            texts.append(json.dumps(pq.read_table(entry / name).to_pylist()))
    blob = "\n".join(texts)
    assert "argmax" in blob  # the planted op's row is there, so the scan reads the tables
    leaked = [k for k, secret in SECRETS.items() if secret in blob]
    assert not leaked, leaked


def test_an_edit_that_still_parses_is_caught_by_the_digest(tmp_path: Path, cache_dir: Path):
    """meta.json changed into other valid JSON: only the manifest's digest tells."""
    p = small_trace(tmp_path / "t.json")
    want = load_trace(p, cache=False)
    load_trace(p)
    (entry,) = entries(cache_dir)
    meta = entry / "meta.json"
    meta.write_text(meta.read_text().replace('"files"', '"filez"'))
    assert cache_mod.read_entry(entry) is None
    assert_same(want, load_trace(p))


def test_diff_and_export_read_the_cache(tmp_path: Path, cache_dir: Path, monkeypatch):
    """perf diff and perf export load through the cache too: the same output once the entries exist."""
    a, b = real_trace("sglang_qwen3_decode_mi300x"), real_trace("nccl_meta_a100")
    runner = CliRunner()
    parsed = runner.invoke(app, ["diff", str(a), str(b), "--json", "--no-cache"])
    assert parsed.exit_code == 0, parsed.output
    assert entries(cache_dir) == []
    runner.invoke(app, ["diff", str(a), str(b), "--json"])
    assert len(entries(cache_dir)) == 2
    exported = runner.invoke(app, ["export", str(a), "-o", str(tmp_path / "parsed.json"), "--no-cache"])
    assert exported.exit_code == 0, exported.output
    forbid_parsing(monkeypatch)
    cached = runner.invoke(app, ["diff", str(a), str(b), "--json"])
    assert cached.exit_code == 0 and cached.stdout_bytes == parsed.stdout_bytes
    again = runner.invoke(app, ["export", str(a), "-o", str(tmp_path / "cached.json")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "cached.json").read_bytes() == (tmp_path / "parsed.json").read_bytes()


def test_the_least_recently_read_entry_goes_when_over_the_cap(tmp_path: Path, cache_dir: Path, monkeypatch):
    a, b, c = (small_trace(tmp_path / f"{n}.json", dur=d) for n, d in (("a", 10), ("b", 11), ("c", 12)))
    load_trace(a)
    (first,) = entries(cache_dir)
    size = sum(f.stat().st_size for f in first.iterdir())
    monkeypatch.setenv("PERF_CACHE_MAX", str(2 * size + size // 2))  # room for two entries, not three
    load_trace(b)
    load_trace(a)  # read: a is now more recent than b
    os.utime(first / "manifest.json", (time.time() + 10, time.time() + 10))  # mtimes may tie within a tick
    load_trace(c)
    left = entries(cache_dir)
    assert len(left) == 2 and first in left  # b, the least recently read, was removed


def test_an_unchanged_file_is_not_hashed_again_and_a_touched_back_one_is(tmp_path: Path, cache_dir: Path, monkeypatch):
    """The key is remembered with the file's stamp; a same-size edit whose mtime is set back still
    changes ctime, so it is hashed again and parsed."""
    monkeypatch.setattr(cache_mod, "RACY_S", 0)  # the file was just written: trust its stamp at once
    p = small_trace(tmp_path / "t.json", dur=10)
    load_trace(p)
    real_key = cache_mod._key
    monkeypatch.setattr(cache_mod, "_key", lambda *_a: (_ for _ in ()).throw(AssertionError("hashed again")))
    assert kernel_dur(load_trace(p)) == 10_000
    st = p.stat()
    small_trace(p, dur=12)  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back, as `touch -d` or `cp -p` would
    monkeypatch.setattr(cache_mod, "_key", real_key)
    assert kernel_dur(load_trace(p)) == 12_000
