"""Invariants of the vectorised interval code against plain reference implementations."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.intervals import union_length
from collectors.kineto.link import _nest_thread

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
    parent_pos, depth, poking = _nest_thread(start, dur)
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
