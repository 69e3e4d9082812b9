"""Measured (hardware counters) against modelled (analysis.cost) FLOPs and DRAM bytes, per op,
and the disagreements worth acting on as findings.

A unit (an op and the kernels it launched: analysis.units) is compared when at least one of its
kernels has counters (analysis.counters_join). Measured values are summed over its joined
launches; the model's are the unit's `flops` and its bytes at the outermost memory level
(analysis.memory_levels.level_bytes: compulsory bytes, or the GEMM I/O lower bound).

    flops_ratio = measured FLOPs / modelled FLOPs      bytes_ratio = measured DRAM / modelled DRAM

Findings (thresholds are where a cause is plausible, not noise; docs/counters.md):
    flops_ratio > 1 + MATCH, a GEMM tile explains it   -> 'tile padding' (analysis.gemm_tiles)
    flops_ratio > FLOPS_HIGH otherwise, GEMM/conv/attention -> 'extra FLOPs' (recompute, or the model is wrong;
        elementwise and reduction kernels are not flagged: their exp, division and reductions run as
        several instructions each where the model, as torch's flop counter, counts one per element)
    flops_ratio < FLOPS_LOW                             -> 'model wrong' (the model counts work not run)
    bytes_ratio > BYTES_HIGH                            -> 'redundant traffic' (re-reads: poor cache reuse)
    16-bit GEMM/conv/attention, matrix share < TENSOR_LOW -> 'no tensor cores'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.columns import columns
from analysis.gemm_tiles import MATCH, padding
from analysis.memory_levels import level_bytes
from profiler.model.hardware import HardwareSpec

FLOPS_HIGH, FLOPS_LOW, BYTES_HIGH, TENSOR_LOW = 1.10, 0.90, 1.5, 0.5
MATRIX_FAMILIES = ("gemm", "conv", "attention")

COMPARE_COLUMNS = columns("counters_vs_model")  # declared in analysis/columns.py


@dataclass(frozen=True)
class CounterFinding:
    """A disagreement between counters and the model, worth a look."""

    kind: str  # 'tile padding', 'extra FLOPs', 'model wrong', 'redundant traffic', 'no tensor cores'
    unit_id: int
    name: str
    message: str


def compare(
    units: pd.DataFrame,
    measured: pd.DataFrame,
    joined: pd.DataFrame,
    spec_for: Callable[[int, str], HardwareSpec | None],
) -> pd.DataFrame:
    """One row per unit with counters: COMPARE_COLUMNS (FLOP, byte; ratios NaN when the model
    has no value). `measured` is analysis.counters.measured, `joined` analysis.counters_join.join."""
    m = measured.merge(joined, on="launch")
    m = m[m["event_id"] >= 0].copy()
    if not len(m) or not len(units):
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    m["unit_id"] = np.where(m["op_id"] >= 0, m["op_id"], m["event_id"])
    matrix = [c for c in m.columns if c.startswith("flops_matrix_")]
    m["flops_matrix"] = m[matrix].sum(axis=1, min_count=1)
    # the unit's GEMM kernel: its launch with the most multiply-accumulate FLOPs (split-K reduces
    # and bias epilogues launched beside it do adds)
    lead = m.sort_values("flops_mac", ascending=False, na_position="last").drop_duplicates("unit_id")
    lead = lead.set_index("unit_id")[["kernel", "flops_mac"]]
    g = m.groupby("unit_id").agg(
        launches=("launch", "size"),
        flops_measured=("flops", lambda s: s.sum(min_count=1)),
        flops_matrix=("flops_matrix", lambda s: s.sum(min_count=1)),
        bytes_dram_measured=("bytes_dram", lambda s: s.sum(min_count=1)),
        bytes_l2_measured=("bytes_l2", lambda s: s.sum(min_count=1)),
    )
    u = units[units["unit_id"].isin(g.index)].copy()
    if not len(u):
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    u["bytes_dram_model"] = np.nan
    for (rank, device), part in u.groupby(["rank", "device"]):
        spec = spec_for(int(rank), str(device))
        if spec is not None and len(spec.memory):
            u.loc[part.index, "bytes_dram_model"] = level_bytes(part, spec)[:, 0]
    u = u.join(g, on="unit_id").join(lead, on="unit_id")
    out = pd.DataFrame(
        {
            "rank": u["rank"],
            "device": u["device"],
            "unit_id": u["unit_id"],
            "name": u["name"],
            "shapes": u["shapes"],
            "family": u["family"],
            "dtype": u["dtype"],
            "launches": u["launches"].astype("int64"),
            "kernel": u["kernel"],
            "flops_model": u["flops"].astype(float),
            "flops_measured": u["flops_measured"],
            "bytes_dram_model": u["bytes_dram_model"],
            "bytes_dram_measured": u["bytes_dram_measured"],
            "bytes_l2_measured": u["bytes_l2_measured"],
        }
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        out["flops_ratio"] = np.where(out["flops_model"] > 0, out["flops_measured"] / out["flops_model"], np.nan)
        out["bytes_ratio"] = np.where(
            out["bytes_dram_model"] > 0, out["bytes_dram_measured"] / out["bytes_dram_model"], np.nan
        )
        out["matrix_share"] = np.where(u["flops_measured"] > 0, u["flops_matrix"] / u["flops_measured"], np.nan)
    out["reason"] = [_reason(r, mac) for r, mac in zip(out.itertuples(), u["flops_mac"])]
    return out[COMPARE_COLUMNS].reset_index(drop=True)


def _reason(r, mac: float) -> str:  # noqa: ANN001 - a COMPARE row
    """Why measured and modelled FLOPs differ, when the tile of the unit's GEMM kernel explains its
    multiply-accumulate FLOPs `mac`; else ''."""
    if not (r.flops_ratio > 1 + MATCH) or r.family != "gemm" or not mac == mac:
        return ""
    p = padding(str(r.kernel), str(r.name), str(r.shapes), float(mac))
    return p.reason(float(r.flops_model)) if p else ""


def findings(table: pd.DataFrame) -> list[CounterFinding]:
    """The disagreements of a compare() table, as findings (module docstring), largest first."""
    out: list[tuple[float, CounterFinding]] = []
    for r in table.itertuples():
        name = str(r.name)
        if r.reason:
            out.append((r.flops_ratio, CounterFinding("tile padding", r.unit_id, name, r.reason)))
        elif r.flops_ratio > FLOPS_HIGH and r.family in MATRIX_FAMILIES:
            msg = f"measured FLOPs {r.flops_ratio:.3g}x the model's: padding, recomputation, or the model is wrong"
            out.append((r.flops_ratio, CounterFinding("extra FLOPs", r.unit_id, name, msg)))
        elif r.flops_ratio < FLOPS_LOW:
            msg = f"measured FLOPs {r.flops_ratio:.3g}x the model's: the model counts work the kernels did not run"
            out.append((1 / max(r.flops_ratio, 1e-9), CounterFinding("model wrong", r.unit_id, name, msg)))
        if r.bytes_ratio > BYTES_HIGH:
            msg = (
                f"DRAM traffic {r.bytes_ratio:.3g}x the model's ({r.bytes_dram_measured:.4g} vs "
                f"{r.bytes_dram_model:.4g} bytes): data re-read past the L2, poor cache reuse "
                "(AMD counts L2 misses: its Infinity Cache may serve some)"
            )
            out.append((r.bytes_ratio, CounterFinding("redundant traffic", r.unit_id, name, msg)))
        if r.family in MATRIX_FAMILIES and r.dtype in ("fp16", "bf16") and r.matrix_share < TENSOR_LOW:
            msg = f"a {r.dtype} {r.family} ran {r.matrix_share:.0%} of its FLOPs on tensor/matrix cores"
            out.append((2.0, CounterFinding("no tensor cores", r.unit_id, name, msg)))
    # one finding per (kind, op name and shapes, kernel): the largest, with how many ops repeat it
    ranked = sorted(out, key=lambda t: -t[0])
    shapes = dict(zip(table["unit_id"], zip(table["shapes"], table["kernel"])))
    seen: dict[tuple, int] = {}
    firsts: list[CounterFinding] = []
    for _, f in ranked:
        key = (f.kind, f.name, shapes.get(f.unit_id))
        if key in seen:
            seen[key] += 1
            continue
        seen[key] = 1
        firsts.append(f)
    return [
        f
        if seen[(f.kind, f.name, shapes.get(f.unit_id))] == 1
        else CounterFinding(
            f.kind, f.unit_id, f.name, f"{f.message} ({seen[(f.kind, f.name, shapes.get(f.unit_id))]} ops alike)"
        )
        for f in firsts
    ]
