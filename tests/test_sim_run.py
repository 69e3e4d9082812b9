"""`accelerator/sim/run.py` and `perf simulate MODEL`: compiled programs run on the simulated
accelerator. No kernel is faster than its roofline floor; a GEMM's time is SCALE-Sim's closed
form by hand; the trace loads and `perf analyze` floors it on the accelerator's derived spec;
the analysis's bound agrees with the simulator's limiter (confusion matrix printed)."""

from __future__ import annotations

import json
import math
from collections import Counter

import orjson
import pytest

torch = pytest.importorskip("torch")

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.trace import trace_document  # noqa: E402
from accelerator.workloads import WORKLOADS  # noqa: E402
from accelerator.workloads.mlp import MLP  # noqa: E402
from profiler import api  # noqa: E402

#: the simulator's limiter -> the analysis's bound it should read as (dispatch and DMA setup
#: are fixed per-kernel costs: the analysis's runtime bound, floored at min_op_time = dispatch)
AS_BOUND = {"compute": "compute", "dispatch": "runtime", "dma_latency": "runtime", "communication": "communication"}


def _wide_mlp(batch: int):
    """A 1024 -> 4096 -> 1024 MLP: batch 512 is compute bound, batch 1 (a GEMV) memory bound."""
    torch.manual_seed(0)
    return MLP(1024, 4096, 1024).eval(), (torch.randn(batch, 1024),)


CASES = {
    "mlp": WORKLOADS["mlp"],
    "resnet": WORKLOADS["resnet"],
    "vit": WORKLOADS["vit"],
    "llama": WORKLOADS["llama"],
    "mlp-wide-b512": lambda: _wide_mlp(512),
    "mlp-wide-b1": lambda: _wide_mlp(1),
}
#: the full-size shape, on the preset it fits (meta weights: compiled, not run): 872 kernels
BIG = {("llama2-7b", "datacenter-npu"): WORKLOADS["llama2-7b"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(case, preset) -> (SimRun, analysis units indexed by kernel name), bf16: every tiny
    workload on both presets, and Llama-2-7B (prefill of 128 tokens) on datacenter-npu."""
    todo = {(case, preset): f for preset in ("edge-npu", "datacenter-npu") for case, f in CASES.items()}
    out = {}
    for (case, preset), factory in {**todo, **BIG}.items():
        hw = load_accel(preset)
        model, xs = factory()
        run = simulate(compile_model(model, xs, hw, "bf16").program, hw)
        path = tmp_path_factory.mktemp("sim") / f"{case}-{preset}.json"
        path.write_bytes(orjson.dumps(trace_document(run)))
        units = api.analyze(api.load_trace(path)).units.set_index("name")
        out[(case, preset)] = (run, units)
    return out


def _vector_peak(accel, dtype):
    rates = accel.vector.ops_per_cycle.get(dtype) or accel.vector.ops_per_cycle["fp32"]
    return accel.cores * accel.vector.lanes * rates["add_mul"] * accel.clock_hz


def test_no_kernel_faster_than_its_roofline_floor(runs):
    """floor = max(FLOPs / peak, HBM bytes / HBM bandwidth, dispatch), peak the matrix unit's for
    a matrix kernel (the vector unit's otherwise), computed here from the AccelSpec; and the
    analysis's own floor on the derived spec is never above the kernel's time in the trace."""
    checked = 0
    for (case, preset), (run, units) in runs.items():
        accel = run.accel
        for s in run.kernels:
            on_matrix = s.unit == "matrix" and accel.matrix.macs_per_cycle.get(s.dtype, 0) > 0
            peak = accel.matrix_peak_flops(s.dtype) if on_matrix else _vector_peak(accel, s.dtype)
            floor = max(s.flops / peak, (s.hbm_read + s.hbm_written) / accel.hbm.bandwidth, accel.dispatch_overhead_s)
            assert s.time.total >= floor * (1 - 1e-12), (case, preset, s.name, s.time.total, floor)
            row = units.loc[s.name]
            assert row["hardware"] == accel.name, (case, preset, row["hardware"])
            assert row["floor_ns"] <= row["time_ns"], (case, preset, s.name)
            checked += 1
    # kernels: mlp 2, resnet 21, vit 29, llama 56 (its norms fused as matmul prologues), the wide
    # MLPs 2 each, on 2 presets; llama2-7b 808 (872 before its 2 x 32 layer norms became prologues)
    assert checked == 2 * (2 + 21 + 29 + 56 + 2 + 2) + 808


def test_wide_gemm_time_is_the_closed_form_by_hand(runs):
    """fc1 of the wide MLP at batch 512 on datacenter-npu (8 cores of 128 x 128 weight-stationary
    arrays with double-buffered weights, 1 bf16 MAC per PE a cycle, 1.05 GHz): M=512, N=4096,
    K=1024, N split over the cores (512 each): F = ceil(1024/128) x ceil(512/128) = 32 folds of
    M = 512 rows, 128 + (32 - 1) x 512 + 512 + (128 + 128 - 2) - 1 = 16765 cycles, 97.7% of the
    ideal 512 x 512 x 1024 / 16384 = 16384 (SCALE-Sim's single-buffered form: 32 x 894 - 1 =
    28607; the transposed mapping, 8 folds of 4096 rows: 128 + 8 x 4096 + 253 = 33149, is slower)."""
    run, _ = runs[("mlp-wide-b512", "datacenter-npu")]
    fc1 = next(s for s in run.kernels if s.unit == "matrix")
    assert fc1.matrix_s == pytest.approx(16765 / 1.05e9, rel=1e-12)
    assert fc1.flops >= 2 * 512 * 4096 * 1024
    assert fc1.time.limiter == "compute"
    # the batch-1 GEMV reads 1024 x 4096 bf16 weights (8 MiB): memory bound on HBM
    gemv, _ = runs[("mlp-wide-b1", "datacenter-npu")]
    assert gemv.kernels[0].time.limiter == "memory:hbm"
    assert gemv.kernels[0].hbm_read >= 1024 * 4096 * 2


def test_trace_loads_and_analysis_classifies_every_kernel(runs, tmp_path):
    run, units = runs[("llama", "edge-npu")]
    kernels = units[units["kind"] == "kernel"]
    assert len(kernels) == len(run.kernels)  # DMA transfers are not units of their own
    assert (kernels["bound"] != "unknown").all(), kernels[kernels["bound"] == "unknown"]["name"].tolist()
    # the trace's timeline is the simulator's: each kernel ends where the next starts
    total_ns = sum(math.ceil(s.time.total * 1e9) for s in run.kernels)
    assert int(kernels["time_ns"].sum()) == total_ns


def test_confusion_matrix_simulator_limiter_vs_analysis_bound(runs):
    """Over every kernel of every workload: the simulator's limiter (as a bound) against the bound
    `perf analyze` gives from the trace and the derived spec (issue 13: at least 95% of kernel
    time agrees, on every workload). Per workload, where both say compute or memory, and over
    all bounds. Llama-2-7B's attention (128 queries over a 4096-row KV cache, 32 heads of 128)
    was the test's disagreement (84.5%) while the simulator ran each head's fold single-buffered:
    it is memory bound (68 MB of Q, K, V, O against 8.6 GFLOP: 126 FLOP/B below the 229 FLOP/B
    ridge) once the array double-buffers its weights as the preset's MXU does."""
    by_count: Counter = Counter()
    by_time: Counter = Counter()
    failing = {}
    for (case, preset), (run, units) in runs.items():
        mine: Counter = Counter()
        for s in run.kernels:
            truth = AS_BOUND.get(s.time.limiter, "memory")
            bound = str(units.loc[s.name, "bound"])
            ns = int(units.loc[s.name, "time_ns"])
            by_count[(truth, bound)] += 1
            by_time[(truth, bound)] += ns
            mine[(truth, bound)] += ns
        both = {k: v for k, v in mine.items() if k[0] in ("compute", "memory") and k[1] in ("compute", "memory")}
        shares = [sum(v for (t, b), v in d.items() if t == b) / sum(d.values()) for d in (both, mine) if d]
        if min(shares) < 0.95:
            failing[(case, preset)] = dict(mine)
    labels = sorted({t for t, _ in by_count} | {b for _, b in by_count})
    print("\nsimulator limiter (rows) x analysis bound (columns): kernels, ns")
    print(" " * 16 + "".join(f"{b:>22}" for b in labels))
    for t in labels:
        print(f"{t:<16}" + "".join(f"{by_count[(t, b)]:>8} {by_time[(t, b)]:>13,}" for b in labels))
    assert not failing, failing
    both = {k: v for k, v in by_time.items() if k[0] in ("compute", "memory") and k[1] in ("compute", "memory")}
    assert sum(v for (t, b), v in both.items() if t == b) / sum(both.values()) >= 0.95, both
    assert by_count[("compute", "compute")] and by_count[("memory", "memory")]  # both classes exercised


def test_perf_simulate_cli_json_and_trace(tmp_path):
    from typer.testing import CliRunner

    from profiler.cli import app

    out = tmp_path / "sim.json.gz"
    res = CliRunner().invoke(
        app, ["simulate", "mlp", "--accel", "edge-npu", "--precision", "bf16", "-o", str(out), "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [k["name"] for k in doc["kernels"]] == ["addmm", "addmm_1"]
    assert doc["total_ns"] == sum(k["dur_ns"] for k in doc["kernels"])
    assert sum(doc["by_limiter"].values()) == doc["total_ns"]
    for k in doc["kernels"]:  # edge-npu's 5 us dispatch dominates these tiny GEMMs
        assert k["limiter"] == "dispatch" and k["stall_cycles"]["dispatch"] == 5000  # 5e-6 s x 1e9 Hz
    trace = api.load_trace(out)
    assert set(trace.devices["name"]) == {"edge-npu"}
    text = CliRunner().invoke(app, ["simulate", "mlp", "--accel", "edge-npu"]).stdout
    assert "kernels/s" in text and "Verdict" in text
    # the trace names its source, and the advice speaks of the NPU's levers, not a GPU's
    report = json.loads(CliRunner().invoke(app, ["analyze", str(out), "--json"]).stdout)
    assert report["trace"]["framework"] == "perf simulate (the simulated edge-npu, 1 chip(s))"
    titles = [a["title"] for a in report["verdict"]["actions"]]
    assert any("perf compile --plan" in t for t in titles) and not any("CUDA" in t for t in titles), titles


def test_perf_simulate_runs_the_program_perf_compile_saved(tmp_path):
    """`perf compile -o` then `perf simulate PROGRAM.json.gz`: the saved program (no weights) is
    simulated on the hardware it was compiled for, with the same kernels and times as compiling
    and simulating in one command."""
    from typer.testing import CliRunner

    from profiler.cli import app

    saved = tmp_path / "mlp.json.gz"
    args = ["--accel", "datacenter-npu", "--precision", "bf16"]
    res = CliRunner().invoke(app, ["compile", "mlp", *args, "-o", str(saved)])
    assert res.exit_code == 0, res.output
    direct = CliRunner().invoke(app, ["simulate", "mlp", *args, "--json"])
    from_file = CliRunner().invoke(app, ["simulate", str(saved), "--json"])  # --accel: the saved one
    assert direct.exit_code == 0 and from_file.exit_code == 0, from_file.output
    a, b = json.loads(direct.stdout), json.loads(from_file.stdout)
    assert [(k["name"], k["dur_ns"], k["limiter"]) for k in b["kernels"]] == [
        (k["name"], k["dur_ns"], k["limiter"]) for k in a["kernels"]
    ]
    assert b["total_ns"] == a["total_ns"] and b["accel"] == "datacenter-npu"
    (tmp_path / "junk.json").write_text("{not json")
    bad = CliRunner().invoke(app, ["simulate", str(tmp_path / "junk.json")])
    assert bad.exit_code == 2 and "junk.json" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_two_chips_all_reduce_is_the_ring_formula_and_analysis_reads_it(tmp_path):
    """Tiny Llama tensor-parallel over 2 datacenter-npu chips (ring, 50 GB/s links, 1 us per
    hop): each all-reduce kernel's communication is
    2(p-1)/p x n / B + 2(p-1) x alpha with p = 2, n = its message bytes, and `perf analyze` calls
    the kernel communication bound on the same numbers."""
    hw = load_accel("datacenter-npu")
    model, xs = WORKLOADS["llama"]()
    run = simulate(compile_model(model, xs, hw, "bf16", chips=2).program, hw)
    assert run.chips == 2 and {s.chip for s in run.kernels} == {0, 1}
    reduces = [s for s in run.kernels if s.collective == "all_reduce"]
    assert reduces
    for s in reduces:
        n = s.comm_elements * 2  # bf16
        ring = 2 * 1 / 2 * n / hw.link.bandwidth + 2 * 1 * hw.link.latency_s
        assert s.time.stalls["communication"] == pytest.approx(ring, rel=1e-12)
        assert s.time.limiter == "communication"
    path = tmp_path / "tp2.json"
    path.write_bytes(orjson.dumps(trace_document(run)))
    units = api.analyze(api.load_trace(path)).units
    comm = units[units["collective"] != ""]
    assert len(comm) == sum(1 for s in run.kernels if s.collective)
    assert (comm["bound"] == "communication").all()


def test_counters_stay_within_the_hardware(runs):
    """Every counter sample of every workload is physically possible on its preset: HBM GB/s at
    most the HBM bandwidth, utilisation at most 100%, local memory per core at most its
    capacity, shared memory at most its capacity, a DMA queue never negative. (Llama-2-7B's
    attention, tiled whole in shared memory, once showed as 7.1 MiB of a 4 MiB local memory.)"""
    from accelerator.sim.trace import counter_samples

    for (case, preset), (run, _) in runs.items():
        a = run.accel
        limit = {
            "HBM bandwidth (GB/s)": a.hbm.bandwidth / 1e9,
            "matrix utilisation (%)": 100.0,
            "vector utilisation (%)": 100.0,
            "local memory used per core (KiB)": a.local_memory.capacity_bytes / 1024,
            "shared memory used (MiB)": a.shared_memory.capacity_bytes / 2**20,
            "DMA queue depth": float("inf"),
        }
        for (chip, name), samples in counter_samples(run).items():
            values = [v for _, v in samples]
            assert min(values) >= 0 and max(values) <= limit[name] * (1 + 1e-9), (case, preset, name, max(values))
