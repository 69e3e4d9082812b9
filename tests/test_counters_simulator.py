"""The simulated accelerator's counters (collectors/counters/simulator.py): a `perf simulate -o`
trace read as a counter file, its measured FLOPs and bytes (analysis/counters.py), joined to the
same trace and compared with the cost model."""

from __future__ import annotations

import json

import orjson
import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.trace import trace_document  # noqa: E402
from analysis.counters import measured  # noqa: E402
from collectors.counters import read_counters  # noqa: E402
from profiler import api  # noqa: E402
from profiler.cli import app  # noqa: E402


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """Linear(64, 128) + GELU, Linear(128, 64), LayerNorm + Softmax at batch 8, bf16 on
    datacenter-npu: two bf16 GEMM kernels on the matrix unit, one fp32 vector kernel.
    (trace path, the trace's kernel events as written)."""
    hw = load_accel("datacenter-npu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128),
        torch.nn.GELU(),
        torch.nn.Linear(128, 64),
        torch.nn.LayerNorm(64),
        torch.nn.Softmax(-1),
    ).eval()
    run = simulate(compile_model(model, (torch.randn(8, 64),), hw, "bf16").program, hw)
    path = tmp_path_factory.mktemp("simcount") / "sim.json"
    path.write_bytes(orjson.dumps(trace_document(run)))
    kernels = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    return path, kernels


def test_every_kernel_and_arg_is_read(sim):
    """One launch per kernel event; one row per arg, `stall_cycles` one per cause (counted with
    the json module); numbers in value with their unit, the rest as text."""
    path, kernels = sim
    kc = read_counters(path)
    assert kc.source == "simulator" and kc.info == {"gpu": "datacenter-npu"}
    assert len(kc.launches) == len(kernels) == 3
    assert len(kc.rows) == sum(len(e["args"]) - 1 + len(e["args"]["stall_cycles"]) for e in kernels)
    assert list(kc.launches["kernel"]) == [e["name"] for e in sorted(kernels, key=lambda e: e["ts"])]
    assert list(kc.launches["device"].unique()) == ["npu0"]
    units = kc.units()
    assert (units["flops"], units["hbm_read"], units["matrix_ns"], units["stall_cycles.dispatch"]) == (
        "flop",
        "byte",
        "ns",
        "cycle",
    )
    text = kc.rows.set_index(["launch", "counter"])["text"]
    assert [text[(i, "dtype")] for i in range(3)] == ["bf16", "bf16", "fp32"]
    assert [text[(i, "unit")] for i in range(3)] == ["matrix", "matrix", "vector"]


def test_flops_and_bytes_equal_the_trace_args(sim):
    """Measured per launch: FLOPs under the kernel's unit and dtype, DRAM = HBM read + written,
    L2 = shared bytes, duration = the event's dur. The GEMMs by hand: fc1 2*8*64*128 = 131,072
    + GELU 8*128 = 1,024 (its fused epilogue, counted with its matrix FLOPs); fc2 2*8*128*64."""
    path, kernels = sim
    m = measured(read_counters(path)).set_index("kernel")
    for e in kernels:
        a, r = e["args"], m.loc[e["name"]]
        unit = "matrix" if a["unit"] == "matrix" else "vector"
        assert r["flops"] == r[f"flops_{unit}_{a['dtype']}"] == a["flops"]
        assert r["bytes_dram"] == a["hbm_read"] + a["hbm_written"] and r["bytes_l2"] == a["shared_bytes"]
        assert r["duration_ns"] == round(e["dur"] * 1000) and r["duration_from"] == "timestamps"
    assert (m.loc["addmm", "flops_matrix_bf16"], m.loc["addmm_1", "flops_matrix_bf16"]) == (132_096, 131_072)
    assert m.loc["native_layer_norm", "flops_matrix_fp32"] == 0 and m.loc["native_layer_norm", "flops_mac"] == 0


def test_every_launch_joins_and_agrees_with_the_cost_model(sim):
    """Joined by name and launch order, every launch on both sides; the cost model (the fusion
    rows the simulator wrote) agrees: FLOPs and HBM bytes ratio 1 for every kernel; the GEMMs
    all on the matrix unit (matrix share 1); the roofline on the preset's derived spec."""
    path, kernels = sim
    rep = api.analyze(api.load_trace(path), counters=read_counters(path)).counters
    assert rep.join["matched"] == rep.join["counter_launches"] == rep.join["trace_kernels"] == 3
    assert rep.join["counters_unmatched"] == rep.join["trace_unmatched"] == 0
    c = rep.compare.set_index("kernel")
    assert len(c) == 3
    assert list(c["flops_ratio"]) == [1.0, 1.0, 1.0] and list(c["bytes_ratio"]) == [1.0, 1.0, 1.0]
    assert list(c.loc[["addmm", "addmm_1"], "matrix_share"]) == [1.0, 1.0]
    assert "datacenter-npu" in rep.notes[0] and not rep.findings


def test_kernel_without_args_is_one_line_exit_2(sim, tmp_path):
    path, _ = sim
    doc = json.loads(path.read_text())
    next(e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"] == "addmm_1").pop("args")
    bad = tmp_path / "noargs.json"
    bad.write_text(json.dumps(doc))
    r = CliRunner().invoke(app, ["counters", str(bad)])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and "noargs.json" in r.output and "'addmm_1'" in r.output, r.output
    assert "Traceback" not in r.output
