"""Costs of Inductor's generated kernels, from the fusion map a compiled trace carries.

`perf profile --compile` writes the fusion map into the trace file (its `perfCompile` field,
which the Kineto reader keeps in `trace.metadata['ranks'][<rank>]`): one row per kernel with
the name it runs under and its FLOPs and compulsory bytes for one run of its graph, which for a
generated kernel is one call. A C++ kernel runs as the record_function range
'graph_<g>_<kernel>' and a Triton kernel under its own name; a unit whose name equals a row's
`runtime_name` (exactly, as analysis/fusion.py joins them) is that kernel, and
takes its cost, so it classifies like any op. The op-name cost model (analysis.cost) cannot
cost these names: they are the compiler's, not ATen's.

Extern kernels ('extern_kernels.addmm' running as aten::addmm) are real ATen ops that
analysis.cost already costs from their recorded shapes: left alone here.
"""

from __future__ import annotations

import math
from dataclasses import astuple

import numpy as np
import pandas as pd

from analysis.cost.base import Cost
from analysis.cost.ops import COST_COLUMNS
from analysis.cost.compute import ATTENTION_OPS, CONV_ARGS
from analysis.cost.memory import NORM_OPS, REDUCTION_OPS

#: The fusion-map columns this module reads (collectors/torch_compile/fusion_map.py KERNEL_COLUMNS).
FUSION_COLUMNS = ("runtime_name", "kind", "flops", "bytes_read", "bytes_written", "dtype", "family")
_GENERATED = ("cpp", "triton")
# ops whose presence makes a fused kernel a reduction (the post-grad graph decomposes softmax
# and norms into amax/sum/var_mean, but keep the whole names too)
_REDUCING = set(REDUCTION_OPS) | set(NORM_OPS) | {"_softmax", "_log_softmax", "softmax", "log_softmax"}
# ops that make a kernel a matrix-unit kernel of the cost model's families (analysis.cost.compute)
_ATTENTION = set(ATTENTION_OPS)
_CONV = set(CONV_ARGS) | {"convolution_backward", "cudnn_convolution_transpose", "miopen_convolution"}
_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "matmul", "linear"}


def kernel_family(fusion_family: str, kernel: str, aten_ops: object) -> str:
    """The cost-model family of one compiled kernel (generated or extern), from the ATen ops it
    computes: 'attention' (an SDPA op), 'conv' (a convolution), 'gemm' (a matmul, or the fusion
    map says so: a matmul template), all three at the matrix peak; 'reduction' when any op it
    computes reduces (or Inductor named it a reduction, 'triton_red_'/'triton_per_'); else
    'elementwise' (pointwise only)."""
    ops = aten_ops if isinstance(aten_ops, (list, tuple, np.ndarray)) else ()
    bases = {str(o).split("::")[-1].split(".")[0] for o in ops}
    bases |= {b.rstrip("_") for b in bases}
    if bases & _ATTENTION:
        return "attention"
    if bases & _CONV:
        return "conv"
    if fusion_family == "gemm" or bases & _MATMUL:
        return "gemm"
    if bases & _REDUCING or str(kernel).startswith(("triton_red_", "triton_per_")):
        return "reduction"
    return "elementwise"


def kernel_costs(units: pd.DataFrame, fusion: pd.DataFrame) -> pd.DataFrame:
    """Cost of every row of `units` that is a generated kernel of `fusion`, by exact name.

    `units`: `name`, and `rank` when `fusion` has one (analysis.units.units). `fusion`: the
    fusion map as plain data, columns FUSION_COLUMNS (plus optional `kernel`, `aten_ops`,
    `sites` (calls per run: the row's numbers are divided by it), and `rank`: then a unit joins
    only its own rank's rows). Only kinds 'cpp' and 'triton' join.
    A name with two different costs among the rows it joins is ambiguous and stays unknown.

    Returns a DataFrame with the index of `units` and analysis.cost.COST_COLUMNS:
    flops = flops_effective (FLOP per call), bytes_read, bytes_written (byte per call:
    compulsory traffic, the fusion map's conventions match analysis.cost's), family
    (`kernel_family`), dtype (the kernel's first output, 'fp32'...); rows that join no kernel
    have NaN and 'unknown'.
    """
    out = pd.DataFrame(
        {
            c: (
                np.full(len(units), np.nan)
                if c in COST_COLUMNS[:4]
                else pd.Series(["unknown"] * len(units), dtype=object).to_numpy()
            )
            for c in COST_COLUMNS
        },
        index=units.index,
    )
    if fusion is None or fusion.empty or units.empty or not set(FUSION_COLUMNS) <= set(fusion.columns):
        return out
    by_rank = "rank" in fusion.columns and "rank" in units.columns
    table: dict[tuple, tuple] = {}
    ambiguous: set[tuple] = set()
    rows = fusion[fusion["kind"].astype(str).isin(_GENERATED)].copy()
    for c in ("flops", "bytes_read", "bytes_written"):  # a hand-edited file may hold anything: not a number -> NaN
        rows[c] = pd.to_numeric(rows[c], errors="coerce").astype(np.float64)
    for r in rows.to_dict(orient="records"):
        key = (int(r["rank"]), str(r["runtime_name"])) if by_rank else (str(r["runtime_name"]),)
        # the row is one run of its graph; a kernel Inductor reuses runs `sites` times per run,
        # each call the same code on the same shapes: per call = per run / sites
        sites = pd.to_numeric(pd.Series([r.get("sites")]), errors="coerce").iloc[0]
        per = float(sites) if np.isfinite(sites) and sites >= 1 else 1.0
        family = kernel_family(str(r["family"]), str(r.get("kernel", r["runtime_name"])), r.get("aten_ops"))
        dtype = r["dtype"] if isinstance(r["dtype"], str) and r["dtype"] else "unknown"
        per_run = Cost.of(r["flops"], r["bytes_read"], r["bytes_written"], family, dtype)
        cost = astuple(per_run * (1 / per))
        if key in table and not _same(table[key], cost):
            ambiguous.add(key)
        table.setdefault(key, cost)
    for key in ambiguous:
        del table[key]
    names = units["name"].astype(str).to_numpy()
    keys = (
        zip(units["rank"].astype(int).to_numpy().tolist(), names.tolist())
        if by_rank
        else ((n,) for n in names.tolist())
    )
    rows = [(i, table[k]) for i, k in enumerate(keys) if k in table]
    for col_i, col in enumerate(COST_COLUMNS):
        vals = out[col].to_numpy(dtype=np.float64 if col_i < 4 else object, copy=True)
        for i, cost in rows:
            vals[i] = cost[col_i]
        out[col] = vals
    return out


def with_kernel_costs(costs: pd.DataFrame, units: pd.DataFrame, fusion: pd.DataFrame | None) -> pd.DataFrame:
    """`costs` (analysis.cost.cost_table, rows aligned with `units`) with the rows that are
    generated kernels of `fusion` costed by `kernel_costs`; a copy. Rows the op-name model
    already costs keep their cost (a kernel name is never an op name it knows)."""
    if fusion is None or fusion.empty:
        return costs
    k = kernel_costs(units.reset_index(drop=True), fusion)
    out = costs.reset_index(drop=True).copy()
    take = ((k["family"] != "unknown") & out["flops"].isna()).to_numpy()
    for col in COST_COLUMNS:
        out.loc[take, col] = k.loc[take, col].to_numpy()
    return out


def _same(a: tuple, b: tuple) -> bool:
    """Equal costs, NaN equal to NaN."""
    return all(
        (x == y) or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(a, b)
    )
