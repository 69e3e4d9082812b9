"""profiler.overlap: a pass in a forked child gives what it gives in line, or runs in line."""

from __future__ import annotations

import os
import threading

import pandas as pd
import pytest

import profiler.api as api
from profiler.overlap import in_background
from tests.conftest import real_trace


@pytest.fixture
def may_fork(monkeypatch):
    """Forking on: two jobs, and a test runner's own threads (pytest-xdist's) not counted."""
    monkeypatch.setenv("PERF_JOBS", "2")
    monkeypatch.setattr(threading, "active_count", lambda: 1)


def test_result_comes_from_the_child(may_fork):
    parent = os.getpid()
    join = in_background(lambda: (os.getpid(), pd.DataFrame({"x": [1, 2, 3]})))
    pid, df = join()
    assert pid != parent  # computed in the forked child
    assert df["x"].tolist() == [1, 2, 3]


def test_child_failure_is_redone_here(may_fork):
    parent = os.getpid()

    def fn():
        if os.getpid() != parent:
            raise RuntimeError("child broke")
        return "here"

    assert in_background(fn)() == "here"

    def always():
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):  # the error of the pass surfaces in the parent
        in_background(always)()


def test_in_line_when_off_threaded_or_not_worth_it(monkeypatch):
    fn = lambda: os.getpid()  # noqa: E731
    if threading.active_count() > 1:
        pytest.skip("the test runner has threads of its own")
    monkeypatch.setenv("PERF_JOBS", "1")
    assert in_background(fn) is fn
    monkeypatch.setenv("PERF_JOBS", "2")
    assert in_background(fn, worth_it=False) is fn
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert in_background(fn) is fn  # a forked child of a threaded process could inherit a held lock
    finally:
        stop.set()
        t.join()


def test_critical_path_same_in_a_child(monkeypatch, may_fork):
    trace = api.load_trace(real_trace("b200_eager"))
    monkeypatch.setenv("PERF_JOBS", "1")
    here = api.analyze(trace, sections=("critical_path",)).critical_path
    monkeypatch.setenv("PERF_JOBS", "2")
    monkeypatch.setattr(api, "_BACKGROUND_EVENTS", 0)
    monkeypatch.setattr(os, "fork", counting(os.fork, forks := []))
    forked = api.analyze(trace, sections=("critical_path",)).critical_path
    assert len(forks) == 1 and len(here) == len(forked) == len(trace.ranks)
    for a, b in zip(here, forked):
        assert (a.length_ns, a.work_ns, a.verdict) == (b.length_ns, b.work_ns, b.verdict)
        pd.testing.assert_frame_equal(a.segments, b.segments)
        pd.testing.assert_frame_equal(a.by_class, b.by_class)


def counting(fn, calls: list):
    def wrapper(*a):
        calls.append(1)
        return fn(*a)
    return wrapper


@pytest.mark.parametrize("folder", ["vllm_graphs_mi300x", "dlrm_8rank_v100"])
def test_path_classed_afterwards_is_the_same(folder):
    # the forked pass computes the path before the units are classified; with_units then
    # classes its unit work: the same result as computing it with the units
    from analysis.critical_path import critical_path, with_units

    trace = api.load_trace(real_trace(folder))
    units = api.analyze(trace, sections=("roofline",)).units
    for rank in trace.ranks:
        at_once, unclassed = critical_path(trace, rank, units), critical_path(trace, rank)
        assert (at_once.segments["class"] != unclassed.segments["class"]).any()  # the units do change classes
        later = with_units(unclassed, units)
        fields = ("rank", "length_ns", "work_ns", "wall_ns", "on_host_ns", "on_device_ns", "waiting_ns", "verdict")
        assert [getattr(later, f) for f in fields] == [getattr(at_once, f) for f in fields]
        pd.testing.assert_frame_equal(later.segments, at_once.segments)
        pd.testing.assert_frame_equal(later.by_class, at_once.by_class)
