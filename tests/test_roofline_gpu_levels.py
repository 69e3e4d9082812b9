"""GPU cache levels in the roofline: a level a preset gains (L2, LDS on MI300X) may raise a
GEMM's memory floor, but moves no op's bound: ops stay floored by HBM unless the evidence (an
op faster than its floor) says otherwise."""

from __future__ import annotations

import dataclasses

import numpy as np
import yaml

from profiler.api import analyze, load_trace
from profiler.model.hardware import load_spec
from tests.conftest import real_trace


def test_mi300x_l2_and_lds_move_no_bound_on_a_real_prefill(tmp_path):
    spec = load_spec("mi300x")
    assert [m.name for m in spec.memory] == ["hbm", "infinity_cache", "l2", "lds"]
    before = tmp_path / "mi300x.yaml"  # the preset as it was: HBM and the Infinity Cache only
    before.write_text(yaml.safe_dump(dataclasses.replace(spec, memory=spec.memory[:2]).to_dict()))
    trace = load_trace(real_trace("sglang_qwen3_prefill_mi300x"))
    now, was = analyze(trace, top=None).units, analyze(trace, hardware=str(before), top=None).units
    assert len(now) == len(was) > 500
    assert (now["bound"].to_numpy() == was["bound"].to_numpy()).all()
    assert (now["above_ceiling"].to_numpy() == was["above_ceiling"].to_numpy()).all()
    # the memory floor only rises (a level adds a constraint), and only for GEMMs: streaming ops
    # carry their compulsory bytes at every level, and every inner level is faster than HBM
    tn, tw = now["t_memory_ns"].to_numpy(), was["t_memory_ns"].to_numpy()
    ok = ~np.isnan(tw)
    assert (tn[ok] >= tw[ok] * (1 - 1e-12)).all()
    moved = ok & (tn > tw * (1 + 1e-9))
    assert moved.any() and set(now.loc[moved, "family"]) == {"gemm"}
    assert set(now.loc[moved, "bound"]) == {"compute"}  # large GEMMs: their L2 floor stays under the compute floor
