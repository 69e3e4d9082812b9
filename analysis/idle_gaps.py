"""When the device sits idle, what was the host doing? The largest idle gaps, the host work in
them, the time at stake and the lever.

Gaps are those of analysis.attribution (device_gaps: the gaps in the union of a device's work,
split into host / sync / other). For a rank with no device work (a CPU-only run) the gaps are
those in the union of its top-level ops: Python and framework code between ops.

In each gap the host thread that launched the work ending it (else the rank's busiest launching
thread) is read: every host event on that thread (op, runtime call, python frame, annotation)
contributes its self time (its interval minus its children's) inside the gap, and the rest of
the gap is untraced (no event recorded: Python between ops when with_stack was off). Each piece
takes a category from its own name, else from the nearest enclosing event that names one:

- input: data loading and preprocessing (DataLoader, Dataset __getitem__, collate, transforms,
  PIL / cv2 image work, decoding, tokenisation);
- sync: a call blocked on the device (attribution.SYNC_CALL / SYNC_OP: synchronize, blocking
  memcpy, .item());
- launch: other runtime calls (kernel launches, allocations);
- dispatch: framework op self time (aten dispatch, shape checks);
- python: Python frames and user annotations' self time;
- untraced: no event on the thread.

Lever per category (LEVERS). Time at stake: the gap time the category fills; removing or hiding
that host work saves at most that much wall time (the device still has to run its work).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.attribution import SYNC_CALL, SYNC_OP, _covered, device_gaps
from analysis.intervals import runs
from profiler.model.nesting import nest_sorted
from profiler.model.schema import Kind
from profiler.model.strings import distinct as distinct_names
from profiler.model.trace import Trace
from profiler.model.numfmt import fmt_ns

#: Names of input-pipeline work (data loading, decoding, preprocessing, tokenisation).
INPUT_NAMES = (
    r"(?i)dataloader|_next_data|_get_data|collate|__getitem__|dataset|fetch|transforms?\b|torchvision|"
    r"\bPIL\b|Image\.|imread|cv2\.|decode_|read_image|load_image|preprocess|augment|tokeni[sz]|"
    r"pin_memory|numpy|np\."
)
CATEGORIES = ("input", "sync", "launch", "dispatch", "python", "untraced")
LEVERS = {
    "input": "overlap input processing with device work: DataLoader(num_workers>0, pin_memory=True, prefetch_factor), "
    "non_blocking copies, or preprocess on the device",
    "sync": "remove the synchronisation from the loop: no .item() / .cpu() / print of device tensors per step, "
    "non_blocking copies, events instead of synchronize",
    "launch": "launch-bound: capture the step in a CUDA/HIP graph (torch.compile(mode='reduce-overhead') or "
    "torch.cuda.graphs) or fuse small ops with torch.compile",
    "dispatch": "launch-bound: fewer, larger ops (torch.compile, CUDA graphs, a larger batch) cut framework dispatch",
    "python": "Python overhead between launches: torch.compile or a CUDA graph for the loop, "
    "move host work off the critical path",
    "untraced": "host time outside any recorded event: profile with with_stack=True to see the Python frames",
}
_HOST_KINDS = (Kind.OP.value, Kind.RUNTIME.value, Kind.PYTHON.value, Kind.ANNOTATION.value, Kind.COLLECTIVE.value)
_ACTIVITY_KEYS = ("category", "name", "kind")  # what the activity table sums time by
_STEP_LABEL = "ProfilerStep#"  # covers the whole step: its self time is code between ops


@dataclass(frozen=True)
class IdleGaps:
    """What the host did while each device sat idle. Times in ns.

    by_category: rank, device, category (of CATEGORIES), time_ns (gap time that category
      fills), share (of the device's idle time), lever; largest first per device.
    top_gaps: the largest gaps over all devices: rank, device, start_ns, end_ns, dur_ns,
      host_ns, sync_ns, other_ns (attribution's split), next_name (the work that ends the gap),
      activity (the host's largest pieces in the gap: 'name (time)', '; '-joined), category
      (the one filling most of the gap).
    activity: rank, device, category, name, kind, time_ns: host work inside all idle gaps, by
      event name, largest first.
    """

    by_category: pd.DataFrame = field(default_factory=pd.DataFrame)
    top_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    activity: pd.DataFrame = field(default_factory=pd.DataFrame)


def idle_gaps(trace: Trace, top: int = 5) -> IdleGaps:
    """The host's work during every device's idle gaps (module docstring), and the `top` largest gaps."""
    gaps = _all_gaps(trace)
    if gaps.empty:
        return IdleGaps()
    ev = trace.events
    on_host = (ev["device"].astype(object).to_numpy() == "cpu") & ev["kind"].isin(_HOST_KINDS).to_numpy()
    host = ev.loc[on_host, ["id", "name", "kind", "ts", "dur", "rank", "thread"]]  # what is read: less to copy
    gaps = gaps.assign(thread=_gap_threads(gaps, ev, host))
    pieces = _self_pieces(host, set(zip(gaps["rank"].tolist(), gaps["thread"].tolist())))
    block = _thread_blocks(pieces)
    p_start, p_end = pieces["start"].to_numpy(), pieces["end"].to_numpy()
    # one int code per (category, name, kind): groups summed by code, in order of first appearance
    key = np.zeros(len(pieces), dtype=np.int64)
    for col in _ACTIVITY_KEYS:
        codes, uniq = pd.factorize(pieces[col].to_numpy())
        key = key * (len(uniq) + 1) + codes
    acts, per_gap = [], []
    for (rank, device, thread), g in gaps.groupby(["rank", "device", "thread"], sort=True):
        g = g.sort_values("start_ns")
        lo, hi = block.get((int(rank), int(thread)), (0, 0))
        inside = _covered((g["start_ns"].to_numpy(), g["end_ns"].to_numpy()), p_start[lo:hi], p_end[lo:hi])
        hit = np.flatnonzero(inside > 0)
        untraced = int(g["dur_ns"].sum() - inside.sum())
        group = pd.factorize(key[lo + hit])[0]
        time_ns = np.zeros(group.max(initial=-1) + 1, dtype=np.int64)
        np.add.at(time_ns, group, inside[hit])
        first = lo + hit[np.unique(group, return_index=True)[1]]  # a row of each group, in group order
        a = pd.DataFrame({c: pd.Series(pieces[c].to_numpy()[first], dtype=object) for c in _ACTIVITY_KEYS})
        a["time_ns"] = time_ns
        if untraced > 0:
            a.loc[len(a)] = ["untraced", "(untraced host time)", "untraced", untraced]
        acts.append(a.assign(rank=int(rank), device=str(device)))
        per_gap.append(_describe(g.nlargest(top, "dur_ns"), pieces.iloc[lo:hi]))
    activity = pd.concat(acts, ignore_index=True)
    activity = (
        activity.groupby(["rank", "device", "category", "name", "kind"], sort=False)["time_ns"].sum().reset_index()
    )
    activity = activity.sort_values(["rank", "device", "time_ns"], ascending=[True, True, False], ignore_index=True)
    idle = gaps.groupby(["rank", "device"])["dur_ns"].sum()
    by = activity.groupby(["rank", "device", "category"], sort=False)["time_ns"].sum().reset_index()
    by["share"] = by["time_ns"] / idle.reindex(pd.MultiIndex.from_frame(by[["rank", "device"]])).to_numpy()
    by["lever"] = by["category"].map(LEVERS)
    by = by.sort_values(["rank", "device", "time_ns"], ascending=[True, True, False], ignore_index=True)
    names = ev.set_index("id")["name"].astype(object)
    described = pd.concat(per_gap, ignore_index=True).nlargest(top, "dur_ns")
    described["next_name"] = names.reindex(described["next_id"]).fillna("").to_numpy()
    cols = [
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "dur_ns",
        "host_ns",
        "sync_ns",
        "other_ns",
        "next_name",
        "activity",
        "category",
    ]
    return IdleGaps(
        by_category=by,
        top_gaps=described[cols].reset_index(drop=True),
        activity=activity[["rank", "device", "category", "name", "kind", "time_ns"]],
    )


def _all_gaps(trace: Trace) -> pd.DataFrame:
    """attribution.device_gaps, plus for ranks without device work the gaps between top-level ops."""
    gaps = device_gaps(trace)
    ev = trace.events
    with_device = set(gaps["rank"].tolist()) | set(ev.loc[ev["device"].astype(str) != "cpu", "rank"].tolist())
    extra = []
    for rank, ops in ev[(ev["kind"] == Kind.OP.value) & ~ev["rank"].isin(with_device)].groupby("rank", observed=True):
        s, e = runs(ops["ts"].to_numpy(), (ops["ts"] + ops["dur"]).to_numpy())
        if len(s) < 2:
            continue
        g0, g1 = e[:-1], s[1:]
        extra.append(
            pd.DataFrame(
                {
                    "rank": int(rank),
                    "device": "cpu",
                    "start_ns": g0,
                    "end_ns": g1,
                    "dur_ns": g1 - g0,
                    "host_ns": g1 - g0,
                    "sync_ns": 0,
                    "other_ns": 0,
                    "next_id": -1,
                    "launch_id": -1,
                }
            )
        )
    out = pd.concat([g for g in (gaps, *extra) if len(g)], ignore_index=True) if extra else gaps
    ints = ["rank", "start_ns", "end_ns", "dur_ns", "host_ns", "sync_ns", "other_ns", "next_id", "launch_id"]
    return out.astype(dict.fromkeys(ints, np.int64)) if len(out) else out


def _gap_threads(gaps: pd.DataFrame, ev: pd.DataFrame, host: pd.DataFrame) -> np.ndarray:
    """The host thread to read for each gap: the one that launched the work ending it, else the
    rank's thread with the most runtime calls (the launching thread), else with the most op time."""
    thread_of = pd.Series(ev["thread"].to_numpy(), index=ev["id"].to_numpy())
    out = thread_of.reindex(gaps["launch_id"].to_numpy()).fillna(-1).to_numpy(dtype=np.int64)
    rt = host[host["kind"] == Kind.RUNTIME.value]
    main = (rt if len(rt) else host).groupby(["rank", "thread"], observed=True)["dur"].sum()
    busiest = main.reset_index().sort_values("dur").drop_duplicates("rank", keep="last").set_index("rank")["thread"]
    fallback = busiest.reindex(gaps["rank"].to_numpy()).fillna(-1).to_numpy(dtype=np.int64)
    return np.where(out >= 0, out, fallback)


def _self_pieces(host: pd.DataFrame, threads: set[tuple[int, int]]) -> pd.DataFrame:
    """The innermost host event at every instant of the threads in `threads` ((rank, thread)),
    as pieces [start, end) with its name, kind and category: each event's self time.

    On a thread, with events in order of (start, longer first), an event's enclosing event is
    the latest one before it that is still running when it starts, each event cut at its
    encloser's end (`clip`): so pieces never overlap, even where the recorded nesting does not
    (clock skew: an event that ends after its parent). An event's pieces are its clipped
    interval minus its children's: [start, first child's start), [a child's end, the next
    one's start), ..., [last child's end, clipped end). Vectorised (_enclosers).
    Columns: rank, thread, name, kind, category, start, end."""
    want = np.array(sorted(threads), dtype=np.int64).reshape(-1, 2)
    code = _pair_codes(
        np.concatenate((host["rank"].to_numpy(), want[:, 0])), np.concatenate((host["thread"].to_numpy(), want[:, 1]))
    )
    rows = np.flatnonzero(np.isin(code[: len(host)], code[len(host) :]))
    thread_code = code[: len(host)][rows]
    ts, dur = host["ts"].to_numpy(dtype=np.int64), host["dur"].to_numpy(dtype=np.int64)
    order = np.lexsort((-dur[rows], ts[rows], thread_code))
    rows, thread_code = rows[order], thread_code[order]  # the rows read, in order: no copy of the frame
    n = len(rows)
    start = ts[rows]
    parent, clip = _enclosers(thread_code, start, start + dur[rows])
    del ts, dur, code
    codes, distinct = distinct_names(host["name"].iloc[rows])
    kind_code, kinds = distinct_names(host["kind"].iloc[rows])  # a handful of kinds: compared once each
    kind = kinds[kind_code]
    is_runtime, is_op = (kind_code == _index(kinds, Kind.RUNTIME.value)), (kind_code == _index(kinds, Kind.OP.value))
    category = _inherit(_own_categories(codes, distinct, is_runtime, is_op), parent)  # CATEGORIES index, -1
    kids = np.flatnonzero(parent >= 0)
    kids = kids[np.lexsort((start[kids], parent[kids]))]  # by encloser, then start
    up = parent[kids]
    first = np.concatenate(([True], up[1:] != up[:-1])) if len(kids) else np.zeros(0, bool)
    last = np.concatenate((up[1:] != up[:-1], [True])) if len(kids) else np.zeros(0, bool)
    # the encloser's piece before each child starts at the previous sibling's end
    before = np.where(first, start[up], np.concatenate(([0], clip[kids][:-1])))
    tail = start.copy()  # each event's last piece starts at its last child's end
    tail[up[last]] = clip[kids[last]]
    row = np.concatenate((up, np.arange(n)))
    s0, e0 = np.concatenate((before, tail)), np.concatenate((start[kids], clip))
    keep = np.flatnonzero(e0 > s0)
    keep = keep[np.lexsort((s0[keep], thread_code[row[keep]]))]  # by thread, then time
    row, s0, e0 = row[keep], s0[keep], e0[keep]
    del keep, kids, up, first, last, before, tail, thread_code
    step = np.array([n.startswith(_STEP_LABEL) for n in distinct] + [False], dtype=bool)[codes]
    cat_of = CATEGORIES.index
    by_kind = np.select(
        [is_runtime, is_op, step], [cat_of("launch"), cat_of("dispatch"), cat_of("untraced")], cat_of("python")
    )
    # copy=False: the columns are fresh arrays of this function, taken as they are
    return pd.DataFrame(
        {
            "rank": host["rank"].to_numpy()[rows[row]],
            "thread": host["thread"].to_numpy()[rows[row]],
            "name": pd.Series(distinct[codes[row]], dtype=object),
            "kind": pd.Series(kind[row], dtype=object),
            "category": pd.Series(
                np.array(CATEGORIES, dtype=object)[np.where(category[row] < 0, by_kind[row], category[row])],
                dtype=object,
            ),
            "start": s0,
            "end": e0,
        },
        copy=False,
    )


def _pair_codes(rank: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """One int64 code per distinct (rank, thread) pair."""
    r, t = pd.factorize(rank)[0].astype(np.int64), pd.factorize(thread)[0].astype(np.int64)
    return r * (t.max(initial=0) + 1) + t


def _enclosers(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(encloser position, clipped end) per event; `thread` codes, `start`, `end` in order of
    thread, start, longer first; positions into that order, -1 at top. The encloser of j is the
    latest i before j on its thread with clip_i > start_j, and clip_j = min(end_j, clip of its
    encloser): the nesting (profiler.model.nesting) of the clipped intervals, which are then
    properly nested. Found by fixed point: nest, clip each interval to its parent's (parents
    first), nest again; only events that end after their parent (clock skew) change, so it
    settles in two or three rounds."""
    parent, clip = np.full(len(start), -1, dtype=np.int64), end.copy()
    for seg in np.split(np.arange(len(start)), np.flatnonzero(np.diff(thread)) + 1) if len(start) else ():
        s, c = start[seg], end[seg]
        while True:
            order = np.lexsort((s - c, s))  # (start, longer first), as nest_sorted wants
            p, depth, _ = nest_sorted(s[order], (c - s)[order])
            up = np.full(len(seg), -1, dtype=np.int64)
            up[order] = np.where(p >= 0, order[np.maximum(p, 0)], -1)
            cut = end[seg].copy()  # from the recorded ends each round: a parent may stop being one
            by_depth = order[np.argsort(depth, kind="stable")]
            levels = np.split(by_depth, np.flatnonzero(np.diff(np.sort(depth, kind="stable"))) + 1)
            for level in levels[1:]:  # parents first; depth 0 has none
                above = cut[up[level]]  # a parent cut before the child starts is no longer its parent
                cut[level] = np.where(above > s[level], np.minimum(cut[level], above), cut[level])
            if np.array_equal(cut, c):
                break
            c = cut
        parent[seg] = np.where(up >= 0, seg[np.maximum(up, 0)], -1)
        clip[seg] = c
    return parent, clip


def _inherit(own: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Each event's category code: its own, else its nearest encloser's that has one (-1: none).
    Pointer jumping: every round looks twice as far up, so rounds ~ log2(depth)."""
    cat, up = own.copy(), parent.copy()
    todo = np.flatnonzero((cat < 0) & (up >= 0))
    while len(todo):
        above = up[todo]
        cat[todo], up[todo] = cat[above], up[above]  # both read before either is written
        todo = todo[(cat[todo] < 0) & (up[todo] >= 0)]
    return cat


def _own_categories(codes: np.ndarray, distinct: np.ndarray, is_runtime: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """The CATEGORIES index an event's own name gives it (-1 when none: it inherits its parent's)."""
    d = pd.Series(distinct, dtype=object)
    is_input = d.str.contains(INPUT_NAMES, regex=True).to_numpy(dtype=bool)[codes]
    call = d.str.contains(SYNC_CALL, regex=True).to_numpy(dtype=bool)[codes]
    op = d.str.contains(SYNC_OP, regex=True).to_numpy(dtype=bool)[codes]
    own = np.full(len(codes), -1, dtype=np.int64)
    own[is_input] = CATEGORIES.index("input")
    own[(is_runtime & call) | (is_op & op)] = CATEGORIES.index("sync")
    return own


def _index(values: np.ndarray, value: str) -> int:
    """The position of `value` in `values`, -2 (matching no code) when absent."""
    at = np.flatnonzero(values == value)
    return int(at[0]) if len(at) else -2


def _thread_blocks(pieces: pd.DataFrame) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, thread) -> the rows [lo, hi) of its pieces (_self_pieces keeps each thread's
    pieces together, in time order)."""
    if len(pieces) == 0:
        return {}
    r, t = pieces["rank"].to_numpy(), pieces["thread"].to_numpy()
    lo = np.flatnonzero(np.concatenate(([True], (r[1:] != r[:-1]) | (t[1:] != t[:-1]))))
    hi = np.append(lo[1:], len(pieces))
    return {(int(r[a]), int(t[a])): (int(a), int(b)) for a, b in zip(lo, hi)}


def _describe(g: pd.DataFrame, p: pd.DataFrame) -> pd.DataFrame:
    """For each gap of `g` (a few): the host pieces of `p` (one thread's, in time order) inside
    it (exact overlaps), its largest three as text, and the category filling most of it
    (untraced when no event does). Only the pieces between the first that ends after the gap
    starts and the last that starts before it ends are read."""
    activity, category = [], []
    start, end = p["start"].to_numpy(), p["end"].to_numpy()
    name, cat = p["name"].to_numpy(), p["category"].to_numpy()
    reach = np.maximum.accumulate(end) if len(end) else end  # sorted, whatever the pieces' ends
    for a, b, dur in zip(g["start_ns"].to_numpy(), g["end_ns"].to_numpy(), g["dur_ns"].to_numpy()):
        lo, hi = int(np.searchsorted(reach, a, "right")), int(np.searchsorted(start, b, "left"))
        inside = np.minimum(end[lo:hi], b) - np.maximum(start[lo:hi], a)
        hit = lo + np.flatnonzero(inside > 0)
        t = inside[hit - lo].tolist()
        names = _sums(name[hit], t)
        top3 = sorted(names.items(), key=lambda kv: -kv[1])[:3]  # stable: ties keep the first seen
        activity.append("; ".join(f"{n} ({fmt_ns(x)})" for n, x in top3) or "(no host event recorded)")
        cats = _sums(cat[hit], t)
        untraced = int(dur) - sum(cats.values())
        largest = max(cats.values(), default=0)
        chosen = next((c for c, x in cats.items() if x == largest), None)  # the first largest
        category.append(str(chosen) if cats and largest >= untraced else "untraced")
    return g.assign(activity=activity, category=category)


def _sums(keys: np.ndarray, values: list[int]) -> dict:
    """values summed per key, keys in order of first appearance (a few pieces: plain Python)."""
    out: dict = {}
    for k, v in zip(keys.tolist(), values):
        out[k] = out.get(k, 0) + v
    return out
