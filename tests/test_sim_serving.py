"""LLM serving on the simulated accelerator (accelerator/sim/serving.py, `perf simulate MODEL
--batch B --prompt P --decode N`): the analysis that reads real serving traces computes TTFT,
TPOT, tokens/s and the KV cache from the simulated trace, equal to hand arithmetic over the
simulated kernel times; the decode program at a cache length equals a compile at that length;
timing each kernel shape once gives what timing every kernel gives; the simulated trace's
chips are NPUs and no 'runtime launch not recorded' problem is raised for them."""

from __future__ import annotations

import io
import json
import math

import orjson
import pytest

torch = pytest.importorskip("torch")

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.reuse import KernelMemo, simulate_reusing  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.serving import compile_serving, simulate_serving  # noqa: E402
from accelerator.sim.serving_trace import serving_document  # noqa: E402
from accelerator.sim.trace import timeline_ns  # noqa: E402
from accelerator.workloads.llama import LlamaConfig, serving_model  # noqa: E402
from profiler import api  # noqa: E402
from profiler.cli.progress import Progress  # noqa: E402

B, P, N = 2, 8, 4
CFG = LlamaConfig()  # the tiny decoder: 2 layers, 2 KV heads, head_dim 64 / 4 = 16


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(programs, ServingRun, analysis of its trace, the trace) of the tiny decoder, bf16."""
    hw = load_accel("datacenter-npu")
    programs = compile_serving("llama", hw, B, P, N, "bf16")
    srun = simulate_serving(programs, hw)
    path = tmp_path_factory.mktemp("serve") / "serving.json"
    path.write_bytes(orjson.dumps(serving_document(srun)))
    trace = api.load_trace(path)
    return hw, programs, srun, api.analyze(trace, sections=("summary", "memory", "llm")), trace


def _ns(run) -> list[int]:
    """Each kernel's duration on the trace's clock: its seconds rounded up to the ns (trace.py)."""
    return [math.ceil(k.time.total * 1e9) for k in run.kernels]


def test_llm_figures_equal_hand_arithmetic_over_the_kernel_times(served):
    _, _, srun, result, _ = served
    steps = srun.steps
    assert [s.phase for s in steps] == ["prefill"] + ["decode"] * N
    summary = {r["phase"]: r for r in result.llm_summary.to_dict("records")}
    prefill_ns = sum(_ns(steps[0].run))
    decode_ns = [sum(_ns(s.run)) for s in steps[1:]]
    # TTFT = the prefill step (it computes every sequence's first token); no decode step in it
    assert summary["prefill"]["ttft_ns"] == prefill_ns
    assert summary["prefill"]["tokens"] == B * P
    # TPOT = the mean decode step; tokens/s = B x N decode tokens over the decode time
    assert summary["decode"]["tpot_ns"] == pytest.approx(sum(decode_ns) / N, rel=1e-12)
    assert summary["decode"]["tokens_per_s"] == pytest.approx(B * N / sum(decode_ns) * 1e9, rel=1e-12)
    phases = result.llm_phases
    assert phases["duration_ns"].tolist() == [prefill_ns, *decode_ns]
    assert phases["device"].tolist() == ["npu0"] * (N + 1)
    assert phases["device_busy_ns"].tolist() == [prefill_ns, *decode_ns]  # the chip never idles
    # decode step i attends the prompt, the i tokens before it and its own: B x (P + i + 1) keys
    assert phases["kv_tokens"].tolist() == [B * P] + [B * (P + i + 1) for i in range(N)]


def test_kv_cache_bytes_are_the_formula(served):
    _, _, srun, result, _ = served
    kv = result.kv_cache.iloc[0]
    hd = CFG.dim // CFG.n_heads  # 16
    # 2 (K and V) x layers x kv_heads x head_dim x tokens (B x (P + N) slots) x 2 bytes (bf16)
    assert kv["kv_cache_bytes"] == 2 * CFG.n_layers * CFG.n_kv_heads * hd * B * (P + N) * 2 == 6144
    assert kv["layers"] == CFG.n_layers and kv["slots"] == B * (P + N)
    # the decode steps' KV reads: each attended key token's K and V in every layer
    per_token = 2 * CFG.n_layers * CFG.n_kv_heads * hd * 2  # 256 B
    decode = result.llm_phases[result.llm_phases["phase"] == "decode"]
    assert decode["kv_read_bytes"].tolist() == [B * (P + i + 1) * per_token for i in range(N)]
    assert srun.kv.slots == P + N and srun.kv.dtype == "bf16"


def test_decode_reads_a_growing_cache(served):
    """The attention kernels read more keys each step: their HBM bytes grow by the same amount
    every step (linear in the cache length), and no step is faster than the one before."""
    _, _, srun, _, _ = served
    attn = [sum(k.hbm_read for k in s.run.kernels if k.family == "attention") for s in srun.steps[1:]]
    growth = {b - a for a, b in zip(attn, attn[1:])}
    assert len(growth) == 1 and growth.pop() > 0, attn
    totals = [s.run.total_s for s in srun.steps[1:]]
    assert totals == sorted(totals)


def test_decode_at_a_length_equals_a_compile_at_that_length(served):
    """CacheLengthProgram.at(L), from compiles at P+N and P+N+1, times as the decoder compiled with
    an L-position cache does, kernel for kernel."""
    hw, programs, _, _, _ = served
    length = P + 2
    one = (torch.zeros(B, 1, dtype=torch.long, device="meta"), torch.tensor([P], device="meta"))
    direct = simulate(compile_model(serving_model("llama", B, length), one, hw, "bf16").program, hw)
    param = simulate(programs.decoder.at(length), hw)
    assert [(k.name, k.time, k.hbm_read, k.hbm_written) for k in param.kernels] == [
        (k.name, k.time, k.hbm_read, k.hbm_written) for k in direct.kernels
    ]


@pytest.mark.parametrize("which", ["prefill", "decode"])
def test_timing_each_shape_once_equals_timing_every_kernel(served, which):
    hw, programs, _, _, _ = served
    program = programs.prefill if which == "prefill" else programs.decoder.at(P + 3)
    full = simulate(program, hw)
    memo = KernelMemo()
    once = simulate_reusing(program, hw, memo)
    # the two layers' kernels are shared: prefill 29 timed, 29 reused (the second layer's 25
    # kernels, and within a layer k/v's projection like v's, one index and one cache write)
    assert memo.misses <= memo.hits
    misses = memo.misses
    simulate_reusing(program, hw, memo)
    assert memo.misses == misses  # a second run of the same program times nothing again
    assert once.total_s == full.total_s and once.by_limiter == full.by_limiter
    for a, b in zip(full.kernels, once.kernels, strict=True):
        assert (a.name, a.ops, a.targets, a.start_s, a.time, a.flops, a.hbm_read, a.hbm_written) == (
            b.name, b.ops, b.targets, b.start_s, b.time, b.flops, b.hbm_read, b.hbm_written,
        )  # fmt: skip
        assert [(t.value, t.route, t.bytes, t.dur_s) for t in a.transfers] == [
            (t.value, t.route, t.bytes, t.dur_s) for t in b.transfers
        ]
        assert [t.start_s for t in a.transfers] == pytest.approx([t.start_s for t in b.transfers], abs=1e-15)


def test_simulated_trace_names_npus_and_raises_no_launch_problem(served):
    _, _, _, result, trace = served
    assert set(trace.devices["device"]) == {"cpu", "npu0"}
    assert set(trace.events["source"].astype(str)) == {"simulator"}
    assert not any("runtime launch" in line for line in trace.problems.lines())
    assert ("rank0", "npu0") in {tuple(t.split("/")[:2]) for t in trace.events["track"].astype(str)}


def test_the_perfetto_export_keeps_the_source_and_raises_no_launch_problem(served, tmp_path):
    _, _, _, _, trace = served
    out = tmp_path / "serving.perfetto-trace"
    api.write_perfetto(trace, out)
    again = api.load_trace(out)
    assert set(again.events["source"].astype(str)) == {"simulator"}
    assert "npu0" in set(again.devices["device"].astype(str))
    assert not any("runtime launch" in line for line in again.problems.lines())


def test_a_kineto_trace_without_the_field_still_counts_unlaunched_kernels(tmp_path):
    """The launch problem is skipped by the document's traceSource field, not by names: the same
    kernels without it are a GPU's, and their missing launches are counted."""
    doc = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "npu_kernel", "pid": 0, "tid": 0, "ts": 1.0, "dur": 2.0, "args": {}}
        ],
        "framework": "perf simulate (the simulated datacenter-npu, 1 chip(s))",
    }
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(doc))
    trace = api.load_trace(path)
    assert trace.problems.counts["device events whose runtime launch was not recorded"] == 1
    assert set(trace.devices["device"]) == {"gpu0"}
    path.write_bytes(orjson.dumps({**doc, "traceSource": "simulator"}))
    trace = api.load_trace(path)
    assert "device events whose runtime launch was not recorded" not in trace.problems.counts
    assert set(trace.devices["device"]) == {"npu0"}


def test_cli_json_reports_the_analysis_figures(served, tmp_path):
    from typer.testing import CliRunner

    from profiler.cli import app

    _, _, srun, result, _ = served
    out = tmp_path / "serve.json.gz"
    args = ["simulate", "llama", "--accel", "datacenter-npu", "--precision", "bf16"]
    args += ["--batch", str(B), "--prompt", str(P), "--decode", str(N), "-o", str(out), "--json", "--progress"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # the progress bar went to stderr: stdout is JSON alone
    assert f"{N + 1}/{N + 1}" in res.stderr
    summary = {r["phase"]: r for r in result.llm_summary.to_dict("records")}
    assert doc["ttft_ns"] == summary["prefill"]["ttft_ns"]
    assert doc["tpot_ns"] == summary["decode"]["tpot_ns"]
    assert doc["tokens_per_s"] == summary["decode"]["tokens_per_s"]
    assert doc["kv_cache_bytes"] == 6144
    assert doc["kernels"] == srun.kernels and len(doc["steps"]) == N + 1
    assert api.load_trace(out).devices["device"].astype(str).tolist() == ["cpu", "npu0"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["mlp", "--prompt", "8"], "--prompt/--decode serve a decoder"),
        (["llama", "--decode", "4"], "give --prompt P too"),
        (["llama", "--prompt", "0"], "--prompt 0: expected at least 1"),
        (["llama", "--prompt", "8", "--batch", "0"], "--batch 0: expected at least 1"),
    ],
)
def test_bad_serving_flags_are_one_line_exit_2(args, says):
    from typer.testing import CliRunner

    from profiler.cli import app

    res = CliRunner().invoke(app, ["simulate", *args, "--accel", "datacenter-npu"])
    assert res.exit_code == 2, res.output
    assert says in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output


def test_progress_bar_only_when_enabled():
    quiet = io.StringIO()
    p = Progress(None, quiet)  # not a terminal, not asked for: silent
    p.stage("simulating")
    p.update(3, 3)
    p.close()
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    p = Progress(True, shown)
    p.stage("simulating")
    p.update(1, 2)
    p.update(2, 2)
    p.close()
    assert "[##############################] 2/2" in shown.getvalue() and shown.getvalue().endswith("\n")


def test_every_simulated_kernel_is_costed_by_the_analysis(served):
    """Kernel names that stand for calls of different costs (the prefill's and the decode's
    matmuls, the decode attention at each cache length) are told apart, so the analysis costs
    every kernel from the trace's fusion rows: none is unknown-bound (an ambiguous name was)."""
    _, _, srun, _, trace = served
    units = api.analyze(trace).units
    npu = units[units["device"].astype(str) == "npu0"]
    assert len(npu) == srun.kernels
    assert not (npu["bound"].astype(str) == "unknown").any(), npu[npu["bound"].astype(str) == "unknown"]["name"]
    names = set(npu["name"].astype(str))
    assert any(n.endswith("[prefill]") for n in names) and any(n.endswith("[decode]") for n in names)
    lengths = {"[prefill]"} | {f"[decode L={P + i + 1}]" for i in range(N)}  # each layer's, at each length
    assert {n for n in names if n.startswith("scaled_dot_product_attention")} == {
        f"scaled_dot_product_attention{layer} {tag}" for layer in ("", "_1") for tag in lengths
    }


@pytest.fixture(scope="module")
def served_tp(tmp_path_factory):
    """The tiny decoder served on 2 chips (tensor parallel), bf16: (ServingRun, analysis)."""
    hw = load_accel("datacenter-npu")
    srun = simulate_serving(compile_serving("llama", hw, B, P, 2, "bf16", 2), hw)
    path = tmp_path_factory.mktemp("serve_tp") / "serving.json"
    path.write_bytes(orjson.dumps(serving_document(srun)))
    return srun, api.analyze(api.load_trace(path), sections=("summary", "memory", "llm"))


def _span_ns(run) -> int:
    """A step's time on the trace's clock by hand: its latest kernel end minus its first start,
    from each kernel's placement (start at the rounded end of the kernel it waited for)."""
    spans = timeline_ns(run)
    return max(a + d for a, d in spans) - min(a for a, _ in spans)


def test_tensor_parallel_ttft_and_tpot_are_the_steps_spans(served_tp):
    """On 2 chips every layer all-reduces over the link, a resource of its own beside the cores:
    TTFT = the prefill step's span on its timeline (first start to latest end, chip 0's kernels),
    TPOT = the decode steps' mean span; the chips are listed, chip 0's kernels traced."""
    srun, result = served_tp
    prefill, decodes = srun.steps[0], srun.steps[1:]
    assert any(k.resource == "link" for k in prefill.run.kernels)
    assert {k.chip for k in prefill.run.kernels} == {0}
    summary = {r["phase"]: r for r in result.llm_summary.to_dict("records")}
    assert summary["prefill"]["ttft_ns"] == _span_ns(prefill.run)
    assert summary["decode"]["tpot_ns"] == pytest.approx(sum(_span_ns(s.run) for s in decodes) / 2, rel=1e-12)
    assert result.llm_phases["duration_ns"].tolist() == [_span_ns(s.run) for s in srun.steps]


def test_a_step_ends_at_its_latest_kernel_not_its_last(served_tp):
    """A step whose last kernel in program order does not end last (here: the prefill's last
    kernel moved to start at 0, so the kernel before it ends later) is annotated up to the latest
    end: the step's time is when all its work (cores and link) is done."""
    from dataclasses import replace

    from accelerator.sim.reuse import copy_with

    srun, _ = served_tp
    run = srun.steps[0].run
    ks = list(run.kernels)
    ks[-1] = copy_with(ks[-1], after=-1, deps=())
    step = replace(srun.steps[0], run=replace(run, kernels=tuple(ks)))
    doc = serving_document(replace(srun, steps=(step,)))
    (label,) = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    spans = timeline_ns(step.run)
    assert spans[-1][0] == 0 and spans[-1][0] + spans[-1][1] < spans[-2][0] + spans[-2][1]
    assert round(label["dur"] * 1000) == spans[-2][0] + spans[-2][1] == _span_ns(step.run)
