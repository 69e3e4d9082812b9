"""Compiled runs of the small conv net and the small Llama-style decoder (examples/models.py):
`perf profile --model ... --compile --steps 2` for real, then what a user relies on: the compile
passes on the compiler track before the steps, the compile phases, the fusion map (which ATen ops
Inductor put in which kernel), the generated kernels classified by `analyze`, `perf analyze --json`.

One cold compile per model per test session (`compiled_model`: xdist workers share it through a
lock file, like tests/test_compiler_page.py's `shared_compile`); ~20 s each here.

What Inductor (torch 2.13, CPU) does with them, as read from the post-grad graph and output code:
- convnet: each convolution stays `extern_kernels.convolution` (mkldnn); a C++ kernel before it
  copies its input and weight to channels-last ('cpp_fused_convolution_0', provenance maps it to the
  convolution node); ReLU + max-pool (prims._low_memory_max_pool_with_offsets) fuse into the next
  C++ kernel, with conv 2's layout copies; ReLU + max-pool + the global mean fuse into the last one;
  the classifier is `extern_kernels.addmm`.
- tiny_llama: every RMSNorm (pow, mean, add eps, rsqrt, mul, mul weight) is one C++ kernel, with
  the residual adds (and the embedding gather, recomputed) fused in; SwiGLU's silu (decomposed:
  neg, exp, add, div) * up is one C++ kernel, reused for both layers (2 call sites per run);
  attention is not decomposed: the ATen fallback aten::_scaled_dot_product_flash_attention_for_cpu;
  the linears are `extern_kernels.mm`.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.api import analyze, compile_tables, load_trace
from profiler.model.schema import Kind

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"convnet": "8x3x32x32", "tiny_llama": "1x32:int64"}
RMSNORM_OPS = {"aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul"}  # x * rsqrt(mean(x**2) + eps) * w
SILU_MUL_OPS = {"aten::neg", "aten::exp", "aten::add", "aten::div", "aten::mul"}  # x / (1 + exp(-x)) * up
GENERATED = {"cpp", "triton"}


def compiled_model(tmp_path_factory: pytest.TempPathFactory, model: str) -> Path:
    """`perf profile --model examples.models:<model> --input <MODELS[model]> --compile --steps 2`
    once per test session, with a fresh Inductor cache (every compile phase runs). The trace file."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's directory, above the workers' own
    d = root / f"perf-compile-{model}"
    trace = d / f"{model}.json.gz"
    with open(root / f"perf-compile-{model}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / "done").exists():
            d.mkdir(exist_ok=True)
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(d / "inductor_cache")}
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "profiler",
                    "profile",
                    "--model",
                    f"examples.models:{model}",
                    "--input",
                    MODELS[model],
                    "--compile",
                    "--steps",
                    "2",
                    "-o",
                    str(trace),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert r.returncode == 0, r.stderr[-3000:]
            (d / "done").write_text("ok")
    return trace


@pytest.fixture(scope="module")
def convnet(tmp_path_factory) -> Path:
    return compiled_model(tmp_path_factory, "convnet")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    return compiled_model(tmp_path_factory, "tiny_llama")


@pytest.fixture(params=["convnet", "tiny_llama"])
def either(request) -> Path:
    return request.getfixturevalue(request.param)


def _fusion(trace_path: Path):
    return compile_tables(load_trace(trace_path))["fusion"]


def test_compile_passes_on_the_compiler_track_before_the_two_steps(either):
    trace = load_trace(either)
    ev = trace.events
    passes = ev[ev["kind"] == Kind.COMPILE_PASS.value]
    assert len(passes) >= 10 and set(passes["source"].astype(str)) == {"compiler"}
    tracks = set(passes["track"].astype(str))
    assert "rank0/compiler" in tracks and all(
        t == "rank0/compiler" or t.startswith("rank0/compiler/worker") for t in tracks
    )
    steps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")]
    assert len(steps) == 2  # --steps 2: only the recorded steps, the warm-up (where it compiled) is not one
    assert int((passes["ts"] + passes["dur"]).max()) <= int(steps["ts"].min())
    assert not passes["step"].ge(0).any() and not trace.problems


def test_compile_phases_cover_the_pipeline(either):
    t = compile_tables(load_trace(either))
    phases = t["phases"]
    assert {"dynamo_tracing", "aot_autograd", "inductor_lowering", "kernel_compile"} <= set(phases["phase"])
    assert (phases["time_ns"] > 0).all() and phases["share"].sum() == pytest.approx(1.0)
    # a cold compile (fresh cache dir): the C++ kernels are built, which dominates here
    assert phases.set_index("phase").loc["kernel_compile", "time_ns"] == phases["time_ns"].max()
    assert len(t["compiles"]) == 1 and t["graph_breaks"].empty and set(t["caches"]["state"]) == {"miss"}


def test_convnet_convolutions_stay_extern_and_relu_pool_fuse(convnet):
    f = _fusion(convnet)
    conv = f[f["kernel"] == "extern_kernels.convolution"]
    assert len(conv) == 1
    c = conv.iloc[0]
    # both convolutions, one call each per run; FLOPs = 2 * numel(out) * numel(weight) / C_out:
    #   conv1: out 8x16x32x32, weight 16x3x3x3  -> 2 * 131072 * 27  =  7,077,888
    #   conv2: out 8x32x16x16, weight 32x16x3x3 -> 2 * 65536 * 144  = 18,874,368
    assert c["runtime_name"] == "aten::convolution" and c["kind"] == "extern" and c["sites"] == 2
    assert c["flops"] == 7_077_888 + 18_874_368
    assert c["calls"] == 4 and c["runs"] == 2  # two convolutions per run, two recorded steps
    gen = f[f["kind"].isin(GENERATED)]
    assert (gen["kind"] == "cpp").all() and not gen["kernel"].str.contains("convolution_backward").any()
    # the conv epilogue: ReLU fused with the max-pool behind it (never into the mkldnn call)
    epilogue = gen[
        gen["aten_ops"].map(lambda ops: {"aten::relu", "prims::_low_memory_max_pool_with_offsets"} <= set(ops))
    ]
    assert len(epilogue) == 2
    last = epilogue[epilogue["aten_ops"].map(lambda ops: "aten::mean" in ops)].iloc[0]
    # ReLU(8x32x16x16) + max-pool (1 per input element, 65536) + global mean over 8x32x8x8 (16384)
    #   = 65536 + 65536 + 16384 = 147456 FLOP; reads conv2's output 8*32*16*16*4 = 262144 byte,
    #   writes the 8x32 means, 1024 byte
    assert (last["flops"], last["bytes_read"], last["bytes_written"]) == (147456, 262144, 1024)
    assert last["calls"] == 2 and last["runs"] == 2 and last["bound"] != "unknown"
    # the layout copy in front of conv1: no arithmetic, input 8x3x32x32 + weight 16x3x3x3 + bias 16
    # fp32 read and written once: (24576 + 432 + 16) * 4 = 100096 byte each way
    copy = gen[gen["aten_ops"].map(lambda ops: set(ops) == {"aten::convolution"})]
    assert len(copy) == 1 and (copy.iloc[0]["flops"], copy.iloc[0]["bytes_read"], copy.iloc[0]["bytes_written"]) == (
        0,
        100096,
        100096,
    )


def test_tiny_llama_fuses_rmsnorm_and_swiglu_and_keeps_sdpa(tiny_llama):
    f = _fusion(tiny_llama)
    gen = f[f["kind"].isin(GENERATED)]
    # 5 RMSNorms (2 per layer + the final one), each its own C++ kernel (residual adds fused in)
    norms = gen[gen["aten_ops"].map(lambda ops: RMSNORM_OPS <= set(ops))]
    assert len(norms) == 5 and (norms["sites"] == 1).all()
    final = norms[norms["aten_ops"].map(lambda ops: "aten::embedding" not in ops)].iloc[0]
    # the final norm: x = residual + down(...) (add), then pow, mean, add eps, rsqrt, mul, mul w over
    # (1, 32, 64): pointwise 4 x 2048 + mean 2048 + per-row add/rsqrt 2 x 32 = 10304 FLOP
    assert final["flops"] == 4 * 2048 + 2048 + 2 * 32
    # SwiGLU: one kernel, both layers call it (Inductor reuses the code): 2 sites per run, so
    # 4 calls over 2 runs; per run 2 x 5 ops x (1*32*176) = 56320 FLOP
    swiglu = gen[gen["aten_ops"].map(lambda ops: SILU_MUL_OPS <= set(ops) and "aten::mean" not in ops)]
    assert len(swiglu) == 1
    s = swiglu.iloc[0]
    assert s["sites"] == 2 and s["calls"] == 4 and s["runs"] == 2 and s["flops"] == 2 * 5 * 32 * 176
    # attention is not decomposed: the CPU flash-attention ATen fallback, called once per layer
    sdpa = f[f["runtime_name"] == "aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert len(sdpa) == 1
    a = sdpa.iloc[0]
    # 2 layers x 4*B*H*S*S*D = 2 x 4*1*4*32*32*16 = 524288 FLOP per run
    assert a["kind"] == "extern" and a["sites"] == 2 and a["calls"] == 4 and a["runs"] == 2 and a["flops"] == 524288
    assert not gen["aten_ops"].map(lambda ops: any("softmax" in o or "amax" in o for o in ops)).any()
    mm = f[f["kernel"] == "extern_kernels.mm"].iloc[0]
    assert mm["sites"] == 11 and mm["calls"] == 22  # 5 linears per layer + the head


def test_analyze_classifies_every_generated_kernel(either):
    trace = load_trace(either)
    fusion = compile_tables(trace)["fusion"]
    u = analyze(trace).units
    gen = fusion[fusion["kind"].isin(GENERATED)]
    for k in gen.itertuples():
        got = u[u["name"].astype(str) == k.runtime_name]
        assert len(got) == 2 * k.sites, k.runtime_name  # one range per call, 2 recorded steps
        assert set(got["bound"]) <= {"memory", "compute", "runtime"}, k.runtime_name
        # a unit is one call: the fusion map's per-run numbers over its call sites
        assert (got["flops"] == k.flops / k.sites).all() and (got["bytes_read"] == k.bytes_read / k.sites).all()
        assert set(got["dtype"]) == {"fp32"}


def test_perf_analyze_json_lists_the_fused_kernels(either):
    r = subprocess.run(
        [sys.executable, "-m", "profiler", "analyze", str(either), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    ops = doc["ops"]
    fused = [o for o in ops if "cpp_fused_" in str(o.get("name", ""))]
    assert fused, [o.get("name") for o in ops]
    for o in fused:
        assert o["flops"] is not None and o["bytes"] is not None and o["bytes"] > 0, o
        assert o["bound"] != "unknown", o


def test_post_grad_graph_keeps_tuple_returning_nodes():
    """A node returning a tuple prints without a type annotation; it is still a node (its
    getitems alias it), so a fused max-pool or var_mean shows among the kernel's ops."""
    from collectors.torch_compile.graph_text import parse_graph

    g = parse_graph(
        '        relu: "f32[8, 16, 32, 32][16384, 1024, 32, 1]cpu" = torch.ops.aten.relu.default(arg0_1)\n'
        "        pool = torch.ops.prims._low_memory_max_pool_with_offsets.default("
        "relu, [2, 2], [2, 2], [0, 0], [1, 1], False)\n"
        '        getitem: "f32[8, 16, 16, 16][4096, 256, 16, 1]cpu" = pool[0]\n'
        "        return (getitem,)\n"
    )
    assert g.nodes["pool"].op == "prims::_low_memory_max_pool_with_offsets" and g.nodes["pool"].inputs == ("relu",)
    assert g.alias == {"getitem": "pool"} and "pool" not in g.values


def test_kernel_costs_divide_a_reused_kernel_by_its_sites():
    import pandas as pd

    from analysis.cost.kernels import kernel_costs

    fusion = pd.DataFrame(
        [
            {
                "kernel": "cpp_fused_mul_silu_2",
                "runtime_name": "graph_0_cpp_fused_mul_silu_2",
                "kind": "cpp",
                "aten_ops": ("aten::mul",),
                "flops": 56320.0,
                "bytes_read": 90112.0,
                "bytes_written": 45056.0,
                "dtype": "fp32",
                "family": "fused",
                "sites": 2,
            }
        ]
    )
    k = kernel_costs(pd.DataFrame({"name": ["graph_0_cpp_fused_mul_silu_2"]}), fusion)
    # one run = 2 calls of the same code: each call half the run's numbers
    assert (k.loc[0, "flops"], k.loc[0, "bytes_read"], k.loc[0, "bytes_written"]) == (28160.0, 45056.0, 22528.0)
    old = kernel_costs(pd.DataFrame({"name": ["graph_0_cpp_fused_mul_silu_2"]}), fusion.drop(columns="sites"))
    assert old.loc[0, "flops"] == 56320.0  # a file written before the column: one call per run
