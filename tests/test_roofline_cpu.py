"""Issue 3's checks on this CPU: traces recorded here with torch.profiler, floored on a spec that
`perf calibrate` measured here. Timing-sensitive, so marked `serial`: `make test` runs them
after the parallel suite, alone on the machine."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from profiler import analyze, load_trace
from profiler.calibrate import Sizes, calibrate
from profiler.model.hardware import save_spec

pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    spec = calibrate(Sizes(repeats=8), links=False)[0]  # full sizes (2048^3 matmul, 128 MiB triad arrays), best of 8
    return save_spec(spec, tmp_path_factory.mktemp("spec") / "here.yaml")


def record(tmp_path, fn, steps: int = 1):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            fn()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return load_trace(path)


def units_named(a, name):
    u = a.units
    return u[u["name"] == name]


def test_big_matmul_is_compute_bound(tmp_path, spec_path):
    a_, b_ = torch.randn(2048, 2048), torch.randn(2048, 2048)
    torch.mm(a_, b_)  # warm-up outside the trace
    a = analyze(record(tmp_path, lambda: torch.mm(a_, b_), steps=5), hardware=str(spec_path))
    mm = units_named(a, "aten::mm")
    assert len(mm) == 5 and set(mm["bound"]) == {"compute"}
    assert mm["flops"].iloc[0] == 2 * 2048**3  # 2*M*N*K: one multiply-add is two FLOPs
    # the best of five calls against the best the calibration saw: near 1 when the machine is quiet
    assert 0.5 <= mm["efficiency"].max() <= 1.05


def test_large_elementwise_is_memory_bound(tmp_path, spec_path):
    n = 64 * 2**20  # 64M elements, 256 MiB per fp32 tensor: far past every cache
    x, y = torch.randn(n), torch.randn(n)
    a = analyze(record(tmp_path, lambda: (torch.add(x, y), torch.mul(x, y))), hardware=str(spec_path))
    for name in ("aten::add", "aten::mul"):
        u = units_named(a, name)
        # bytes = 2 inputs + 1 output of 4-byte floats; FLOPs = one per element
        assert u["bytes"].iloc[0] == 3 * 4 * n and u["flops"].iloc[0] == n
        assert set(u["bound"]) == {"memory"}


def test_thousands_of_tiny_adds_are_runtime_bound(tmp_path, spec_path):
    x, y = torch.randn(8), torch.randn(8)

    def many():
        for _ in range(3000):
            torch.add(x, y)

    a = analyze(record(tmp_path, many), hardware=str(spec_path))
    adds = units_named(a, "aten::add")
    assert len(adds) == 3000
    assert (adds["bound"] == "runtime").mean() == 1.0
    cpu = a.equation.iloc[0]
    assert cpu["runtime_ns"] > cpu["compute_ns"] + cpu["memory_ns"]


def _allreduce_rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    x = torch.ones(16 * 2**20)  # 16M floats = 64 MiB
    dist.all_reduce(x)  # warm-up, and both ranks in step
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        dist.all_reduce(x)
    if rank == 0:
        prof.export_chrome_trace(out)
    dist.destroy_process_group()


def test_64mb_allreduce_over_gloo_is_communication_bound(tmp_path):
    import torch.multiprocessing as mp

    from profiler.calibrate import _free_port

    spec = calibrate(Sizes.quick(), links=True)[0]  # the link figure is what matters here
    spec_file = save_spec(spec, tmp_path / "here.yaml")
    out = tmp_path / "rank0.json"
    mp.spawn(_allreduce_rank, args=(_free_port(), str(out)), nprocs=2, join=True)
    a = analyze(load_trace(out), hardware=str(spec_file))
    coll = a.units[a.units["name"] == "gloo:all_reduce"]
    assert len(coll) == 1
    # 64 MiB message, ring all-reduce over 2 ranks: each rank sends 2 * 1/2 * 64 MiB
    assert coll["algo_bytes"].iloc[0] == 64 * 2**20
    assert coll["bound"].iloc[0] == "communication"
    assert a.equation.iloc[0]["communication_ns"] > 0
