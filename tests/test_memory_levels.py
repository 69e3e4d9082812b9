"""Per-level bytes (analysis.memory_levels), with the arithmetic worked out in comments."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.memory_levels import level_bytes, memory_floor
from profiler.model.hardware import load_spec, save_spec

A100 = load_spec("a100-sxm-80gb")  # hbm 2039e9 B/s; l2 40 MiB, 7.2192e12 B/s; smem 164 KiB x 108 SMs, 19.49e12 B/s


def unit(family: str, dtype: str, flops: float, nbytes: float) -> pd.DataFrame:
    return pd.DataFrame({"family": [family], "dtype": [dtype], "flops": [flops], "bytes": [nbytes]})


def test_big_gemm_is_bounded_by_l2_traffic_into_shared_memory():
    n = 8192
    flops, compulsory = 2 * n**3, 3 * n * n * 2  # fp16 A, B read and C written once: 402,653,184 B
    u = unit("gemm", "fp16", flops, compulsory)
    hbm, l2, smem = level_bytes(u, A100)[0]
    # HBM -> L2: S = 41,943,040 B / 2 B = 20,971,520 elements; 2*n^3/sqrt(S) - 2*S
    #   = 1.0995e12 / 4579.45 - 4.194e7 = 1.982e8 elements = 3.96e8 B < compulsory, so compulsory
    assert hbm == compulsory
    # L2 -> shared memory: S = 17,713,152 B / 108 SMs / 2 B = 82,005.33 elements per SM;
    #   2*n^3/sqrt(S) - 2*S*108 = 3.8396e9 - 1.7713e7 = 3.8219e9 elements = 7.644e9 B
    s = 17713152 / 108 / 2
    assert l2 == pytest.approx(2 * (flops / math.sqrt(s) - 2 * s * 108), rel=1e-12)
    assert l2 == pytest.approx(7.644e9, rel=1e-3)
    assert smem == compulsory  # innermost: nothing known inside it
    t, level, _ = memory_floor(u, A100)
    # l2: 7.644e9 / 7.2192e12 = 1.0588 ms; hbm: 4.027e8 / 2.039e12 = 0.1975 ms
    assert level[0] == "l2" and t[0] == pytest.approx(l2 / 7.2192e12 * 1e9)


def test_small_gemm_and_streaming_ops_move_compulsory_bytes_only():
    # 256^3 fp32: 2*256^3/sqrt(82005.33/2 ...) is far below compulsory at every level
    small = unit("gemm", "fp32", 2 * 256**3, 3 * 256 * 256 * 4)
    add = unit("elementwise", "fp32", 2**20, 3 * 4 * 2**20)
    for u in (small, add):
        per = level_bytes(u, A100)[0]
        assert list(per) == [u["bytes"][0]] * 3
        t, level, _ = memory_floor(u, A100)
        assert level[0] == "hbm" and t[0] == pytest.approx(u["bytes"][0] / 2039e9 * 1e9)


def test_unknown_cost_has_no_memory_floor():
    t, level, _ = memory_floor(unit("unknown", "unknown", float("nan"), float("nan")), A100)
    assert math.isnan(t[0]) and level[0] == ""


def test_partitions_survive_a_spec_round_trip(tmp_path):
    back = load_spec(str(save_spec(A100, tmp_path / "a100.yaml")))
    assert [m.partitions for m in back.memory] == [1, 1, 108]


def test_host_device_copy_is_floored_by_the_host_link_not_hbm():
    """ResNet-50 on a V100 (real trace): each step copies the input batch host -> device, one
    'Memcpy HtoD (Pageable -> Device)' of 19,267,584 B (32 x 3 x 224 x 224 fp32) in ~1.94 ms.
    Host link PCIe Gen3 x16: 15.754e9 B/s per direction -> floor 19,267,584 / 15.754e9 = 1.2230 ms,
    efficiency ~0.63. Against HBM (2 x 19,267,584 B read + written / 900e9 B/s = 42.8 µs) it
    would read 2% efficient and send the reader after the wrong ceiling."""
    from profiler.api import analyze, load_trace
    from tests.conftest import real_trace

    t = load_trace(real_trace("resnet50_legacy_v100"))
    ev = t.events
    htod = ev[ev["name"].astype(str).str.startswith("Memcpy HtoD") & (ev["bytes_recorded"] == 19_267_584)]
    assert len(htod) == 6  # one per step
    u = analyze(t, sections=("roofline",)).units.set_index("unit_id").loc[htod["op_id"].to_numpy()]
    assert (u["host_copy_bytes"] == 19_267_584).all()
    assert (u["memory_level"] == "pcie3-x16").all() and (u["bound"] == "memory").all()
    assert u["t_memory_ns"].to_numpy() == pytest.approx(19_267_584 / 15.754e9 * 1e9)  # 1,223,028 ns
    eff = u["efficiency"].to_numpy()
    assert eff == pytest.approx(1_223_028 / u["time_ns"].to_numpy(), rel=1e-6)
    assert ((eff > 0.6) & (eff < 0.7)).all()  # 1.223 / 1.94 ms; never above the link's ceiling


def test_device_to_device_copy_stays_on_hbm():
    """nccl_meta_a100 (real trace): its 960 copies are all 'Memcpy DtoD': no host bytes, floored on HBM."""
    from profiler.api import analyze, load_trace
    from tests.conftest import real_trace

    t = load_trace(real_trace("nccl_meta_a100"))
    ev = t.events
    dtod = ev[ev["kind"] == "memcpy"]
    assert dtod["name"].astype(str).str.startswith("Memcpy DtoD").all()
    u = analyze(t, sections=("roofline",)).units
    u = u[u["unit_id"].isin(dtod["op_id"])]
    assert len(u) and (u["host_copy_bytes"] == 0).all()
    assert not u["memory_level"].str.startswith("pcie").any()
