"""Programs the accelerator tests share, built once per test process (torch.export of even a
tiny model takes seconds): each workload captured and decomposed once, then compiled per
preset and policy from the decomposed program."""

from __future__ import annotations

from functools import cache

from accelerator.compiler.capture import capture
from accelerator.compiler.decompose import decompose
from accelerator.compiler.legalize import legalize
from accelerator.compiler.pipeline import CompileContext, Compiled, Pipeline
from accelerator.compiler.precision import assign_precision
from accelerator.hardware import load_accel
from accelerator.workloads import WORKLOADS


@cache
def workload(name: str):
    """(model, example inputs) of a workload, the same objects every call."""
    return WORKLOADS[name]()


@cache
def captured(name: str):
    model, inputs = workload(name)
    return capture(model, inputs, CompileContext(load_accel("edge-npu")))


@cache
def decomposed(name: str):
    return decompose(captured(name), CompileContext(load_accel("edge-npu")))


def compile_from_decomposed(name: str, preset: str, policy: str, **kw) -> Compiled:
    """Precision and legalisation over the shared decomposed program."""
    ctx = CompileContext(load_accel(preset), policy, **kw)
    passes = [("precision", assign_precision), ("legalize", legalize)]
    return Pipeline(passes).run_program(decomposed(name), ctx)


@cache
def compiled(name: str, preset: str, policy: str) -> Compiled:
    return compile_from_decomposed(name, preset, policy)


def fuse_and_tile(program, preset: str, policy: str, **kw):
    """The fusion and tiling passes over a legalised `program` (CompileContext fields in `kw`)."""
    from accelerator.compiler.fusion import fuse
    from accelerator.compiler.tiling import tile_kernels

    ctx = CompileContext(load_accel(preset), policy, **kw)
    return tile_kernels(fuse(program, ctx), ctx)


@cache
def fused(name: str, preset: str, policy: str):
    """The workload after the default fusion and tiling passes."""
    return fuse_and_tile(compiled(name, preset, policy).program, preset, policy)
