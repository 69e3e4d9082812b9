"""LLM serving steps: where each forward pass of the serving engine starts and ends, its phase
and tokens, and the device work it launched (used by `analysis.llm` and `analysis.kv_cache`).

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
   Shapes alone do not make a generation: these windows count only on a rank with evidence of
   autoregressive decoding, a KV-cache write op (``KV_WRITE``) or a decode window (every
   attention call one query token over a longer key: Lq = 1 < Lk), and never a window that
   holds backward or optimizer ops (a training step). A diffusion model's denoising loop (the
   same Lq > 1 shapes every step) and a training step are not prefill.

**Host time** of a step: ``host_busy_ns`` = |union of the host ops and runtime calls on the
step's thread inside it|; ``host_wait_ns`` = |union of its blocking calls| (device/stream/event
synchronize and synchronous memcpy: the host waiting for the device, not working).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from analysis.cost.base import DTYPES
from analysis.llm_step_work import (
    assign_windows as assign_windows,
    device_work as device_work,
    has_ancestor_in as has_ancestor_in,
    loads_json as loads_json,
    name_mask as name_mask,
)
from profiler.model.schema import Kind
from profiler.model.trace import Trace

#: per-step figures, NaN where not derivable
NUMBERS = ["batch_size", "tokens", "prefill_tokens", "decode_tokens", "kv_tokens"]
_STEP = re.compile(r"^step\[(?P<mode>[A-Z_]+)(?P<args>[^\]]*)\]$")
_EXECUTE = re.compile(
    r"^execute_(?P<n>\d+)_context_(?P<c>\d+)\(sq(?P<csq>\d+)sk(?P<csk>\d+)sqsq\d+sqsk\d+\)"
    r"_generation_(?P<g>\d+)\(sq(?P<gsq>\d+)sk(?P<gsk>\d+)sqsq\d+sqsk\d+\)$"
)
_EXECUTE_V0 = re.compile(r"^execute_context_(?P<c>\d+)\((?P<csq>\d+)_\d+\)_generation_(?P<g>\d+)\(\d+\)$")
#: cache-write ops taking (key, value, key_cache, value_cache, ...): evidence of a KV cache
#: (npu::kv_cache_write: the simulated accelerator's, accelerator/sim/serving_trace.py)
KV_WRITE = re.compile(
    r"^(sglang::store_cache|_C_cache_ops::reshape_and_cache(_flash)?|.*set_kv_buffer.*|npu::kv_cache_write)$"
)
#: training work: autograd's backward ops and the optimizer's step
_TRAINING = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$|_backward$|^Optimizer\.")
_MODES = {"EXTEND": "prefill", "PREFILL": "prefill", "SPLIT_PREFILL": "prefill", "DECODE": "decode", "MIXED": "mixed"}
#: SDPA-family forward ops -> the axis of the sequence length in q/k/v ([B,H,L,D] or [B,L,H,D])
_ATTENTION = {
    "aten::scaled_dot_product_attention": 2,
    "aten::_scaled_dot_product_flash_attention": 2,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 2,
    "aten::_scaled_dot_product_efficient_attention": 2,
    "aten::_scaled_dot_product_cudnn_attention": 2,
    "aten::_flash_attention_forward": 1,
    "aten::_efficient_attention_forward": 1,
}


def _parse_label(name: str) -> dict | None:
    """Fields of one step annotation, or None when the name is not one."""
    nan = math.nan
    m = _STEP.match(name)
    if m:
        args = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m["args"])}
        phase = _MODES.get(m["mode"], "unknown")
        bs, toks = args.get("bs", nan), args.get("toks", nan)
        out = {
            "phase": phase,
            "batch_size": bs,
            "tokens": toks,
            "prefill_tokens": nan,
            "decode_tokens": nan,
            "kv_tokens": nan,
        }
        if phase == "decode":  # one query token per sequence
            out.update(tokens=bs, prefill_tokens=0, decode_tokens=bs)
        elif phase == "prefill":
            out.update(prefill_tokens=toks, decode_tokens=0)
        return out
    m = _EXECUTE.match(name)
    if m:
        c, g = int(m["c"]), int(m["g"])
        phase = "mixed" if c and g else "prefill" if c else "decode" if g else "unknown"
        return {
            "phase": phase,
            "batch_size": c + g,
            "tokens": int(m["n"]),
            "prefill_tokens": int(m["csq"]),
            "decode_tokens": int(m["gsq"]),
            "kv_tokens": int(m["csk"]) + int(m["gsk"]),
        }
    m = _EXECUTE_V0.match(name)
    if m:  # the older form records the decode requests' count only, not their tokens
        c, g, csq = int(m["c"]), int(m["g"]), int(m["csq"])
        phase = "mixed" if c and g else "prefill" if c else "decode" if g else "unknown"
        return {
            "phase": phase,
            "batch_size": c + g,
            "tokens": nan if g else csq,
            "prefill_tokens": csq,
            "decode_tokens": nan if g else 0,
            "kv_tokens": nan,
        }
    return None


def annotated_steps(trace: Trace) -> pd.DataFrame:
    """Step windows from step annotations, nested ones merged into the outermost."""
    ev = trace.events
    rows = np.flatnonzero(
        name_mask(ev, lambda n: _parse_label(n) is not None)
        & (ev["kind"] == Kind.ANNOTATION.value).to_numpy()
        & (ev["thread"].to_numpy() >= 0)
    )
    if len(rows) == 0:
        return _empty_steps()
    a = pd.DataFrame(
        {
            "rank": ev["rank"].to_numpy()[rows],
            "thread": ev["thread"].to_numpy()[rows],
            "start_ns": ev["ts"].to_numpy()[rows],
            "dur": ev["dur"].to_numpy()[rows],
            "label": ev["name"].astype(object).to_numpy()[rows],
        }
    )
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
        out.append(
            {
                "rank": int(r.rank),
                "thread": int(r.thread),
                "label": r.label,
                "source": "annotation",
                "start_ns": int(r.start_ns),
                "annot_end": int(r.start_ns + r.dur),
                **fields,
            }
        )
    return _steps_frame(out)


def shape_steps(trace: Trace) -> pd.DataFrame:
    """Step windows classified by the query lengths of their attention ops (module doc, 2)."""
    ev = trace.events
    att = np.flatnonzero(name_mask(ev, lambda n: n in _ATTENTION) & (ev["kind"] == Kind.OP.value).to_numpy())
    att = att[~has_ancestor_in(ev, att)]  # sdpa -> _scaled_dot_product_flash_attention: one call
    if len(att) == 0:
        return _empty_steps()
    is_ann = (ev["kind"] == Kind.ANNOTATION.value).to_numpy() & (ev["thread"].to_numpy() >= 0)
    prof = is_ann & name_mask(ev, lambda n: n.startswith("ProfilerStep#"))
    win = np.flatnonzero(prof) if prof.any() else np.flatnonzero(is_ann & (ev["depth"].to_numpy() == 0))
    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    which = assign_windows(
        ev["rank"].to_numpy()[win],
        ev["thread"].to_numpy()[win],
        ts[win],
        ts[win] + dur[win],
        ev["rank"].to_numpy()[att],
        ev["thread"].to_numpy()[att],
        ts[att],
    )
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
        out.append(
            {
                "rank": int(ev["rank"].iat[row]),
                "thread": int(ev["thread"].iat[row]),
                "label": str(ev["name"].iat[row]),
                "source": "shapes",
                "start_ns": int(ts[row]),
                "annot_end": int(ts[row] + dur[row]),
                "phase": phase,
                "batch_size": bs,
                "tokens": tokens,
                "prefill_tokens": {"prefill": tokens, "decode": 0}.get(phase, nan),
                "decode_tokens": {"decode": tokens, "prefill": 0}.get(phase, nan),
                "kv_tokens": b0 * lk0 if len(lq) == 1 else nan,
                "kv_read_bytes": float(sum(c[3] for c in calls)),
                "evidence": any(c[1] == 1 < c[2] for c in calls),  # one query token over a longer key: decoding
            }
        )
    return _generation_only(ev, _steps_frame(out))


def _generation_only(ev: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Shape-found windows of ranks with evidence of autoregressive generation (a KV-cache
    write, or a decode window), less the windows holding training work (module doc, 2)."""
    if steps.empty:
        return steps.drop(columns="evidence", errors="ignore")
    ops = (ev["kind"] == Kind.OP.value).to_numpy()
    train = np.flatnonzero(ops & name_mask(ev, _TRAINING.search))
    in_train = assign_windows(
        steps["rank"].to_numpy(),
        steps["thread"].to_numpy(),
        steps["start_ns"].to_numpy(),
        steps["annot_end"].to_numpy(),
        ev["rank"].to_numpy()[train],
        ev["thread"].to_numpy()[train],
        ev["ts"].to_numpy()[train],
    )
    training = np.isin(np.arange(len(steps)), in_train[in_train >= 0])
    writes = set(ev["rank"].to_numpy()[ops & name_mask(ev, KV_WRITE.match)].tolist())
    decoding = set(steps.loc[steps["evidence"].astype(bool) & ~training, "rank"].tolist())
    keep = ~training & steps["rank"].isin(writes | decoding).to_numpy()
    return steps[keep].drop(columns="evidence").reset_index(drop=True)


def _attention_shape(ev: pd.DataFrame, row: int) -> tuple[int, int, int, int] | None:
    """(B, Lq, Lk, bytes of K and V) of one attention op with 4-D inputs; None otherwise."""
    axis = _ATTENTION[str(ev["name"].iat[row])]
    shapes, dtypes = loads_json(ev["shapes"].iat[row]), loads_json(ev["dtypes"].iat[row])
    if not (
        isinstance(shapes, list) and len(shapes) >= 3 and all(isinstance(s, list) and len(s) == 4 for s in shapes[:3])
    ):
        return None
    q, k, v = shapes[:3]
    size = [(DTYPES.get(d, (None, None))[1] if isinstance(d, str) else None) for d in (dtypes or [])[:3]]
    kv_bytes = math.prod(k) * size[1] + math.prod(v) * size[2] if len(size) == 3 and None not in size[1:] else math.nan
    return q[0], q[axis], k[axis], kv_bytes


def _steps_frame(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return _empty_steps()
    df = pd.DataFrame(rows)
    if "kv_read_bytes" not in df:
        df["kv_read_bytes"] = np.nan
    for c in [*NUMBERS, "kv_read_bytes"]:
        df[c] = df[c].astype(np.float64)
    return df.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)


def _empty_steps() -> pd.DataFrame:
    cols = ["rank", "thread", "label", "source", "start_ns", "annot_end", "phase", *NUMBERS, "kv_read_bytes"]
    return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
