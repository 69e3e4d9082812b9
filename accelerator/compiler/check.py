"""Functional mode: run the compiled program with torch on the CPU, op by op in the dtypes the
passes assigned, and measure how far it lands from the eager model.

    rel_error(y, y_ref) = ||y - y_ref||_2 / ||y_ref||_2      (in float64; 0 when both are 0)

Outputs are compared with the eager model (a deep copy, so its KV cache starts as the
program's). Layers (every module path, in program order) are compared with a reference
program (the program before precision assignment, run in fp32) on the value of the last op of
that module both programs compute: op names survive the passes (precision.py keeps them)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from accelerator.compiler.execute import run
from accelerator.compiler.program import Program

#: Bound on the relative error of each output and layer by policy: fp32 and bf16 from issue 12;
#: int8 and fp8 are the policies' budgets. int8: a per-tensor step of max|x|/127 (0.8% of the
#: range) on both operands of every linear. fp8 e4m3: 3 mantissa bits, a relative rounding of up
#: to 2^-4 = 6.25% per operand, so two operands of a product up to ~12.5%; the tiny ViT's 10
#: logits measure 0.127 after 9 quantized linears in series (docs/accelerator.md).
BOUNDS = {"fp32": 1e-5, "bf16": 1e-2, "int8": 5e-2, "fp8": 1.5e-1}


@dataclass(frozen=True)
class LayerError:
    name: str  # module path
    rel_error: float


@dataclass(frozen=True)
class Check:
    outputs: tuple[float, ...]  # rel_error of each user output against eager
    layers: tuple[LayerError, ...]
    bound: float

    @property
    def max_rel_error(self) -> float:
        return max([*self.outputs, *(x.rel_error for x in self.layers)], default=0.0)

    @property
    def ok(self) -> bool:
        return self.max_rel_error <= self.bound

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_rel_error": self.max_rel_error,
            "bound": self.bound,
            "outputs": list(self.outputs),
            "layers": [{"name": x.name, "rel_error": x.rel_error} for x in self.layers],
        }


def rel_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    y, ref = y.detach().double(), ref.detach().double()
    den = float(ref.norm())
    num = float((y - ref).norm())
    return num / den if den else num


def _comparable(a: Any, b: Any) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.is_floating_point()
        and b.is_floating_point()
        and a.shape == b.shape
        and a.numel() > 0
    )


def check(program: Program, model: torch.nn.Module, inputs: tuple, reference: Program, bound: float) -> Check:
    """The errors of `program` on `inputs` against eager `model` and, per layer, `reference`."""
    with torch.no_grad():
        eager, _ = torch.utils._pytree.tree_flatten(copy.deepcopy(model)(*inputs))
        outs, values = run(program, inputs)
        _, ref_values = run(reference, inputs)
    outputs = tuple(rel_error(y, r) for y, r in zip(outs, eager))
    last: dict[str, str] = {}
    for op in program.ops:
        if op.module and _comparable(values.get(op.name), ref_values.get(op.name)):
            last[op.module] = op.name
    layers = tuple(LayerError(m, rel_error(values[n], ref_values[n])) for m, n in last.items())
    return Check(outputs, layers, bound)


def first_divergent_pass(
    programs: dict[str, Program], model: torch.nn.Module, inputs: tuple, bound: float
) -> tuple[str, Check] | None:
    """The first pass (in `programs`' order: Compiled.programs) whose program's outputs leave
    `bound` of the eager model, with its check; None when every pass stays within it. Layers
    are compared with the first program (the capture), so the check names where it broke."""
    names = list(programs)
    if not names:
        return None
    reference = programs[names[0]]
    for name in names:
        result = check(programs[name], model, inputs, reference, bound)
        if max(result.outputs, default=0.0) > bound:
            return name, result
    return None
