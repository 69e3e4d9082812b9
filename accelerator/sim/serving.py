"""LLM serving on the simulated accelerator (`perf simulate MODEL --batch B --prompt P --decode N`):
one prefill step of B x P tokens, then N decode steps of B tokens each, over a KV cache that
the prefill fills with P positions per sequence and each decode step grows by one.

    prefill:        the decoder compiled for B x P tokens with a cache of P positions: the
                    attention reads the P keys it writes (B x P key tokens)
    decode step i:  (i = 0 .. N-1) one token per sequence at position P + i, attending the
                    P + i + 1 keys the cache then holds (B x (P + i + 1) key tokens): the decode
                    program at that cache length (accelerator/sim/cache_length.py: compiled at
                    P + N and P + N + 1 positions, every size linear in the length)
    KV cache:       allocated for P + N positions per sequence, the length a server reserves
                    for the request (the cache-write ops of the trace carry that shape)

Each step's kernels are timed by `reuse.simulate_reusing`, which times every distinct kernel
shape once for the whole run. `serving_trace.py` writes the steps as one trace whose step
annotations the LLM analysis (analysis/llm.py) reads as it reads vLLM's."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelerator.hardware import AccelSpec
from accelerator.sim.cache_length import CacheLengthProgram
from accelerator.sim.reuse import KernelMemo, simulate_reusing
from accelerator.sim.run import SimRun


@dataclass(frozen=True)
class ServingStep:
    """One step: `phase` prefill or decode, `batch` sequences, `tokens` query tokens run,
    `kv_tokens` key tokens attended (all sequences), `run` its kernels from time 0: chip 0's
    only (with tensor parallelism every chip runs the same kernels at the same times;
    `run.chips` says how many)."""

    phase: str
    batch: int
    tokens: int
    kv_tokens: int
    run: SimRun


@dataclass(frozen=True)
class KVCache:
    """Per chip: `layers` (cache writes per step: one K and one V each), `kv_heads`, `head_dim`,
    `slots` (positions per sequence), `batch`, `dtype` (the accelerator's name: bf16, fp32...)."""

    layers: int
    kv_heads: int
    head_dim: int
    slots: int
    batch: int
    dtype: str


@dataclass(frozen=True)
class ServingPrograms:
    """The compiled programs of a serving run (`compile_serving`)."""

    model: str
    batch: int
    prompt: int
    decode: int
    chips: int
    precision: str
    prefill: Any
    decoder: CacheLengthProgram | None  # None when decode = 0
    compile_s: float


@dataclass(frozen=True)
class ServingRun:
    """Every step in run order; `kv` the cache as the trace's cache-write ops describe it;
    `simulate_s` wall seconds spent timing, `kernels` kernels simulated (chip 0's), `timed` the
    distinct kernel shapes actually timed (the rest reused)."""

    programs: ServingPrograms
    accel: AccelSpec
    steps: tuple[ServingStep, ...]
    kv: KVCache | None
    simulate_s: float
    kernels: int
    timed: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def serving_workloads() -> list[str]:
    """The workloads `compile_serving` knows (decoders with a KV cache)."""
    from accelerator.workloads.llama import SERVING_CONFIGS

    return sorted(SERVING_CONFIGS)


def compile_serving(
    model: str, accel: AccelSpec, batch: int, prompt: int, decode: int, precision: str = "fp32", chips: int = 1
) -> ServingPrograms:
    """Compile the prefill program and the decode program at two cache lengths (module docstring).
    ValueError for a model that is not a serving workload or sizes below 1."""
    import torch

    from accelerator.compiler.pipeline import compile_model
    from accelerator.workloads.llama import serving_model

    if model not in serving_workloads():
        raise ValueError(
            f"{model}: --prompt/--decode serve a decoder with a KV cache ({', '.join(serving_workloads())})"
        )
    for flag, value, least in (("--batch", batch, 1), ("--prompt", prompt, 1), ("--decode", decode, 0)):
        if value < least:
            raise ValueError(f"{flag} {value}: expected at least {least}")
    t0 = time.perf_counter()
    device = "meta"  # shapes only (workloads.llama.serving_model)
    tokens = torch.zeros(batch, prompt, dtype=torch.long, device=device)
    pre = compile_model(
        serving_model(model, batch, prompt), (tokens, torch.arange(prompt, device=device)), accel, precision,
        chips=chips,
    ).program  # fmt: skip
    decoder = None
    if decode:
        m = prompt + decode
        one = torch.zeros(batch, 1, dtype=torch.long, device=device)
        at = [
            compile_model(
                serving_model(model, batch, length), (one, torch.tensor([prompt], device=device)), accel, precision,
                chips=chips,
            ).program
            for length in (m, m + 1)
        ]  # fmt: skip
        decoder = CacheLengthProgram(at[0], at[1], m)
    return ServingPrograms(model, batch, prompt, decode, chips, precision, pre, decoder, time.perf_counter() - t0)


def simulate_serving(
    programs: ServingPrograms, accel: AccelSpec, progress: Callable[[int, int], None] | None = None
) -> ServingRun:
    """Time the prefill step and every decode step (module docstring); `progress(done, total)`
    after each step."""
    b, p, n = programs.batch, programs.prompt, programs.decode
    memo = KernelMemo()
    t0 = time.perf_counter()
    steps = [ServingStep("prefill", b, b * p, b * p, simulate_reusing(programs.prefill, accel, memo, all_chips=False))]
    if progress:
        progress(1, n + 1)
    for i in range(n):
        length = p + i + 1  # the prompt, the i tokens decoded before, and this step's own
        run = simulate_reusing(programs.decoder.at(length), accel, memo, all_chips=False)
        steps.append(ServingStep("decode", b, b, b * length, run))
        if progress:
            progress(i + 2, n + 1)
    elapsed = time.perf_counter() - t0
    kernels = sum(len(s.run.kernels) for s in steps)
    kv, notes = _kv_cache(programs)
    return ServingRun(programs, accel, tuple(steps), kv, elapsed, kernels, memo.misses, notes)


def _kv_cache(programs: ServingPrograms) -> tuple[KVCache | None, tuple[str, ...]]:
    """The cache from the decode program at P + N positions (its allocation): the K and V
    index_copy_ ops' cache operand (batch, kv_heads, slots, head_dim), per chip."""
    from accelerator.sim.run import DTYPES

    program = programs.decoder.base if programs.decoder is not None else programs.prefill
    types = program.types()
    caches = []
    for op in program.ops:
        if op.target == "aten.index_copy_.default" and op.args and hasattr(op.args[0], "name"):
            t = types.get(op.args[0].name)
            if t is not None and len(t.hint) == 4:
                caches.append(t)
    if not caches or len(caches) % 2:
        return None, ("no K/V cache writes (index_copy_ of a 4-D cache) in the program: KV-cache bytes not derived",)
    bsz, heads, slots, dim = caches[0].hint
    return KVCache(len(caches) // 2, heads, dim, slots, bsz, DTYPES.get(caches[0].dtype, caches[0].dtype)), ()
