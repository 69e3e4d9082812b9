"""The dashboard's Autotune page over trials databases (`perf dashboard --trials DB`): the best
time so far per strategy, the trials as points of time against error, the winning plan; the
database read read-only (a bad one is one line, exit 2, the file untouched)."""

from __future__ import annotations

import os
import sqlite3

import pytest
from typer.testing import CliRunner

from profiler.autotune.db import Study, Trial, TrialDB
from profiler.autotune.report import trials_document
from profiler.autotune.space import Dimension, Space
from profiler.cli import app as cli

SPACE = Space(
    (
        Dimension("fusion:g", "fusion", ("fused", "split"), ("k0",)),
        Dimension("precision:fc", "precision", ("bf16", "fp32", "int8"), ("k0",), "fc"),
    ),
    "bf16",
    "mlp",
    "edge-npu",
)
# (strategy, choice, time_ns or None, accuracy error, failure)
ROWS = [
    ("roofline", {}, 1000, 1e-3, ""),
    ("roofline", {"fusion:g": "split"}, 1200, 1e-3, ""),
    ("roofline", {"precision:fc": "int8"}, None, 0.2, "functional check: relative error 0.2 over the bound 0.03"),
    ("random", {"precision:fc": "fp32"}, 1100, 0.0, ""),
    ("random", {"fusion:g": "split", "precision:fc": "int8"}, 800, 2e-2, ""),
]


def _db(path) -> None:  # type: ignore[no-untyped-def]
    db = TrialDB(path)
    study = Study("w" * 64, "edge-npu", "simulator", "mlp")
    db.start_study(study, SPACE.to_dict())
    for seq, (strategy, choice, t, err, failure) in enumerate(ROWS):
        c = SPACE.candidate(choice)
        kernels = [{"name": "k0", "time_ns": t, "ops": ["a"]}] if t else []
        db.add(study, Trial(c.hash, seq, strategy, c.to_json(), t, failure, err, "", {"kernels": kernels}, 0.1), seed=0)
    db.close()


@pytest.fixture()
def doc(tmp_path):  # type: ignore[no-untyped-def]
    _db(tmp_path / "t.sqlite")
    return trials_document(tmp_path / "t.sqlite")


def test_best_so_far_per_strategy_starts_from_the_baseline(doc):
    (s,) = doc["studies"]
    # roofline: baseline 1000, then 1200 (not better), then a failure (no time): 1000, 1000, 1000
    # random: the baseline (1000) first, then 1100 (not better), 800
    assert s["curves"] == {"roofline": [(1, 1000), (2, 1000), (3, 1000)], "random": [(1, 1000), (2, 1000), (3, 800)]}
    assert s["summary"]["best"]["time_ns"] == 800 and s["summary"]["failed"] == 1 and s["space_size"] == 6


def test_page_draws_curves_points_and_the_winning_plan(doc):
    from dashboard.pages.trials import body

    content = body([doc])
    by_id = {getattr(c, "id", None): c for c in content}
    curves = {t.name: list(t.y) for t in by_id["trials-best-so-far"].figure.data}
    assert curves == {"mlp (simulator): roofline": [1.0, 1.0, 1.0], "mlp (simulator): random": [1.0, 1.0, 0.8]}
    points = by_id["trials-points"].figure.data
    # 4 passed trials as points (the failed one has no time), the best a star at (0.8 us, 2e-2)
    assert sum(len(t.x) for t in points if not t.name.endswith("best")) == 4
    star = next(t for t in points if t.name.endswith("best"))
    assert (list(star.x), list(star.y)) == ([0.8], [2e-2])
    zero = next(t for t in points if t.name.endswith("random"))
    assert min(zero.y) == 1e-12  # the exact trial (error 0) drawn at the log axis's floor
    winner = by_id["trials-winner-0"]
    text = str(winner.children)
    assert "1.250x" in text and "800" in text  # 1000 / 800
    plan = str(by_id["trials-plan-0"].children)
    assert "fusion:g" in plan and "split" in plan and "precision:fc" in plan and "int8" in plan


def test_page_without_a_database_says_how_to_load_one():
    from dashboard.pages.trials import body

    assert "perf dashboard --trials" in body([])[0].children


def test_callback_renders_the_page_through_the_server(doc):
    from dashboard.app import create_app
    from dashboard.testing import callback_body, callback_keys

    app = create_app([], trials=[doc])
    key = next(k for k in callback_keys(app) if k.startswith("trials-body"))
    with app.server.test_client() as client:
        r = client.post("/_dash-update-component", json=callback_body(app, key, {"url.pathname": "/trials"}))
    assert r.status_code == 200
    assert "trials-best-so-far" in r.get_data(as_text=True) and "trials-error" not in r.get_data(as_text=True)


def test_bad_database_is_one_line_exit_2_and_untouched(tmp_path):
    text = tmp_path / "notes.sqlite"
    text.write_bytes(b"not sqlite at all\n" * 10)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE x (a)")
    before = {p: p.read_bytes() for p in (text, other)}
    for p in (text, other, tmp_path / "missing.sqlite"):
        r = CliRunner().invoke(cli, ["dashboard", "--trials", str(p)])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and str(p) in r.output, r.output
    assert {p: p.read_bytes() for p in (text, other)} == before  # read-only: no table added


def test_browser_shows_the_autotune_page(doc):
    pytest.importorskip("selenium")
    from dashboard.testing import CHROMEDRIVER, CHROMIUM, chromium, graph_data, serving, wait_for

    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("needs Debian's chromium and chromium-driver (make browser)")
    from selenium.webdriver.common.by import By

    from dashboard.app import create_app

    app = create_app([], trials=[doc])
    try:
        with serving(app) as url, chromium() as d:
            d.get(url + "/trials")
            curves = wait_for(lambda: graph_data(d, "trials-best-so-far"), 60, what="the best-so-far curve")
            assert {c["name"]: c["y"] for c in curves}["mlp (simulator): random"] == [1.0, 1.0, 0.8]
            rows = wait_for(lambda: d.find_elements(By.CSS_SELECTOR, "#trials-plan-0 tbody tr"), 30, what="the plan")
            assert sorted(r.text.split()[0] for r in rows) == ["fusion:g", "precision:fc"]
    finally:
        app.perf_store.close()
