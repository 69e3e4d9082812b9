"""FLOPs, bytes and the roofline of IREE dispatch regions (collectors.iree), and the comparison
with the same model run eagerly in PyTorch.

Per linalg op (loop sizes read back from the IR: operand shapes through the indexing maps):

    flops = iterations * body_flops      iterations = product of the loop sizes; body_flops = the
                                         float arithmetic in the op's region (addf, mulf, maximumf,
                                         math.exp, ...; compares and selects are 0, as
                                         torch.utils.flop_counter counts relu); named
                                         contractions: 2 (a multiply and an add), so a matmul
                                         (M, N, K loops) is 2*M*N*K
    linalg.fill, copies, transposes: 0 FLOPs
    iree_linalg_ext.attention (Q [BH, Sq, Dqk], K [BH, Sk, Dqk], V [BH, Sk, Dv] -> O [BH, Sq, Dv]):
        2*BH*Sq*Sk*Dqk + 2*BH*Sq*Sk*Dv      the two matmuls, Q K^T and P V (= 4*B*H*Sq*Sk*D when
                                            Dqk = Dv = D: torch.utils.flop_counter's SDPA count,
                                            analysis.cost.compute.attention_cost)
      + 5*BH*Sq*Sk                          the softmax per score: scale, max, subtract, exp, sum
      + BH*Sq*Dv                            the normalisation: one divide per output element

Per dispatch: flops = the sum over its ops; bytes = the sizes of its bindings (inputs read once,
outputs written once: the compulsory traffic; what the fused ops pass between them stays in
registers and cache); family 'attention' when it holds an attention op, 'gemm' when it holds a
contraction (a reduction loop whose body is one multiply and one add: softmax's five and a sum's
one are reductions), else 'reduction' with any reduction loop, else 'elementwise'. The floors are
analysis.roofline.classify's on the CPU's HardwareSpec (attention and gemm at the matrix peak).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.roofline import classify
from profiler.model.hardware import HardwareSpec

#: MLIR element type -> the dtype names of the specs' peaks
DTYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64", "i8": "int8"}


def op_costs(ops: pd.DataFrame) -> pd.DataFrame:
    """`ops` (collectors.iree.dispatches.OP_COLUMNS) with `flops` (FLOP, module docstring),
    `contraction` (bool: reduction loops and one multiply-add per iteration) and `attention`
    (bool: an attention op)."""
    out = ops.copy()
    out["flops"] = (out["iterations"] * out["body_flops"]).astype(np.float64)
    roles = out["attention"].fillna("").astype(str) if "attention" in out else pd.Series("", index=out.index)
    out["attention"] = roles != ""
    for i, r in roles[roles != ""].items():
        out.loc[i, "flops"] = float(attention_flops(*(int(n) for n in r.split("x"))))
    out["contraction"] = (out["reductions"] > 0) & (out["body_flops"] == 2)
    return out


def attention_flops(bh: int, sq: int, sk: int, dqk: int, dv: int) -> int:
    """FLOPs of one attention op (module docstring): the two matmuls, the softmax per score and
    the normalisation per output element."""
    return 2 * bh * sq * sk * dqk + 2 * bh * sq * sk * dv + 5 * bh * sq * sk + bh * sq * dv


def dispatch_table(dispatches: list, ops: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """One row per dispatch.

    Columns: name, fused_ops (list of 'linalg.matmul 16x64xf32,128x64xf32 -> 16x128xf32'),
    locations (list of 'module file:line'), main_location (the location of the op doing the
    work, `_main_location`), flops (FLOP), bytes_read, bytes_written, bytes
    (byte), family, dtype, runs (timed runs), mean_ns, min_ns (ns; NaN when not timed),
    total_ns (ns, over the runs), per_call_ns (total_ns / calls of the function: IREE runs one
    deduplicated executable for identical regions, e.g. three same-sized projections, so a
    dispatch can run several times per call), per_call (runs per call).
    """
    costed = op_costs(ops)
    timing = events.groupby("dispatch")["dur_ns"].agg(["count", "mean", "min", "sum"]) if len(events) else None
    calls = int(events["submission"].nunique()) if len(events) else 0
    rows = []
    for d in dispatches:
        mine = costed[costed["dispatch"] == d.name]
        family = (
            "attention"
            if mine["attention"].any()
            else "gemm"
            if mine["contraction"].any()
            else ("reduction" if (mine["reductions"] > 0).any() else "elementwise")
        )
        main = mine["attention"] | mine["contraction"]
        first = mine[main] if main.any() else mine
        element = str(first["element"].iloc[0]) if len(first) else "f32"
        t = timing.loc[d.name] if timing is not None and d.name in timing.index else None
        rows.append(
            {
                "name": d.name,
                "fused_ops": [f"{r.op} {r.inputs} -> {r.output}" for r in mine.itertuples()],
                "locations": list(d.locations),
                "main_location": _main_location(mine, d.locations),
                "flops": float(mine["flops"].sum()),
                "bytes_read": float(d.bytes_read),
                "bytes_written": float(d.bytes_written),
                "bytes": float(d.bytes_read + d.bytes_written),
                "family": family,
                "dtype": DTYPES.get(element, element),
                "runs": int(t["count"]) if t is not None else 0,
                "mean_ns": float(t["mean"]) if t is not None else np.nan,
                "min_ns": float(t["min"]) if t is not None else np.nan,
                "total_ns": float(t["sum"]) if t is not None else np.nan,
                "per_call_ns": float(t["sum"]) / calls if t is not None and calls else np.nan,
                "per_call": float(t["count"]) / calls if t is not None and calls else np.nan,
            }
        )
    return pd.DataFrame(rows)


def _main_location(mine: pd.DataFrame, locations) -> str:
    """The location of the op that does the dispatch's work: its attention or contraction, else
    the op with the most FLOPs, else its first op that is not a linalg.fill (the fill of a
    matmul's accumulator is a constant IREE shares between dispatches, located where it was
    first made, so it may name another layer); '' when none has a location."""
    ops = mine[mine["op"] != "linalg.fill"] if (mine["op"] != "linalg.fill").any() else mine
    if len(ops) == 0:
        return locations[0] if len(locations) else ""
    rank = ops.assign(_work=ops["attention"].astype(int) * 2 + ops["contraction"].astype(int))
    best = rank.sort_values(["_work", "flops"], ascending=False, kind="stable").iloc[0]
    locs = [loc for loc in str(best["locations"]).split(";") if loc]
    return locs[0] if locs else (locations[0] if len(locations) else "")


def dispatch_roofline(table: pd.DataFrame, spec: HardwareSpec) -> pd.DataFrame:
    """`table` (dispatch_table) placed on `spec`'s roofline by analysis.roofline.classify, each
    dispatch's measured time its mean run: adds floor_ns, t_compute_ns, t_memory_ns, bound,
    efficiency (floor / mean time), intensity (FLOP/byte), memory_level, hardware."""
    units = pd.DataFrame(
        {
            "rank": np.zeros(len(table), dtype=np.int32),
            "device": ["cpu"] * len(table),
            "name": table["name"].to_numpy(dtype=object),
            "time_ns": table["mean_ns"].to_numpy(dtype=np.float64),
        }
    )
    costs = pd.DataFrame(
        {
            "family": table["family"].to_numpy(dtype=object),
            "dtype": table["dtype"].to_numpy(dtype=object),
            "flops": table["flops"].to_numpy(dtype=np.float64),
            "flops_effective": table["flops"].to_numpy(dtype=np.float64),
            "bytes_read": table["bytes_read"].to_numpy(dtype=np.float64),
            "bytes_written": table["bytes_written"].to_numpy(dtype=np.float64),
        }
    )
    c = classify(units, costs, lambda rank, device: spec)
    out = table.copy()
    for col in (
        "intensity",
        "t_compute_ns",
        "t_memory_ns",
        "floor_ns",
        "bound",
        "efficiency",
        "memory_level",
        "hardware",
    ):
        out[col] = c[col].to_numpy()
    return out
