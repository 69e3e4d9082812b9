"""`perf analyze` end to end, in-process through Typer's runner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from profiler.cli import app
from profiler.render.json import SCHEMA_VERSION
from tests.conftest import TRACES, real_trace
from tests.real_traces.expected import EXPECTED

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(map(str, args)))


def test_text_report_sections():
    r = run("analyze", real_trace("vllm_graphs_mi300x"), "--top", "3")
    assert r.exit_code == 0, r.output
    for heading in ("Trace", "Device time", "Top ops", "Top kernels"):
        assert heading in r.output
    assert "gpu2" in r.output  # vLLM ran on device 2


def test_json_report(tmp_path):
    r = run("analyze", real_trace("nccl_meta_a100"), "--json", "--top", "4")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.analyze" and doc["schema_version"] == SCHEMA_VERSION
    want = EXPECTED["nccl_meta_a100"]["nccl_data.json.gz"]
    assert doc["summary"]["busy_ns"]["rank0/gpu0"] == want["busy_ns"]["gpu0"]
    dev = next(d for d in doc["summary"]["devices"] if d["device"] == "gpu0")
    assert dev["idle_ns"] == dev["window_ns"] - dev["busy_ns"] == want["span_ns"]["gpu0"] - want["busy_ns"]["gpu0"]
    kernels = [o for o in doc["ops"] if o["kind"] == "kernel"]
    assert [k["name"] for k in kernels[:4]] == [n for n, _, _ in want["top_kernels"][:4]]
    for o in doc["ops"]:
        assert set(o) >= {"name", "kind", "shapes", "count", "total_ns", "mean_ns"}
        assert o["mean_ns"] == round(o["total_ns"] / o["count"])
    assert doc["trace"]["events_by_kind"]["kernel"] == want["kernels"]


def test_rank_option_and_multi_rank_directory():
    r = run("analyze", TRACES / "dlrm_8rank_v100", "--json", "--rank", "3")
    doc = json.loads(r.stdout)
    assert doc["trace"]["ranks"] == [3]
    want = next(v for v in EXPECTED["dlrm_8rank_v100"].values() if v["rank"] == 3)
    assert doc["summary"]["busy_ns"] == {
        "rank3/cpu": doc["summary"]["busy_ns"]["rank3/cpu"],
        "rank3/gpu3": want["busy_ns"]["gpu3"],
    }
    assert sum(doc["trace"]["events_by_kind"].values()) == want["events"]


def test_unknown_rank_is_bad_input():
    r = run("analyze", TRACES / "dlrm_8rank_v100", "--rank", "9")
    assert r.exit_code == 2
    assert "--rank 9" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_ops_link_to_kernels_on_a_real_trace():
    # b200: the MoE op launches the top GEMMs; its device time must include their time.
    doc = json.loads(run("analyze", real_trace("b200_eager"), "--json", "--top", "50").stdout)
    ops = [o for o in doc["ops"] if o["kind"] == "op"]
    assert ops[0]["name"] == "vllm::moe_forward"
    kernels = {o["name"]: o for o in doc["ops"] if o["kind"] == "kernel"}
    moe_gemms = sum(k["total_ns"] for n, k in kernels.items() if n.startswith("bmm_"))
    assert ops[0]["device_ns"] >= moe_gemms


def test_version():
    assert run("--version").stdout.strip() == "0.1.0"


def test_runtime_named_from_recorded_versions():
    # b200: cuda_runtime_version 12090 = 1000*12 + 10*9; sglang: hip_runtime_version 70253211
    # = 10,000,000*7 + 100,000*2 + 53211.
    b200 = json.loads(run("analyze", real_trace("b200_eager"), "--json").stdout)
    rocm = json.loads(run("analyze", real_trace("sglang_qwen3_decode_mi300x"), "--json").stdout)
    assert b200["trace"]["framework"].endswith("CUDA 12.9")
    assert rocm["trace"]["framework"].endswith("HIP 7.2")


def test_sections_limit_the_work():
    r = run("analyze", real_trace("sglang_qwen3_decode_mi300x"), "--json", "--section", "summary", "--section", "ops")
    doc = json.loads(r.stdout)
    assert doc["ops"] and doc["summary"]["equation"] == [] and doc["advice"] == []  # roofline passes skipped
    full = json.loads(run("analyze", real_trace("sglang_qwen3_decode_mi300x"), "--json").stdout)
    assert full["summary"]["equation"] and full["summary"]["busy_ns"] == doc["summary"]["busy_ns"]
    bad = run("analyze", real_trace("sglang_qwen3_decode_mi300x"), "--section", "nope")
    assert bad.exit_code == 2 and "--section nope" in bad.stderr


def test_rocm_kernel_names_are_demangled_in_the_text_report():
    # vllm_graphs_mi300x records ck_tile kernels by their Itanium symbols (_ZN7ck_tile6kentry...);
    # the kernel table shows them as C++ (c++filt, from binutils), the JSON keeps them as recorded
    r = CliRunner().invoke(
        app,
        ["analyze", str(real_trace("vllm_graphs_mi300x")), "--section", "ops", "--top", "50"],
        env={"COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    table = r.stdout.split("Top kernels")[1]
    assert "ck_tile::kentry<" in table and "_ZN7ck_tile" not in table
