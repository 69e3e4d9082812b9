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


def test_moe_forward_is_named_with_its_reason_on_b200():
    a = _analysis("b200_eager")
    u = a.units[a.units["device"] != "cpu"]
    # the share is the unknown-bound units' time over all device units' time, computed independently here
    assert a.unknown_share == pytest.approx(u.loc[u["bound"] == "unknown", "time_ns"].sum() / u["time_ns"].sum())
    assert a.unknown_share > 0.5
    top = a.unknown.iloc[0]
    assert top["name"] == "vllm::moe_forward" and top["units"] == 36 and top["share"] > 0.5
    assert "expert weights" in top["reason"]


@pytest.mark.parametrize("folder", ["vllm_graphs_mi300x", "sglang_qwen3_decode_mi300x"])
def test_graph_replays_are_named_as_such(folder):
    a = _analysis(folder)
    assert a.unknown_share > 0.9
    assert a.unknown["reason"].head(3).str.startswith("replayed from a CUDA/HIP graph").all()


def test_text_and_json_say_so_above_a_fifth_only():
    r = CliRunner().invoke(app, ["analyze", str(real_trace("sglang_qwen3_decode_mi300x")), "--section", "roofline"])
    assert "of the unit time has no floor" in r.stdout.replace("\n", " ")
    r = CliRunner().invoke(app, ["analyze", str(real_trace("sglang_qwen3_prefill_mi300x")), "--section", "roofline"])
    assert "has no floor" not in r.stdout  # 4% unknown: no warning
    doc = json.loads(
        CliRunner().invoke(app, ["analyze", str(real_trace("b200_eager")), "--json", "--section", "roofline"]).stdout
    )
    assert doc["unknown"]["share"] > 0.5 and doc["unknown"]["top"][0]["name"] == "vllm::moe_forward"
