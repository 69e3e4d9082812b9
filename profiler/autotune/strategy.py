"""Search strategies, one interface: `propose() -> Proposal | None`, `observe(candidate, trial)`.
Every strategy proposes the baseline (the compiler's own plan) first.

Roofline-guided (`RooflineStrategy`), analysis first: the latest best trial's simulated trace,
analyzed (runner.analyze_run: per kernel its time, floor and bound), ranks kernels by time
lost to their floor (time_ns - floor_ns). For the top kernel not yet worked on it takes the
levers that fit its bound:

    runtime bound           fusion (fewer kernels: fewer dispatches)
    memory bound            fusion, precision (narrower operands), tiling (operand re-reads),
                            codegen (Inductor: frozen, prepacked weights)
    compute bound           tiling, codegen (Inductor: the C++ GEMM template, the vector
                            width), precision (a faster matrix rate)
    communication bound     chips (repartition)
    unknown                 every lever

A dimension that names no kernel (the Inductor runner's options) applies to every kernel.
and proposes the best candidate with one of those dimensions changed, ordered by analytic floor
and pruned when the floor exceeds the best measured time. The analytic floor of a candidate
(a lower bound on its time, from the best trial's analysis, all in ns):

    untouched kernels       their measured time
    touched kernels         their floor: max(t_compute, t_memory, t_runtime), with
                            precision p: t_compute x rate(base) / rate(p), t_memory x bytes(p) / bytes(base)
                            chips n (from c): t_compute and t_memory x c / n
    a region split          + one dispatch (t_runtime) per kernel it adds (at least one)

After each trial that improves the best, the new trace's analysis re-ranks the kernels, so the
next move follows the new bottleneck (a kernel already worked on is taken up again only when
the improvement changed its time). When every kernel's levers are spent it tries every
dimension's neighbours by floor, then random untried candidates.

Baselines through the same loop: exhaustive (the space in mixed-radix order), random (uniform,
seeded, no repeats), TPE (Optuna's TPESampler, seeded; option indices as categorical
parameters; a failed trial is told as failed)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from profiler.autotune.space import Candidate, Space

LEVERS_BY_BOUND = {
    "runtime": ("fusion",),
    "memory": ("fusion", "precision", "tile", "codegen"),
    "compute": ("tile", "codegen", "precision"),
    "communication": ("chips",),
    "unknown": ("tile", "fusion", "codegen", "precision", "chips"),
}
BYTES = {"fp32": 4, "bf16": 2, "int8": 1, "fp8": 1}
MAX_DRAWS = 10_000  # random draws before a strategy says the space has no untried candidate left


@dataclass(frozen=True)
class Proposal:
    """A candidate to run, the finding that proposed it, and its analytic floor (ns; 0: none)."""

    candidate: Candidate
    finding: str = ""
    floor: float = 0.0


class Strategy:
    name = ""

    def __init__(self, space: Space, seed: int = 0):
        self.space, self.seed = space, seed
        self.rng = random.Random(seed)
        self.tried: set[str] = set()

    def propose(self) -> Proposal | None:
        raise NotImplementedError

    def observe(self, candidate: Candidate, trial: Any) -> None:
        self.tried.add(candidate.hash)

    def _random_untried(self, finding: str = "random") -> Proposal | None:
        for _ in range(MAX_DRAWS):
            c = self.space.sample(self.rng)
            if c.hash not in self.tried:
                return Proposal(c, finding)
        return None


class ExhaustiveStrategy(Strategy):
    name = "exhaustive"

    def __init__(self, space: Space, seed: int = 0):
        super().__init__(space, seed)
        self._all = space.enumerate()

    def propose(self) -> Proposal | None:
        if not self.tried:
            return Proposal(self.space.candidate({}), "baseline")
        for c in self._all:
            if c.hash not in self.tried:
                return Proposal(c, "exhaustive")
        return None


class RandomStrategy(Strategy):
    name = "random"

    def propose(self) -> Proposal | None:
        if not self.tried:
            return Proposal(self.space.candidate({}), "baseline")
        return self._random_untried()


class TPEStrategy(Strategy):
    name = "tpe"

    def __init__(self, space: Space, seed: int = 0):
        super().__init__(space, seed)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
        self.dists: dict[str, Any] = {
            d.name: optuna.distributions.CategoricalDistribution(list(range(len(d.options)))) for d in space.dimensions
        }
        self.values: dict[str, float | None] = {}
        self.pending: dict[str, Any] = {}

    def propose(self) -> Proposal | None:
        if not self.tried:
            return Proposal(self.space.candidate({}), "baseline")
        for _ in range(50):
            t = self.study.ask(self.dists)
            c = self.space.from_indices(t.params)
            if c.hash not in self.values:
                self.pending[c.hash] = t
                return Proposal(c, "tpe")
            self._tell(t, self.values[c.hash])  # a repeat: its known result, no new trial
        return self._random_untried("tpe (random after 50 repeats)")

    def _tell(self, t: Any, value: float | None) -> None:
        if value is None:
            self.study.tell(t, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(t, value)

    def observe(self, candidate: Candidate, trial: Any) -> None:
        super().observe(candidate, trial)
        value = float(trial.time_ns) if trial.time_ns is not None else None
        self.values[candidate.hash] = value
        t = self.pending.pop(candidate.hash, None)
        if t is not None:
            self._tell(t, value)
        elif value is not None:  # the baseline (or a random fallback): added as a finished trial
            params = self.space.indices(candidate)
            self.study.add_trial(self.optuna.trial.create_trial(params=params, distributions=self.dists, value=value))


class RooflineStrategy(Strategy):
    """The analysis-first strategy (module docstring)."""

    name = "roofline"

    def __init__(self, space: Space, seed: int = 0, rates: dict[str, float] | None = None):
        super().__init__(space, seed)
        self.rates = rates or {}  # policy -> FLOP/s of the matrix work at that policy
        self.best: tuple[Candidate, Any] | None = None
        self.queue: list[Proposal] = []
        self.done: set[str] = set()  # kernels whose levers were proposed since the last improvement
        self.widened = False

    def observe(self, candidate: Candidate, trial: Any) -> None:
        super().observe(candidate, trial)
        if trial.time_ns is None:
            return
        if self.best is None or trial.time_ns < self.best[1].time_ns:
            # a new best: re-rank from its analysis; kernels whose time the change moved are
            # worked on again, the others' levers were already tried against the same kernel
            old = {r["name"]: r["time_ns"] for r in self.best[1].trace_summary.get("kernels", [])} if self.best else {}
            new = {r["name"]: r["time_ns"] for r in trial.trace_summary.get("kernels", [])}
            self.done = {k for k in self.done if k in new and old.get(k) == new[k]}
            self.best = (candidate, trial)
            self.queue, self.widened = [], False

    def propose(self) -> Proposal | None:
        if not self.tried:
            return Proposal(self.space.candidate({}), "baseline")
        if self.best is None:
            return self._random_untried("random (the baseline failed: no analysis to follow)")
        while True:
            while self.queue:
                p = self.queue.pop(0)
                if p.candidate.hash not in self.tried:
                    return p
            if not self._refill():
                return self._random_untried("random (every lever of every kernel tried)")

    def _refill(self) -> bool:
        best_c, best_t = self.best  # type: ignore[misc]
        rows = best_t.trace_summary.get("kernels", [])
        ranked = sorted(rows, key=lambda r: -(r["time_ns"] - r["floor_ns"]))
        for r in ranked:
            if r["name"] in self.done:
                continue
            self.done.add(r["name"])
            fitting = LEVERS_BY_BOUND.get(r["bound"], LEVERS_BY_BOUND["unknown"])
            dims = [d.name for d in self.space.dimensions if _applies(d, r["name"]) and d.lever in fitting]
            if not dims:
                continue
            finding = f"{self._finding(r)}: " + "/".join(dict.fromkeys(self.space.dimension(n).lever for n in dims))
            if self._enqueue(best_c, rows, dims, finding):
                return True
        if not self.widened:  # the bound's levers are spent: every lever of every kernel, by floor
            self.widened = True
            found = False
            for r in ranked:
                dims = [d.name for d in self.space.dimensions if _applies(d, r["name"])]
                levers = "/".join(dict.fromkeys(self.space.dimension(n).lever for n in dims))
                finding = f"{self._finding(r)}: {levers} (beyond the {r['bound']} bound's levers)"
                found = self._enqueue(best_c, rows, dims, finding) or found
            if found:
                self.queue.sort(key=lambda p: p.floor)
            return found
        return False

    @staticmethod
    def _finding(r: dict) -> str:
        eff = r["efficiency"] if r["efficiency"] == r["efficiency"] else 0.0  # NaN: no floor
        return (
            f"{r['name']}: {r['bound']}-bound, {r['time_ns'] / 1e3:.3f} us against a "
            f"{r['floor_ns'] / 1e3:.3f} us floor ({eff:.0%}), {(r['time_ns'] - r['floor_ns']) / 1e3:.3f} us lost"
        )

    def _enqueue(self, best: Candidate, rows: list[dict], dims: list[str], finding: str) -> bool:
        best_time = self.best[1].time_ns  # type: ignore[index]
        scored = []
        for c in self.space.neighbours(best, dims):
            if c.hash in self.tried:
                continue
            f = self.floor(best, c, rows)
            if f <= best_time:
                scored.append((f, c))
        scored.sort(key=lambda p: p[0])
        self.queue += [Proposal(c, f"{finding} (floor {f / 1e3:.3f} us)", f) for f, c in scored]
        return bool(scored)

    def floor(self, best: Candidate, c: Candidate, rows: list[dict]) -> float:
        """The analytic floor of `c`, one dimension away from `best` (module docstring), ns."""
        old, new = dict(best.choices), dict(c.choices)
        name = next(n for n in {*old, *new} if old.get(n) != new.get(n))
        d = self.space.dimension(name)
        before, after = old.get(name, d.default), new.get(name, d.default)
        by_name = {r["name"]: r for r in rows}
        touched = [by_name[k] for k in d.kernels if k in by_name] if d.lever != "chips" and d.kernels else rows
        total = sum(r["time_ns"] for r in rows) - sum(r["time_ns"] for r in touched)
        for r in touched:
            comp, mem, run = r["t_compute_ns"], r["t_memory_ns"], r["t_runtime_ns"]
            if d.lever == "precision":
                comp *= self.rates.get(before, 1.0) / self.rates.get(after, 1.0) if self.rates.get(after) else 1.0
                mem *= BYTES.get(after, 4) / BYTES.get(before, 4)
            elif d.lever == "chips":
                comp, mem = comp * before / after, mem * before / after
            total += max(comp, mem, run)
        if d.lever == "fusion" and after == "split":
            total += max((r["t_runtime_ns"] for r in touched), default=0.0)
        return total


def _applies(d: Any, kernel: str) -> bool:
    """`d` changes `kernel`: it names it, or it names none (a whole-graph option)."""
    return not d.kernels or kernel in d.kernels


STRATEGIES = {
    "roofline": RooflineStrategy,
    "random": RandomStrategy,
    "tpe": TPEStrategy,
    "exhaustive": ExhaustiveStrategy,
}


def matrix_rates(hw: Any) -> dict[str, float]:
    """FLOP/s of a chip's matrix work under each policy: the matrix unit's peak
    (cores x MACs/cycle x 2 x clock), or the vector unit's (cores x lanes x add_mul x clock)
    for a dtype the matrix unit lacks (legalisation runs it there)."""
    out = {}
    for policy in BYTES:
        peak = hw.matrix_peak_flops(policy)
        if not peak:
            ops = hw.vector.ops_per_cycle.get(policy, {}).get("add_mul", 0)
            peak = hw.cores * hw.vector.lanes * ops * hw.clock_hz
        out[policy] = peak
    return out


def make_strategy(name: str, space: Space, seed: int, hw: Any = None) -> Strategy:
    if name == "roofline":
        return RooflineStrategy(space, seed, matrix_rates(hw) if hw is not None else None)
    return STRATEGIES[name](space, seed)
