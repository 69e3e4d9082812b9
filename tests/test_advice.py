"""Advice: ranked changes, each saving bounded by the time it can remove (analysis.advice)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

from analysis.advice_fusion import unit_scopes
from profiler import analyze, load_trace
from profiler.model.hardware import load_spec
from tests.conftest import real_trace, write_trace, x

REAL = [
    "b200_eager",
    "nccl_meta_a100",
    "resnet50_legacy_v100",
    "dlrm_8rank_v100",
    "sglang_qwen3_prefill_mi300x",
    "sglang_qwen3_decode_mi300x",
    "vllm_graphs_mi300x",
    "ddp_allreduce_v100",
]


def _record(path, body, steps: int = 3) -> object:
    """`body` run `steps` times under torch.profiler (shapes recorded), one ProfilerStep each."""
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=steps),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(steps + 1):
            body()
            prof.step()
    return load_trace(path)


# ---------------------------------------------------------------------------- unfused attention


@pytest.fixture(scope="module")
def unfused_attention(tmp_path_factory):
    # Attention written out by hand, 3 iterations: bmm -> div -> softmax -> bmm on a (4, 512, 512)
    # score matrix. Head dim 8, so the score matrix's trips through memory dominate.
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 512, 8) for _ in range(3))

    def attention():
        scores = torch.matmul(q, k.transpose(-1, -2)) / 8.0
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    return _record(tmp_path_factory.mktemp("attn") / "trace.json", attention)


def test_unfused_attention_is_one_attention_saving_the_chain_less_the_fused_floor(unfused_attention):
    a = analyze(unfused_attention)
    (top,) = [x for x in a.advice if x.kind == "attention"]
    assert "scaled_dot_product_attention" in top.title and "FlashAttention" in top.title
    assert top.count == 3 and "(× 3)" in top.title  # one line for the three iterations
    u = a.units.set_index("unit_id").loc[list(top.units)]
    assert u["name"].tolist() == ["aten::bmm", "aten::div", "aten::_softmax", "aten::bmm"] * 3
    spec = load_spec(a.hardware["rank0/cpu"])
    # fused-attention floor of one call, B*H = 4, L = 512, D = 8, fp32:
    #   FLOPs = 2 matmuls * 2*4*512*512*8 = 33,554,432 FLOP; at the fp32 matrix peak (generic-x86-cpu:
    #   192 GFLOP/s) 174.8 us
    #   Q + K + V + O = 4 tensors * 4*512*8 * 4 B = 262,144 B; at 20 GB/s 13.1 us
    #   floor = max(174.8 us, 13.1 us) = 174.8 us
    floor_ns = (
        max(2 * (2 * 4 * 512 * 512 * 8) / spec.peak("fp32", "matrix"), 4 * (4 * 512 * 8 * 4) / spec.bandwidth()) * 1e9
    )
    assert top.saving_ns == pytest.approx(u["time_ns"].sum() - 3 * floor_ns)
    assert top.saving_ns > 0.5 * u["time_ns"].sum()  # not a quarter of the chain: the score matrix's trips go
    assert "chain time - max(" in top.formula and top.assumption


def test_advice_on_the_same_ops_is_not_counted_twice(tmp_path):
    # Hand-built unfused attention, B*H = 4, L = 256, D = 64, fp32, times fixed (us):
    # bmm 2000 -> div 300 -> _softmax 300 -> bmm 2000; chain 4600 us.
    scores = [1, 4, 256, 256]
    events = [
        x("ProfilerStep#0", "user_annotation", 0, 5_000),
        x(
            "aten::bmm",
            "cpu_op",
            10,
            2_000,
            **{"Input Dims": [[4, 256, 64], [4, 64, 256]], "Input type": ["float"] * 2},
        ),
        x("aten::div", "cpu_op", 2_020, 300, **{"Input Dims": [scores, []], "Input type": ["float", "Scalar"]}),
        x(
            "aten::_softmax",
            "cpu_op",
            2_330,
            300,
            **{"Input Dims": [scores, [], []], "Input type": ["float", "Int", "Bool"]},
        ),
        x(
            "aten::bmm",
            "cpu_op",
            2_640,
            2_000,
            **{"Input Dims": [[4, 256, 256], [4, 256, 64]], "Input type": ["float"] * 2},
        ),
    ]
    a = analyze(load_trace(write_trace(tmp_path / "attn.json", events)))
    att = a.advice[0]
    assert att.kind == "attention"
    # floor = max(2 * 2*4*256*256*64 FLOP / 192 GFLOP/s = 349.5 us, Q+K+V+O 4 * 262,144 B / 20 GB/s = 52.4 us)
    spec = load_spec(a.hardware["rank0/cpu"])
    floor = 2 * (2 * 4 * 256 * 256 * 64) / spec.peak("fp32", "matrix") * 1e9
    assert att.saving_ns == pytest.approx(4_600_000 - floor)  # 4250.5 us
    # each bmm alone is compute-bound at 174.8 / 2000 = 9% of its floor: tiling would save
    # 2000 - 174.8 = 1825 us each. The attention already removes 2000 * (1 - 349.5/4600) us of
    # each bmm's time; tiling keeps what is left, 2000 * 349.5 / 4600 = 152 us each.
    tiling = [t for t in a.advice if t.kind == "tiling"]
    assert len(tiling) == 2
    for t in tiling:
        assert t.saving_ns == pytest.approx(2_000_000 * floor / 4_600_000)
        assert "less what advice above already removes" in t.evidence
    assert sum(t.saving_ns for t in [att, *tiling]) <= 4_600_000


# ---------------------------------------------------------------------------- fusion edges


def _mm_relu_add(relu_dims: list[int]) -> list[dict]:
    """Two ProfilerSteps, each: mm [1024,1024]x[1024,1024] (compute) -> relu -> add (memory-bound)."""
    mm = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["float", "float"]}
    relu = {"Input Dims": [relu_dims], "Input type": ["float"]}
    add = {"Input Dims": [relu_dims, relu_dims, []], "Input type": ["float", "float", "Scalar"]}
    events = []
    for s, t0 in enumerate((0, 20_000)):
        events += [
            x(f"ProfilerStep#{s}", "user_annotation", t0, 19_000),
            x("aten::mm", "cpu_op", t0 + 10, 12_000, **mm),
            x("aten::relu", "cpu_op", t0 + 12_100, 1_000, **relu),
            x("aten::add", "cpu_op", t0 + 13_200, 1_500, **add),
        ]
    return events


def test_fusion_chains_stop_at_iteration_ends_and_repeats_merge(tmp_path):
    # Each step's chain [mm, relu, add] has no consumer inside its step, so it must not run on
    # into the next step's mm; the two identical chains are one advice with a count.
    n = 1 << 20  # 1,048,576 floats = 4 MiB per tensor
    a = analyze(load_trace(write_trace(tmp_path / "t.json", _mm_relu_add([1024, 1024]))))
    fusion = [f for f in a.advice if f.kind == "fusion"]
    assert len(fusion) == 1, fusion
    (f,) = fusion
    assert f.title.startswith("fuse aten::mm -> aten::relu -> aten::add (× 2)") and f.count == 2
    # per step: intermediates mm->relu and relu->add, each 2 * 4 MiB (written, read back) = 16 MiB;
    # at 20 GB/s (generic-x86-cpu) 838.9 us. Chain 12 + 1 + 1.5 = 14.5 ms; fused floor = max(mm's
    # 2*1024^3 FLOP / 192 GFLOP/s = 11.18 ms, (32 MiB - 16 MiB) / 20 GB/s = 0.84 ms) = 11.18 ms;
    # 14.5 - 11.18 = 3.3 ms > 838.9 us: 838.9 us per step, 1677.7 us for both
    assert f.saving_ns == pytest.approx(2 * (2 * 2 * 4 * n) / 20e9 * 1e9)
    assert len(f.units) == 6 and f.assumption


def test_no_fusion_between_ops_that_do_not_feed_each_other(tmp_path):
    # relu and add work on a [512, 512] tensor, not the mm's [1024, 1024] output: relu -> add
    # feed each other (one chain), the mm does not feed them
    a = analyze(load_trace(write_trace(tmp_path / "t.json", _mm_relu_add([512, 512]))))
    titles = [f.title for f in a.advice if f.kind == "fusion"]
    assert titles and all("aten::mm" not in t for t in titles), titles
    assert any(t.startswith("fuse aten::relu -> aten::add") for t in titles), titles


@pytest.fixture(scope="module")
def training_loop(tmp_path_factory):
    """A tiny attention block trained with Adam (foreach=False: one op per parameter update)."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self, d: int = 64, h: int = 4):
            super().__init__()
            self.qkv, self.out, self.h = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d), h

        def forward(self, x):
            b, length, d = x.shape
            q, k, v = self.qkv(x).view(b, length, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, length, d)
            return torch.relu(self.out(y))

    model = Block()
    opt = torch.optim.Adam(model.parameters(), foreach=False)
    x_in, target = torch.randn(8, 128, 64), torch.randn(8, 128, 64)

    def step():
        opt.zero_grad()
        F.mse_loss(model(x_in), target).backward()
        opt.step()

    return _record(tmp_path_factory.mktemp("train") / "train.json", step, steps=2)


def test_fusion_never_spans_an_optimizer_step(training_loop):
    # before: one chain ran from the backward's mm through Adam's lerp_/mul_/addcmul_/sqrt/div/...
    a = analyze(training_loop)
    from analysis.advice import advise
    from profiler.api import spec_resolver

    every = advise(
        a.units, a.communication, spec_resolver(training_loop), limit=1000, trace=training_loop, equation=a.equation
    )
    ids = a.units["unit_id"].to_numpy()
    _, optimizer = unit_scopes(training_loop.events, ids)
    assert optimizer.sum() > 20  # Adam's per-parameter ops are there
    in_optimizer = set(ids[optimizer].tolist())
    fused = [f for f in every if f.kind in ("fusion", "attention")]
    assert fused and not [f.title for f in fused if in_optimizer & set(f.units)]


# ---------------------------------------------------------------------------- real traces


@pytest.mark.parametrize("folder", REAL)
def test_savings_bounded_by_busy_and_wall_time(folder):
    a = analyze(load_trace(real_trace(folder)))
    eq = a.equation.assign(where=lambda e: "rank" + e["rank"].astype(str) + "/" + e["device"].astype(str))
    busy = dict(zip(eq["where"], eq["busy_ns"]))
    assert sum(x.saving_ns for x in a.advice) <= eq["window_ns"].max()  # all advice together within the wall time
    for item in a.advice:
        assert 0 < item.saving_ns <= max(busy[d] for d in item.devices), item  # advice here removes device work
        assert item.formula and item.assumption and item.count >= 1
    keys = [(x.kind, x.title) for x in a.advice]
    assert len(keys) == len(set(keys))  # the same advice on identical layers or ranks is one line


def test_overlap_saving_is_bounded_by_the_work_that_could_hide_it():
    # DLRM, 8 ranks: rank1's collectives run 11.3 ms, 11.1 ms exposed, but the rank has only
    # 12.3 - 11.3 = ~1 ms of other device work to hide them behind
    a = analyze(load_trace(real_trace("dlrm_8rank_v100")))
    comm = [x for x in a.advice if x.kind == "communication"]
    assert len(comm) == 1 and len(comm[0].devices) == 8  # one line for the 8 ranks
    c = a.communication.merge(a.equation, on=["rank", "device"])
    hideable = (c["exposed_ns"].clip(upper=c["busy_ns"] - c["comm_ns"])).max()
    assert comm[0].saving_ns == pytest.approx(hideable)
    assert comm[0].saving_ns < 0.2 * c["exposed_ns"].max()  # not the 11 ms offered before


def test_identical_layers_are_one_line_with_a_count():
    # ResNet-50: conv -> bn -> relu -> conv repeats in every bottleneck block and iteration
    a = analyze(load_trace(real_trace("resnet50_legacy_v100")))
    fusion = [x for x in a.advice if x.kind == "fusion"]
    assert fusion and all(x.count > 1 and f"(× {x.count})" in x.title for x in fusion[:3])
    for item in fusion:
        assert len(item.units) % item.count == 0  # count chains of the same ops
        ops = item.title.split(" (× ")[0].removeprefix("fuse ").split(" -> ")
        assert len(item.units) == item.count * len(ops)


def test_attention_with_scale_mask_and_dropout_is_one_attention(tmp_path):
    # bmm -> mul (scale) -> add (mask) -> _softmax -> native_dropout -> bmm, B*H = 4, L = 256, D = 64
    s = [4, 256, 256]
    ev = [x("ProfilerStep#0", "user_annotation", 0, 9_000)]
    t = 10
    for name, dims, types, dur in (
        ("aten::bmm", [[4, 256, 64], [4, 64, 256]], ["float"] * 2, 2_000),
        ("aten::mul", [s, []], ["float", "Scalar"], 300),
        ("aten::add", [s, s, []], ["float", "float", "Scalar"], 300),
        ("aten::_softmax", [s, [], []], ["float", "Int", "Bool"], 300),
        ("aten::native_dropout", [s, [], []], ["float", "Double", "Bool"], 300),
        ("aten::bmm", [s, [4, 256, 64]], ["float"] * 2, 2_000),
    ):
        ev.append(x(name, "cpu_op", t, dur, **{"Input Dims": dims, "Input type": types}))
        t += dur + 10
    a = analyze(load_trace(write_trace(tmp_path / "attn.json", ev)))
    (att,) = [x for x in a.advice if x.kind == "attention"]
    names = a.units.set_index("unit_id").loc[list(att.units), "name"].tolist()
    assert names[0] == names[-1] == "aten::bmm" and {"aten::mul", "aten::add", "aten::_softmax"} <= set(names)
    assert not [x for x in a.advice if x.kind == "fusion"]  # the chain is the attention, not also a fusion
    spec = load_spec(a.hardware["rank0/cpu"])
    floor = 2 * (2 * 4 * 256 * 256 * 64) / spec.peak("fp32", "matrix") * 1e9  # 349.5 us, as above
    chain = a.units.set_index("unit_id").loc[list(att.units), "time_ns"].sum()
    assert att.saving_ns == pytest.approx(chain - floor)
