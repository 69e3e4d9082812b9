"""Dashboard speed with a million-event trace, measured in headless Chromium.

Prints the server-side cold costs (parse, analysis, op table, timeline index), then per page the
first-render time (navigation until the page's content is drawn; target < 3 s) and the largest
callback response it received, then interaction times (action until the page shows the result;
target < 0.5 s). Raw events never ship: every response's size is checked against --max-payload.

Usage: bench_dashboard.py [--trace PATH] [--repeat N] [--max-payload BYTES]
Without --trace, benchmarks/data/dash_1m_b200.json is made once (about 1.03 M events: the B200
eager trace repeated 46 times by make_big_trace.py; about 0.3 GiB).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dashboard.app import create_app, warm
from dashboard.testing import chromium, find_option, graph_data, serving, update_sizes, wait_for
from dashboard.views import ops_for, timeline_for

DEFAULT = REPO / "benchmarks" / "data" / "dash_1m_b200.json"
SOURCE = REPO / "tests" / "data" / "traces" / "b200_eager" / "eager_trace.json.gz"
PAGE_TARGET_S, ACTION_TARGET_S = 3.0, 0.5


def make_trace(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "make_big_trace.py"),
            str(path),
            "--min-gb",
            "0.295",
            "--source",
            str(SOURCE),
        ],
        check=True,
    )


def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def css(d, sel: str):
    from selenium.webdriver.common.by import By

    return d.find_elements(By.CSS_SELECTOR, sel)


def has_points(d, graph: str, key: str, value: str) -> bool:
    return any((t["meta"] or {}).get(key) == value for t in (graph_data(d, graph) or []))


PAGES = {
    "/": lambda d: css(d, "#overview-devices"),
    "/roofline": lambda d: has_points(d, "roofline-graph", "points", "ops"),
    "/timeline": lambda d: (
        has_points(d, "timeline-graph", "mode", "buckets") or has_points(d, "timeline-graph", "mode", "events")
    ),
    "/ops": lambda d: css(d, "#ops-table td[data-dash-column=name]"),
    "/compare": lambda d: css(d, "#compare-summary"),
    "/memory": lambda d: css(d, "#memory-summary"),
    "/llm": lambda d: css(d, "#llm-summary"),
    "/compiler": lambda d: css(d, "#compiler-source"),
}


def first_render(d, url: str, path: str, ready) -> tuple[float, int]:
    d.get("about:blank")
    t = time.perf_counter()
    d.get(url + path)
    wait_for(lambda: ready(d), 120, every=0.01, what=f"{path} content")
    return time.perf_counter() - t, max(update_sizes(d) or [0])


def interactions(d, url: str) -> list[tuple[str, float]]:
    from selenium.webdriver.common.action_chains import ActionChains

    out = []
    d.get(url + "/roofline")
    wait_for(lambda: PAGES["/roofline"](d), 120, what="roofline")
    dot = css(d, "#roofline-graph .scatterlayer path.point")[-1]
    t = time.perf_counter()
    ActionChains(d).move_to_element(dot).click().perform()
    wait_for(lambda: css(d, "#op-details"), 60, every=0.005, what="op details")
    out.append(("roofline: click a point -> its details", time.perf_counter() - t))
    for label, hw in (
        ("roofline: switch hardware (re-floor all ops)", "h100-sxm"),
        ("roofline: switch back (cached)", "as matched"),
    ):
        option = find_option(d, "hw-select", hw)  # the dropdown open, the option in view: then the user clicks
        t = time.perf_counter()
        d.execute_script("arguments[0].click();", option)
        name = "b200" if hw == "as matched" else hw
        wait_for(
            lambda name=name: (
                f"Roofline on {name}"
                in (
                    d.execute_script(
                        "const g = document.querySelector('#roofline-graph .js-plotly-plot'); "
                        "return g && g.layout.title.text;"
                    )
                    or ""
                )
            ),
            120,
            every=0.005,
            what=f"roofs of {name}",
        )
        out.append((label, time.perf_counter() - t))

    d.get(url + "/ops")
    wait_for(lambda: PAGES["/ops"](d), 120, what="ops")
    first = [c.text for c in css(d, "#ops-table td[data-dash-column=op]")]
    t = time.perf_counter()
    css(d, "#ops-table th[data-dash-column=efficiency] .column-header--sort")[0].click()
    wait_for(
        lambda: [c.text for c in css(d, "#ops-table td[data-dash-column=op]")] != first,
        60,
        every=0.005,
        what="sorted rows",
    )
    out.append(("ops: sort by efficiency", time.perf_counter() - t))
    t = time.perf_counter()
    css(d, "#ops-table td[data-dash-column=name]")[0].click()
    wait_for(lambda: css(d, "#op-details"), 60, every=0.005, what="op details")
    out.append(("ops: select a row -> its details", time.perf_counter() - t))

    d.get(url + "/timeline")
    wait_for(lambda: PAGES["/timeline"](d), 120, what="timeline")
    for label, (a, b) in (
        ("timeline: zoom to 10 ms", (100.0, 110.0)),
        ("timeline: zoom to 100 µs", (105.0, 105.1)),
        ("timeline: zoom to a 1 s window", (0.0, 1000.0)),
    ):
        before = d.find_element("id", "timeline-caption").text
        t = time.perf_counter()
        d.execute_script(
            "Plotly.relayout(document.querySelector('#timeline-graph .js-plotly-plot'),"
            "{'xaxis.range[0]': arguments[0], 'xaxis.range[1]': arguments[1]});",
            a,
            b,
        )
        wait_for(
            lambda before=before: d.find_element("id", "timeline-caption").text != before,
            60,
            every=0.005,
            what="re-queried window",
        )
        out.append((label, time.perf_counter() - t))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-payload", type=int, default=2_000_000, help="largest callback response allowed, bytes")
    args = ap.parse_args(argv)
    trace = args.trace or DEFAULT
    if not trace.exists():
        make_trace(trace)

    app = create_app([trace])
    store = app.perf_store
    tid = store.entries()[0].trace_id
    print(f"trace {trace} ({trace.stat().st_size / 2**20:.0f} MiB)")
    s_parse, t = timed(lambda: store.trace(tid))
    s_an, _ = timed(lambda: store.analysis(tid))
    s_ops, _ = timed(lambda: ops_for(store, tid, None))
    s_idx, idx = timed(lambda: timeline_for(store, tid))
    s_warm, _ = timed(lambda: warm(store, tid))  # the rest of what `perf dashboard` warms: one figure of each kind
    print(
        f"cold, server side (what `perf dashboard` warms in the background): "
        f"parse {s_parse:.2f} s ({len(t.events):,} events), "
        f"analysis {s_an:.2f} s, op table {s_ops:.2f} s, "
        f"timeline index {s_idx:.2f} s ({idx.events:,} outermost intervals), first figures {s_warm:.2f} s"
    )

    worst = 0
    with serving(app) as url, chromium() as d:
        first_render(d, url, "/", PAGES["/"])  # browser warm-up: scripts cached, as for a user's second page
        print(f"\n{'page':12} {'first render (s)':>18} {'target':>8} {'max response':>14}")
        for path, ready in PAGES.items():
            runs = [first_render(d, url, path, ready) for _ in range(args.repeat)]
            secs = [r[0] for r in runs]
            payload = max(r[1] for r in runs)
            worst = max(worst, payload)
            verdict = "ok" if statistics.median(secs) < PAGE_TARGET_S else "OVER"
            print(
                f"{path:12} {statistics.median(secs):>10.2f} (min {min(secs):.2f}) "
                f"{verdict:>6} {payload / 1e3:>11.0f} kB"
            )
        print(f"\n{'interaction':44} {'s':>6} {'target':>8}")
        for label, s in interactions(d, url):
            print(f"{label:44} {s:>6.3f} {'ok' if s < ACTION_TARGET_S else 'OVER':>8}")
        worst = max(worst, max(update_sizes(d) or [0]))
    store.close()
    print(f"\nlargest callback response: {worst / 1e3:.0f} kB (limit {args.max_payload / 1e3:.0f} kB)")
    if worst > args.max_payload:
        print("FAIL: a response exceeded the payload limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
