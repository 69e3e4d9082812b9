"""The collectives a tensor-parallel program gets (accelerator/compiler/partition.py): each one
an op on the DMA engines over the chip links, its bytes per chip by the ring algorithms
(npu_ops.all_reduce_bytes / all_gather_bytes) and its time in the decision; and the row-parallel
linear (partial product, all-reduce, bias added once after it)."""

from __future__ import annotations

from dataclasses import replace

from accelerator.compiler import npu_ops
from accelerator.compiler.cuts import value_bytes
from accelerator.compiler.legalize import op_kind
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Op, Ref, TensorType


class Collectives:
    """Emits collectives for `n` chips, recording each as a decision of `ctx`."""

    ctx: CompileContext
    n: int

    def collective(self, kind: str, value: str, name: str, near: Op, full: TensorType, dim: int | None) -> Op:
        nbytes = value_bytes(full)
        if kind == "all_reduce":
            args: tuple = (Ref(value), self.n)
            sent = npu_ops.all_reduce_bytes(nbytes, self.n)
            steps = 2 * (self.n - 1)
        else:
            args = (Ref(value), dim, self.n)
            sent = npu_ops.all_gather_bytes(nbytes, self.n)
            steps = self.n - 1
        link = self.ctx.hardware.link
        t = (sent / link.bandwidth + steps * link.latency_s) * 1e6 if link else 0.0
        formula = (
            f"2 (N-1)/N x {nbytes} B" if kind == "all_reduce" else f"(N-1)/N x {nbytes} B"
        ) + f" = {sent} B per chip, N = {self.n}"
        self.ctx.decide(name, f"npu.{kind} of {value}: {sent} B per chip, {t:.3g} us", formula)
        attrs = {"unit": "dma", "collective": kind, "bytes": sent, "chips": self.n}
        return Op(name, f"npu.{kind}", args, {}, full, near.module, near.source, attrs)

    def row_parallel(self, op: Op) -> list[Op]:
        """`op` (mm or addmm) as a partial product, its all-reduce, and the bias added once;
        the last op keeps `op`'s name (its readers and the functional check read it)."""
        x, w = op.args[-2], op.args[-1]
        bias = op.args[0] if op_kind(op.target) == "addmm" else None
        partial = replace(
            op,
            name=f"{op.name}_partial",
            target="npu.qmm" if op.target == "npu.qmm" else "aten.mm.default",  # int32 partial sums: exact
            args=(x, w),
            attrs={**op.attrs, "parallel": "row", "partial": True},
        )
        self.ctx.decide(op.name, f"row-parallel over {self.n} chips", "its input is split along the contracted dim")
        reduced = f"{op.name}_reduced" if bias is not None else op.name
        out = [partial, self.collective("all_reduce", partial.name, reduced, op, op.type, None)]
        if bias is not None:
            t = op.type.dtype if isinstance(op.type, TensorType) else "float32"
            attrs = {"unit": "vector", "dtype": op.attrs.get("dtype", t), "op_class": "add_mul"}
            out.append(Op(op.name, "aten.add.Tensor", (Ref(reduced), bias), {}, op.type, op.module, op.source, attrs))
        return out
