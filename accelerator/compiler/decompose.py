"""Decomposition to the core ATen op set, keeping whole what the hardware runs whole:

- `scaled_dot_product_attention` stays one op (the attention kernel, not matmul-softmax-matmul);
- the KV-cache update stays an in-place write: export functionalises `cache.index_copy_(...)` into
  `index_copy(cache, ...)` (a new tensor the size of the whole cache) plus a buffer-mutation
  output; this pass writes it back as `index_copy_` on the cache buffer, so an update moves
  the new rows only (bytes: numel(source) x itemsize, not the cache's size);
- quantize/dequantize ops (torch's `quantized_decomposed.*`) are not in the decomposition table
  and survive as they are, so an int8 linear stays int8 x int8.

The table is torch.export's `default_decompositions()` minus the kept ops (KEEP)."""

from __future__ import annotations

from dataclasses import replace

import torch

from accelerator.compiler.blocks import expand
from accelerator.compiler.capture import from_exported
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Op, Program, rename_uses

KEEP = (
    torch.ops.aten.scaled_dot_product_attention.default,
    torch.ops.aten.index_copy.default,
)
#: functional scatter -> its in-place form, for cache updates
IN_PLACE = {"aten.index_copy.default": "aten.index_copy_.default", "aten.index_put.default": "aten.index_put_.default"}


def decompose(program: Program, ctx: CompileContext) -> Program:
    if program.exported is None:
        ctx.decide("", "nothing to decompose", "the program no longer corresponds to an exported graph")
        return program
    table = torch.export.default_decompositions()
    for op in KEEP:
        table.pop(op, None)
        ctx.decide("", f"kept {op} whole", "the accelerator runs it as one op")
    ep = program.exported.run_decompositions(table)
    out = from_exported(ep, program.name, program.example_inputs)
    if program.repeat is not None:  # the exported graph holds two of the blocks: instantiate them all
        rep = program.repeat
        out, n = expand(out, rep)
        out = replace(out, exported=ep, repeat=rep)
        ctx.decide(
            rep.block(0),
            f"decomposed once ({n} ops), reused x{rep.count - 1}",
            f"{rep.count} identical {rep.cls} blocks",
        )
    return cache_updates_in_place(out, ctx)


def cache_updates_in_place(program: Program, ctx: CompileContext) -> Program:
    """Each functional scatter into a buffer whose result only becomes that buffer's new value
    (a buffer-mutation output) rewritten as the in-place op on the buffer itself."""
    inputs = {i.name: i for i in program.inputs}
    mutated = {o.name: o for o in program.outputs if o.kind == "buffer"}
    renames: dict[str, str] = {}
    ops: list[Op] = []
    last_read = {r: i for i, op in enumerate(program.ops) for r in op.refs()}  # one walk, not one per op
    for i, op in enumerate(program.ops):
        buf = op.args[0].name if op.args and hasattr(op.args[0], "name") else None
        out = mutated.get(op.name)
        # In place is only right when nothing later still reads the old value of the buffer.
        old_read_later = buf is not None and last_read.get(buf, -1) > i
        if op.target in IN_PLACE and out and buf in inputs and inputs[buf].target == out.target and not old_read_later:
            ops.append(replace(op, target=IN_PLACE[op.target], attrs={**op.attrs, "in_place": buf}))
            renames[op.name] = buf
            ctx.decide(
                op.name, f"{IN_PLACE[op.target]} into {out.target}", "a cache update writes its new rows in place"
            )
        else:
            ops.append(op)
    ops = rename_uses(ops, renames)
    # The in-place op is still listed (by its own name) so executors keep it; its result is the buffer.
    outputs = tuple(o for o in program.outputs if o.name not in renames)
    return replace(program, ops=tuple(ops), outputs=outputs)
