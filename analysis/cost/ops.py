"""Cost model: FLOPs and bytes of one ATen op from what the PyTorch profiler records.

Inputs are Kineto's per-op arguments as recorded with ``record_shapes=True``: ``Input Dims``
(``shapes``), ``Input type`` (``dtypes``) and ``Concrete Inputs`` (``concrete``, scalar and list
arguments as strings, absent in older traces). `op_cost` returns a frozen `Cost`, or None when
the cost cannot be derived from the record (an op it does not know, missing shapes, a stride it
was not told): the model never guesses.

Conventions (every formula also sits beside its code):

- One multiply-add is two FLOPs. GEMM and convolution FLOPs are exactly what
  ``torch.utils.flop_counter.FlopCounterMode`` counts (bias adds not counted, convolution
  backward as grad_input + grad_weight per ``output_mask``).
- Attention: ``flops`` is the dense count (as flop_counter: 4*B*Hq*Lq*Lk*D forward);
  ``flops_effective`` applies the causal mask (the fraction of (query, key) pairs kept:
  top-left aligned ``tril`` for ``is_causal``, L*(L+1)/2 pairs for Lq = Lk = L). GQA (fewer KV
  heads) changes bytes, not FLOPs: FLOPs are per query head. For every other op
  ``flops_effective == flops``.
- Bytes are compulsory traffic: every tensor input read once, every output written once
  (no cache reuse, no re-reads). Element sizes come from the recorded dtype.
- Elementwise: 1 FLOP per output element (transcendentals count 1 too); reductions: 1 FLOP per
  input element; softmax 5 per element; norms 5 per element plus 1 per affine parameter
  applied (weight, bias); rms_norm 3 plus 1 for the weight; copies, gathers and casts 0.
- Kineto records a ``TensorList`` argument (cat, _foreach_*, _fused_adam*) without its element
  dtype; such ops cost None unless the caller says the element dtype (``list_dtype``).
- Nesting: an op that always does its work through one child carries that child's cost too
  (aten::linear and aten::addmm, aten::conv2d and aten::convolution, aten::to and
  aten::_to_copy), so a consumer must count each FLOP once, e.g. only the innermost costed op
  of a nest. Ops whose work is conditional and recorded as a child when it happens
  (contiguous, reshape, a `to` that keeps the dtype) and views/allocations cost 0.
- Names are ATen's as Kineto records them ('aten::mm'); 'aten.mm.default' is accepted too.
  Custom ops of serving stacks are costed by their recorded name ('_C::fused_add_rms_norm',
  'aiter::rmsnorm', see `custom`); autograd nodes and collectives are not costed here.

Layout (package `analysis.cost`): `base` (the `Cost` value, argument access), `compute` (GEMM, conv,
attention), `memory` (elementwise, reductions, norms, copies, optimizers), `custom`
(serving-stack custom ops, legacy ATen ops), `joins` (costs joined from a parent op's record); this module
dispatches by name and vectorises over an events table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pandas as pd

from analysis.cost.base import DTYPES, FAMILIES, Cost, Args, Unknown
from analysis.cost.compute import (
    ATTENTION_OPS,
    CONV_ARGS,
    attention_cost,
    bmm_cost,
    conv_cost,
    conv_backward_cost,
    einsum_cost,
    linear_cost,
    matmul_cost,
    mm_cost,
    scaled_mm_cost,
    causal_pairs,
)
from analysis.cost.custom import CUSTOM_OPS, LEGACY_ATEN
from analysis.cost.joins import joined_costs
from analysis.cost.graphs import captured_costs
from analysis.cost.moe import FUSED_EXPERTS, grouped_mm_cost, moe_forward_costs
from analysis.cost.memory import (
    ELEMENTWISE_OPS,
    FILL_OPS,
    NORM_OPS,
    REDUCTION_OPS,
    ZERO_OPS,
    cat_cost,
    copy_cost,
    elementwise_cost,
    embedding_cost,
    fill_cost,
    foreach_cost,
    fused_optimizer_cost,
    gather_cost,
    norm_cost,
    norm_backward_cost,
    pad_cost,
    quant_cost,
    reduction_cost,
    scalar_read_cost,
    softmax_cost,
    zero_cost,
)

__all__ = ["COST_COLUMNS", "FAMILIES", "Cost", "causal_pairs", "cost_table", "known_ops", "op_cost"]


# ---------------------------------------------------------------------------- dispatch


def _table() -> dict[str, Callable[[Args, str], Cost]]:
    t: dict[str, Callable[[Args, str], Cost]] = {}
    for n in ("mm", "addmm"):
        t[n] = mm_cost
    for n in ("bmm", "baddbmm"):
        t[n] = bmm_cost
    t["linear"] = lambda a, n_: linear_cost(a)
    t["matmul"] = lambda a, n_: matmul_cost(a)
    t["_scaled_mm"] = lambda a, n_: scaled_mm_cost(a)
    t["_grouped_mm"] = grouped_mm_cost
    t["einsum"] = lambda a, n_: einsum_cost(a)
    for n in CONV_ARGS:
        t[n] = conv_cost
    t["convolution_backward"] = lambda a, n_: conv_backward_cost(a)
    for n in ATTENTION_OPS:
        t[n] = attention_cost
    for n in ELEMENTWISE_OPS:
        t[n] = elementwise_cost
    for n in REDUCTION_OPS:
        t[n] = reduction_cost
    for n in (
        "softmax",
        "_softmax",
        "log_softmax",
        "_log_softmax",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
    ):
        t[n] = softmax_cost
    for n in NORM_OPS:
        t[n] = norm_cost
    for n in (
        "native_layer_norm_backward",
        "native_group_norm_backward",
        "native_batch_norm_backward",
        "cudnn_batch_norm_backward",
        "miopen_batch_norm_backward",
    ):
        t[n] = norm_backward_cost
    for n in ("embedding", "embedding_dense_backward"):
        t[n] = embedding_cost
    for n in ("copy_", "clone", "to", "_to_copy", "fill_", "zero_"):
        t[n] = copy_cost
    for n in (
        "index_select",
        "gather",
        "scatter",
        "scatter_",
        "scatter_add",
        "scatter_add_",
        "scatter_reduce",
        "scatter_reduce_",
    ):
        t[n] = gather_cost
    t["cat"] = cat_cost
    for n in ("constant_pad_nd", "pad"):
        t[n] = pad_cost
    for n in ZERO_OPS:
        t[n] = zero_cost
    t["_local_scalar_dense"] = scalar_read_cost
    for n in FILL_OPS:
        t[n] = fill_cost
    for n in ("quantize_per_tensor", "quantize_per_channel", "dequantize"):
        t[n] = quant_cost
    for n in ("_fused_adam_", "_fused_adamw_", "_fused_sgd_"):
        t[n] = fused_optimizer_cost
    t.update(LEGACY_ATEN)
    return t


_HANDLERS = _table()


def handler(name: str):
    if name.startswith("aten::"):
        base = name[6:]
    elif name.startswith("aten."):  # torch.export / FX spelling
        base = name[5:].split(".")[0]
    elif name.startswith("onnx::"):  # ONNX Runtime node events (analysis.cost.onnx)
        from analysis.cost.onnx import ONNX_OPS

        return ONNX_OPS.get(name[6:], (None, name[6:]))
    else:
        return CUSTOM_OPS.get(name) or FUSED_EXPERTS.get(name), name  # '_C::rms_norm', 'aiter::rmsnorm' ...
    h = _HANDLERS.get(base)
    if h is not None:
        return h, base
    if base.startswith("_foreach_"):
        return foreach_cost, base
    if base.endswith("_") and base[:-1] in ELEMENTWISE_OPS:  # in-place: add_, mul_, relu_ ...
        return elementwise_cost, base[:-1]
    return None, base


def known_ops() -> list[str]:
    """Every op name the model costs (plus in-place `<elementwise>_` and `_foreach_*`)."""
    return sorted(["aten::" + n for n in _HANDLERS] + list(CUSTOM_OPS) + list(FUSED_EXPERTS))


def op_cost(
    name: str, shapes: list | None, dtypes: list | None, concrete: list | None = None, list_dtype: str | None = None
) -> Cost | None:
    """FLOPs and bytes of one op from its recorded arguments; None when not derivable.

    `name` as recorded ('aten::mm'); `shapes`/`dtypes`/`concrete` are Kineto's 'Input Dims',
    'Input type' and 'Concrete Inputs' (concrete may be None). `list_dtype` is the element
    dtype of TensorList arguments, which Kineto does not record ('float', 'bf16', ...).
    """
    h, base = handler(name)
    if h is None or not shapes or not dtypes:
        return None
    if list_dtype is not None and list_dtype not in DTYPES:
        list_dtype = None
    try:
        return h(Args(shapes, dtypes, concrete, list_dtype), base)
    except (Unknown, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError, OverflowError):
        return None


# ---------------------------------------------------------------------------- vectorised


def _loads(text: Any) -> Any:
    if not isinstance(text, str) or text == "":
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _record_codes(events: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """One int64 code per row, equal for rows with the same (name, shapes, dtypes, concrete)."""
    parts = []
    for c in cols:
        col = events[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            k, n = col.cat.codes.to_numpy(np.int64), len(col.cat.categories)
        else:
            k, u = pd.factorize(col.astype(object).where(col.notna(), ""))
            k, n = k.astype(np.int64), len(u)
        parts.append((k + 1, n + 1))  # NaN (code -1) becomes its own value, 0
    if math.prod(n for _, n in parts) < 2**62:  # mixed radix into one int64
        key = np.zeros(len(events), dtype=np.int64)
        for k, n in parts:
            key = key * n + k
        return pd.factorize(key)[0].astype(np.int64)
    return np.unique(np.stack([k for k, _ in parts], axis=1), axis=0, return_inverse=True)[1].ravel()


COST_COLUMNS = ("flops", "flops_effective", "bytes_read", "bytes_written", "family", "dtype")


def cost_table(
    events: pd.DataFrame,
    list_dtype: str | None = None,
    tree: pd.DataFrame | None = None,
    flows: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Cost of every row of an events table, computed once per distinct op record.

    Reads columns `name`, `shapes` ('Input Dims' as compact JSON, '' when not recorded),
    `dtypes` ('Input type' as JSON) and, if present, `concrete` ('Concrete Inputs' as JSON).
    `tree` is the trace's events table (`id`, `parent_id`, ...): with it, ops whose record lacks
    a size their parent op records are costed from both (`joins.joined_costs`); rows are
    matched to it by `id`, or by `unit_id` for a units table. An events table with `id` and
    `parent_id` is its own tree. `flows` (the trace's flows table) lets forward convolutions be
    sized through their autograd backward node ('fwdbwd' flows).
    Returns a DataFrame with the input's index and columns:

    - `flops` (float64, FLOP): dense floating-point operations; NaN when not derivable.
    - `flops_effective` (float64, FLOP): with causal masks applied (attention); else = flops.
    - `bytes_read` (float64, byte): compulsory bytes read; NaN when not derivable.
    - `bytes_written` (float64, byte): compulsory bytes written; NaN when not derivable.
    - `family` (object): 'gemm', 'attention', 'conv', ... or 'unknown'.
    - `dtype` (object): normalised compute dtype ('fp32', 'bf16', ...) or 'unknown'.
    """
    cols = ["name", "shapes", "dtypes"] + (["concrete"] if "concrete" in events.columns else [])
    codes = _record_codes(events, cols)
    firsts = np.unique(codes, return_index=True)[1]  # first row of each distinct record
    records = {c: events[c].to_numpy(dtype=object)[firsts] for c in cols}
    rows = []
    for j in range(len(firsts)):
        rec = {c: records[c][j] for c in cols}
        c = op_cost(
            str(rec["name"]), _loads(rec["shapes"]), _loads(rec["dtypes"]), _loads(rec.get("concrete")), list_dtype
        )
        rows.append(
            (c.flops, c.flops_effective, c.bytes_read, c.bytes_written, c.family, c.dtype)
            if c is not None
            else (math.nan, math.nan, math.nan, math.nan, "unknown", "unknown")
        )
    per = list(zip(*rows)) if rows else [()] * len(COST_COLUMNS)
    out = {}
    for col, vals in zip(COST_COLUMNS, per):
        num = col in COST_COLUMNS[:4]
        arr = np.asarray(vals, dtype=np.float64 if num else object)
        out[col] = pd.Series(arr[codes], index=events.index, dtype=np.float64 if num else object)
    table = pd.DataFrame(out, index=events.index)
    if tree is None and {"id", "parent_id"} <= set(events.columns):
        tree = events
    if tree is not None and len(events):
        joined = joined_costs(events, tree, flows)
        for col in COST_COLUMNS if len(joined) else ():
            table.loc[joined.index, col] = joined[col].to_numpy()
        moe, _ = moe_forward_costs(events, tree)  # MoE layers, from the records they nest
        graph: dict = {}
        if flows is not None:  # kernels replayed from a graph whose capture the trace holds
            graph, _ = captured_costs(events, tree, flows, lambda ops: cost_table(ops, list_dtype))
        for idx, c in {**moe, **graph}.items():
            table.loc[idx, list(COST_COLUMNS)] = [getattr(c, f) for f in COST_COLUMNS]
    return table
