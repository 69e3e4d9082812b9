"""Compile-time phases of torch.compile, from Dynamo's chromium events, as `compile_pass` events.

Dynamo and Inductor time their steps with `dynamo_timed`, which logs a begin ('B') and an end
('E') chromium event per step to the structured log, stamped with `time.time_ns()` (written as
microseconds, a float). That is the clock the PyTorch profiler writes too (Kineto's
`baseTimeNanoseconds` + ts), so compile passes and runtime events share one timeline. The float
microseconds limit the precision to about 0.25 us at today's epoch (2**-2 us spacing near 1.8e15).

Each step is mapped onto a phase (`PHASES`) by its name; a step's self time (its duration less
that of the steps nested in it) goes to its phase, so the phase times of one compile sum to the
compile's wall time.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from collectors.torch_compile.tlparse import Log
from profiler.model.schema import Kind

#: Phases, in pipeline order. 'other' holds steps no rule names (and the outer wrappers' self time
#: that is not Dynamo's: gc, logging).
PHASES = (
    "dynamo_tracing",
    "guards",
    "aot_autograd",
    "inductor_lowering",
    "scheduling_fusion",
    "codegen",
    "kernel_compile",
    "autotune",
    "cache",
    "other",
)

#: First matching rule wins; names are dynamo_timed keys / phase names of torch 2.13.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (p, re.compile(rx))
    for p, rx in (
        ("autotune", r"autotun|benchmark|do_bench|precompile_config"),
        ("cache", r"[Cc]ache|TritonBundler|CompiledArtifact"),
        ("guards", r"build_guards|load_guards"),
        ("scheduling_fusion", r"^Scheduler\.(__init__|fused_nodes)$"),
        (
            "codegen",
            r"^(code_gen|GraphLowering\.codegen\w*|Scheduler\.codegen|\w*Wrapper\w*\.generate|generate_kernel_code\w*)$",
        ),
        (
            "kernel_compile",
            r"compile_file|async_compile|load_by_key_path|triton_compile|aoti_|fatbin|precompile_header",
        ),
        (
            "inductor_lowering",
            (
                r"^(inductor_compile|fx_codegen_and_compile|additional_fake_tensor_prop|GraphLowering\.\w+"
                r"|_recursive_(pre|post)_grad_passes|pass\.(pre|post)_grad_passes\..*|inductor_import)$"
            ),
        ),
        (
            "aot_autograd",
            (
                r"^(backend_compile|create_aot_dispatcher_function|aot_\w+|_recursive_joint_graph_passes"
                r"|pass\.joint_graph_passes\..*|min_cut_rematerialization_partition|compile_fx\.<locals>\.\w+"
                r"|entire_backward_compile|backward)$"
            ),
        ),
        (
            "dynamo_tracing",
            (
                r"^(dynamo|entire_frame_compile|compile_attempt_\d+|bytecode_tracing|fullgraph_capture"
                r"|insert_deferred_runtime_asserts|bytecode_hooks_\d+|compile_inner)$"
            ),
        ),
    )
)

#: |ts| in µs below which ns (ts * 1000), and a duration between two of them, fit an int64
_MAX_US = 2**62 / 1000
PHASE_COLUMNS = ["compile_id", "name", "phase", "start_ns", "dur_ns", "self_ns", "depth", "parent", "thread"]


def phase_of(name: str) -> str:
    """The phase of one dynamo_timed step name ('other' when no rule names it)."""
    for phase, rx in _RULES:
        if rx.search(name):
            return phase
    return "other"


def phase_table(log: Log) -> pd.DataFrame:
    """One row per timed compile step.

    Columns: compile_id ('frame/compile', '' if none), name (the dynamo_timed step),
    phase (one of PHASES), start_ns (time.time_ns clock, ns), dur_ns, self_ns (dur less the
    steps nested directly in it, ns), depth (0 outermost), parent (row index of the enclosing
    step, -1 at top level), thread (the logging thread: steps nest per thread; a worker
    thread's steps, e.g. async kernel compiles, overlap the main thread's).
    Steps begun but never ended are counted in `log.problems`.
    """
    rows: list[list] = []
    stacks: dict[int, list[int]] = {}  # per logging thread, row indexes of its open steps
    last_cid = ""
    for r in log.of("chromium_event"):
        ev = r.json_payload()
        if not isinstance(ev, dict) or ev.get("ph") not in ("B", "E") or not isinstance(ev.get("ts"), (int, float)):
            continue
        us = float(ev["ts"])
        if not -_MAX_US < us < _MAX_US:  # the ns would not fit the int64 column (or it is not finite)
            log.problems.add("compile events with a time past int64 nanoseconds skipped")
            continue
        name, ts = str(ev.get("name", "")), round(us * 1000)  # us -> ns
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        cid = r.compile_id or str(args.get("compile_id") or "")
        cid = "" if cid == "None" else cid
        stack = stacks.setdefault(r.thread, [])
        if not cid:  # a step on a worker thread (async compile) belongs to the compile under way
            cid = rows[stack[-1]][0] if stack else last_cid
        last_cid = cid or last_cid
        if ev["ph"] == "B":
            rows.append([cid, name, phase_of(name), ts, -1, 0, len(stack), stack[-1] if stack else -1, r.thread])
            stack.append(len(rows) - 1)
            continue
        # 'E': close the innermost open step of that name; steps left open inside it never ended
        # (as ChromiumEventLogger itself repairs overlapping events)
        while stack and rows[stack[-1]][1] != name:
            log.problems.add("compile steps without an end event dropped")
            rows[stack.pop()][4] = -2
        if not stack:
            log.problems.add("compile end events without a begin skipped")
            continue
        i = stack.pop()
        rows[i][4] = max(ts - rows[i][3], 0)
    for i in (i for stack in stacks.values() for i in stack):
        rows[i][4] = -2
        log.problems.add("compile steps without an end event dropped")
    df = pd.DataFrame(rows, columns=PHASE_COLUMNS)
    if df.empty:
        return df.astype(
            {
                "start_ns": "int64",
                "dur_ns": "int64",
                "self_ns": "int64",
                "depth": "int64",
                "parent": "int64",
                "thread": "int64",
            }
        )
    keep = df["dur_ns"] >= 0
    # children of a dropped step lose their parent (-1) rather than point at a missing row
    df.loc[~df["parent"].isin(np.flatnonzero(keep.to_numpy())) & (df["parent"] >= 0), "parent"] = -1
    child = df[keep & (df["parent"] >= 0)].groupby("parent")["dur_ns"].sum()
    df["self_ns"] = (df["dur_ns"] - child.reindex(df.index, fill_value=0)).clip(lower=0)
    df = df[keep]
    return df.astype(
        {
            "start_ns": "int64",
            "dur_ns": "int64",
            "self_ns": "int64",
            "depth": "int64",
            "parent": "int64",
            "thread": "int64",
        }
    )


def phase_summary(phases: pd.DataFrame) -> pd.DataFrame:
    """Self time per (compile_id, phase), in pipeline order.

    Columns: compile_id, phase, time_ns (sum of self_ns), steps (count), share (of the
    compile's total self time, 0..1).
    """
    if phases.empty:
        return pd.DataFrame(columns=["compile_id", "phase", "time_ns", "steps", "share"])
    g = (
        phases.groupby(["compile_id", "phase"], sort=False)
        .agg(time_ns=("self_ns", "sum"), steps=("name", "size"))
        .reset_index()
    )
    g["share"] = g["time_ns"] / g.groupby("compile_id")["time_ns"].transform("sum").replace(0, np.nan)
    g["order"] = g["phase"].map({p: i for i, p in enumerate(PHASES)})
    return g.sort_values(["compile_id", "order"], kind="stable").drop(columns="order").reset_index(drop=True)


def compile_events(phases: pd.DataFrame, rank: int = 0, first_id: int = 0) -> pd.DataFrame:
    """The steps as rows of a Trace's events table (profiler.model.schema.EVENT_COLUMNS).

    kind 'compile_pass', source 'compiler', track 'rank<r>/compiler', device 'cpu', cat the
    phase; ids from `first_id`, parent_id/depth from the steps' nesting; ts/dur in ns.
    """
    n = len(phases)
    ids = np.arange(first_id, first_id + n, dtype=np.int64)
    id_of = dict(zip(phases.index.tolist(), ids.tolist()))  # `parent` holds row labels of the table
    parent_id = np.array([id_of.get(p, -1) for p in phases["parent"].tolist()], dtype=np.int64)

    def cat(values) -> pd.Categorical:
        return pd.Categorical(np.asarray(values, dtype=object))

    # the busiest thread is the compiler track; worker threads get their own rows beside it
    threads = phases["thread"].value_counts().index.tolist() if n else []
    label = {t: f"rank{rank}/compiler" if k == 0 else f"rank{rank}/compiler/worker{k}" for k, t in enumerate(threads)}
    track = [label[t] for t in phases["thread"].tolist()]
    return pd.DataFrame(
        {
            "id": ids,
            "name": cat(phases["name"].to_numpy(dtype=object)),
            "cat": cat(phases["phase"].to_numpy(dtype=object)),
            "kind": cat([Kind.COMPILE_PASS.value] * n),
            "ts": phases["start_ns"].to_numpy(dtype=np.int64),
            "dur": phases["dur_ns"].to_numpy(dtype=np.int64),
            "rank": np.full(n, rank, dtype=np.int32),
            "device": cat(["cpu"] * n),
            "track": cat(track),
            "stream": np.full(n, -1, dtype=np.int64),
            "thread": np.full(n, -1, dtype=np.int64),
            "parent_id": parent_id,
            "depth": phases["depth"].to_numpy().astype(np.int16),
            "correlation": np.full(n, -1, dtype=np.int64),
            "external_id": np.full(n, -1, dtype=np.int64),
            "op_id": np.full(n, -1, dtype=np.int64),
            "step": np.full(n, -1, dtype=np.int32),
            "source": cat(["compiler"] * n),
            **{c: cat([""] * n) for c in ("shapes", "dtypes", "concrete", "collective", "msg_dtype")},
            "msg_in_nelems": np.full(n, -1, dtype=np.int64),
            "msg_out_nelems": np.full(n, -1, dtype=np.int64),
            "group_size": np.full(n, -1, dtype=np.int32),
            "bytes_recorded": np.full(n, -1, dtype=np.int64),
        }
    )


def phases_from_events(events: pd.DataFrame) -> pd.DataFrame:
    """The phase table (PHASE_COLUMNS) rebuilt from a Trace's `compile_pass` events, e.g. a trace
    file read back: phase = the event's cat when it names a phase (with_compile_events writes it
    so), else `phase_of(name)`; nesting per track from the intervals (sorted by start, longer
    first; an event's parent is the innermost open one that contains it), self_ns as in
    `phase_table`; thread = the track's code; compile_id '' (the events do not carry it)."""
    ev = events[events["kind"].astype(str) == Kind.COMPILE_PASS.value]
    if ev.empty:
        return phase_table(Log())
    ev = ev.assign(_track=ev["track"].astype(str)).sort_values(
        ["_track", "ts", "dur"], ascending=[True, True, False], kind="stable"
    )
    names, cats = ev["name"].astype(str).tolist(), ev["cat"].astype(str).tolist()
    starts, durs, tracks = ev["ts"].tolist(), ev["dur"].tolist(), ev["_track"].tolist()
    codes = {t: i for i, t in enumerate(dict.fromkeys(tracks))}
    rows: list[list] = []
    stack: list[int] = []
    for i, (name, cat, ts, dur, track) in enumerate(zip(names, cats, starts, durs, tracks)):
        if i and track != tracks[i - 1]:
            stack = []
        while stack and starts[stack[-1]] + durs[stack[-1]] < ts + dur:  # ended before this one does: not its parent
            stack.pop()
        rows.append(
            [
                "",
                name,
                cat if cat in PHASES else phase_of(name),
                ts,
                dur,
                0,
                len(stack),
                stack[-1] if stack else -1,
                codes[track],
            ]
        )
        stack.append(i)
    df = pd.DataFrame(rows, columns=PHASE_COLUMNS)
    child = df[df["parent"] >= 0].groupby("parent")["dur_ns"].sum()
    df["self_ns"] = (df["dur_ns"] - child.reindex(df.index, fill_value=0)).clip(lower=0)
    return df.astype(
        {
            "start_ns": "int64",
            "dur_ns": "int64",
            "self_ns": "int64",
            "depth": "int64",
            "parent": "int64",
            "thread": "int64",
        }
    )
