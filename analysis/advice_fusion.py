"""Fusion and fused-attention advice: chains of ops that feed each other, and what fusing saves.

**Edges.** Two ops are fused only along a producer-consumer edge: consecutive ops (in time
order on one device, views and tiny dispatch-only ops skipped) where the producer's output is
an input of the consumer. Kineto records no tensor identity (its `Ev Idx` is an event index, and
`Input Strides` carry no storage address; only PyTorch's execution trace has tensor ids), so
the tensor is matched by size: the producer's bytes written (its output, from the cost model's
shapes; for a memory-bound op with side outputs, such as dropout's mask, also its largest
input's size) equal, within 2 %, the bytes of one of the consumer's tensor inputs (`Input Dims`
x element size). Bytes rather than shapes, so that a view between the two (`[B*H, L, L]` viewed
as `[B, H, L, L]`) does not hide the edge; 2 % so that the small side outputs of a norm
(saved mean and inverse std) do not. A chain never crosses a ProfilerStep boundary, a host
thread (forward and autograd's backward), a top-level `record_function` region (a module call,
`## forward ##`), or an optimizer step (ops under `Optimizer.step#...` / `Optimizer.zero_grad#...`
are never fused).

**Saving** of a chain (memory-bound ops between the compute ops that produce and consume them):

    inter       = sum over edges of 2 * bytes(handed-over tensor)   (written once, read back once)
    fused_floor = max(sum t_compute, (sum bytes - inter) / bandwidth)
    saving      = min(inter / bandwidth, chain_time - fused_floor)   (chain_time: sum of the ops' time)

**Unfused attention**: a chain batched-matmul -> (scale, mask, dropout)* -> softmax -> (...)* ->
batched-matmul is one attention; fused (`torch.nn.functional.scaled_dot_product_attention`,
FlashAttention) the score matrix never reaches memory:

    attention_floor = max(t_compute(QK^T) + t_compute(PV), bytes(Q + K + V + O) / bandwidth)
                      (FlashAttention's I/O: Dao et al. 2022, sec. 3.2; compute at the matrix peak)
    saving          = chain_time - attention_floor

Identical chains (same ops in the same order: one per layer, per iteration) are one piece of
advice with a count, savings summed. Bandwidth is the outermost memory level (spec.bandwidth()).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.cost.base import Args, Unknown
from analysis.llm_steps import loads_json
from analysis.roofline import MATRIX_FAMILIES
from profiler.model.hardware import HardwareSpec
from profiler.model.schema import Kind
from profiler.model.strings import startswith
from profiler.model.numfmt import fmt_ns, fmt_bytes

MEMORY_FAMILIES = {"elementwise", "softmax", "norm", "reduction", "quant/cast", "copy", "embedding"}
_TRANSPARENT = {"other"}  # views, reshapes, allocations: cost nothing, break no chain
_MATCH = 0.02  # relative size tolerance of a handed-over tensor (norm side outputs)
_BATCHED_MATMUL = {"bmm", "baddbmm", "matmul"}
_SOFTMAX = {"softmax", "_softmax", "_safe_softmax"}
#: ops whose first tensor input is only written (the destination): not a consumer of it
_OVERWRITES_FIRST = {
    "fill_",
    "zero_",
    "copy_",
    "normal_",
    "uniform_",
    "random_",
    "bernoulli_",
    "index_put_",
    "masked_scatter_",
    "set_",
}


@dataclass(frozen=True)
class Draft:
    """One piece of advice before de-duplication: its text, its saving, and the part of the
    saving each unit's time carries (`shares`, ns, aligned with `units`)."""

    kind: str
    title: str
    saving_ns: float
    evidence: str
    formula: str
    assumption: str
    units: tuple[int, ...]
    shares: tuple[float, ...]
    count: int = 1
    stats: tuple[float, ...] = ()  # fusion: (chain ns, fused floor ns, intermediate bytes, memory-bound ops)


def _chain_evidence(kind: str, stats: tuple[float, ...], count: int) -> str:
    """The numbers behind a fusion or attention Draft, summed over its `count` chains."""
    chain, floor, inter, members = stats
    each = "" if count == 1 else f"{count} chains (one per layer or iteration), in all: "
    if kind == "attention":
        return f"unfused attention: {each}chain {fmt_ns(chain)}, fused floor {fmt_ns(floor)}"
    return (
        f"{members:.0f} memory-bound op{'s' if members != 1 else ''} in a producer-consumer chain; {each}chain "
        f"{fmt_ns(chain)}, fused floor {fmt_ns(floor)}; {fmt_bytes(inter)} of intermediates"
    )


def unit_scopes(events: pd.DataFrame, unit_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scope, optimizer) per unit: scope = (thread, outermost region below ProfilerStep) as one
    int code (-1 when the unit is no host op); optimizer = the unit is, or runs under, an
    `Optimizer.` region."""
    ids = events["id"].to_numpy()
    pos = pd.Index(ids).get_indexer(unit_ids)
    kind = events["kind"].astype(object).to_numpy()
    parent_pos = pd.Index(ids).get_indexer(events["parent_id"].to_numpy())
    is_region = (kind == Kind.ANNOTATION.value) & ~startswith(events["name"], "ProfilerStep#")
    optim_name = startswith(events["name"], "Optimizer.")
    ok = pos >= 0
    cur = np.where(ok, pos, -1)
    outer = np.full(len(unit_ids), -1, dtype=np.int64)
    optimizer = np.zeros(len(unit_ids), dtype=bool)
    while (cur >= 0).any():
        live = cur >= 0
        optimizer[live] |= optim_name[cur[live]]
        hit = live & np.where(live, is_region[np.maximum(cur, 0)], False)
        outer[hit] = cur[hit]
        cur = np.where(live, parent_pos[np.maximum(cur, 0)], -1)
    thread = np.where(ok, events["thread"].to_numpy()[np.maximum(pos, 0)], -1)
    scope = pd.factorize(pd.Series(list(zip(thread.tolist(), outer.tolist()))))[0]
    return np.where(ok, scope, -1), optimizer


def _input_bytes(shapes: object, dtypes: object, name: str = "") -> tuple[float, ...]:
    """Bytes of each tensor input of one recorded call that the op reads (empty when not recorded)."""
    s, d = loads_json(shapes), loads_json(dtypes)
    if not isinstance(s, list) or not isinstance(d, list):
        return ()
    a = Args(s, d, None, None)
    out = []
    for i in a.tensors():
        if i == 0 and name.split("::")[-1] in _OVERWRITES_FIRST:
            continue
        try:
            out.append(float(a.nbytes(i)))
        except (Unknown, TypeError):
            continue
    return tuple(out)


def _handed(outputs: tuple[float, ...], inputs: tuple[float, ...]) -> float:
    """Bytes of the consumer's input that is one of the producer's outputs; 0 when none is."""
    best = [x for w in outputs if w > 0 for x in inputs if abs(x - w) <= _MATCH * w]
    return max(best) if best else 0.0


def _outputs(written: float, inputs: tuple[float, ...], memory_op: bool) -> tuple[float, ...]:
    """Possible output sizes of a producer: all it writes, and for a memory-bound op with
    several outputs (dropout's mask, max-pool's indices) its largest input's size, the shape
    its main output keeps."""
    big = max(inputs, default=0.0)
    return (written, big) if memory_op and 0 < big < written else (written,)


def fusion_drafts(u: pd.DataFrame, spec: HardwareSpec, scope: np.ndarray, optimizer: np.ndarray) -> list[Draft]:
    """Fusion and attention advice for the units of one device (`u` sorted by start_ns;
    `scope`, `optimizer` aligned with it: unit_scopes)."""
    tiny = u["family"].isin(MEMORY_FAMILIES) & (u["bound"] == "runtime")
    tiny |= u["family"].isin(MATRIX_FAMILIES) & (u["flops"].fillna(1) == 0)  # a wrapper whose child computes
    keep = (~u["family"].isin(_TRANSPARENT) & ~tiny & u["bound"].ne("unknown")).to_numpy() & ~optimizer
    v = u[keep]
    scope, n = scope[keep], len(v)
    fam, bound = v["family"].to_numpy(dtype=object), v["bound"].to_numpy(dtype=object)
    compute = np.isin(fam, list(MATRIX_FAMILIES))
    memory = np.isin(fam, list(MEMORY_FAMILIES)) & np.isin(bound, ["memory", "compute"])
    written = v["bytes_written"].to_numpy(np.float64)
    codes, uniq = pd.factorize(
        pd.Series(list(zip(v["shapes"].astype(object), v["dtypes"].astype(object), v["name"].astype(str))))
    )
    ins = [_input_bytes(*uniq[c]) for c in range(len(uniq))]
    step = v["step"].to_numpy()
    handed = np.zeros(n)  # handed[i]: bytes unit i-1 hands to unit i (0: no edge)
    for i in range(1, n):
        joinable = (memory[i] or compute[i]) and (memory[i - 1] or compute[i - 1]) and (memory[i] or memory[i - 1])
        if joinable and step[i] == step[i - 1] and scope[i] == scope[i - 1]:
            handed[i] = _handed(_outputs(written[i - 1], ins[codes[i - 1]], memory[i - 1]), ins[codes[i]])
    drafts: list[Draft] = []
    chain: list[int] = []
    for i in range(n):  # runs joined by edges; a compute unit ends one (consumer) and starts the next (producer)
        if chain and handed[i] > 0:
            chain.append(i)
            if not compute[i]:
                continue
        drafts += _chain_draft(v, chain, handed, memory, compute, spec)
        chain = [i]
    drafts += _chain_draft(v, chain, handed, memory, compute, spec)
    return merge_repeats(drafts)


def _chain_draft(
    v: pd.DataFrame, run: list[int], handed: np.ndarray, memory: np.ndarray, compute: np.ndarray, spec: HardwareSpec
) -> list[Draft]:
    """The advice for one chain `run` (positions in v); [] when it holds nothing to fuse."""
    if not any(memory[j] for j in run) or len(run) < 2:
        return []
    names = [str(x) for x in v["name"].to_numpy(dtype=object)[run]]
    time_ns = v["time_ns"].to_numpy(np.float64)[run]
    t_compute = np.nan_to_num(v["t_compute_ns"].to_numpy(np.float64)[run])
    total_bytes = float(np.nansum(v["bytes"].to_numpy(np.float64)[run]))
    edges = handed[run[1:]]
    inter = float(2 * edges.sum())
    bw = spec.bandwidth()
    chain_time = float(time_ns.sum())
    ids = tuple(int(x) for x in v["unit_id"].to_numpy()[run])
    if _is_attention(names, compute[run]):
        return [_attention_draft(v, run, names, chain_time, ids, bw)]
    floor = max(float(t_compute.sum()), (total_bytes - inter) / bw * 1e9)
    saving = max(0.0, min(inter / bw * 1e9, chain_time - floor))
    if saving <= 0:
        return []
    shares = np.zeros(len(run))  # each handoff's write in the producer and read in the consumer
    shares[:-1] += edges / bw * 1e9
    shares[1:] += edges / bw * 1e9
    shares = np.minimum(shares, time_ns)
    shares *= saving / shares.sum() if shares.sum() > 0 else 0.0
    stats = (chain_time, floor, inter, float(sum(bool(memory[j]) for j in run)))
    return [
        Draft(
            "fusion",
            f"fuse {' -> '.join(names)}",
            saving,
            _chain_evidence("fusion", stats, 1),
            "saving = min(inter / bandwidth, chain time - max(sum t_compute, (bytes - inter) / bandwidth)); "
            "inter = sum 2 * bytes handed over",
            "fused, each intermediate is neither written nor read back (torch.compile or a fused kernel); "
            "the compute stays",
            ids,
            tuple(float(s) for s in shares),
            1,
            stats,
        )
    ]


def _is_attention(names: list[str], compute: np.ndarray) -> bool:
    """batched matmul -> ... softmax ... -> batched matmul, nothing else computing between."""
    bare = [n.split("::")[-1] for n in names]
    return (
        len(names) >= 3
        and bare[0] in _BATCHED_MATMUL
        and bare[-1] in _BATCHED_MATMUL
        and any(b in _SOFTMAX for b in bare[1:-1])
        and not compute[1:-1].any()
    )


def _attention_draft(
    v: pd.DataFrame, run: list[int], names: list[str], chain_time: float, ids: tuple[int, ...], bw: float
) -> Draft:
    first, last = v.iloc[run[0]], v.iloc[run[-1]]
    qk = _input_bytes(first["shapes"], first["dtypes"])
    pv = _input_bytes(last["shapes"], last["dtypes"])
    q_k = sum(qk[-2:])  # the two operands (baddbmm's first input, the added mask, aside)
    vbytes = pv[-1] if len(pv) >= 2 else 0.0  # P @ V: V is the second operand
    o = float(last["bytes_written"])
    io = q_k + vbytes + o
    t_compute = float(np.nan_to_num(first["t_compute_ns"]) + np.nan_to_num(last["t_compute_ns"]))
    floor = max(t_compute, io / bw * 1e9)
    saving = max(0.0, chain_time - floor)
    time_ns = v["time_ns"].to_numpy(np.float64)[run]
    shares = time_ns * (saving / chain_time) if chain_time > 0 else time_ns * 0
    stats = (chain_time, floor, io, 0.0)
    return Draft(
        "attention",
        f"use fused attention (F.scaled_dot_product_attention / FlashAttention) for {' -> '.join(names)}",
        saving,
        f"{_chain_evidence('attention', stats, 1)} (matmuls {fmt_ns(t_compute)} at the matrix peak, "
        f"Q+K+V+O {fmt_bytes(io)} at {bw / 1e9:.3g} GB/s)",
        "saving = chain time - max(t_compute(QK^T) + t_compute(PV), bytes(Q+K+V+O) / bandwidth)",
        "a fused kernel keeps the score matrix on chip (FlashAttention I/O: Q, K, V read once, O written "
        "once) and reaches the floor; a real kernel lands between the floor and today",
        ids,
        tuple(float(s) for s in shares),
        1,
        stats,
    )


def merge_repeats(drafts: list[Draft]) -> list[Draft]:
    """One Draft per distinct chain (same kind and ops in the same order), savings, units and
    shares summed, count = the occurrences."""
    by_title: dict[tuple[str, str], list[Draft]] = {}
    for d in drafts:
        by_title.setdefault((d.kind, d.title), []).append(d)
    out = []
    for (kind, title), same in by_title.items():
        first, count = same[0], sum(d.count for d in same)
        stats = tuple(float(sum(x)) for x in zip(*(d.stats for d in same))) if first.stats else ()
        if stats:
            stats = (*stats[:3], first.stats[3])  # memory-bound ops of one chain
        evidence = first.evidence if count == 1 or not stats else _chain_evidence(kind, stats, count)
        out.append(
            Draft(
                kind,
                title,
                float(sum(d.saving_ns for d in same)),
                evidence,
                first.formula,
                first.assumption,
                tuple(u for d in same for u in d.units),
                tuple(s for d in same for s in d.shares),
                count,
                stats,
            )
        )
    return out
