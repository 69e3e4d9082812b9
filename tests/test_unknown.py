"""The unknown summary: which units have no floor, and why, on real traces."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from profiler import analyze, load_trace
from profiler.cli import app
from tests.conftest import real_trace


def _analysis(folder):
    return analyze(load_trace(real_trace(folder)), sections=("roofline",))


def test_moe_forward_is_costed_on_b200_and_the_rest_is_named():
    a = _analysis("b200_eager")
    u = a.units[a.units["device"] != "cpu"]
    # the share is the unknown-bound units' time over all device units' time, computed independently here
    assert a.unknown_share == pytest.approx(u.loc[u["bound"] == "unknown", "time_ns"].sum() / u["time_ns"].sum())
    # vllm::moe_forward (52% of device time) was unknown: the share was 0.561; now it is costed
    # (tests/test_cost_moe.py), and what remains is attention whose lengths are data (4.2%)
    assert a.unknown_share < 0.05
    assert "vllm::moe_forward" not in set(a.unknown["name"])
    assert a.unknown.iloc[0]["name"] == "vllm::unified_attention_with_output"


@pytest.mark.parametrize("folder", ["vllm_graphs_mi300x", "sglang_qwen3_decode_mi300x"])
def test_graph_replays_are_named_as_such(folder):
    a = _analysis(folder)
    assert a.unknown_share > 0.9
    assert (a.unknown["reason"].head(3) == "replayed from a CUDA/HIP graph; capture not in trace").all()


def test_text_and_json_say_so_above_a_fifth_only():
    r = CliRunner().invoke(app, ["analyze", str(real_trace("sglang_qwen3_decode_mi300x")), "--section", "roofline"])
    assert "of the unit time has no floor" in r.stdout.replace("\n", " ")
    r = CliRunner().invoke(app, ["analyze", str(real_trace("sglang_qwen3_prefill_mi300x")), "--section", "roofline"])
    assert "has no floor" not in r.stdout  # 4% unknown: no warning
    doc = json.loads(
        CliRunner().invoke(app, ["analyze", str(real_trace("b200_eager")), "--json", "--section", "roofline"]).stdout
    )
    assert 0 < doc["unknown"]["share"] < 0.2 and doc["unknown"]["top"][0]["name"] != "vllm::moe_forward"
