"""Quantized matmuls (the int8 and fp8 policies of accelerator/compiler/precision.py):

- `quantize_linears`: every linear (mm/addmm whose B operand is a 2-D parameter under one
  transpose) as `npu.quantize` (activation, per tensor, static scale max|x| / qmax calibrated on
  the example inputs) -> `npu.qmm` (int8 x int8 -> int32; fp8 x fp8 -> fp32) -> `npu.dequantize`
  (acc x s_x x s_w), the weight stored quantized per output channel (s_w = max|W_row| / qmax);
- `fold_dequantized_matmuls`: an already quantized model's `dequantize -> mm` (PT2E) folded into
  the same `npu.qmm` + `npu.dequantize`.

Ops keep their names on the value their users read (an addmm's value is its dequantize plus bias)."""

from __future__ import annotations

from dataclasses import replace

import torch

from accelerator.compiler.execute import run
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Input, Op, Program, Ref, TensorType, prune
from profiler.model.errors import InputError

QUANT = {"int8": ("int8", 127.0), "fp8": ("float8_e4m3fn", 448.0)}  # torch dtype, largest magnitude
LAYOUT = {"aten.permute.default", "aten.t.default", "aten.transpose.int"}


_DQ_TENSOR = "quantized_decomposed.dequantize_per_tensor.default"
_DQ_CHANNEL = "quantized_decomposed.dequantize_per_channel.default"


def _dequantized(program: Program, value: str, producers: dict[str, Op]) -> tuple[str, object, Op | None] | None:
    """(int8 value, its scale, the transpose between) when `value` is a symmetric int8
    dequantize (per tensor, or per channel along the rows of a transposed weight)."""
    op, layout = producers.get(value), None
    if op is not None and op.target in LAYOUT:
        layout, op = op, producers.get(op.args[0].name)
    if op is None or op.target not in (_DQ_TENSOR, _DQ_CHANNEL) or op.args[-1] != torch.int8:
        return None
    if op.target == _DQ_TENSOR:
        return (op.args[0].name, op.args[1], layout) if op.args[2] == 0 else None
    zeros = program.state.get(op.args[2].name) if isinstance(op.args[2], Ref) else None
    # per-channel scales must run along the matmul's output columns: rows (axis 0) of W under one transpose
    if zeros is None or bool(zeros.any()) or op.args[3] != 0 or layout is None:
        return None
    return op.args[0].name, op.args[1], layout


def fold_dequantized_matmuls(program: Program, ctx: CompileContext) -> Program:
    """A quantized model's `dequantize -> mm` (PT2E's representation of an int8 linear, which
    survives decomposition) folded into `npu.qmm` on the int8 tensors and one `npu.dequantize`
    of the int32 sums: the int8 linear runs as int8 arithmetic, not as fp32."""
    producers, types = program.producers(), program.types()
    ops: list[Op] = []
    folded = False
    for op in program.ops:
        if op.target not in ("aten.mm.default", "aten.addmm.default"):
            ops.append(op)
            continue
        a, b = (op.args[1], op.args[2]) if op.target == "aten.addmm.default" else op.args[:2]
        qa = _dequantized(program, a.name, producers)
        qb = _dequantized(program, b.name, producers) if qa else None
        if not (qa and qb):
            ops.append(op)
            continue
        (xa, sa, la), (xb, sb, lb) = qa, qb
        operands = []
        for x, layout in ((xa, la), (xb, lb)):
            if layout is not None:
                t = replace(
                    layout,
                    name=f"{layout.name}_int8_{op.name}",
                    args=(Ref(x), *layout.args[1:]),
                    type=types[layout.name].with_dtype("int8"),
                )
                ops.append(t)
                x = t.name
            operands.append(Ref(x))
        out = op.type if isinstance(op.type, TensorType) else None
        acc = Op(
            f"{op.name}_acc",
            "npu.qmm",
            tuple(operands),
            {},
            out.with_dtype("int32"),
            op.module,
            op.source,
            {"accumulate": "int32"},
        )
        deq_name = f"{op.name}_dq" if op.target == "aten.addmm.default" else op.name
        ops += [
            acc,
            Op(
                deq_name, "npu.dequantize", (Ref(acc.name), sa, sb), {}, out.with_dtype("float32"), op.module, op.source
            ),
        ]
        if op.target == "aten.addmm.default":
            ops.append(Op(op.name, "aten.add.Tensor", (Ref(deq_name), op.args[0]), {}, op.type, op.module, op.source))
        ctx.decide(op.name, "dequantize -> matmul folded into int8 x int8 -> int32", "the model is already quantized")
        folded = True
    return prune(program.with_ops(ops)) if folded else program


def _weight_param(program: Program, value: str) -> tuple[Input, list[Op]] | None:
    """The parameter behind a matmul's B operand through permute/t ops, and those ops."""
    producers, inputs = program.producers(), {i.name: i for i in program.inputs}
    chain: list[Op] = []
    while value in producers and producers[value].target in LAYOUT:
        chain.append(producers[value])
        value = producers[value].args[0].name
    inp = inputs.get(value)
    if inp is None or inp.kind != "param" or len(inp.type.hint) != 2 or len(chain) != 1:
        return None
    return inp, chain


def quantize_linears(program: Program, ctx: CompileContext) -> Program:
    if any(getattr(t, "is_meta", False) for t in program.state.values()):
        raise InputError(
            program.name,
            f"precision {ctx.precision}: calibration needs real weights; this model's are on the meta device",
        )
    # Static activation scales: the captured program run on its example inputs.
    _, values = run(program, program.example_inputs)
    ops: list[Op] = []
    new_inputs, state = list(program.inputs), dict(program.state)
    quantized: dict[str, tuple[str, str]] = {}  # param -> (int8 input name, scale input name)
    types = program.types()
    for op in program.ops:
        policy = ctx.policy(op.module)
        mm = op.target in ("aten.mm.default", "aten.addmm.default") and policy in QUANT
        a, b = (op.args[1], op.args[2]) if op.target == "aten.addmm.default" else op.args[:2] if mm else (None, None)
        found = _weight_param(program, b.name) if mm else None
        if op.target == "aten.convolution.default" and policy in QUANT:
            ctx.decide(op.name, "left fp32", f"policy {policy}: quantized convolution is not implemented yet")
        if not found:
            if mm:
                ctx.decide(op.name, "left fp32", "its B operand is not a 2-D parameter under one transpose")
            ops.append(op)
            continue
        dtype, qmax = QUANT[policy]
        param, chain = found
        if param.name not in quantized:
            w = state[param.name].detach().float()
            w_scale = w.abs().amax(dim=1).clamp(min=1e-12) / qmax  # per output channel (row of W)
            wq_name, ws_name = f"{param.name}_{policy}", f"{param.name}_scale"
            state[wq_name] = (
                torch.clamp(w / w_scale[:, None], -qmax, qmax).round().to(torch.int8)
                if policy == "int8"
                else (w / w_scale[:, None]).to(torch.float8_e4m3fn)
            )
            state[ws_name] = w_scale
            new_inputs.append(Input(wq_name, "param", param.target, param.type.with_dtype(dtype)))
            scale_type = TensorType(param.type.hint[:1], "float32", param.type.hint[:1])
            new_inputs.append(Input(ws_name, "constant", f"{param.target}.scale", scale_type))
            quantized[param.name] = (wq_name, ws_name)
        wq_name, ws_name = quantized[param.name]
        t = chain[0]
        wt = replace(
            t, name=f"{t.name}_{policy}_{op.name}", args=(Ref(wq_name), *t.args[1:]), type=t.type.with_dtype(dtype)
        )
        x_scale = max(float(values[a.name].detach().abs().max()), 1e-12) / qmax
        out_t = op.type if isinstance(op.type, TensorType) else None
        xq = Op(
            f"{op.name}_xq",
            "npu.quantize",
            (a, x_scale, dtype, qmax),
            {},
            types[a.name].with_dtype(dtype),
            op.module,
            op.source,
        )
        acc_dtype = "int32" if policy == "int8" else "float32"
        acc = Op(
            f"{op.name}_acc",
            "npu.qmm",
            (Ref(xq.name), Ref(wt.name)),
            {},
            out_t.with_dtype(acc_dtype),
            op.module,
            op.source,
            {"accumulate": acc_dtype},
        )
        deq_name = f"{op.name}_dq" if op.target == "aten.addmm.default" else op.name
        deq = Op(
            deq_name,
            "npu.dequantize",
            (Ref(acc.name), x_scale, Ref(ws_name)),
            {},
            out_t.with_dtype("float32"),
            op.module,
            op.source,
        )
        ops += [wt, xq, acc, deq]
        if op.target == "aten.addmm.default":
            ops.append(Op(op.name, "aten.add.Tensor", (Ref(deq_name), op.args[0]), {}, op.type, op.module, op.source))
        ctx.decide(
            op.name,
            f"{dtype} x {dtype} -> {acc_dtype}, weight {param.target} per channel, "
            f"activation per tensor (scale {x_scale:.3g})",
            f"policy {policy}: a linear",
        )
    return prune(replace(program, ops=tuple(ops), inputs=tuple(new_inputs), state=state))
