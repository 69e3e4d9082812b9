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

**FLOPs of a compiled kernel** (`fused_flops`, `with_flops`): the compiler collector records per
kernel the post-grad nodes it computes with their values' shapes (the fusion map's `work`); a
kernel's FLOPs are the sum over them of `node_flops`:

- GEMM (mm, addmm, bmm, baddbmm): 2*M*N*K, one multiply-add is two FLOPs (`compute.mm_cost`,
  `compute.bmm_cost` on the last two inputs);
- convolution: 2 * N * prod(out spatial) * prod(weight) (`compute.conv_flops`);
- attention forward (the SDPA family): the dense count, 4*B*H*Lq*Lk*D (`compute.attention_cost`);
- views and copies cost nothing; a reduction 1 per input element and every other node 1 per
  output element (a tuple-returning node, without an output value: per element of its largest
  input), as in analysis.cost's conventions.

NaN when a size it needs is symbolic. A post-grad graph decomposes softmax and norms into
these (amax, sub, exp, sum, div), so their FLOPs come out of the same rules.
"""

from __future__ import annotations

import math
from dataclasses import astuple

import numpy as np
import pandas as pd

from analysis.cost.base import DTYPES, Args, Cost, Unknown, numel
from analysis.cost.ops import COST_COLUMNS
from analysis.cost.compute import ATTENTION_OPS, CONV_ARGS, attention_cost, bmm_cost, conv_flops, mm_cost
from analysis.cost.memory import NORM_OPS, REDUCTION_OPS

#: The fusion-map columns this module reads (collectors/torch_compile/fusion_map.py KERNEL_COLUMNS;
#: `flops` from its `work`, `with_flops`, or as a file written before `work` carries it).
FUSION_COLUMNS = ("runtime_name", "kind", "flops", "bytes_read", "bytes_written", "dtype", "family")
_GENERATED = ("cpp", "triton", "npu", "iree")  # npu: the simulated accelerator's kernels (accelerator/sim/trace.py);
# iree: IREE's dispatch regions (collectors/iree/trace.py), whose family the collector reads from the IR
_STATED_FAMILIES = {"iree": ("attention", "gemm", "reduction", "elementwise")}
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
    fusion map as plain data, columns FUSION_COLUMNS (`flops` counted from `work` when it has
    one; plus optional `kernel`, `aten_ops`, `sites` (calls per run: the row's numbers are
    divided by it), and `rank`: then a unit joins only its own rank's rows). Only kinds 'cpp',
    'triton', 'npu' and 'iree' join; an 'iree' row's family is taken as stated (the collector
    classified the dispatch from its linalg ops), the others' from `kernel_family`.
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
    fusion = with_flops(fusion) if fusion is not None else fusion
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
        stated = _STATED_FAMILIES.get(str(r["kind"]), ())
        family = (
            str(r["family"])
            if str(r["family"]) in stated
            else kernel_family(str(r["family"]), str(r.get("kernel", r["runtime_name"])), r.get("aten_ops"))
        )
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


# ---------------------------------------------------------------------------- fused nodes' FLOPs

#: post-grad ops that compute nothing: views and layout (a clone is a copy: 0 FLOPs)
FUSED_VIEWS = frozenset(
    {
        "view",
        "_unsafe_view",
        "permute",
        "t",
        "transpose",
        "expand",
        "reshape",
        "squeeze",
        "unsqueeze",
        "slice",
        "select",
        "as_strided",
        "alias",
        "detach",
        "reinterpret_tensor",
        "split",
        "split_with_sizes",
        "unbind",
        "clone",
    }
)
#: post-grad reductions: 1 FLOP per input element (memory.reduction_cost's convention)
FUSED_REDUCTIONS = frozenset(
    {
        *("sum", "mean", "amax", "amin", "max", "min", "prod", "var", "var_mean", "std"),
        *("argmax", "argmin", "logsumexp", "any", "all", "norm", "_softmax", "_log_softmax"),
    }
)
_FUSED_MATMUL = {"mm": mm_cost, "addmm": mm_cost, "bmm": bmm_cost, "baddbmm": bmm_cost}
_FUSED_CONV = {"convolution", "_convolution", "mkldnn_convolution", "conv2d", "conv1d", "conv3d"}


def _value(v: object) -> tuple[str, list] | None:
    """(dtype, shape) of one recorded value ((dtype, shape) as the collector writes it, lists
    after a JSON round trip); None when it is not one."""
    if isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[1], (list, tuple)):
        return str(v[0]), list(v[1])
    return None


def _sized(*shapes: list) -> bool:
    """Every size known (a symbolic size is a string)."""
    return all(isinstance(d, int) and not isinstance(d, bool) for s in shapes for d in s)


def _args(values: list[tuple[str, list]]) -> Args:
    """The cost formulas' argument accessor over recorded values (dtype fp32 where the name is
    not one of ours: FLOPs do not depend on it)."""
    return Args([s for _, s in values], [d if d in DTYPES else "fp32" for d, _ in values], None, None)


def node_flops(op: str, inputs: object, output: object) -> float:
    """FLOPs of one post-grad node from its values' shapes (rules in the module docstring):
    `op` 'aten::mm', `inputs` ((dtype, shape), ...) in argument order, `output` (dtype, shape)
    or None. NaN when a size it needs is symbolic or the shapes do not fit the op."""
    base = str(op).split("::")[-1].rstrip("_")
    ins = [v for v in (_value(i) for i in (inputs if isinstance(inputs, (list, tuple)) else ())) if v]
    out = _value(output)
    if base in FUSED_VIEWS:
        return 0.0
    try:
        if base in _FUSED_MATMUL:
            # the last two inputs are the operands (addmm/baddbmm: the bias comes first)
            if len(ins) < 2 or out is None or not _sized(ins[-2][1], ins[-1][1]):
                return math.nan
            return _FUSED_MATMUL[base](_args(ins[-2:]), "mm" if base in ("mm", "addmm") else "bmm").flops
        if base in _FUSED_CONV:
            # the output's spatial sizes say what stride and padding did: 2 * N * prod(spatial) * prod(weight)
            if len(ins) < 2 or out is None or len(out[1]) < 3 or not _sized(out[1], ins[1][1]):
                return math.nan
            return float(conv_flops(out[1][0], numel(out[1][2:]), ins[1][1]))
        if base in ATTENTION_OPS and not ATTENTION_OPS[base][2]:  # forward: q, k, v first
            if len(ins) < 3 or not _sized(*(v[1] for v in ins[:3])):
                return math.nan
            return attention_cost(_args(ins), base).flops
    except (Unknown, ValueError, TypeError, IndexError):
        return math.nan
    if base in FUSED_REDUCTIONS:
        return float(numel(ins[0][1])) if ins and _sized(ins[0][1]) else math.nan
    if out is not None:
        return float(numel(out[1])) if _sized(out[1]) else math.nan
    sizes = [float(numel(s)) if _sized(s) else math.nan for _, s in ins]
    return max(sizes) if sizes else math.nan  # a tuple-returning node: sized by its input


def fused_flops(work: object) -> float:
    """FLOPs of one compiled kernel: the sum of `node_flops` over its `work` entries (the fusion
    map's column); NaN when `work` is not a list of them (unknown nodes) or a term is NaN."""
    if not isinstance(work, (list, tuple, np.ndarray)):
        return math.nan
    total = 0.0
    for entry in work:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            return math.nan
        total += node_flops(*entry)
    return total


def with_flops(fusion: pd.DataFrame) -> pd.DataFrame:
    """`fusion` (the fusion map) with its `flops` column (FLOP, one run of the graph) counted from
    `work` (`fused_flops`); a copy. Rows without `work` keep the `flops` they carry (a file
    written before the column); a table without `work` is returned as it is."""
    if "work" not in fusion.columns:
        return fusion
    has = np.array([isinstance(w, (list, tuple, np.ndarray)) for w in fusion["work"]], dtype=bool)
    counted = np.array([fused_flops(w) if h else math.nan for w, h in zip(fusion["work"], has)], dtype=np.float64)
    out = fusion.copy()
    if "flops" in out.columns:
        carried = pd.to_numeric(out["flops"], errors="coerce").to_numpy(dtype=np.float64)
        out["flops"] = np.where(has, counted, carried)
    else:
        at = out.columns.get_loc("bytes_read") if "bytes_read" in out.columns else len(out.columns)
        out.insert(int(at), "flops", counted)
    return out
