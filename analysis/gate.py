"""`perf gate`: is NEW slower than BASE, beyond both a threshold and the noise?

Samples are iterations: each ProfilerStep of each trace on a side (a trace without steps is one
sample). For the total and for every op (by name), the measured quantity per sample is the summed
time of its units (device time on accelerators, self time on a CPU). A change is

    ratio = mean(NEW samples) / mean(BASE samples) - 1

and its noise a 95% bootstrap interval of that ratio (both sides resampled with replacement,
2,000 times, fixed seed). A regression is flagged only when the ratio exceeds the threshold AND
the interval's lower end is above zero (the slowdown is not explained by run-to-run noise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

RESAMPLES = 2000
SEED = 20261202


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


def samples(units_by_trace: list[pd.DataFrame]) -> pd.DataFrame:
    """Per sample (trace, step) and op name: summed unit time. Columns: sample, name, time_ns.
    The total is the op name '(total)'."""
    rows = []
    for t, u in enumerate(units_by_trace):
        step = u["step"].to_numpy() if "step" in u else np.full(len(u), -1)
        steps = sorted(set(step.tolist()) - {-1}) or [-1]
        keep = np.isin(step, steps)
        g = u[keep].assign(sample=[f"{t}:{s}" for s in step[keep]])
        per = g.groupby(["sample", "name"], sort=False)["time_ns"].sum().reset_index()
        total = g.groupby("sample", sort=False)["time_ns"].sum().reset_index().assign(name="(total)")
        rows += [per, total]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["sample", "name", "time_ns"])


def compare(base: pd.DataFrame, new: pd.DataFrame, max_regression: float, min_share: float = 0.05) -> list[Verdict]:
    """Verdicts for the total and for every op holding at least `min_share` of BASE's total time,
    most regressed first. `max_regression` is a fraction (0.1 for 10%)."""
    rng = np.random.default_rng(SEED)
    total_base = base.loc[base["name"] == "(total)", "time_ns"].mean()
    names = base.groupby("name")["time_ns"].mean()
    names = names[(names >= min_share * total_base) | (names.index == "(total)")].index
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
        out.append(Verdict(str(name), float(a.mean()), float(b.mean()), float(ratio), float(low), float(high),
                           (len(a), len(b)), bool(ratio > max_regression and low > 0)))
    return sorted(out, key=lambda v: -v.ratio)


def _per_sample(df: pd.DataFrame, name: str, all_samples: list[str]) -> np.ndarray:
    """The op's time in each sample, 0 where it did not run."""
    mine = df[df["name"] == name].set_index("sample")["time_ns"]
    return mine.reindex(all_samples, fill_value=0).to_numpy(dtype=np.float64)
