"""`perf gate --split BUDGET MODEL --candidate ...`: drive the autotune loop over per-layer
precision plans (the facade's profiler.api.deploy_split measures each; the loop sits above the
facade, so it is driven from here; docs/deploy.md, "Graph splitting")."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.model.errors import InputError

STRATEGIES = ("exhaustive", "random", "tpe")


@dataclass(frozen=True)
class SplitResult:
    """The trials (profiler.autotune.db.Trial, in the order stored), the speed/accuracy front, the
    best plan within the budget (None when none meets it), and what the search was."""

    trials: tuple[Any, ...]
    front: tuple[Any, ...]
    best: Any
    budget: float
    candidate: str
    layers: tuple[str, ...]
    strategy: str
    notes: tuple[str, ...]

    @staticmethod
    def plan(trial: Any) -> dict[str, str]:
        """A trial's plan: {module path: 'fp32'} for the layers it keeps in fp32 (the rest int8)."""
        return {k.removeprefix("precision:"): str(v) for k, v in trial.candidate.items()}


class _PlanRunner:
    """The loop's runner: one candidate (dimension precision:<module> -> option) -> TrialResult."""

    def __init__(self, setup: Any):
        self.setup = setup

    def run(self, candidate: Any) -> Any:
        from profiler.api.deploy_split import measure_plan
        from profiler.autotune.runner import TrialResult

        plan = {k.removeprefix("precision:"): str(v) for k, v in candidate.to_json().items()}
        with tempfile.TemporaryDirectory() as tmp:
            ns, err, failure, keep = measure_plan(self.setup, plan, Path(tmp))
        if ns is None:
            return TrialResult(None, failure=failure)
        return TrialResult(int(round(ns)), accuracy_error=err, summary={"total_ns": ns, "fp32_nodes": list(keep)})


def split_search(
    spec: str,
    input_specs: list[str],
    candidate: str,
    budget: float,
    db_path: Path,
    *,
    trials: int = 16,
    strategy: str = "",
    seed: int = 0,
    calibration: Path | None = None,
) -> SplitResult:
    """Search per-layer plans (profiler.api.deploy_split); `strategy` '' picks exhaustive when every
    plan fits in `trials`, else tpe."""
    from profiler.api.deploy_split import prepare_split
    from profiler.autotune.db import Study, TrialDB
    from profiler.autotune.loop import front, tune
    from profiler.autotune.space import Dimension, Space
    from profiler.autotune.strategy import make_strategy

    if not budget >= 0 or trials < 1:
        raise InputError(None, f"--split {budget} --trials {trials}: the budget is a rel_error >= 0, trials >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        setup = prepare_split(spec, input_specs, candidate, Path(tmp), calibration=calibration)
        space = Space(
            tuple(Dimension(f"precision:{m}", "precision", ("int8", "fp32"), module=m) for m in setup.layers),
            setup.precision,
            model=spec,
            accel=setup.backend,
        )
        name = strategy or ("exhaustive" if 2 ** len(setup.layers) <= trials else "tpe")
        if name not in STRATEGIES:
            raise InputError(None, f"--strategy {name}: expected one of {', '.join(STRATEGIES)}")
        hardware = "snapdragon-x-elite-htp" if setup.backend == "qnn-sim" else "cpu"
        study = Study(setup.workload, hardware, setup.backend, spec)
        db = TrialDB(db_path)
        try:
            done = tune(space, _PlanRunner(setup), make_strategy(name, space, seed), db, study, trials, seed)
        finally:
            db.close()
    within = [t for t in done if t.ok and t.accuracy_error is not None and t.accuracy_error <= budget]
    best = min(within, key=lambda t: (t.time_ns, t.accuracy_error, t.seq)) if within else None
    notes = (
        f"{setup.precision} calibrated on {setup.calib.source}",
        f"error on the seeded inputs of --input {' '.join(input_specs)}",
    )
    return SplitResult(tuple(done), tuple(front(list(done))), best, budget, candidate, setup.layers, name, notes)
