"""`perf gate`: is NEW slower than BASE, beyond both a threshold and the noise?

Samples are iterations: each ProfilerStep of each trace on a side (a trace without steps is one
sample). For the total and for every op (by name), the measured quantity per sample is the summed
time of its units (device time on accelerators, self time on a CPU); '(wall)' is the sample's
wall-clock time (the ProfilerStep's duration, or the trace's span without steps), so a host stall
that leaves the device work unchanged is seen. A change is

    ratio = mean(NEW samples) / mean(BASE samples) - 1

and its noise a 95% bootstrap interval of that ratio (both sides resampled with replacement,
2,000 times, fixed seed).

Steps of one run share its process, its machine state and its input: they do not show run-to-run
noise. So with at least MIN_RUNS runs (traces) a side, a regression is flagged when the ratio
exceeds the threshold AND the interval's lower end is above zero; with fewer, the change cannot be
separated from noise and the ratio is compared with an explicit tolerance instead (mode
'tolerance'; the interval is still reported).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.mfu import rank_step_walls

RESAMPLES = 2000
SEED = 20261202
MIN_RUNS = 3  # runs a side for the statistical verdict
WALL = "(wall)"


@dataclass(frozen=True)
class Verdict:
    """One compared quantity: the total, or one op."""

    name: str
    base_mean_ns: float
    new_mean_ns: float
    ratio: float  # mean(new) / mean(base) - 1
    low: float  # 95% bootstrap interval of the ratio
    high: float
    samples: tuple[int, int]
    regression: bool
    mode: str = "bootstrap"  # 'bootstrap' (>= MIN_RUNS runs a side) or 'tolerance'


def samples(units_by_trace: list[pd.DataFrame], walls: list[pd.DataFrame] | None = None) -> pd.DataFrame:
    """Per sample (trace, step) and op name: summed unit time. Columns: sample, name, time_ns.
    The total is the op name '(total)'; with `walls` (per trace, `step_walls`), the sample's
    wall-clock time is the name '(wall)'."""
    rows = []
    for t, u in enumerate(units_by_trace):
        step = u["step"].to_numpy() if "step" in u else np.full(len(u), -1)
        steps = sorted(set(step.tolist()) - {-1}) or [-1]
        keep = np.isin(step, steps)
        g = u[keep].assign(sample=[f"{t}:{s}" for s in step[keep]])
        per = g.groupby(["sample", "name"], sort=False)["time_ns"].sum().reset_index()
        total = g.groupby("sample", sort=False)["time_ns"].sum().reset_index().assign(name="(total)")
        rows += [per, total]
        if walls is not None:
            w = walls[t]
            w = w[w["step"].isin(steps)] if steps != [-1] else w[w["step"] == -1]
            rows.append(
                pd.DataFrame(
                    {"sample": [f"{t}:{s}" for s in w["step"]], "name": WALL, "time_ns": w["wall_ns"].to_numpy()}
                )
            )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["sample", "name", "time_ns"])


def step_walls(events: pd.DataFrame) -> pd.DataFrame:
    """Wall-clock time per ProfilerStep (its annotation's duration, the longest over ranks:
    analysis.mfu.rank_step_walls), or of the whole trace (its span, as step -1) when it has no
    steps. Columns: step, wall_ns."""
    marks = rank_step_walls(events)
    if len(marks):
        return marks.groupby("step", as_index=False)["wall_ns"].max()
    if events.empty:
        return pd.DataFrame({"step": [], "wall_ns": []})
    span = int((events["ts"] + events["dur"]).max() - events["ts"].min())
    return pd.DataFrame({"step": [-1], "wall_ns": [span]})


def compare(
    base: pd.DataFrame,
    new: pd.DataFrame,
    max_regression: float,
    min_share: float = 0.05,
    runs: tuple[int, int] = (MIN_RUNS, MIN_RUNS),
    tolerance: float | None = None,
) -> list[Verdict]:
    """Verdicts for the wall time, the total and every op holding at least `min_share` of BASE's
    total time, most regressed first. `max_regression` and `tolerance` are fractions (0.1 for 10%).
    `runs`: traces a side; with fewer than MIN_RUNS on either, a verdict is the ratio against
    `tolerance` (default `max_regression`), mode 'tolerance' (the module docstring)."""
    statistical = min(runs) >= MIN_RUNS
    limit = max_regression if tolerance is None else tolerance
    rng = np.random.default_rng(SEED)
    total_base = base.loc[base["name"] == "(total)", "time_ns"].mean()
    names = base.groupby("name")["time_ns"].mean()
    names = names[(names >= min_share * total_base) | names.index.isin(["(total)", WALL])].index
    base_samples, new_samples = sorted(set(base["sample"])), sorted(set(new["sample"]))
    out = []
    for name in names:
        a = _per_sample(base, name, base_samples)
        b = _per_sample(new, name, new_samples)
        if a.mean() <= 0:
            continue
        ratio = b.mean() / a.mean() - 1
        ia = rng.integers(0, len(a), size=(RESAMPLES, len(a)))
        ib = rng.integers(0, len(b), size=(RESAMPLES, len(b)))
        boot = b[ib].mean(axis=1) / np.maximum(a[ia].mean(axis=1), 1e-9) - 1
        low, high = np.percentile(boot, [2.5, 97.5])
        regression = ratio > max_regression and low > 0 if statistical else ratio > limit
        out.append(
            Verdict(
                str(name),
                float(a.mean()),
                float(b.mean()),
                float(ratio),
                float(low),
                float(high),
                (len(a), len(b)),
                bool(regression),
                "bootstrap" if statistical else "tolerance",
            )
        )
    return sorted(out, key=lambda v: -v.ratio)


def _per_sample(df: pd.DataFrame, name: str, all_samples: list[str]) -> np.ndarray:
    """The op's time in each sample, 0 where it did not run."""
    mine = df[df["name"] == name].set_index("sample")["time_ns"]
    return mine.reindex(all_samples, fill_value=0).to_numpy(dtype=np.float64)
