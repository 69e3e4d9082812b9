"""Legalisation against the hardware: every op mapped to the unit that runs it and its dtype to
one that unit supports.

Units: `matrix` (the systolic array: MATRIX ops), `vector` (elementwise, reductions,
quantize/cast: VECTOR ops, with the op class that sets their rate: add_mul, exp, reciprocal),
`dma` (data movement without arithmetic: layout changes, gathers, cache writes: DMA ops),
`host` (size arithmetic on the host, and ops no unit runs: the host partition).

Dtype rules: a matrix op whose dtype the matrix unit lacks runs on the vector unit when that
has the dtype (edge-npu: fp32 matmuls), else at the next wider dtype the matrix unit has
(a decision either way); a vector op whose dtype (for its op class) the vector unit lacks
runs in fp32, which validation guarantees. An op no unit runs gets a diagnostic naming the op,
its module path and source line, and goes to the host when the hardware and the caller allow
it (`host_fallback`), else stops the compile (InputError naming the source line)."""

from __future__ import annotations

from dataclasses import replace

from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Op, Program, TensorType
from profiler.model.errors import InputError

MATRIX = {
    "mm",
    "addmm",
    "bmm",
    "linear",
    "matmul",
    "convolution",
    "scaled_dot_product_attention",
    "npu.qmm",
}
EXP = {"exp", "sigmoid", "tanh", "gelu", "silu", "_softmax", "_log_softmax", "log", "erf"}
RECIPROCAL = {"rsqrt", "sqrt", "div", "reciprocal"}
ADD_MUL = {
    "add",
    "sub",
    "mul",
    "neg",
    "pow",
    "relu",
    "mean",
    "sum",
    "amax",
    "amin",
    "maximum",
    "minimum",
    "clamp",
    "le",
    "lt",
    "ge",
    "gt",
    "eq",
    "ne",
    "where",
    "abs",
    "npu.cast",
    "npu.quantize",
    "npu.dequantize",
    "quantize_per_tensor",
    "dequantize_per_tensor",
    "quantize_per_channel",
    "dequantize_per_channel",
    "_to_copy",
    "native_layer_norm",  # normalisation: a reduction and elementwise ops, on the vector unit
    "_native_batch_norm_legit_no_training",  # inference BN: a per-channel scale and shift
    "avg_pool2d",
    "max_pool2d_with_indices",
    "full",
    "arange",
    "zeros",
    "ones",
    "scalar_tensor",
    "logical_and",
    "logical_or",
    "logical_not",
}
DMA = {
    "view",
    "_unsafe_view",
    "reshape",
    "permute",
    "transpose",
    "t",
    "expand",
    "slice",
    "select",
    "cat",
    "unsqueeze",
    "squeeze",
    "clone",
    "index",
    "embedding",
    "index_copy_",
    "index_put_",
    "index_copy",
    "index_put",
    "copy",
    "copy_",
    "alias",
    "split",
    "split_with_sizes",
    "getitem",
    "contiguous",
    "unbind",
    "constant_pad_nd",
}
HOST = {"sym_size", "sym_numel", "sym_stride", "_assert_scalar", "sym_constrain_range_for_size"}
HOST_PREFIX = "operator."  # Python arithmetic on sizes (s0 // 4): the host computes the shapes
_OURS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8", "int8": "int8"}
_WIDER = {"fp8": "bf16", "int8": "bf16", "fp16": "fp32", "bf16": "fp32"}


def op_kind(target: str) -> str:
    """`mm` for aten.mm.default, `quantize_per_tensor` for quantized_decomposed.quantize_per_tensor.default,
    the whole name for npu.*, operator.* and getitem."""
    if target.startswith(("npu.", "operator.")) or "." not in target:
        return target
    return target.split(".")[1]


def unit_of(target: str) -> tuple[str, str] | None:
    """(unit, op class) of an op, None when no unit runs it."""
    k = op_kind(target)
    if k in MATRIX:
        return "matrix", "mac"
    if k in EXP:
        return "vector", "exp"
    if k in RECIPROCAL:
        return "vector", "reciprocal"
    if k in ADD_MUL:
        return "vector", "add_mul"
    if k in DMA:
        return "dma", ""
    if k in HOST or k.startswith(HOST_PREFIX):
        return "host", ""
    return None


def compute_dtype(op: Op, types: dict) -> str:
    """Our name of the dtype the op computes in: its first floating/quantized tensor operand's
    (a matmul's operands), else its result's; `fp32` when none is floating."""
    for name in op.refs():
        t = types.get(name)
        if isinstance(t, TensorType) and t.dtype in _OURS:
            return _OURS[t.dtype]
    t = op.type if isinstance(op.type, TensorType) else None
    return _OURS.get(t.dtype, "fp32") if t else "fp32"


def legalize(program: Program, ctx: CompileContext) -> Program:
    hw = ctx.hardware
    types = program.types()
    ops = []
    for op in program.ops:
        found = unit_of(op.target)
        if found is None:
            where = op.where()
            if not (ctx.host_fallback and hw.host_fallback):
                raise InputError(
                    op.source or program.name,
                    f"{op.target} in {op.module or '<top>'}: no unit of {hw.name} runs it and host fallback is off",
                )
            ctx.decide(op.name, "host partition", f"no unit of {hw.name} runs {op.target} ({where})")
            ops.append(
                replace(op, attrs={**op.attrs, "unit": "host", "diagnostic": f"unsupported: {op.target} at {where}"})
            )
            continue
        unit, op_class = found
        attrs = {**op.attrs, "unit": unit}
        if unit == "matrix":
            dtype = compute_dtype(op, types)
            if dtype not in hw.matrix_dtypes():
                if dtype in hw.vector_dtypes("add_mul"):
                    unit = attrs["unit"] = "vector"
                    op_class = "add_mul"
                    ctx.decide(
                        op.name,
                        f"{op_kind(op.target)} on the vector unit in {dtype}",
                        f"{hw.name}'s matrix unit has no {dtype} ({', '.join(hw.matrix_dtypes())})",
                    )
                else:
                    wide = dtype
                    while wide in _WIDER and wide not in hw.matrix_dtypes():
                        wide = _WIDER[wide]
                    ctx.decide(op.name, f"runs in {wide}", f"{hw.name}'s matrix unit has no {dtype}")
                    dtype = wide
            attrs["dtype"] = dtype
        if unit == "vector":
            dtype = compute_dtype(op, types)
            if dtype not in hw.vector_dtypes(op_class):
                ctx.decide(
                    op.name, f"{op_kind(op.target)} in fp32", f"{hw.name}'s vector unit has no {dtype} {op_class}"
                )
                dtype = "fp32"
            attrs["dtype"] = dtype
            attrs["op_class"] = op_class
        ops.append(replace(op, attrs=attrs))
    counts: dict[str, int] = {}
    for o in ops:
        counts[o.attrs["unit"]] = counts.get(o.attrs["unit"], 0) + 1
    ctx.decide("", "ops per unit: " + ", ".join(f"{u} {n}" for u, n in sorted(counts.items())), f"target {hw.name}")
    return program.with_ops(ops)
