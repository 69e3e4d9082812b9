"""TORCH_TRACE directories (tlparse's input) read into the compile tables; graph breaks,
recompiles and cache hits; hand-written logs; bad input; a model that breaks its graph and one
that fails to compile, through compare_compile."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from rich.console import Console

from analysis.cost.kernels import with_flops
from collectors.torch_compile.fusion_map import fusion_map
from collectors.torch_compile.graph_text import dynamo_nodes, parse_graph
from profiler.render.compile import render_report
from collectors.torch_compile.report import read_compile_report
from collectors.torch_compile.tlparse import Log, Record, parse_lines, read_torch_trace
from profiler.model.errors import InputError

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import torch
    import torch._inductor.config as ic

    ic.trace.provenance_tracking_level = 1

    def g(x):
        return torch.sin(x) * 2 + 1

    def f(x, n):
        y = torch.sin(x) + 1
        print("graph break here")
        return torch.cos(y) * n

    with torch.no_grad():
        x = torch.randn(64)
        torch.compile(g)(x)          # cold: every phase runs, results go to the fresh cache dir
        torch._dynamo.reset()
        torch.compile(g)(x)          # warm: the AOTAutograd / FX graph caches hit
        torch._dynamo.reset()
        with ic.patch({"force_disable_caches": True}):
            c = torch.compile(f)
            c(x, 2)
            c(x, 3)                  # guard n == 2 fails: recompile
""")


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("torch_trace")
    script = d / "model_script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TORCH_TRACE": str(d / "trace"), "TORCHINDUCTOR_CACHE_DIR": str(d / "cache")}
    r = subprocess.run(
        [sys.executable, str(script)], check=False, env=env, capture_output=True, text=True, timeout=600, cwd=d
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return script, d / "trace"


def _line(script: Path, text: str) -> int:
    return next(i for i, s in enumerate(script.read_text().splitlines(), 1) if text in s)


def test_torch_trace_dir_gives_every_table(torch_trace):
    script, trace = torch_trace
    rep = read_compile_report(trace)
    assert not rep.phases.empty and {"dynamo_tracing", "inductor_lowering", "codegen"} <= set(rep.phases["phase"])
    gb = rep.graph_breaks
    assert len(gb) >= 1 and (gb["file"] == str(script)).all()
    assert set(gb["line"]) == {_line(script, 'print("graph break here")')}
    assert gb["reason"].str.contains("print").all()
    rc = rep.recompiles
    hit = rc[rc["guard"].str.contains("n == 2")]
    assert len(hit) == 1 and hit.iloc[0]["file"] == str(script)
    assert hit.iloc[0]["line"] == _line(script, "return torch.cos(y) * n")
    # the kernels of f's two graphs and their recompile, each with its ATen ops and source line
    fm = rep.fusion
    cos = fm[fm["aten_ops"].apply(lambda ops: "aten::cos" in ops)]
    assert len(cos) >= 1 and all(f"{script}:{_line(script, 'torch.cos(y) * n')}" in s for s in cos["sources"])
    console = Console(record=True, width=200)
    console.print(render_report(rep))
    text = console.export_text()
    assert "Graph breaks" in text and "n == 2" in text


def test_cache_hits_are_labelled_and_skip_phases(torch_trace):
    _, trace = torch_trace
    rep = read_compile_report(trace)
    hits = rep.caches[rep.caches["state"] == "hit"]
    assert len(hits) >= 1 and set(hits["cache"]) <= {"aotautograd", "fx_graph"}
    warm = hits["compile_id"].iloc[0]
    cold = rep.caches.loc[
        (rep.caches["state"] == "miss") & (rep.caches["cache"] == hits["cache"].iloc[0]), "compile_id"
    ].iloc[0]
    phases = rep.phase_summary
    # the warm compile loaded the compiled graph: no scheduling, fusion or code generation ran
    assert "scheduling_fusion" in set(phases.loc[phases["compile_id"] == cold, "phase"])
    assert "scheduling_fusion" not in set(phases.loc[phases["compile_id"] == warm, "phase"])


GRAPH = """class GraphModule(torch.nn.Module):
    def forward(self, primals_1: "f32[64, 64][64, 1]cpu", primals_2: "f32[64][1]cpu", \
primals_3: "f32[32, 64][64, 1]cpu"):
        # File: /m/model.py:10 in forward, code: y = s.l(x)
        permute: "f32[64, 64][1, 64]cpu" = torch.ops.aten.permute.default(primals_1, [1, 0]);  primals_1 = None
        addmm: "f32[32, 64][64, 1]cpu" = torch.ops.aten.addmm.default(primals_2, primals_3, permute);  \
primals_2 = permute = None

        # File: /m/model.py:11 in forward, code: z = torch.relu(y * 2 + 1)
        mul: "f32[32, 64][64, 1]cpu" = torch.ops.aten.mul.Tensor(addmm, 2);  addmm = None
        add: "f32[32, 64][64, 1]cpu" = torch.ops.aten.add.Tensor(mul, 1);  mul = None
        relu: "f32[32, 64][64, 1]cpu" = torch.ops.aten.relu.default(add);  add = None

        # File: /m/model.py:12 in forward, code: return z.sum(-1)
        sum_1: "f32[32][1]cpu" = torch.ops.aten.sum.dim_IntList(relu, [-1])

        # File: /m/model.py:11 in forward, code: z = torch.relu(y * 2 + 1)
        le: "b8[32, 64][64, 1]cpu" = torch.ops.aten.le.Scalar(relu, 0);  relu = None
        return (sum_1, primals_3, le)
"""
CODE = """cpp_fused_add_mul_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*', 'bool*'], r\'\'\'
    torch::aot_inductor::RAIIAtenRecordFunctionHandle \
record_graph_3_cpp_fused_add_mul_relu_0_("graph_3_cpp_fused_add_mul_relu_0", nullptr);
\'\'\')
"""
MAPPING = (
    '{"cppCodeToPost": {"extern_kernels.addmm:1": ["addmm"], '
    '"cpp_fused_add_mul_relu_0:2": ["sum_1", "relu", "add", "mul", "le"]},'
    ' "postToPre": {"addmm": ["y"], "mul": ["mul"], "add": ["add"], "relu": ["z"], "sum_1": ["sum_1"]}}'
)


def _log() -> Log:
    ids = {"frame_id": 0, "frame_compile_id": 0}
    return Log(
        records=[
            Record("artifact", {"artifact": {"name": "inductor_post_grad_graph"}, **ids}, GRAPH),
            Record("inductor_output_code", {"inductor_output_code": {}, **ids}, CODE),
            Record("artifact", {"artifact": {"name": "inductor_provenance_tracking_node_mappings"}, **ids}, MAPPING),
        ]
    )


def test_fusion_map_from_a_hand_written_log():
    raw = fusion_map(_log())
    # the collector records what the graph says (the nodes and their shapes); analysis counts FLOPs
    assert "flops" not in raw.columns
    fm = with_flops(raw).set_index("kernel")
    mm, fused = fm.loc["extern_kernels.addmm"], fm.loc["cpp_fused_add_mul_relu_0"]
    assert mm["runtime_name"] == "aten::addmm" and mm["kind"] == "extern" and mm["family"] == "gemm"
    # addmm(bias [64], x [32, 64], permute(w) [64, 64]) -> [32, 64], dtypes and shapes as printed
    addmm_in = (("fp32", (64,)), ("fp32", (32, 64)), ("fp32", (64, 64)))
    assert mm["work"] == (("aten::addmm", addmm_in, ("fp32", (32, 64))),)
    assert mm["flops"] == 2 * 32 * 64 * 64  # 2*M*N*K: one multiply-add is two FLOPs
    assert mm["bytes_read"] == (64 + 32 * 64 + 64 * 64) * 4 and mm["bytes_written"] == 32 * 64 * 4
    assert fused["runtime_name"] == "graph_3_cpp_fused_add_mul_relu_0" and fused["kind"] == "cpp"
    assert fused["aten_ops"] == ("aten::add", "aten::le", "aten::mul", "aten::relu", "aten::sum")
    assert fused["nodes"] == ("mul", "add", "relu", "sum_1", "le")
    assert fused["sources"] == ("/m/model.py:11", "/m/model.py:12")
    # reads addmm's output once; writes sum_1 (fp32 [32]) and le (bool [32, 64]): relu, add, mul stay inside
    assert fused["bytes_read"] == 32 * 64 * 4 and fused["bytes_written"] == 32 * 4 + 32 * 64 * 1
    # 1 FLOP per output element for mul, add, relu, le; 1 per input element for the sum
    assert fused["flops"] == 4 * 32 * 64 + 32 * 64
    assert fused["pre_nodes"] == ("mul", "add", "z", "sum_1")


def test_compiled_gemm_flops_equal_flop_counter():
    """The FLOPs analysis counts for a compiled model's GEMM kernels, from the post-grad nodes the
    collector records, are torch.utils.flop_counter's for the same model run eager."""
    import torch._inductor.config as ic
    from torch.utils.flop_counter import FlopCounterMode

    from collectors.torch_compile.embed import capturing

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 48)

        def forward(self, x, y):
            return torch.bmm(torch.relu(self.lin(x)), y)

    m, x, y = M(), torch.randn(4, 16, 64), torch.randn(4, 48, 8)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        m(x, y)
    # linear over 4*16 = 64 rows, K 64, N 48: 2*64*64*48 = 393216; bmm 2*4*16*48*8 = 49152
    assert fc.get_total_flops() == 2 * 64 * 64 * 48 + 2 * 4 * 16 * 48 * 8 == 442_368
    torch._dynamo.reset()
    with torch.no_grad(), ic.patch({"force_disable_caches": True}), capturing() as log:
        torch.compile(m)(x, y)
    fm = with_flops(fusion_map(log))
    gemm = fm[fm["family"] == "gemm"]
    assert len(gemm) == 2 and gemm["flops"].sum() == fc.get_total_flops(), fm[["kernel", "flops"]]


def test_graph_text_and_dynamo_nodes():
    g = parse_graph(GRAPH)
    assert (
        g.values["le"].dtype == "b8" and g.values["le"].shape == (32, 64) and g.outputs == ("sum_1", "primals_3", "le")
    )
    assert (
        g.nodes["addmm"].inputs == ("primals_2", "primals_3", "permute") and g.nodes["addmm"].source == "/m/model.py:10"
    )
    dyn = """        y: "f32[32, 64]" = torch._C._nn.linear(l_x_, w, b);  l_x_ = None
        mul: "f32[32, 64]" = y * 2;  y = None
        z: "f32[32, 64]" = torch.relu(mul)
        sum_1: "f32[32]" = z.sum(-1)
        getitem: "f32[32]" = sum_1[0]"""
    assert dynamo_nodes(dyn) == [
        ("y", "linear"),
        ("mul", "mul"),
        ("z", "relu"),
        ("sum_1", "sum"),
        ("getitem", "getitem"),
    ]


def test_unreadable_lines_are_counted_not_hidden():
    log = Log()
    parse_lines(
        iter(
            [
                (
                    'V1202 16:12:15.881000 9946 torch/x.py:1] {"dynamo_start": {"stack": []}, '
                    '"frame_id": 0, "frame_compile_id": 0}'
                ),
                "garbage line",
                'V1202 16:12:15.881000 9946 torch/x.py:1] {"artifact": ',
                "\tpayload of a broken record",
            ]
        ),
        log,
    )
    assert [r.kind for r in log.records] == ["dynamo_start"] and log.records[0].compile_id == "0/0"
    assert log.problems.counts == {
        "structured-log lines without a glog prefix skipped": 1,
        "structured-log lines with unreadable JSON skipped": 1,
    }


def test_bad_torch_trace_paths(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_torch_trace(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no structured-log files"):
        read_torch_trace(tmp_path / "empty")
    (tmp_path / "junk.log").write_text("this is not a structured log\n")
    with pytest.raises(InputError, match="not a torch.compile structured log"):
        read_torch_trace(tmp_path / "junk.log")


class Breaks(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sin(x) * 2
        print("graph break")  # Dynamo cannot trace print: two graphs, eager code between them
        return torch.cos(y) + 1


def test_a_graph_break_gives_a_message_and_both_graphs():
    from profiler.api import compare_compile

    with torch.no_grad():
        res = compare_compile(Breaks(), torch.randn(256), steps=2, warmup=1)
    assert res.compiled_ok
    assert any(m.startswith("graph break at test_compile_trace.py:") and "print" in m for m in res.messages)
    assert len(res.compile.graph_breaks) == 1
    ops = set(" + ".join(res.groups["aten_ops"]).split(" + "))
    assert {"aten::sin", "aten::cos"} <= ops  # both graphs compiled and joined
    assert (res.groups["eager_ns"] > 0).all() and (res.groups["compiled_ns"] > 0).all()


def test_a_model_that_fails_to_compile_keeps_the_eager_side():
    import torch._inductor.config as ic

    from profiler.api import compare_compile

    with torch.no_grad(), ic.patch({"cpp.cxx": (None, str(ROOT / "no-such-compiler"))}):
        res = compare_compile(lambda: torch.nn.Sequential(torch.nn.ReLU()), torch.randn(64), steps=1, warmup=1)
    assert not res.compiled_ok and res.groups.empty and res.eager is not None and res.eager_step_ns > 0
    assert any(m.startswith("torch.compile failed:") for m in res.messages), res.messages
    assert "dynamo_tracing" in set(res.compile.phases["phase"])  # what ran before the failure is kept
