"""Invariants of the vectorised interval code against plain reference implementations."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.intervals import union_length
from profiler.model.nesting import nest_sorted

intervals = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=60)


@given(intervals)
def test_union_length_matches_counting_covered_points(ivs):
    start = np.array([s for s, _ in ivs], dtype=np.int64)
    end = np.array([s + d for s, d in ivs], dtype=np.int64)
    covered = set()
    for s, e in zip(start.tolist(), end.tolist()):
        covered.update(range(s, e))  # half-open [s, e) at 1-unit resolution
    assert union_length(start, end) == len(covered)


@st.composite
def nested(draw, lo=0, hi=1000, depth=0):
    """Properly nested intervals (a random call tree) inside [lo, hi)."""
    out = []
    t = lo
    while t < hi and len(out) < 6 and draw(st.booleans()):
        s = draw(st.integers(t, hi))
        e = draw(st.integers(s, hi))
        out.append((s, e - s))
        if depth < 4 and e > s:
            out += draw(nested(s, e, depth + 1))
        t = e if e > s else e + 1
    return out


def reference_nesting(ivs):
    """Stack walk over (start, -dur) order: the textbook algorithm, one event at a time."""
    order = sorted(range(len(ivs)), key=lambda i: (ivs[i][0], -ivs[i][1], i))
    parent, depth, stack = {}, {}, []
    for i in order:
        s, d = ivs[i]
        while stack and ivs[stack[-1]][0] + ivs[stack[-1]][1] <= s:  # top ended: not a parent
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        depth[i] = len(stack)
        stack.append(i)
    return order, parent, depth


@settings(max_examples=300)
@given(nested())
def test_vectorised_nesting_matches_stack_walk(ivs):
    order, ref_parent, ref_depth = reference_nesting(ivs)
    start = np.array([ivs[i][0] for i in order], dtype=np.int64)
    dur = np.array([ivs[i][1] for i in order], dtype=np.int64)
    parent_pos, depth, poking = nest_sorted(start, dur)
    got_parent = {order[k]: (order[p] if p >= 0 else -1) for k, p in enumerate(parent_pos.tolist())}
    got_depth = {order[k]: d for k, d in enumerate(depth.tolist())}
    assert got_depth == ref_depth
    assert got_parent == ref_parent
    assert poking == 0


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 200), st.integers(0, 40)), max_size=80))
def test_grouped_union_equals_union_per_group(rows):
    from analysis.intervals import grouped_union_length

    g = np.array([r[0] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = s + np.array([r[2] for r in rows], dtype=np.int64)
    got = grouped_union_length(g, s, e).to_dict()
    want = {int(k): union_length(s[g == k], e[g == k]) for k in np.unique(g)}
    assert got == want


def reference_enclosers(start, end):
    """The stack sweep idle_gaps used before it was vectorised: an event's encloser is the top
    of the stack of events still running (clipped to their encloser) when it starts."""
    parent, clip, stack = [-1] * len(start), list(end), []
    for j, s in enumerate(start):
        while stack and clip[stack[-1]] <= s:
            stack.pop()
        if stack:
            parent[j], clip[j] = stack[-1], min(end[j], clip[stack[-1]])
        stack.append(j)
    return parent, clip


@settings(max_examples=500)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 120), st.integers(0, 40)), max_size=60))
def test_enclosers_match_the_stack_sweep_even_where_events_poke_out(rows):
    """Random intervals on up to three threads, overlapping at will (clock skew): the
    vectorised fixed point (nest, clip, nest again) gives the sweep's enclosers and clipped
    ends, and the self-time pieces tile the union of the events without overlap."""
    from analysis.idle_gaps import _enclosers

    rows.sort(key=lambda r: (r[0], r[1], -r[2]))
    thread = np.array([r[0] for r in rows], dtype=np.int64)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    end = start + np.array([r[2] for r in rows], dtype=np.int64)
    parent, clip = _enclosers(thread, start, end)
    want_parent, want_clip = [], []
    for t in sorted(set(thread.tolist())):
        on = np.flatnonzero(thread == t)
        p, c = reference_enclosers(start[on].tolist(), end[on].tolist())
        want_parent += [int(on[x]) if x >= 0 else -1 for x in p]
        want_clip += c
    assert parent.tolist() == want_parent
    assert clip.tolist() == want_clip


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 120), st.integers(0, 40)), max_size=50))
def test_self_pieces_tile_the_busy_time_of_a_thread(rows):
    """Each instant a thread is inside some (clipped) event belongs to exactly one piece."""
    import pandas as pd

    from analysis.idle_gaps import _self_pieces

    n = len(rows)
    host = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "name": pd.Categorical([f"f{i % 5}" for i in range(n)]),
            "kind": pd.Categorical(["python"] * n),
            "ts": np.array([r[0] for r in rows], dtype=np.int64),
            "dur": np.array([r[1] for r in rows], dtype=np.int64),
            "rank": np.zeros(n, dtype=np.int32),
            "thread": np.ones(n, dtype=np.int64),
        }
    )
    pieces = _self_pieces(host, {(0, 1)})
    covered = [0] * 200
    for s, e in zip(pieces["start"].tolist(), pieces["end"].tolist()):
        for t in range(s, e):
            covered[t] += 1
    order = sorted(range(n), key=lambda i: (rows[i][0], -rows[i][1], i))
    _, clip = reference_enclosers([rows[i][0] for i in order], [rows[i][0] + rows[i][1] for i in order])
    busy = set()  # an event that pokes out of its encloser counts up to the encloser's end
    for i, c in zip(order, clip):
        busy.update(range(rows[i][0], c))
    assert {t for t, c in enumerate(covered) if c} == busy
    assert max(covered, default=0) <= 1
