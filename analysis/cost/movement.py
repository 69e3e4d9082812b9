"""Cost formulas for data movement and the zero-work ops: embeddings, copies/gathers/casts,
concatenation, quantisation, optimizers, padding, fills, and views and allocations (cost 0).

Conventions in `analysis.cost`; every formula sits beside its code. The compute-light
arithmetic families (elementwise, reductions, softmax, norms) are in `analysis.cost.memory`.
"""

from __future__ import annotations

from analysis.cost.base import DTYPES, SCALAR_TYPES, Args, Cost, Unknown, numel

# ---------------------------------------------------------------------------- memory ops


def embedding_cost(a: Args, name: str) -> Cost:
    # embedding(weight[V, D], indices[...]): 0 FLOPs; reads the indices and the gathered rows
    # (numel(indices) * D elements), writes them. embedding_dense_backward(grad[..., D],
    # indices, num_weights): numel(grad) FLOPs (the scatter-adds); reads grad and indices,
    # writes the dense [num_weights, D] gradient.
    if name == "embedding_dense_backward":
        g = a.shape(0)
        v = a.value(2)
        return Cost.of(numel(g), a.nbytes(0) + a.nbytes(1), v * g[-1] * a.size(0), "embedding", a.dtype(0))
    w, idx = a.shape(0), a.shape(1)
    rows = numel(idx) * w[-1] * a.size(0)
    return Cost.of(0, a.nbytes(1) + rows, rows, "embedding", a.dtype(0))


def copy_cost(a: Args, name: str) -> Cost:
    # 0 FLOPs. copy_(dst, src): reads src, writes dst (a dtype change makes it quant/cast).
    # clone: read and write the input. to/_to_copy: read the input, write it in
    # the target dtype (recorded as a ScalarType number; unrecorded = same dtype). A `to` that
    # keeps the dtype costs 0: it is a no-op, or a device move whose _to_copy child is costed.
    # fill_/zero_: write only.
    if name in ("fill_", "zero_"):
        return Cost.of(0, 0, a.nbytes(0), "copy", a.dtype(0))
    if name == "copy_":
        fam = "copy" if a.dtypes[0] == a.dtypes[1] else "quant/cast"
        return Cost.of(0, a.nbytes(1), a.nbytes(0), fam, a.dtype(0))
    if name in ("to", "_to_copy"):
        target = None
        for i in (1, 2):  # to(dtype, ...) / to(device, dtype, ...)
            if i < len(a.dtypes) and a.dtypes[i] in ("Scalar", "Int", "ScalarType"):
                v = a.value(i)  # a dtype passed but not recorded: unknown
                if isinstance(v, bool):  # to(dtype)'s non_blocking at index 2
                    continue
                target = SCALAR_TYPES.get(v)
                if target is None:
                    raise Unknown
                break
        if a.is_tensor(1):  # to(other): other's dtype
            target = a.dtypes[1]
        target = target or a.dtypes[0]
        n = numel(a.shape(0))
        if name == "to" and target == a.dtypes[0]:
            return Cost.of(0, 0, 0, "copy", a.dtype(0))  # no-op, or a device move costed below it
        fam = "copy" if target == a.dtypes[0] else "quant/cast"
        return Cost.of(0, a.nbytes(0), n * DTYPES[target][1], fam, DTYPES[target][0])
    return Cost.of(0, a.nbytes(0), a.nbytes(0), "copy", a.dtype(0))


def gather_cost(a: Args, name: str) -> Cost:
    # 0 FLOPs; reads the index and the gathered elements, writes the output.
    # index_select(self, dim, index): output = self with dim resized to numel(index).
    # gather(self, dim, index): output shape = index shape.
    # scatter/scatter_add/scatter_reduce(self, dim, index, src|value): functional forms read
    # self, index and src and write a self-shaped result; in-place forms (trailing _) read
    # index and numel(index) src elements (+ the destination elements for add/reduce) and
    # write numel(index) elements.
    es = a.size(0)
    if name == "index_select":
        x, d = a.shape(0), a.value(1)
        out = numel(x) // max(x[d], 1) * numel(a.shape(2)) if x else 1
        return Cost.of(0, a.nbytes(2) + out * es, out * es, "copy", a.dtype(0))
    if name == "gather":
        out = numel(a.shape(2))
        return Cost.of(0, a.nbytes(2) + out * es, out * es, "copy", a.dtype(0))
    k = numel(a.shape(2))
    if name.endswith("_"):
        extra = k * es if ("add" in name or "reduce" in name) else 0
        return Cost.of(k if extra else 0, a.nbytes(2) + k * es + extra, k * es, "copy", a.dtype(0))
    return Cost.of(
        k if "add" in name or "reduce" in name else 0,
        a.nbytes(0) + a.nbytes(2) + (k * es if a.is_tensor(3) else 0),
        a.nbytes(0),
        "copy",
        a.dtype(0),
    )


def cat_cost(a: Args, name: str) -> Cost:
    # cat(tensors, dim): 0 FLOPs; reads every input, writes their sum. Needs list_dtype.
    n = sum(numel(s) for s in a.tensor_list(0)) * a.list_size()
    return Cost.of(0, n, n, "copy", DTYPES[a.list_dtype][0])


def quant_cost(a: Args, name: str) -> Cost:
    # quantize_per_tensor/_per_channel(x, scale, zero_point, dtype): 2 FLOPs per element
    # (divide by scale, add zero point; the rounding not counted); writes 1-byte (qint32: 4).
    # dequantize(q): 2 FLOPs per element ((q - zero_point) * scale); writes fp32.
    n = numel(a.shape(0))
    if name == "dequantize":
        return Cost.of(2 * n, a.nbytes(0), 4 * n, "quant/cast", a.dtype(0))
    di = 3 if name == "quantize_per_tensor" else 4
    target = SCALAR_TYPES.get(a.value(di), None)
    if target is None:
        raise Unknown
    read = sum(a.nbytes(i) for i in a.tensors())
    return Cost.of(2 * n, read, n * DTYPES[target][1], "quant/cast", DTYPES[target][0])


# ---------------------------------------------------------------------------- optimizers


def fused_optimizer_cost(a: Args, name: str) -> Cost:
    # _fused_adam_/_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
    # state_steps, ...): 13 FLOPs per parameter element (m: 3, v: 4, denominator: sqrt, divide,
    # add 3, step: divide, multiply, subtract 3; weight decay and bias-correction scalars not
    # counted). Reads params, grads, both moments (and max_exp_avg_sqs for amsgrad); writes
    # params and the moments (and max_exp_avg_sqs). State steps (one scalar each) not counted.
    # _fused_sgd_(params, grads, momentum_buffers, ...): 2 FLOPs per element (multiply, add),
    # +2 with momentum buffers; reads params, grads (+ buffers); writes params (+ buffers).
    es = a.list_size()
    p = sum(numel(s) for s in a.tensor_list(0))
    if name == "_fused_sgd_":
        mom = sum(numel(s) for s in a.tensor_list(2))
        return Cost.of(2 * p + 2 * mom, (2 * p + mom) * es, (p + mom) * es, "optimizer", DTYPES[a.list_dtype][0])
    amsgrad = sum(numel(s) for s in a.tensor_list(4))
    return Cost.of(13 * p, (4 * p + amsgrad) * es, (3 * p + amsgrad) * es, "optimizer", DTYPES[a.list_dtype][0])


def foreach_cost(a: Args, name: str) -> Cost:
    # _foreach_<op>(list, list|scalar|scalarlist, ...): 1 FLOP per element of the first list
    # (as the elementwise convention); reads every list (0-d tensor arguments too), writes the
    # first list's shapes (in place, trailing _) or a new list of them.
    es = a.list_size()
    first = sum(numel(s) for s in a.tensor_list(0))
    read = 0
    for i in range(len(a.shapes)):
        if i < len(a.dtypes) and a.dtypes[i] == "TensorList":
            read += sum(numel(s) for s in a.tensor_list(i)) * es
        elif a.is_tensor(i):
            read += a.nbytes(i)
    return Cost.of(first, read, first * es, "optimizer", DTYPES[a.list_dtype][0])


def pad_cost(a: Args, name: str) -> Cost:
    # constant_pad_nd/pad(x, pad=[left_last, right_last, left_prev, right_prev, ...], value):
    # 0 FLOPs; reads x, writes the padded output (negative pads crop).
    x, pad = a.shape(0), a.value(1)
    if not isinstance(pad, list) or len(pad) % 2 or len(pad) // 2 > len(x):
        raise Unknown
    out = list(x)
    for j in range(len(pad) // 2):
        out[len(x) - 1 - j] += pad[2 * j] + pad[2 * j + 1]
    return Cost.of(0, a.nbytes(0), numel(out) * a.size(0), "copy", a.dtype(0))


# Ops that move no data and do no arithmetic: views, aliases, allocations, and wrappers whose
# work (when there is any) is recorded as a child op: contiguous -> clone, reshape ->
# clone/_unsafe_view, item -> _local_scalar_dense. They cost 0 (family 'other').
ZERO_OPS = {
    "view",
    "_unsafe_view",
    "_reshape_alias",
    "reshape",
    "view_as",
    "as_strided",
    "as_strided_",
    "slice",
    "select",
    "narrow",
    "t",
    "transpose",
    "transpose_",
    "permute",
    "expand",
    "expand_as",
    "unsqueeze",
    "unsqueeze_",
    "squeeze",
    "squeeze_",
    "unbind",
    "split",
    "split_with_sizes",
    "chunk",
    "alias",
    "detach",
    "detach_",
    "lift_fresh",
    "resolve_conj",
    "resolve_neg",
    "flatten",
    "unflatten",
    "movedim",
    "numpy_T",
    "contiguous",
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "resize_",
    "set_",
    "result_type",
    "item",
    "is_nonzero",
    "_has_compatible_shallow_copy_type",
    "size",
    "stride",
    "dropout",
    "feature_dropout",  # eval: identity; training: native_dropout/bernoulli_ beneath
}


# name -> (index of the size list or None for *_like (the input's shape), index of dtype)
FILL_OPS = {
    "zeros": (0, 1),
    "ones": (0, 1),
    "full": (0, 2),
    "new_zeros": (1, 2),
    "new_ones": (1, 2),
    "new_full": (1, 3),
    "zeros_like": (None, 1),
    "ones_like": (None, 1),
    "full_like": (None, 2),
}


def fill_cost(a: Args, name: str) -> Cost:
    # zeros/ones/full(size, [fill,] dtype, ...), new_*(self, size, ...), *_like(self, ...):
    # 0 FLOPs; write only: numel(size) * element size. The dtype is the recorded one, else the
    # input's (new_*, *_like); zeros/ones/full without a recorded dtype (the default dtype) are
    # unknown.
    size_i, dt_i = FILL_OPS[name]
    shape = a.value(size_i) if size_i is not None else a.shape(0)
    if not isinstance(shape, list):
        raise Unknown
    v = a.value(dt_i, None)
    if isinstance(v, int) and not isinstance(v, bool):
        dt = SCALAR_TYPES.get(v)
    elif size_i == 0 or not a.is_tensor(0):
        raise Unknown
    else:
        dt = a.dtypes[0]
    if dt not in DTYPES:
        raise Unknown
    norm, es = DTYPES[dt]
    return Cost.of(0, 0, numel(shape) * es, "copy", norm)


def scalar_read_cost(a: Args, name: str) -> Cost:
    # _local_scalar_dense(x) (beneath item()): reads one element, writes it to the host.
    size = a.size(0)
    return Cost.of(0, size, size, "copy", a.dtype(0))


def zero_cost(a: Args, name: str) -> Cost:
    ts = [i for i in a.tensors() if a.dtypes[i] in DTYPES]
    return Cost.of(0, 0, 0, "other", a.dtype(ts[0]) if ts else "unknown")
