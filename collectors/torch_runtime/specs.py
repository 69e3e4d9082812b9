"""What `perf profile --model` is told on the command line: a factory spec, input shapes, a dtype.

--model examples.models:mlp        module:attribute (the cwd is importable, as with python -m)
--model path/to/file.py:build      or a file
--input 32x256                     a float tensor of that shape (in --dtype)
--input 1x128:int64                integers in [0, smallest nn.Embedding size), or [0, 2) without one
--input 1x128:int64:32000          integers in [0, 32000)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from profiler.model.errors import InputError

DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "fp16": torch.float16,
    "float16": torch.float16,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp64": torch.float64,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
FLOAT_DTYPES = ("fp32", "fp16", "bf16", "fp64")
MAX_DIMS = 8


@dataclass(frozen=True)
class InputSpec:
    """One model input: shape, dtype (None = the model's --dtype), exclusive upper bound for integers."""

    shape: tuple[int, ...]
    dtype: torch.dtype | None = None
    high: int | None = None


def parse_dtype(name: str, what: str = "--dtype", floats_only: bool = True) -> torch.dtype:
    """torch dtype from fp32 / bf16 / fp16 / fp64 (and integer names unless floats_only)."""
    allowed = FLOAT_DTYPES if floats_only else tuple(DTYPES)
    if name not in allowed:
        raise InputError(None, f"{what} {name}: expected one of {', '.join(allowed)}")
    return DTYPES[name]


def parse_input(text: str) -> InputSpec:
    """`32x256`, `1x128:int64` or `1x128:int64:32000` as an InputSpec."""
    where = f"--input {text}"
    parts = text.strip().split(":")
    if len(parts) > 3 or not parts[0]:
        raise InputError(None, f"{where}: expected SHAPE[:DTYPE[:HIGH]], e.g. 32x256 or 1x128:int64")
    dims = parts[0].lower().split("x")
    if len(dims) > MAX_DIMS or not all(d.isdigit() and int(d) > 0 for d in dims):
        raise InputError(None, f"{where}: a shape is up to {MAX_DIMS} positive integers joined by 'x', e.g. 32x256")
    dtype = parse_dtype(parts[1], f"{where}: dtype", floats_only=False) if len(parts) > 1 else None
    high = None
    if len(parts) == 3:
        if dtype is None or dtype.is_floating_point or dtype == torch.bool:
            raise InputError(None, f"{where}: an upper bound applies to integer inputs only")
        if not parts[2].isdigit() or int(parts[2]) < 1:
            raise InputError(None, f"{where}: the upper bound must be a positive integer")
        high = int(parts[2])
    return InputSpec(tuple(int(d) for d in dims), dtype, high)


def load_factory(spec: str) -> Callable[[], Any]:
    """The callable named by `module:attr` or `file.py:attr`; InputError naming what is missing."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise InputError(None, f"--model {spec}: expected MODULE:FACTORY, e.g. examples.models:mlp")
    module = _import_file(where, spec) if where.endswith(".py") or os.sep in where else _import_module(where, spec)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(None, f"--model {spec}: {where} has no attribute {part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(
            None, f"--model {spec}: {attr} is a {type(obj).__name__}, not a callable returning an nn.Module"
        )
    return obj


def _import_module(name: str, spec: str) -> Any:
    if os.getcwd() not in sys.path and "" not in sys.path:  # `perf` (a console script) runs from its bin dir
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise InputError(
                None, f"--model {spec}: no module named {e.name!r} (run from the directory that holds it)"
            ) from None
        raise InputError(None, f"--model {spec}: importing {name} failed: {one_line(e)}") from None
    except Exception as e:  # noqa: BLE001 - user code
        raise InputError(None, f"--model {spec}: importing {name} failed: {one_line(e)}") from None


def _import_file(where: str, spec: str) -> Any:
    path = Path(where)
    if not path.is_file():
        raise InputError(path, f"--model {spec}: no such file")
    mod_spec = importlib.util.spec_from_file_location(f"perf_model_{path.stem}", path)
    if mod_spec is None or mod_spec.loader is None:
        raise InputError(path, f"--model {spec}: cannot import this file")
    module = importlib.util.module_from_spec(mod_spec)
    # registered, as an import would: torch.export (perf profile --backend iree) looks the
    # model's class up by its module's name
    sys.modules[mod_spec.name] = module
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - user code
        raise InputError(path, f"--model {spec}: importing it failed: {one_line(e)}") from None
    return module


def one_line(e: BaseException, limit: int = 400) -> str:
    """`Type: message` on one line: whitespace collapsed, torch.compile's 'Explanation:' kept, cut at `limit`."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    keep = lines[:1] + [ln for ln in lines[1:] if ln.startswith("Explanation:")][:1]
    text = " ".join(" ".join(keep).split())
    text = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
