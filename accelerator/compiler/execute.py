"""Running a `Program` with torch: the functional mode's executor, and (on the meta device) the
dtype/shape propagation passes use after they change dtypes.

`run(program, inputs)` returns the user outputs and every value by name. Buffers are cloned
first, so a run never changes the program's state (a KV cache update writes into the clone).
A program with kernels (after fusion) runs kernel by kernel in their order, each kernel's ops in
program order; a tiled matmul (mm, addmm, bmm, npu.qmm) runs tile by tile with its accumulation
in the accumulate dtype, a convolution as its tiled implicit GEMM, and attention with a tile
smaller than the whole runs flash-style (accelerator/compiler/tiled.py); a vector kernel runs its
whole op chain over one tile of rows (or elements) after the other
(accelerator/compiler/tiled_vector.py, tiled_permute.py, tiled_pool.py), a DMA kernel moves its
output a tile of elements at a time (tiled_dma.py). Around a tiled matmul, its prologue's
activation side runs tm rows of the operand a tile and its weight side whole (the weight's
load), its epilogue tm x tn elements a tile. `ran_whole` collects the kernels with a tile that
ran whole. Without kernels (or with `tiled=False`) it runs op by op."""

from __future__ import annotations

import importlib
import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

import torch

from accelerator.compiler import npu_ops
from accelerator.compiler import tiled as tiled_exec
from accelerator.compiler import tiled_dma, tiled_vector
from accelerator.compiler.program import Op, Program, Ref, TensorType, map_refs


@cache
def resolve(target: str) -> Callable[..., Any]:
    """The callable of a target name: `aten.mm.default` -> torch.ops.aten.mm.default."""
    if target == "getitem":
        return operator.getitem
    if target.startswith("operator."):
        return getattr(operator, target.removeprefix("operator."))
    if target in npu_ops.OPS:
        return npu_ops.OPS[target]
    if target.startswith("quantized_decomposed."):
        importlib.import_module("torch.ao.quantization.fx._decomposed")  # registers the namespace
    ns, name, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, ns), name), overload)


def _schedule(program: Program, device: str | None, tiled_: bool) -> list[tuple[Any, Any, str | None]]:
    """(op, the tile of its kernel when it runs tiled, else None, the kernel's name when it has
    a tile) in execution order; a tiled vector kernel is one step (its ops as a list, its tile)."""
    names = [o for k in program.kernels for o in k.ops]
    if device is not None or not program.kernels or sorted(names) != sorted(o.name for o in program.ops):
        return [(op, None, None) for op in program.ops]
    ops = {o.name: o for o in program.ops}
    params = {i.name for i in program.inputs if i.kind in ("param", "constant")}
    out: list[tuple[Any, Any, str | None]] = []
    for k in program.kernels:
        owner = k.name if tiled_ and k.tile else None
        if tiled_ and k.unit in ("vector", "dma") and k.tile and "elements" in k.tile:
            out.append(([ops[n] for n in k.ops], k.tile, owner))
            continue
        anchor = next((n for n in k.ops if ops[n].target in _TILED), None) if tiled_ and k.tile else None
        if anchor and "m" in (k.tile or {}) and k.ops.index(anchor) > 0:
            pre = _prologue(ops, [ops[n] for n in k.ops[: k.ops.index(anchor)]], params, ops[anchor], k.tile)
            out += [(o, None, owner) for o in pre[0]]
            if pre[1]:
                out.append((pre[1], pre[2], owner))
            k = replace(k, ops=k.ops[k.ops.index(anchor) :])
        for i, name in enumerate(k.ops):
            op = ops[name]
            tile = k.tile if tiled_ and k.tile else None
            if tile and not (
                ("m" in tile and op.target in _TILED)
                or ("q" in tile and op.target == _SDPA and k.attrs.get("attention") == "flash")
            ):
                tile = None
            out.append((op, tile, owner))
            if tile and "m" in tile and i + 1 < len(k.ops):  # the epilogue over tm x tn elements a tile
                out.append(([ops[n] for n in k.ops[i + 1 :]], {"elements": tile["m"] * tile["n"]}, owner))
                break
    return out


def _prologue(
    ops: dict[str, Op], pre: list[Op], params: set[str], anchor: Op, tile: dict[str, int]
) -> tuple[list[Op], list[Op], dict[str, int]]:
    """(the weight side of a matmul's prologue: ops reading only parameters, run whole as the
    weight's load; the activation side (a norm, casts, views), tm rows of the operand a tile;
    that tile in elements: tm x the operand's last dim)."""
    inside = {o.name for o in pre}
    act: set[str] = set()
    for o in pre:
        for r in o.refs():
            made = ops.get(r)
            size = made is not None and isinstance(made.type, TensorType) and made.type.dtype == "symint"
            if r in act or (r not in inside and r not in params and not size):
                act.add(o.name)
                break
    a = anchor.args[1] if anchor.target == "aten.addmm.default" else anchor.args[0]
    t = ops[a.name].type if isinstance(a, Ref) and a.name in ops else None
    width = t.hint[-1] if isinstance(t, TensorType) and t.hint else 1
    return [o for o in pre if o.name not in act], [o for o in pre if o.name in act], {"elements": tile["m"] * width}


_TILED = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "npu.qmm", "aten.convolution.default"}
_SDPA = "aten.scaled_dot_product_attention.default"


def run(
    program: Program,
    inputs: Sequence[Any],
    *,
    device: str | None = None,
    state: dict[str, Any] | None = None,
    tiled: bool = True,
    ran_whole: list[str] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """(user outputs, values by name) of `program` on `inputs` (the forward's arguments).

    `ran_whole`, when given, receives the name of every kernel with a tile that ran whole
    (not tile by tile): the tests hold it empty on every workload.

    Without `state`, buffers are cloned from the program's; a given `state` (input name ->
    tensor) is used as it is, so in-place ops (a KV-cache update) write into it and a decode
    step can follow a prefill."""
    clone = state is None
    state = dict(program.state if state is None else state)
    user = [i for i in program.inputs if i.kind == "user"]
    if len(user) != len(inputs):
        raise ValueError(f"{program.name} takes {len(user)} inputs, got {len(inputs)}")
    if program.chips > 1:
        return _run_chips(program, inputs, device, state, clone)
    env: dict[str, Any] = {i.name: x for i, x in zip(user, inputs)}
    for i in program.inputs:
        if i.kind != "user":
            t = state[i.name]
            env[i.name] = t.to(device) if device else (t.clone() if clone and i.kind == "buffer" else t)
    kernels = {k.name: k for k in program.kernels}
    tiled_kernels: set[str] = set()  # kernels with a tile that ran (at least their anchor) tile by tile
    owners: dict[str, None] = {}  # kernels with a tile, in order
    for op, tile, owner in _schedule(program, device, tiled):
        if owner is not None:
            owners[owner] = None
        if isinstance(op, list) and owner is not None:  # a vector or DMA kernel, one tile after the other
            mover = tiled_dma if kernels[owner].unit == "dma" else tiled_vector
            values = mover.run_tiled(op, env, tile["elements"], _call)
            for o in op if values is None else ():  # not expressible by rows: whole
                env[o.name] = _call(o, env, device)
            env.update(values or {})
            if values is not None:
                tiled_kernels.add(owner)
            elif "m" in (kernels[owner].tile or {}) and ran_whole is not None:
                ran_whole.append(f"{owner} ({op[0].name}...)")  # the matmul tiled, its prologue or epilogue whole
            continue
        if owner is not None and op.target == _SDPA and "q" in (kernels[owner].tile or {}):
            tiled_kernels.add(owner)  # attention whose tile is the whole: its one tile
        if tile is not None:
            args = map_refs(op.args, lambda r: env[r.name])
            kwargs = {k: map_refs(v, lambda r: env[r.name]) for k, v in op.kwargs.items()}
            y = _run_tiled(op, args, kwargs, tile)
            if y is None:  # not expressible by tiles: whole
                y = resolve(op.target)(*args, **kwargs)
            elif owner is not None:
                tiled_kernels.add(owner)
            env[op.name] = y
            continue
        env[op.name] = _call(op, env, device)
    if ran_whole is not None:
        ran_whole.extend(k for k in owners if k not in tiled_kernels)
    return [env[o.name] for o in program.outputs if o.kind == "user"], env


def _run_tiled(op: Op, args: tuple, kwargs: dict[str, Any], tile: Any) -> Any:
    """`op` over `tile`, None when its tiled form does not cover it (the caller runs it whole)."""
    if "q" in tile:
        return tiled_exec.attention(args, kwargs, tile["q"], tile["kv"])
    out = op.type if isinstance(op.type, TensorType) else None
    dtype = npu_ops.dtype_of(out.dtype) if out else args[-1].dtype
    if op.target == "aten.convolution.default":
        return tiled_exec.convolution(args, tile, op.attrs.get("accumulate"), dtype)
    return tiled_exec.matmul(op.target, args, kwargs, tile, op.attrs.get("accumulate"), dtype)


def _call(op: Op, env: dict[str, Any], device: str | None, reshape_views: bool = False) -> Any:
    args = map_refs(op.args, lambda r: env[r.name])
    kwargs = {k: map_refs(v, lambda r: env[r.name]) for k, v in op.kwargs.items()}
    if device == "meta" and "device" in kwargs:
        kwargs["device"] = torch.device("meta")
    target = op.target
    if (device == "meta" or reshape_views) and target == "aten.view.default":
        # Meta kernels may lay a result out differently from the CPU kernel export traced
        # (SDPA's output), and so may an op reading a collective's (contiguous) result;
        # for values a reshape is the same.
        target = "aten.reshape.default"
    return resolve(target)(*args, **kwargs)


def _run_chips(
    program: Program, inputs: Sequence[Any], device: str | None, state: dict[str, Any], clone: bool
) -> tuple[list[Any], dict[str, Any]]:
    """A partitioned program on `program.chips` simulated chips, op by op in lock step: each chip
    holds its slice of every split input (`program.shards`; chip c holds slice c // r of an input
    `program.replicas` gives r chips per slice; a state tensor already of the
    per-chip size is taken as every chip's slice) and runs every op on its own values; a
    collective reads every chip's operand. The values returned are the logical ones: a value
    split along a dim (attrs['split']) concatenated over the chips, a partial sum summed, the
    others chip 0's."""
    n = program.chips
    envs: list[dict[str, Any]] = [{} for _ in range(n)]
    user = [i for i in program.inputs if i.kind == "user"]
    for i, x in zip(user, inputs):
        for env in envs:
            env[i.name] = x
    for i in program.inputs:
        if i.kind == "user":
            continue
        t = state[i.name]
        t = t.to(device) if device else (t.clone() if clone and i.kind == "buffer" else t)
        d = program.shards.get(i.name)
        r = program.replicas.get(i.name, 1)  # chips holding each slice (KV heads fewer than chips)
        k = n // r
        full = d is not None and t.shape[d] == k * i.type.hint[d] and k * i.type.hint[d] != i.type.hint[d]
        parts = t.chunk(k, d) if full else [t] * k  # chunk: views, so an in-place update writes t
        for c, env in enumerate(envs):
            env[i.name] = parts[c // r]
    merged: dict[str, Any] = {}
    for op in program.ops:
        if op.target in npu_ops.COLLECTIVES:
            operands = [env[op.args[0].name] for env in envs]
            out = npu_ops.COLLECTIVES[op.target](operands, *op.args[1:])
            for env in envs:
                env[op.name] = out
        else:
            for env in envs:
                env[op.name] = _call(op, env, device, reshape_views=True)
        d = op.attrs.get("split")
        if isinstance(d, int):
            step = op.attrs.get("replicas", 1)  # one of each slice's chips
            merged[op.name] = torch.cat([env[op.name] for env in envs[::step]], d)
        elif op.attrs.get("partial"):
            merged[op.name] = npu_ops.all_reduce([env[op.name] for env in envs], n)
    values = {**envs[0], **merged}
    return [values[o.name] for o in program.outputs if o.kind == "user"], values


def _meta_input(t: TensorType) -> torch.Tensor:
    return torch.empty(t.hint, dtype=npu_ops.dtype_of(t.dtype), device="meta")


def propagate_dtypes(program: Program) -> Program:
    """Every op's dtype re-derived by running the program on meta tensors of the example shapes
    (a pass that inserted casts changes the dtypes downstream); shapes keep their symbolic names."""
    user = [_meta_input(i.type) for i in program.inputs if i.kind == "user"]
    state = {i.name: _meta_input(i.type) for i in program.inputs if i.kind != "user"}
    _, env = run(program, user, device="meta", state=state)
    ops = []
    for op in program.ops:
        v = env[op.name]
        if isinstance(v, torch.Tensor) and isinstance(op.type, TensorType):
            ops.append(replace(op, type=op.type.with_dtype(str(v.dtype).removeprefix("torch."))))
        else:
            ops.append(op)
    return program.with_ops(ops)
