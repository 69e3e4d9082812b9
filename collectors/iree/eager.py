"""The same model run eagerly in PyTorch on the same machine, timed whole and per source line,
for the comparison with IREE's dispatches (analysis.iree_compare).

Per line: a TorchFunctionMode times every top-level torch call of the forward (F.linear,
torch.matmul, Tensor.view, softmax...: the mode is off inside the call, so an op's own inner
calls are part of its time) with time.perf_counter_ns, and files it under the innermost module
running (forward pre/post hooks keep the stack; '<top>' for the model's own forward) and the
line of the model's file that made it (the innermost frame in that file), as 'module file:line':
the form of the locations IREE keeps in its dispatches (collectors.iree.capture). The whole
forward is timed separately, without the mode or hooks (they cost time of their own).
"""

from __future__ import annotations

import sys
import time
from types import FrameType

import numpy as np

TOP = "<top>"
#: untimed calls first: on a shared CPU, torch's worker threads take tens of ms to wake at first
#: (a 4x8x16 @ 4x16x8 matmul ran 20-28 ms for its first three calls here, then 20 us)
WARMUP = 3


def eager_times(model, inputs: list, runs: int, model_file: str | None) -> tuple[float, dict[str, float]]:
    """(median ns of one bare eager forward, {'module file:line': median over the calls of the ns
    the torch calls made there took}) (module docstring). WARMUP untimed calls first, then the
    lines, then the bare forward (the line pass warms it further). The median: a shared CPU's
    preemptions skew a mean."""
    import torch
    from torch.overrides import TorchFunctionMode

    stack: list[str] = [TOP]
    spent: dict[str, int] = {}

    class LineTimer(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            t0 = time.perf_counter_ns()
            out = func(*args, **(kwargs or {}))
            dur = time.perf_counter_ns() - t0
            key = _site(stack[-1], model_file)
            if key is not None:
                spent[key] = spent.get(key, 0) + dur
            return out

    def enter(name: str) -> None:
        stack.append(name)

    def leave() -> None:  # a forward hook's return value would replace the module's output
        stack.pop()

    handles = []
    for name, mod in model.named_modules():
        if name:
            handles.append(mod.register_forward_pre_hook(lambda m, a, n=name: enter(n)))
            handles.append(mod.register_forward_hook(lambda m, a, o: leave()))
    per_run: list[dict[str, int]] = []
    try:
        with torch.no_grad(), LineTimer():
            for i in range(WARMUP + runs):
                spent.clear()
                model(*inputs)
                if i >= WARMUP:
                    per_run.append(dict(spent))
    finally:
        for h in handles:
            h.remove()
    with torch.no_grad():
        calls = []
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            model(*inputs)
            calls.append(time.perf_counter_ns() - t0)
    total = float(np.median(calls))
    keys = dict.fromkeys(k for run in per_run for k in run)
    return total, {k: float(np.median([run.get(k, 0) for run in per_run])) for k in keys}


def _site(module: str, model_file: str | None) -> str | None:
    """'module file:line' of the innermost frame in `model_file` (None: the call came from no
    line of it, e.g. torch's own code run outside the forward)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if model_file and frame.f_code.co_filename == model_file:
            return f"{module} {model_file}:{frame.f_lineno}"
        frame = frame.f_back
    return None
