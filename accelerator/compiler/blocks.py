"""Identical blocks (the layers of a transformer) compiled once and reused.

A model whose `nn.ModuleList` holds N >= 3 identical blocks (same class, same parameter and
buffer names, shapes and dtypes, same plain attributes such as `eps`, no hooks, recursively) is
exported with its first two blocks only (`two_blocks`), so torch.export and the decomposition
trace 2 blocks instead of N (export's and run_decompositions' time grows with the op count:
Llama-2-7B's 32 layers took 17 s to export and 58 s to decompose, benchmarks/README.md).

`expand` then checks that block 1's ops are block 0's modulo names (same targets, types,
constants, source lines; module paths and weights differ by the block index; block 1 reads a
value of block 0 only where block 0 reads one from before the blocks: the carried activation)
and instantiates block 0's ops N times: instance k renames each op `name_l{k}`, reads layer k's
own parameters and buffers and, where block 0 read the carried value, instance k-1's result.
Ops after the blocks read the last instance. The result is the program the whole model's export
would give, up to op names (tests/test_accel_blocks.py compares the two by op count and output).

Assumed and not checkable from two blocks: the parent runs every block once, in order, the
same way (a forward that uses `len(self.layers)` or the layer index is not one of these; give
`CompileContext(reuse_blocks=False)`). The functional check catches a model that breaks it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from accelerator.compiler.program import Input, Op, Output, Program, Ref, map_refs


@dataclass(frozen=True)
class Repeat:
    """`path`: the ModuleList's module path ("layers"); `count`: its blocks; `cls`: their class
    name; `state`: every parameter and buffer of the model by state-dict key (the tensors the
    instances read: layer k's weights, never materialised on the meta device)."""

    path: str
    count: int
    cls: str
    state: Mapping[str, Any]

    def block(self, k: int) -> str:
        return f"{self.path}.{k}"


def _signature(block: nn.Module) -> list[tuple] | None:
    """What must be equal for two blocks to compile to the same ops; None when a block cannot be
    compared (a hook, a tensor that is neither parameter nor buffer)."""
    sig: list[tuple] = []
    for name, m in block.named_modules():
        if m._forward_hooks or m._forward_pre_hooks:
            return None
        plain = {k: v for k, v in vars(m).items() if not k.startswith("_") and k != "training"}
        if any(isinstance(v, torch.Tensor) for v in plain.values()):
            return None
        params = tuple((n, tuple(p.shape), p.dtype) for n, p in m.named_parameters(recurse=False))
        bufs = tuple((n, tuple(b.shape), b.dtype) for n, b in m.named_buffers(recurse=False))
        sig.append((name, type(m), tuple(sorted(plain.items(), key=lambda kv: kv[0])), params, bufs))
    return sig


def find_repeat(model: nn.Module) -> Repeat | None:
    """The ModuleList with the most identical blocks (at least 3), or None."""
    best: tuple[str, nn.ModuleList] | None = None
    for path, m in model.named_modules():
        if not isinstance(m, nn.ModuleList) or len(m) < 3 or (best and len(m) <= len(best[1])):
            continue
        first = _signature(m[0])
        try:
            same = first is not None and all(_signature(b) == first for b in list(m)[1:])
        except Exception:  # an attribute whose == does not return a bool
            same = False
        if same:
            best = (path, m)
    if best is None or not best[0]:
        return None
    state = dict(model.named_parameters(remove_duplicate=False))
    state.update(model.named_buffers(remove_duplicate=False))
    return Repeat(best[0], len(best[1]), type(best[1][0]).__name__, state)


@contextmanager
def two_blocks(model: nn.Module, rep: Repeat) -> Iterator[None]:
    """`model` with its ModuleList cut to the first two blocks, restored on exit."""
    parent_path, _, attr = rep.path.rpartition(".")
    parent = model.get_submodule(parent_path)
    original = parent._modules[attr]
    parent._modules[attr] = nn.ModuleList(list(original)[:2])
    try:
        yield
    finally:
        parent._modules[attr] = original


class _Mismatch(Exception):
    pass


def _in_block(module_or_target: str, prefix: str) -> bool:
    return module_or_target == prefix or module_or_target.startswith(prefix + ".")


def _rebase(path: str, old: str, new: str) -> str:
    return new + path[len(old) :] if _in_block(path, old) else path


def expand(program: Program, rep: Repeat) -> tuple[Program, int]:
    """The program of all `rep.count` blocks from `program`, traced with two; with the number of
    ops one block has. Raises ValueError naming what differs when block 1 is not block 0."""
    b0, b1 = rep.block(0), rep.block(1)
    idx0 = [i for i, o in enumerate(program.ops) if _in_block(o.module, b0)]
    idx1 = [i for i, o in enumerate(program.ops) if _in_block(o.module, b1)]
    if not idx0 or not idx1:
        raise ValueError(f"{b0} or {b1} has no ops")
    s0, e0, s1, e1 = idx0[0], idx0[-1] + 1, idx1[0], idx1[-1] + 1
    if idx0 != list(range(s0, e0)) or idx1 != list(range(s1, e1)) or e0 != s1:
        raise ValueError(f"the ops of {b0} and {b1} are not two consecutive runs")
    block0, block1 = program.ops[s0:e0], program.ops[s1:e1]
    if len(block0) != len(block1):
        raise ValueError(f"{b0} has {len(block0)} ops, {b1} {len(block1)}")
    inputs0 = {i.name: i for i in program.inputs if _in_block(i.target, b0)}
    by_target = {i.target: i.name for i in program.inputs}
    in10 = {i.name: by_target.get(_rebase(i.target, b1, b0)) for i in program.inputs if _in_block(i.target, b1)}
    names0 = {o.name for o in block0}
    map10: dict[str, str] = {}
    carried: dict[str, str] = {}  # value block 0 reads from before the blocks -> block 0's value block 1 reads there

    def same(a: Any, b: Any) -> None:
        if isinstance(a, Ref) and isinstance(b, Ref):
            if b.name in map10:
                ok = map10[b.name] == a.name
            elif b.name in names0:
                ok = a.name not in names0 and carried.setdefault(a.name, b.name) == b.name
            elif b.name in in10:
                ok = in10[b.name] == a.name
            else:
                ok = a.name == b.name
            if not ok:
                raise _Mismatch(f"reads {b.name} where {b0} reads {a.name}")
        elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
            for x, y in zip(a, b):
                same(x, y)
        elif type(a) is not type(b) or a != b:
            raise _Mismatch(f"has {b!r} where {b0} has {a!r}")

    for a, b in zip(block0, block1):
        try:
            if (a.target, a.type, a.source, a.module) != (b.target, b.type, b.source, _rebase(b.module, b1, b0)):
                raise _Mismatch(f"is {b.target} at {b.source}, {b0}'s is {a.target} at {a.source}")
            same(a.args, b.args)
            if sorted(a.kwargs) != sorted(b.kwargs):
                raise _Mismatch("has other keyword arguments")
            same([a.kwargs[k] for k in sorted(a.kwargs)], [b.kwargs[k] for k in sorted(b.kwargs)])
        except _Mismatch as e:
            raise ValueError(f"{b.name} of {b1} {e}") from None
        map10[b.name] = a.name
    after = program.ops[e1:]
    reads0 = any(r in names0 for o in after for r in o.refs())
    if reads0 or any(o.name in names0 and o.kind == "user" for o in program.outputs):
        raise ValueError(f"ops after the blocks read {b0}: the blocks do not run in sequence")

    last = rep.count - 1

    def op_name(name: str, k: int) -> str:
        return name if k == 0 else f"{name}_l{k}"

    def input_name(name: str, k: int) -> str:
        old, new = b0.replace(".", "_"), rep.block(k).replace(".", "_")
        return name.replace(f"_{old}_", f"_{new}_", 1) if f"_{old}_" in name else f"{name}_l{k}"

    ops: list[Op] = list(program.ops[:s0])
    for k in range(rep.count):

        def ref(r: Ref, k: int = k) -> Ref:
            if r.name in names0:
                return Ref(op_name(r.name, k))
            if r.name in carried and k > 0:
                return Ref(op_name(carried[r.name], k - 1))
            if r.name in inputs0:
                return Ref(input_name(r.name, k))
            return r

        for a in block0:
            ops.append(
                replace(
                    a,
                    name=op_name(a.name, k),
                    args=map_refs(a.args, ref),
                    kwargs={n: map_refs(v, ref) for n, v in a.kwargs.items()},
                    module=_rebase(a.module, b0, rep.block(k)),
                )
            )

    def tail(r: Ref) -> Ref:
        return Ref(op_name(map10[r.name], last)) if r.name in map10 else r

    ops += [
        replace(o, args=map_refs(o.args, tail), kwargs={n: map_refs(v, tail) for n, v in o.kwargs.items()})
        for o in after
    ]
    inputs: list[Input] = []
    state = dict(program.state)
    emitted: set[str] = set()
    for i in program.inputs:
        if not (_in_block(i.target, b0) or _in_block(i.target, b1)):
            inputs.append(i)
        elif i.kind not in emitted:  # all blocks' inputs of this kind where the first one was
            emitted.add(i.kind)
            for k in range(rep.count):
                for t in (t for t in inputs0.values() if t.kind == i.kind):
                    target = _rebase(t.target, b0, rep.block(k))
                    inputs.append(replace(t, name=input_name(t.name, k), target=target))
                    state[inputs[-1].name] = rep.state.get(target, program.state.get(t.name))
    outputs: list[Output] = []
    outs0 = [o for o in program.outputs if o.name in names0 and o.kind != "user"]
    done = False
    for o in program.outputs:
        if o.name in map10 and o.kind == "user":
            outputs.append(replace(o, name=op_name(map10[o.name], last)))
        elif o.name in names0 or o.name in map10:
            if not done:  # every block's buffer updates where the first one was
                done = True
                for k in range(rep.count):
                    outputs += [
                        replace(t, name=op_name(t.name, k), target=_rebase(t.target, b0, rep.block(k))) for t in outs0
                    ]
        else:
            outputs.append(o)
    names = [o.name for o in ops] + [i.name for i in inputs]
    if len(set(names)) != len(names):
        raise ValueError("instance names collide with the program's own")
    state = {i.name: state[i.name] for i in inputs if i.name in state}
    return replace(program, inputs=tuple(inputs), ops=tuple(ops), outputs=tuple(outputs), state=state), len(block0)
