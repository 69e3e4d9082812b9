"""Capture: the model as a `Program`, through torch.export.

Every dimension of every tensor input is offered to export as `Dim.AUTO`: export keeps dynamic
the ones the model allows (a sequence or batch length) and specialises the rest (a feature size
a weight fixes), so "dynamic where the model allows" needs no per-model hints. A model export
rejects with dynamic dims is retried static (a decision in the log); one it rejects static too
is an InputError naming the model and export's first line.

Each op keeps its module path (the innermost entry of `node.meta['nn_module_stack']`) and its
source line (the innermost frame of `node.meta['stack_trace']` outside torch itself, so an
nn.Linear's op points at the model line that called it)."""

from __future__ import annotations

import contextlib
import io
import logging
import operator
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch

from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Input, Op, Output, Program, Ref, TensorType
from profiler.model.errors import InputError

_TORCH_DIR = os.path.dirname(torch.__file__)
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_INPUT_KINDS = {"PARAMETER": "param", "BUFFER": "buffer", "CONSTANT_TENSOR": "constant", "USER_INPUT": "user"}


def capture(model: torch.nn.Module, example_inputs: tuple, ctx: CompileContext) -> Program:
    """`model(*example_inputs)` exported and converted; raises InputError when export rejects it.
    With `ctx.reuse_blocks`, a model with N identical blocks is exported with two of them and
    the program instantiates block 0 N times (accelerator/compiler/blocks.py)."""
    from accelerator.compiler.blocks import expand, find_repeat, two_blocks

    name = type(model).__name__
    rep = find_repeat(model) if ctx.reuse_blocks and isinstance(model, torch.nn.Module) else None
    if rep is not None:
        decisions = len(ctx.decisions)
        try:
            with two_blocks(model, rep):
                ep = _export(model, example_inputs, ctx)
            program, n = expand(from_exported(ep, name, tuple(example_inputs)), rep)
        except (InputError, ValueError) as e:  # two blocks do not stand for all of them
            del ctx.decisions[decisions:]
            ctx.decide("", f"{rep.path}: {rep.count} blocks exported one by one", f"blocks not reusable: {e}")
            rep = None
        else:
            program = replace(program, exported=ep, repeat=rep)
            ctx.decide(
                rep.block(0),
                f"{rep.count} identical {rep.cls} blocks: {n} ops compiled once, reused x{rep.count - 1}",
                "same class, parameter shapes/dtypes and op sequence (block 1 traced to check it)",
            )
    if rep is None:
        program = from_exported(_export(model, example_inputs, ctx), name, tuple(example_inputs))
    dyn = sorted({d for i in program.inputs if i.kind == "user" for d in i.type.shape if isinstance(d, str)})
    ctx.decide("", f"dynamic dims: {', '.join(dyn) or 'none'}", "Dim.AUTO: export keeps dynamic what the model allows")
    return program


def _export(model: torch.nn.Module, example_inputs: tuple, ctx: CompileContext) -> Any:
    """torch.export's program, dynamic where the model allows, else static; InputError when
    export rejects the model either way."""
    ep = None
    if ctx.dynamic:
        auto = tuple(
            {i: torch.export.Dim.AUTO for i in range(a.dim())} if isinstance(a, torch.Tensor) else None
            for a in example_inputs
        )
        try:
            with _quiet():
                ep = torch.export.export(model, tuple(example_inputs), dynamic_shapes=auto)
        except Exception as e:  # export raises many types; the static retry below reports its own
            ctx.decide("", "captured with static shapes", f"export rejected dynamic dims: {_first_line(e)}")
    if ep is None:
        try:
            with _quiet():
                ep = torch.export.export(model, tuple(example_inputs))
        except Exception as e:
            where = _user_frame(str(e))
            at = f" (at {where})" if where else ""
            raise InputError(type(model).__name__, f"torch.export rejected the model: {_first_line(e)}{at}") from None
    return ep


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.export without its own stderr: its warnings (dims specialised, guards) and, when it
    fails, the partial graph it prints; the compile log and the one-line error say what matters."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logging.disable(previous)


def _user_frame(text: str) -> str:
    """`file:line` of the innermost frame outside torch in an export error's text, or ""."""
    frames = [(f, n) for f, n in _FRAME.findall(text) if not f.startswith(_TORCH_DIR)]
    return f"{os.path.basename(frames[-1][0])}:{frames[-1][1]}" if frames else ""


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return " ".join((text[0] if text else type(e).__name__).split())[:300]


def _dim(d: Any) -> tuple[int | str, int]:
    if isinstance(d, int) or str(d).isdigit():  # a SymInt export specialised prints as its value
        return int(d), int(d)
    hint = getattr(d.node, "hint", None)
    if hint is None:
        hint = d.node.shape_env.size_hint(d.node.expr)
    return str(d), int(hint)


def value_type(val: Any) -> TensorType | tuple[TensorType, ...]:
    """The TensorType of a node's `meta['val']` (a FakeTensor, a SymInt or int, or a tuple of them)."""
    if isinstance(val, torch.Tensor):
        dims = [_dim(d) for d in val.shape]
        return TensorType(tuple(d for d, _ in dims), str(val.dtype).removeprefix("torch."), tuple(h for _, h in dims))
    if isinstance(val, (list, tuple)):
        return tuple(value_type(v) for v in val)  # type: ignore[misc]
    if isinstance(val, (int, torch.SymInt)):
        return TensorType((), "symint", ())
    if isinstance(val, (float, torch.SymFloat)):
        return TensorType((), "symfloat", ())
    if isinstance(val, (bool, torch.SymBool)) or val is None:
        return TensorType((), "none" if val is None else "symbool", ())
    raise TypeError(f"no type for {type(val).__name__}")


def target_name(target: Any) -> str:
    """`aten.mm.default` for torch.ops.aten.mm.default; `getitem` for operator.getitem;
    `operator.floordiv` for the other Python operators export records on sizes."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    name = getattr(target, "__name__", str(target))
    if name != "getitem" and getattr(operator, name, None) is target:
        return f"operator.{name}"  # size arithmetic on dynamic dims (s0 // 4)
    return name


def _module(meta: dict) -> str:
    stack = meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    return "" if path.startswith("_empty") else path  # export's placeholder for "no module"


def _source(meta: dict) -> str:
    frames = _FRAME.findall(meta.get("stack_trace") or "")
    own = [f for f in frames if not f[0].startswith(_TORCH_DIR)]
    f = (own or frames or [("", "")])[-1]
    if not f[0]:
        return ""
    rel = os.path.relpath(f[0])
    return f"{f[0] if rel.startswith('..') else rel}:{f[1]}"


def from_exported(ep: Any, name: str, example_inputs: tuple = ()) -> Program:
    """The Program of an ExportedProgram: placeholders become inputs (kind from the graph
    signature), call_function nodes ops, the output node's entries outputs."""
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    state = {**ep.state_dict, **ep.constants}
    inputs, ops, outputs, values = [], [], [], {}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            spec = specs[node.name]
            kind = _INPUT_KINDS.get(spec.kind.name, "user")
            inputs.append(Input(node.name, kind, spec.target or "", value_type(node.meta["val"])))
            if kind != "user":
                values[node.name] = state[spec.target]
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, lambda n: Ref(n.name))
            kwargs = torch.fx.node.map_arg(dict(node.kwargs), lambda n: Ref(n.name))
            ops.append(
                Op(
                    node.name,
                    target_name(node.target),
                    tuple(args),
                    dict(kwargs),
                    value_type(node.meta.get("val")),
                    _module(node.meta),
                    _source(node.meta),
                )
            )
        elif node.op == "output":
            kinds = {s.arg.name: s for s in ep.graph_signature.output_specs if hasattr(s.arg, "name")}
            for arg in node.args[0]:
                spec = kinds.get(arg.name)
                kind = "buffer" if spec is not None and spec.kind.name == "BUFFER_MUTATION" else "user"
                outputs.append(Output(arg.name, kind, (spec.target or "") if kind == "buffer" else ""))
    return Program(name, tuple(inputs), tuple(ops), tuple(outputs), values, example_inputs, ep)
