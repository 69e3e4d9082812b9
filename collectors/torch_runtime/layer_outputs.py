"""Every layer's output of one PyTorch forward: a forward hook on every submodule records its
output (the first tensor when it returns several), as fp32, in the order the calls finish: the
network order (a block after the layers it holds). A module called twice keeps its first call.

The forward is `model(*inputs)`, or `run(*inputs)` when given: a `torch.compile`d wrapper of the
same module, whose hooks dynamo traces into the graph (the dict writes are replayed after it), so
the values are those Inductor's kernels computed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def eager_outputs(
    model: Any, inputs: tuple[Any, ...], run: Callable[..., Any] | None = None
) -> tuple[dict[str, np.ndarray], dict[str, str], np.ndarray]:
    """(module path -> fp32 output, module path -> class name, the model's output) of one forward
    of `model` (or of `run`, a compiled wrapper of it)."""
    import torch

    outs: dict[str, Any] = {}  # tensors: converted after the forward (a .numpy() in the hook breaks dynamo's graph)
    kinds: dict[str, str] = {}
    handles = []

    def hook(name: str):
        def record(module: Any, args: Any, output: Any) -> None:
            t = _first_tensor(output)
            if t is not None and name not in outs:
                outs[name] = t.detach().clone()  # a later in-place op (ReLU(inplace=True)) must not change it
                kinds[name] = type(module).__name__

        return record

    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_hook(hook(name)))
    try:
        with torch.no_grad():
            final = _first_tensor((model if run is None else run)(*inputs))  # not `or`: a module may define __len__
    finally:
        for h in handles:
            h.remove()
    arrays = {name: t.float().cpu().numpy() for name, t in outs.items()}
    return arrays, kinds, (final.detach().float().cpu().numpy() if final is not None else np.zeros(0))


def _first_tensor(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for v in x:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(x, dict):
        return _first_tensor(list(x.values()))
    return None
