"""LLM serving: prefill and decode steps, their throughput, and the KV cache they read.

**Steps.** A step is one forward pass of the serving engine. It is found, in this order:

1. From the engine's step annotations (``record_function`` ranges on a host thread):
   - SGLang's ``step[<MODE> bs=<B> toks=<T>]``: MODE ``EXTEND``/``PREFILL``/``SPLIT_PREFILL`` is
     prefill, ``DECODE`` decode, ``MIXED`` mixed, anything else (``IDLE``, speculative modes)
     unknown. A DECODE step runs one query token per sequence, so its tokens are B.
   - ``execute_<N>_context_<C>(sq<a>sk<b>sqsq<.>sqsk<.>)_generation_<G>(sq<c>sk<d>sqsq<.>sqsk<.>)``
     (vLLM and SGLang builds on ROCm): N tokens scheduled; C prefill ("context") requests with
     a query tokens in all and b key tokens attended; G decode ("generation") requests with c
     query tokens and d key tokens. Phase: prefill if C > 0 = G, decode if G > 0 = C, mixed if
     both. (The recorded traces check out: 8155 + 37 = 8192 tokens; 15 requests of 1024 give
     sqsq = 15 * 1024**2 = 15728640.) The older form ``execute_context_<C>(<a>_<a2>)_generation_<G>(<.>)``
     records a (and the sum of squares a2) but not the decode requests' tokens: NaN when G > 0.
   Annotations nested inside another step annotation on the same thread describe the same
   step: their fields are merged (the step[...] label's phase first).
2. Failing that, from attention shapes: each ``ProfilerStep#N`` (or, without those, each
   top-level annotation) that holds SDPA-family attention ops with 4-D inputs is a step; with
   Lq the query length of those ops, all Lq = 1 is decode, all Lq > 1 prefill, both mixed.
   Tokens: B * Lq of one call (one layer's queries) for prefill, B for decode.

**Per step** (ns): start = the annotation's start; the step's device work is what runtime
calls on the annotation's thread inside the annotation launched (launch flows);
``end = max(annotation end, end of that device work)`` (a token exists once its kernels end);
``duration = end - start``; ``device_busy = |union of the device work's intervals|`` (on a
rank without device work: the union of its host ops inside the step).

**KV cache** (``kv_cache_footprint``), from the cache-write op each attention layer calls once
per step (SGLang ``store_cache`` / ``set_kv_buffer``, vLLM ``reshape_and_cache[_flash]``), whose
inputs are (key, value, key_cache, value_cache) as recorded with ``record_shapes``:

    per_token_layer_bytes = numel(key)/T * esize(key_cache) + numel(value)/T * esize(value_cache)
                            (T = key.shape[0], the step's new tokens)
    per_layer_bytes       = numel(key_cache) * esize(key_cache) + numel(value_cache) * esize(value_cache)
    slots                 = numel(key_cache) / (numel(key)/T)     (tokens one layer's cache holds)
    layers                = cache-write calls per step (every step must agree)
    kv_cache_bytes        = per_layer_bytes * layers,   share = kv_cache_bytes / device memory

``kv_cache_bytes`` assumes each layer owns its cache (SGLang's token pool and vLLM's
per-layer allocation do); when the product exceeds device memory the layers must share
buffers (vLLM's hybrid allocator) and it is NaN with that reason.

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
token per sequence; with other steps interleaved the real TPOT is longer); ``ttft_ns`` = the
first prefill step's duration, a lower bound of the time to first token of its requests (their
arrival and queueing are not recorded); NaN with a reason where not derivable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import orjson
import pandas as pd

from analysis.cost_base import _DTYPES
from analysis.intervals import grouped_union_length
from profiler.hardware import HardwareSpec
from profiler.schema import DEVICE_WORK_KINDS, Kind
from profiler.trace import Trace

__all__ = ["KV_COLUMNS", "PHASE_COLUMNS", "SUMMARY_COLUMNS", "kv_cache_footprint", "llm_phases", "llm_summary"]

SpecFor = Callable[[int, str], "HardwareSpec | None"]

_STEP = re.compile(r"^step\[(?P<mode>[A-Z_]+)(?P<args>[^\]]*)\]$")
_EXECUTE = re.compile(
    r"^execute_(?P<n>\d+)_context_(?P<c>\d+)\(sq(?P<csq>\d+)sk(?P<csk>\d+)sqsq\d+sqsk\d+\)"
    r"_generation_(?P<g>\d+)\(sq(?P<gsq>\d+)sk(?P<gsk>\d+)sqsq\d+sqsk\d+\)$")
_EXECUTE_V0 = re.compile(r"^execute_context_(?P<c>\d+)\((?P<csq>\d+)_\d+\)_generation_(?P<g>\d+)\(\d+\)$")
_MODES = {"EXTEND": "prefill", "PREFILL": "prefill", "SPLIT_PREFILL": "prefill", "DECODE": "decode", "MIXED": "mixed"}
#: SDPA-family forward ops -> the axis of the sequence length in q/k/v ([B,H,L,D] or [B,L,H,D])
_ATTENTION = {
    "aten::scaled_dot_product_attention": 2, "aten::_scaled_dot_product_flash_attention": 2,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 2, "aten::_scaled_dot_product_efficient_attention": 2,
    "aten::_scaled_dot_product_cudnn_attention": 2, "aten::_flash_attention_forward": 1,
    "aten::_efficient_attention_forward": 1,
}
#: cache-write ops taking (key, value, key_cache, value_cache, ...)
_KV_WRITE = re.compile(r"^(sglang::store_cache|_C_cache_ops::reshape_and_cache(_flash)?|.*set_kv_buffer.*)$")
_NUMBERS = ["batch_size", "tokens", "prefill_tokens", "decode_tokens", "kv_tokens"]
PHASE_COLUMNS = ["rank", "step", "label", "source", "phase", *_NUMBERS, "start_ns", "end_ns", "duration_ns", "device",
                 "device_busy_ns", "kv_read_bytes", "kv_floor_ns", "kv_floor_efficiency", "note"]
SUMMARY_COLUMNS = ["rank", "phase", "steps", "tokens", "time_ns", "device_busy_ns", "tokens_per_s", "mean_step_ns",
                   "ttft_ns", "tpot_ns", "tpot_device_ns", "kv_read_bytes", "kv_floor_ns", "kv_floor_efficiency",
                   "note"]
KV_COLUMNS = ["rank", "device", "op", "dtype", "per_token_layer_bytes", "per_layer_bytes", "slots", "layers",
              "bytes_per_token", "kv_cache_bytes", "capacity_bytes", "share", "note"]


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
      kv_read_bytes (B), kv_floor_ns, kv_floor_efficiency (NaN without spec_for or bytes),
      note (why a figure is NaN; '' when none is).
    """
    steps = _annotated_steps(trace)
    if steps.empty:
        steps = _shape_steps(trace)
    if steps.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PHASE_COLUMNS})
    steps = _device_work(trace, steps)
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
    duration), tpot_device_ns (decode: mean device busy), kv_read_bytes and kv_floor_ns (means
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
        ttft = tpot = tpot_dev = np.nan
        if phase == "prefill":
            ttft = float(g.sort_values("start_ns")["duration_ns"].iloc[0])
            notes.append("ttft is a lower bound: request arrival is not recorded")
        elif phase == "mixed":
            notes.append("ttft not derivable: prefill shares steps with decode (chunked), so no step is a request's first")
        elif phase == "decode":
            tpot, tpot_dev = float(g["duration_ns"].mean()), float(g["device_busy_ns"].mean())
        both = g["kv_floor_ns"].notna() & (g["device_busy_ns"] > 0)
        kv_notes = sorted(set(g.loc[g["kv_read_bytes"].isna(), "note"]) - {""})
        notes += kv_notes
        rows.append({
            "rank": int(rank), "phase": phase, "steps": len(g), "tokens": tokens, "time_ns": time_ns,
            "device_busy_ns": float(g["device_busy_ns"].sum()),
            "tokens_per_s": tokens / time_ns * 1e9 if time_ns > 0 else np.nan,
            "mean_step_ns": time_ns / len(g), "ttft_ns": ttft, "tpot_ns": tpot, "tpot_device_ns": tpot_dev,
            "kv_read_bytes": float(g["kv_read_bytes"].mean()), "kv_floor_ns": float(g["kv_floor_ns"].mean()),
            "kv_floor_efficiency": (float(g.loc[both, "kv_floor_ns"].sum() / g.loc[both, "device_busy_ns"].sum())
                                    if both.any() else np.nan),
            "note": "; ".join(notes),
        })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def kv_cache_footprint(trace: Trace, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank with LLM steps or cache-write ops: the KV cache from the cache-write ops' shapes
    (formulas in the module doc).

    Columns: rank, device, op (the cache-write op's name), dtype (of the cache as recorded),
      per_token_layer_bytes, per_layer_bytes, slots (tokens per layer's cache), layers (writes
      per step), bytes_per_token (= per_token_layer_bytes * layers), kv_cache_bytes,
      capacity_bytes (device memory), share (= kv_cache_bytes / capacity_bytes), note (why a
      figure is NaN). `steps` (internal) are the step windows, found here when not given.
    """
    if steps is None:
        steps = _annotated_steps(trace)
        if steps.empty:
            steps = _shape_steps(trace)
    ev = trace.events
    writes = np.flatnonzero(_name_mask(ev, _KV_WRITE.match) & (ev["kind"] == Kind.OP.value).to_numpy())
    writes = writes[~_has_ancestor_in(ev, writes)]  # a wrapper and the op it calls are one write
    ranks = sorted(set(steps["rank"].tolist()) | set(ev["rank"].to_numpy()[writes].tolist()))
    rows = []
    for rank in ranks:
        mine = writes[ev["rank"].to_numpy()[writes] == rank]
        rows.append(_kv_row(trace, int(rank), mine, steps[steps["rank"] == rank]))
    return pd.DataFrame(rows, columns=KV_COLUMNS)


# ---------------------------------------------------------------------------- steps


def _name_mask(ev: pd.DataFrame, match: Callable[[str], object]) -> np.ndarray:
    """Rows whose name matches, tested once per distinct name."""
    cats = ev["name"].cat.categories
    hit = np.array([bool(match(str(c))) for c in cats], dtype=bool)
    codes = ev["name"].cat.codes.to_numpy()
    return hit[codes] & (codes >= 0)


def _parse_label(name: str) -> dict | None:
    """Fields of one step annotation, or None when the name is not one."""
    nan = math.nan
    m = _STEP.match(name)
    if m:
        args = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m["args"])}
        phase = _MODES.get(m["mode"], "unknown")
        bs, toks = args.get("bs", nan), args.get("toks", nan)
        out = {"phase": phase, "batch_size": bs, "tokens": toks, "prefill_tokens": nan, "decode_tokens": nan,
               "kv_tokens": nan}
        if phase == "decode":  # one query token per sequence
            out.update(tokens=bs, prefill_tokens=0, decode_tokens=bs)
        elif phase == "prefill":
            out.update(prefill_tokens=toks, decode_tokens=0)
        return out
    m = _EXECUTE.match(name)
    if m:
        c, g = int(m["c"]), int(m["g"])
        phase = "mixed" if c and g else "prefill" if c else "decode" if g else "unknown"
        return {"phase": phase, "batch_size": c + g, "tokens": int(m["n"]), "prefill_tokens": int(m["csq"]),
                "decode_tokens": int(m["gsq"]), "kv_tokens": int(m["csk"]) + int(m["gsk"])}
    m = _EXECUTE_V0.match(name)
    if m:  # the older form records the decode requests' count only, not their tokens
        c, g, csq = int(m["c"]), int(m["g"]), int(m["csq"])
        phase = "mixed" if c and g else "prefill" if c else "decode" if g else "unknown"
        return {"phase": phase, "batch_size": c + g, "tokens": nan if g else csq, "prefill_tokens": csq,
                "decode_tokens": nan if g else 0, "kv_tokens": nan}
    return None


def _annotated_steps(trace: Trace) -> pd.DataFrame:
    """Step windows from step annotations, nested ones merged into the outermost."""
    ev = trace.events
    rows = np.flatnonzero(_name_mask(ev, lambda n: _parse_label(n) is not None)
                          & (ev["kind"] == Kind.ANNOTATION.value).to_numpy() & (ev["thread"].to_numpy() >= 0))
    if len(rows) == 0:
        return _empty_steps()
    a = pd.DataFrame({"rank": ev["rank"].to_numpy()[rows], "thread": ev["thread"].to_numpy()[rows],
                      "start_ns": ev["ts"].to_numpy()[rows], "dur": ev["dur"].to_numpy()[rows],
                      "label": ev["name"].astype(object).to_numpy()[rows]})
    a = a.sort_values(["rank", "thread", "start_ns", "dur"], ascending=[True, True, True, False], kind="stable")
    out: list[dict] = []
    for r in a.itertuples(index=False):
        fields = _parse_label(r.label)
        last = out[-1] if out else None
        if last and (last["rank"], last["thread"]) == (r.rank, r.thread) and r.start_ns < last["annot_end"]:
            for k, v in fields.items():  # the same step: fill what the outer label lacks
                if k == "phase":
                    if _STEP.match(r.label) and v != "unknown":
                        last["phase"] = v
                elif isinstance(last[k], float) and math.isnan(last[k]):
                    last[k] = v
            continue
        out.append({"rank": int(r.rank), "thread": int(r.thread), "label": r.label, "source": "annotation",
                    "start_ns": int(r.start_ns), "annot_end": int(r.start_ns + r.dur), **fields})
    return _steps_frame(out)


def _shape_steps(trace: Trace) -> pd.DataFrame:
    """Step windows classified by the query lengths of their attention ops (module doc, 2)."""
    ev = trace.events
    att = np.flatnonzero(_name_mask(ev, lambda n: n in _ATTENTION) & (ev["kind"] == Kind.OP.value).to_numpy())
    att = att[~_has_ancestor_in(ev, att)]  # sdpa -> _scaled_dot_product_flash_attention: one call
    if len(att) == 0:
        return _empty_steps()
    is_ann = (ev["kind"] == Kind.ANNOTATION.value).to_numpy() & (ev["thread"].to_numpy() >= 0)
    prof = is_ann & _name_mask(ev, lambda n: n.startswith("ProfilerStep#"))
    win = np.flatnonzero(prof) if prof.any() else np.flatnonzero(is_ann & (ev["depth"].to_numpy() == 0))
    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    which = _assign_windows(ev["rank"].to_numpy()[win], ev["thread"].to_numpy()[win], ts[win], ts[win] + dur[win],
                            ev["rank"].to_numpy()[att], ev["thread"].to_numpy()[att], ts[att])
    out = []
    for w in np.unique(which[which >= 0]):
        calls = [_attention_shape(ev, i) for i in att[which == w]]
        calls = [c for c in calls if c is not None]
        if not calls:
            continue
        lq = {c[1] for c in calls}
        b = {c[0] for c in calls}
        phase = "decode" if lq == {1} else "prefill" if 1 not in lq else "mixed"
        bs = b.pop() if len(b) == 1 else math.nan
        b0, lq0, lk0 = calls[0][:3]  # one layer's call: the step's sequences and tokens
        nan = math.nan
        tokens = {"decode": b0, "prefill": b0 * lq0}.get(phase, nan)
        row = win[w]
        out.append({
            "rank": int(ev["rank"].iat[row]), "thread": int(ev["thread"].iat[row]), "label": str(ev["name"].iat[row]),
            "source": "shapes", "start_ns": int(ts[row]), "annot_end": int(ts[row] + dur[row]),
            "phase": phase, "batch_size": bs, "tokens": tokens,
            "prefill_tokens": {"prefill": tokens, "decode": 0}.get(phase, nan),
            "decode_tokens": {"decode": tokens, "prefill": 0}.get(phase, nan),
            "kv_tokens": b0 * lk0 if len(lq) == 1 else nan,
            "kv_read_bytes": float(sum(c[3] for c in calls)),
        })
    return _steps_frame(out)


def _attention_shape(ev: pd.DataFrame, row: int) -> tuple[int, int, int, int] | None:
    """(B, Lq, Lk, bytes of K and V) of one attention op with 4-D inputs; None otherwise."""
    axis = _ATTENTION[str(ev["name"].iat[row])]
    shapes, dtypes = _loads(ev["shapes"].iat[row]), _loads(ev["dtypes"].iat[row])
    if not (isinstance(shapes, list) and len(shapes) >= 3
            and all(isinstance(s, list) and len(s) == 4 for s in shapes[:3])):
        return None
    q, k, v = shapes[:3]
    size = [(_DTYPES.get(d, (None, None))[1] if isinstance(d, str) else None) for d in (dtypes or [])[:3]]
    kv_bytes = math.prod(k) * size[1] + math.prod(v) * size[2] if len(size) == 3 and None not in size[1:] else math.nan
    return q[0], q[axis], k[axis], kv_bytes


def _steps_frame(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return _empty_steps()
    df = pd.DataFrame(rows)
    if "kv_read_bytes" not in df:
        df["kv_read_bytes"] = np.nan
    for c in [*_NUMBERS, "kv_read_bytes"]:
        df[c] = df[c].astype(np.float64)
    return df.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)


def _empty_steps() -> pd.DataFrame:
    cols = ["rank", "thread", "label", "source", "start_ns", "annot_end", "phase", *_NUMBERS, "kv_read_bytes"]
    return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})


def _device_work(trace: Trace, steps: pd.DataFrame) -> pd.DataFrame:
    """Adds end_ns, duration_ns, device, device_busy_ns to step windows (module doc)."""
    ev = trace.events
    steps = steps.copy()
    n = len(steps)
    win_rank, win_thread = steps["rank"].to_numpy(np.int64), steps["thread"].to_numpy(np.int64)
    win_start, win_end = steps["start_ns"].to_numpy(np.int64), steps["annot_end"].to_numpy(np.int64)
    pos = pd.Index(ev["id"].to_numpy())
    fl = trace.flows[(trace.flows["kind"] == "launch").to_numpy()]
    src, dst = pos.get_indexer(fl["src"].to_numpy()), pos.get_indexer(fl["dst"].to_numpy())
    ok = (src >= 0) & (dst >= 0)
    src, dst = src[ok], dst[ok]
    which = _assign_windows(win_rank, win_thread, win_start, win_end, ev["rank"].to_numpy()[src],
                            ev["thread"].to_numpy()[src], ev["ts"].to_numpy()[src])
    src, dst, which = src[which >= 0], dst[which >= 0], which[which >= 0]
    is_work = ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()[dst]
    dst, which = dst[is_work], which[is_work]
    start = ev["ts"].to_numpy()[dst]
    end = start + ev["dur"].to_numpy()[dst]
    busy = np.zeros(n, np.int64)
    if len(dst):
        busy = grouped_union_length(which, start, end).reindex(np.arange(n), fill_value=0).to_numpy()
    last = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(last, which, end)
    device = np.full(n, "", dtype=object)
    if len(dst):
        d = pd.DataFrame({"w": which, "device": ev["device"].astype(object).to_numpy()[dst]})
        mode = d.groupby("w")["device"].agg(lambda s: s.value_counts().index[0])
        device[mode.index.to_numpy()] = mode.to_numpy()
    ranks_with_work = ev.loc[ev["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy(), "rank"].unique()
    cpu_only = (device == "") & ~np.isin(win_rank, ranks_with_work)
    if cpu_only.any():  # the CPU is the device: union of host ops inside the step, clipped to it
        ops = np.flatnonzero((ev["kind"] == Kind.OP.value).to_numpy())
        w = _assign_windows(win_rank, win_thread, win_start, win_end, ev["rank"].to_numpy()[ops],
                            ev["thread"].to_numpy()[ops], ev["ts"].to_numpy()[ops])
        ops, w = ops[w >= 0], w[w >= 0]
        keep = cpu_only[w]
        ops, w = ops[keep], w[keep]
        if len(ops):
            s = ev["ts"].to_numpy()[ops]
            e = np.minimum(s + ev["dur"].to_numpy()[ops], win_end[w])
            u = grouped_union_length(w, s, e)
            busy[u.index.to_numpy()] = u.to_numpy()
        device[cpu_only] = "cpu"
    steps["end_ns"] = np.maximum(win_end, last)
    steps["duration_ns"] = steps["end_ns"] - steps["start_ns"]
    steps["device"] = device
    steps["device_busy_ns"] = busy.astype(np.int64)
    for c in ("start_ns", "end_ns", "duration_ns"):
        steps[c] = steps[c].astype(np.int64)
    steps["rank"] = steps["rank"].astype(np.int64)
    return steps


def _assign_windows(w_rank: np.ndarray, w_thread: np.ndarray, w_start: np.ndarray, w_end: np.ndarray,
                    rank: np.ndarray, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """For each (rank, thread, ts): the position of the window on that thread holding ts
    (w_start <= ts <= w_end), -1 when none. Windows on one thread do not overlap."""
    out = np.full(len(ts), -1, dtype=np.int64)
    for r, t in set(zip(w_rank.tolist(), w_thread.tolist())):
        wpos = np.flatnonzero((w_rank == r) & (w_thread == t))
        wpos = wpos[np.argsort(w_start[wpos], kind="stable")]
        sel = np.flatnonzero((rank == r) & (thread == t))
        k = np.searchsorted(w_start[wpos], ts[sel], side="right") - 1
        ok = (k >= 0) & (ts[sel] <= w_end[wpos[np.maximum(k, 0)]])
        out[sel[ok]] = wpos[k[ok]]
    return out


def _has_ancestor_in(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each of `rows`: is any host ancestor (parent_id chain) also among `rows`?"""
    if len(rows) == 0:
        return np.zeros(0, dtype=bool)
    ids = ev["id"].to_numpy()
    members = set(ids[rows].tolist())
    parent = pd.Series(ev["parent_id"].to_numpy(), index=ids)
    cur = ev["parent_id"].to_numpy()[rows]
    hit = np.zeros(len(rows), dtype=bool)
    while (cur >= 0).any():
        hit |= np.isin(cur, list(members))
        cur = np.where(cur >= 0, parent.reindex(cur).fillna(-1).to_numpy(dtype=np.int64), -1)
    return hit


# ---------------------------------------------------------------------------- KV cache


def _loads(text: object) -> object:
    try:
        return orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None


def _kv_row(trace: Trace, rank: int, writes: np.ndarray, steps: pd.DataFrame) -> dict:
    ev = trace.events
    devs = trace.devices[(trace.devices["rank"] == rank) & (trace.devices["device"] != "cpu")]
    device = str(devs["device"].iloc[0]) if len(devs) == 1 else ""
    capacity = float(devs["memory_bytes"].iloc[0]) if len(devs) == 1 and devs["memory_bytes"].iloc[0] > 0 else math.nan
    nan = math.nan
    row = {"rank": rank, "device": device, "op": "", "dtype": "", "per_token_layer_bytes": nan,
           "per_layer_bytes": nan, "slots": nan, "layers": nan, "bytes_per_token": nan, "kv_cache_bytes": nan,
           "capacity_bytes": capacity, "share": nan, "note": ""}
    if len(writes) == 0:
        row["note"] = ("no KV-cache write op with recorded shapes (attention inside a CUDA/HIP graph replay, "
                       "or record_shapes off)")
        return row
    first = writes[np.argmin(ev["ts"].to_numpy()[writes])]
    row["op"] = str(ev["name"].iat[first])
    sizes = _kv_sizes(_loads(ev["shapes"].iat[first]), _loads(ev["dtypes"].iat[first]))
    if sizes is None:
        row["note"] = f"{row['op']}: inputs are not (key, value, key_cache, value_cache) with known dtypes"
        return row
    row.update(sizes)
    which = _assign_windows(steps["rank"].to_numpy(np.int64), steps["thread"].to_numpy(np.int64),
                            steps["start_ns"].to_numpy(np.int64), steps["annot_end"].to_numpy(np.int64),
                            ev["rank"].to_numpy()[writes], ev["thread"].to_numpy()[writes], ev["ts"].to_numpy()[writes])
    counts = sorted(set(np.bincount(which[which >= 0]).tolist()) - {0}) if (which >= 0).any() else []
    if len(counts) != 1:
        row["note"] = ("layers not derivable: " + ("no step holds a cache write" if not counts else
                       f"steps write the cache different numbers of times {counts}"))
        return row
    layers = counts[0]
    total = row["per_layer_bytes"] * layers
    row.update(layers=layers, bytes_per_token=row["per_token_layer_bytes"] * layers)
    if not math.isnan(capacity) and total > capacity:
        row["note"] = (f"{layers} layers x {row['per_layer_bytes']:.0f} B exceeds device memory: "
                       "the layers share cache buffers, which the trace does not record")
        return row
    row.update(kv_cache_bytes=total, share=total / capacity)
    return row


def _kv_sizes(shapes: object, dtypes: object) -> dict | None:
    """Per-token and per-layer bytes from (key, value, key_cache, value_cache) inputs."""
    if not (isinstance(shapes, list) and isinstance(dtypes, list) and len(shapes) >= 4 and len(dtypes) >= 4):
        return None
    k, v, kc, vc = shapes[:4]
    if not all(isinstance(s, list) and s and all(isinstance(x, int) for x in s) for s in (k, v, kc, vc)):
        return None
    if k[0] == 0 or k[0] != v[0]:
        return None
    esize = [_DTYPES.get(d, (None, None))[1] if isinstance(d, str) else None for d in dtypes[2:4]]
    if None in esize:
        return None
    ek, evv = math.prod(k) // k[0], math.prod(v) // v[0]  # elements per token of one layer
    nk, nv = math.prod(kc), math.prod(vc)
    if nk % ek or nv % evv or nk // ek != nv // evv:
        return None
    return {"dtype": str(dtypes[2]), "per_token_layer_bytes": float(ek * esize[0] + evv * esize[1]),
            "per_layer_bytes": float(nk * esize[0] + nv * esize[1]), "slots": float(nk // ek)}
