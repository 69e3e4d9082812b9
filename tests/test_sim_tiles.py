"""Per-core tile activity in a simulated trace (`perf simulate --tiles`, accelerator/sim/trace.py):
each tiled kernel's double-buffered loop (dma.tile_schedule) on every core's thread, read by the
Kineto reader as device annotations on the core's stream, off by default."""

from __future__ import annotations

import random

import orjson
import pytest

from accelerator.sim.timing import double_buffered, tile_intervals

torch = pytest.importorskip("torch")

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.trace import CORE_TID0, timeline_ns, trace_document  # noqa: E402
from accelerator.workloads.mlp import MLP  # noqa: E402
from profiler import api  # noqa: E402


@pytest.mark.parametrize("one_queue", [False, True])
def test_tile_intervals_end_at_the_loops_total(one_queue):
    """The schedule's last end is double_buffered's total, every step's compute starts where the
    previous step (its max of compute, next load, previous store) ended, on random loops."""
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 6)
        c, ld, st = ([rng.uniform(0, 5) for _ in range(n)] for _ in range(3))
        spans = tile_intervals(c, ld, st, one_queue)
        assert max(a + d for _, _, a, d in spans) == pytest.approx(double_buffered(c, ld, st, one_queue).total)
        assert sorted((t, w) for t, w, _, _ in spans) == sorted(
            (i, w) for i in range(n) for w in ("load", "compute", "store")
        )


@pytest.fixture(scope="module")
def wide():
    """The 1024-4096-1024 MLP at batch 512 on datacenter-npu, bf16 (fc2 tiled m=256 n=1024: 2 tiles)."""
    hw = load_accel("datacenter-npu")
    torch.manual_seed(0)
    return simulate(compile_model(MLP(1024, 4096, 1024).eval(), (torch.randn(512, 1024),), hw, "bf16").program, hw)


def test_tiles_per_core_by_hand(wide, tmp_path):
    """fc2's loop (tests/test_sim_dma.py's arithmetic): compute c = 16765 cycles / 1.05 GHz over 2
    tiles; per tile load L = (8 MiB weight + 4096 B bias from HBM at 150 GB/s per core, 4 MiB gelu
    from shared at 600 GB/s) / 8 cores / 2; store S = 2 MiB / 8 / 150e9 / 2; a setup wave
    w = 0.5 us / 8 cores on every tile's transfers but tile 0's load. From the loop's start
    (fc2's start + 1 us dispatch + 0.5 us setup): load 0 [0, L]; compute 0 and load 1 at L;
    compute 1 and store 0 at L + c/2 (c/2 > L + w and > S + w); store 1 at L + c. Each of the 8
    cores' threads holds those 6 events; a load moves (8 MiB + 4 MiB + 4096) / 2 / 8 bytes."""
    run = wide
    fc2 = run.kernels[1]
    c = 16765 / 1.05e9
    w_, b_, g_, out = 8 * 2**20 / 8 / 150e9, 4096 / 8 / 150e9, 4 * 2**20 / 8 / 600e9, 2 * 2**20 / 8 / 150e9
    L, S, w = (w_ + b_ + g_) / 2, out / 2, 0.5e-6 / 8
    expect = [
        ("load", 0, 0.0, L), ("compute", 0, L, c / 2), ("load", 1, L, L + w),
        ("compute", 1, L + c / 2, c / 2), ("store", 0, L + c / 2, S + w), ("store", 1, L + c, S + w),
    ]  # fmt: skip
    doc = trace_document(run, tiles=True)
    start = timeline_ns(run)[1][0] + 1500  # fc2's start + dispatch + exposed setup, ns
    tiles = [e for e in doc["traceEvents"] if e.get("cat") == "tile" and e["args"]["kernel"] == fc2.name]
    assert sorted({e["tid"] for e in tiles}) == list(range(CORE_TID0, CORE_TID0 + 8))
    core0 = sorted((e for e in tiles if e["tid"] == CORE_TID0), key=lambda e: (e["ts"], e["name"]))
    got = [(e["name"].split()[0], e["args"]["tile"], e["ts"], e["dur"]) for e in core0]
    want = sorted(((w, t, round(start + a * 1e9) / 1000, round(d * 1e9) / 1000) for w, t, a, d in expect),
                  key=lambda r: (r[2], f"{r[0]} {fc2.name} tile {r[1]}"))  # fmt: skip
    assert [(g[0], g[1]) for g in got] == [(x[0], x[1]) for x in want]
    assert [g[2] for g in got] == pytest.approx([x[2] for x in want], abs=1e-3)
    assert [g[3] for g in got] == pytest.approx([x[3] for x in want], abs=1e-3)
    assert [e["args"]["bytes"] for e in core0 if e["name"].startswith("load")] == [(12 * 2**20 + 4096) // 2 // 8] * 2
    assert len(tiles) == 6 * 8
    # off by default; the reader puts them on the cores' streams as annotations, not work
    assert not [e for e in trace_document(run)["traceEvents"] if e.get("cat") == "tile"]
    path = tmp_path / "tiles.json"
    path.write_bytes(orjson.dumps(doc))
    ev = api.load_trace(path).events
    on_core = ev[ev["track"].astype(str).str.startswith("rank0/npu0/stream") & (ev["kind"] == "annotation")]
    assert len(on_core) == len([e for e in doc["traceEvents"] if e.get("cat") == "tile"])
    assert set(on_core["track"].astype(str)) >= {f"rank0/npu0/stream{CORE_TID0 + c}" for c in range(8)}
    assert (ev["kind"] == "kernel").sum() == len(run.kernels)
