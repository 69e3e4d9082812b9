"""Forward -> backward links from autograd sequence numbers (traces without 'fwdbwd' flow events),
and the forward convolutions they let `analysis.cost.joins.forward_conv_costs` size."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from analysis.cost import cost_table
from profiler.api import analyze, load_trace
from tests.conftest import TRACES, real_trace, write_trace, x

# legacy (2021) 'Input type' of cudnn_convolution(self, weight, padding, stride, dilation, groups,
# benchmark, deterministic, allow_tf32) and cudnn_convolution_backward(self, grad_output, weight, ...)
_FWD_TYPES = ["float", "float", "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool"]
_BWD_TYPES = [
    "float",
    "float",
    "float",
    "GenericList",
    "GenericList",
    "GenericList",
    "Int",
    "Bool",
    "Bool",
    "Bool",
    "GenericList",
]
# conv: x [2, 4, 9, 9], w [6, 2, 3, 3] (groups = 4 / 2 = 2), stride 2, padding 1
#   -> Ho = Wo = (9 + 2*1 - 3) // 2 + 1 = 5, grad_output [2, 6, 5, 5]
X, W, GO = [2, 4, 9, 9], [6, 2, 3, 3], [2, 6, 5, 5]


def _op(name: str, ts: float, dur: float, tid: int, seq: int | None = None, fwd: int | None = None, **args) -> dict:
    if seq is not None:
        args["Sequence number"] = seq
    if fwd is not None:
        args["Fwd thread id"] = fwd
    return x(name, "Operator", ts, dur, tid=tid, **args)


def _legacy_events(seq_value: object = 7) -> list[dict]:
    fwd_dims = {"Input Dims": [X, W, [], [], [], [], [], [], []], "Input type": _FWD_TYPES}
    return [
        # forward thread 100: a no-grad op and the conv stack carry 7 (the conv creates node 7),
        # relu_ then carries 8 and creates node 8; the last op carries 9 and creates nothing
        _op("aten::add", 1, 2, 100, seq=7, fwd=0),
        _op("aten::conv2d", 10, 50, 100, seq=seq_value, fwd=0, **fwd_dims),
        _op("aten::convolution", 11, 48, 100, seq=7, fwd=0, **fwd_dims),
        _op("aten::_convolution", 12, 46, 100, seq=7, fwd=0, **fwd_dims),
        _op("aten::cudnn_convolution", 13, 44, 100, seq=7, fwd=0, **fwd_dims),
        _op("aten::empty", 14, 2, 100),  # below autograd: no number
        _op("aten::relu_", 70, 5, 100, seq=8, fwd=0),
        _op("aten::zero_", 80, 5, 100, seq=9, fwd=0),
        # forward thread 300 (profiler thread 2) keeps its own numbers: 3 and 4, like thread 100's
        _op("aten::mul", 20, 5, 300, seq=3, fwd=0),
        _op("aten::exp", 30, 5, 300, seq=4, fwd=0),
        # backward thread 200
        _op("ReluBackward1", 100, 5, 200, seq=8, fwd=1),
        _op("CudnnConvolutionBackward", 110, 40, 200, seq=7, fwd=1),
        _op(
            "aten::cudnn_convolution_backward",
            111,
            38,
            200,
            **{"Input Dims": [X, GO, W, [], [], [], [], [], [], [], []], "Input type": _BWD_TYPES},
        ),
        _op("MulBackward0", 160, 5, 200, seq=3, fwd=2),
        _op("ExpBackward", 170, 5, 200, seq=4, fwd=2),
        _op("aten::mul", 170, 5, 200, seq=4, fwd=2),  # newer PyTorch: the node's ATen op, same number
        _op("AddBackward0", 180, 5, 200, seq=99, fwd=1),  # its forward was not recorded
    ]


def _pairs(trace) -> set[tuple[str, str]]:
    fb = trace.flows[trace.flows["kind"] == "fwdbwd"]
    name = trace.events.set_index("id")["name"].astype(str)
    return set(zip(name.reindex(fb["src"]), name.reindex(fb["dst"])))


def test_flows_from_sequence_numbers(tmp_path):
    trace = load_trace(write_trace(tmp_path / "t.json", _legacy_events()))
    # PyTorch's rule: among forward ops with a node's number, the latest start (the innermost op)
    assert _pairs(trace) == {
        ("aten::cudnn_convolution", "CudnnConvolutionBackward"),
        ("aten::relu_", "ReluBackward1"),
        ("aten::mul", "MulBackward0"),
        ("aten::exp", "ExpBackward"),
    }
    assert (
        trace.problems.counts[
            "autograd backward nodes whose forward op was not recorded (no op with their sequence number)"
        ]
        == 1
    )


def test_forward_conv_costed_through_its_backward_node(tmp_path):
    trace = load_trace(write_trace(tmp_path / "t.json", _legacy_events()))
    ev = trace.events
    conv = ev[ev["name"] == "aten::cudnn_convolution"]
    assert cost_table(conv, tree=ev)["flops"].isna().all()  # no flows: stride/padding unknown
    got = cost_table(conv, tree=ev, flows=trace.flows).iloc[0].tolist()
    # FLOPs = 2 * N * Cout * Ho * Wo * (Cin/groups) * kh * kw = 2 * 2 * 6 * 5 * 5 * 2 * 3 * 3 = 10,800
    # read x 648 + w 108 elements, written 300 output elements, 4 bytes each
    assert got == [10_800.0, 10_800.0, 3_024.0, 1_200.0, "conv", "fp32"]
    # the same count as torch's own FLOP counter for this convolution
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        out = torch.nn.functional.conv2d(torch.randn(*X), torch.randn(*W), stride=2, padding=1, groups=2)
    assert list(out.shape) == GO and fc.get_total_flops() == got[0]
    # the wrappers (conv2d, convolution, _convolution) are not costed twice
    assert cost_table(ev, flows=trace.flows, tree=ev)["flops"].notna().sum() == 1


def test_odd_sequence_numbers_never_crash(tmp_path):
    for odd in ("7", 2**70, -5, None):
        trace = load_trace(write_trace(tmp_path / "odd.json", _legacy_events(odd)))
        # the conv itself still carries 7: only the conv2d wrapper's number is odd
        assert ("aten::cudnn_convolution", "CudnnConvolutionBackward") in _pairs(trace)


def test_kineto_flows_win_and_the_rule_reproduces_them():
    """On a trace with Kineto's own 'fwdbwd' flows, they are kept as they are; the sequence-number
    rule, run on the same trace, finds exactly those links."""
    from pathlib import Path

    from collectors.kineto import decode, link
    from collectors.kineto.build import build_events
    from collectors.kineto.load import _accumulate
    from profiler.model.trace import Problems

    if not (TRACES / "nccl_meta_a100").is_dir():
        pytest.skip("real traces not available")
    path = Path(real_trace("nccl_meta_a100"))
    path = next(p for p in path.iterdir()) if path.is_dir() else path
    fb = load_trace(path).flows.query("kind == 'fwdbwd'")
    problems = Problems()
    raw = decode.split_top(path, decode.read_bytes(path), problems).pop("traceEvents")
    acc = _accumulate(path, raw, problems)
    derived = link.seq_fwdbwd_flows(build_events(acc, 0, 0), acc.column("x_seq_nr"), acc.column("x_fwd_tid"), problems)
    assert len(fb) == 543 and set(zip(fb["src"], fb["dst"])) == set(zip(derived["src"], derived["dst"]))


@pytest.fixture(scope="module")
def resnet():
    if not (TRACES / "resnet50_legacy_v100").is_dir():
        pytest.skip("real traces not available")
    return load_trace(real_trace("resnet50_legacy_v100"))


def test_resnet50_forward_convs(resnet):
    ev = resnet.events
    conv = ev[ev["name"] == "aten::cudnn_convolution"]
    cost = cost_table(conv, tree=ev, flows=resnet.flows)
    assert len(conv) == 318 and cost["flops"].notna().all()  # 6 iterations x 53 convs
    # first layer: 7x7/2 conv, 3 -> 64 channels, padding 3: Ho = (224 + 2*3 - 7) // 2 + 1 = 112,
    # FLOPs = 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7 = 7,552,892,928
    first = conv["shapes"].astype(str).str.startswith("[[32,3,224,224],[64,3,7,7]")
    assert (cost.loc[first.to_numpy(), "flops"] == 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7).all() and first.sum() == 6
    per_step = cost["flops"].groupby(conv["step"].to_numpy()).sum()
    # ResNet-50 (torchvision, 224x224) is ~4.1 GMACs per image (torchvision's model table lists
    # 4.09 "GFLOPS", counted as multiply-adds; He et al. 2016 give 3.8e9 for the original v1 stride
    # placement). Conv layers only, here: 4,087,136,256 MACs per image, so one batch-32 forward
    # = 2 * 32 * 4,087,136,256 = 261,576,720,384 FLOPs, 0.3% under 2 * 32 * 4.1e9.
    assert len(per_step) == 6 and (per_step == 261_576_720_384).all()
    assert abs(per_step.iloc[0] / (2 * 32 * 4.1e9) - 1) < 0.02


def test_resnet50_unknown_share_drops(resnet):
    no_flows = dataclasses.replace(resnet, flows=resnet.flows[resnet.flows["kind"] != "fwdbwd"].reset_index(drop=True))

    def share(trace) -> tuple[float, pd.DataFrame]:
        u = analyze(trace, sections=("roofline",)).units
        return float(u.loc[u["bound"] == "unknown", "time_ns"].sum() / u["time_ns"].sum()), u

    before, u0 = share(no_flows)
    after, u = share(resnet)
    print(f"resnet50_legacy_v100 unknown share of unit time: {before:.4f} -> {after:.4f}")
    conv = u["name"] == "aten::cudnn_convolution"
    assert (
        conv.sum() == 318 and (u0.loc[conv, "bound"] == "unknown").all() and (u.loc[conv, "bound"] != "unknown").all()
    )
    assert np.isclose(before - after, u.loc[conv, "time_ns"].sum() / u["time_ns"].sum())
    # a floor never exceeds the measured time, except where cuDNN picks Winograd for 3x3 (stride-1)
    # convs: F(2x2,3x3) does 36/16 = 2.25x, F(4x4,3x3) 144/36 = 4x fewer multiplies than the
    # direct-convolution count (flop_counter's convention, used here); measured up to 1.65
    eff = u.loc[conv, "efficiency"]
    winograd = u.loc[conv, "shapes"].astype(str).str.contains(r"^\[\[[\d,]+\],\[\d+,\d+,3,3\]", regex=True)
    assert (eff[~winograd] <= 1).all() and (eff[winograd] <= 4).all() and winograd.any()
