"""`perf analyze DIR --engine dask` (profiler/api/engine_dask.py) on LocalClusters of real worker
processes: the same report as the local engine, a worker killed mid-run, an unreadable rank file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.cli import app
from tests.conftest import real_trace

distributed = pytest.importorskip("distributed")

DLRM = real_trace("dlrm_8rank_v100")
runner = CliRunner()


def _three_ranks(tmp_path: Path) -> Path:
    d = tmp_path / "ranks"
    d.mkdir()
    for f in sorted(DLRM.iterdir())[:3]:
        shutil.copy(f, d / f.name)
    return d


def test_dask_report_is_the_local_report():
    local = runner.invoke(app, ["analyze", str(DLRM), "--json"])
    dask = runner.invoke(app, ["analyze", str(DLRM), "--json", "--engine", "dask", "--workers", "2"])
    assert local.exit_code == 0 and dask.exit_code == 0, dask.output
    a, b = json.loads(local.stdout), json.loads(dask.stdout)
    assert len(b["collectives"]) == 8 and b["stragglers"][0]["rank"] == 7  # not vacuous: cross-rank is there
    assert a == b


def test_unreadable_rank_file_is_a_warning_then_strict_an_error(tmp_path: Path):
    d = _three_ranks(tmp_path)
    bad = d / "worker9_step_12.pt.trace.json.gz"
    data = sorted(DLRM.iterdir())[3].read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # a truncated gzip
    r = runner.invoke(app, ["analyze", str(d), "--json", "--engine", "dask", "--workers", "2"])
    assert r.exit_code == 0, r.output
    assert f"perf: warning: {bad}:" in r.stderr and "left out" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["trace"]["ranks"] == [0, 1, 2] and len(doc["collectives"]) == 8
    r = runner.invoke(app, ["analyze", str(d), "--engine", "dask", "--workers", "2", "--strict"])
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"perf: {bad}:") and "--strict" in lines[0], r.stderr


class KillOnTask(distributed.WorkerPlugin):
    """Kills its worker process as a task starts executing: once (a marker file remembers it), or
    every time (`always`)."""

    def __init__(self, marker: str, always: bool = False):
        self.marker, self.always = marker, always

    def transition(self, key, start, finish, **kwargs):
        if finish == "executing" and (self.always or not os.path.exists(self.marker)):
            Path(self.marker).touch()
            os._exit(1)


@pytest.fixture
def cluster():
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        c = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
        )
    yield c
    c.close()


def test_a_killed_worker_is_retried_and_the_run_completes(tmp_path: Path, cluster):
    from profiler.api import load_ranks
    from profiler.api.ranks import rank_instances
    from profiler.api import load_trace

    d = _three_ranks(tmp_path)
    marker = tmp_path / "killed"
    with distributed.Client(cluster) as client:
        client.register_plugin(KillOnTask(str(marker)))
        got = load_ranks(d, scheduler=cluster.scheduler_address)
    assert marker.exists()  # a worker did die mid-run
    assert got.trace.ranks == [0, 1, 2] and not got.skipped
    local = load_trace(d)
    assert got.trace.events.groupby("rank").size().tolist() == local.events.groupby("rank").size().tolist()
    assert got.instances.equals(rank_instances(local))


def test_workers_that_keep_dying_fail_with_one_line_naming_the_ranks(tmp_path: Path, cluster):
    d = _three_ranks(tmp_path)
    with distributed.Client(cluster) as client:
        client.register_plugin(KillOnTask(str(tmp_path / "killed"), always=True))
        r = runner.invoke(app, ["analyze", str(d), "--engine", "dask", "--scheduler", cluster.scheduler_address])
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "workers died running 3 rank file(s)" in lines[0], r.stderr
    assert all(f.name in lines[0] for f in d.iterdir())
