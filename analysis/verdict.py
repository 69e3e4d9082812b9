"""The verdict: what bounds the run, the share of wall time each bound takes, the numbers that
prove it, and the three changes that would save the most. Computed once (profiler.api.analyze)
and shown first by every output: text, JSON, the dashboard's Overview, the Python API.

Shares come from the wall-time equation (analysis.attribution.attribute), summed over the
accelerators (over the CPUs on a CPU-only run):

    window = compute + memory + communication + runtime + unknown + idle_host + idle_sync + idle_other

and each term maps to one bound (BOUNDS): device compute, device memory, communication, runtime
overhead (dispatch-bound kernels), device work of unknown bound (no cost derivable), host /
input pipeline (idle_host: the next launch not issued yet), synchronisation (idle_sync: the host
blocked in a synchronize, a blocking copy or .item()), and idle with no recorded cause
(idle_other: queued work waiting on something the trace does not show). The bound is the
largest term; its share is that term over the summed windows. The critical path
(analysis.critical_path) is the second witness: its host / device / waiting split is quoted
and checked against the verdict (host work on the path against host-side idle, waiting against
synchronisation).

Actions: analysis.advice's advice (device-side changes) and the idle-gap findings
(analysis.idle_gaps: host work inside idle gaps, by category, with its lever), merged and
ranked by estimated saving. An idle finding saves at most the idle time its host work fills,
on the rank where it is largest (ranks run in parallel: the slowest bounds the step).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.idle_gaps import LEVERS, IdleGaps

#: term of the wall equation -> (bound key, what a reader calls it)
BOUNDS = {
    "compute_ns": ("compute", "device compute"),
    "memory_ns": ("memory", "device memory"),
    "communication_ns": ("communication", "communication"),
    "runtime_ns": ("runtime", "runtime overhead"),
    "unknown_ns": ("unknown", "device work of unknown bound"),
    "idle_host_ns": ("host", "host / input pipeline"),
    "idle_sync_ns": ("sync", "synchronisation"),
    "idle_other_ns": ("idle", "device idle, cause not recorded"),
}
#: Which critical-path split each bound should show: host work, device work or waiting.
_PATH_SIDE = {"host": "host", "runtime": "device", "sync": "waiting", "idle": "waiting", "compute": "device",
              "memory": "device", "communication": "device", "unknown": "device"}
#: Idle-gap categories merged into one action (they share a lever: take the host off the loop).
_LAUNCH_BOUND = ("python", "dispatch", "launch")
#: group -> (action title, what the host ran)
_IDLE_ACTIONS = {
    "input": ("overlap the input pipeline with device work (DataLoader workers, pinned memory, prefetch)",
              "data loading / preprocessing"),
    "sync": ("remove the synchronisation from the loop (.item(), blocking copies, synchronize)", "a call blocked on the device"),
    "launch-bound": ("cut host overhead between launches (CUDA graphs, torch.compile)", "Python and framework dispatch"),
}


@dataclass(frozen=True)
class Action:
    """One change, what it should save (ns, wall time) and why."""

    title: str
    saving_ns: float
    evidence: str
    source: str  # 'advice:<kind>' or 'idle:<category>'


@dataclass(frozen=True)
class Verdict:
    """What bounds the run. bound: a BOUNDS key ('compute', 'memory', 'communication', 'runtime',
    'unknown', 'host', 'sync', 'idle'); label: its name for people; share: of the summed
    windows (0..1); shares: every bound as (bound, label, time_ns, share), largest first;
    scope: the devices summed; evidence: sentences with the numbers; actions: at most three,
    largest saving first."""

    bound: str
    label: str
    share: float
    window_ns: int
    scope: str
    shares: tuple[tuple[str, str, int, float], ...]
    evidence: tuple[str, ...]
    actions: tuple[Action, ...]


def verdict(equation: pd.DataFrame, critical_paths: tuple = (), advice: tuple = (), idle: IdleGaps | None = None,
            top: int = 3) -> Verdict | None:
    """The verdict from the wall equation, the critical paths, the advice and the idle gaps
    (module docstring); None without an equation (nothing was classified)."""
    if equation is None or equation.empty:
        return None
    gpu = equation[equation["device"].astype(str) != "cpu"]
    eq = gpu if len(gpu) else equation
    window = int(eq["window_ns"].sum())
    if window <= 0:
        return None
    times = {col: int(eq[col].sum()) for col in BOUNDS}
    ranked = sorted(BOUNDS, key=lambda c: -times[c])
    cpu = not len(gpu)  # a CPU-only run: its ops are the work, and no "device" stands apart from the host
    shares = tuple((BOUNDS[c][0], BOUNDS[c][1].removeprefix("device ") if cpu else BOUNDS[c][1], times[c], times[c] / window)
                   for c in ranked)
    bound, label, t, share = shares[0]
    labels = [f"rank{r}/{d}" for r, d in zip(eq["rank"], eq["device"])]
    scope = labels[0] if len(labels) == 1 else f"{len(labels)} devices summed ({labels[0]}..{labels[-1]})"
    evidence = [_balance(eq, window, times, "CPU busy (an op running)" if cpu else "device busy")]
    evidence += _idle_evidence(idle, bound)
    evidence += _path_evidence(critical_paths, bound)
    actions = _actions(advice, idle, top)
    return Verdict(bound=bound, label=label, share=share, window_ns=window, scope=scope, shares=shares,
                   evidence=tuple(evidence), actions=actions)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms"


def _balance(eq: pd.DataFrame, window: int, t: dict[str, int], what: str) -> str:
    busy = int(eq["busy_ns"].sum())
    idle = window - busy
    return (f"{what} {_ms(busy)} of {_ms(window)} ({100 * busy / window:.1f}%); idle {_ms(idle)}: host late "
            f"{_ms(t['idle_host_ns'])}, blocked in a sync {_ms(t['idle_sync_ns'])}, other {_ms(t['idle_other_ns'])}")


def _idle_evidence(idle: IdleGaps | None, bound: str) -> list[str]:
    """What the host did during the idle time, and the largest gap, when idle time matters."""
    if idle is None or idle.by_category.empty or bound not in ("host", "sync", "idle", "runtime"):
        return []
    by = idle.by_category.groupby("category")["time_ns"].sum().sort_values(ascending=False)
    total = by.sum()
    parts = ", ".join(f"{c} {100 * v / total:.0f}%" for c, v in by.head(4).items() if v > 0)
    out = [f"the host during the idle time: {parts} (input = data loading / preprocessing, dispatch = framework ops, "
           "launch = runtime calls, python = Python frames)"]
    if len(idle.top_gaps):
        g = idle.top_gaps.iloc[0]
        out.append(f"largest gap: {_ms(g['dur_ns'])} on rank{g['rank']}/{g['device']} before {_short(g['next_name'])}; "
                   f"the host ran {g['activity']}")
    return out


def _short(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _path_evidence(paths: tuple, bound: str) -> list[str]:
    """The critical path's split, and whether it agrees with the verdict."""
    paths = [p for p in paths if p.length_ns > 0 and p.verdict != "cpu-only"]
    if not paths:
        return []
    host = sum(p.on_host_ns for p in paths)
    device = sum(p.on_device_ns for p in paths)
    waiting = sum(p.waiting_ns for p in paths)
    length = sum(p.length_ns for p in paths)
    side = max((("host", host), ("device", device), ("waiting", waiting)), key=lambda x: x[1])[0]
    agree = "agrees" if _PATH_SIDE.get(bound) == side else f"mostly {side}: read both"
    return [f"critical path: host work {100 * host / length:.0f}%, device work {100 * device / length:.0f}%, "
            f"waiting {100 * waiting / length:.0f}% of {_ms(length)} ({agree})"]


def _actions(advice: tuple, idle: IdleGaps | None, top: int) -> tuple[Action, ...]:
    out = [Action(a.title, float(a.saving_ns), a.evidence, f"advice:{a.kind}") for a in advice if a.saving_ns > 0]
    if idle is not None and not idle.by_category.empty:
        by = idle.by_category.copy()
        by["group"] = by["category"].where(~by["category"].isin(_LAUNCH_BOUND), "launch-bound")
        per = by.groupby(["rank", "device", "group"])["time_ns"].sum().reset_index()
        for group, g in per.groupby("group"):
            if group == "untraced":
                continue
            worst = g.loc[g["time_ns"].idxmax()]
            lever = LEVERS["launch" if group == "launch-bound" else group]
            title, what = _IDLE_ACTIONS[group]
            out.append(Action(title, float(worst["time_ns"]),
                              f"the device idled {_ms(worst['time_ns'])} on rank{worst['rank']}/{worst['device']} while the host "
                              f"ran {what}; at most that if it were hidden behind device work. {lever}", f"idle:{group}"))
    return tuple(sorted(out, key=lambda a: -a.saving_ns)[:top])
