"""The dashboard's Numerics page: error per layer along the network from a
`perf diff --numerics --json` document (`perf dashboard --numerics FILE`)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from typer.testing import CliRunner  # noqa: E402

from profiler.api.deploy import numerics_diff, read_numerics  # noqa: E402
from profiler.cli import app as cli  # noqa: E402
from profiler.model.errors import InputError  # noqa: E402
from profiler.render.numerics import accuracy_gate_json, numerics_json  # noqa: E402


@pytest.fixture(scope="module")
def doc_path(tmp_path_factory):
    # the planted fault (tests/deploy_models.py): int8 destroys `mid`, the first diverging layer
    report = numerics_diff("tests.deploy_models:fragile", ["4x16"], "onnxruntime:int8")
    p = tmp_path_factory.mktemp("num") / "n.json"
    p.write_bytes(numerics_json(report))
    return p


def test_figure_is_the_error_per_layer_in_network_order(doc_path):
    from dashboard.pages.numerics import body

    doc = read_numerics(doc_path)
    content = body(doc)
    graph = next(c for c in content if getattr(c, "id", None) == "numerics-figure")
    rel = graph.figure.data[0]
    names = [x["name"] for x in doc["layers"]]
    assert list(rel.x) == names and "mid" in names
    assert list(rel.y) == [x["rel_error"] for x in doc["layers"]]
    assert doc["first_diverging"]["name"] == "mid"
    red = [n for n, c in zip(rel.x, rel.marker.color) if c == "#c0392b"]
    assert red == ["mid"]  # only the first diverging layer is marked
    assert graph.figure.layout.yaxis.type == "log"
    table = next(c for c in content if getattr(c, "id", None) == "numerics-table")
    assert len(table.children[1].children) == len(names)
    assert "mid (ScaledLinear)" in next(c for c in content if getattr(c, "id", None) == "numerics-caption").children


def test_gate_documents_hold_it_and_bad_files_are_one_line(doc_path, tmp_path):
    doc = read_numerics(doc_path)
    report = numerics_diff("tests.deploy_models:mlp", ["4x16"], "onnxruntime:fp32")
    gate = tmp_path / "gate.json"
    gate.write_bytes(accuracy_gate_json(report, 0.05, True))
    assert [x["name"] for x in read_numerics(gate)["layers"]] == [x.name for x in report.layers]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"layers": [{"name": "x"}]}))
    with pytest.raises(InputError):
        read_numerics(bad)
    r = CliRunner().invoke(cli, ["dashboard", "--numerics", str(bad)])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and str(bad) in r.output
    from dashboard.app import PAGES, create_app
    from dashboard.pages.numerics import body

    app = create_app([], numerics=doc)
    assert app.perf_store.numerics is doc and "/numerics" in [p.PATH for p in PAGES]
    assert "perf dashboard --numerics" in body(None)[0].children
