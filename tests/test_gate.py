"""`perf gate`: the statistics on traces written with known, seeded durations (deterministic), and
one end-to-end check on real profiled runs where the change (8x the FLOPs) dwarfs any noise."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from typer.testing import CliRunner

from profiler.cli import app
from tests.conftest import write_trace, x


def synthetic(path, mm_us: float, noise: float, seed: int, steps: int = 12) -> str:
    """A CPU trace of `steps` ProfilerSteps, each one aten::mm of about `mm_us` µs (relative noise
    `noise`, seeded) and four aten::relu of 10 µs."""
    rng = np.random.default_rng(seed)
    events, t = [], 0.0
    for s in range(steps):
        mm = mm_us * (1 + noise * rng.standard_normal())
        step_len = mm + 4 * 10 + 5
        events.append(x(f"ProfilerStep#{s}", "user_annotation", t, step_len))
        events.append(x("aten::mm", "cpu_op", t + 1, mm))
        for k in range(4):
            events.append(x("aten::relu", "cpu_op", t + 2 + mm + 10 * k, 9.5))
        t += step_len + 1
    return str(write_trace(path, events))


def gate(base, new, threshold="25"):
    r = CliRunner().invoke(app, ["gate", "--base", base, "--new", new, "--max-regression", threshold, "--json"])
    return r.exit_code, json.loads(r.stdout)


def test_same_distribution_passes(tmp_path):
    # two draws of one distribution (mm 200 µs ± 20%): no regression, whatever the draw
    base = synthetic(tmp_path / "a.json", 200, 0.2, seed=1)
    new = synthetic(tmp_path / "b.json", 200, 0.2, seed=2)
    code, doc = gate(base, new)
    assert code == 0 and not doc["regression"]


def test_shift_beyond_threshold_and_noise_fails(tmp_path):
    # mm 200 -> 300 µs (+50%) with 2% noise: the ratio is ~0.5 and its interval far above 0
    base = synthetic(tmp_path / "a.json", 200, 0.02, seed=1)
    new = synthetic(tmp_path / "b.json", 300, 0.02, seed=2)
    code, doc = gate(base, new)
    mm = next(v for v in doc["verdicts"] if v["name"] == "aten::mm")
    assert code == 1 and mm["regression"] and mm["samples"] == [12, 12]
    assert mm["ratio"] == pytest.approx(0.5, abs=0.03) and mm["low"] > 0.4
    relu = next(v for v in doc["verdicts"] if v["name"] == "aten::relu")
    assert not relu["regression"] and relu["ratio"] == pytest.approx(0.0, abs=1e-9)


def test_shift_within_noise_passes(tmp_path):
    # +30% mean shift but 60% noise on 12 samples: the interval reaches below 0, so no verdict
    base = synthetic(tmp_path / "a.json", 200, 0.6, seed=3)
    new = synthetic(tmp_path / "b.json", 260, 0.6, seed=4)
    code, doc = gate(base, new)
    mm = next(v for v in doc["verdicts"] if v["name"] == "aten::mm")
    assert mm["low"] <= 0 and not mm["regression"]


def test_shift_below_threshold_passes(tmp_path):
    # +10% with tiny noise is real but under the 25% threshold
    base = synthetic(tmp_path / "a.json", 200, 0.01, seed=1)
    new = synthetic(tmp_path / "b.json", 220, 0.01, seed=2)
    code, doc = gate(base, new)
    mm = next(v for v in doc["verdicts"] if v["name"] == "aten::mm")
    assert code == 0 and mm["low"] > 0 and not mm["regression"]


def record(path, n_big: int) -> str:
    torch.manual_seed(0)
    a, b = torch.randn(n_big, n_big), torch.randn(n_big, n_big)
    x_, w = torch.randn(64, 256), torch.randn(256, 256)

    def step():
        torch.mm(a, b)  # the matmul the test makes bigger
        for _ in range(4):
            torch.relu(torch.mm(x_, w))

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=12),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(13):
            step()
            prof.step()
    return str(path)


@pytest.mark.serial
def test_real_bigger_matmul_fails(tmp_path):
    # aten::mm per step: the test's matmul plus 4 of 64x256x256 (16.8M multiply-adds). At 128^3
    # the total is 18.9M, at 512^3 151M: 8x the work, far past 25% on any machine state
    base, big = record(tmp_path / "base.json", 128), record(tmp_path / "big.json", 512)
    code, doc = gate(base, big)
    mm = next(v for v in doc["verdicts"] if v["name"] == "aten::mm")
    assert code == 1 and mm["regression"] and mm["samples"] == [12, 12] and mm["ratio"] > 1
