"""`perf calibrate`: measure this machine's ceilings and write them as a HardwareSpec.

Like the Empirical Roofline Toolkit, it measures what the machine reaches rather than what a
sheet promises. Each figure is the best of several timed repetitions (the ceiling is the fastest
the machine was seen to go; slower runs are noise), measured with torch so the numbers match
what torch.profiler traces of torch programs show:

- matrix peak per dtype: torch.mm of n x n x n, FLOP = 2 n^3 (one multiply-add = 2 FLOP);
- vector peak (fp32): a chain of in-place fused multiply-adds (torch.addcmul_) on cache-resident
  data, FLOP = 2 per element per call, as a slope over two sizes (dispatch time cancels). It is
  bound by the L1/L2 traffic of 3 loads and 1 store per FMA, so it is the rate torch elementwise
  ops can reach, below the FMA units' sheet figure;
- cache levels (CPU): capacities from sysfs, bandwidth measured in each (profiler.calibrate_levels);
- every figure checked for sanity, implausible ones rejected (profiler.calibrate_checks);
- memory bandwidth: the STREAM triad a = b + s*c over large fp32 tensors,
  bytes = 3 * 4 * n (read b, read c, write a);
- minimum op time: on a CPU, the self time of the cheapest ops (aten::empty(0),
  aten::resolve_conj) as torch.profiler records it (the 1st percentile over 2,000 calls), since
  a CPU unit's time is its self time under the profiler and nested ops' self times are a
  fraction of a whole call's dispatch; on a
  GPU, one launch of an op on a one-element tensor (torch.add, out=);
- link (gloo between two local processes): all_reduce of growing messages, fitted to
  t = latency + algorithm bytes / bandwidth, ring all-reduce algorithm bytes = 2 (p-1)/p * size.

torch is imported here only, never on `perf analyze`'s path.
"""

from __future__ import annotations

import os
import platform
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from profiler.calibrate_checks import CalibrationError, check_spec
from profiler.calibrate_levels import cache_levels
from profiler.model.hardware import HardwareSpec, Link, MemoryLevel
from profiler.model.hardware_match import match_device

MATRIX_DTYPES = ("fp32", "bf16", "fp16", "fp64")
#: Progress messages that report a figure left out or rejected (the CLI prints them).
NOTE_PREFIXES = ("l1", "l2", "l3", "l4", "matrix ", "vector ")
__all__ = ["CalibrationError", "NOTE_PREFIXES", "Sizes", "calibrate"]
WARM_UP_S = 0.3  # untimed runs before each measurement
_TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}


@dataclass(frozen=True)
class Sizes:
    """How big the measurements are; `quick` is for tests."""

    matmul_n: int = 2048
    stream_elems: int = 32 * 2**20  # 128 MiB per fp32 array, far past any cache
    vector_elems: int = 16 * 2**10  # 3 x 64 KiB of fp32: cache-resident
    repeats: int = 5
    allreduce_bytes: tuple[int, ...] = (4 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            matmul_n=512,
            stream_elems=4 * 2**20,
            vector_elems=16 * 2**10,
            repeats=3,
            allreduce_bytes=(4 << 10, 256 << 10, 4 << 20),
        )


def best_time(fn: Callable[[], object], repeats: int, inner: int = 1, device: str = "cpu") -> float:
    """Fastest wall time of `inner` calls of fn, over `repeats` tries (after one warm-up), per call.
    On a GPU the device is synchronised before the clock starts and before it stops."""
    sync = _sync(device)
    warm_until = time.perf_counter() + WARM_UP_S  # clocks ramp up and caches fill: time the steady state
    fn()
    while time.perf_counter() < warm_until:
        fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def _sync(device: str) -> Callable[[], None]:
    if device == "cpu":
        return lambda: None
    import torch

    return torch.cuda.synchronize


def matmul_flops(dtype: str, sizes: Sizes, device: str = "cpu") -> float:
    import torch

    n = sizes.matmul_n if device == "cpu" else max(sizes.matmul_n, 8192)
    dt = getattr(torch, _TORCH_DTYPE[dtype])
    a, b = torch.randn(n, n, dtype=dt, device=device), torch.randn(n, n, dtype=dt, device=device)
    out = torch.empty(n, n, dtype=dt, device=device)
    t = best_time(lambda: torch.mm(a, b, out=out), sizes.repeats, device=device)
    return 2 * n**3 / t  # 2 n^3: n^3 multiply-adds


def vector_flops(sizes: Sizes, device: str = "cpu") -> float:
    """A chain of fused multiply-adds in place on cache-resident data, x = x + y * z
    (torch.addcmul_: one FMA = 2 FLOP per element), at n/4 and n elements; the slope cancels the
    op's fixed dispatch time: FLOP/s = 2 * (n - n/4) / (t(n) - t(n/4))."""
    import torch

    def fma_time(n: int) -> float:
        x, y = torch.randn(n, device=device), torch.randn(n, device=device)
        z = torch.full((n,), 0.999, device=device)  # |z| < 1 keeps the chain finite
        return best_time(lambda: x.addcmul_(y, z), sizes.repeats, inner=200, device=device)

    n2 = sizes.vector_elems if device == "cpu" else max(sizes.vector_elems, 1 << 24)
    n1 = n2 // 4
    t1, t2 = fma_time(n1), fma_time(n2)
    return 2 * (n2 - n1) / (t2 - t1) if t2 > t1 else 2 * n2 / t2  # noise: the plain rate, a lower figure


def triad_bandwidth(sizes: Sizes, device: str = "cpu") -> float:
    import torch

    n = sizes.stream_elems
    a, b, c = torch.empty(n, device=device), torch.randn(n, device=device), torch.randn(n, device=device)
    t = best_time(lambda: torch.add(b, c, alpha=3.0, out=a), sizes.repeats, device=device)
    return 3 * 4 * n / t  # read b and c, write a: 3 arrays of 4-byte floats


def min_op_time(sizes: Sizes, device: str = "cpu") -> float:
    """The shortest op: on a CPU the profiled self time of an empty op; on a GPU, the launch of an
    (almost) empty kernel (see the module docstring)."""
    import torch

    if device == "cpu":
        return empty_op_self_time()
    x, y, out = (torch.ones(1, device=device) for _ in range(3))
    return best_time(lambda: torch.add(x, y, out=out), sizes.repeats, inner=2000, device=device)


def empty_op_self_time(calls: int = 2000) -> float:
    """The 1st percentile self time (s) of the cheapest ops there are, over `calls` profiled calls
    each on the CPU: aten::empty(0) (an allocation of nothing) and aten::resolve_conj (returns its
    input). Both are leaf ops, so their self time is their duration."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(1)
    best = []
    for name, fn in (("aten::empty", lambda: torch.empty(0)), ("aten::resolve_conj", x.resolve_conj)):
        for _ in range(calls):  # warm the allocator and the dispatcher's caches
            fn()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(calls):
                fn()
        durs = [e.time_range.elapsed_us() for e in prof.events() if e.name == name]
        if durs:
            best.append(float(np.percentile(durs, 1)) * 1e-6)
    return min(best) if best else 5e-8


def gloo_link(sizes: Sizes, world: int = 2) -> Link:
    """All-reduce over gloo between `world` local processes, fitted to latency + bytes / bandwidth."""
    import torch.multiprocessing as mp

    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times")
        mp.spawn(
            _allreduce_worker,
            args=(world, port, list(sizes.allreduce_bytes), sizes.repeats, out),
            nprocs=world,
            join=True,
        )
        with open(out) as f:
            times = [float(v) for v in f.read().split()]
    algo = [2 * (world - 1) / world * size for size in sizes.allreduce_bytes]  # ring all-reduce
    latency, seconds_per_byte = _fit_line(algo, times)
    # a negative intercept (noise) says nothing about latency: the smallest message's time bounds it
    return Link(
        name="gloo-loopback",
        bandwidth=1 / seconds_per_byte,
        latency=latency if latency > 0 else times[0],
        topology="host",
    )


def _allreduce_worker(rank: int, world: int, port: int, sizes: list[int], repeats: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        results = []
        for size in sizes:
            x = torch.ones(size // 4)
            dist.all_reduce(x)  # warm-up, and both sides in step
            best = float("inf")
            for _ in range(repeats):
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(x)
                best = min(best, time.perf_counter() - t0)
            results.append(best)
        if rank == 0:
            with open(out, "w") as f:
                f.write(" ".join(map(str, results)))
    finally:
        dist.destroy_process_group()


def _fit_line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope (non-negative slope), no numpy needed."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    slope = max(sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx, 1e-15)
    return my - slope * mx, slope


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def calibrate(
    sizes: Sizes = Sizes(), progress: Callable[[str], None] = lambda step: None, links: bool = True
) -> list[HardwareSpec]:
    """Measure this machine: a spec for its CPU, and one for the GPU where torch sees one."""
    import torch

    specs = [_measure("cpu", sizes, progress, links)]
    if torch.cuda.is_available():
        specs.append(_measure("cuda", sizes, progress, False))
    return specs


def _measure(device: str, sizes: Sizes, progress: Callable[[str], None], links: bool) -> HardwareSpec:
    import torch

    peaks: dict[str, dict[str, float]] = {"matrix": {}, "vector": {}}
    # The short ops first: after a BLAS matmul its worker threads keep spinning for a while
    # (OpenMP's block time), and on a small machine they starve the next ops' threads: a 64K
    # element multiply measured right after a 512^3 fp32 matmul ran 1000x slower here.
    progress(f"{device}: vector fp32")
    peaks["vector"]["fp32"] = vector_flops(sizes, device)
    progress(f"{device}: memory bandwidth (triad)")
    bw = triad_bandwidth(sizes, device)
    progress(f"{device}: minimum op time")
    floor = min_op_time(sizes, device)
    for dt in MATRIX_DTYPES:
        progress(f"{device}: matmul {dt}")
        peaks["matrix"][dt] = matmul_flops(dt, sizes, device)
    link: tuple[Link, ...] = ()
    if links:
        progress("gloo all_reduce between 2 local processes")
        link = (gloo_link(sizes),)
    caches: list[MemoryLevel] = []
    reference = None
    if device == "cpu":
        name, vendor, capacity = (
            f"calibrated-{socket.gethostname()}-cpu",
            platform.processor() or platform.machine(),
            _ram_bytes(),
        )
        progress("cpu: cache levels")
        caches, notes = cache_levels(bw, sizes.repeats)
        for note in notes:
            progress(note)
        cores = os.cpu_count() or 1
    else:
        props = torch.cuda.get_device_properties(0)
        name, vendor, capacity = f"calibrated-{props.name}", props.name, props.total_memory
        cores = props.multi_processor_count
        reference = match_device(
            props.name, props.multi_processor_count, f"{props.major}.{props.minor}", props.total_memory
        )
    spec = HardwareSpec(
        name=name.replace(" ", "-"),
        kind="cpu" if device == "cpu" else "gpu",
        vendor=vendor,
        description=f"measured by perf calibrate on {time.strftime('%Y-%m-%d')} with torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, matmul n={sizes.matmul_n}",
        peak_flops=peaks,
        memory=(MemoryLevel(name="dram" if device == "cpu" else "hbm", capacity_bytes=capacity, bandwidth=bw), *caches),
        links=link,
        min_op_time=floor,
        match={},
        sources=("perf calibrate: measured on this machine (best of repeated runs)",),
    )
    spec, rejected = check_spec(spec, cores, reference)  # raises CalibrationError for a required figure
    for note in rejected:
        progress(note)
    return spec


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
