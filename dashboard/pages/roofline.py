"""Roofline: ops placed by intensity and achieved FLOP/s under the selected hardware's roofs.

Switching the hardware re-runs `analyze(trace, hardware=NAME)` (cached per trace and
hardware): the roofs move and every op is re-floored (what-if). Clicking a point selects the op
(the `selected-op` store), which the other pages highlight.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update

from dashboard import figures, tables
from dashboard.components import as_dict, as_int, as_selection, error_box, fmt_si, guarded, op_details
from dashboard.store import TraceStore
from dashboard.views import ops_for, units_for
from profiler.model.errors import InputError
from profiler.model.hardware import load_spec, presets

PATH = "/roofline"
TITLE = "Roofline"


def layout(state: dict[str, Any]) -> html.Div:
    options = [{"label": "as matched from the trace", "value": ""}] + [{"label": p, "value": p} for p in presets()]
    return html.Div(
        [
            html.H2("Roofline"),
            html.Div(
                [
                    html.Label("Hardware (what-if): ", htmlFor="hw-select"),
                    dcc.Dropdown(
                        id="hw-select",
                        options=options,
                        value=state.get("hardware") or "",
                        clearable=False,
                        style={"width": "320px", "display": "inline-block", "verticalAlign": "middle"},
                    ),
                ]
            ),
            html.Div(id="roofline-caption", className="caption"),
            html.Div(
                [
                    html.Div(
                        dcc.Graph(id="roofline-graph", config={"displaylogo": False}, style={"height": "560px"}),
                        style={"flex": "3", "minWidth": "0"},
                    ),
                    html.Div(
                        [html.H3("Selected op"), html.Div(id="roofline-details", children="Click a point.")],
                        style={"flex": "1", "minWidth": "260px"},
                    ),
                ],
                style={"display": "flex", "gap": "12px"},
            ),
            html.H3("Roofs"),
            html.Ul(id="roofline-ceilings"),
        ],
        id="page-roofline",
    )


def page_data(store: TraceStore, tid: str, hardware: str | None) -> tuple[Any, Any, Any]:
    """(op table, spec, roofs DataFrame) for the focus device of the trace under `hardware`."""
    ops = ops_for(store, tid, hardware)
    focus = tables.focus_units(units_for(store, tid, hardware))
    names = [n for n in focus["hardware"].unique() if n] if len(focus) else []
    spec = load_spec(hardware) if hardware else (load_spec(names[0]) if names else None)
    dtypes = [str(d) for d in ops.loc[ops["flops_effective"].fillna(0) > 0, "dtype"].unique()] if len(ops) else []
    roofs = tables.ceilings(spec, dtypes) if spec else None
    return ops, spec, roofs


def register(app: Dash, store: TraceStore) -> None:
    @app.callback(Output("hardware", "data"), Input("hw-select", "value"), prevent_initial_call=True)
    def pick(value: str | None) -> str:
        return value if isinstance(value, str) else ""  # a preset name, checked where it is used

    @app.callback(
        Output("roofline-graph", "figure"),
        Output("roofline-ceilings", "children"),
        Output("roofline-caption", "children"),
        Input("trace-select", "value"),
        Input("hardware", "data"),
        Input("selected-op", "data"),
    )
    @guarded(lambda msg: (figures._empty("Roofline", ""), [], error_box(msg, id="roofline-error")))
    def draw(tid: str | None, hardware: str | None, selected: dict | None) -> tuple:
        selected = as_selection(selected)
        return store.answer(tid, hardware, "roofline", selected, lambda: _draw(tid, hardware, selected))

    def _draw(tid: str | None, hardware: str | None, selected: dict | None) -> tuple:
        ops, spec, roofs = page_data(store, tid, hardware)
        if spec is None:
            return (
                figures._empty("Roofline", "no hardware spec matched: pick one above"),
                [],
                "No hardware spec matched this trace's devices.",
            )
        points = tables.roofline_points(ops)
        sel = tables.select_op(ops, selected)
        fig = figures.roofline_figure(
            points, roofs, None if sel is None else int(sel["op"]), title=f"Roofline on {spec.name}"
        )
        items = [
            html.Li(
                f"{r.kind}: {r.name} = {fmt_si(r.value, 'FLOP/s' if r.kind == 'compute' else 'B/s')}",
                className=f"roof roof-{r.kind}",
            )
            for r in roofs.itertuples(index=False)
        ]
        placed = len(points)
        caption = (
            f"{spec.name}: {placed} of {len(ops)} ops placed (the others have no known FLOP and byte count, "
            f"or zero FLOPs); y = effective FLOPs / measured time, marker area ~ time. Points are the measured ops; "
            f"the roofs are {spec.name}'s"
            + (" (what-if: the floors, bounds and efficiencies are re-derived on it)." if hardware else ".")
        )
        return fig, items, caption

    @app.callback(
        Output("selected-op", "data", allow_duplicate=True),
        Output("roofline-details", "children", allow_duplicate=True),
        Input("roofline-graph", "clickData"),
        State("trace-select", "value"),
        State("hardware", "data"),
        prevent_initial_call=True,
    )
    @guarded(lambda msg: (no_update, error_box(msg, id="roofline-error")))
    def click(click: dict | None, tid: str | None, hardware: str | None) -> Any:
        """Select the clicked op, and show its details in the same round trip."""
        points = as_dict(click, "the clicked point").get("points")
        first = points[0] if isinstance(points, list) and points else {}
        data = first.get("customdata") if isinstance(first, dict) else None
        if not data:
            return no_update, no_update
        if not isinstance(data, list):
            raise InputError(None, "the clicked point carries no op")
        ops = ops_for(store, tid, hardware)
        hit = ops[ops["op"] == as_int(data[0], "the clicked op", 0)]
        if hit.empty:
            return no_update, no_update
        return {"name": hit.iloc[0]["name"], "shapes": hit.iloc[0]["shapes"]}, op_details(hit.iloc[0])

    @app.callback(
        Output("roofline-details", "children"),
        Input("trace-select", "value"),
        Input("hardware", "data"),
        Input("selected-op", "data"),
    )
    @guarded(lambda msg: error_box(msg))
    def details(tid: str | None, hardware: str | None, selected: dict | None) -> Any:
        selected = as_selection(selected)

        def build() -> Any:
            row = tables.select_op(page_data(store, tid, hardware)[0], selected)
            return "Click a point." if row is None else op_details(row)

        return store.answer(tid, hardware, "roofline-details", selected, build)
