"""Advice: ranked changes with their savings."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from profiler import analyze, load_trace
from tests.conftest import real_trace


@pytest.fixture(scope="module")
def unfused_attention(tmp_path_factory):
    # Attention written out by hand over a long sequence: the (4, 1024, 1024) score matrix
    # goes through memory three times (bmm -> scale -> softmax -> bmm).
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 1024, 64) for _ in range(3))

    def attention():
        scores = torch.matmul(q, k.transpose(-1, -2)) / 8.0
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    attention()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        attention()
    path = tmp_path_factory.mktemp("attn") / "trace.json"
    prof.export_chrome_trace(str(path))
    return load_trace(path)


def test_unfused_attention_is_the_top_fusion_candidate(unfused_attention):
    a = analyze(unfused_attention)
    fusion = [x for x in a.advice if x.kind == "fusion"]
    assert fusion, a.advice
    top = fusion[0]
    names = [n for n in top.title.split(" ") if n.startswith("aten::")]
    assert names == ["aten::bmm", "aten::div", "aten::_softmax", "aten::bmm"]
    # intermediates: 3 handoffs of the 4*1024*1024 fp32 score matrix (16 MiB), each written
    # once and read once: 3 * 2 * 16 MiB = 96 MiB = 100.7 MB
    assert "101 MB of intermediates" in top.evidence
    assert top.saving_ns > 0
    assert a.advice == tuple(sorted(a.advice, key=lambda x: -x.saving_ns))


@pytest.mark.parametrize("folder", ["b200_eager", "nccl_meta_a100", "resnet50_legacy_v100"])
def test_savings_never_exceed_the_measured_time(folder):
    a = analyze(load_trace(real_trace(folder)))
    busy = a.equation["window_ns"].sum()
    for x in a.advice:
        assert 0 < x.saving_ns <= busy, x


def test_fusion_chains_stop_at_iteration_ends_and_repeats_merge(tmp_path):
    # Two ProfilerSteps, each: mm (compute) -> relu -> add (memory-bound, 1M fp32 elements).
    # Each step's chain [mm, relu, add] has no consumer inside its step, so it must not run on
    # into the next step's mm; the two identical chains become one advice with both savings.
    from tests.conftest import write_trace, x

    n = 1 << 20  # 1,048,576 floats = 4 MiB per tensor
    mm = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["float", "float"]}
    relu = {"Input Dims": [[1024, 1024]], "Input type": ["float"]}
    add = {"Input Dims": [[1024, 1024], [1024, 1024], []], "Input type": ["float", "float", "Scalar"]}
    events = []
    for s, t0 in enumerate((0, 10_000)):
        events += [x(f"ProfilerStep#{s}", "user_annotation", t0, 9_000),
                   x("aten::mm", "cpu_op", t0 + 10, 5_000, **mm),
                   x("aten::relu", "cpu_op", t0 + 5_100, 1_000, **relu),
                   x("aten::add", "cpu_op", t0 + 6_200, 1_500, **add)]
    a = analyze(load_trace(write_trace(tmp_path / "t.json", events)))
    fusion = [f for f in a.advice if f.kind == "fusion"]
    assert len(fusion) == 1, fusion
    (f,) = fusion
    assert f.title.startswith("fuse aten::mm -> aten::relu -> aten::add") and "2 occurrences" in f.evidence
    # per step: intermediates mm->relu and relu->add, each 2 * 4 MiB (written, read back) = 16 MiB;
    # at 20 GB/s (generic-x86-cpu) 838.9 us, capped by the chain's memory-bound time (relu 1 ms +
    # add 1.5 ms): 838.9 us per step, 1677.7 us for both
    assert f.saving_ns == pytest.approx(2 * (2 * 2 * 4 * n) / 20e9 * 1e9)
    assert len(f.units) == 6
