"""Counters over time and dependency flows in a simulated trace (accelerator/sim/trace.py), and
the Kineto reader's counter ('C') events in the counters table (collectors/kineto), so perf
analyze, the Perfetto export and the dashboard have them."""

from __future__ import annotations

import orjson
import pytest

torch = pytest.importorskip("torch")

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.trace import COUNTERS, counter_samples, timeline_ns, trace_document  # noqa: E402
from accelerator.workloads.mlp import MLP  # noqa: E402
from profiler import api  # noqa: E402


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """The 1024-4096-1024 MLP at batch 512 on datacenter-npu, bf16: (run, trace path)."""
    hw = load_accel("datacenter-npu")
    torch.manual_seed(0)
    run = simulate(compile_model(MLP(1024, 4096, 1024).eval(), (torch.randn(512, 1024),), hw, "bf16").program, hw)
    path = tmp_path_factory.mktemp("ctr") / "wide.json"
    path.write_bytes(orjson.dumps(trace_document(run)))
    return run, path


def test_counter_samples_by_hand(wide):
    """fc1 reads W (1024 x 4096 bf16, 8 MiB), x (512 x 1024 fp32, 2 MiB) and its bias (4096 fp32)
    from HBM and leaves gelu in shared memory; fc2 reads it. While fc1 runs: HBM bandwidth =
    those bytes / its seconds; matrix utilisation = its 16765-cycle matrix time / its seconds;
    shared memory = gelu's 512 x 4096 x 2 B = 4 MiB, live from fc1 to fc2, then 0; local memory
    per core = tiling's working set; the DMA queue holds fc1's 3 loads once the first starts
    (after 1 us dispatch + 0.5 us setup = 1500 ns)."""
    run, _ = wide
    fc1, fc2 = run.kernels
    samples = counter_samples(run)
    (start1, dur1), (start2, dur2) = timeline_ns(run)
    assert (start1, start2) == (0, dur1)
    hbm = samples[(0, "HBM bandwidth (GB/s)")]
    assert hbm[0] == (0, round((fc1.hbm_read + fc1.hbm_written) / fc1.time.total / 1e9, 6))
    assert fc1.hbm_read == 1024 * 4096 * 2 + 512 * 1024 * 4 + 4096 * 4  # W bf16, x and bias fp32
    assert hbm[-1] == (start2 + dur2, 0.0)
    matrix = samples[(0, "matrix utilisation (%)")]
    assert matrix[0] == (0, round(100 * (16765 / 1.05e9) / fc1.time.total, 6))
    assert samples[(0, "shared memory used (MiB)")] == [(0, 4.0), (start2 + dur2, 0.0)]
    assert samples[(0, "local memory used per core (KiB)")][0] == (0, fc1.local_bytes / 1024) and fc1.local_bytes > 0
    queue = samples[(0, "DMA queue depth")]
    assert queue[0] == (1500, 3.0) and queue[-1][1] == 0.0
    assert max(v for _, v in queue) <= 4  # never more than a kernel's transfers
    assert {name for _, name in samples} == set(COUNTERS)


def test_kineto_reader_reads_counters_into_the_trace(wide, tmp_path):
    """The 'C' events land in the counters table on rank0/gpu0/counters (the chip's pid carries
    its kernels), every sample with its value; the memory analysis (tracks '/memory') ignores
    them; the Perfetto export writes them and reads back the same samples."""
    run, path = wide
    doc = orjson.loads(path.read_bytes())
    written = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    trace = api.load_trace(path)
    c = trace.counters
    assert len(c) == len(written) and set(c["track"]) == {"rank0/gpu0/counters"} and set(c["device"]) == {"gpu0"}
    got = sorted(zip(c["name"].astype(str), c["ts"], c["value"], strict=True))
    want = sorted((e["name"], round(e["ts"] * 1000), e["args"]["value"]) for e in written)
    assert got == want
    report = api.analyze(trace)
    assert report.units is not None  # analysis runs with the counters present
    from profiler.api import write_perfetto

    out = write_perfetto(trace, tmp_path / "sim.perfetto-trace")
    back = api.load_trace(out).counters
    assert sorted(zip(back["name"].astype(str), back["ts"], back["value"], strict=True)) == got


def test_counter_events_of_any_chrome_trace(tmp_path):
    """A hand-written Chrome trace: a kernel on pid 0 (a device), counters on pid 0 and on a
    host pid, one sample without a numeric value (counted as a problem, not kept)."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {}},
        {"ph": "C", "name": "occupancy", "pid": 0, "ts": 10, "args": {"value": 0.5}},
        {"ph": "C", "name": "occupancy", "pid": 0, "ts": 15, "args": {"value": 0}},
        {"ph": "C", "name": "rss (MiB)", "pid": 4242, "ts": 12, "args": {"value": 7}},
        {"ph": "C", "name": "broken", "pid": 0, "ts": 13, "args": {"value": "high"}},
    ]
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    trace = api.load_trace(path)
    rows = sorted(zip(trace.counters["track"].astype(str), trace.counters["ts"], trace.counters["value"], strict=True))
    assert rows == [
        ("rank0/cpu/counters", 12_000, 7.0),
        ("rank0/gpu0/counters", 10_000, 0.5),
        ("rank0/gpu0/counters", 15_000, 0.0),
    ]
    assert trace.problems.counts["counter samples skipped: no readable ts or numeric 'value' arg"] == 1


def test_dependency_flows(wide):
    """fc2 reads fc1's gelu: one flow, 's' at fc1's start on the kernels thread, 'f' at fc2's."""
    run, path = wide
    flows = [e for e in orjson.loads(path.read_bytes())["traceEvents"] if e.get("cat") == "dependency"]
    assert run.kernels[1].deps == (0,) and run.kernels[0].deps == ()
    (start1, _), (start2, _) = timeline_ns(run)
    assert [(e["ph"], e["ts"], e["tid"]) for e in flows] == [("s", start1 / 1000, 0), ("f", start2 / 1000, 0)]
    assert flows[0]["id"] == flows[1]["id"] and flows[1]["bp"] == "e"


def test_kineto_reader_reads_dependency_flows(wide, tmp_path):
    """The reader joins each 'dependency' flow end to the kernel starting there on that chip's
    stream: one flow row of kind 'dependency', fc1's event -> fc2's; the Chrome export writes
    it back as a 'dependency' flow (not a launch)."""
    run, path = wide
    trace = api.load_trace(path)
    ev, fl = trace.events, trace.flows
    deps = fl[fl["kind"] == "dependency"]
    kernels = ev[ev["kind"] == "kernel"].set_index("name")["id"]
    assert list(zip(deps["src"], deps["dst"], strict=True)) == [
        (kernels[run.kernels[0].name], kernels[run.kernels[1].name])
    ]
    from collectors.perfetto.chrome import _flows

    cats = [e["cat"] for e in _flows(trace, ev, 0, 0)]
    assert cats.count("dependency") == 2
