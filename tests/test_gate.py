"""`perf gate`: two runs of the same script pass; a run with one matmul made bigger fails.
Timing-sensitive (it compares real runs), so marked serial."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from typer.testing import CliRunner

from profiler.cli import app

pytestmark = pytest.mark.serial


def record(path, n_big: int) -> str:
    torch.manual_seed(0)
    a, b = torch.randn(n_big, n_big), torch.randn(n_big, n_big)
    x, w = torch.randn(64, 256), torch.randn(256, 256)

    def step():
        torch.mm(a, b)  # the matmul the test makes bigger
        for _ in range(4):
            torch.relu(torch.mm(x, w))

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=12),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(13):
            step()
            prof.step()
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    return {"base": record(d / "base.json", 256), "same": record(d / "same.json", 256), "bigger": record(d / "big.json", 512)}


def gate(base, new):
    r = CliRunner().invoke(app, ["gate", "--base", base, "--new", new, "--max-regression", "25", "--json"])
    return r.exit_code, json.loads(r.stdout)


def test_same_script_passes(runs):
    code, doc = gate(runs["base"], runs["same"])
    assert code == 0 and not doc["regression"], [v for v in doc["verdicts"] if v["regression"]]


def test_bigger_matmul_fails(runs):
    code, doc = gate(runs["base"], runs["bigger"])
    assert code == 1 and doc["regression"]
    flagged = {v["name"] for v in doc["verdicts"] if v["regression"]}
    # 512^3 is 8x the FLOPs of 256^3: the mm op and the total both regress
    assert "aten::mm" in flagged and "(total)" in flagged
    mm = next(v for v in doc["verdicts"] if v["name"] == "aten::mm")
    assert mm["samples"] == [12, 12] and mm["low"] > 0.25
