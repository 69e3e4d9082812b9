"""Ops: every op (units grouped by name and shapes) with its cost and bound, sortable and filterable.

Sorting, filtering and paging run on the server (DataTable custom actions), so only one page of
rows reaches the browser whatever the trace's size. Clicking a row selects the op.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
from dash import Dash, Input, Output, State, dash_table, html, no_update

from dashboard import tables
from dashboard.components import as_dict, as_int, as_selection, as_text, error_box, guarded, op_details
from dashboard.store import TraceStore
from dashboard.views import ops_for

PATH = "/ops"
TITLE = "Ops"
PAGE_SIZE = 25

#: (table column id, header, source column, scale): displayed value = source / scale, rounded.
COLUMNS = [
    ("op", "#", "op", None),
    ("name", "op", "label", None),
    ("shapes", "shapes", "shapes", None),
    ("family", "family", "family", None),
    ("dtype", "dtype", "dtype", None),
    ("count", "calls", "count", None),
    ("time_us", "time / self (µs)", "time_ns", 1e3),
    ("total_us", "total (µs)", "total_ns", 1e3),
    ("share_pct", "share %", "share", 1e-2),
    ("gflop", "GFLOP", "flops_effective", 1e9),
    ("mb", "MB", "bytes", 1e6),
    ("intensity", "FLOP/B", "intensity", 1.0),
    ("tflops", "TFLOP/s", "achieved_flops", 1e12),
    ("floor_us", "floor (µs)", "floor_ns", 1e3),
    ("bound", "bound", "bound", None),
    ("efficiency", "efficiency", "efficiency", 1.0),
]
_TEXT = {c for c, _, _, s in COLUMNS if s is None and c not in ("op", "count")}
_FILTER = re.compile(r"^\{(?P<col>[^}]+)\}\s*(?P<op>s?i?contains|>=|<=|!=|=|<|>|eq|ne|lt|le|gt|ge)\s*(?P<val>.*)$")


def layout(state: dict[str, Any]) -> html.Div:
    return html.Div(
        [
            html.H2("Ops"),
            html.P(
                "Units grouped by op name and input shapes. Time: a device op's device time, a CPU op's self time "
                "(its duration less its child ops'); total: a CPU op's whole duration. Sort by any column; "
                "filter with text ('addmm') or comparisons ('> 100'). Click a row to select the op on every page.",
                className="caption",
            ),
            dash_table.DataTable(
                id="ops-table",
                columns=[
                    {"name": h, "id": c, "type": "text"}
                    if c in _TEXT
                    else {"name": h, "id": c, "type": "numeric"}
                    if sc is None
                    else {"name": h, "id": c, "type": "numeric", "format": {"specifier": ".4~g"}}
                    for c, h, _, sc in COLUMNS
                ],
                page_action="custom",
                page_current=0,
                page_size=PAGE_SIZE,
                sort_action="custom",
                sort_mode="single",
                sort_by=[],
                filter_action="custom",
                filter_query="",
                style_table={"overflowX": "auto"},
                style_cell={
                    "fontFamily": "monospace",
                    "fontSize": "12px",
                    "maxWidth": "380px",
                    "overflow": "hidden",
                    "textOverflow": "ellipsis",
                    "whiteSpace": "nowrap",
                },
                style_cell_conditional=[{"if": {"column_id": c}, "textAlign": "left"} for c in sorted(_TEXT)],
                tooltip_duration=None,
            ),
            html.Div(id="ops-count", className="caption"),
            html.H3("Selected op"),
            html.Div(id="ops-details", children="Click a row."),
        ],
        id="page-ops",
    )


def display(ops: pd.DataFrame) -> pd.DataFrame:
    """op_table -> the table's columns (COLUMNS), numbers scaled and rounded to 4 significant digits."""
    out = pd.DataFrame({"id": ops["op"].to_numpy()})
    for col, _, src, scale in COLUMNS:
        v = ops[src]
        if scale is not None:
            x = v.to_numpy(dtype=np.float64) / scale
            out[col] = [
                float(f"{y:.4g}") if np.isfinite(y) else np.nan for y in x
            ]  # 4 significant digits, no float noise
        else:
            out[col] = v.to_numpy()
    return out


def apply_query(df: pd.DataFrame, filter_query: str, sort_by: list[dict]) -> pd.DataFrame:
    """Filter (DataTable's filter_query, parsed here: no eval) then sort (NaN last)."""
    for part in (filter_query or "").split(" && "):
        m = _FILTER.match(part.strip())
        if not m or m["col"] not in df.columns:
            continue
        col, op, val = m["col"], m["op"], m["val"].strip().strip("\"'`")
        if op.endswith("contains"):
            df = df[df[col].astype(str).str.contains(val, case=op == "scontains", regex=False, na=False)]
            continue
        try:
            num = float(val)
        except ValueError:
            df = df[df[col].astype(str) == val] if op in ("=", "eq") else df
            continue
        x = pd.to_numeric(df[col], errors="coerce")
        cmp = {
            "=": x == num,
            "eq": x == num,
            "!=": x != num,
            "ne": x != num,
            "<": x < num,
            "lt": x < num,
            "<=": x <= num,
            "le": x <= num,
            ">": x > num,
            "gt": x > num,
            ">=": x >= num,
            "ge": x >= num,
        }[op]
        df = df[cmp.fillna(False).to_numpy(dtype=bool)]
    if sort_by:
        s = sort_by[0]
        if s.get("column_id") in df.columns:
            df = df.sort_values(
                s["column_id"], ascending=s.get("direction") == "asc", kind="stable", na_position="last"
            )
    return df


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(
        Output("ops-table", "data"),
        Output("ops-table", "page_count"),
        Output("ops-table", "style_data_conditional"),
        Output("ops-count", "children"),
        Input("trace-select", "value"),
        Input("hardware", "data"),
        Input("ops-table", "page_current"),
        Input("ops-table", "page_size"),
        Input("ops-table", "sort_by"),
        Input("ops-table", "filter_query"),
        Input("selected-op", "data"),
    )
    @guarded(lambda msg: ([], 1, [], error_box(msg, id="ops-error")))
    def page(
        tid: str | None, hardware: str | None, current: int, size: int, sort_by: list, query: str, selected: dict | None
    ) -> tuple:
        size = as_int(size, "page size", PAGE_SIZE, 1, 1000)
        current = as_int(current, "page", 0)
        query = as_text(query, "filter")
        sort_by = sort_by if isinstance(sort_by, list) and all(isinstance(s, dict) for s in sort_by) else []
        selected = as_selection(selected)
        args = [current, size, query, sort_by, selected]
        return store.answer(
            tid, hardware, "ops-page", args, lambda: _page(tid, hardware, current, size, query, sort_by, selected)
        )

    def _page(
        tid: str | None, hardware: str | None, current: int, size: int, query: str, sort_by: list, selected: dict | None
    ) -> tuple:
        ops = ops_for(store, tid, hardware)
        df = apply_query(store.view(tid, hardware, "ops-display", lambda: display(ops)), query, sort_by)
        rows = df.iloc[current * size : (current + 1) * size]
        sel = tables.select_op(ops, selected)
        style = (
            [{"if": {"filter_query": f"{{op}} = {int(sel['op'])}"}, "backgroundColor": "#ffe8a8", "fontWeight": "bold"}]
            if sel is not None
            else []
        )
        style += [
            {"if": {"filter_query": f'{{bound}} = "{b}"', "column_id": "bound"}, "color": c}
            for b, c in (
                ("compute", "#d62728"),
                ("memory", "#1f77b4"),
                ("runtime", "#ff7f0e"),
                ("communication", "#9467bd"),
            )
        ]
        records = rows.replace({np.nan: None}).to_dict("records")
        return records, max(1, -(-len(df) // size)), style, f"{len(df):,} of {len(ops):,} ops"

    @app.callback(
        Output("selected-op", "data", allow_duplicate=True),
        Output("ops-details", "children", allow_duplicate=True),
        Input("ops-table", "active_cell"),
        State("trace-select", "value"),
        State("hardware", "data"),
        prevent_initial_call=True,
    )
    @guarded(lambda msg: (no_update, error_box(msg, id="ops-error")))
    def pick(cell: dict | None, tid: str | None, hardware: str | None) -> Any:
        cell = as_dict(cell, "the clicked cell")
        if cell.get("row_id") is None:
            return no_update, no_update
        ops = ops_for(store, tid, hardware)
        hit = ops[ops["op"] == as_int(cell["row_id"], "the clicked row", 0)]
        return (
            (no_update, no_update)
            if hit.empty
            else ({"name": hit.iloc[0]["name"], "shapes": hit.iloc[0]["shapes"]}, no_update)
        )

    @app.callback(
        Output("ops-details", "children"),
        Input("trace-select", "value"),
        Input("hardware", "data"),
        Input("selected-op", "data"),
    )
    @guarded(lambda msg: error_box(msg))
    def details(tid: str | None, hardware: str | None, selected: dict | None) -> Any:
        row = tables.select_op(ops_for(store, tid, hardware), as_selection(selected))
        return "Click a row." if row is None else op_details(row)
