"""The program as MLIR text, through xDSL (`pip install '.[accel]'`): one `func.func @forward`
whose block arguments are the program's inputs and whose body is one op of the `npu` dialect
per program op, in MLIR's generic syntax:

    %mm = "npu.mm"(%x_to_bfloat16, %permute) {args = "($0, $1)", unit = "matrix", dtype = "bf16"}
          : (tensor<?x32xbf16>, tensor<32x64xbf16>) -> tensor<?x64xbf16> loc("fc1"("mlp.py":18:0))

Op names: `aten.X.default` -> `npu.X`, `aten.X.overload` -> `npu.X.overload`, our own `npu.*` as
they are, others prefixed with `npu.`. `args`/`kwargs` keep the op's non-tensor arguments with
`$i` for the i-th operand; every pass decision on the op (`attrs`) is a string attribute. An op
with several results has them all (`%bn, %bn_1, %bn_2 = ...`); a `getitem` of one of them
prints as nothing, its users reading that result directly. Dynamic
dims print as `?`; a size computed at run time is an `index`. Source locations travel as MLIR
locations: the module path as a name location around `"file":line:0`.

`parse_mlir` reads the text back with xDSL's parser, the `npu` dialect registered with a class for
every op name the text uses (tests print, parse and print again: the texts are equal)."""

from __future__ import annotations

import io
import re
from functools import cache
from typing import Any

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DictionaryAttr,
    FileLineColLoc,
    IndexType,
    IntAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
    TensorType,
    UnknownLoc,
)
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, var_operand_def, var_result_def
from xdsl.parser import Parser
from xdsl.printer import Printer

from accelerator.compiler import program as ir

_ELEMENT = {
    "float32": builtin.f32,
    "float64": builtin.f64,
    "float16": builtin.f16,
    "bfloat16": builtin.bf16,
    "int8": builtin.i8,
    "int32": builtin.i32,
    "int64": builtin.i64,
    "bool": builtin.i1,
    "uint8": builtin.IntegerType(8, builtin.Signedness.UNSIGNED),
    "float8_e4m3fn": builtin.Float8E4M3FNType(),
}


def op_name(target: str) -> str:
    if target.startswith("npu."):
        return target
    if target.startswith("aten."):
        _, name, overload = target.split(".")
        return f"npu.{name}" if overload == "default" else f"npu.{name}.{overload}"
    return "npu." + target.removesuffix(".default")


@cache
def op_class(name: str) -> type[IRDLOperation]:
    """The xDSL op class of the npu op `name`: any operands, any results, free attributes."""
    body = {"name": name, "ins": var_operand_def(), "outs": var_result_def(), "__module__": __name__}
    cls_name = "Npu_" + re.sub(r"\W", "_", name.removeprefix("npu."))
    return irdl_op_definition(type(cls_name, (IRDLOperation,), body))


def npu_dialect(names: list[str] | set[str]) -> Dialect:
    return Dialect("npu", [op_class(n) for n in sorted(names)], [])


def mlir_type(t: ir.TensorType) -> Attribute:
    if t.dtype == "symint":
        return IndexType()
    if t.dtype in ("symfloat", "none", "symbool"):
        return {"symfloat": builtin.f64}.get(t.dtype, builtin.i1)
    shape = [d if isinstance(d, int) else DYNAMIC_INDEX for d in t.shape]
    return TensorType(_ELEMENT[t.dtype], shape)


def location(module: str, source: str) -> Attribute:
    file, _, line = source.rpartition(":")
    inner: Attribute = UnknownLoc()
    if file and line.isdigit():
        inner = FileLineColLoc(StringAttr(file), IntAttr(int(line)), IntAttr(0))
    return NameLoc(StringAttr(module), inner) if module else inner


def _template(value: Any, operands: list[str]) -> str:
    """Arguments as text, each tensor operand written as `$i`."""
    if isinstance(value, ir.Ref):
        if value.name not in operands:
            operands.append(value.name)
        return f"${operands.index(value.name)}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_template(v, operands) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)


def to_module(program: ir.Program) -> ModuleOp:
    arg_types = [mlir_type(i.type) for i in program.inputs]
    block = Block(arg_types=arg_types)
    values: dict[str, SSAValue] = {}
    multi: dict[str, tuple[SSAValue, ...]] = {}  # ops with several results (batch norm's tuple)
    for arg, inp in zip(block.args, program.inputs):
        arg.name_hint = inp.name
        values[inp.name] = arg
    for op in program.ops:
        operands: list[str] = []
        if op.target == "getitem" and op.args[0].name in multi and isinstance(op.args[1], int):
            # one result of a multi-result op: its own SSA value, not the op's first
            values[op.name] = multi[op.args[0].name][op.args[1]]
            continue
        attrs = {"args": StringAttr(_template(op.args, operands))}
        if op.kwargs:
            attrs["kwargs"] = StringAttr(", ".join(f"{k}={_template(v, operands)}" for k, v in op.kwargs.items()))
        attrs.update((k, StringAttr(str(v))) for k, v in op.attrs.items())
        results = [mlir_type(t) for t in ir.tensor_types(op.type)]
        new = op_class(op_name(op.target)).create(
            operands=[values[n] for n in operands], result_types=results, attributes=attrs
        )
        new.location = location(op.module, op.source)
        for r in new.results:
            r.name_hint = op.name
        values[op.name] = new.results[0] if new.results else None  # type: ignore[assignment]
        if len(new.results) > 1:
            multi[op.name] = tuple(new.results)
        block.add_op(new)
    returns = [values[o.name] for o in program.outputs if o.kind == "user"]
    block.add_op(func.ReturnOp(*returns))
    arg_attrs = ArrayAttr(
        [DictionaryAttr({"npu.kind": StringAttr(i.kind), "npu.target": StringAttr(i.target)}) for i in program.inputs]
    )
    fn = func.FuncOp("forward", (arg_types, [v.type for v in returns]), Region(block), arg_attrs=arg_attrs)
    return ModuleOp([fn])


def print_module(module: ModuleOp) -> str:
    out = io.StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(module)
    return out.getvalue() + "\n"


def to_mlir(program: ir.Program) -> str:
    """The program as MLIR text (generic syntax for npu ops, locations included)."""
    return print_module(to_module(program))


def parse_mlir(text: str) -> ModuleOp:
    """MLIR text of `to_mlir` as an xDSL module (raises xDSL's ParseError on malformed text)."""
    ctx = Context()
    ctx.load_dialect(builtin.Builtin)
    ctx.load_dialect(func.Func)
    ctx.load_dialect(npu_dialect(set(re.findall(r'"(npu\.[\w.$]+)"', text))))
    return Parser(ctx, text).parse_module()
