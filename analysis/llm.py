"""LLM serving: prefill and decode steps, their throughput, and the KV cache they read.

Steps are found by `analysis.llm_steps` (the annotations and shape patterns it reads are
described there); the KV cache by `analysis.kv_cache`.

**Per step** (ns): start = the annotation's start; the step's device work is what runtime
calls on the annotation's thread inside the annotation launched (launch flows), or, in a
simulator's trace (event source 'simulator': no host runtime, nothing launches), the device
work on the step's rank that starts inside the annotation;
``end = max(annotation end, end of that device work)`` (a token exists once its kernels end);
``duration = end - start``; ``device_busy = |union of the device work's intervals|`` (on a
rank without device work: the union of its host ops inside the step); ``host_busy`` and
``host_wait`` = the host ops and runtime calls on the step's thread, and its blocking calls
(synchronize, synchronous memcpy), as unions (analysis.llm_steps). Steps exist only where
the trace shows autoregressive generation: serving step annotations, or attention shapes
with a KV-cache write or a one-token decode (analysis.llm_steps); a training step or a
denoising loop has none, so no prefill, decode or TTFT.

**KV bytes read per step** (a compulsory-traffic floor: each attended key and value read
once, full attention in every layer; sliding-window layers read less):

    annotations: kv_read_bytes = kv_tokens * per_token_layer_bytes * layers
                 (kv_tokens = the key tokens attended: b + d of the execute_ annotation)
    shapes:      kv_read_bytes = sum over the step's attention calls of bytes(K) + bytes(V)
    kv_floor_ns         = kv_read_bytes / bandwidth * 1e9   (bandwidth: the outermost memory
                          level of the device's HardwareSpec, spec.bandwidth(), bytes/s)
    kv_floor_efficiency = kv_floor_ns / device_busy_ns
    (floor and efficiency for decode steps only: prefill's binding floor is compute)

**Summary** (``llm_summary``, per rank and phase): ``tokens_per_s = sum(tokens) /
sum(duration) * 1e9``; ``tpot_ns`` = mean decode step duration (each decode step emits one
token per sequence; with other steps interleaved the real TPOT is longer), shown beside
``tpot_device_ns``, ``tpot_host_ns`` and ``tpot_wait_ns`` (means of device_busy, host_busy,
host_wait): where the device is busy under half of TPOT the note says the step is serving
overhead and how much of it the host spent blocked; ``ttft_ns`` = the
first prefill step's duration, a lower bound of the time to first token of its requests (their
arrival and queueing are not recorded); NaN with a reason where not derivable.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.kv_cache import KV_COLUMNS, kv_cache_footprint
from analysis.llm_steps import NUMBERS, annotated_steps, device_work, shape_steps
from profiler.model.hardware import HardwareSpec
from profiler.model.trace import Trace
from profiler.model.numfmt import fmt_ns

__all__ = ["KV_COLUMNS", "PHASE_COLUMNS", "SUMMARY_COLUMNS", "kv_cache_footprint", "llm_phases", "llm_summary"]

SpecFor = Callable[[int, str], "HardwareSpec | None"]

PHASE_COLUMNS = [
    "rank",
    "step",
    "label",
    "source",
    "phase",
    *NUMBERS,
    "start_ns",
    "end_ns",
    "duration_ns",
    "device",
    "device_busy_ns",
    "host_busy_ns",
    "host_wait_ns",
    "kv_read_bytes",
    "kv_floor_ns",
    "kv_floor_efficiency",
    "note",
]
SUMMARY_COLUMNS = [
    "rank",
    "phase",
    "steps",
    "tokens",
    "time_ns",
    "device_busy_ns",
    "tokens_per_s",
    "mean_step_ns",
    "ttft_ns",
    "tpot_ns",
    "tpot_device_ns",
    "tpot_host_ns",
    "tpot_wait_ns",
    "kv_read_bytes",
    "kv_floor_ns",
    "kv_floor_efficiency",
    "note",
]


def llm_phases(trace: Trace, spec_for: SpecFor | None = None, kv: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per serving step (see the module doc for every definition); empty when the trace
    has neither step annotations nor attention ops (not an LLM trace).

    `spec_for(rank, device)` gives the HardwareSpec whose outermost memory bandwidth floors the
    decode steps' KV reads (None: no floors). `kv` is a `kv_cache_footprint` table to take the
    KV bytes per token from, by rank, instead of this trace's own: for a trace whose model ran
    inside a graph replay (no cache-write op recorded), the footprint of a trace of the same
    server and model where it was recorded (e.g. its prefill).

    Columns: rank, step (0, 1, ... in time order per rank), label (the annotation's name),
      source ('annotation' or 'shapes'), phase ('prefill', 'decode', 'mixed', 'unknown'),
      batch_size (sequences), tokens (query tokens run: prefill + decode), prefill_tokens,
      decode_tokens (= output tokens of a decode step), kv_tokens (key tokens attended);
      NaN where not derivable,
      start_ns, end_ns, duration_ns, device ('gpu<N>' / 'cpu' / ''), device_busy_ns,
      host_busy_ns, host_wait_ns (the host's ops and runtime calls on the step's thread, and
      its blocking calls),
      kv_read_bytes (B), kv_floor_ns, kv_floor_efficiency (NaN without spec_for or bytes),
      note (why a figure is NaN; '' when none is).
    """
    steps = annotated_steps(trace)
    if steps.empty:
        steps = shape_steps(trace)
    if steps.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PHASE_COLUMNS})
    steps = device_work(trace, steps)
    steps = _decode_floors(steps, kv_cache_footprint(trace, steps) if kv is None else kv, spec_for)
    steps["step"] = steps.groupby("rank").cumcount()
    return steps[PHASE_COLUMNS].reset_index(drop=True)


def _decode_floors(steps: pd.DataFrame, kv: pd.DataFrame, spec_for: SpecFor | None) -> pd.DataFrame:
    """kv_read_bytes, kv_floor_ns, kv_floor_efficiency and note for decode steps (module doc);
    NaN on other steps, whose binding floor is compute."""
    steps = steps.copy()
    decode = (steps["phase"] == "decode").to_numpy()
    read = np.where(decode, steps["kv_read_bytes"].to_numpy(np.float64), np.nan)
    floor = np.full(len(steps), np.nan)
    notes = np.full(len(steps), "", dtype=object)
    per_token = dict(zip(kv["rank"].tolist(), kv["bytes_per_token"].tolist()))
    why = dict(zip(kv["rank"].tolist(), kv["note"].tolist()))
    for i, s in enumerate(steps.itertuples(index=False)):
        if not decode[i]:
            continue
        if s.source == "annotation":
            if math.isnan(s.kv_tokens):
                notes[i] = "KV lengths attended not recorded by the step annotation"
            elif math.isnan(per_token.get(s.rank, math.nan)):
                notes[i] = "KV bytes per token not derivable: " + why.get(s.rank, "no cache-write op")
            else:
                read[i] = s.kv_tokens * per_token[s.rank]
        elif math.isnan(read[i]):
            notes[i] = "K/V dtypes of the attention ops not known"
        if math.isnan(read[i]) or spec_for is None:
            continue
        spec = spec_for(int(s.rank), s.device) if s.device else None
        if spec is None:
            notes[i] = f"no hardware spec for rank{s.rank}/{s.device}"
            continue
        floor[i] = read[i] / spec.bandwidth() * 1e9  # bytes / (bytes/s) = s; * 1e9 = ns
    busy = steps["device_busy_ns"].to_numpy(np.float64)
    steps["kv_read_bytes"], steps["kv_floor_ns"], steps["note"] = read, floor, notes
    steps["kv_floor_efficiency"] = np.divide(floor, busy, out=np.full(len(steps), np.nan), where=busy > 0)
    return steps


def llm_summary(phases: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, phase) of `llm_phases` output: rank, phase, steps, tokens (sum), time_ns (sum of
    step durations), device_busy_ns (sum), tokens_per_s = tokens / time_ns * 1e9, mean_step_ns,
    ttft_ns (prefill: the first prefill step's duration, a lower bound), tpot_ns (decode: mean step
    duration), tpot_device_ns, tpot_host_ns, tpot_wait_ns (decode: mean device busy, host busy,
    host blocked), kv_read_bytes and kv_floor_ns (means
    per step), kv_floor_efficiency = sum(kv_floor_ns) / sum(device_busy_ns) over steps with
    both, note (why a figure is NaN, or 'lower bound' for ttft)."""
    if phases.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SUMMARY_COLUMNS})
    rows = []
    for (rank, phase), g in phases.groupby(["rank", "phase"], sort=True):
        time_ns = float(g["duration_ns"].sum())
        tokens = float(g["tokens"].sum()) if g["tokens"].notna().all() else np.nan
        notes = []
        if np.isnan(tokens):
            notes.append("tokens not recorded for every step")
        ttft = tpot = tpot_dev = tpot_host = tpot_wait = np.nan
        if phase == "prefill":
            ttft = float(g.sort_values("start_ns")["duration_ns"].iloc[0])
            notes.append("ttft is a lower bound: request arrival is not recorded")
        elif phase == "mixed":
            notes.append(
                "ttft not derivable: prefill shares steps with decode (chunked), so no step is a request's first"
            )
        elif phase == "decode":
            tpot, tpot_dev = float(g["duration_ns"].mean()), float(g["device_busy_ns"].mean())
            tpot_host, tpot_wait = float(g["host_busy_ns"].mean()), float(g["host_wait_ns"].mean())
            if tpot > 0 and tpot_dev < 0.5 * tpot:
                notes.append(_overhead_note(tpot, tpot_dev, tpot_wait))
        both = g["kv_floor_ns"].notna() & (g["device_busy_ns"] > 0)
        kv_notes = sorted(set(g.loc[g["kv_read_bytes"].isna(), "note"]) - {""})
        notes += kv_notes
        rows.append(
            {
                "rank": int(rank),
                "phase": phase,
                "steps": len(g),
                "tokens": tokens,
                "time_ns": time_ns,
                "device_busy_ns": float(g["device_busy_ns"].sum()),
                "tokens_per_s": tokens / time_ns * 1e9 if time_ns > 0 else np.nan,
                "mean_step_ns": time_ns / len(g),
                "ttft_ns": ttft,
                "tpot_ns": tpot,
                "tpot_device_ns": tpot_dev,
                "tpot_host_ns": tpot_host,
                "tpot_wait_ns": tpot_wait,
                "kv_read_bytes": float(g["kv_read_bytes"].mean()),
                "kv_floor_ns": float(g["kv_floor_ns"].mean()),
                "kv_floor_efficiency": (
                    float(g.loc[both, "kv_floor_ns"].sum() / g.loc[both, "device_busy_ns"].sum())
                    if both.any()
                    else np.nan
                ),
                "note": "; ".join(notes),
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _overhead_note(tpot: float, device: float, wait: float) -> str:
    """Why a decode step's TPOT is far above its device time."""
    text = (
        f"decode: the device is busy {device / tpot:.0%} of TPOT ({fmt_ns(device)} of {fmt_ns(tpot)}); "
        f"the rest is host time around the model (scheduling, input preparation, sampling: serving overhead)"
    )
    if wait > 0.1 * tpot:
        text += f", {fmt_ns(wait)} of it blocked in synchronize or a synchronous copy"
    return text
