"""A simulated serving run (`serving.ServingRun`) as one Chrome/Kineto trace: the steps' kernels
back to back on every chip (accelerator/sim/trace.py's layout), and on a host track 'serving
loop' what a serving engine's profile records around them, so the LLM analysis (analysis/llm.py,
analysis/kv_cache.py) computes TTFT, TPOT, tokens/s and the KV cache from it as from a real trace:

- one step annotation ('user_annotation') per step, from its first kernel's start to its
  latest kernel's end on the simulated clock (collectives overlap the cores' kernels, so a
  step's time is that span, not the sum of its kernels), named as vLLM's ROCm builds name
  theirs (analysis/llm_steps.py parses it):
      prefill: execute_{B*P}_context_{B}(sq{B*P}sk{B*P}sqsq{B*P^2}sqsk{B*P^2})_generation_0(sq0sk0sqsq0sqsk0)
      decode at cache length L: execute_{B}_context_0(sq0sk0sqsq0sqsk0)_generation_{B}(sq{B}sk{B*L}sqsq{B}sqsk{B*L})
  (N tokens scheduled; C prefill requests with a query and b key tokens; G decode requests
  with c query and d key tokens; sqsq / sqsk the sums of q^2 and q*k over the requests);
- kernel names that stand for calls of different costs get their phase (and cache length):
  `distinct_names`;
- one cache-write op 'npu::kv_cache_write' per layer per step (zero duration, at the start of
  the kernel writing that layer's K), with the inputs a serving engine's cache write records:
  key and value (T tokens, kv_heads, head_dim) and key_cache and value_cache (batch, kv_heads,
  slots, head_dim), in the cache's dtype; from them analysis/kv_cache.py derives
      kv_cache_bytes = 2 x layers x kv_heads x head_dim x (batch x slots) x bytes/elem.
With tensor parallelism (--chips C) the trace holds chip 0's kernels: every chip runs the same
ones at the same times, so C copies would say nothing more (deviceProperties lists every chip).
The host track has no runtime calls: the simulator has no host runtime, and the document says
so (`traceSource: simulator`), which the reader and the LLM analysis read (device work of a
step = the work that runs inside it)."""

from __future__ import annotations

from typing import Any

from accelerator.sim.run import SimRun
from accelerator.sim.serving import ServingRun
from accelerator.sim.trace import paused_gc, timeline_ns, trace_document

#: the cache's dtype (accelerator names) as Kineto's 'Input type' spells it
KINETO_INPUT_TYPES = {"fp32": "float", "bf16": "c10::BFloat16", "fp16": "c10::Half", "fp8": "c10::Float8_e4m3fn"}
KV_WRITE_OP = "npu::kv_cache_write"
CACHE_WRITE_TARGET = "aten.index_copy_.default"


def combined_run(srun: ServingRun) -> tuple[SimRun, list[tuple[int, int]]]:
    """All steps as one SimRun for `trace.trace_document` and each step's [first, last) index
    among the kernels. The trace places a kernel at the rounded end of the kernel it started
    after (`SimKernel.after`, a position in the run): a step's positions move by the kernels
    before it, and its first kernels (after -1) start after the previous step's last to end, the
    step boundary (each kernel's `start_s` stays relative to its step: it only places its DMA
    transfers inside it)."""
    from accelerator.sim.reuse import copy_with

    bounds, kernels, at = [], [], 0
    by_limiter: dict[str, float] = {}
    last = -1  # position of the previous step's kernel that ends last
    for step in srun.steps:
        ks = step.run.kernels
        kernels += [
            copy_with(k, after=at + k.after if k.after >= 0 else last, deps=tuple(at + d for d in k.deps)) for k in ks
        ]
        if ks:
            last = at + max(range(len(ks)), key=lambda i: ks[i].end_s)
        bounds.append((at, at + len(ks)))
        at += len(ks)
        for lim, s in step.run.by_limiter.items():
            by_limiter[lim] = by_limiter.get(lim, 0.0) + s
    total = sum(step.run.total_s for step in srun.steps)
    chips = max(1, srun.programs.chips)
    return SimRun(srun.accel, f"{srun.programs.model} serving", chips, tuple(kernels), total, by_limiter), bounds


def distinct_names(run: SimRun, srun: ServingRun, bounds: list[tuple[int, int]]) -> SimRun:
    """`run` with one name per kernel cost: the analysis costs a simulated kernel by its name
    (the fusion rows of trace.py), and a name whose calls differ (the prefill's `mm` runs 2,048
    tokens, the decode's 1; the decode attention reads more keys each step) would be ambiguous
    there, so uncosted. Such a name gets its phase, and where decode steps differ among
    themselves the cache length: 'mm [prefill]', 'mm [decode]',
    'scaled_dot_product_attention [decode L=2049]'. Names of one cost stay as they are."""
    from accelerator.sim.reuse import copy_with

    costs: dict[str, dict[str, set]] = {}
    for step, (first, last) in zip(srun.steps, bounds, strict=True):
        for k in run.kernels[first:last]:
            costs.setdefault(k.name, {}).setdefault(step.phase, set()).add((k.flops, k.hbm_read, k.hbm_written))
    renamed = {n for n, by in costs.items() if len(set().union(*by.values())) > 1}
    if not renamed:
        return run
    kernels = list(run.kernels)
    for step, (first, last) in zip(srun.steps, bounds, strict=True):
        length = step.kv_tokens // step.batch
        for i in range(first, last):
            name = kernels[i].name
            if name in renamed:
                by_length = len(costs[name][step.phase]) > 1
                tag = f"{step.phase} L={length}" if by_length else step.phase
                kernels[i] = copy_with(kernels[i], name=f"{name} [{tag}]")
    return SimRun(run.accel, run.program_name, run.chips, tuple(kernels), run.total_s, run.by_limiter)


def step_label(phase: str, batch: int, tokens: int, kv_tokens: int) -> str:
    """The step annotation (module docstring): each sequence runs tokens/batch query tokens over
    kv_tokens/batch keys."""
    q, k = tokens // batch, kv_tokens // batch
    sums = f"sq{tokens}sk{kv_tokens}sqsq{batch * q * q}sqsk{batch * q * k}"
    none = "sq0sk0sqsq0sqsk0"
    if phase == "prefill":
        return f"execute_{tokens}_context_{batch}({sums})_generation_0({none})"
    return f"execute_{tokens}_context_0({none})_generation_{batch}({sums})"


def serving_document(srun: ServingRun, tiles: bool = False) -> dict[str, Any]:
    """The whole trace document (module docstring); write it with orjson. `tiles`: per-core tile
    activity (trace.py)."""
    with paused_gc():  # ~10^6 acyclic objects: collections among them free nothing
        return _serving_document(srun, tiles)


def _serving_document(srun: ServingRun, tiles: bool) -> dict[str, Any]:
    run, bounds = combined_run(srun)
    run = distinct_names(run, srun, bounds)
    doc = trace_document(run, tiles)
    fusion, seen = [], set()
    for row in doc["perfCompile"]["tables"]["fusion"]:  # one row per kernel name (names now fix the cost)
        if row["runtime_name"] not in seen:
            seen.add(row["runtime_name"])
            fusion.append(row)
    doc["perfCompile"]["tables"]["fusion"] = fusion
    times = timeline_ns(run)
    host = run.chips  # the host's pid: after the chips'
    events = doc["traceEvents"]
    events.append({"ph": "M", "name": "process_name", "pid": host, "args": {"name": "serving loop (simulated)"}})
    events.append({"ph": "M", "name": "thread_name", "pid": host, "tid": 0, "args": {"name": "steps"}})
    for step, (first, last) in zip(srun.steps, bounds, strict=True):
        if first == last:
            continue
        # a step ends when its latest kernel does: with --chips a collective on the link may end
        # after the cores' last kernel (the step's time is that latest end, not a sum of kernels)
        start, end = times[first][0], max(a + d for a, d in times[first:last])
        label = step_label(step.phase, step.batch, step.tokens, step.kv_tokens)
        events.append(_x("user_annotation", label, host, start, end - start, {}))
        if srun.kv is not None:
            events += _kv_writes(srun, step, run.kernels[first:last], times[first:last], host)
    doc["perfSimulate"]["serving"] = serving_summary(srun)
    return doc


def _kv_writes(srun: ServingRun, step, kernels: list, times: list, host: int) -> list[dict[str, Any]]:
    """One cache-write op per layer: at the kernel writing its K (every other index_copy_)."""
    kv = srun.kv
    key = [step.tokens, kv.kv_heads, kv.head_dim]
    cache = [kv.batch, kv.kv_heads, kv.slots, kv.head_dim]
    dtype = KINETO_INPUT_TYPES.get(kv.dtype, kv.dtype)
    args = {"Input Dims": [key, key, cache, cache], "Input type": [dtype] * 4}
    out, writes = [], 0
    for k, (start, _) in zip(kernels, times, strict=True):
        for target in k.targets:
            if target == CACHE_WRITE_TARGET:
                if writes % 2 == 0:
                    out.append(_x("cpu_op", KV_WRITE_OP, host, start, 0, args))
                writes += 1
    return out


def _x(cat: str, name: str, pid: int, start_ns: int, dur_ns: int, args: dict) -> dict[str, Any]:
    return {
        "ph": "X", "cat": cat, "name": name, "pid": pid, "tid": 0, "ts": round(start_ns / 1000, 3),
        "dur": round(dur_ns / 1000, 3), "args": args,
    }  # fmt: skip


def serving_summary(srun: ServingRun) -> dict[str, Any]:
    """What the simulator knows of the run (the analysis computes the LLM metrics from the trace)."""
    p = srun.programs
    kv = srun.kv
    return {
        "model": p.model,
        "batch": p.batch,
        "prompt": p.prompt,
        "decode": p.decode,
        "chips": p.chips,
        "precision": p.precision,
        "steps": len(srun.steps),
        "kernels_simulated": srun.kernels,
        "kernel_shapes_timed": srun.timed,
        "kv_cache": None if kv is None else {f: getattr(kv, f) for f in kv.__dataclass_fields__},
        "notes": list(srun.notes),
    }
