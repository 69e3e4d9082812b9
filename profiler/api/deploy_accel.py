"""`--candidate accelerator[:PRECISION][@PRESET]` of `perf diff --numerics` / `perf gate --accuracy`:
the model compiled for the simulated accelerator (accelerator/compiler) and run in its functional
mode (accelerator.compiler.execute, tile by tile), compared layer by layer with eager fp32.

A layer's candidate value is the value of the last op the compiled program attributes to that
module (Op.module is the module path, or a path below it for a block) whose size is the eager
output's: after the precision pass that is the cast back or the op itself, so the comparison is of
what the next layer reads. A layer the compiler folded away (no op of the right size) is not
compared. Precisions: fp32, bf16, int8, fp8 (the compiler's policies); preset edge-npu unless
`@PRESET` names another (fp8 needs datacenter-npu).
"""

from __future__ import annotations

from typing import Any

from analysis.numerics import DEFAULT_THRESHOLD, NumericsReport, compare_layers
from profiler.model.errors import InputError

PRECISIONS = ("fp32", "bf16", "int8", "fp8")
DEFAULT_PRESET = "edge-npu"


def parse_accelerator_candidate(text: str) -> tuple[str, str]:
    """`accelerator[:P][@PRESET]` -> (precision, preset); bf16 on edge-npu by default."""
    rest = text.partition(":")[2]
    precision, _, preset = rest.partition("@")
    if not precision and "@" in text.partition(":")[0]:
        preset = text.partition("@")[2]
    precision, preset = precision or "bf16", preset or DEFAULT_PRESET
    if precision not in PRECISIONS:
        raise InputError(
            None, f"--candidate {text}: the accelerator compiles {', '.join(PRECISIONS)}, not {precision!r}"
        )
    return precision, preset


def module_values(program: Any, env: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    """Layer (module path) -> the last value of the program's ops in that module (or below it)
    whose element count is the eager output's (`sizes`), as an fp32 numpy array."""
    import torch

    out: dict[str, Any] = {}
    for op in reversed(program.ops):
        v = env.get(op.name)
        if not isinstance(v, torch.Tensor) or not op.module:
            continue
        parts = op.module.split(".")
        for i in range(len(parts), 0, -1):
            layer = ".".join(parts[:i])
            if layer in sizes and layer not in out and v.numel() == sizes[layer]:
                out[layer] = v.detach().float().cpu().numpy()
    return out


def diff_accelerator(
    model: Any, inputs: tuple[Any, ...], candidate: str, *, threshold: float = DEFAULT_THRESHOLD, metric: Any = None
) -> NumericsReport:
    """Eager fp32 against the accelerator's functional mode at the candidate's precision."""
    from accelerator.compiler.execute import run
    from accelerator.compiler.pipeline import compile_model
    from accelerator.hardware import load_accel
    from collectors.torch_runtime.layer_outputs import eager_outputs

    precision, preset = parse_accelerator_candidate(candidate)
    hw = load_accel(preset)
    ref, ops, ref_out = eager_outputs(model, inputs)
    compiled = compile_model(model, inputs, hw, precision)
    outs, env = run(compiled.program, list(inputs))
    got = module_values(compiled.program, env, {k: v.size for k, v in ref.items()})
    cand_out = outs[0].detach().float().cpu().numpy()
    return compare_layers(
        ref,
        got,
        ops,
        ref_out,
        cand_out,
        threshold=threshold,
        candidate=f"accelerator:{precision}@{hw.name}",
        notes=(f"functional mode of the program compiled for {hw.name} at {precision}",),
        metric=metric,
    )
