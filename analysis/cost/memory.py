"""Cost formulas for the memory-bound arithmetic families: elementwise, reductions, softmax and
norms. Copies, gathers, casts, quantisation, optimizers and the zero-work ops are in
`analysis.cost.movement` (re-exported here).

Conventions in `analysis.cost`; every formula sits beside its code.
"""

from __future__ import annotations

from analysis.cost.base import Cost, Args, broadcast, numel, Unknown

# the data-movement formulas, where analysis.cost.ops imports them from
from analysis.cost.movement import (
    FILL_OPS as FILL_OPS,
    ZERO_OPS as ZERO_OPS,
    cat_cost as cat_cost,
    copy_cost as copy_cost,
    embedding_cost as embedding_cost,
    fill_cost as fill_cost,
    foreach_cost as foreach_cost,
    fused_optimizer_cost as fused_optimizer_cost,
    gather_cost as gather_cost,
    pad_cost as pad_cost,
    quant_cost as quant_cost,
    scalar_read_cost as scalar_read_cost,
    zero_cost as zero_cost,
)

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
