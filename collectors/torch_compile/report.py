"""All compile tables of one structured log: from a TORCH_TRACE directory or an in-process capture."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from collectors.torch_compile import breaks
from collectors.torch_compile.fusion_map import fusion_map
from collectors.torch_compile.phases import phase_summary, phase_table
from collectors.torch_compile.tlparse import Log, read_torch_trace
from profiler.model.trace import Problems


@dataclass(frozen=True)
class CompileReport:
    """Tables of one compile session (columns: see each builder's docstring).

    phases: collectors.torch_compile.phases.phase_table; phase_summary: phase_summary;
    compiles / graph_breaks / recompiles / caches: collectors.torch_compile.breaks;
    fusion: collectors.torch_compile.fusion_map.fusion_map.
    """

    phases: pd.DataFrame
    phase_summary: pd.DataFrame
    compiles: pd.DataFrame
    graph_breaks: pd.DataFrame
    recompiles: pd.DataFrame
    caches: pd.DataFrame
    fusion: pd.DataFrame
    source: str = ""
    problems: Problems = field(default_factory=Problems)


def compile_report(log: Log) -> CompileReport:
    """Build every table from the records of `log`."""
    phases = phase_table(log)
    return CompileReport(
        phases=phases,
        phase_summary=phase_summary(phases),
        compiles=breaks.compiles(log),
        graph_breaks=breaks.graph_breaks(log),
        recompiles=breaks.recompiles(log),
        caches=breaks.caches(log),
        fusion=fusion_map(log),
        source=log.source,
        problems=log.problems,
    )


def read_compile_report(path: str | Path, max_bytes: int | None = None) -> CompileReport:
    """The tables of a TORCH_TRACE directory (or one of its .log files, each at most `max_bytes`)."""
    return compile_report(read_torch_trace(path, max_bytes))


#: The tables a report carries as JSON (in a trace file's `perfCompile` field and `perf compile-report --json`).
DOC_TABLES = ("phase_summary", "compiles", "graph_breaks", "recompiles", "caches", "fusion")
DOC_SCHEMA, DOC_VERSION = "perf.compile_report", 1


def report_doc(report: CompileReport, with_phases: bool = True) -> dict:
    """The report as a JSON-ready dict: {schema, schema_version, source, problems, tables: {name:
    [row dicts]}}; tuple cells (fusion's aten_ops, nodes, sources...) become lists, NaN becomes
    None, text passes through profiler.model.redact. `with_phases` adds the per-step `phases` table."""
    import numpy as np

    from profiler.model.redact import redact

    def rows(df: pd.DataFrame) -> list[dict]:
        out = df.astype(object).where(df.notna(), None).to_dict(orient="records")
        for r in out:
            for k, v in r.items():
                if isinstance(v, tuple):
                    r[k] = list(v)
                elif isinstance(v, np.generic):
                    r[k] = v.item()
        return out

    names = (*DOC_TABLES, "phases") if with_phases else DOC_TABLES
    return redact(
        {
            "schema": DOC_SCHEMA,
            "schema_version": DOC_VERSION,
            "source": report.source,
            "problems": dict(report.problems.counts),
            "tables": {n: rows(getattr(report, n)) for n in names},
        }
    )


def report_from_doc(doc: object, source: str = "") -> CompileReport | None:
    """A CompileReport from `report_doc`'s dict (None when `doc` is not one). List cells of the
    fusion table become tuples again (`work`'s entries stay lists); a table the doc lacks is
    empty; phases may be absent; a fusion `flops` column (analysis's, or a file's written
    before `work`) is kept."""
    from collectors.torch_compile import fusion_map as fm
    from collectors.torch_compile.phases import PHASE_COLUMNS

    if not (isinstance(doc, dict) and doc.get("schema") == DOC_SCHEMA and isinstance(doc.get("tables"), dict)):
        return None
    columns = {
        "phases": PHASE_COLUMNS,
        "phase_summary": ["compile_id", "phase", "time_ns", "steps", "share"],
        "compiles": breaks.COMPILE_COLUMNS,
        "graph_breaks": breaks.BREAK_COLUMNS,
        "recompiles": breaks.RECOMPILE_COLUMNS,
        "caches": breaks.CACHE_COLUMNS,
        "fusion": fm.KERNEL_COLUMNS,
    }
    tables = {}
    for name, cols in columns.items():
        got = doc["tables"].get(name)
        rows = [r for r in got if isinstance(r, dict)] if isinstance(got, list) else []
        if name == "fusion" and any("flops" in r for r in rows):
            cols = [*cols, "flops"]  # counted by analysis (a file written before `work` has only these)
        df = pd.DataFrame(rows, columns=cols)
        for c in ("aten_ops", "nodes", "pre_nodes", "sources"):
            if name == "fusion" and c in df:
                df[c] = [tuple(v) if isinstance(v, list) else () for v in df[c]]
        if name == "fusion" and "work" in df:
            df["work"] = [tuple(v) if isinstance(v, list) else None for v in df["work"]]
        tables[name] = df.astype({c: "float64" for c in ("flops", "bytes_read", "bytes_written", "share") if c in df})
    problems = Problems()
    for reason, n in (doc.get("problems") or {}).items():
        if isinstance(n, int):
            problems.add(str(reason), n)
    return CompileReport(source=str(doc.get("source") or source), problems=problems, **tables)
