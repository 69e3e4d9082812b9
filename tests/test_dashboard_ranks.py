"""The dashboard's Ranks page (dashboard/pages/ranks.py): a multi-rank trace's ranks side by side,
its stragglers and slowest collectives, through the app's own callback endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from dashboard.app import create_app
from dashboard.testing import callback_body
from tests.conftest import real_trace
from tests.rank_sets import write_rank_set


def _page(paths: list[Path]) -> str:
    app = create_app(paths)
    try:
        tid = app.perf_store.entries()[0].trace_id
        r = app.server.test_client().post(
            "/_dash-update-component",
            json=callback_body(app, "ranks-body.children", {"trace-select.value": tid, "hardware.data": None}),
        )
        assert r.status_code == 200
        return json.dumps(r.get_json())
    finally:
        app.perf_store.close()


def test_ranks_page_names_the_planted_straggler(tmp_path: Path):
    write_rank_set(tmp_path, 4, straggler=2, delay_us=2000)
    page = _page([tmp_path])
    assert "Rank 2 sets the step time" in page
    assert '"ranks-stragglers"' in page and "2 ms" in page  # rank 2: mean delay 2 ms at 8 collectives
    assert '"ranks-graph"' in page and '"ranks-collectives"' in page


def test_ranks_page_on_one_rank_says_so():
    assert "One rank in this trace" in _page([real_trace("b200_eager")])
