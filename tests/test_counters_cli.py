"""`perf counters` and `perf analyze --counters` end to end, in-process through Typer's runner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from profiler.cli import app
from tests.conftest import COUNTERS, write_trace, x

runner = CliRunner()
DROPOUT = COUNTERS / "ncu_a100_dropout" / "nsight162.csv"
CUPTI = COUNTERS / "kineto_cupti_a100" / "benchmark_result_924719_1679055439_trace.json.gz"


def run(*args):
    return runner.invoke(app, list(map(str, args)))


def flat(text: str) -> str:
    """The output with Rich's line wrapping undone."""
    return " ".join(text.split())


def test_counters_json_has_one_object_per_launch():
    r = run("counters", DROPOUT, "--json", "--hardware", "a100-sxm-40gb")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.counters" and doc["source"] == "ncu" and doc["hardware"] == "a100-sxm-40gb"
    assert len(doc["kernels"]) == doc["launches"] == 162
    k = doc["kernels"][0]
    assert k["name"].startswith("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<double")
    assert (k["launch"], k["duration_ns"], k["duration_from"]) == (0, 11744, "gpu__time_duration.sum")
    assert k["bytes"]["dram"] == 4_194_688  # "4,194,688" byte in the file
    assert k["counters"]["dram__bytes.sum"] == {"value": 4_194_688, "unit": "byte"}
    assert k["counters"]["gpu__time_duration.sum"] == {"value": 11_744, "unit": "ns", "unit_recorded": "nsecond"}
    # fp64 from the instruction counts: dadd + dmul + 2 * dfma (the file's launch 0)
    c = k["counters"]
    p = "sm__sass_thread_inst_executed_op_"
    assert (
        k["flops"]["fp64"]
        == c[f"{p}dadd_pred_on.sum"]["value"]
        + c[f"{p}dmul_pred_on.sum"]["value"]
        + 2 * c[f"{p}dfma_pred_on.sum"]["value"]
    )
    assert k["recorded_pct"]["dram"] == 19.04
    assert k["roofline"]["bound"] == "memory (l2)"


def test_counters_text_names_the_source_and_the_bound():
    r = run("counters", COUNTERS / "ncu_a100_attention" / "bert_flashattn_nsight.csv", "--hardware", "a100-sxm-40gb")
    assert r.exit_code == 0, r.output
    out = flat(r.stdout)
    assert "10 launches of" in out and "60 counters; 18 rule rows skipped" in out
    assert "fmha_fwd_loop_kernel" in out


def test_counters_without_hardware_say_how_to_get_the_roofline():
    r = run("counters", DROPOUT)
    assert r.exit_code == 0
    assert "pass --hardware PRESET for the roofline" in flat(r.stdout)


def test_bad_counter_files_one_line_exit_2(tmp_path):
    cut = tmp_path / "cut.csv"
    text = DROPOUT.read_text()
    cut.write_text(text[: len(text) // 3])
    unknown = tmp_path / "odd.csv"
    unknown.write_text("when,what\n1,2\n")
    unitless = tmp_path / "nounits.csv"
    unitless.write_text('"ID","Kernel Name","Metric Name","Metric Value"\n"0","k","dram__bytes.sum","12"\n')
    for path in (cut, unknown, unitless, tmp_path / "missing.csv"):
        r = run("counters", path)
        assert r.exit_code == 2, (path, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in r.output


def test_analyze_with_cupti_counters_joins_by_launch_order():
    r = run("analyze", CUPTI, "--counters", CUPTI, "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout)["counters"]
    assert c["source"] == "kineto-cupti" and c["hardware"] == "a100-sxm-40gb"
    # the trace records the counters' 77 kernels as ranges, no kernel events: its 77 launch calls join in order
    assert c["join"]["matched"] == 77 and c["join"]["by"] == {"launch order (no kernel events)": 77}
    assert all(k["trace_event"] is not None for k in c["kernels"])
    # each launch call sits in the op that launched it: the counters land on those ops
    names = {r["name"] for r in c["compare"]}
    assert {"aten::cudnn_convolution", "aten::addmm"} <= names
    # the run recorded no tensor-pipe counter: matrix FLOPs unknown (null), not zero
    assert all(r["matrix_share"] is None for r in c["compare"])
    assert all(k["flops_by_unit"]["matrix"] == {} for k in c["kernels"])


def test_analyze_text_lists_unmatched_counters(tmp_path):
    # a trace with one dropout kernel: 1 of the file's 162 launches joins, 161 are counted
    name = (
        "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<double, double, unsigned int, 1, 4>("
        "at::cuda::detail::TensorInfo<double, unsigned int>, at::cuda::detail::TensorInfo<double, unsigned int>, "
        "at::cuda::detail::TensorInfo<unsigned char, unsigned int>, unsigned int, double, at::PhiloxCudaState)"
    )
    events = [
        x(
            "aten::native_dropout",
            "cpu_op",
            0,
            20,
            **{"Input Dims": [[524288], [], []], "Input type": ["double", "Scalar", ""]},
        ),
        x("cudaLaunchKernel", "cuda_runtime", 1, 2, correlation=1, **{"External id": 1}),
        x(name, "kernel", 5, 12, pid=0, tid=7, device=0, stream=7, correlation=1),
    ]
    trace = write_trace(tmp_path / "t.json", events)
    r = run("analyze", trace, "--counters", DROPOUT, "--hardware", "a100-sxm-40gb")
    assert r.exit_code == 0, r.output
    assert (
        "joined to the trace: 1 of 162 counter launches (1 by name and order); "
        "161 counter launches and 0 trace kernels unmatched" in flat(r.stdout)
    )
