"""Cost formulas for the memory-heavy families: elementwise, reductions, softmax, norms,
copies/gathers/casts, quantisation, optimizers and the zero-work ops (views, allocations).

Conventions in `analysis.cost`; every formula sits beside its code.
"""

from __future__ import annotations

from analysis.cost.base import DTYPES, SCALAR_TYPES, Cost, Args, broadcast, numel, Unknown

# ---------------------------------------------------------------------------- elementwise

_COMPARE = {
    "eq",
    "ne",
    "gt",
    "lt",
    "ge",
    "le",
    "logical_not",
    "logical_and",
    "logical_or",
    "logical_xor",
    "isnan",
    "isinf",
    "isfinite",
}
ELEMENTWISE_OPS = _COMPARE | {
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "neg",
    "abs",
    "relu",
    "relu6",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log1p",
    "sqrt",
    "rsqrt",
    "pow",
    "where",
    "clamp",
    "clamp_min",
    "clamp_max",
    "clip",
    "maximum",
    "minimum",
    "threshold",
    "hardtanh",
    "leaky_relu",
    "elu",
    "mish",
    "softplus",
    "hardswish",
    "hardsigmoid",
    "erf",
    "sin",
    "cos",
    "reciprocal",
    "square",
    "sign",
    "floor",
    "ceil",
    "round",
    "trunc",
    "fmod",
    "remainder",
    "addcmul",
    "addcdiv",
    "lerp",
    "masked_fill",
    "bitwise_and",
    "bitwise_or",
    "bitwise_not",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "hardtanh_backward",
    "leaky_relu_backward",
    "mish_backward",
    "nan_to_num",
    "triu",
    "tril",
    "native_dropout",
    "divide",
    "multiply",
    "subtract",
    "true_divide",
    "floor_divide",
    "bitwise_xor",
    "sgn",
    "cumsum",
    "logit",
    "atan",
    "asin",
    "acos",
    "sinh",
    "cosh",
    "atan2",
    "hypot",
    "xlogy",
    "heaviside",
    "frac",
}


#: Most tensor operands of the functional forms (unary ops: 1). A record with one tensor more is
#: an out= call (`clamp_min(self, min, out)`, legacy traces' relu): the extra, last tensor is the
#: output, written and never read.
_TENSOR_ARITY = {
    name: 2
    for name in (
        "add",
        "sub",
        "rsub",
        "mul",
        "div",
        "pow",
        "maximum",
        "minimum",
        "fmod",
        "remainder",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "logical_and",
        "logical_or",
        "logical_xor",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
        "atan2",
        "hypot",
        "xlogy",
        "heaviside",
        "floor_divide",
        "true_divide",
        "divide",
        "multiply",
        "subtract",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "hardtanh_backward",
        "leaky_relu_backward",
        "mish_backward",
    )
}
_TENSOR_ARITY.update({name: 3 for name in ("addcmul", "addcdiv", "lerp", "where", "clamp", "clip", "masked_fill")})


def elementwise_cost(a: Args, name: str) -> Cost:
    # FLOPs = numel(output), 1 per element (transcendentals count 1); output shape = the
    # broadcast of the tensor inputs; bytes = every tensor input + the output. Output dtype:
    # bool for comparisons, else the widest floating input with dims (torch promotion, 0-d
    # tensors do not promote), else the first input's. An out= tensor (one past the op's
    # arity) is the output: not read.
    ts = a.tensors()
    if len(ts) > _TENSOR_ARITY.get(name, 1):
        ts = ts[:-1]
    if not ts or (name == "where" and len(ts) == 1):
        raise Unknown  # where(cond) is nonzero(): data-dependent
    out = broadcast(*[a.shape(i) for i in ts])
    n = numel(out)
    dimmed = [i for i in ts if a.shape(i)] or ts
    floats = [i for i in dimmed if a.dtype(i).startswith(("fp", "bf"))]
    src = max(floats, key=a.size) if floats else dimmed[0]
    dtype, size = ("bool", 1) if name in _COMPARE else (a.dtype(src), a.size(src))
    written = n * size
    if name == "native_dropout":  # also writes the bool keep-mask
        written += n
    return Cost.of(n, sum(a.nbytes(i) for i in ts), written, "elementwise", dtype)


# ---------------------------------------------------------------------------- reductions

# name -> (index of the dim argument, bytes of an extra index output per output element)
REDUCTION_OPS = {
    "sum": (1, 0),
    "mean": (1, 0),
    "amax": (1, 0),
    "amin": (1, 0),
    "prod": (1, 0),
    "max": (1, 8),
    "min": (1, 8),
    "argmax": (1, 0),
    "argmin": (1, 0),
    "any": (1, 0),
    "all": (1, 0),
    "logsumexp": (1, 0),
    "norm": (2, 0),
    "linalg_vector_norm": (2, 0),
    "var": (1, 0),
    "std": (1, 0),
    "var_mean": (1, 0),
    "std_mean": (1, 0),
    "count_nonzero": (1, 0),
}


def reduction_cost(a: Args, name: str) -> Cost:
    # FLOPs = numel(input), 1 per input element (var/std/norm included, by convention).
    # Output elements = numel(input) / prod(reduced dims) (keepdim only keeps size-1 dims);
    # a full reduction (no dim argument, or dim []) writes one element. An int or list dim
    # passed but not recorded in Concrete Inputs makes the cost unknown.
    # max/min(self, dim) also write int64 indices; var_mean/std_mean write two outputs.
    if name in ("max", "min") and a.is_tensor(1):
        return elementwise_cost(a, name)  # max(self, other): elementwise maximum
    x = a.shape(0)
    dim_i, idx_bytes = REDUCTION_OPS[name]
    has_dim = dim_i < len(a.dtypes) and a.dtypes[dim_i] not in ("", "None") and not a.is_tensor(dim_i)
    dims = a.value(dim_i) if has_dim else None
    if name == "norm" and has_dim and not isinstance(dims, list):
        dims = None  # norm(self, p, dtype): the Scalar is not a dim
    if name in ("max", "min") and not has_dim:
        idx_bytes = 0  # max(self): one value, no indices
    if dims is None or dims == []:
        out = 1
    else:
        dims = [dims] if isinstance(dims, int) else dims
        red = {d % len(x) for d in dims} if x else set()
        out = numel([s for i, s in enumerate(x) if i not in red])
    size = {"argmax": 8, "argmin": 8, "count_nonzero": 8, "any": 1, "all": 1}.get(name, a.size(0))
    written = out * (size + idx_bytes) * (2 if name.endswith("_mean") else 1)
    return Cost.of(numel(x), a.nbytes(0), written, "reduction", a.dtype(0))


# ---------------------------------------------------------------------------- softmax, norms


def softmax_cost(a: Args, name: str) -> Cost:
    # Forward: 5 FLOPs per element (max, subtract, exp, sum, divide; log_softmax: max,
    # subtract, exp, sum, subtract log); reads x, writes y of the same shape (fp32 when
    # _softmax's half_to_float is set). Backward (_softmax_backward_data(grad, out, dim, dtype),
    # _log_softmax_backward_data): 4 per element (multiply, sum, subtract, multiply); reads
    # grad and out, writes grad_in.
    x = a.shape(0)
    n = numel(x)
    if name.endswith("_backward_data"):
        return Cost.of(4 * n, a.nbytes(0) + a.nbytes(1), n * a.size(0), "softmax", a.dtype(0))
    size = 4 if name in ("_softmax", "_log_softmax") and a.value(2, False) is True else a.size(0)
    return Cost.of(5 * n, a.nbytes(0), n * size, "softmax", a.dtype(0))


# name -> (index of the weight, index of the bias or None); other tensors (running stats) are read too
NORM_OPS = {
    "layer_norm": (2, 3),
    "native_layer_norm": (2, 3),
    "group_norm": (2, 3),
    "native_group_norm": (1, 2),
    "batch_norm": (1, 2),
    "native_batch_norm": (1, 2),
    "_batch_norm_impl_index": (1, 2),
    "_native_batch_norm_legit": (1, 2),
    "_native_batch_norm_legit_no_training": (1, 2),
    "instance_norm": (1, 2),
    "rms_norm": (2, None),
    "_fused_rms_norm": (2, None),
    "cudnn_batch_norm": (1, 2),
    "miopen_batch_norm": (1, 2),
}


def norm_cost(a: Args, name: str) -> Cost:
    # FLOPs per element: 5 to normalise (sum for the mean, subtract, square, sum for the
    # variance, multiply by 1/std; per-row rsqrt not counted) + 1 for a weight + 1 for a bias.
    # rms_norm: 3 (square, sum, multiply by 1/rms) + 1 for a weight.
    # Bytes: read the input, weight, bias and running statistics as recorded; write an output
    # of the input's shape. Saved mean/rstd (one fp32 per row/group) are not counted.
    w_i, b_i = NORM_OPS[name]
    n = numel(a.shape(0))
    base = 3 if "rms" in name else 5
    per = base + (a.is_tensor(w_i)) + (b_i is not None and a.is_tensor(b_i))
    read = sum(a.nbytes(i) for i in a.tensors())
    return Cost.of(per * n, read, n * a.size(0), "norm", a.dtype(0))


def norm_backward_cost(a: Args, name: str) -> Cost:
    # native_layer_norm_backward / native_group_norm_backward / native_batch_norm_backward
    # (cudnn_/miopen_batch_norm_backward(input, grad_output, weight, ...): the same, with input
    # first): 8 FLOPs per input element (by convention: recompute x_hat 2, grad_weight/bias sums 2,
    # the two row reductions 2, the combination 2). Reads every tensor input; writes
    # grad_input (input-shaped) and grad_weight/grad_bias (weight-shaped) when a weight exists.
    n = numel(a.shape(1))
    read = sum(a.nbytes(i) for i in a.tensors())
    w_i = {
        "native_layer_norm_backward": 5,
        "native_group_norm_backward": 4,
        "native_batch_norm_backward": 2,
        "cudnn_batch_norm_backward": 2,
        "miopen_batch_norm_backward": 2,
    }[name]
    written = a.nbytes(1) + 2 * a.nbytes(w_i)
    return Cost.of(8 * n, read, written, "norm", a.dtype(1))


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
