"""Perfetto: export (protobuf and Chrome JSON), read back, and read native traces built by hand."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TRACES, real_trace
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder
from typer.testing import CliRunner

from collectors.kineto import load_kineto
from collectors.perfetto import is_perfetto, load_perfetto, write_chrome_json, write_perfetto
from profiler.cli import app
from profiler.model.errors import InputError
from profiler.api import analyze, load_trace

REAL = sorted(p.name for p in TRACES.iterdir() if p.is_dir() and p.name != "LICENSES") if TRACES.is_dir() else []
COMPARED = [
    "name",
    "cat",
    "kind",
    "ts",
    "dur",
    "track",
    "rank",
    "device",
    "stream",
    "thread",
    "depth",
    "correlation",
    "external_id",
    "step",
    "source",
    "shapes",
    "dtypes",
    "concrete",
    "collective",
    "msg_in_nelems",
    "msg_out_nelems",
    "group_size",
    "msg_dtype",
    "bytes_recorded",
]


def table_keys(t) -> tuple[list, list, list]:
    """Events as sorted (row, parent row, op row) texts, flows as (src row, dst row, kind), counters:
    what must survive a round trip, independent of how ids are numbered."""
    ev = t.events
    key = joined(ev, COMPARED)
    pos = pd.Index(ev["id"].to_numpy())

    def ref(col: str) -> np.ndarray:
        r = ev[col].to_numpy()
        return np.where(r >= 0, key[np.maximum(pos.get_indexer(r), 0)], "-")

    rows = sorted(zip(key, ref("parent_id"), ref("op_id")))
    fl = t.flows
    flows = sorted(zip(key[pos.get_indexer(fl["src"])], key[pos.get_indexer(fl["dst"])], fl["kind"].astype(str)))
    counters = sorted(joined(t.counters, ["track", "rank", "device", "ts", "name", "value"]).tolist())
    return rows, flows, counters


def joined(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """One text per row: the columns' values joined by '|' (element-wise, no per-row Python)."""
    key = df[cols[0]].astype(str).to_numpy(dtype=object)
    for c in cols[1:]:
        key = key + "|" + df[c].astype(str).to_numpy(dtype=object)
    return key


def assert_same(a, b) -> None:
    for what, x, y in zip(("events", "flows", "counters"), table_keys(a), table_keys(b)):
        assert len(x) == len(y), what
        diff = next(((p, q) for p, q in zip(x, y) if p != q), None)
        assert diff is None, f"{what} differ: {diff}"
    pd.testing.assert_frame_equal(a.devices.reset_index(drop=True), b.devices.reset_index(drop=True))


@pytest.fixture(scope="module")
def analysed() -> dict:
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            t = load_trace(real_trace(name))
            cache[name] = (t, analyze(t, top=None, sections=("roofline",)).units)
        return cache[name]

    return get


@pytest.mark.parametrize("name", REAL)
def test_perfetto_round_trip_real(name, analysed, tmp_path):
    t, units = analysed(name)
    out = write_perfetto(t, tmp_path / "t.pftrace", units)
    back = load_perfetto(out)
    assert_same(t, back)
    assert back.problems.counts == t.problems.counts  # re-derived links meet the same problems
    # the analysis rides along: every classified unit with FLOPs has them on its own slice
    with_flops = units[units["flops"].notna()]
    if len(with_flops):
        assert "flops" in back.events.columns
        assert int(back.events["flops"].notna().sum()) == len(with_flops)
        np.testing.assert_allclose(
            np.sort(back.events["flops"].dropna().to_numpy()), np.sort(with_flops["flops"].to_numpy())
        )
    check_nesting(out.read_bytes())


def check_nesting(data: bytes) -> int:
    """Every track is a proper stack: per track, times never go back, an END closes the innermost
    open slice at or after its start, nothing stays open. Returns the number of overlap lanes."""
    trace = pb.Trace.FromString(data)
    last: dict[int, int] = {}
    stacks: dict[int, list[int]] = {}
    lanes = sum(1 for p in trace.packet if p.HasField("track_descriptor") and "(overlap" in p.track_descriptor.name)
    for p in trace.packet:
        if not p.HasField("track_event") or p.track_event.type == pb.TrackEvent.TYPE_COUNTER:
            continue
        te, ts = p.track_event, p.timestamp
        assert ts >= last.get(te.track_uuid, 0), "time goes back on a track"
        last[te.track_uuid] = ts
        if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stacks.setdefault(te.track_uuid, []).append(ts)
        else:
            assert stacks.get(te.track_uuid), "end without a begin"
            assert stacks[te.track_uuid].pop() <= ts
    assert not any(stacks.values()), "slices left open"
    return lanes


def test_overlapping_host_slices_move_to_lanes(analysed, tmp_path):
    # b200_eager has 14 host events that poke past their parent's end (the reader counts them):
    # on one Perfetto track they could not nest, so they sit on '(overlap N)' lanes
    t, units = analysed("b200_eager")
    assert t.problems.counts["host events extend past their parent's end (kept under that parent)"] == 14
    data = write_perfetto(t, tmp_path / "b.pftrace", units).read_bytes()
    assert check_nesting(data) >= 1


@pytest.mark.parametrize("name", ["b200_eager", "dlrm_8rank_v100", "nccl_meta_a100", "resnet50_legacy_v100"])
def test_chrome_json_round_trip(name, analysed, tmp_path):
    t, units = analysed(name)
    paths = write_chrome_json(t, tmp_path / "out.json", units)
    assert len(paths) == len(t.ranks)  # one file per rank
    back = load_kineto(paths[0] if len(paths) == 1 else tmp_path)
    assert_same(t, back)


def test_gzip_and_detection(analysed, tmp_path):
    t, units = analysed("vllm_graphs_mi300x")
    out = write_perfetto(t, tmp_path / "v.perfetto-trace.gz", units)
    plain = tmp_path / "renamed.bin"
    plain.write_bytes(gzip.decompress(out.read_bytes()))
    assert is_perfetto(out) and is_perfetto(plain)  # by name, and by the first byte (0x0A)
    assert not is_perfetto(real_trace("vllm_graphs_mi300x"))
    assert_same(t, load_trace(out))
    assert_same(t, load_trace(plain))


# ---- native traces built by hand ----------------------------------------------------------


def native_trace() -> bytes:
    """A trace as a Perfetto SDK would write it: interned names on a sequence, tracks with parents."""
    b = TraceProtoBuilder()

    def packet(ts: int | None = None, seq: int = 7, flags: int = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE):
        p = b.add_packet()
        if ts is not None:
            p.timestamp = ts
        p.trusted_packet_sequence_id = seq
        p.sequence_flags = flags
        return p

    p = b.add_packet()
    p.track_descriptor.uuid = 1
    p.track_descriptor.process.pid, p.track_descriptor.process.process_name = 42, "trainer rank 3"
    p = b.add_packet()
    p.track_descriptor.uuid = 2
    p.track_descriptor.thread.pid, p.track_descriptor.thread.tid, p.track_descriptor.thread.thread_name = (
        42,
        4242,
        "main",
    )
    for uuid, parent, name in ((3, 1, "gpu 1"), (4, 3, "stream 9")):
        p = b.add_packet()
        p.track_descriptor.uuid, p.track_descriptor.parent_uuid, p.track_descriptor.name = uuid, parent, name
    p = b.add_packet()
    p.track_descriptor.uuid, p.track_descriptor.parent_uuid, p.track_descriptor.name = 5, 3, "power"
    p.track_descriptor.counter.SetInParent()

    early = packet(50)  # needs interned state before any packet cleared it: skipped, counted
    early.track_event.type, early.track_event.track_uuid, early.track_event.name_iid = 3, 2, 1
    p = packet(100, flags=pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED)
    p.interned_data.event_names.add(iid=1, name="aten::mm")
    p.interned_data.event_categories.add(iid=1, name="cpu_op")
    p.interned_data.debug_annotation_names.add(iid=1, name="Input Dims")
    p.interned_data.debug_annotation_string_values.add(iid=1, str=b"[[8,16],[16,4]]")
    te = p.track_event
    te.type, te.track_uuid, te.name_iid = pb.TrackEvent.TYPE_SLICE_BEGIN, 2, 1
    te.category_iids.append(1)
    a = te.debug_annotations.add()
    a.name_iid, a.string_value_iid = 1, 1
    p = packet(110)  # a runtime call inside the op, named inline; starts flow 77
    te = p.track_event
    te.type, te.track_uuid, te.name = pb.TrackEvent.TYPE_SLICE_BEGIN, 2, "cudaLaunchKernel"
    te.categories.append("cuda_runtime")
    te.flow_ids.append(77)
    a = te.debug_annotations.add()
    a.name, a.int_value = "correlation", 5
    p = packet(130)
    p.track_event.type, p.track_event.track_uuid = pb.TrackEvent.TYPE_SLICE_END, 2
    p = packet(150)  # new interned name added mid-sequence; the kernel ends flow 77
    p.interned_data.event_names.add(iid=2, name="gemm_kernel")
    p.interned_data.event_categories.add(iid=2, name="kernel")
    te = p.track_event
    te.type, te.track_uuid, te.name_iid = pb.TrackEvent.TYPE_SLICE_BEGIN, 4, 2
    te.category_iids.append(2)
    te.terminating_flow_ids.append(77)
    p = packet(160)
    te = p.track_event
    te.type, te.track_uuid, te.double_counter_value = pb.TrackEvent.TYPE_COUNTER, 5, 250.5
    p = packet(180)
    p.track_event.type, p.track_event.track_uuid = pb.TrackEvent.TYPE_SLICE_END, 4
    p = packet(200)
    p.track_event.type, p.track_event.track_uuid = pb.TrackEvent.TYPE_SLICE_END, 2
    p = packet(210)  # an instant
    te = p.track_event
    te.type, te.track_uuid, te.name = pb.TrackEvent.TYPE_INSTANT, 2, "marker"
    te.categories.append("user_annotation")
    p = packet(300)  # a legacy complete ('X') event of 4 us
    te = p.track_event
    te.track_uuid, te.name = 2, "aten::add"
    te.categories.append("cpu_op")
    te.legacy_event.phase, te.legacy_event.duration_us = ord("X"), 4
    p = b.add_packet()  # a packet type this reader does not read
    p.ftrace_events.cpu = 0
    return b.serialize()


def test_native_trace(tmp_path):
    path = tmp_path / "native.pftrace"
    path.write_bytes(native_trace())
    t = load_trace(path)
    ev = t.events.sort_values("ts").reset_index(drop=True)
    got = ev[
        [
            "name",
            "cat",
            "kind",
            "ts",
            "dur",
            "track",
            "rank",
            "device",
            "stream",
            "thread",
            "depth",
            "correlation",
            "shapes",
        ]
    ]
    expected = pd.DataFrame(
        [
            [
                "aten::mm",
                "cpu_op",
                "op",
                100,
                100,
                "rank3/cpu/thread4242",
                3,
                "cpu",
                -1,
                4242,
                0,
                -1,
                "[[8,16],[16,4]]",
            ],
            [
                "cudaLaunchKernel",
                "cuda_runtime",
                "runtime",
                110,
                20,
                "rank3/cpu/thread4242",
                3,
                "cpu",
                -1,
                4242,
                1,
                5,
                "",
            ],
            ["gemm_kernel", "kernel", "kernel", 150, 30, "rank3/gpu1/stream9", 3, "gpu1", 9, -1, 0, -1, ""],
            ["marker", "user_annotation", "annotation", 210, 0, "rank3/cpu/thread4242", 3, "cpu", -1, 4242, 0, -1, ""],
            ["aten::add", "cpu_op", "op", 300, 4000, "rank3/cpu/thread4242", 3, "cpu", -1, 4242, 0, -1, ""],
        ],  # 4 us = 4000 ns
        columns=got.columns,
    )
    pd.testing.assert_frame_equal(got.astype(object), expected.astype(object))
    by_name = dict(zip(ev["name"].astype(str), ev["id"]))
    assert t.flows[["src", "dst"]].values.tolist() == [[by_name["cudaLaunchKernel"], by_name["gemm_kernel"]]]
    assert t.flows["kind"].tolist() == ["launch"]
    # the kernel's op is the innermost op above the flow's source: aten::mm
    assert int(ev.loc[ev["name"] == "gemm_kernel", "op_id"].iat[0]) == by_name["aten::mm"]
    assert int(ev.loc[ev["name"] == "cudaLaunchKernel", "parent_id"].iat[0]) == by_name["aten::mm"]
    assert t.counters[["track", "rank", "device", "ts", "name", "value"]].astype(object).values.tolist() == [
        ["rank3/gpu1/counters", 3, "gpu1", 160, "power", 250.5]
    ]
    assert t.problems.counts["packets skipped: their sequence's interned state was never cleared"] == 1
    assert t.problems.counts["packets of type 'ftrace_events' skipped (not TrackEvent data)"] == 1
    assert sorted(t.devices["device"].astype(str)) == ["cpu", "gpu1"]


def test_unended_slices_and_stray_ends_are_counted(tmp_path):
    b = TraceProtoBuilder()
    for ts, typ in (
        (10, pb.TrackEvent.TYPE_SLICE_END),
        (20, pb.TrackEvent.TYPE_SLICE_BEGIN),
        (30, pb.TrackEvent.TYPE_SLICE_BEGIN),
        (40, pb.TrackEvent.TYPE_SLICE_END),
    ):
        p = b.add_packet()
        p.timestamp, p.trusted_packet_sequence_id = ts, 1
        p.track_event.type, p.track_event.track_uuid, p.track_event.name = typ, 9, f"s{ts}"
    path = tmp_path / "open.pftrace"
    path.write_bytes(b.serialize())
    t = load_perfetto(path)
    assert t.events[["name", "ts", "dur"]].values.tolist() == [["s30", 30, 10]]  # the inner one closed at 40
    assert t.problems.counts["slice ends without a matching begin (ignored)"] == 1
    assert t.problems.counts["slices never ended (dropped)"] == 1
    assert t.problems.counts["events on tracks with no descriptor"] == 1


# ---- the CLI ---------------------------------------------------------------------------------


def test_cli_export_and_bad_input(tmp_path):
    runner = CliRunner()
    src = real_trace("sglang_qwen3_decode_mi300x")
    out = tmp_path / "d.pftrace"
    r = runner.invoke(app, ["export", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "wrote" in r.stdout and out.exists()
    assert_same(load_trace(src), load_trace(out))
    r = runner.invoke(app, ["export", str(src), "-o", str(tmp_path / "d.json")])
    assert r.exit_code == 0 and (tmp_path / "d.json").exists()
    r = runner.invoke(app, ["export", str(src), "-o", str(tmp_path / "d.txt")])
    assert r.exit_code == 2 and "unknown output format" in r.stderr

    data = out.read_bytes()
    for label, bad in (
        ("truncated", data[: len(data) // 2 + 3]),
        ("corrupt", b"\x0a\xff\xff\xff\xff\xff\xff" + data[100:200]),
    ):
        path = tmp_path / f"{label}.pftrace"
        path.write_bytes(bad)
        r = runner.invoke(app, ["analyze", str(path)])
        assert r.exit_code == 2, (label, r.output)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and "Perfetto" in lines[0], lines
    gz = tmp_path / "truncated.pftrace.gz"
    gz.write_bytes(gzip.compress(data)[:500])
    r = runner.invoke(app, ["analyze", str(gz)])
    assert r.exit_code == 2 and str(gz) in r.stderr and "truncated" in r.stderr


def test_load_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_perfetto(tmp_path / "missing.pftrace")
    empty = tmp_path / "empty.pftrace"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        load_perfetto(empty)


# ---- trace_processor_shell (only where PERFETTO_TP_BIN names one) ---------------------------


@pytest.mark.skipif(not os.environ.get("PERFETTO_TP_BIN"), reason="PERFETTO_TP_BIN is not set")
def test_trace_processor_reader_agrees(analysed, tmp_path):
    from collectors.perfetto.build import build_trace
    from collectors.perfetto.tp import load_with_trace_processor

    t, units = analysed("vllm_graphs_mi300x")
    out = write_perfetto(t, tmp_path / "v.pftrace", units)
    via_tp = load_with_trace_processor(out, os.environ["PERFETTO_TP_BIN"])
    assert build_trace is not None
    a, b = table_keys(t), table_keys(via_tp)
    assert a[0] == b[0] and a[1] == b[1]  # events and flows; counters are named generically via SQL


def test_tp_env_is_honoured_when_set(tmp_path, monkeypatch, analysed):
    # a binary that is not there: the reader must say so in one line, not fall back silently
    t, units = analysed("sglang_qwen3_decode_mi300x")
    out = write_perfetto(t, tmp_path / "s.pftrace", units)
    monkeypatch.setenv("PERFETTO_TP_BIN", str(tmp_path / "no-such-trace_processor_shell"))
    with pytest.raises(InputError, match="trace_processor_shell"):
        load_perfetto(Path(out))
