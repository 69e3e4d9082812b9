"""Export a torch model to ONNX (the dynamo exporter) and read back each node's module path.

The dynamo exporter records, per node, `pkg.torch.onnx.name_scopes` in its metadata: the chain
of qualified module names from the root down to the ATen op, e.g. `['', 'block', 'block.fc',
'linear_1']`. The module path is the last name before the op: `block.fc`, the same string
`nn.Module.named_modules()` gives, so eager hooks and ONNX tensors meet on it.

`optimize=False`: the exporter's graph optimiser would fold and rename nodes; one ONNX node per
ATen op keeps the mapping exact (ONNX Runtime still optimises at session creation when asked).
"""

from __future__ import annotations

import ast
import contextlib
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from profiler.model.errors import InputError

SCOPES_KEY = "pkg.torch.onnx.name_scopes"


@dataclass(frozen=True)
class NodeInfo:
    """One ONNX node: its name, op type, module path ('' at the root) and its output tensor names."""

    name: str
    op: str
    module: str
    outputs: tuple[str, ...]


def export_onnx(model: Any, inputs: tuple[Any, ...], path: Path, *, label: str = "model") -> Path:
    """`model` exported to `path` by torch.onnx.export(dynamo=True); InputError (one line) when the
    exporter rejects it. The exporter's progress prints are kept off stdout."""
    import torch

    from collectors.torch_runtime.specs import one_line

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    logging.getLogger("torch._export").setLevel(logging.ERROR)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), torch.no_grad():
            program = torch.onnx.export(model, inputs, dynamo=True, optimize=False, verbose=False, report=False)
            if program is None:
                raise RuntimeError("the exporter returned nothing")
            program.save(str(path))
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - the exporter raises anything for a model it cannot export
        raise InputError(None, f"{label}: torch.onnx.export (dynamo) rejected the model: {one_line(e)}") from None
    return path


def module_of(node: onnx.NodeProto) -> str:
    """The node's module path from the exporter's name scopes ('' when absent or at the root)."""
    for prop in node.metadata_props:
        if prop.key == SCOPES_KEY:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return ""
            return str(scopes[-2]) if len(scopes) >= 2 else ""
    return ""


def nodes(model: onnx.ModelProto) -> list[NodeInfo]:
    """The graph's nodes in topological (file) order with their module paths."""
    return [NodeInfo(n.name, n.op_type, module_of(n), tuple(n.output)) for n in model.graph.node]


def module_outputs(model: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    """Module path -> (the tensor holding its output, the op that writes it), for every module
    that owns a node and every block that contains one: the first output of the last node (in
    topological order) whose path is the module or lies inside it."""
    out: dict[str, tuple[str, str]] = {}
    for n in nodes(model):
        if not n.module or not n.outputs:
            continue
        parts = n.module.split(".")
        for k in range(1, len(parts) + 1):
            out[".".join(parts[:k])] = (n.outputs[0], n.op)
    return out
