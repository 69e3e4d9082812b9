"""Costs that need a second record: ops whose own record lacks a size a related record holds.

Exact or nothing: a join is made only when both records agree on what they share (shapes and
dtypes of the common tensors), else the row stays unknown (analysis.cost's rule: never guess).

- The legacy cuDNN convolution backward halves (`aten::cudnn_convolution_backward_input` /
  `_weight`) record the sizes they output only as lists Kineto leaves empty; their parent
  `aten::cudnn_convolution_backward` records the tensors (a join over the events tree).
- The forward cuDNN/MIOpen convolutions of legacy traces record no stride or padding, so their
  output size is unknown; the grad_output their autograd node's backward op records is that
  output (a join through the 'fwdbwd' flows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.cost.base import Cost, Args, numel, parse_concrete, Unknown

# ---------------------------------------------------------------------------- formulas

_CONV_PARENT = "aten::cudnn_convolution_backward"
_CONV_HALVES = {"aten::cudnn_convolution_backward_input": "input", "aten::cudnn_convolution_backward_weight": "weight"}


def _conv_backward_half(child: Args, parent: Args, half: str) -> Cost:
    # Parent: cudnn_convolution_backward(self [N, C_in, *sp], grad_output [N, C_out, *sp_out],
    # weight [C_out, C_in/groups, *k], padding, stride, dilation, groups, ..., output_mask).
    # Children (legacy ATen): cudnn_convolution_backward_input(input_size, grad_output, weight,
    # ...) and cudnn_convolution_backward_weight(weight_size, grad_output, input, ...); the size
    # lists are not recorded, the parent's tensors give them. The child's recorded tensors must
    # be the parent's (same shapes), else nothing is joined. groups = C_in / weight.shape[1].
    # FLOPs as flop_counter's convolution_backward (and analysis.cost.compute._conv_backward):
    #   input:  2 * numel(grad_output) * numel(weight[1:])   (= 2 * N * prod(sp_out) * numel(weight))
    #   weight: 2 * N * C_in * C_out * prod(k) * prod(sp_out) (full C_in, as flop_counter)
    # Bytes: input reads grad_output and weight, writes grad_input (self-sized);
    #        weight reads grad_output and input, writes grad_weight (weight-sized).
    x, go, w = parent.shape(0), parent.shape(1), parent.shape(2)
    if not (len(x) == len(go) == len(w) >= 3) or child.shape(1) != go:
        raise Unknown
    if child.shape(2) != (w if half == "input" else x) or child.dtypes[1:3] != parent.dtypes[1:3]:
        raise Unknown
    n, c_in, c_out = x[0], x[1], go[1]
    if go[0] != n or w[0] != c_out or w[1] <= 0 or c_in % w[1] or c_out % (c_in // w[1]):
        raise Unknown
    es = parent.size(0)
    if half == "input":
        return Cost.of(
            2 * numel(go) * numel(w[1:]), parent.nbytes(1) + parent.nbytes(2), numel(x) * es, "conv", parent.dtype(0)
        )
    return Cost.of(
        2 * n * c_in * c_out * numel(w[2:]) * numel(go[2:]),
        parent.nbytes(1) + parent.nbytes(0),
        numel(w) * es,
        "conv",
        parent.dtype(0),
    )


#: forward conv op -> the op under its autograd backward node that records grad_output
_FWD_CONV = {
    "aten::cudnn_convolution": "aten::cudnn_convolution_backward",
    "aten::miopen_convolution": "aten::miopen_convolution_backward",
}


def _conv_forward_from_backward(fwd: Args, bwd: Args, name: str) -> Cost:
    # Forward: cudnn_convolution(self [N, C_in, *sp], weight [C_out, C_in/groups, *k], padding,
    # stride, dilation, groups, ...); miopen_convolution(self, weight, bias, padding, ...).
    # Legacy traces record no padding/stride, so the output size is unknown from this record;
    # its autograd node's cudnn_/miopen_convolution_backward(self, grad_output, weight, ...)
    # records grad_output, whose shape is the output's [N, C_out, *sp_out]. Both records must
    # agree (same self and weight shapes and dtypes), else nothing is joined.
    # FLOPs as analysis.cost.compute._conv (flop_counter's conv_flop_count, bias not counted):
    #   2 * N * C_out * prod(sp_out) * (C_in/groups) * prod(k) = 2 * numel(grad_output) * numel(weight[1:])
    # groups = C_in / weight.shape[1]. Bytes: reads self + weight (+ bias), writes the output.
    x, w, go = fwd.shape(0), fwd.shape(1), bwd.shape(1)
    if not (len(x) == len(go) == len(w) >= 3) or bwd.shape(0) != x or bwd.shape(2) != w:
        raise Unknown
    if bwd.dtypes[:3:2] != fwd.dtypes[:2] or go[0] != x[0] or go[1] != w[0] or min(go) <= 0:
        raise Unknown
    if w[1] <= 0 or x[1] % w[1] or w[0] % (x[1] // w[1]):
        raise Unknown  # C_in, C_out not divisible by groups
    bias = fwd.nbytes(2) if name == "aten::miopen_convolution" else 0
    return Cost.of(
        2 * numel(go) * numel(w[1:]),
        fwd.nbytes(0) + fwd.nbytes(1) + bias,
        numel(go) * fwd.size(0),
        "conv",
        fwd.dtype(0),
    )


_FIELDS = [f.name for f in dataclasses.fields(Cost)]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("family", "dtype") else np.float64) for c in _FIELDS})


def _frame(out: dict) -> pd.DataFrame:
    if not out:
        return _empty()
    return pd.DataFrame(
        [[getattr(c, f) for f in _FIELDS] for c in out.values()], index=list(out.keys()), columns=_FIELDS
    )


# ---------------------------------------------------------------------------- joins


def joined_costs(rows: pd.DataFrame, tree: pd.DataFrame, flows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Costs of the rows whose own record lacks a size that a related record holds.

    `rows`: the events (or units) to cost, with `name`, `shapes`, `dtypes` and an event id (`id`,
    or `unit_id` for units, the op's event id). `tree`: the trace's events table (columns `id`,
    `parent_id`, `name`, `shapes`, `dtypes`). `flows`: the trace's flows table (`src`, `dst`,
    `kind`), optional. Today: the legacy cuDNN convolution backward halves under their
    `aten::cudnn_convolution_backward` parent, and with `flows` the forward cuDNN/MIOpen
    convolutions, sized by their autograd node's backward op (`forward_conv_costs`). Returns a
    DataFrame indexed by the rows it could cost (a subset of `rows.index`), columns flops,
    flops_effective (FLOP), bytes_read, bytes_written (byte), family, dtype.
    """
    key = _id_column(rows)
    if key is None or not {"id", "parent_id", "name", "shapes", "dtypes"} <= set(tree.columns):
        return _empty()
    halves = _backward_halves(rows, tree, key)
    fwd = forward_conv_costs(rows, tree, flows) if flows is not None else _empty()
    return pd.concat([halves, fwd]) if len(halves) and len(fwd) else halves if len(halves) else fwd


def _backward_halves(rows: pd.DataFrame, tree: pd.DataFrame, key: str) -> pd.DataFrame:
    """The backward halves, each joined to its parent record (`_conv_backward_half`)."""
    own = rows.iloc[np.flatnonzero(rows["name"].astype(object).isin(list(_CONV_HALVES)).to_numpy())]
    if own.empty:
        return _empty()
    by_id = tree.drop_duplicates("id").set_index("id")
    parents = by_id.reindex(by_id["parent_id"].reindex(own[key].to_numpy()).to_numpy())
    return _cost_with_related(
        own,
        parents,
        lambda name: _CONV_PARENT,
        lambda child, parent, name: _conv_backward_half(child, parent, _CONV_HALVES[name]),
    )


def forward_conv_costs(rows: pd.DataFrame, tree: pd.DataFrame, flows: pd.DataFrame) -> pd.DataFrame:
    """Costs of forward `aten::cudnn_convolution` / `aten::miopen_convolution` rows, sized by the
    grad_output their autograd node's `*_convolution_backward` child records.

    Path: forward op --flow kind 'fwdbwd'--> backward node (e.g. `CudnnConvolutionBackward`)
    --parent_id--> its child `aten::cudnn_convolution_backward` (`_conv_forward_from_backward`).
    `rows` as `joined_costs` (`id` or `unit_id`); `tree`: events (`id`, `parent_id`, `name`,
    `shapes`, `dtypes`); `flows`: `src`, `dst` (event ids), `kind`. Returns the rows it could
    cost (index a subset of `rows.index`), columns as `joined_costs`. A conv without a backward
    (inference, no_grad) stays unknown: nothing records its output.
    """
    key = _id_column(rows)
    if key is None or not {"src", "dst", "kind"} <= set(flows.columns):
        return _empty()
    own = rows.iloc[np.flatnonzero(rows["name"].astype(object).isin(list(_FWD_CONV)).to_numpy())]
    if own.empty:
        return _empty()
    fb = flows[(flows["kind"] == "fwdbwd").to_numpy()]
    node_of = pd.Series(fb["dst"].to_numpy(), index=fb["src"].to_numpy())
    node_of = node_of[~node_of.index.duplicated(keep="first")]
    kids = tree[
        tree["name"].astype(object).isin(list(_FWD_CONV.values())).to_numpy() & (tree["parent_id"].to_numpy() >= 0)
    ]
    kids = kids.drop_duplicates("parent_id").set_index("parent_id")
    related = kids.reindex(node_of.reindex(own[key].to_numpy()).to_numpy())
    return _cost_with_related(
        own, related, _FWD_CONV.get, lambda fwd, bwd, name: _conv_forward_from_backward(fwd, bwd, name)
    )


def _id_column(rows: pd.DataFrame) -> str | None:
    return "id" if "id" in rows.columns else "unit_id" if "unit_id" in rows.columns else None


def _cost_with_related(
    own: pd.DataFrame,
    related: pd.DataFrame,
    expected: Callable[[str], str | None],
    formula: Callable[[Args, Args, str], Cost],
) -> pd.DataFrame:
    """Cost each row of `own` from its record and the related record on the same position of
    `related` (name, shapes, dtypes; NaN where there is none). A pair is costed only when the
    related record is the op `expected(name)`; distinct record pairs are costed once."""
    seen: dict[tuple, Cost | None] = {}
    out: dict = {}
    for idx, name, shp, dt, r_name, r_shp, r_dt in zip(
        own.index,
        own["name"].astype(object),
        own["shapes"].astype(object),
        own["dtypes"].astype(object),
        related["name"].astype(object),
        related["shapes"].astype(object),
        related["dtypes"].astype(object),
    ):
        if r_name != expected(name):
            continue
        k = (name, shp, dt, r_shp, r_dt)
        if k not in seen:
            try:
                seen[k] = formula(
                    Args(parse_concrete(shp), parse_concrete(dt), None, None),
                    Args(parse_concrete(r_shp), parse_concrete(r_dt), None, None),
                    str(name),
                )
            except (Unknown, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
                seen[k] = None
        if seen[k] is not None:
            out[idx] = seen[k]
    return _frame(out)
