"""`perf analyze` sections of issue 4 through the CLI: critical path, memory, LLM and modules."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from profiler.cli import app
from tests.conftest import real_trace


def analyze_json(folder: str, *sections: str) -> dict:
    args = ["analyze", str(real_trace(folder)), "--json"] + [x for s in sections for x in ("--section", s)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("folder", ["b200_eager", "ddp_allreduce_v100", "nccl_meta_a100"])
def test_critical_path_within_wall_and_split_exactly(folder):
    doc = analyze_json(folder, "critical_path")
    assert doc["schema_version"] == 8 and doc["critical_path"]
    for cp in doc["critical_path"]:
        assert 0 < cp["length_ns"] <= cp["wall_ns"]
        assert sum(cp["by_class"].values()) == cp["length_ns"]  # every ns of the path in one class
        assert cp["verdict"] in ("host-bound", "device-bound", "waiting-bound", "cpu-only")
    assert doc["ops"] == [] and doc["llm"]["phases"] == []  # sections not asked for stay empty


def test_llm_and_kv_cache_on_sglang_prefill():
    doc = analyze_json("sglang_qwen3_prefill_mi300x", "llm", "memory")
    (prefill,) = doc["llm"]["summary"]
    # the step annotation says 15 requests of 1024 tokens: 15,360 tokens in one prefill step
    assert prefill["phase"] == "prefill" and prefill["tokens"] == 15360
    assert prefill["tokens_per_s"] == pytest.approx(15360 / (prefill["time_ns"] / 1e9))
    (kv,) = doc["memory"]["kv_cache"]
    assert kv["layers"] == 36 and kv["bytes_per_token"] > 0  # a count, never redacted as a "token"
    assert 0 < kv["share"] < 1


def test_modules_tree_on_vllm_graphs():
    doc = analyze_json("vllm_graphs_mi300x", "modules")
    mods = doc["modules"]
    assert mods and all(m["total_ns"] >= m["self_ns"] >= 0 for m in mods)
    paths = {m["path"] for m in mods}
    assert all(m["parent"] == "" or m["parent"] in paths for m in mods)


def test_text_sections_print_only_what_was_asked():
    r = CliRunner().invoke(app, ["analyze", str(real_trace("sglang_qwen3_decode_mi300x")), "--section", "llm"])
    assert r.exit_code == 0
    assert "LLM serving" in r.stdout and "decode" in r.stdout
    assert "Top ops" not in r.stdout and "Critical path" not in r.stdout
