"""Kineto categories (today's, the 2021 legacy names, and ROCm's) -> `profiler.model.schema.Kind`."""

from __future__ import annotations

from profiler.model.schema import Kind

#: Lower-cased Kineto `cat` -> Kind. Legacy names (2021) differ only in case or wording.
CATEGORY_KIND: dict[str, Kind] = {
    "cpu_op": Kind.OP,
    "operator": Kind.OP,  # legacy
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,  # legacy
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,  # legacy
    "cuda_runtime": Kind.RUNTIME,  # ROCm traces use it too, with hip* names
    "cuda_driver": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,  # legacy
    "hip_runtime": Kind.RUNTIME,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.ANNOTATION,
    "python_function": Kind.PYTHON,
    "overhead": Kind.OVERHEAD,
    "trace": Kind.PROFILER,
    "cuda_profiler_range": Kind.PROFILER,
    "mtia_runtime": Kind.RUNTIME,
    "mtia_ccp_events": Kind.KERNEL,
    "compile_pass": Kind.COMPILE_PASS,  # torch.compile steps perf profile writes (collectors/torch_compile/embed.py)
    "dma": Kind.DMA,  # the simulated accelerator's transfers (accelerator/sim/trace.py): inside their kernel's time
    "tile": Kind.ANNOTATION,  # the simulated accelerator's per-core tile activity: labels inside their kernel's time
}

#: Categories whose events run on a device rather than a host thread.
DEVICE_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset", "gpu_user_annotation", "mtia_ccp_events", "dma", "tile"}
)

#: Flow-event categories that join a runtime launch to its device work (recomputed from
#: correlation ids, which also cover graph launches), and the forward->backward flows.
LAUNCH_FLOW_CATEGORIES = frozenset({"ac2g", "async"})
FWDBWD_FLOW_CATEGORY = "fwdbwd"
#: producer -> consumer device work (accelerator/sim/trace.py's kernels), flows kind 'dependency'
DEPENDENCY_FLOW_CATEGORY = "dependency"


def kind_of(cat: str) -> Kind:
    """The Kind of a Kineto category; OTHER for categories this reader does not know."""
    return CATEGORY_KIND.get(cat.lower(), Kind.OTHER)
