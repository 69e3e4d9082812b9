"""Cost formulas for the custom ops of LLM-serving stacks, and for legacy ATen ops.

Serving stacks call their own kernels through ``torch.ops`` (vLLM's ``_C::``, ``_C_cache_ops::``,
SGLang's ``sgl_kernel::``/``sglang::``, AMD's ``aiter::``); Kineto records them like ATen ops,
with ``Input Dims``, ``Input type`` and ``Concrete Inputs``. `CUSTOM_OPS` maps their recorded
names (namespace included) to a formula; the signatures are the ops' schemas as the projects
register them (vLLM ``csrc/torch_bindings.cpp``, sgl-kernel ``csrc/common_extension_rocm.cc``,
SGLang ``jit_kernel/kvcache.py``, aiter ``aiter/ops/rmsnorm.py``). Conventions are
`analysis.cost`'s (rms_norm 3 FLOPs per element + 1 for the weight, elementwise 1 per output
element, compulsory bytes: every tensor read once, every output written once).

What stays unknown, and why (the record does not determine the work):

- ``vllm::moe_forward(hidden_states, router_logits, layer_name)``: the expert weights are
  attributes of the layer named by a string, not inputs, so their shapes (and dtype: MXFP4, FP8
  ...) are not recorded; how many tokens each expert gets is data (the top-k routing).
- ``vllm::unified_attention_with_output(query, key, value, output, layer_name, ...)``: the KV
  cache and the per-request sequence lengths come from the forward context, not the arguments.
- ``aiter::mha_batch_prefill(q, k, v, cu_seqlens_q, kv_indptr, kv_page_indices, max_seqlen_q,
  max_seqlen_k, ...)``: varlen/paged attention; FLOPs are sum_i Lq_i * Lk_i over requests, and
  the lengths are the *values* of cu_seqlens_q / kv_indptr, which Kineto does not record (only
  their maxima are Concrete Inputs). The page-index count bounds sum_i Lk_i only from above.
- ``symm_mem::*all_reduce*`` ops are collectives: `analysis.cost_comm.collective_kind` names them.

`LEGACY_ATEN` covers ATen ops seen in legacy (2021, no Concrete Inputs) traces whose record is
enough; `joined_costs` costs the cuDNN convolution backward halves, whose own record lacks a
size, from their parent op's record (a join over the events table, exact or nothing), and the
forward cuDNN/MIOpen convolutions, whose output size (stride, padding) is not recorded, from the
grad_output their autograd node's backward op records (a join through the 'fwdbwd' flows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.cost_base import Cost, _Args, _cost, _numel, _parse, _Unknown

# ---------------------------------------------------------------------------- norms

def _rms_norm_out(a: _Args, name: str) -> Cost:
    # vLLM _C::rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon);
    # aiter::rmsnorm(Tensor out, Tensor input, Tensor weight, float epsilon).
    # FLOPs = 4 per element (square, sum, multiply by 1/rms: 3, as aten::rms_norm; weight: 1).
    # Reads input and weight; writes result (input-shaped, in result's dtype).
    x, w = a.shape(1), a.shape(2)
    if _numel(a.shape(0)) != _numel(x) or not x or w[-1:] != x[-1:]:
        raise _Unknown
    n = _numel(x)
    return _cost(4 * n, a.nbytes(1) + a.nbytes(2), a.nbytes(0), "norm", a.dtype(1))


def _fused_add_rms_norm(a: _Args, name: str) -> Cost:
    # vLLM _C::fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor weight, float epsilon),
    # in place: residual <- input + residual; input <- rms_norm(residual) * weight.
    # FLOPs = 5 per element (the add 1 + rms_norm 4). Reads input, residual, weight; writes
    # input and residual (both outputs are kept).
    x, r, w = a.shape(0), a.shape(1), a.shape(2)
    if _numel(r) != _numel(x) or not x or w[-1:] != x[-1:]:
        raise _Unknown
    return _cost(5 * _numel(x), a.nbytes(0) + a.nbytes(1) + a.nbytes(2), a.nbytes(0) + a.nbytes(1),
                 "norm", a.dtype(0))


def _add_rmsnorm_out(a: _Args, name: str) -> Cost:
    # aiter::add_rmsnorm(Tensor out, Tensor input, Tensor residual_in, Tensor residual_out,
    # Tensor weight, float epsilon): residual_out <- input + residual_in;
    # out <- rms_norm(residual_out) * weight. FLOPs = 5 per element (add 1 + rms_norm 4).
    # Reads input, residual_in, weight; writes out and residual_out.
    x, w = a.shape(1), a.shape(4)
    if any(_numel(a.shape(i)) != _numel(x) for i in (0, 2, 3)) or not x or w[-1:] != x[-1:]:
        raise _Unknown
    return _cost(5 * _numel(x), a.nbytes(1) + a.nbytes(2) + a.nbytes(4), a.nbytes(0) + a.nbytes(3),
                 "norm", a.dtype(1))


# ---------------------------------------------------------------------------- activations

def _act_and_mul(a: _Args, name: str) -> Cost:
    # silu_and_mul / gelu_and_mul / gelu_tanh_and_mul(Tensor! out, Tensor input[, bool enable_pdl]):
    # input [..., 2d] -> out [..., d] = act(input[..., :d]) * input[..., d:].
    # FLOPs = 2 per output element (the activation 1, transcendental counted 1; the multiply 1).
    # Reads the input once (2d per row); writes out.
    out, x = a.shape(0), a.shape(1)
    if not x or out[:-1] != x[:-1] or 2 * out[-1] != x[-1]:
        raise _Unknown
    return _cost(2 * _numel(out), a.nbytes(1), a.nbytes(0), "elementwise", a.dtype(1))


# ---------------------------------------------------------------------------- rotary

def _rotary_embedding(a: _Args, name: str) -> Cost:
    # rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, int head_size,
    # Tensor cos_sin_cache, bool is_neox), in place (vLLM _C::, sgl_kernel::; vLLM
    # csrc/pos_encoding_kernels.cu): tokens = numel(positions); heads = numel(query) /
    # (tokens * head_size) (key: its own head count, none when key is None); rot_dim =
    # cos_sin_cache.shape[1] (cos and sin halves of rot_dim/2 each). Each rotated pair
    # (x, y) -> (x cos - y sin, y cos + x sin): 6 FLOPs per pair = 3 per rotated element, over
    # (Hq + Hk) * tokens * rot_dim elements. Reads positions, one cache row per token, and the
    # rotated part of every head; writes that part back (the head_size - rot_dim rest is
    # untouched).
    head = a.value(3)
    tokens = _numel(a.shape(0))
    cache = a.shape(4)
    if not isinstance(head, int) or isinstance(head, bool) or head <= 0 or tokens <= 0 \
            or len(cache) != 2:
        raise _Unknown
    rot = cache[1]
    if rot % 2 or rot > head:
        raise _Unknown

    def heads(i: int) -> int:
        if not a.is_tensor(i):
            return 0
        per_token, rem = divmod(_numel(a.shape(i)), tokens * head)
        if rem:
            raise _Unknown
        return per_token

    rotated = (heads(1) + heads(2)) * tokens * rot
    es = a.size(1)
    read = a.nbytes(0) + tokens * rot * a.size(4) + rotated * es
    return _cost(3 * rotated, read, rotated * es, "elementwise", a.dtype(1))


# ---------------------------------------------------------------------------- quantisation

def _static_scaled_fp8_quant(a: _Args, name: str) -> Cost:
    # vLLM _C::static_scaled_fp8_quant(Tensor! result, Tensor input, Tensor scale[, group_shape]):
    # result = clamp(input / scale, fp8 range) -> fp8. FLOPs = 2 per element (the scaling, the
    # clamp; the conversion not counted, as quantize_per_tensor). Reads input and scale; writes
    # result (1 byte per element).
    if _numel(a.shape(0)) != _numel(a.shape(1)):
        raise _Unknown
    n = _numel(a.shape(1))
    return _cost(2 * n, a.nbytes(1) + a.nbytes(2), a.nbytes(0), "quant/cast", a.dtype(0))


# ---------------------------------------------------------------------------- KV-cache writes

def _reshape_and_cache(a: _Args, name: str) -> Cost:
    # vLLM _C_cache_ops::reshape_and_cache(_flash)(Tensor key, Tensor value, Tensor! key_cache,
    # Tensor! value_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale,
    # Tensor v_scale): scatters num_tokens = numel(slot_mapping) rows of key and value (key may
    # have more rows: CUDA-graph padding) into the caches. Bytes: reads those rows, the slot
    # mapping and the two scales; writes the same elements at the cache's element size. An fp8
    # cache (stored as uint8: its element size differs from key's) divides by the scale:
    # 1 FLOP per element, family quant/cast; otherwise a copy, 0 FLOPs. Slots of -1 (padding
    # tokens) are skipped by the kernel; how many there are is data, so every row counts.
    k, v = a.shape(0), a.shape(1)
    tokens = _numel(a.shape(4))
    if not k or not v or tokens > min(k[0], v[0]):
        raise _Unknown
    ke, ve = tokens * (_numel(k) // k[0]), tokens * (_numel(v) // v[0])
    read = ke * a.size(0) + ve * a.size(1) + a.nbytes(4) + a.nbytes(6) + a.nbytes(7)
    written = ke * a.size(2) + ve * a.size(3)
    convert = a.size(2) != a.size(0)
    return _cost((ke + ve) if convert else 0, read, written, "quant/cast" if convert else "copy",
                 a.dtype(0))


def _store_cache(a: _Args, name: str) -> Cost:
    # SGLang sglang::store_cache(Tensor k, Tensor v, Tensor! k_cache, Tensor! v_cache,
    # Tensor indices, *, int row_bytes=0, int num_split=0) (python/sglang/jit_kernel/kvcache.py):
    # copies row i of k and v to row indices[i] of the caches, rows = numel(indices), row_bytes
    # = k.shape[-1] * element size when 0. 0 FLOPs; reads the rows and indices, writes the rows.
    k, v = a.shape(0), a.shape(1)
    rows = _numel(a.shape(4))
    if not k or k != v or rows != k[0]:
        raise _Unknown
    row = _numel(k) // k[0] * a.size(0)
    recorded = a.value(5, 0)
    if recorded not in (0, row):
        raise _Unknown                          # row_bytes disagrees with the shapes
    return _cost(0, 2 * rows * row + a.nbytes(4), 2 * rows * row, "copy", a.dtype(0))


#: recorded name -> formula
CUSTOM_OPS: dict[str, Callable[[_Args, str], Cost]] = {
    "_C::rms_norm": _rms_norm_out,
    "aiter::rmsnorm": _rms_norm_out,
    "_C::fused_add_rms_norm": _fused_add_rms_norm,
    "aiter::add_rmsnorm": _add_rmsnorm_out,
    "_C::silu_and_mul": _act_and_mul,
    "_C::gelu_and_mul": _act_and_mul,
    "_C::gelu_tanh_and_mul": _act_and_mul,
    "sgl_kernel::silu_and_mul": _act_and_mul,
    "sgl_kernel::gelu_and_mul": _act_and_mul,
    "sgl_kernel::gelu_tanh_and_mul": _act_and_mul,
    "_C::rotary_embedding": _rotary_embedding,
    "sgl_kernel::rotary_embedding": _rotary_embedding,
    "_C::static_scaled_fp8_quant": _static_scaled_fp8_quant,
    "_C_cache_ops::reshape_and_cache": _reshape_and_cache,
    "_C_cache_ops::reshape_and_cache_flash": _reshape_and_cache,
    "sglang::store_cache": _store_cache,
}


# ---------------------------------------------------------------------------- legacy ATen

def _pair(v, default: list[int] | None = None) -> list[int]:
    """An int or 1-/2-element list argument as two ints; [] takes `default` (stride = kernel)."""
    if v == [] and default is not None:
        return default
    v = [v] if isinstance(v, int) and not isinstance(v, bool) else v
    if not isinstance(v, list) or len(v) not in (1, 2) or not all(isinstance(i, int) for i in v):
        raise _Unknown
    return v * 2 if len(v) == 1 else v


def _max_pool2d_with_indices(a: _Args, name: str) -> Cost:
    # max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode): output
    # spatial per dim as ATen's pooling_output_shape: (in + 2p - d(k-1) - 1 [+ s-1 with
    # ceil_mode]) // s + 1, less one when ceil_mode's last window would start past the input and
    # its left padding; stride [] means kernel_size. FLOPs = 1 per window element (a
    # comparison) = numel(out) * kh * kw. Reads self; writes out and its int64 indices.
    # Legacy traces record no Concrete Inputs: unknown there.
    x = a.shape(0)
    if len(x) not in (3, 4):
        raise _Unknown
    k = _pair(a.value(1))
    s, p, d = _pair(a.value(2, []), k), _pair(a.value(3)), _pair(a.value(4, 1))
    ceil = bool(a.value(5, False))
    if min(k + s + d) <= 0 or min(p) < 0:
        raise _Unknown
    out_sp = []
    for i, ki, si, pi, di in zip(x[-2:], k, s, p, d):
        o = (i + 2 * pi - di * (ki - 1) - 1 + (si - 1 if ceil else 0)) // si + 1
        if ceil and (o - 1) * si >= i + pi:
            o -= 1
        out_sp.append(o)
    if min(out_sp) <= 0:
        raise _Unknown
    out = _numel(x[:-2]) * _numel(out_sp)
    return _cost(out * _numel(k), a.nbytes(0), out * (a.size(0) + 8), "reduction", a.dtype(0))


def _max_pool2d_with_indices_backward(a: _Args, name: str) -> Cost:
    # max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
    # ceil_mode, indices): grad_input (self-shaped) = 0, then grad_output[j] is added at
    # indices[j] (windows may overlap, so it accumulates): FLOPs = numel(grad_output). Reads
    # grad_output and indices; writes grad_input. self's values are not read (only its shape).
    go, x = a.shape(0), a.shape(1)
    if a.shape(7) != go or len(go) != len(x):
        raise _Unknown
    return _cost(_numel(go), a.nbytes(0) + a.nbytes(7), _numel(x) * a.size(0), "copy", a.dtype(0))


#: ATen base name -> formula (registered by analysis.cost's table)
LEGACY_ATEN: dict[str, Callable[[_Args, str], Cost]] = {
    "max_pool2d_with_indices": _max_pool2d_with_indices,
    "max_pool2d_with_indices_backward": _max_pool2d_with_indices_backward,
}


# ---------------------------------------------------------------------------- parent joins

_CONV_PARENT = "aten::cudnn_convolution_backward"
_CONV_HALVES = {"aten::cudnn_convolution_backward_input": "input",
                "aten::cudnn_convolution_backward_weight": "weight"}


def _conv_backward_half(child: _Args, parent: _Args, half: str) -> Cost:
    # Parent: cudnn_convolution_backward(self [N, C_in, *sp], grad_output [N, C_out, *sp_out],
    # weight [C_out, C_in/groups, *k], padding, stride, dilation, groups, ..., output_mask).
    # Children (legacy ATen): cudnn_convolution_backward_input(input_size, grad_output, weight,
    # ...) and cudnn_convolution_backward_weight(weight_size, grad_output, input, ...); the size
    # lists are not recorded, the parent's tensors give them. The child's recorded tensors must
    # be the parent's (same shapes), else nothing is joined. groups = C_in / weight.shape[1].
    # FLOPs as flop_counter's convolution_backward (and analysis.cost_compute._conv_backward):
    #   input:  2 * numel(grad_output) * numel(weight[1:])   (= 2 * N * prod(sp_out) * numel(weight))
    #   weight: 2 * N * C_in * C_out * prod(k) * prod(sp_out) (full C_in, as flop_counter)
    # Bytes: input reads grad_output and weight, writes grad_input (self-sized);
    #        weight reads grad_output and input, writes grad_weight (weight-sized).
    x, go, w = parent.shape(0), parent.shape(1), parent.shape(2)
    if not (len(x) == len(go) == len(w) >= 3) or child.shape(1) != go:
        raise _Unknown
    if child.shape(2) != (w if half == "input" else x) or child.dtypes[1:3] != parent.dtypes[1:3]:
        raise _Unknown
    n, c_in, c_out = x[0], x[1], go[1]
    if go[0] != n or w[0] != c_out or w[1] <= 0 or c_in % w[1] or c_out % (c_in // w[1]):
        raise _Unknown
    es = parent.size(0)
    if half == "input":
        return _cost(2 * _numel(go) * _numel(w[1:]), parent.nbytes(1) + parent.nbytes(2),
                     _numel(x) * es, "conv", parent.dtype(0))
    return _cost(2 * n * c_in * c_out * _numel(w[2:]) * _numel(go[2:]),
                 parent.nbytes(1) + parent.nbytes(0), _numel(w) * es, "conv", parent.dtype(0))


#: forward conv op -> the op under its autograd backward node that records grad_output
_FWD_CONV = {"aten::cudnn_convolution": "aten::cudnn_convolution_backward",
             "aten::miopen_convolution": "aten::miopen_convolution_backward"}


def _conv_forward_from_backward(fwd: _Args, bwd: _Args, name: str) -> Cost:
    # Forward: cudnn_convolution(self [N, C_in, *sp], weight [C_out, C_in/groups, *k], padding,
    # stride, dilation, groups, ...); miopen_convolution(self, weight, bias, padding, ...).
    # Legacy traces record no padding/stride, so the output size is unknown from this record;
    # its autograd node's cudnn_/miopen_convolution_backward(self, grad_output, weight, ...)
    # records grad_output, whose shape is the output's [N, C_out, *sp_out]. Both records must
    # agree (same self and weight shapes and dtypes), else nothing is joined.
    # FLOPs as analysis.cost_compute._conv (flop_counter's conv_flop_count, bias not counted):
    #   2 * N * C_out * prod(sp_out) * (C_in/groups) * prod(k) = 2 * numel(grad_output) * numel(weight[1:])
    # groups = C_in / weight.shape[1]. Bytes: reads self + weight (+ bias), writes the output.
    x, w, go = fwd.shape(0), fwd.shape(1), bwd.shape(1)
    if not (len(x) == len(go) == len(w) >= 3) or bwd.shape(0) != x or bwd.shape(2) != w:
        raise _Unknown
    if bwd.dtypes[:3:2] != fwd.dtypes[:2] or go[0] != x[0] or go[1] != w[0] or min(go) <= 0:
        raise _Unknown
    if w[1] <= 0 or x[1] % w[1] or w[0] % (x[1] // w[1]):
        raise _Unknown                          # C_in, C_out not divisible by groups
    bias = fwd.nbytes(2) if name == "aten::miopen_convolution" else 0
    return _cost(2 * _numel(go) * _numel(w[1:]), fwd.nbytes(0) + fwd.nbytes(1) + bias,
                 _numel(go) * fwd.size(0), "conv", fwd.dtype(0))


_FIELDS = [f.name for f in dataclasses.fields(Cost)]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("family", "dtype") else np.float64)
                         for c in _FIELDS})


def _frame(out: dict) -> pd.DataFrame:
    if not out:
        return _empty()
    return pd.DataFrame([[getattr(c, f) for f in _FIELDS] for c in out.values()],
                        index=list(out.keys()), columns=_FIELDS)


def joined_costs(rows: pd.DataFrame, tree: pd.DataFrame, flows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Costs of rows whose own record lacks a size that a related op's record holds.

    `rows`: events-like (columns `name`, `shapes`, `dtypes`, and `id` for event rows or
    `unit_id` for units, the op's event id). `tree`: the trace's events table (columns `id`,
    `parent_id`, `name`, `shapes`, `dtypes`). `flows`: the trace's flows table (`src`, `dst`,
    `kind`), optional. Today: the legacy cuDNN convolution backward halves under their
    `aten::cudnn_convolution_backward` parent (`_conv_backward_half`), and with `flows` the
    forward cuDNN/MIOpen convolutions, sized by their autograd node's backward op
    (`forward_conv_costs`). Returns a DataFrame indexed by the rows it could cost (a subset of
    `rows.index`), columns flops, flops_effective (FLOP), bytes_read, bytes_written (byte),
    family, dtype.
    """
    key = "id" if "id" in rows.columns else "unit_id" if "unit_id" in rows.columns else None
    if key is None or not {"id", "parent_id", "name", "shapes", "dtypes"} <= set(tree.columns):
        return _empty()
    halves = _backward_halves(rows, tree, key)
    fwd = forward_conv_costs(rows, tree, flows) if flows is not None else _empty()
    return pd.concat([halves, fwd]) if len(halves) and len(fwd) else halves if len(halves) else fwd


def _backward_halves(rows: pd.DataFrame, tree: pd.DataFrame, key: str) -> pd.DataFrame:
    names = rows["name"].astype(object)
    pick = np.flatnonzero(names.isin(list(_CONV_HALVES)).to_numpy())
    if not len(pick):
        return _empty()
    by_id = tree.drop_duplicates("id").set_index("id")
    own = rows.iloc[pick]
    parent_ids = by_id["parent_id"].reindex(own[key].to_numpy()).to_numpy()
    parents = by_id.reindex(parent_ids)
    seen: dict[tuple, Cost | None] = {}
    out: dict = {}
    for idx, name, shp, dt, p_name, p_shp, p_dt in zip(
            own.index, own["name"].astype(object), own["shapes"].astype(object),
            own["dtypes"].astype(object), parents["name"].astype(object),
            parents["shapes"].astype(object), parents["dtypes"].astype(object)):
        if p_name != _CONV_PARENT:
            continue
        k = (name, shp, dt, p_shp, p_dt)
        if k not in seen:
            seen[k] = _joined_one(str(name), shp, dt, p_shp, p_dt)
        if seen[k] is not None:
            out[idx] = seen[k]
    return _frame(out)


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
    key = "id" if "id" in rows.columns else "unit_id" if "unit_id" in rows.columns else None
    if key is None or not {"src", "dst", "kind"} <= set(flows.columns):
        return _empty()
    names = rows["name"].astype(object)
    pick = np.flatnonzero(names.isin(list(_FWD_CONV)).to_numpy())
    if not len(pick):
        return _empty()
    fb = flows[(flows["kind"] == "fwdbwd").to_numpy()]
    node_of = pd.Series(fb["dst"].to_numpy(), index=fb["src"].to_numpy())
    node_of = node_of[~node_of.index.duplicated(keep="first")]
    kids = tree[tree["name"].astype(object).isin(list(_FWD_CONV.values())).to_numpy()
                & (tree["parent_id"].to_numpy() >= 0)]
    kids = kids.drop_duplicates("parent_id").set_index("parent_id")
    own = rows.iloc[pick]
    node = node_of.reindex(own[key].to_numpy()).to_numpy()
    kid = kids.reindex(node)
    seen: dict[tuple, Cost | None] = {}
    out: dict = {}
    for idx, name, shp, dt, k_name, k_shp, k_dt in zip(
            own.index, own["name"].astype(object), own["shapes"].astype(object),
            own["dtypes"].astype(object), kid["name"].astype(object),
            kid["shapes"].astype(object), kid["dtypes"].astype(object)):
        if k_name != _FWD_CONV.get(name):
            continue
        k = (name, shp, dt, k_shp, k_dt)
        if k not in seen:
            seen[k] = _forward_one(str(name), shp, dt, k_shp, k_dt)
        if seen[k] is not None:
            out[idx] = seen[k]
    return _frame(out)


def _forward_one(name: str, shp, dt, k_shp, k_dt) -> Cost | None:
    try:
        fwd = _Args(_parse(shp), _parse(dt), None, None)
        bwd = _Args(_parse(k_shp), _parse(k_dt), None, None)
        return _conv_forward_from_backward(fwd, bwd, name)
    except (_Unknown, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        return None


def _joined_one(name: str, shp, dt, p_shp, p_dt) -> Cost | None:
    try:
        child = _Args(_parse(shp), _parse(dt), None, None)
        parent = _Args(_parse(p_shp), _parse(p_dt), None, None)
        return _conv_backward_half(child, parent, _CONV_HALVES[name])
    except (_Unknown, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        return None
