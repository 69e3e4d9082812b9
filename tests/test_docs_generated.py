"""The column references are generated from the declarations (profiler/model/schema.py for the
Trace, analysis/columns.py for an Analysis) and the declarations match what the code builds."""

from __future__ import annotations

import pytest

from analysis.columns import OUTPUT_TABLES, columns
from profiler import docs


def test_generated_docs_are_up_to_date():
    for path, text in docs.generated().items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is out of date: run python -m profiler.docs"


def test_json_schema_lists_every_declared_column():
    text = (docs.DOCS / "json-schema.md").read_text(encoding="utf-8")
    for table, cols in OUTPUT_TABLES.items():
        assert f"### {table}" in text
        assert all(f"| `{c.name}` | {c.dtype} |" in text for c in cols), table


@pytest.mark.parametrize("folder", ["b200_eager", "sglang_qwen3_prefill_mi300x"])
def test_every_analysis_table_has_its_declared_columns(folder):
    from profiler.api import analyze, load_trace
    from tests.conftest import real_trace

    a = analyze(load_trace(real_trace(folder)))
    seen = 0
    for table in OUTPUT_TABLES:
        df = getattr(a, table)
        if df.empty and not len(df.columns):
            continue
        assert list(df.columns) == columns(table), table
        seen += 1
    assert seen >= 10  # most tables are filled on these traces: the check is not vacuous


def test_cited_documents_are_in_the_repository():
    """Code cites docs/architecture.md (not a DESIGN.md outside the repository), and every section
    it names there exists as a heading or a bold paragraph title."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    arch = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    titles = set(re.findall(r"^#+ (.+)$", arch, re.MULTILINE)) | set(re.findall(r"\*\*(.+?)\*\*", arch))
    cited = 0
    for path in [*root.glob("*/**/*.py"), *root.glob("docs/*.md"), root / "README.md"]:
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert "DESIGN.md" not in text, path
        for section in re.findall(r"docs/architecture\.md,? \"([^\"]+)\"", text):
            cited += 1
            assert any(section.lower().rstrip(".") in t.lower() for t in titles), (path, section)
    assert cited >= 4
