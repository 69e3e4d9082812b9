"""`perf simulate --gemm` (SCALE-Sim's closed forms through the CLI), `--list`, and the one-line
errors (exit 2), including those of `perf simulate MODEL` (tests/test_sim_run.py runs it)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from profiler.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def closed_form(m, n, k, r, c, df):
    """Issue 13's formulas, written out again (independent of accelerator/sim/timing.py)."""
    ceil = lambda a, b: -(-a // b)  # noqa: E731
    return {
        "os": ceil(m, r) * ceil(n, c) * (k + r + c - 2) - 1,
        "ws": ceil(k, r) * ceil(n, c) * (m + 2 * r + c - 2) - 1,
        "is": ceil(k, r) * ceil(m, c) * (n + 2 * r + c - 2) - 1,
    }[df]


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 3000),
    n=st.integers(1, 3000),
    k=st.integers(1, 3000),
    r=st.sampled_from([8, 16, 32, 128, 12]),
    c=st.sampled_from([8, 16, 32, 128, 20]),
    df=st.sampled_from(["os", "ws", "is"]),
    multiple=st.booleans(),
)
def test_gemm_json_equals_the_closed_forms(m, n, k, r, c, df, multiple):
    """MUST HOLD, through the CLI: shapes that are (multiple) and are not multiples of the array."""
    if multiple:
        m, n, k = r * (m % 9 + 1), c * (n % 9 + 1), r * c * (k % 3 + 1)
    res = run("simulate", "--gemm", f"{m}x{n}x{k}", "--array", f"{r}x{c}", "--dataflow", df, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["compute_cycles"] == closed_form(m, n, k, r, c, df)
    assert doc["utilisation"] == m * n * k / (doc["compute_cycles"] * r * c)


def test_gemm_text_and_json_fields():
    # os 64^3 on 32x32: 2*2*(64+62)-1 = 503 cycles; ideal 262144/1024 = 256; utilisation 262144/(503*1024) = 50.9%
    res = run("simulate", "--gemm", "64x64x64", "--array", "32x32", "--dataflow", "os", "--json")
    doc = json.loads(res.stdout)
    assert doc["compute_cycles"] == 503 and doc["ideal_cycles"] == 256 and doc["folds"] == 4
    assert doc["formula"] == "ceil(M/R)*ceil(N/C)*(K+R+C-2)-1"
    text = run("simulate", "--gemm", "64x64x64", "--array", "32x32", "--dataflow", "os").stdout
    assert "compute cycles: 503" in text and "50.9%" in text


def test_list():
    doc = json.loads(run("simulate", "--list", "--json").stdout)
    assert {"edge-npu", "datacenter-npu"} <= set(doc["presets"])
    from accelerator.workloads import WORKLOADS

    assert doc["workloads"] == sorted(WORKLOADS)  # the registry, llama2-7b once the compiler adds it
    assert doc["serving"] == ["llama", "llama2-7b", "llama3-8b"]  # the decoders --prompt/--decode serve
    text = run("simulate", "--list").stdout
    assert "edge-npu" in text and "mlp" in text


def test_bad_input_is_one_line_exit_2():
    cases = [
        (("simulate", "--gemm", "64x64", "--array", "32x32", "--dataflow", "os"), "expected MxNxK"),
        (("simulate", "--gemm", "64x0x64", "--array", "32x32", "--dataflow", "os"), "expected MxNxK"),
        (("simulate", "--gemm", "64x64x64", "--array", "32", "--dataflow", "os"), "--array '32': expected RxC"),
        (
            ("simulate", "--gemm", "64x64x64", "--array", "32x32", "--dataflow", "rs"),
            "--dataflow must be one of os, ws, is",
        ),
        (("simulate", "--gemm", "64x64x64"), "--gemm needs --array"),
        (("simulate",), "give one of MODEL, --gemm"),
        (("simulate", "mlp"), "MODEL needs --accel"),
        (("simulate", "mlp", "--accel", "edge-npu", "--chips", "0"), "--chips 0"),
        (("simulate", "nosuch", "--accel", "edge-npu"), "nosuch: not a workload"),
    ]
    for args, needle in cases:
        res = run(*args)
        assert res.exit_code == 2, (args, res.output)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, res.stderr)


def test_gemm_on_a_chip():
    # 8192^3 bf16 on datacenter-npu, its weights double-buffered: 64*8 = 512 folds of 8192 rows per core,
    # 128 + 512*8192 + 254 - 1 = 4194685 cycles / 1.05e9 + 0.5 us DMA setup + 1 us dispatch = 3996.438 us;
    # 2*8192^3 / that / 275.2512e12 = 99.95% of peak, limiter compute (the closed form, single-buffered:
    # 64*8*(8192+382)-1 = 4389887 cycles per core; compute_cycles stays the closed form on one array)
    r = run("simulate", "--gemm", "8192x8192x8192", "--accel", "datacenter-npu", "--json")
    doc = json.loads(r.stdout)
    assert doc["array"] == {"rows": 128, "cols": 128} and doc["dataflow"] == "ws"
    chip = doc["chip"]
    assert chip["time_s"] == 4194685 / 1.05e9 + 1.5e-6
    assert doc["compute_cycles"] == 64 * 64 * (8192 + 382) - 1  # one array, SCALE-Sim's form
    assert chip["limiter"] == "compute" and chip["fraction_of_peak"] >= 0.9
    assert chip["stall_cycles"] == {"dma_latency": 525, "dispatch": 1050}
    r = run("simulate", "--gemm", "64x64x64", "--accel", "edge-npu", "--dtype", "fp32")
    assert r.exit_code == 2 and "edge-npu's matrix unit has no --dtype fp32" in r.stderr
