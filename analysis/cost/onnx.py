"""ONNX operators (`onnx::Gemm`, as the ONNX Runtime collector names its node events) costed by
the ATen formulas they equal: one home for each formula, this file only maps names and layouts.

Arguments are the node's inputs in ONNX order (`shapes`, `dtypes` in Kineto's spelling) and,
where the formula needs attributes, `concrete` laid out as the ATen op's arguments
(collectors/onnx/ort_trace.py writes them from the model; a bare profile has none, and the op
then costs None: the model never guesses).

- Gemm(A[M,K], B, C?): 2*M*K*N with N = B[1] when B is [K,N] (transB=0) else B[0] ([N,K],
  transB=1); a square B gives N = K either way. transA is not recorded: A is taken as [M,K].
  Bias add not counted (as flop_counter for addmm). Bytes: A, B, C read, M*N written.
- MatMul: aten::matmul. Conv: aten::convolution with stride, padding, dilation, groups from the
  node's attributes (`concrete`). Elementwise ops and Softmax: their ATen namesakes. Concat: as
  aten::cat (0 FLOPs, inputs read, output written); Reshape and the other shape-only ops: 0.
- QuantizeLinear / DequantizeLinear (QDQ models): 2 FLOPs per element in fp32 (quantize_cost).
"""

from __future__ import annotations

from collections.abc import Callable

from analysis.cost.base import Args, Cost, Unknown, numel
from analysis.cost.compute import conv_cost, matmul_cost
from analysis.cost.memory import elementwise_cost, softmax_cost
from analysis.cost.movement import zero_cost


def gemm_cost(a: Args, name: str) -> Cost:
    (m, k), b = a.shape(0), a.shape(1)
    if len(b) != 2 or k not in b:
        raise Unknown
    n = b[1] if b[0] == k else b[0]
    read = a.nbytes(0) + a.nbytes(1) + (a.nbytes(2) if a.is_tensor(2) else 0)
    return Cost.of(2 * m * k * n, read, m * n * a.size(0), "gemm", a.dtype(0))


def concat_cost(a: Args, name: str) -> Cost:
    # Concat(x1, x2, ...): 0 FLOPs; every input read once, their sum written (as aten::cat).
    ts = a.tensors()
    if not ts:
        raise Unknown
    n = sum(a.nbytes(i) for i in ts)
    return Cost.of(0, n, n, "copy", a.dtype(ts[0]))


def quantize_cost(a: Args, name: str) -> Cost:
    # QuantizeLinear(x, scale, zero_point?) / DequantizeLinear(q, scale, zero_point?): 2 FLOPs per
    # element (a multiply by the scale or its inverse, an add of the zero point; rounding and
    # saturation not counted), done in fp32. Bytes: x read, the output written (QuantizeLinear: the
    # zero point's integer type, 1 byte when absent (uint8, the ONNX default); DequantizeLinear: fp32).
    n = numel(a.shape(0))
    if name == "quantize":
        out = a.size(2) if a.is_tensor(2) else 1
    else:
        out = 4
    return Cost.of(2 * n, a.nbytes(0), n * out, "elementwise", "fp32")


_ELEMENTWISE = {
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Div": "div",
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Erf": "erf",
    "Exp": "exp",
    "Sqrt": "sqrt",
    "Pow": "pow",
    "Neg": "neg",
}

ONNX_OPS: dict[str, tuple[Callable[[Args, str], Cost], str]] = {
    "Gemm": (gemm_cost, "gemm"),
    "MatMul": (lambda a, n: matmul_cost(a), "matmul"),
    "Conv": (conv_cost, "convolution"),
    "Softmax": (softmax_cost, "softmax"),
    "Concat": (concat_cost, "cat"),
    "QuantizeLinear": (quantize_cost, "quantize"),
    "DequantizeLinear": (quantize_cost, "dequantize"),
    # Shape-only ops: ORT's CPU kernels alias the input buffer (no data moved), as ATen's views.
    **{op: (zero_cost, "view") for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")},
    **{op: (elementwise_cost, aten) for op, aten in _ELEMENTWISE.items()},
}
