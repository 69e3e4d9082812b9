"""Capture a PyTorch model as torch-dialect MLIR with iree-turbine (`aot.export`), parameters
externalised (a `.irpa` file beside the IR, so weights are not embedded in it), each op located
by its module path and source line: `loc("fc1"("model.py":12:0))`.

The importer (iree.compiler.extras.fx_importer) locates each op by the file:line frames of its
FX node's stack trace; `_module_locations` wraps that location in a NameLoc naming the node's
innermost module path (nn_module_stack, e.g. `blocks.0.attn.q`), so a dispatch maps back to the
PyTorch module as well as the line.
"""

from __future__ import annotations

import io
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass
from pathlib import Path

from profiler.model.errors import InputError

#: The name of the parameter scope the exported module reads (`--parameters=model=FILE`).
SCOPE = "model"


@dataclass(frozen=True)
class Captured:
    """The exported program: `mlir` (torch-dialect IR with locations), `params` (.irpa weights),
    `inputs` (shapes and element types, as iree-run-module's `--input=16x64xf32`)."""

    mlir: Path
    params: Path
    inputs: tuple[str, ...]


def iree_available() -> str | None:
    """None when iree-turbine and the compiler import, else the one-line reason."""
    try:
        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401
        import iree.turbine.aot  # noqa: F401
    except Exception as e:  # ImportError, or a broken install raising anything at import
        return f"IREE is not installed ({type(e).__name__}: {e}); pip install '.[iree]'"
    return None


def export(model, inputs: list, workdir: Path, label: str = "model") -> Captured:
    """Export `model(*inputs)` to `workdir/model.mlir` + `workdir/model.irpa`. InputError (one
    line, the exporter's own first error line) when IREE is missing or cannot export the model."""
    missing = iree_available()
    if missing:
        raise InputError(label, missing)
    import iree.turbine.aot as aot
    import torch

    workdir.mkdir(parents=True, exist_ok=True)
    mlir, params = workdir / "model.mlir", workdir / "model.irpa"
    try:
        with torch.no_grad(), _module_locations(), redirect_stderr(io.StringIO()):
            aot.externalize_module_parameters(model, external_scope=SCOPE)
            exported = aot.export(model, args=tuple(inputs))
            mlir.write_text(exported.mlir_module.operation.get_asm(enable_debug_info=True))
            aot.save_module_parameters(str(params), model)
    except InputError:
        raise
    except Exception as e:
        raise InputError(label, f"IREE cannot export the model: {first_line(e)}") from None
    return Captured(mlir, params, tuple(_input_arg(x) for x in inputs))


def first_line(e: BaseException) -> str:
    """`Type: first non-empty line of the message`."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")


_MLIR_ELEMENT = {
    "torch.float32": "f32",
    "torch.float16": "f16",
    "torch.bfloat16": "bf16",
    "torch.float64": "f64",
    "torch.int64": "i64",
    "torch.int32": "i32",
    "torch.int8": "i8",
    "torch.bool": "i1",
}


def _input_arg(x) -> str:
    """`16x64xf32` for a float tensor of that shape: the runtime tools' --input (filled with 1s
    when timed: a dispatch's time on the CPU does not depend on the values of dense math)."""
    dims = "x".join(str(d) for d in x.shape)
    elem = _MLIR_ELEMENT.get(str(x.dtype))
    if elem is None:
        raise InputError(None, f"IREE input of dtype {x.dtype} is not supported here")
    return f"{dims}x{elem}=1" if dims else f"{elem}=1"


@contextmanager
def _module_locations():
    """Make the FX importer name each op's location after its module path (module docstring)."""
    from iree.compiler.extras import fx_importer
    from iree.compiler.ir import Location

    cls = fx_importer.ContextCache
    plain = cls.get_node_location

    def located(self, node):
        loc = plain(self, node)
        stack = node.meta.get("nn_module_stack") or {}
        if loc is None or not stack:
            return loc
        path = str(list(stack.values())[-1][0])
        path = path.replace("L['self'].", "").replace("L['self']", "") or "<top>"
        return Location.name(path, childLoc=loc, context=self._c)

    cls.get_node_location = located
    try:
        yield
    finally:
        cls.get_node_location = plain
