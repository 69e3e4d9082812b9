"""Linux `perf stat` around a CPU workload (perf profile --counters): its CSV read into the counters
table, a real recording where the perf tool exists, and a clean skip where it does not."""

from __future__ import annotations

import math

import pytest

from collectors.counters import read_counters
from collectors.counters.perf_stat import find_linux_perf, record

#: `perf stat -x, -o FILE -e ... -p PID` as perf 6.1 writes it on a VM without a hardware PMU
#: (perf-stat(1), "CSV FORMAT": value, unit, event, run time, % counted, metric, metric unit).
SAMPLE = """# started on Thu Dec  3 15:39:52 2026

280.88,msec,task-clock,280880253,100.00,0.273,CPUs utilized
12,,context-switches,280880253,100.00,42.723,/sec
1534,,page-faults,280880253,100.00,5.461,K/sec
<not supported>,,cycles,0,100.00,,
"""


def test_perf_stat_csv_reads_every_event(tmp_path):
    path = tmp_path / "run.perfstat.csv"
    path.write_text(SAMPLE)
    kc = read_counters(path)
    assert kc.source == "perf-stat" and len(kc.launches) == 1
    r = kc.rows.set_index("counter")
    assert list(r.index) == ["task-clock", "context-switches", "page-faults", "cycles"]
    assert r.loc["task-clock", "value"] == pytest.approx(280.88e6)  # 280.88 msec of CPU time, in ns
    assert (r.loc["task-clock", "unit"], r.loc["task-clock", "unit_recorded"]) == ("ns", "msec")
    assert r.loc["page-faults", "value"] == 1534
    assert math.isnan(r.loc["cycles", "value"]) and r.loc["cycles", "text"] == "<not supported>"


@pytest.mark.skipif(find_linux_perf() is None, reason="Linux perf (perf-events tool) not on PATH")
def test_record_counts_this_process(tmp_path):
    out = tmp_path / "x.perfstat.csv"
    with record(out, events=("task-clock", "page-faults")):
        sum(i * i for i in range(2_000_000))  # ~0.1 s of CPU on this thread
    kc = read_counters(out)
    r = kc.rows.set_index("counter")
    assert r.loc["task-clock", "value"] > 1e6  # more than a millisecond of CPU time counted


def test_profile_counters_skip_cleanly_without_the_tool(monkeypatch, tmp_path, capsys):
    import profiler.api as api
    from profiler.cli.profile import _cpu_counters

    monkeypatch.setattr(api, "linux_perf", lambda: None)
    stat, ctx = _cpu_counters(True, tmp_path / "t.json.gz", False)
    assert stat is None
    with ctx:
        pass
    assert "--counters skipped: Linux perf" in capsys.readouterr().err


def test_our_own_perf_script_is_not_taken_for_linux_perf(monkeypatch, tmp_path):
    fake = tmp_path / "perf"
    fake.write_text("#!/bin/sh\necho 0.1.0\n")  # this suite's console script prints its version
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_linux_perf() is None
