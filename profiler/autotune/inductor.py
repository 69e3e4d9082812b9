"""The Inductor runner: the real runtime on this machine's CPU, where the analytic model is not
the ground truth.

A candidate is a set of Inductor options that change the generated kernels on the CPU, each
dimension's first option Inductor's own default (torch._inductor.config):

    inductor:max_fusion_size     fusion   64, 8, 256: nodes one fused kernel may hold
    inductor:epilogue_fusion     fusion   True, False: pointwise epilogues into the GEMM's kernel
    inductor:aggressive_fusion   fusion   False, True: fuse nodes that share no memory access
    inductor:cpp.simdlen         codegen  None (auto: the widest ISA), 0 (scalar loops), and every
                                          narrower vector width this CPU has (bits)
    inductor:freezing            codegen  False, True: weights folded as constants (prepacked GEMMs)
    inductor:max_autotune        codegen  False, True: with max_autotune_gemm_backends="CPP,ATEN",
                                          Inductor benchmarks its C++ GEMM template against ATen

Every dimension applies to the whole graph (`Dimension.kernels` empty): the kernels' names
change with the choices. A trial, under `torch._inductor.config.patch(options)` with a fresh
`torch._dynamo.reset()`, inference (no_grad):

  1. compiles the model with torch.compile (a compile error is a failed trial);
  2. checks the compiled output against eager fp32: rel_error = ||y - y_ref|| / ||y_ref|| per
     floating output (accelerator.compiler.check.rel_error), the largest within the bound
     (`accuracy_budget`, else check.BOUNDS of the precision) or the trial fails with its error;
  3. measures: `warmup` calls, then `repeats` timings of `number` calls each (`number` the
     calls that take >= MIN_REPEAT_NS, as timeit does); time_ns = the median per call, the
     spread as q1/q3 (IQR), min and max;
  4. records a torch.profiler trace of `PROFILED` calls (after one discarded warm-up call) and
     analyzes it as `perf analyze` does (profiler.api.analyze): per kernel (the CPU units,
     self time) its time, floor and bound, summed per name and divided by the calls.

Every trial compiles with `cpp.enable_kernel_profile` (a record_function per generated C++
kernel, the baseline included): the trace names Inductor's own kernels, not only ATen's."""

from __future__ import annotations

import hashlib
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.autotune.runner import KERNEL_COLUMNS, TrialResult
from profiler.autotune.space import Candidate, Dimension, Space

PRECISIONS = ("fp32", "bf16")
MIN_REPEAT_NS = 2_000_000  # a timed repeat lasts at least 2 ms: the timer's noise is far below it
MAX_NUMBER = 1000
PROFILED = 3  # calls in the recorded trace
FIXED = {"cpp.enable_kernel_profile": True}  # every trial: the trace names the generated kernels
#: The record_functions torch.compile wraps a call in (Dynamo's guard check, the compiled
#: region, AOTAutograd's wrapper, the graph call): their self time is the host runtime between
#: kernels, so the analysis's `unknown` (no cost model for them) reads as `runtime` bound.
WRAPPERS = ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "Pregraph bytecode", "AOTDispatcher", "## Call")


@dataclass(frozen=True)
class InductorWorkload:
    """A model for the Inductor runner: `inputs` cast to `precision`, `reference` the eager fp32
    outputs, `hash` of the model's structure, its parameters' shapes, the inputs, the precision
    and the torch version (what a trial's result depends on)."""

    name: str
    model: Any
    inputs: tuple
    precision: str
    reference: Any
    hash: str


def host_name() -> str:
    """This machine's CPU as the study's hardware: model name, ISA, threads torch uses."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu} ({torch.get_num_threads()} threads, {_isa()})"


def _isa() -> str:
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    isa = pick_vec_isa()
    return str(isa) if isa else "no vector ISA"


def load_inductor_workload(name: str, model: Any, inputs: tuple, precision: str = "fp32") -> InductorWorkload:
    """`model` at `precision` (its floating inputs cast too) with its eager fp32 reference."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"--precision {precision}: the Inductor runner takes {', '.join(PRECISIONS)}")
    model = model.eval()
    with torch.no_grad():
        reference = model(*inputs)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    if precision != "fp32":
        model = model.to(dtype)
        inputs = tuple(x.to(dtype) if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs)
    shapes = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    ins = [(tuple(x.shape), str(x.dtype)) if torch.is_tensor(x) else repr(x) for x in inputs]
    text = f"{model}\n{shapes}\n{ins}\n{precision}\ntorch {torch.__version__}"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return InductorWorkload(name, model, inputs, precision, reference, digest)


def inductor_space(name: str, precision: str) -> Space:
    """The Inductor options (module docstring) as a Space; simdlen from this CPU's ISAs."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa, valid_vec_isa_list

    auto = pick_vec_isa()
    widths = sorted({i.bit_width() for i in valid_vec_isa_list()} - ({auto.bit_width()} if auto else set()))
    simd: tuple[Any, ...] = (None, 0, *widths) if auto else (None,)
    dims = [
        Dimension("inductor:max_fusion_size", "fusion", (64, 8, 256)),
        Dimension("inductor:epilogue_fusion", "fusion", (True, False)),
        Dimension("inductor:aggressive_fusion", "fusion", (False, True)),
        Dimension("inductor:cpp.simdlen", "codegen", simd),
        Dimension("inductor:freezing", "codegen", (False, True)),
        Dimension("inductor:max_autotune", "codegen", (False, True)),
    ]
    return Space(tuple(d for d in dims if len(d.options) > 1), precision, name, host_name())


def inductor_options(space: Space, c: Candidate) -> dict[str, Any]:
    """The torch._inductor.config options of `c`: every dimension's option (defaults spelled
    out, so the plan is explicit), max_autotune with the C++ GEMM template."""
    chosen = dict(c.choices)
    out: dict[str, Any] = {}
    for d in space.dimensions:
        out[d.name.split(":", 1)[1]] = chosen.get(d.name, d.default)
    if out.get("max_autotune"):
        out["max_autotune_gemm_backends"] = "CPP,ATEN"
    return out


def plan_document(w: InductorWorkload, space: Space, c: Candidate) -> dict[str, Any]:
    """The plan of `c`: the options to pass to `torch._inductor.config.patch` around torch.compile."""
    return {
        "runner": "inductor",
        "candidate_hash": c.hash,
        "candidate": c.to_json(),
        "model": w.name,
        "hardware": space.accel,
        "precision": w.precision,
        "inductor_config": inductor_options(space, c),
        "usage": "with torch._inductor.config.patch(plan['inductor_config']): torch.compile(model)",
    }


def spread(samples: list[float]) -> dict[str, float]:
    """Median, quartiles (statistics.quantiles, 'inclusive'), IQR, min and max of `samples` (ns)."""
    q1, med, q3 = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else [samples[0]] * 3
    return {
        "median_ns": round(med, 1),
        "q1_ns": round(q1, 1),
        "q3_ns": round(q3, 1),
        "iqr_ns": round(q3 - q1, 1),
        "min_ns": round(min(samples), 1),
        "max_ns": round(max(samples), 1),
    }


def measure(fn: Callable[[], Any], warmup: int, repeats: int) -> dict[str, Any]:
    """Per-call time of `fn` (module docstring, step 3): spread() of the repeats, with `number`
    (calls per repeat), `repeats`, `warmup`."""
    for _ in range(warmup):
        fn()
    start = time.perf_counter_ns()
    fn()
    one = max(time.perf_counter_ns() - start, 1)
    number = max(1, min(MAX_NUMBER, -(-MIN_REPEAT_NS // one)))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter_ns() - start) / number)
    return {**spread(samples), "number": number, "repeats": repeats, "warmup": warmup}


def kernel_rows(units: Any, calls: int) -> list[dict[str, Any]]:
    """The analysis's CPU units summed per name and divided by `calls` (ns per call), with
    KERNEL_COLUMNS: the bound the name's longest unit has, efficiency = floor / time; a floor
    the analysis could not derive (no cost for the op) counts as 0 (all its time is lost);
    torch.compile's own wrappers (WRAPPERS) are runtime bound."""
    if units.empty:
        return []
    u = units.copy()
    for col in ("floor_ns", "t_compute_ns", "t_memory_ns", "t_runtime_ns"):
        u[col] = u[col].fillna(0.0)
    rows = []
    for name, g in u.groupby("name", sort=False):
        t = float(g["time_ns"].sum()) / calls
        floor = float(g["floor_ns"].sum()) / calls
        bound = str(g.loc[g["time_ns"].idxmax(), "bound"])
        if bound == "unknown" and str(name).startswith(WRAPPERS):
            bound = "runtime"
        rows.append(
            {
                "name": str(name),
                "time_ns": round(t, 3),
                "floor_ns": round(floor, 3),
                **{c: round(float(g[c].sum()) / calls, 3) for c in ("t_compute_ns", "t_memory_ns", "t_runtime_ns")},
                "bound": bound,
                "efficiency": round(floor / t, 6) if t > 0 else float("nan"),
                "ops": [],
            }
        )
    assert set(KERNEL_COLUMNS) <= set(rows[0])
    return sorted(rows, key=lambda r: -r["time_ns"])


class InductorRunner:
    """The Inductor runner (module docstring); the same interface as SimulatorRunner."""

    name = "inductor"

    def __init__(
        self,
        workload: InductorWorkload,
        space: Space,
        accuracy_budget: float | None = None,
        warmup: int = 3,
        repeats: int = 15,
        analyze: bool = True,
    ):
        from accelerator.compiler.check import BOUNDS

        self.w, self.space, self.warmup, self.repeats, self.analyze = workload, space, warmup, repeats, analyze
        self.hardware = space.accel
        self.bound = accuracy_budget if accuracy_budget is not None else BOUNDS[workload.precision]

    def run(self, c: Candidate) -> TrialResult:
        import torch
        import torch._inductor.config as inductor_config

        options = {**FIXED, **inductor_options(self.space, c)}
        torch._dynamo.reset()
        with torch.no_grad(), inductor_config.patch(options):
            fn = torch.compile(self.w.model)
            try:
                y = fn(*self.w.inputs)
            except Exception as e:  # noqa: BLE001 - Inductor's failures are many types: a failed trial
                return TrialResult(None, f"compile: {type(e).__name__}: {_line(e)}")
            error = self._error(y)
            if error is None:
                return TrialResult(None, "check: the compiled model's outputs do not match eager's")
            if not error <= self.bound:  # NaN fails too
                return TrialResult(None, f"check: relative error {error:.3g} over the bound {self.bound:g}", error)
            m = measure(lambda: fn(*self.w.inputs), self.warmup, self.repeats)
            kernels = self._profile(fn) if self.analyze else []
        torch._dynamo.reset()
        by_limiter: dict[str, float] = {}
        for r in kernels:
            by_limiter[r["bound"]] = round(by_limiter.get(r["bound"], 0.0) + r["time_ns"], 3)
        summary = {"total_ns": m["median_ns"], "measure": m, "by_limiter": by_limiter, "kernels": kernels}
        return TrialResult(int(round(m["median_ns"])), "", error, summary)

    def _error(self, y: Any) -> float | None:
        """The largest rel_error of the compiled outputs against eager fp32 (None: no match)."""
        import torch
        from torch.utils._pytree import tree_leaves

        from accelerator.compiler.check import rel_error

        got, ref = tree_leaves(y), tree_leaves(self.w.reference)
        pairs = [(a, b) for a, b in zip(got, ref, strict=False) if torch.is_tensor(b) and b.is_floating_point()]
        if len(got) != len(ref) or not pairs or any(a.shape != b.shape for a, b in pairs):
            return None
        return max(rel_error(a.float(), b) for a, b in pairs)

    def _profile(self, fn: Any) -> list[dict[str, Any]]:
        """Step 4 of the module docstring: the analysis of PROFILED calls, per kernel."""
        from profiler import api

        with tempfile.TemporaryDirectory() as tmp:
            session = api.torch_profile(
                steps=PROFILED, warmup=1, out=Path(tmp) / "trial.json", capture_compile=False, record_shapes=True
            )
            with session:
                for _ in range(1 + PROFILED):
                    fn(*self.w.inputs)
                    session.step()
            units = api.analyze(api.load_trace(session.path), sections=("roofline",)).units
        return kernel_rows(units, PROFILED)


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else ""
