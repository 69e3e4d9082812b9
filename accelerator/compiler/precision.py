"""Precision assignment: a dtype for every tensor from a policy, casts and Q/DQ ops inserted.

Policies (POLICIES; per-layer overrides by module-path prefix in ctx.precision_overrides):

- `fp32`: every floating tensor fp32 (the reference).
- `bf16`: matrix ops (MATMULS) read bf16 operands and accumulate in fp32 (their result is
  rounded to bf16 once); statistics (STATS: mean, sum, softmax, rsqrt, ...) read fp32, so
  softmax and normalisation statistics stay fp32; other elementwise ops follow their inputs
  (torch's type promotion); the program's outputs are cast back to their captured dtype.
- `int8`: every linear (mm/addmm whose weight operand is a parameter, through permute/t) runs as
  `npu.qmm` on int8 x int8 with an int32 accumulator: weights quantized per output channel
  (scale = max|w_row| / 127), activations per tensor with a static scale calibrated on the
  example inputs (scale = max|x| / 127), then `npu.dequantize` (acc x s_x x s_w) to fp32. Other
  ops (attention, elementwise) stay fp32.
- `fp8`: as int8 with float8_e4m3fn and 448 (its largest finite value) in place of 127, fp32
  accumulation; only on hardware whose matrix unit lists fp8.

Op names: an op the pass rewrites keeps its name on the value its users read (so the functional
check compares it with the reference by name); the ops it adds are named after it."""

from __future__ import annotations

from dataclasses import replace
import torch

from accelerator.compiler.execute import propagate_dtypes, run
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Input, Op, Output, Program, Ref, TensorType, prune, rename_uses
from profiler.model.errors import InputError

POLICIES = ("fp32", "bf16", "int8", "fp8")
MATMULS = {
    "aten.mm.default",
    "aten.addmm.default",
    "aten.bmm.default",
    "aten.linear.default",
    "aten.scaled_dot_product_attention.default",
    "aten.convolution.default",
}
STATS = {
    "aten.mean.dim",
    "aten.sum.dim_IntList",
    "aten.var.correction",
    "aten.var_mean.correction",
    "aten._softmax.default",
    "aten._log_softmax.default",
    "aten.rsqrt.default",
    "aten.native_layer_norm.default",
    "aten.native_group_norm.default",
}
_LAYOUT = {"aten.permute.default", "aten.t.default", "aten.transpose.int"}
_QUANT = {"int8": ("int8", 127.0), "fp8": ("float8_e4m3fn", 448.0)}  # torch dtype, largest magnitude
_FLOAT = {"float32", "bfloat16", "float16", "float64"}


def policy_of(op: Op, ctx: CompileContext) -> str:
    """The policy for `op`: the override of the longest module-path prefix, else ctx.precision."""
    best = ""
    for prefix in ctx.precision_overrides:
        if (op.module == prefix or op.module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return ctx.precision_overrides[best] if best else ctx.precision


def assign_precision(program: Program, ctx: CompileContext) -> Program:
    policies = {ctx.precision, *ctx.precision_overrides.values()}
    bad = policies - set(POLICIES)
    if bad:
        raise InputError(None, f"unknown precision policy {sorted(bad)[0]!r} (policies: {', '.join(POLICIES)})")
    if "fp8" in policies and "fp8" not in ctx.hardware.matrix_dtypes():
        raise InputError(
            ctx.hardware.name,
            f"precision fp8: the matrix unit has no fp8 (it runs {', '.join(ctx.hardware.matrix_dtypes())})",
        )
    folded = fold_dequantized_matmuls(program, ctx)
    if policies == {"fp32"}:
        ctx.decide("", "every tensor fp32", "policy fp32")
        return folded if folded is program else propagate_dtypes(folded)
    p = _quantize_linears(folded, ctx) if policies & set(_QUANT) else folded
    p = _bf16(p, ctx) if "bf16" in policies else p
    p = _drop_noop_casts(propagate_dtypes(p))
    return _outputs_as_captured(p, program, ctx)


def _cast_op(value: str, vtype: TensorType, dtype: str, near: Op) -> Op:
    return Op(
        f"{value}_to_{dtype}", "npu.cast", (Ref(value), dtype), {}, vtype.with_dtype(dtype), near.module, near.source
    )


def _bf16(program: Program, ctx: CompileContext) -> Program:
    # Caches written in place (KV caches) are held in bf16: half the bytes every decode step reads.
    caches = {o.args[0].name for o in program.ops if "in_place" in o.attrs and policy_of(o, ctx) == "bf16"}
    inputs = tuple(
        replace(i, type=i.type.with_dtype("bfloat16")) if i.name in caches and i.type.dtype in _FLOAT else i
        for i in program.inputs
    )
    state = {k: v.to(torch.bfloat16) if k in caches and v.is_floating_point() else v for k, v in program.state.items()}
    for name in sorted(caches):
        ctx.decide(name, "held in bf16", "policy bf16: a cache written in place (half the bytes per step)")
    program = _bf16_weights(replace(program, inputs=inputs, state=state), ctx)
    types = program.types()
    casts: dict[tuple[str, str], Op] = {}
    ops: list[Op] = []
    for op in program.ops:
        in_place = "in_place" in op.attrs and op.args[0].name in caches
        if policy_of(op, ctx) != "bf16" or (op.target not in MATMULS | STATS and not in_place):
            ops.append(op)
            continue
        want = "bfloat16" if op.target in MATMULS or in_place else "float32"
        renames = {}
        for name in dict.fromkeys(op.refs()):
            t = types.get(name)
            if in_place and name == op.args[0].name:
                continue
            if isinstance(t, TensorType) and t.dtype in _FLOAT and t.dtype != want:
                key = (name, want)
                if key not in casts:
                    casts[key] = _cast_op(name, t, want, op)
                    ops.append(casts[key])
                renames[name] = casts[key].name
        attrs = {} if in_place else {"accumulate": "float32"} if want == "bfloat16" else {"stats": "float32"}
        ops.append(replace(rename_uses([op], renames)[0], attrs={**op.attrs, **attrs}))
        if in_place:
            continue
        ctx.decide(
            op.name,
            f"{'bf16 operands, fp32 accumulation' if want == 'bfloat16' else 'fp32 statistics'}",
            f"policy bf16: {op.target} is a {'matrix op' if want == 'bfloat16' else 'statistic'}",
        )
    return program.with_ops(ops)


def _bf16_weights(program: Program, ctx: CompileContext) -> Program:
    """Parameters only bf16 matmuls read (directly or through one transpose) stored in bf16: the
    cast happens once at compile time, not on every call."""
    users = program.users()

    def bf16_matmul(op: Op) -> bool:
        return op.target in MATMULS and policy_of(op, ctx) == "bf16"

    def only_matmuls(name: str) -> bool:
        uses = users.get(name, [])
        return bool(uses) and all(
            bf16_matmul(u) or (u.target in _LAYOUT and users.get(u.name) and all(map(bf16_matmul, users[u.name])))
            for u in uses
        )

    weights = {
        i.name
        for i in program.inputs
        if i.kind in ("param", "constant") and i.type.dtype == "float32" and only_matmuls(i.name)
    }
    if not weights:
        return program
    for name in sorted(weights):
        ctx.decide(name, "stored bf16", "policy bf16: only matrix ops read it (cast once at compile time)")
    inputs = tuple(replace(i, type=i.type.with_dtype("bfloat16")) if i.name in weights else i for i in program.inputs)
    state = {k: v.to(torch.bfloat16) if k in weights else v for k, v in program.state.items()}
    ops = [
        replace(o, type=o.type.with_dtype("bfloat16"))
        if o.target in _LAYOUT and o.args[0].name in weights and isinstance(o.type, TensorType)
        else o
        for o in program.ops
    ]
    return replace(program, inputs=inputs, state=state, ops=tuple(ops))


_DQ_TENSOR = "quantized_decomposed.dequantize_per_tensor.default"
_DQ_CHANNEL = "quantized_decomposed.dequantize_per_channel.default"


def _dequantized(program: Program, value: str, producers: dict[str, Op]) -> tuple[str, object, Op | None] | None:
    """(int8 value, its scale, the transpose between) when `value` is a symmetric int8
    dequantize (per tensor, or per channel along the rows of a transposed weight)."""
    op, layout = producers.get(value), None
    if op is not None and op.target in _LAYOUT:
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
    while value in producers and producers[value].target in _LAYOUT:
        chain.append(producers[value])
        value = producers[value].args[0].name
    inp = inputs.get(value)
    if inp is None or inp.kind != "param" or len(inp.type.hint) != 2 or len(chain) != 1:
        return None
    return inp, chain


def _quantize_linears(program: Program, ctx: CompileContext) -> Program:
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
        policy = policy_of(op, ctx)
        mm = op.target in ("aten.mm.default", "aten.addmm.default") and policy in _QUANT
        a, b = (op.args[1], op.args[2]) if op.target == "aten.addmm.default" else op.args[:2] if mm else (None, None)
        found = _weight_param(program, b.name) if mm else None
        if op.target == "aten.convolution.default" and policy in _QUANT:
            ctx.decide(op.name, "left fp32", f"policy {policy}: quantized convolution is not implemented yet")
        if not found:
            if mm:
                ctx.decide(op.name, "left fp32", "its B operand is not a 2-D parameter under one transpose")
            ops.append(op)
            continue
        dtype, qmax = _QUANT[policy]
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


def _drop_noop_casts(program: Program) -> Program:
    """Casts to the dtype their input already has (a cast planned before the dtypes upstream
    changed: bf16 GELU of a bf16 matmul) removed, their users reading the input."""
    types = program.types()
    renames = {
        o.name: o.args[0].name
        for o in program.ops
        if o.target == "npu.cast" and getattr(types.get(o.args[0].name), "dtype", None) == o.args[1]
    }
    if not renames:
        return program
    ops = [o for o in program.ops if o.name not in renames]
    return program.with_ops(rename_uses(ops, renames))


def _outputs_as_captured(p: Program, original: Program, ctx: CompileContext) -> Program:
    """Cast user outputs whose dtype changed back to the dtype they were captured with."""
    before, after = original.types(), p.types()
    ops, outputs = list(p.ops), []
    for out in p.outputs:
        was, now = before.get(out.name), after.get(out.name)
        if (
            out.kind == "user"
            and isinstance(was, TensorType)
            and isinstance(now, TensorType)
            and was.dtype != now.dtype
        ):
            near = p.producers().get(out.name) or ops[-1]
            cast = _cast_op(out.name, now, was.dtype, near)
            ops.append(cast)
            outputs.append(Output(cast.name, out.kind, out.target))
            ctx.decide(out.name, f"output cast to {was.dtype}", "outputs keep the dtype the model returns")
        else:
            outputs.append(out)
    return replace(p, ops=tuple(ops), outputs=tuple(outputs))
