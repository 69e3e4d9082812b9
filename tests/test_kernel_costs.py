"""Inductor's generated kernels classify like any op: `perf analyze` on a `perf profile --compile`
trace costs the 'graph_<g>_<kernel>' units from the fusion map the trace carries
(analysis/cost/kernels.py, joined in profiler/api/pipeline.py `_roofline`).

The compiled trace is tests/test_compiler_page.py's `shared_compile` (one compile per test
session, shared through its lock file): no extra compile here.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from analysis.cost import COST_COLUMNS
from analysis.cost.kernels import kernel_costs, kernel_family, with_kernel_costs
from profiler.api import analyze, load_trace, trace_compile_report
from tests.test_compiler_page import shared_compile


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return shared_compile(tmp_path_factory)


def test_the_fused_gelu_kernel_is_costed_and_floored_at_its_cache_level(compiled):
    trace = load_trace(compiled["trace"])
    fusion = trace_compile_report(trace).fusion
    row = fusion[fusion["kernel"].str.startswith("cpp_fused_gelu")].iloc[0]
    u = analyze(trace).units
    gelu = u[u["name"].astype(str) == row["runtime_name"]]
    assert len(gelu) == 2  # one kernel range per profiled step (--steps 2)
    # the fusion map's numbers per call: x (8, 1024) fp32 read, gelu(x) written; 5 pointwise nodes
    # (mul, mul, erf, add, mul) of 8*1024 elements -> 40960 FLOP; 8*1024*4 = 32768 byte each way
    assert (row["flops"], row["bytes_read"], row["bytes_written"]) == (40960.0, 32768.0, 32768.0)
    assert (gelu["flops"] == row["flops"]).all() and (gelu["flops_effective"] == row["flops"]).all()
    assert (gelu["bytes_read"] == row["bytes_read"]).all() and (gelu["bytes_written"] == row["bytes_written"]).all()
    assert set(gelu["family"]) == {"elementwise"} and set(gelu["dtype"]) == {"fp32"}
    assert set(gelu["hardware"]) == {"generic-x86-cpu"}
    # floors on generic-x86-cpu (profiler/model/presets/generic-x86-cpu.yaml):
    #   t_compute = 40960 FLOP / 192e9 FLOP/s (vector fp32)     =  213.3 ns
    #   t_memory  = 65536 byte / 384e9 byte/s (l1: the 64 KiB working set fits its 2 x 32 KiB,
    #               so the data can be served from there; analysis/memory_levels.py)  = 170.7 ns
    #   t_runtime = min_op_time 5e-8 s                            =   50   ns
    # the largest is t_compute (erf's work over data in L1): bound 'compute', efficiency = 213.3 ns / time
    assert gelu["t_compute_ns"].to_numpy() == pytest.approx(40960 / 192e9 * 1e9)
    assert gelu["t_memory_ns"].to_numpy() == pytest.approx(65536 / 384e9 * 1e9)
    assert set(gelu["memory_level"]) == {"l1"}
    assert gelu["t_runtime_ns"].to_numpy() == pytest.approx(50.0)
    assert set(gelu["bound"]) == {"compute"}
    assert gelu["efficiency"].to_numpy() == pytest.approx(40960 / 192e9 * 1e9 / gelu["time_ns"].to_numpy())
    # the extern kernel is aten::addmm, costed by the op-name model from its shapes as before
    addmm = u[u["name"].astype(str) == "aten::addmm"]
    assert len(addmm) and set(addmm["family"]) == {"gemm"} and not addmm["flops"].isna().any()


@pytest.mark.parametrize("carried", [None, "junk", {"tables": {"fusion": "junk"}}])
def test_without_the_fusion_map_the_kernel_stays_unknown(compiled, carried):
    """The cost comes from the carried fusion map, not from the name: drop it (or carry junk) and
    it is unknown, without a traceback."""
    trace = load_trace(compiled["trace"])
    ranks = {
        r: {**{k: v for k, v in m.items() if k != "perfCompile"}, **({"perfCompile": carried} if carried else {})}
        for r, m in trace.metadata["ranks"].items()
    }
    bare = replace(trace, metadata={**trace.metadata, "ranks": ranks})
    u = analyze(bare).units
    gelu = u[u["name"].astype(str).str.contains("cpp_fused_gelu")]
    assert len(gelu) == 2 and set(gelu["bound"]) == {"unknown"}


def _fusion(rows: list[dict]) -> pd.DataFrame:
    cols = ["kernel", "runtime_name", "kind", "aten_ops", "flops", "bytes_read", "bytes_written", "dtype", "family"]
    return pd.DataFrame(rows, columns=cols)


def test_kernel_costs_joins_generated_kernels_by_exact_name():
    fusion = _fusion(
        [
            {
                "kernel": "cpp_fused_add_relu_0",
                "runtime_name": "graph_0_cpp_fused_add_relu_0",
                "kind": "cpp",
                "aten_ops": ["aten::add", "aten::relu"],
                "flops": 200.0,
                "bytes_read": 800.0,
                "bytes_written": 400.0,
                "dtype": "fp32",
                "family": "fused",
            },
            {
                "kernel": "triton_red_fused_sum_1",
                "runtime_name": "triton_red_fused_sum_1",
                "kind": "triton",
                "aten_ops": ["aten::sum"],
                "flops": 1024.0,
                "bytes_read": 2048.0,
                "bytes_written": 8.0,
                "dtype": "bf16",
                "family": "fused",
            },
            {
                "kernel": "extern_kernels.mm",
                "runtime_name": "aten::mm",
                "kind": "extern",
                "aten_ops": ["aten::mm"],
                "flops": 1e6,
                "bytes_read": 1e4,
                "bytes_written": 1e3,
                "dtype": "fp32",
                "family": "gemm",
            },
            # the same name twice with different costs (two graphs numbered alike): ambiguous
            {
                "kernel": "cpp_fused_mul_2",
                "runtime_name": "graph_1_cpp_fused_mul_2",
                "kind": "cpp",
                "aten_ops": ["aten::mul"],
                "flops": 10.0,
                "bytes_read": 80.0,
                "bytes_written": 40.0,
                "dtype": "fp32",
                "family": "fused",
            },
            {
                "kernel": "cpp_fused_mul_2",
                "runtime_name": "graph_1_cpp_fused_mul_2",
                "kind": "cpp",
                "aten_ops": ["aten::mul"],
                "flops": 20.0,
                "bytes_read": 160.0,
                "bytes_written": 80.0,
                "dtype": "fp32",
                "family": "fused",
            },
            # a symbolic shape: no FLOPs, no bytes
            {
                "kernel": "cpp_fused_exp_3",
                "runtime_name": "graph_2_cpp_fused_exp_3",
                "kind": "cpp",
                "aten_ops": ["aten::exp"],
                "flops": None,
                "bytes_read": None,
                "bytes_written": None,
                "dtype": "fp32",
                "family": "fused",
            },
            # a hand-edited file: not a number, not a kind -> unknown, never a traceback
            {
                "kernel": "cpp_fused_neg_4",
                "runtime_name": "graph_3_cpp_fused_neg_4",
                "kind": "cpp",
                "aten_ops": "aten::neg",
                "flops": "n/a",
                "bytes_read": 4.0,
                "bytes_written": 4.0,
                "dtype": None,
                "family": None,
            },
            {
                "kernel": "k",
                "runtime_name": "graph_4_k",
                "kind": ["cpp"],
                "aten_ops": [],
                "flops": 1.0,
                "bytes_read": 1.0,
                "bytes_written": 1.0,
                "dtype": "fp32",
                "family": "fused",
            },
        ]
    )
    units = pd.DataFrame(
        {
            "name": [
                "aten::mm",
                "graph_0_cpp_fused_add_relu_0",
                "triton_red_fused_sum_1",
                "graph_1_cpp_fused_mul_2",
                "graph_2_cpp_fused_exp_3",
                "graph_0_cpp_fused_add_relu_0_x",
                "graph_0_cpp_fused_add_relu_0",
            ],
            "rank": [0] * 7,
        },
        index=[10, 11, 12, 13, 14, 15, 16],
    )
    k = kernel_costs(units, fusion)
    assert list(k.columns) == list(COST_COLUMNS) and list(k.index) == list(units.index)
    # the C++ kernel's range, both occurrences: the fusion map's per-call numbers
    for i in (11, 16):
        assert tuple(k.loc[i]) == (200.0, 200.0, 800.0, 400.0, "elementwise", "fp32")
    assert tuple(k.loc[12]) == (1024.0, 1024.0, 2048.0, 8.0, "reduction", "bf16")
    # extern (an ATen op the op model costs), ambiguous, and a name that only starts alike: untouched
    for i in (10, 13, 15):
        assert math.isnan(k.loc[i, "flops"]) and k.loc[i, "family"] == "unknown" and k.loc[i, "dtype"] == "unknown"
    # unknown sizes stay NaN (classify calls it 'unknown'), the kernel is still named a kernel
    assert np.isnan(k.loc[14, ["flops", "bytes_read", "bytes_written"]].to_numpy(dtype=float)).all()
    assert k.loc[14, "family"] == "elementwise"
    odd = kernel_costs(pd.DataFrame({"name": ["graph_3_cpp_fused_neg_4", "graph_4_k"]}), fusion)
    assert math.isnan(odd.loc[0, "flops"]) and odd.loc[0, "bytes_read"] == 4.0 and odd.loc[0, "dtype"] == "unknown"
    assert odd.loc[1, "family"] == "unknown"


def test_kernel_costs_by_rank_and_merge_into_the_cost_table():
    fusion = _fusion(
        [
            {
                "kernel": "cpp_fused_gelu_0",
                "runtime_name": "graph_0_cpp_fused_gelu_0",
                "kind": "cpp",
                "aten_ops": ["aten::erf"],
                "flops": 5.0,
                "bytes_read": 4.0,
                "bytes_written": 4.0,
                "dtype": "fp32",
                "family": "fused",
            },
            {
                "kernel": "cpp_fused_gelu_0",
                "runtime_name": "graph_0_cpp_fused_gelu_0",
                "kind": "cpp",
                "aten_ops": ["aten::erf"],
                "flops": 50.0,
                "bytes_read": 40.0,
                "bytes_written": 40.0,
                "dtype": "fp32",
                "family": "fused",
            },
        ]
    ).assign(rank=[0, 1])
    units = pd.DataFrame({"name": ["graph_0_cpp_fused_gelu_0"] * 3 + ["aten::add"], "rank": [1, 0, 2, 0]})
    k = kernel_costs(units, fusion)
    assert k["flops"].tolist()[:2] == [50.0, 5.0] and math.isnan(k.loc[2, "flops"])  # rank 2 carries no fusion map
    costs = pd.DataFrame(
        {
            "flops": [np.nan, np.nan, np.nan, 7.0],
            "flops_effective": [np.nan, np.nan, np.nan, 7.0],
            "bytes_read": [np.nan, np.nan, np.nan, 8.0],
            "bytes_written": [np.nan, np.nan, np.nan, 4.0],
            "family": ["unknown"] * 3 + ["elementwise"],
            "dtype": ["unknown"] * 3 + ["fp32"],
        }
    )
    merged = with_kernel_costs(costs, units, fusion)
    assert (
        merged["flops"].tolist()[:2] == [50.0, 5.0]
        and merged.loc[3, "flops"] == 7.0
        and math.isnan(merged.loc[2, "flops"])
    )
    assert merged["family"].tolist() == ["elementwise", "elementwise", "unknown", "elementwise"]
    assert costs.loc[0, "family"] == "unknown"  # a copy: the input is untouched
    assert with_kernel_costs(costs, units, pd.DataFrame()) is costs


@pytest.mark.parametrize(
    ("family", "kernel", "ops", "want"),
    [
        ("gemm", "triton_tem_fused_mm_0", ["aten::mm"], "gemm"),
        (
            "fused",
            "cpp_fused__softmax_0",
            ["aten::amax", "aten::exp", "aten::sub", "aten::sum", "aten::div"],
            "reduction",
        ),
        ("fused", "triton_per_fused_native_layer_norm_0", [], "reduction"),
        ("fused", "cpp_fused_add_mul_0", ("aten::add", "aten::mul"), "elementwise"),
        ("fused", "cpp_fused_0", None, "elementwise"),
    ],
)
def test_kernel_family(family, kernel, ops, want):
    assert kernel_family(family, kernel, ops) == want
