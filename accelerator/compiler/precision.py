"""Precision assignment: a dtype for every tensor from a policy, casts and Q/DQ ops inserted.

Policies (POLICIES; per-layer overrides by module-path prefix in ctx.precision_overrides,
resolved by CompileContext.policy):

- `fp32`: every floating tensor fp32 (the reference).
- `bf16`: matrix ops (MATMULS) read bf16 operands and accumulate in fp32 (their result is
  rounded to bf16 once); statistics (STATS: mean, sum, softmax, rsqrt, ...) read fp32, so
  softmax and normalisation statistics stay fp32; other elementwise ops follow their inputs
  (torch's type promotion); the program's outputs are cast back to their captured dtype. A
  matrix op of a layer overridden to fp32 (or int8/fp8 where quantisation leaves it, as a
  convolution) reads fp32: its bf16 operands are cast at its boundary.
- `int8` (accelerator/compiler/quantize.py): every linear (mm/addmm whose weight operand is a
  parameter, through permute/t) runs as
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

from accelerator.compiler.execute import propagate_dtypes
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Op, Output, Program, Ref, TensorType, rename_uses
from accelerator.compiler.quantize import LAYOUT, QUANT, fold_dequantized_matmuls, quantize_linears
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
_FLOAT = {"float32", "bfloat16", "float16", "float64"}


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
    p = quantize_linears(folded, ctx) if policies & set(QUANT) else folded
    p = _bf16(p, ctx) if "bf16" in policies else p
    p = _drop_noop_casts(propagate_dtypes(p))
    return _outputs_as_captured(p, program, ctx)


def _cast_op(value: str, vtype: TensorType, dtype: str, near: Op) -> Op:
    return Op(
        f"{value}_to_{dtype}", "npu.cast", (Ref(value), dtype), {}, vtype.with_dtype(dtype), near.module, near.source
    )


def _bf16(program: Program, ctx: CompileContext) -> Program:
    # Caches written in place (KV caches) are held in bf16: half the bytes every decode step reads.
    caches = {o.args[0].name for o in program.ops if "in_place" in o.attrs and ctx.policy(o.module) == "bf16"}
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
        # a matrix op of an fp32 layer (or an int8/fp8 one quantisation left as is) in a bf16
        # program: it reads fp32, so a bf16 value from its neighbours is cast at the boundary
        island = ctx.policy(op.module) != "bf16" and op.target in MATMULS
        if not island and (ctx.policy(op.module) != "bf16" or (op.target not in MATMULS | STATS and not in_place)):
            ops.append(op)
            continue
        want = "float32" if island else "bfloat16" if op.target in MATMULS or in_place else "float32"
        renames, boundary = {}, False
        for name in dict.fromkeys(op.refs()):
            t = types.get(name)
            if in_place and name == op.args[0].name:
                continue
            # planned even when the dtype is `want` now: an fp32 island upstream changes it once
            # dtypes propagate; _drop_noop_casts removes the casts that stay no-ops
            if isinstance(t, TensorType) and t.dtype in _FLOAT:
                boundary |= t.dtype != want
                key = (name, want)
                if key not in casts:
                    casts[key] = _cast_op(name, t, want, op)
                    ops.append(casts[key])
                renames[name] = casts[key].name
        if island:
            ops.append(rename_uses([op], renames)[0])
            if boundary:
                ctx.decide(
                    op.name, "fp32 operands", f"policy {ctx.policy(op.module)} in a bf16 program: cast at its boundary"
                )
            continue
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
        return op.target in MATMULS and ctx.policy(op.module) == "bf16"

    def only_matmuls(name: str) -> bool:
        uses = users.get(name, [])
        return bool(uses) and all(
            bf16_matmul(u) or (u.target in LAYOUT and users.get(u.name) and all(map(bf16_matmul, users[u.name])))
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
        if o.target in LAYOUT and o.args[0].name in weights and isinstance(o.type, TensorType)
        else o
        for o in program.ops
    ]
    return replace(program, inputs=inputs, state=state, ops=tuple(ops))


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
