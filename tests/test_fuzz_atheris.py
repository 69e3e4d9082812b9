"""The coverage-guided fuzz target (tests/fuzz/fuzz_readers.py) run for a bounded time in CI, and
the crash sites it found kept as regression tests: whatever the bytes, the Kineto, Perfetto and
TORCH_TRACE readers return or raise InputError. benchmarks/bench_fuzz.py runs it for 1M
executions and counts the other exceptions."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiler import InputError

REPO = Path(__file__).resolve().parents[1]
FUZZ = REPO / "tests" / "fuzz" / "fuzz_readers.py"
SEEDS = REPO / "tests" / "fuzz" / "seeds"


def test_seeds_read_cleanly(tmp_path: Path):
    """Each seed is a valid file for its reader (so the fuzzer starts from the readers' deep paths)."""
    from collectors.kineto import load_kineto
    from collectors.perfetto import load_perfetto
    from collectors.torch_compile.report import read_compile_report

    for name, reader, suffix in (
        ("kineto", load_kineto, ".json"),
        ("perfetto", load_perfetto, ".pftrace"),
        ("torch_trace", read_compile_report, ".log"),
    ):
        data = (SEEDS / name).read_bytes()
        p = tmp_path / f"{name}{suffix}"
        p.write_bytes(data[1:])
        assert data[0] % 3 == ("kineto", "perfetto", "torch_trace").index(name)
        reader(p)  # no exception


def test_perfetto_names_with_invalid_utf8_are_text(tmp_path: Path):
    """Found by the fuzzer: proto2 strings are not UTF-8 checked, protobuf returns bytes for bad
    UTF-8, and sorting bytes with str names crashed (TypeError). The bad bytes show as U+FFFD."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    from collectors.perfetto import load_perfetto

    t = pb.Trace()
    p = t.packet.add()
    p.trusted_packet_sequence_id = 1
    p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    p.interned_data.event_names.add(iid=1, name="@@bad@@")
    p.interned_data.event_categories.add(iid=1, name="@@cat@@")
    p.track_descriptor.uuid = 7
    p.track_descriptor.name = "@@trk@@"
    for ts, typ, extra in (
        (10, pb.TrackEvent.TYPE_SLICE_BEGIN, {"name_iid": 1, "category_iids": [1]}),
        (20, pb.TrackEvent.TYPE_SLICE_BEGIN, {"name": "ok"}),
        (25, pb.TrackEvent.TYPE_SLICE_END, {}),
        (30, pb.TrackEvent.TYPE_SLICE_END, {}),
    ):
        q = t.packet.add(
            timestamp=ts, trusted_packet_sequence_id=1, sequence_flags=pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        )
        q.track_event.type = typ
        q.track_event.track_uuid = 7
        for k, v in extra.items():
            getattr(q.track_event, k).extend(v) if isinstance(v, list) else setattr(q.track_event, k, v)
    data = t.SerializeToString()
    for tag in (b"@@bad@@", b"@@cat@@", b"@@trk@@"):  # same length: the protobuf stays well formed
        data = data.replace(tag, b"k\xff\xfe" + tag[3:])
    path = tmp_path / "bad_utf8.pftrace"
    path.write_bytes(data)
    trace = load_perfetto(path)  # before: TypeError: '<' not supported between 'bytes' and 'str'
    names = sorted(trace.events["name"].astype(str))
    assert names == ["k\ufffd\ufffdad@@", "ok"]


def test_deeply_nested_perfetto_annotation_json(tmp_path: Path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    from collectors.perfetto import load_perfetto

    t = pb.Trace()
    q = t.packet.add(timestamp=1, trusted_packet_sequence_id=1)
    q.track_event.type = pb.TrackEvent.TYPE_INSTANT
    q.track_event.name = "deep"
    q.track_event.debug_annotations.add(name="x", legacy_json_value="[" * 100_000 + "]" * 100_000)
    path = tmp_path / "deep.pftrace"
    path.write_bytes(gzip.compress(t.SerializeToString()))
    with pytest.raises(InputError, match="nested deeper than"):
        load_perfetto(path)


def test_the_fuzzer_finds_nothing_in_a_bounded_run(tmp_path: Path):
    """About 25 s of coverage-guided fuzzing from the seeds; any exception but InputError fails
    the run and leaves the input in tmp_path (crash-*)."""
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    shutil.copytree(SEEDS, corpus)
    r = subprocess.run(
        [
            sys.executable,
            str(FUZZ),
            str(corpus),
            "-max_total_time=25",
            "-runs=5000",
            "-timeout=60",
            "-rss_limit_mb=4096",
            f"-artifact_prefix={tmp_path}/",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert "Done" in r.stderr and not list(tmp_path.glob("crash-*"))


def _chromium(ph: str, ts: float, thread: int = 22353) -> str:
    meta = '{"chromium_event": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0, "has_payload": "x"}'
    ev = (
        f'{{"name": "dynamo", "ts": {ts}, "args": {{"compile_id": "0/0"}}, '
        f'"ph": "{ph}", "cat": "dynamo_timed", "tid": 0, "pid": 0}}'
    )
    return f"V1203 09:55:22.376000 {thread} torch/_dynamo/utils.py:2350] {meta}\n\t{ev}\n"


def test_compile_times_past_int64_are_counted(tmp_path: Path):
    """Found by the fuzzer: a compile step at 1.8e17 us (1.8e20 ns, past uint64's 1.8e19) made the
    phase table's int64 cast raise OverflowError ('internal error'); at 1.8e16 us (1.8e19 ns,
    past int64's 9.2e18) it wrapped around silently. Both are skipped and counted; so is a glog
    thread id past 64 bits. The sane step beside them is kept: 105 - 100 us = 5000 ns."""
    from collectors.torch_compile.report import read_compile_report

    log = tmp_path / "big.log"
    log.write_text(
        _chromium("B", 1.8e17)
        + _chromium("E", 1.8e17)
        + _chromium("B", 1.8e16)
        + _chromium("E", 1.8e16)
        + _chromium("B", 100.0)
        + _chromium("E", 105.0)
        + _chromium("B", 1.0, thread=10**30)
        + _chromium("E", 2.0, thread=10**30)
    )
    rep = read_compile_report(log)
    assert rep.phases["dur_ns"].tolist() == [5000] and rep.phases["start_ns"].tolist() == [100_000]
    assert rep.problems.counts["compile events with a time past int64 nanoseconds skipped"] == 4
    assert rep.problems.counts["structured-log lines with a thread id past 64 bits skipped"] == 2
