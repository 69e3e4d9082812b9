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
  'aiter::rmsnorm', see `cost_custom`); autograd nodes and collectives are not costed here.

Layout: `cost_base` (the `Cost` value, dtypes, argument access), `cost_compute` (GEMM, conv,
attention), `cost_memory` (elementwise, reductions, norms, copies, optimizers), `cost_custom`
(serving-stack custom ops, legacy ATen ops, costs joined from a parent op's record); this module
dispatches by name and vectorises over an events table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pandas as pd

from analysis.cost.base import _DTYPES, FAMILIES, Cost, _Args, _Unknown
from analysis.cost.compute import (
    _ATTN,
    _CONV_ARGS,
    _attention,
    _bmm,
    _conv,
    _conv_backward,
    _einsum,
    _linear,
    _matmul,
    _mm,
    _scaled_mm,
    causal_pairs,
)
from analysis.cost.custom import CUSTOM_OPS, LEGACY_ATEN
from analysis.cost.joins import joined_costs
from analysis.cost.memory import (
    _ELEMENTWISE,
    _FILLS,
    _NORMS,
    _REDUCTIONS,
    _ZERO,
    _cat,
    _copy,
    _elementwise,
    _embedding,
    _fill,
    _foreach,
    _fused_optimizer,
    _gather,
    _norm,
    _norm_backward,
    _pad,
    _quant,
    _reduction,
    _scalar_read,
    _softmax,
    _zero,
)

__all__ = ["COST_COLUMNS", "FAMILIES", "Cost", "causal_pairs", "cost_table", "known_ops", "op_cost"]


# ---------------------------------------------------------------------------- dispatch

def _table() -> dict[str, Callable[[_Args, str], Cost]]:
    t: dict[str, Callable[[_Args, str], Cost]] = {}
    for n in ("mm", "addmm"):
        t[n] = _mm
    for n in ("bmm", "baddbmm"):
        t[n] = _bmm
    t["linear"] = lambda a, n_: _linear(a)
    t["matmul"] = lambda a, n_: _matmul(a)
    t["_scaled_mm"] = lambda a, n_: _scaled_mm(a)
    t["einsum"] = lambda a, n_: _einsum(a)
    for n in _CONV_ARGS:
        t[n] = _conv
    t["convolution_backward"] = lambda a, n_: _conv_backward(a)
    for n in _ATTN:
        t[n] = _attention
    for n in _ELEMENTWISE:
        t[n] = _elementwise
    for n in _REDUCTIONS:
        t[n] = _reduction
    for n in ("softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data",
              "_log_softmax_backward_data"):
        t[n] = _softmax
    for n in _NORMS:
        t[n] = _norm
    for n in ("native_layer_norm_backward", "native_group_norm_backward",
              "native_batch_norm_backward", "cudnn_batch_norm_backward", "miopen_batch_norm_backward"):
        t[n] = _norm_backward
    for n in ("embedding", "embedding_dense_backward"):
        t[n] = _embedding
    for n in ("copy_", "clone", "to", "_to_copy", "fill_", "zero_"):
        t[n] = _copy
    for n in ("index_select", "gather", "scatter", "scatter_", "scatter_add", "scatter_add_",
              "scatter_reduce", "scatter_reduce_"):
        t[n] = _gather
    t["cat"] = _cat
    for n in ("constant_pad_nd", "pad"):
        t[n] = _pad
    for n in _ZERO:
        t[n] = _zero
    t["_local_scalar_dense"] = _scalar_read
    for n in _FILLS:
        t[n] = _fill
    for n in ("quantize_per_tensor", "quantize_per_channel", "dequantize"):
        t[n] = _quant
    for n in ("_fused_adam_", "_fused_adamw_", "_fused_sgd_"):
        t[n] = _fused_optimizer
    t.update(LEGACY_ATEN)
    return t


_HANDLERS = _table()


def _handler(name: str):
    if name.startswith("aten::"):
        base = name[6:]
    elif name.startswith("aten."):                          # torch.export / FX spelling
        base = name[5:].split(".")[0]
    else:
        return CUSTOM_OPS.get(name), name                  # '_C::rms_norm', 'aiter::rmsnorm' ...
    h = _HANDLERS.get(base)
    if h is not None:
        return h, base
    if base.startswith("_foreach_"):
        return _foreach, base
    if base.endswith("_") and base[:-1] in _ELEMENTWISE:   # in-place: add_, mul_, relu_ ...
        return _elementwise, base[:-1]
    return None, base


def known_ops() -> list[str]:
    """Every op name the model costs (plus in-place `<elementwise>_` and `_foreach_*`)."""
    return sorted(["aten::" + n for n in _HANDLERS] + list(CUSTOM_OPS))


def op_cost(name: str, shapes: list | None, dtypes: list | None,
            concrete: list | None = None, list_dtype: str | None = None) -> Cost | None:
    """FLOPs and bytes of one op from its recorded arguments; None when not derivable.

    `name` as recorded ('aten::mm'); `shapes`/`dtypes`/`concrete` are Kineto's 'Input Dims',
    'Input type' and 'Concrete Inputs' (concrete may be None). `list_dtype` is the element
    dtype of TensorList arguments, which Kineto does not record ('float', 'bf16', ...).
    """
    h, base = _handler(name)
    if h is None or not shapes or not dtypes:
        return None
    if list_dtype is not None and list_dtype not in _DTYPES:
        list_dtype = None
    try:
        return h(_Args(shapes, dtypes, concrete, list_dtype), base)
    except (_Unknown, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError,
            OverflowError):
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
        parts.append((k + 1, n + 1))            # NaN (code -1) becomes its own value, 0
    if math.prod(n for _, n in parts) < 2**62:  # mixed radix into one int64
        key = np.zeros(len(events), dtype=np.int64)
        for k, n in parts:
            key = key * n + k
        return pd.factorize(key)[0].astype(np.int64)
    return np.unique(np.stack([k for k, _ in parts], axis=1), axis=0, return_inverse=True)[1].ravel()


COST_COLUMNS = ("flops", "flops_effective", "bytes_read", "bytes_written", "family", "dtype")


def cost_table(events: pd.DataFrame, list_dtype: str | None = None,
               tree: pd.DataFrame | None = None, flows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Cost of every row of an events table, computed once per distinct op record.

    Reads columns `name`, `shapes` ('Input Dims' as compact JSON, '' when not recorded),
    `dtypes` ('Input type' as JSON) and, if present, `concrete` ('Concrete Inputs' as JSON).
    `tree` is the trace's events table (`id`, `parent_id`, ...): with it, ops whose record lacks
    a size their parent op records are costed from both (`cost_joins.joined_costs`); rows are
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
    firsts = np.unique(codes, return_index=True)[1]          # first row of each distinct record
    records = {c: events[c].to_numpy(dtype=object)[firsts] for c in cols}
    rows = []
    for j in range(len(firsts)):
        rec = {c: records[c][j] for c in cols}
        c = op_cost(str(rec["name"]), _loads(rec["shapes"]), _loads(rec["dtypes"]),
                    _loads(rec.get("concrete")), list_dtype)
        rows.append((c.flops, c.flops_effective, c.bytes_read, c.bytes_written, c.family, c.dtype)
                    if c is not None else (math.nan, math.nan, math.nan, math.nan,
                                           "unknown", "unknown"))
    per = list(zip(*rows)) if rows else [()] * len(COST_COLUMNS)
    out = {}
    for c, vals in zip(COST_COLUMNS, per):
        num = c in COST_COLUMNS[:4]
        arr = np.asarray(vals, dtype=np.float64 if num else object)
        out[c] = pd.Series(arr[codes], index=events.index, dtype=np.float64 if num else object)
    table = pd.DataFrame(out, index=events.index)
    if tree is None and {"id", "parent_id"} <= set(events.columns):
        tree = events
    if tree is not None and len(events):
        joined = joined_costs(events, tree, flows)
        for c in COST_COLUMNS if len(joined) else ():
            table.loc[joined.index, c] = joined[c].to_numpy()
    return table
