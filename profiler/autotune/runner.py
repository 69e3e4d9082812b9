"""Runners: one interface (`run(candidate) -> TrialResult`), the simulator's first.

`SimulatorRunner` compiles the candidate through the compiler's pipeline
(profiler/autotune/build.py), checks it in functional mode (accelerator/compiler/check.py:
every output against eager PyTorch and every layer against the fp32 decomposed program,
`rel_error = ||y - y_ref|| / ||y_ref||`) and only then times it on the simulator
(accelerator/sim/run.py) and analyzes the simulated trace as `perf analyze` would
(profiler.api.analyze: each kernel's floor, bound and efficiency). A candidate that does not
compile (a tile over local memory at a wider precision) or whose error leaves the bound is a
failed trial with its reason; its time is never counted.

The bound: `accuracy_budget` when the user gives one (the precision lever's gate), else the
baseline policy's bound (check.BOUNDS: fp32 1e-5, bf16 1e-2, int8 5e-2, fp8 1.5e-1)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from profiler.autotune.space import Candidate, Space

#: The per-kernel columns of the analysis kept in a trial's summary (analysis.roofline.classify):
#: measured time, floor and the floors it is the max of (ns), the bound, the efficiency.
KERNEL_COLUMNS = ("name", "time_ns", "floor_ns", "t_compute_ns", "t_memory_ns", "t_runtime_ns", "bound", "efficiency")


@dataclass(frozen=True)
class TrialResult:
    """`time_ns` None when the trial failed (`failure` says why); `accuracy_error` the largest
    relative error of the functional check (None when it did not run); `summary`: total_ns,
    by_limiter {limiter: ns}, kernels [{KERNEL_COLUMNS}] (the analysis of the simulated trace)."""

    time_ns: int | None
    failure: str = ""
    accuracy_error: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)


class Runner(Protocol):
    name: str
    hardware: str

    def run(self, candidate: Candidate) -> TrialResult: ...


def analyze_run(run: Any) -> list[dict[str, Any]]:
    """The analysis of a simulated run (its Chrome trace through profiler.api, as `perf simulate`
    does), one row per kernel of chip 0 with KERNEL_COLUMNS and `ops` (the op names it runs)."""
    import orjson

    from accelerator.sim.trace import trace_document
    from profiler import api

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trial.json"
        path.write_bytes(orjson.dumps(trace_document(run)))
        units = api.analyze(api.load_trace(path), sections=("roofline",)).units
    if units.empty:
        return []
    units = units[units["device"] == "npu0"]  # chip 0 (the reader names a simulator's chips npu<N>)
    rows = units[list(KERNEL_COLUMNS)].to_dict("records")
    ops = {k.name: list(k.ops) for k in run.kernels if k.chip == 0}
    return [
        {
            **{k: (round(float(v), 3) if isinstance(v, float) else v) for k, v in r.items()},
            "ops": ops.get(r["name"], []),
        }
        for r in rows
    ]


class SimulatorRunner:
    """The simulator runner (module docstring). `check=False` skips the functional check (only
    for candidates the caller has proven equal, never the default); `analyze=False` leaves the
    per-kernel analysis out of the summary (a caller that only needs times)."""

    name = "simulator"

    def __init__(
        self,
        workload: Any,
        space: Space,
        accuracy_budget: float | None = None,
        check: bool = True,
        analyze: bool = True,
    ):
        from accelerator.compiler.check import BOUNDS

        self.w, self.space, self.check, self.analyze = workload, space, check, analyze
        self.hardware = workload.hw.name
        self.bound = accuracy_budget if accuracy_budget is not None else BOUNDS[workload.precision]

    def compile(self, c: Candidate) -> Any:
        from profiler.autotune.build import compile_candidate

        return compile_candidate(self.w, self.space, c)

    def run(self, c: Candidate) -> TrialResult:
        from accelerator.compiler.check import check
        from accelerator.sim.run import simulate
        from accelerator.sim.trace import summary
        from profiler.model.errors import InputError

        try:
            compiled = self.compile(c)
        except (InputError, ValueError) as e:
            return TrialResult(None, f"compile: {str(e).splitlines()[0]}")
        error = None
        if self.check:
            try:
                result = check(compiled.program, self.w.model, self.w.inputs, self.w.decomposed, self.bound)
            except (RuntimeError, TypeError, ValueError) as e:  # the compiled program does not run
                return TrialResult(None, f"functional check: the program does not run: {str(e).splitlines()[0]}")
            error = result.max_rel_error
            if not result.ok:
                worst = max(
                    [("output", e) for e in result.outputs] + [(x.name, x.rel_error) for x in result.layers],
                    key=lambda p: p[1],
                )
                return TrialResult(
                    None,
                    f"functional check: relative error {error:.3g} ({worst[0]}) over the bound {self.bound:g}",
                    error,
                )
        run = simulate(compiled.program, self.w.hw)
        s = summary(run)
        return TrialResult(
            int(s["total_ns"]),
            "",
            error,
            {
                "total_ns": s["total_ns"],
                "by_limiter": s["by_limiter"],
                "kernels": analyze_run(run) if self.analyze else [],
            },
        )
