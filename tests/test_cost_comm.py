"""Collective costs: algorithm bytes by hand, and collectives in real traces."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.cost.comm import algorithm_bytes, algorithm_steps, collective_kind, comm_table
from profiler import analyze, load_trace
from profiler.render.json import to_json
from tests.conftest import real_trace, write_trace, x


@pytest.mark.parametrize(
    "kind, in_b, out_b, n, want",
    [
        ("all_reduce", 64e6, 64e6, 2, 64e6),  # 2 (n-1)/n S = 2 * 1/2 * 64 MB
        ("all_reduce", 80e6, 80e6, 8, 140e6),  # 2 * 7/8 * 80 MB
        ("all_gather", 1e6, 8e6, 8, 7e6),  # (n-1)/n * S_out = 7/8 * 8 MB
        ("reduce_scatter", 8e6, 1e6, 8, 7e6),  # (n-1)/n * S_in
        ("all_to_all", 4e6, 4e6, 4, 3e6),  # 3/4 * 4 MB
        ("broadcast", 5e6, 5e6, 8, 5e6),  # the whole message
        ("barrier", 0, 0, 8, 0),
        ("all_reduce", 1e6, 1e6, 1, 0),  # nothing to send
    ],
)
def test_algorithm_bytes(kind, in_b, out_b, n, want):
    assert algorithm_bytes(kind, in_b, out_b, n) == pytest.approx(want)


def test_names():
    assert collective_kind("record_param_comms", "allreduce") == "all_reduce"
    assert collective_kind("x", "_allgather_base") == "all_gather"
    assert collective_kind("gloo:all_reduce", "") == "all_reduce"
    assert collective_kind("aten::mm", "") is None


def test_gloo_region_uses_shape_and_world_size():
    units = pd.DataFrame(
        [
            {
                "name": "gloo:all_reduce",
                "collective": "",
                "msg_in_nelems": -1,
                "msg_out_nelems": -1,
                "group_size": -1,
                "msg_dtype": "",
                "shapes": "[[16777216]]",
                "dtypes": '["float"]',
                "rank": 0,
            }
        ]
    )
    row = comm_table(units, {0: 2}).iloc[0]
    # 16,777,216 floats = 64 MiB; ring all-reduce over 2 ranks sends 2 * 1/2 of it
    assert (row["collective"], row["comm_bytes"], row["algo_bytes"], row["dtype"]) == (
        "all_reduce",
        4 * 2**24,
        4 * 2**24,
        "fp32",
    )


def test_nccl_collectives_in_a_real_trace_are_communication():
    a = analyze(load_trace(real_trace("nccl_meta_a100")))
    coll = a.units[a.units["family"] == "collective"]
    # the trace's 21 NCCL kernels (15 all_reduce + 6 broadcast; traces README) are all costed
    assert coll["work_events"].sum() == 21
    assert set(coll["bound"]) == {"communication"}
    assert (coll["bytes"] == 0).all() and (coll["flops"] == 0).all()  # never memory, never compute
    eq = a.equation.iloc[0]
    assert eq["communication_ns"] > 0


def test_collectives_known_by_kernel_name_without_metadata():
    # dlrm's 2023 traces record no message sizes for most collectives: the family is still known
    # (so overlap can be measured), the cost stays unknown (never guessed).
    assert collective_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", "") == "send_recv"
    assert collective_kind("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "") == "all_gather"
    t = load_trace(real_trace("dlrm_8rank_v100"))
    a = analyze(t, rank=0)
    coll = a.units[a.units["family"] == "collective"]
    assert len(coll) > 0 and set(coll["bound"]) <= {"communication", "unknown", "runtime"}
    from analysis.timeline import communication_overlap

    ov = communication_overlap(t, a.units)
    assert ov["comm_ns"].iloc[0] > 0 and 0 <= ov["exposed_ns"].iloc[0] <= ov["comm_ns"].iloc[0]


@pytest.mark.parametrize(
    "kind, n, want",
    [
        ("all_reduce", 8, 6),  # reduce then broadcast down a tree: 2 * log2(8)
        ("all_reduce", 6, 6),  # 2 * ceil(log2 6) = 2 * 3
        ("all_gather", 8, 3),  # recursive doubling: log2(8)
        ("broadcast", 2, 1),
        ("send_recv", 64, 1),
        ("barrier", 4, 4),
        ("all_reduce", 1, 0),  # a group of one moves nothing
    ],
)
def test_algorithm_steps(kind, n, want):
    assert algorithm_steps(kind, n) == want


def test_comm_floor_counts_latency_steps():
    # 8-rank all_reduce of 64 MiB fp32 on an A100 (NVLink3 300 GB/s per direction, NCCL baseLat
    # 3.6 us + hwLat 0.47 us per step): t = 3.6 + 6 * 0.47 + 2 * 7/8 * 64 MiB / 300 GB/s
    #   = 3.6 + 2.82 + 391.46 us = 397.88 us
    from analysis.roofline import _floors
    from profiler.model.hardware import load_spec

    u = pd.DataFrame(
        {
            "family": ["collective"],
            "dtype": ["fp32"],
            "flops": [0.0],
            "flops_effective": [0.0],
            "bytes": [0.0],
            "algo_bytes": [2 * 7 / 8 * 64 * 2**20],
            "algo_steps": [6.0],
        }
    )
    floors, _ = _floors(u, load_spec("a100-sxm-80gb"))
    assert floors[0, 2] == pytest.approx((3.6e-6 + 6 * 0.47e-6 + 2 * 7 / 8 * 64 * 2**20 / 300e9) * 1e9)
    assert floors[0, 2] == pytest.approx(397_880, rel=1e-4)


# ---------------------------------------------------------------------------- custom-kernel collectives


def _k(name, ts, dur, stream, corr):
    return x(name, "kernel", ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr)


def _launch(ts, corr, **extra):
    return x("cudaLaunchKernelExC", "cuda_runtime", ts, 2, correlation=corr, **extra)


#: An H800 expert-parallel step: a GEMM on stream 7 [0, 100) us; DeepEP's dispatch kernel
#: (launched from Python, no op) on stream 20 [80, 130); its combine under a `dpsk::ep` op
#: [150, 170); vLLM's custom all-reduce under _C_custom_ar::all_reduce [180, 200).
EP_EVENTS = [
    x("ProfilerStep#1", "user_annotation", 0, 210),
    x(
        "aten::mm",
        "cpu_op",
        1,
        5,
        **{
            "External id": 1,
            "Input Dims": [[1024, 4096], [4096, 4096]],
            "Input type": ["c10::BFloat16", "c10::BFloat16"],
            "Concrete Inputs": ["", ""],
        },
    ),
    _launch(2, 10, **{"External id": 1}),
    _launch(60, 11),
    x(
        "dpsk::ep::combine",
        "cpu_op",
        140,
        5,
        **{"External id": 2, "Input Dims": [[4096, 7168]], "Input type": ["c10::BFloat16"], "Concrete Inputs": [""]},
    ),
    _launch(141, 12, **{"External id": 2}),
    x(
        "_C_custom_ar::all_reduce",
        "cpu_op",
        175,
        4,
        **{
            "External id": 3,
            "Input Dims": [[], [1024, 4096], [1024, 4096], [], []],
            "Input type": ["Scalar", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"],
            "Concrete Inputs": ["", "", "", "", ""],
        },
    ),
    _launch(176, 13, **{"External id": 3}),
    _k("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", 0, 100, 7, 10),
    _k(
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, int const*, "
        "int4 const*, float const*, long const*, float const*, bool const*, int const*, int, int, int, int, int, int, "
        "int, void**, int, int, int)",
        80,
        50,
        20,
        11,
    ),
    _k(
        "void deep_ep::internode::combine<false, 8, 768, 8, 4>(int4*, float*, int4 const*, float const*, ...)",
        150,
        20,
        20,
        12,
    ),
    _k(
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
        "__nv_bfloat16*, int, int)",
        180,
        20,
        21,
        13,
    ),
]
H800 = {
    "deviceProperties": [
        {
            "id": 0,
            "name": "NVIDIA H800",
            "totalGlobalMem": 85031714816,
            "computeMajor": 9,
            "computeMinor": 0,
            "numSms": 132,
            "warpSize": 32,
        }
    ],
    "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},
}


def test_deepep_and_custom_allreduce_kernels_are_communication(tiny):
    a = analyze(load_trace(tiny(EP_EVENTS, **H800)), hardware="h100-sxm")
    u = a.units.set_index("name")
    assert (
        u.loc[
            "void deep_ep::intranode::dispatch<8, 768, 8192>("
            "int4*, float*, int*, long*, float*, int*, int*, int const*, "
            "int4 const*, float const*, long const*, float const*, bool const*, int const*, "
            "int, int, int, int, int, int, "
            "int, void**, int, int, int)",
            "family",
        ]
        == "collective"
    )
    for name, kind in (("dpsk::ep::combine", "all_to_all"), ("_C_custom_ar::all_reduce", "all_reduce")):
        assert (u.loc[name, "family"], u.loc[name, "bound"]) == ("collective", "communication")
    coll = a.units[a.units["family"] == "collective"]
    assert len(coll) == 3 and set(coll["bound"]) == {"communication"}
    # EP dispatch/combine bytes depend on the routing: not derived (no floor, no efficiency)
    assert coll.loc[coll["name"] == "dpsk::ep::combine", "algo_bytes"].isna().all()
    # custom all-reduce of a [1024, 4096] bf16 tensor over the world of 8: 2 * 7/8 * 8 MiB
    assert u.loc["_C_custom_ar::all_reduce", "algo_bytes"] == 2 * 7 / 8 * 1024 * 4096 * 2
    # communication = [80,130) + [150,170) + [180,200) = 90 us; the GEMM [0,100) hides 20 of it
    c = a.communication.iloc[0]
    assert (c["comm_ns"], c["overlapped_ns"], c["exposed_ns"]) == (90_000, 20_000, 70_000)
    # the wall equation splits [80, 100) between the GEMM and the dispatch: 10 + 30 + 20 + 20 us
    eq = a.equation.iloc[0]
    assert eq["communication_ns"] == 80_000 and eq["unknown_ns"] == 0


def test_user_table_adds_a_collective(tiny, tmp_path, monkeypatch):
    events = [dict(e) for e in EP_EVENTS]
    events[-3] = {**events[-3], "name": "void my_ep::shuffle_tokens<8>(int4*)"}  # the dispatch kernel, renamed
    trace = load_trace(tiny(events, **H800))
    plain = analyze(trace, hardware="h100-sxm")
    assert plain.units.loc[plain.units["name"].str.contains("my_ep"), "bound"].tolist() == ["unknown"]
    table = tmp_path / "collectives.yaml"
    table.write_text("collectives:\n  - match: 'my_ep::shuffle'\n    kind: all_to_all\n")
    for how in ("argument", "env"):
        if how == "env":
            monkeypatch.setenv("PERF_COLLECTIVES", str(table))
            a = analyze(trace, hardware="h100-sxm")
        else:
            a = analyze(trace, hardware="h100-sxm", collectives=table)
        mine = a.units[a.units["name"].str.contains("my_ep")]
        assert mine[["family", "bound"]].values.tolist() == [["collective", "communication"]]
        assert a.communication.iloc[0]["comm_ns"] == 90_000


@pytest.mark.parametrize(
    "text, problem",
    [
        ("collectives: 3\n", "'collectives' list"),
        ("collectives:\n  - match: '(unclosed'\n    kind: all_reduce\n", "bad regular expression"),
        ("collectives:\n  - match: 'x'\n    kind: allreduce_typo\n", "kind 'allreduce_typo'"),
    ],
)
def test_bad_user_table_is_one_clear_line(tmp_path, text, problem):
    from typer.testing import CliRunner

    from profiler.cli import app

    table = tmp_path / "bad.yaml"
    table.write_text(text)
    trace = write_trace(tmp_path / "t.json", EP_EVENTS, **H800)
    r = CliRunner().invoke(app, ["analyze", str(trace), "--collectives", str(table)])
    assert r.exit_code == 2 and problem in r.stderr and str(table) in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------------------- gloo, recorded here

GLOO_ELEMS = 2**20  # fp32: 4 MiB per all_reduce
GLOO_CALLS = 3


def _gloo_rank(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    t = torch.ones(GLOO_ELEMS)
    dist.all_reduce(t)  # connections made, both ranks in step
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(GLOO_CALLS):
            dist.all_reduce(t)
    if rank == 0:
        prof.export_chrome_trace(out)
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def gloo_trace(tmp_path_factory):
    """Rank 0 of a 2-process gloo job: three all_reduce of 2^20 fp32 under torch.profiler."""
    import torch.multiprocessing as mp

    from profiler.calibrate import _free_port

    out = tmp_path_factory.mktemp("gloo") / "rank0.json"
    mp.spawn(_gloo_rank, args=(_free_port(), str(out)), nprocs=2, join=True)
    return out


# two gloo processes talking over TCP: under the loaded parallel phase one aborted once (SIGABRT
# in the spawn), so this runs in the serial phase, alone
@pytest.mark.serial
def test_gloo_all_reduce_is_a_communication_op_with_bytes_and_bandwidth(gloo_trace):
    a = analyze(load_trace(gloo_trace))
    ops = a.top_ops.set_index("name")
    g = ops.loc["gloo:all_reduce"]
    # ring all-reduce over n = 2: each call sends 2 (n-1)/n * S = 2 * 1/2 * 4 MiB = 4,194,304 bytes;
    # three calls: 12,582,912
    assert g["count"] == GLOO_CALLS and g["bound"] == "communication" and g["family"] == "collective"
    assert g["algo_bytes"] == GLOO_CALLS * 2 * (2 - 1) / 2 * 4 * GLOO_ELEMS
    # achieved bus bandwidth = those bytes over the regions' summed time
    assert g["algo_bw"] == pytest.approx(g["algo_bytes"] / g["time_ns"] * 1e9)
    assert g["time_ns"] == g["total_ns"] > 0  # the worker thread's region: no child ops
    # the enqueue op on the main thread is listed as such, not as the collective
    c = ops.loc["c10d::allreduce_"]
    assert bool(c["enqueue"]) and c["bound"] == "runtime" and c["algo_bytes"] != c["algo_bytes"]
    assert ops.index[0] == "gloo:all_reduce"  # what the run waited for leads the table
    doc = json.loads(to_json(a, {}))
    row = next(o for o in doc["ops"] if o["name"] == "gloo:all_reduce")
    assert row["algo_bytes"] == GLOO_CALLS * 4 * GLOO_ELEMS and row["enqueue"] is False
