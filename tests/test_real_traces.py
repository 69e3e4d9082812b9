"""Every real trace in tests/data/traces loads, validates, and matches numbers derived independently.

The expected numbers come from tests/real_traces/derive_expected.py (standard library only,
Decimal arithmetic); rerun it to check them. Definitions are in its docstring.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from analysis.busy import device_time
from analysis.intervals import union_length
from analysis.top import top_kernels
from profiler import load_trace
from tests.conftest import TRACES
from tests.real_traces.expected import EXPECTED

FOLDERS = sorted(EXPECTED)
KIND_COUNTS = {"kernels": "kernel", "memcpy": "memcpy", "memset": "memset", "ops": "op", "runtime": "runtime"}


@functools.cache
def loaded(folder: str):
    files = sorted((TRACES / folder).glob("*.json.gz"))
    return load_trace(files[0] if len(files) == 1 else TRACES / folder)


def per_rank(folder: str):
    """(rank, expected numbers) for each file of the folder."""
    return sorted((v["rank"], v) for v in EXPECTED[folder].values())


def test_every_trace_folder_is_covered():
    present = {p.name for p in TRACES.iterdir() if p.is_dir() and p.name != "LICENSES"}
    assert present == set(FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS)
def test_loads_and_validates(folder):
    t = loaded(folder)
    t.validate()
    assert t.ranks == [r for r, _ in per_rank(folder)]


@pytest.mark.parametrize("folder", FOLDERS)
def test_counts_per_rank(folder):
    ev = loaded(folder).events
    for rank, want in per_rank(folder):
        mine = ev[ev["rank"] == rank]
        assert len(mine) == want["events"], rank
        kinds = mine["kind"].value_counts()
        for key, kind in KIND_COUNTS.items():
            # runtime: cuda_runtime + cuda_driver (+ legacy Runtime) are all kind runtime
            assert kinds.get(kind, 0) == want[key], (rank, key)


@pytest.mark.parametrize("folder", FOLDERS)
def test_busy_and_span_per_device(folder):
    dt = device_time(loaded(folder))
    gpu = dt[dt["device"] != "cpu"]
    got = {
        (int(r), d): (int(b), int(w))
        for r, d, b, w in gpu[["rank", "device", "busy_ns", "window_ns"]].itertuples(index=False)
    }
    want = {(rank, d): (v["busy_ns"][d], v["span_ns"][d]) for rank, v in per_rank(folder) for d in v["busy_ns"]}
    assert got == want


@pytest.mark.parametrize("folder", FOLDERS)
def test_busy_equals_an_independent_union(folder):
    # The same union, computed by a plain sweep over sorted Python ints instead of numpy.
    t = loaded(folder)
    ev = t.events[t.events["kind"].isin(["kernel", "memcpy", "memset"])]
    for (rank, device), g in ev.groupby(["rank", "device"], observed=True):
        spans = sorted(zip(g["ts"].tolist(), (g["ts"] + g["dur"]).tolist()))
        total, cur_s, cur_e = 0, None, None
        for s, e in spans:
            if cur_e is None or s > cur_e:
                total += 0 if cur_e is None else cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        total += cur_e - cur_s
        assert union_length(g["ts"].to_numpy(), (g["ts"] + g["dur"]).to_numpy()) == total


@pytest.mark.parametrize("folder", FOLDERS)
def test_top_five_kernels(folder):
    t = loaded(folder)
    for rank, want in per_rank(folder):
        mine = t.events[t.events["rank"] == rank]
        sub = type(t)(mine, t.counters, t.flows.iloc[0:0], t.devices, t.metadata, t.problems)
        top = top_kernels(sub, busy_ns=1, n=None)
        top = top[top["kind"] == "kernel"].head(5)
        got = [[n, int(c), int(tot)] for n, c, tot in top[["name", "count", "total_ns"]].itertuples(index=False)]
        assert got == want["top_kernels"], rank


@pytest.mark.parametrize("folder", FOLDERS)
def test_links_are_sane(folder):
    t = loaded(folder)
    ev = t.events
    device_work = ev["kind"].isin(["kernel", "memcpy", "memset"]).to_numpy()
    launches = t.flows[t.flows["kind"] == "launch"]
    assert len(launches) <= device_work.sum()
    assert launches["dst"].is_unique  # each kernel has at most one launching call
    # a launch precedes (or starts with) the work it launched
    ts = ev.set_index("id")["ts"]
    assert (ts.loc[launches["src"]].to_numpy() <= ts.loc[launches["dst"]].to_numpy()).all()
    # parents enclose their children's start
    has = ev["parent_id"].to_numpy() >= 0
    parent_ts = ts.loc[ev["parent_id"].to_numpy()[has]].to_numpy()
    assert (parent_ts <= ev["ts"].to_numpy()[has]).all()
    assert np.isin(ev["depth"].to_numpy()[~has], [0]).all()
