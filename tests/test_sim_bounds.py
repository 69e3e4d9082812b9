"""What bounds a Llama-2-7B layer on the datacenter preset, in the simulator (issue 13): decode
linears and decode attention memory bound, prefill linears compute bound, and the batch at
which decode linears turn compute bound at the spec's ridge point within one power of two.

One Llama-2-7B layer (dim 4096, 32 heads of 128, SwiGLU 11008, vocab 32000; meta weights:
compiled, not run) with its embedding and lm_head, bf16. The ridge point of the derived spec:
275.25 TFLOP/s / 1.2 TB/s = 229.4 FLOP/B. A decode linear of batch B (M = B rows, K x N
weights) does 2 B K N FLOP on (K N + B K + B N) x 2 bytes: about B FLOP/B, so the roofline turns
it compute bound near B = 229 (258 for 4096 x 4096 once its activations count). The simulator
gets there only because the weight-stationary arrays double-buffer their weights (the preset's
`stationary_buffers: 2`, the TPU MXU's): a fold of B < 128 rows then costs the 128 cycles of
the next block's load, not SCALE-Sim's B + 2 x 128 + 128 - 2 (which made every decode linear
fill bound, docs/accelerator.md)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from accelerator.compiler.pipeline import compile_model  # noqa: E402
from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.spec import hardware_spec  # noqa: E402
from accelerator.workloads.llama import LLAMA2_7B, TinyLlama  # noqa: E402

#: decode batches swept (powers of two and the steps between 128 and 512)
BATCHES = (1, 16, 128, 192, 256, 320, 512)


def _layer(hw, batch: int, tokens: int, pos: int, max_seq: int):
    """One Llama-2-7B layer run on `tokens` new tokens at positions pos.. of `batch` sequences."""
    cfg = replace(LLAMA2_7B, n_layers=1, batch=batch, max_seq=max_seq)
    with torch.device("meta"):
        model = TinyLlama(cfg).eval()
        xs = (torch.zeros(batch, tokens, dtype=torch.long), torch.arange(pos, pos + tokens))
    return simulate(compile_model(model, xs, hw, "bf16").program, hw)


@pytest.fixture(scope="module")
def hw():
    return load_accel("datacenter-npu")


def test_prefill_linears_are_compute_bound(hw):
    """Prefill of 1024 tokens: every linear has M = 1024 rows, 4x the ridge: compute bound."""
    run = _layer(hw, 1, 1024, 0, 1024)
    linears = [s for s in run.kernels if s.family == "gemm"]
    assert len(linears) == 8  # q, k, v, o, gate, up, down, lm_head
    assert {s.time.limiter for s in linears} == {"compute"}, [(s.name, s.time.limiter) for s in linears]


def test_decode_is_memory_bound_until_the_ridge_point(hw):
    """Decode (one token per sequence at position 100 of a 512-row KV cache), batch swept: the
    linears and the attention are memory bound at small batches; each linear turns compute bound
    at a batch B* within one power of two of the ridge point (ridge / 2 <= B* <= 2 x ridge)."""
    spec = hardware_spec(hw)
    ridge = spec.peak("bf16") / spec.bandwidth("hbm")
    assert ridge == pytest.approx(8 * 16384 * 2 * 1.05e9 / 1.2e12)  # 229.4 FLOP/B
    turns: dict[str, int] = {}
    table = []
    for batch in BATCHES:
        run = _layer(hw, batch, 1, 100, 512)
        linears = [s for s in run.kernels if s.family == "gemm"]
        (attention,) = [s for s in run.kernels if s.family == "attention"]
        assert attention.time.limiter == "memory:hbm", (batch, attention.time)
        table.append((batch, {s.name: s.time.limiter for s in linears}))
        for s in linears:
            if s.time.limiter == "compute":
                turns.setdefault(s.name, batch)
            elif batch <= 128:
                assert s.time.limiter == "memory:hbm", (batch, s.name, s.time)
    print(f"\nridge {ridge:.1f} FLOP/B; decode linears turn compute bound at batch {turns}")
    for batch, limiters in table:
        print(f"  batch {batch:>4}: {limiters}")
    assert len(turns) == 8, turns  # every linear turns within the sweep
    for name, batch in turns.items():
        assert abs(math.log2(batch / ridge)) <= 1, (name, batch, ridge)
