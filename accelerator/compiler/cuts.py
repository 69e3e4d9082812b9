"""Host cuts: every op legalisation sent to the host (unit host) whose tensor operands the
accelerator produced (or holds: weights) is a cut; each such value crosses the host link to
the host, and each host result an accelerator op reads crosses back. Cost of a crossing, a
decision on the host op (attrs `cut_in_bytes`, `cut_out_bytes`):

    bytes = numel x itemsize;   time = bytes / host_link.bandwidth + host_link.latency_s

Values the host produced itself (size arithmetic on the user's inputs) cross nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelerator.compiler import npu_ops
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Program, tensor_types

SCALARS = {"symint", "symfloat", "symbool", "none"}


def value_bytes(t: Any) -> int:
    """Bytes of a value's tensors (0 for sizes and scalars computed at run time)."""
    return sum(x.numel * npu_ops.dtype_of(x.dtype).itemsize for x in tensor_types(t) if x.dtype not in SCALARS)


def host_cuts(program: Program, ctx: CompileContext) -> Program:
    """Every host op annotated with the bytes it moves over the host link, a decision per cut."""
    link = ctx.hardware.host_link
    producers = program.producers()
    kinds = {i.name: i.kind for i in program.inputs}
    types = program.types()
    users = program.users()

    def on_host(name: str) -> bool:
        op = producers.get(name)
        return kinds.get(name) == "user" if op is None else op.attrs.get("unit") == "host"

    def cost(nbytes: int) -> str:
        if link is None:
            return f"{nbytes} B ({ctx.hardware.name} gives no host_link bandwidth)"
        us = (nbytes / link.bandwidth + link.latency_s) * 1e6
        return f"{nbytes} B / {link.bandwidth / 1e9:g} GB/s + {link.latency_s * 1e6:g} us = {us:.3g} us"

    ops = []
    for op in program.ops:
        if (
            op.attrs.get("unit") != "host"
            or not value_bytes(op.type)
            and not any(value_bytes(types[r]) for r in op.refs())
        ):
            ops.append(op)
            continue
        cut_in = 0
        for r in dict.fromkeys(op.refs()):
            b = value_bytes(types[r])
            if b and not on_host(r):
                cut_in += b
                ctx.decide(op.name, f"cut: {r} to the host", f"{op.target} runs on the host; {cost(b)}")
        out = value_bytes(op.type)
        readers = [u.name for u in users.get(op.name, []) if u.attrs.get("unit") != "host"]
        cut_out = out if readers else 0
        if cut_out:
            ctx.decide(op.name, f"cut: {op.name} back to the accelerator", f"read by {readers[0]}; {cost(out)}")
        ops.append(replace(op, attrs={**op.attrs, "cut_in_bytes": cut_in, "cut_out_bytes": cut_out}))
    return program.with_ops(ops)
