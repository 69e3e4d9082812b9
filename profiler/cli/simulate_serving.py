"""`perf simulate MODEL --accel A [--batch B] --prompt P --decode N [--chips C] [-o TRACE] [--json]
[--progress]`: LLM serving on the simulated accelerator (accelerator/sim/serving.py). Compiles
the prefill and the decode programs, times one prefill step and N decode steps, writes them as
one trace with a step annotation per step, and reads TTFT, TPOT, tokens/s and the KV cache out
of that trace with the same analysis `perf analyze` runs on a real serving trace
(analysis/llm.py, analysis/kv_cache.py):

    ttft_ns        = the prefill step's duration (it computes the first output token of every
                     sequence; the first decode step is not part of it)
    tpot_ns        = the mean decode step duration (one output token per sequence per step)
    tokens_per_s   = decode tokens / decode time (B x N / sum of decode step durations)
    kv_cache_bytes = 2 x layers x kv_heads x head_dim x (B x (P + N)) x bytes/elem, per chip
                     (kv_heads: the chip's share under tensor parallelism)
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any


def _number(value: Any) -> float | None:
    """A table cell as a JSON number; None for NaN or missing."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def serving_figures(result: Any, srun: Any) -> dict[str, Any]:
    """The LLM figures the analysis computed from the simulated trace (module docstring)."""
    summary = result.llm_summary
    by_phase = {r["phase"]: r for r in summary.to_dict("records")} if len(summary) else {}
    pre, dec = by_phase.get("prefill", {}), by_phase.get("decode", {})
    kv = result.kv_cache
    kv_bytes = _number(kv["kv_cache_bytes"].iloc[0]) if len(kv) else None
    chips = srun.programs.chips
    steps = result.llm_phases
    return {
        "ttft_ns": _number(pre.get("ttft_ns")),
        "tpot_ns": _number(dec.get("tpot_ns")),
        "tokens_per_s": _number(dec.get("tokens_per_s")),
        "prefill_tokens_per_s": _number(pre.get("tokens_per_s")),
        "kv_cache_bytes": kv_bytes,
        "kv_cache_bytes_all_chips": kv_bytes * chips if kv_bytes is not None else None,
        "kv_read_bytes_per_decode_step": _number(dec.get("kv_read_bytes")),
        "kv_floor_efficiency": _number(dec.get("kv_floor_efficiency")),
        "steps": [
            {
                "phase": r["phase"],
                "tokens": _number(r["tokens"]),
                "kv_tokens": _number(r["kv_tokens"]),
                "start_ns": int(r["start_ns"]),
                "duration_ns": int(r["duration_ns"]),
            }
            for r in steps.to_dict("records")
        ],
        "ttft_definition": "the prefill step's duration (its kernels on the simulated clock); no decode step",
    }


def simulate_serving(
    model: str,
    accel: str,
    precision: str,
    chips: int,
    batch: int,
    prompt: int,
    decode: int,
    out: Path | None,
    force: bool,
    json: bool,
    progress: bool | None,
    tiles: bool = False,
) -> None:
    """Compile, simulate every step, write the trace, analyse it, print the figures (module docstring)."""
    import tempfile

    import orjson

    from profiler import api
    from profiler.cli.common import fail, one_line_errors, require_torch
    from profiler.cli.progress import Progress

    require_torch("simulate")
    bar = Progress(progress)
    with one_line_errors(Path(model)):
        hw = api.load_accel(accel)
        bar.stage(f"compiling {model}: prefill, and decode at two cache lengths")
        try:
            programs = api.accel_compile_serving(model, hw, batch, prompt, decode, precision, chips)
        except ValueError as e:
            bar.close()
            fail(str(e))
        bar.stage(f"simulating {decode + 1} steps")
        srun = api.accel_simulate_serving(programs, hw, bar.update)
        bar.stage("writing the trace")
        t0 = time.perf_counter()
        doc = api.accel_serving_document(srun, tiles)
        data = orjson.dumps(doc)  # what the analysis reads when -o is not a Chrome JSON file
        with tempfile.TemporaryDirectory() as tmp:
            if out is not None:
                from profiler.cli.simulate import _write_trace

                _write_trace(out, doc, force)
            del doc
            raw = out if out is not None and out.name.endswith((".json", ".json.gz")) else Path(tmp) / "serving.json"
            if raw != out:
                raw.write_bytes(data)
            del data
            write_s = time.perf_counter() - t0
            bar.stage("analysing the simulated trace (perf analyze's LLM sections)")
            t0 = time.perf_counter()
            result = api.analyze(api.load_trace(raw), sections=("summary", "memory", "llm"))
            analyze_s = time.perf_counter() - t0
        bar.close()
    total_ns = int(sum(s["duration_ns"] for s in serving_figures(result, srun)["steps"]))
    report = {
        "model": model,
        "accel": hw.name,
        "chips": chips,
        "precision": programs.precision,
        "batch": batch,
        "prompt": prompt,
        "decode": decode,
        **serving_figures(result, srun),
        "total_ns": total_ns,
        "kernels": srun.kernels,
        "kernel_shapes_timed": srun.timed,
        "compile_s": programs.compile_s,
        "simulate_s": srun.simulate_s,
        "kernels_per_s": srun.kernels / max(srun.simulate_s, 1e-9),
        "trace_write_s": write_s,
        "analyze_s": analyze_s,
        "trace": str(out) if out is not None else None,
        "notes": list(srun.notes),
    }
    if json:
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        return
    _print_text(report, result)


def _print_text(r: dict, result: Any) -> None:
    from profiler.model.numfmt import fmt_bytes, fmt_ns
    from profiler.render import console
    from profiler.render.text import render

    def ns(v: float | None) -> str:
        return fmt_ns(v) if v is not None else "n/a"

    print(
        f"{r['model']} serving on {r['accel']} x {r['chips']} chip(s), {r['precision']}: batch {r['batch']}, "
        f"prompt {r['prompt']}, {r['decode']} decode steps; {r['kernels']:,} kernels "
        f"(compile {r['compile_s']:.1f} s, simulation {r['simulate_s']:.2f} s = {r['kernels_per_s']:,.0f} kernels/s, "
        f"{r['kernel_shapes_timed']:,} kernel shapes timed)"
    )
    tps = f"{r['tokens_per_s']:,.1f}" if r["tokens_per_s"] is not None else "n/a"
    kv = fmt_bytes(r["kv_cache_bytes"]) if r["kv_cache_bytes"] is not None else "n/a"
    print(f"    TTFT {ns(r['ttft_ns'])} (the prefill step)   TPOT {ns(r['tpot_ns'])}   decode {tps} tokens/s")
    print(f"    KV cache {kv} per chip   simulated total {ns(r['total_ns'])}")
    if r["trace"]:
        print(f"trace: {r['trace']}")
    print("analysis of the simulated trace (perf analyze --section summary,memory,llm):")
    render(result, console(), sections=("summary", "memory", "llm"))
