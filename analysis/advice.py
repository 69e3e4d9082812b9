"""What to change first: advice ranked by estimated saving, each with its evidence and formula.

- fusion: a chain of memory-bound units between compute units (or at the ends of the device's
  timeline, or of a ProfilerStep: a chain never spans two iterations) passes intermediate
  tensors through memory; fused, each intermediate is neither written nor read back: saving =
  sum over adjacent pairs of 2 * min(written_prev, read_next) / bandwidth, at most the chain's
  memory-bound time. The same chain in every iteration (or layer) is one piece of advice, its
  savings summed. Unfused attention (matmul, scale, softmax, matmul) is the classic.
- runtime: runtime-bound units spend their time on dispatch: saving = sum(time - max(t_compute,
  t_memory, t_comm)), what would remain if the dispatch were free (fuse small ops, CUDA graphs,
  a larger batch).
- communication: exposed communication (running with no other work): saving = exposed_ns, if
  it were overlapped with compute (bucket sizes, prefetch, async collectives).
- tiling: compute-bound units below half their floor's speed: saving = sum(time - floor)
  (tile sizes, layout, a better kernel).
- precision: fp32 GEMM/conv/attention: saving = sum(t_compute(fp32) - t_compute(bf16)), capped
  by each unit's time (run it in bf16 where accuracy allows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.grouping import key_codes
from analysis.roofline import MATRIX_FAMILIES
from profiler.model.hardware import HardwareSpec

_MEMORY_FAMILIES = {"elementwise", "softmax", "norm", "reduction", "quant/cast", "copy", "embedding"}
_TRANSPARENT = {"other"}  # views, reshapes, allocations: cost nothing, break no chain


@dataclass(frozen=True)
class Advice:
    """One change and what it should save (ns), with the numbers behind it."""

    kind: str  # fusion | runtime | communication | tiling | precision
    title: str
    saving_ns: float
    evidence: str
    formula: str
    units: tuple[int, ...] = ()


def advise(classified: pd.DataFrame, communication: pd.DataFrame, spec_for: Callable[[int, str], HardwareSpec | None],
           limit: int = 10) -> list[Advice]:
    """Advice for `classified` units (analysis.roofline.classify), most saving first."""
    out: list[Advice] = []
    if "carried_by" in classified:  # wrappers (analysis.nesting): their work is advised on the op doing it
        classified = classified[classified["carried_by"].to_numpy() < 0]
    for (rank, device), u in classified.groupby(["rank", "device"], sort=True):
        spec = spec_for(int(rank), str(device))
        where = f"rank{rank}/{device}"
        if spec is not None:
            out += _fusion(u.sort_values("start_ns", kind="stable"), spec, where)
            out += _precision(u, spec, where)
        out += _runtime(u, where) + _tiling(u, where)
    for r in communication.to_dict(orient="records"):
        if r["exposed_ns"] > 0:
            out.append(Advice("communication", f"overlap communication on rank{r['rank']}/{r['device']}", float(r["exposed_ns"]),
                              f"{r['comm_ns'] / 1e6:.3g} ms of collectives, {r['exposed_ns'] / 1e6:.3g} ms with no other work",
                              "saving = exposed communication time"))
    out = [a for a in out if a.saving_ns > 0]
    return sorted(out, key=lambda a: -a.saving_ns)[:limit]


def _fusion(u: pd.DataFrame, spec: HardwareSpec, where: str) -> list[Advice]:
    """Chains of memory-bound units, with the compute units around them."""
    # views cost nothing, and tiny memory-family ops (a scalar cast, a wrapper's dispatch) are
    # runtime bound: neither breaks a chain
    tiny = u["family"].isin(_MEMORY_FAMILIES) & (u["bound"] == "runtime")
    tiny |= u["family"].isin(MATRIX_FAMILIES) & (u["flops"].fillna(1) == 0)  # a wrapper whose child computes
    v = u[~u["family"].isin(_TRANSPARENT) & ~tiny & u["bound"].ne("unknown")]
    fam, bound = v["family"].to_numpy(dtype=object), v["bound"].to_numpy(dtype=object)
    compute = np.isin(fam, list(MATRIX_FAMILIES))
    memory = np.isin(fam, list(_MEMORY_FAMILIES)) & (bound == "memory")
    read, written = v["bytes_read"].to_numpy(), v["bytes_written"].to_numpy()
    time_ns, names, ids = v["time_ns"].to_numpy(), v["name"].to_numpy(dtype=object), v["unit_id"].to_numpy()
    advice: list[Advice] = []

    def close(chain: list[int], consumer: int | None) -> None:
        members = [i for i in chain if memory[i]]
        if not members or (len(members) < 2 and consumer is None and not compute[chain[0]]):
            return
        seq = chain + ([consumer] if consumer is not None else [])
        inter = float(sum(2 * min(written[a], read[b]) for a, b in zip(seq, seq[1:])))
        cap = float(time_ns[members].sum())
        advice.append(Advice("fusion", f"fuse {' -> '.join(names[i] for i in seq)} ({where})", min(inter / spec.bandwidth() * 1e9, cap),
                             f"{len(members)} memory-bound ops, {cap / 1e6:.3g} ms; {inter / 1e6:.3g} MB of intermediates",
                             "saving = sum 2*min(written_prev, read_next) / bandwidth, at most the chain's time",
                             tuple(int(ids[i]) for i in seq)))

    step = v["step"].to_numpy()
    chain: list[int] = []
    for i in range(len(v)):
        if i and step[i] != step[i - 1]:  # an iteration ends: its last chain has no consumer here
            if any(memory[j] for j in chain):
                close(chain, None)
            chain = []
        if compute[i]:
            if chain:
                close(chain, i)
            chain = [i]  # a compute unit produces the next chain's input
        elif memory[i]:
            chain.append(i)
        else:
            if any(memory[j] for j in chain):
                close(chain, None)
            chain = []
    if any(memory[j] for j in chain):
        close(chain, None)
    return _merge_repeats(advice)


def _merge_repeats(advice: list[Advice]) -> list[Advice]:
    """One Advice per distinct chain (same ops in the same order), savings and units summed."""
    by_title: dict[str, list[Advice]] = {}
    for a in advice:
        by_title.setdefault(a.title, []).append(a)
    out = []
    for title, same in by_title.items():
        first = same[0]
        evidence = first.evidence if len(same) == 1 else f"{len(same)} occurrences; each: {first.evidence}"
        out.append(Advice(first.kind, title, float(sum(a.saving_ns for a in same)), evidence, first.formula,
                          tuple(u for a in same for u in a.units)))
    return out


def _runtime(u: pd.DataFrame, where: str) -> list[Advice]:
    rt = u[u["bound"] == "runtime"]
    if rt.empty:
        return []
    work = rt[["t_compute_ns", "t_memory_ns", "t_comm_ns"]].fillna(0).max(axis=1)
    saving = float((rt["time_ns"] - work).clip(lower=0).sum())
    return [Advice("runtime", f"cut dispatch overhead on {where}: fuse small ops, use CUDA graphs or a larger batch", saving,
                   f"{len(rt)} runtime-bound ops, {rt['time_ns'].sum() / 1e6:.3g} ms",
                   "saving = sum(time - max(t_compute, t_memory, t_comm))", tuple(int(i) for i in rt["unit_id"][:20]))]


def _tiling(u: pd.DataFrame, where: str) -> list[Advice]:
    slow = u[(u["bound"] == "compute") & (u["efficiency"] < 0.5)]
    if slow.empty:
        return []
    codes, first = key_codes(slow, ("name", "shapes"))
    saving = np.bincount(codes, weights=(slow["time_ns"] - slow["floor_ns"]).clip(lower=0).to_numpy(dtype=np.float64))
    calls = np.bincount(codes)
    efficiency = np.bincount(codes, weights=slow["efficiency"].to_numpy(dtype=np.float64)) / calls
    names, shapes = slow["name"].to_numpy(dtype=object)[first], slow["shapes"].to_numpy(dtype=object)[first]
    uid = slow["unit_id"].to_numpy()
    members = np.split(uid[np.argsort(codes, kind="stable")], np.cumsum(calls)[:-1])
    return [Advice("tiling", f"speed up {names[g]} {shapes[g]} on {where} (tiles, layout, kernel choice)", float(saving[g]),
                   f"{int(calls[g])} calls at {efficiency[g]:.0%} of the compute floor", "saving = sum(time - floor)",
                   tuple(int(i) for i in members[g]))
            for g in range(len(first))]


def _precision(u: pd.DataFrame, spec: HardwareSpec, where: str) -> list[Advice]:
    fp32 = u[u["family"].isin(MATRIX_FAMILIES) & (u["dtype"] == "fp32") & u["flops_effective"].notna()]
    if fp32.empty:
        return []
    lower = fp32["flops_effective"] / spec.peak("bf16", "matrix") * 1e9
    saving = float(np.minimum(fp32["t_compute_ns"] - lower, fp32["time_ns"]).clip(lower=0).sum())
    return [Advice("precision", f"run fp32 GEMMs/convolutions/attention in bf16 on {where}", saving,
                   f"{len(fp32)} fp32 units, {fp32['time_ns'].sum() / 1e6:.3g} ms",
                   "saving = sum(t_compute(fp32) - t_compute(bf16)), at most each unit's time", tuple(int(i) for i in fp32["unit_id"][:20]))]
