"""Precision variants of an exported fp32 ONNX model: fp32 (as is), fp16, int8 QDQ.

- fp16: onnxconverter-common's `convert_float_to_float16`, inputs and outputs kept fp32 (a Cast
  at each end), so the caller feeds and reads the same arrays as at fp32.
- int8: ONNX Runtime's post-training static quantization in QDQ format: activations per tensor
  (signed int8, MinMax calibration over the batches given), weights per output channel. Without a
  calibration file the batches are random normal inputs (seeded); `Calibration.source` says which.
- int8-qnn: the QDQ configuration Qualcomm's HTP takes (`get_qnn_qdq_config`: unsigned 8-bit
  activations and weights, asymmetric, per output channel for weights, Relu kept as a node), the
  same calibration.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from profiler.model.errors import InputError

PRECISIONS = ("fp32", "fp16", "int8", "int8-qnn")
RANDOM_BATCHES = 8


@dataclass(frozen=True)
class Calibration:
    """Calibration batches: one tuple of input arrays per batch, and where they came from."""

    batches: tuple[tuple[np.ndarray, ...], ...]
    source: str  # the file, or 'random normal inputs (N batches, seed 0)'


def random_calibration(shapes: list[tuple[tuple[int, ...], np.dtype]], n: int = RANDOM_BATCHES) -> Calibration:
    """`n` batches of standard normal inputs (integers: zeros) of the given shapes, seed 0."""
    rng = np.random.default_rng(0)
    batches = tuple(
        tuple(
            rng.standard_normal(s).astype(d) if np.issubdtype(d, np.floating) else np.zeros(s, dtype=d)
            for s, d in shapes
        )
        for _ in range(n)
    )
    return Calibration(batches, f"random normal inputs ({n} batches, seed 0)")


def load_batches(path: Path, n_inputs: int) -> Calibration:
    """Batches from a `.npy` (an array of batches, first axis the batch index; one input) or a `.pt`
    (a tensor as .npy, or a list of tensors / tuples of tensors, one item a batch)."""
    where = Path(path)
    if not where.is_file():
        raise InputError(where, "no such file (expected a .pt or .npy of input batches)")
    try:
        if where.suffix == ".npy":
            items: list = list(np.load(where, allow_pickle=False))
        elif where.suffix == ".pt":
            import torch

            obj = torch.load(where, map_location="cpu", weights_only=True)
            items = list(obj) if isinstance(obj, (list, tuple)) else list(obj)
        else:
            raise InputError(where, f"unknown suffix {where.suffix!r}: expected .pt or .npy")
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - a corrupt or foreign file
        from collectors.torch_runtime.specs import one_line

        raise InputError(where, f"cannot read input batches: {one_line(e)}") from None
    batches = []
    for item in items:
        arrays = tuple(_array(a) for a in (item if isinstance(item, (list, tuple)) else (item,)))
        if len(arrays) != n_inputs:
            raise InputError(where, f"a batch holds {len(arrays)} arrays; the model takes {n_inputs} inputs")
        batches.append(arrays)
    if not batches:
        raise InputError(where, "holds no batches")
    return Calibration(tuple(batches), str(where))


PLAN_DTYPES = ("int8", "fp32")


def load_plan(path: Path) -> dict[str, str]:
    """A mixed-precision plan file: JSON {module path: 'int8' | 'fp32'} (a module not named: int8)."""
    import json

    where = Path(path)
    try:
        plan = json.loads(where.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(where, f"not a readable plan (JSON {{module path: dtype}}): {type(e).__name__}") from None
    if not isinstance(plan, dict) or not all(isinstance(k, str) and v in PLAN_DTYPES for k, v in plan.items()):
        raise InputError(where, f"a plan maps module paths to one of {', '.join(PLAN_DTYPES)}")
    return plan


def plan_nodes(model: onnx.ModelProto, plan: dict[str, str], *, inside: bool = True) -> tuple[str, ...]:
    """The nodes a plan keeps in fp32: those whose module path is a module the plan gives 'fp32',
    or (`inside`, a plan file's meaning: a block in fp32 holds its layers) lies inside one;
    `inside=False`: the module's own nodes only (the split search's dimensions, one per module)."""
    from collectors.onnx.export import module_of

    keep = [m for m, d in plan.items() if d == "fp32"]
    out = []
    for n in model.graph.node:
        path = module_of(n)
        if path and any(path == m or (inside and path.startswith(m + ".")) for m in keep):
            out.append(n.name)
    return tuple(out)


def _array(a: object) -> np.ndarray:
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()  # type: ignore[attr-defined]
    return np.asarray(a)


def to_precision(
    fp32: Path, precision: str, out: Path, calibration: Calibration | None = None, *, keep_fp32: tuple[str, ...] = ()
) -> Path:
    """The `precision` variant of the fp32 model at `fp32`, written to `out` (fp32: `fp32` itself).
    int8 / int8-qnn: the nodes named in `keep_fp32` stay fp32 (a mixed-precision plan, plan_nodes)."""
    if precision == "fp32":
        return fp32
    if precision == "fp16":
        from onnxconverter_common import float16

        model = float16.convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True)
        onnx.save(model, str(out))
        return out
    if precision in ("int8", "int8-qnn"):
        if calibration is None:
            raise ValueError("int8 needs calibration batches")
        _quantize_int8(fp32, out, calibration, qnn=precision == "int8-qnn", exclude=keep_fp32)
        return out
    raise InputError(None, f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")


def _quantize_int8(
    fp32: Path, out: Path, calibration: Calibration, *, qnn: bool = False, exclude: tuple[str, ...] = ()
) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize, quantize_static
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    names = [i.name for i in onnx.load(str(fp32), load_external_data=False).graph.input]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it: Iterator[tuple[np.ndarray, ...]] = iter(calibration.batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.it, None)
            return None if batch is None else dict(zip(names, batch))

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer's advice to pre-process goes to the root logger
    try:
        if qnn:
            config = get_qnn_qdq_config(str(fp32), Reader(), per_channel=True, nodes_to_exclude=list(exclude) or None)
            quantize(str(fp32), str(out), config)
        else:
            quantize_static(
                str(fp32),
                str(out),
                Reader(),
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                activation_type=QuantType.QInt8,
                weight_type=QuantType.QInt8,
                nodes_to_exclude=list(exclude) or None,
            )
    except Exception as e:  # noqa: BLE001 - calibration batches of the wrong shape or dtype
        from collectors.torch_runtime.specs import one_line

        raise InputError(calibration.source, f"int8 calibration failed: {one_line(e)}") from None
    finally:
        root.setLevel(level)
