"""The verdict: what bounds the run, the share of wall time each bound takes, the numbers that
prove it, and the three changes that would save the most. Computed once (profiler.api.analyze)
and shown first by every output: text, JSON, the dashboard's Overview, the Python API.

Shares come from the wall-time equation over each rank's span (analysis.attribution.attribute
with span='rank': host work before the first kernel and after the last counts), summed over the
accelerators (over the CPUs on a CPU-only run):

    wall = compute + memory + communication + runtime + unknown + idle_host + idle_sync + idle_other

and each term maps to one bound (BOUNDS): device compute, device memory, communication, runtime
overhead (dispatch-bound kernels), device work of unknown bound (no cost derivable), host /
input pipeline (idle_host: the next launch not issued yet), synchronisation (idle_sync: the host
blocked in a synchronize, a blocking copy or .item() while the device idles), and idle with no
recorded cause (idle_other: queued work waiting on something the trace does not show). The
bound is the largest term; its share is that term over the summed walls. The critical path
(analysis.critical_path) is the second witness: its host / device / waiting split is quoted and
checked against the verdict (PATH_SIDE); where they differ, the evidence says why. One
difference decides: when the split's largest term is device work but the path is at least
HOST_PATH_SHARE host work, the device's work all ran under the host's and shortening it moves no
end time, so the host is the bound and its share is the path's host share.

Actions: analysis.advice's advice (device-side changes) and the idle-gap findings
(analysis.idle_gaps), ranked by estimated saving, each capped at the wall time. Idle findings,
on the device where each is largest (ranks run in parallel: the slowest bounds the step):

- host-side work (input pipeline; Python, dispatch and launch calls): the host-late idle time
  (idle_host) split in proportion to what the host ran in the gaps, so the two never claim the
  same nanosecond and together stay within idle_host; the device still runs its busy time;
- a blocked call (idle_sync): the device sat idle while the host waited, so the wait was on
  nothing the device was doing: a stream event, another thread, process or rank, or new
  requests; the trace cannot tell which. Saves at most idle_sync, if that wait is avoidable.

The actions draw on different parts of the wall (host-late, blocked, device time), except the
advice ones that may overlap each other: their savings are each an upper bound, not a sum.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.idle_gaps import IdleGaps
from profiler.model.numfmt import fmt_ns

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
PATH_SIDE = {
    "host": "host",
    "runtime": "device",
    "sync": "waiting",
    "idle": "waiting",
    "compute": "device",
    "memory": "device",
    "communication": "device",
    "unknown": "device",
}
#: Actions saving less than this share of the wall are noise, not shown.
NOISE = 0.001
#: Idle-gap categories merged into one action (they share a lever: take the host off the loop).
_LAUNCH_BOUND = ("python", "dispatch", "launch")
#: group -> (title, lever, what the host ran)
_HOST_ACTIONS = {
    "launch-bound": ("cut Python and dispatch between launches", "CUDA graphs/torch.compile", "Python/dispatch"),
    "input": ("take input loading/preprocessing off the device's path", "DataLoader workers, pinned memory", "input"),
}


@dataclass(frozen=True)
class Action:
    """One change: what it should save (ns of wall time, at most), what to do (lever) and
    what the saving assumes; source is 'advice:<kind>' or 'idle:<input, launch-bound, sync>'."""

    title: str
    saving_ns: float
    lever: str
    assumption: str
    source: str


@dataclass(frozen=True)
class Verdict:
    """What bounds the run. bound: a BOUNDS key ('compute', 'memory', 'communication', 'runtime',
    'unknown', 'host', 'sync', 'idle'); label: its name for people; share: of the summed
    walls (0..1); shares: every bound as (bound, label, time_ns, share), largest first;
    scope: the devices summed; evidence: sentences with the numbers; path_agrees: the critical
    path's largest side is the bound's (None without a path); actions: at most three, largest
    saving first."""

    bound: str
    label: str
    share: float
    window_ns: int
    scope: str
    shares: tuple[tuple[str, str, int, float], ...]
    evidence: tuple[str, ...]
    actions: tuple[Action, ...]
    path_agrees: bool | None = None


def verdict(
    equation: pd.DataFrame, critical_paths: tuple = (), advice: tuple = (), idle: IdleGaps | None = None, top: int = 3
) -> Verdict | None:
    """The verdict from the wall equation (rank span), the critical paths, the advice and the
    idle gaps (module docstring); None without an equation (nothing was classified)."""
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
    shares = tuple(
        (BOUNDS[c][0], BOUNDS[c][1].removeprefix("device ") if cpu else BOUNDS[c][1], times[c], times[c] / window)
        for c in ranked
    )
    bound, label, _, share = shares[0]
    labels = [f"rank{r}/{d}" for r, d in zip(eq["rank"], eq["device"])]
    scope = labels[0] if len(labels) == 1 else f"{len(labels)} devices summed"
    evidence = [_balance(eq, window, times, "CPU busy" if cpu else "device busy")]
    evidence += _idle_evidence(idle, bound)
    if times["idle_other_ns"] >= 0.2 * window:  # large enough to need a word, whatever the bound
        evidence.append(
            f"idle {fmt_ns(times['idle_other_ns'])} with its work already launched: it started late "
            "(another process? clock skew?)"
        )
    path, agrees = _path_evidence(critical_paths, bound, times, window)
    host_path = _host_share_of_path(critical_paths)
    if agrees is False and PATH_SIDE[bound] == "device" and host_path >= HOST_PATH_SHARE:
        # the device's work all ran while the host was still busy: shortening it moves no end
        # time, so what bounds the run is the host (the split's largest term is not)
        why = _why(bound, "host", times, window)
        bound, label, share = "host", BOUNDS["idle_host_ns"][1], host_path
        path, agrees = _path_evidence(critical_paths, bound, times, window)
        path.append(f"the host bounds the run although device work is the split's largest term: {why}")
    actions = _actions(advice, idle, eq, top)
    return Verdict(
        bound=bound,
        label=label,
        share=share,
        window_ns=window,
        scope=scope,
        shares=shares,
        evidence=tuple(evidence + path),
        actions=actions,
        path_agrees=agrees,
    )


def _balance(eq: pd.DataFrame, window: int, t: dict[str, int], what: str) -> str:
    busy = int(eq["busy_ns"].sum())
    return (
        f"{what} {fmt_ns(busy)} ({100 * busy / window:.1f}%), idle {fmt_ns(window - busy)}: "
        f"host late {fmt_ns(t['idle_host_ns'])}, host blocked {fmt_ns(t['idle_sync_ns'])}, "
        f"other {fmt_ns(t['idle_other_ns'])}"
    )


def _idle_evidence(idle: IdleGaps | None, bound: str) -> list[str]:
    """What the host did during the idle time, and the largest gap, when idle time matters."""
    if idle is None or idle.by_category.empty or bound not in ("host", "sync", "idle", "runtime"):
        return []
    by = idle.by_category.groupby("category")["time_ns"].sum().sort_values(ascending=False)
    parts = ", ".join(f"{c} {100 * v / by.sum():.0f}%" for c, v in by.head(4).items() if v >= by.sum() / 200)
    out = [f"the host while the device idled: {parts}"]
    if len(idle.top_gaps):
        out += _gap_sentences(idle.top_gaps.iloc[0])
    return out


def _gap_sentences(g: pd.Series) -> list[str]:
    """The largest gap: what ended it and what the host did; for a host blocked while the
    device idled, what that means (module docstring), on a second line."""
    where = f"before {_short(_bare(g['next_name']), 28)}" if g["next_name"] else "after the last device work"
    if g["sync_ns"] > g["dur_ns"] / 2:
        call = _short(str(g["activity"]).split(" (")[0], 40)
        queued = g["next_name"] and g["host_ns"] < g["sync_ns"]
        return [
            f"largest gap {fmt_ns(g['dur_ns'])}: host blocked in {call} while the device idled",
            f"{_short(_bare(g['next_name']), 48)} sat queued: " * bool(queued) + "not a wait on device work",
            "waiting on another stream, process or rank, or for requests: the trace cannot tell which",
        ]
    head = f"largest gap {fmt_ns(g['dur_ns'])} {where}; the host ran "
    return [head + _short(_first_activity(g["activity"]), 94 - len(head))]


def _bare(name: str) -> str:
    """A kernel's function name without return type, namespaces, template and arguments
    ('void (anonymous namespace)::resolve_kernel<long>(long*)' -> 'resolve_kernel'); copies
    keep their direction ('Memcpy HtoD')."""
    if name.startswith(("Memcpy", "Memset")):
        return " ".join(name.split()[:2])
    core = re.sub(r"\(anonymous namespace\)::", "", name.removeprefix("void "))
    core = re.split(r"[<(]", core, maxsplit=1)[0]
    return core.rsplit("::", 1)[-1] or name


def _first_activity(activity: str) -> str:
    """'name (1.2 ms)' of the host's largest piece in a gap, with numfmt's time."""
    head = str(activity).split("; ")[0]
    if head.startswith("(no host event"):
        return "untraced code"
    name, _, t = head.rpartition(" (")
    try:
        return f"{name} ({fmt_ns(float(t.removesuffix(' ms)')) * 1e6)})"
    except ValueError:
        return head


def _short(name: str, n: int) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


#: A critical path at least this much host work makes the host the bound even where the wall
#: split's largest term is device work (that work ran under the host's).
HOST_PATH_SHARE = 0.8


def _host_share_of_path(paths: Sequence[Any]) -> float:
    """Host work's share of the critical paths' length (0 without a GPU path)."""
    paths = [p for p in paths if p.length_ns > 0 and p.verdict != "cpu-only"]
    length = sum(p.length_ns for p in paths)
    return sum(p.on_host_ns for p in paths) / length if length else 0.0


def _path_evidence(
    paths: Sequence[Any], bound: str, times: dict[str, int], window: int
) -> tuple[list[str], bool | None]:
    """The critical path's split, and whether it agrees with the verdict; where it does not,
    why (the path follows one chain; the split counts where the device's wall went)."""
    paths = [p for p in paths if p.length_ns > 0 and p.verdict != "cpu-only"]
    if not paths:
        return [], None
    sides = {
        "host": sum(p.on_host_ns for p in paths),
        "device": sum(p.on_device_ns for p in paths),
        "waiting": sum(p.waiting_ns for p in paths),
    }
    length = sum(p.length_ns for p in paths)
    side = max(sides, key=lambda s: sides[s])
    agrees = PATH_SIDE.get(bound) == side
    split = ", ".join(f"{s} {100 * v / length:.0f}%" for s, v in sides.items())
    if agrees:
        return [f"critical path: {split} of {fmt_ns(length)} (agrees)"], True
    return [
        f"critical path: {split} of {fmt_ns(length)}",
        f"path and split differ: {_why(bound, side, times, window)}",
    ], False


def _why(bound: str, side: str, t: dict[str, int], window: int) -> str:
    """Why the path's largest side is not the bound's (the cases seen on real traces)."""
    device = sum(t[c] for c in ("compute_ns", "memory_ns", "communication_ns", "runtime_ns", "unknown_ns"))
    if side == "host" and PATH_SIDE[bound] == "device":
        return f"device work ({fmt_ns(device)}) ran under host work: faster kernels save little"
    if side == "waiting":
        return "the path waits on queued work the split counts as device time"
    if side == "device":
        return "the host waited on this device work: the split counts the wait as host time"
    return "the host worked while the device idled for other reasons"


def _actions(advice: tuple, idle: IdleGaps | None, eq: pd.DataFrame, top: int) -> tuple[Action, ...]:
    wall = int(eq["window_ns"].max())  # no change saves more than the longest wall it runs in
    out = [
        Action(a.title, min(float(a.saving_ns), wall), "", a.evidence, f"advice:{a.kind}")
        for a in advice
        if a.saving_ns > 0
    ]
    if idle is not None and not idle.by_category.empty:
        out += _idle_actions(idle, eq)
    out = [a for a in out if a.saving_ns >= NOISE * wall]
    return tuple(sorted(out, key=lambda a: -a.saving_ns)[:top])


def _idle_actions(idle: IdleGaps, eq: pd.DataFrame) -> list[Action]:
    """The host-side and blocked-call actions (module docstring), on the device where each is largest."""
    by = idle.by_category.copy()
    by["group"] = by["category"].where(~by["category"].isin(_LAUNCH_BOUND), "launch-bound")
    per = by.groupby(["rank", "device", "group"])["time_ns"].sum().unstack(fill_value=0)
    row = eq.assign(key=list(zip(eq["rank"], eq["device"].astype(str)))).set_index("key")
    out = []
    for group in ("launch-bound", "input", "sync"):
        if group not in per:
            continue
        saving = {}
        for (rank, device), r in per.iterrows():
            e = row.loc[[(rank, device)]].iloc[0] if (rank, device) in row.index else None
            if e is None:
                continue
            if group == "sync":
                saving[(rank, device)] = min(float(r["sync"]), float(e["idle_sync_ns"]))
            else:  # the host-late time, split by what the host ran (sync time is the blocked part)
                host_side = float(r.drop("sync", errors="ignore").sum())
                saving[(rank, device)] = float(e["idle_host_ns"]) * float(r[group]) / host_side if host_side else 0.0
        if not saving or max(saving.values()) <= 0:
            continue
        (rank, device), s = max(saving.items(), key=lambda kv: kv[1])
        e = row.loc[[(rank, device)]].iloc[0]
        where = f"rank{rank}/{device}"
        if group == "sync":
            call = _sync_call(idle, rank, device)
            out.append(
                Action(
                    f"find what {call} waits on ({where})",
                    s,
                    "profile all threads, processes, ranks (server: prior batch? idle?)",
                    "saves only if avoidable",
                    "idle:sync",
                )
            )
        else:
            title, lever, what = _HOST_ACTIONS[group]
            out.append(
                Action(
                    f"{title} ({where})",
                    s,
                    lever,
                    f"{fmt_ns(s)} of {fmt_ns(e['idle_host_ns'])} host-late: {what}; device busy {fmt_ns(e['busy_ns'])}",
                    f"idle:{group}",
                )
            )
    return out


def _sync_call(idle: IdleGaps, rank: int, device: str) -> str:
    """The blocking call that held the host longest while the device idled."""
    a = idle.activity
    a = a[(a["rank"] == rank) & (a["device"] == device) & (a["category"] == "sync")]
    return _short(str(a.loc[a["time_ns"].idxmax(), "name"]), 32) if len(a) else "the blocking call"
