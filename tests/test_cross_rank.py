"""Cross-rank analysis (analysis.cross_rank) on the real DLRM 8-rank set and on synthetic sets
derived from one of its ranks with a planted straggler (tests/rank_sets.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.api import analyze, load_trace
from profiler.cli import app
from tests.conftest import real_trace
from tests.rank_sets import COLLECTIVE_KERNEL, source_doc, write_rank_set

DLRM = real_trace("dlrm_8rank_v100")


@pytest.fixture(scope="module")
def dlrm():
    return analyze(load_trace(DLRM), sections=("ranks",))


def _kernel_starts_ends() -> dict[int, list[tuple[int, int]]]:
    """Independent of the reader: each rank's NCCL kernels (start, end) in µs, straight from the JSON."""
    out = {}
    for f in sorted(DLRM.iterdir()):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        ks = sorted(
            (e["ts"], e["ts"] + e["dur"])
            for e in doc["traceEvents"]
            if e.get("cat") == "kernel" and e["name"].startswith(COLLECTIVE_KERNEL)
        )
        out[doc["distributedInfo"]["rank"]] = ks
    return out


def test_dlrm_collectives_match_the_raw_kernels(dlrm):
    raw = _kernel_starts_ends()
    c = dlrm.collectives
    assert len(c) == 8 and (c["ranks"] == 8).all()  # 8 NCCL kernels on each of the 8 ranks
    for i, row in enumerate(c.itertuples(index=False)):
        starts = [raw[r][i][0] for r in range(8)]
        ends = [raw[r][i][1] for r in range(8)]
        assert row.wait_ns == (max(starts) - min(starts)) * 1000
        assert row.transfer_ns == (max(ends) - max(starts)) * 1000
        assert row.last_rank == max(range(8), key=lambda r: (starts[r], r))
    # instance 0: rank 1 starts its SendRecv kernel at ...424306 µs, rank 7 last at ...431930,
    # all end by ...431941: wait 7,624 µs, transfer 11 µs
    assert (c["wait_ns"].iat[0], c["transfer_ns"].iat[0]) == (7_624_000, 11_000)


def test_dlrm_bytes_and_bus_bandwidth(dlrm):
    c = dlrm.collectives
    # the 5th collective is the all_reduce whose nccl:all_reduce annotation records [[394241]] float
    ar = c.iloc[4]
    assert ar["name"] == "all_reduce" and ar["bytes"] == 394_241 * 4
    # NCCL busbw: algbw * 2(n-1)/n = bytes * 2*7/8 / transfer (nccl-tests doc/PERFORMANCE.md)
    assert ar["algo_bytes"] == pytest.approx(1_576_964 * 2 * 7 / 8)
    assert ar["bus_bandwidth"] == pytest.approx(1_576_964 * 1.75 / (ar["transfer_ns"] * 1e-9))
    assert ar["link_bandwidth"] == 150e9  # V100 SXM2 NVLink: 300 GB/s both directions (preset)
    a2a = c.iloc[0]
    assert a2a["name"] == "all_to_all" and a2a["bytes"] == 6144 * 4  # nccl:all_to_all [[6144]] float
    assert a2a["algo_bytes"] == pytest.approx(6144 * 4 * 7 / 8)


def test_dlrm_stragglers_and_step_setter(dlrm):
    s, rs = dlrm.stragglers, dlrm.rank_summary
    # rank 7 starts last at instances 0-4 (raw kernels), each by the gap to the next-latest rank
    raw = _kernel_starts_ends()
    gaps = []
    for i in range(8):
        starts = sorted((raw[r][i][0], r) for r in range(8))
        if starts[-1][1] == 7:
            gaps.append((starts[-1][0] - starts[-2][0]) * 1000)
    assert int(s["rank"].iat[0]) == 7 and int(s["collectives"].iat[0]) == len(gaps) == 5
    assert int(s["delay_ns"].iat[0]) == round(sum(gaps) / len(gaps))
    assert rs.loc[rs["sets_step"], "rank"].tolist() == [7]  # it waits least: 1.53 ms vs 3.28-11.1 ms
    assert rs["wait_ns"].min() == rs.loc[rs["rank"] == 7, "wait_ns"].iat[0]


def test_dlrm_all_to_all_matrix(dlrm):
    m = dlrm.comm_matrix
    assert len(m) == 8 * 7  # every ordered pair of distinct ranks
    # rank 0's five all_to_all messages: 6144, 48 (long: 24 x 8 B), 384, 3392 int32 and 6144 floats
    sent = 6144 * 4 + 24 * 8 + 384 * 4 + 3392 * 4 + 6144 * 4
    assert m[(m["src"] == 0) & (m["dst"] == 1)]["bytes"].iat[0] == sent / 8


@pytest.mark.parametrize("ranks,late", [(4, 2), (8, 5)])
def test_planted_straggler_is_named_with_its_delay(tmp_path: Path, ranks: int, late: int):
    delay_us = 2000  # 2 ms before every collective
    write_rank_set(tmp_path, ranks, straggler=late, delay_us=delay_us)
    a = analyze(load_trace(tmp_path), sections=("ranks",))
    s = a.stragglers
    assert int(s["rank"].iat[0]) == late and len(s) == 1  # the copies arrive together otherwise
    assert s["delay_ns"].iat[0] == pytest.approx(delay_us * 1000, rel=0.05)
    assert int(s["collectives"].iat[0]) == len(a.collectives) == 8
    assert (a.collectives["wait_ns"] == delay_us * 1000).all()
    assert a.rank_summary.loc[a.rank_summary["sets_step"], "rank"].tolist() == [late]
    # the transfer is the source rank's own kernel time: the wait is taken out of it
    src = sorted(
        (e["ts"], e["dur"])
        for e in source_doc()["traceEvents"]
        if e.get("cat") == "kernel" and e["name"].startswith(COLLECTIVE_KERNEL)
    )
    assert a.collectives["transfer_ns"].tolist() == [d * 1000 for _, d in src]


def test_no_straggler_without_a_delay(tmp_path: Path):
    write_rank_set(tmp_path, 3)
    a = analyze(load_trace(tmp_path), sections=("ranks",))
    assert a.stragglers.empty and (a.collectives["wait_ns"] == 0).all()


def test_json_and_text_carry_the_cross_rank_section(tmp_path: Path):
    write_rank_set(tmp_path, 4, straggler=1, delay_us=2000)
    runner = CliRunner()
    r = runner.invoke(app, ["analyze", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["stragglers"] == [{"rank": 1, "delay_ns": 2_000_000, "collectives": 8}]
    assert len(doc["collectives"]) == 8
    assert set(doc["collectives"][0]) == {"name", "bytes", "wait_ns", "transfer_ns", "bus_bandwidth"}
    assert doc["collectives"][0]["wait_ns"] == 2_000_000
    m = doc["cross_rank"]["comm_matrix"]  # rank 0's all_to_all bytes (64,448, see above) split over 4 ranks
    assert m["ranks"] == [0, 1, 2, 3] and m["bytes"][0] == [0.0, 64_448 / 4, 64_448 / 4, 64_448 / 4]
    r = runner.invoke(app, ["analyze", str(tmp_path)])
    assert "straggler: rank 1, last at 8 of 8 collectives, 2 ms late on average" in r.stdout
    assert "rank 1 sets the step time" in r.stdout


def test_one_rank_has_no_cross_rank_tables():
    a = analyze(load_trace(real_trace("b200_eager")), sections=("ranks",))
    assert a.collectives.empty and a.stragglers.empty and a.rank_summary.empty


def test_the_local_engine_imports_no_dask():
    """Dask is an optional extra (scale): only --engine dask imports it (profiler/api/engine_dask.py)."""
    import subprocess
    import sys

    code = (
        "import sys; from profiler.cli import main\n"
        "try:\n    main(['analyze', sys.argv[1], '--json'])\nexcept SystemExit:\n    pass\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')], 'dask imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(DLRM)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["stragglers"][0]["rank"] == 7  # the cross-rank section ran without it
