"""Dashboard under load: N concurrent sessions clicking through the pages for a while.

`perf dashboard TRACE` runs in its own process (the real server: werkzeug, one thread per
request); this process runs `--sessions` client threads. Each session, like a user, opens the
app, then repeatedly picks a page and sends the callbacks the browser sends for it (the router,
the page's body or figure, an ops page sorted a random way, a timeline zoom, an op selection, a
what-if preset now and then), pausing `--think` seconds (uniform 0.5x to 1.5x) between actions.
Every request is timed from send to last byte. An error is a connection failure, an HTTP status
other than 200/204, or a page that answers with an error box.

Prints requests, errors, p50 / p99 / max latency, overall and per callback, against the goal
(0 errors, p99 < 2 s; issue 11). Usage:

    bench_dashboard_load.py [--trace PATH] [--sessions 50] [--duration 180] [--think 1.0] [--port P]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_TRACE = REPO / "tests" / "data" / "traces" / "b200_eager" / "eager_trace.json.gz"
GOAL_P99_S = 2.0
PAGES = ["/", "/roofline", "/timeline", "/ops", "/compare", "/memory", "/llm", "/compiler"]
WHATIF = ["", "", "", "h100-sxm"]  # most sessions stay on the matched spec


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Session:
    """One user's connection and the callback bodies the browser would send."""

    def __init__(self, port: int, layout: dict, rng: random.Random) -> None:
        self.port, self.rng = port, rng
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.tid = layout["tid"]
        self.keys: dict[str, dict] = layout["callbacks"]

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def callback(self, prefix: str, values: dict) -> dict:
        key = next(k for k in self.keys if k.startswith(prefix) or k.lstrip(".").startswith(prefix))
        spec = self.keys[key]

        def item(d: dict) -> dict:
            return {"id": d["id"], "property": d["property"], "value": values.get(f"{d['id']}.{d['property']}")}

        parts = key[2:-2].split("...") if key.startswith("..") else [key]
        outputs = [dict(zip(("id", "property"), p.split(".", 1))) for p in parts]
        return {
            "output": key,
            "outputs": outputs if key.startswith("..") else outputs[0],
            "inputs": [item(d) for d in spec["inputs"]],
            "state": [item(d) for d in spec["state"]],
            "changedPropIds": [f"{d['id']}.{d['property']}" for d in spec["inputs"]],
        }

    def actions(self, page: str, hardware: str) -> list[tuple[str, str, dict | None]]:
        """(label, method+path, body) of the requests one visit to `page` makes."""
        v = {"trace-select.value": self.tid, "hardware.data": hardware, "url.pathname": page, "selected-op.data": None}
        out = [("route", "/_dash-update-component", self.callback("page.children", v))]
        if page == "/":
            out.append(("overview", "", self.callback("overview-body.children", v)))
        elif page == "/roofline":
            out += [
                ("roofline", "", self.callback("roofline-graph.figure", v)),
                ("roofline details", "", self.callback("roofline-details.children", v)),
            ]
            if self.rng.random() < 0.5:
                click = {"points": [{"customdata": [self.rng.randrange(5)]}]}
                out.append(
                    (
                        "roofline click",
                        "",
                        self.callback("..selected-op.data", {**v, "roofline-graph.clickData": click}),
                    )
                )
        elif page == "/timeline":
            out.append(("timeline", "", self.callback("timeline-graph.figure", v)))
            t0 = self.rng.uniform(0, 50)
            out.append(
                (
                    "timeline zoom",
                    "",
                    self.callback(
                        "timeline-graph.figure",
                        {**v, "timeline-window.data": {"t0": t0, "t1": t0 + self.rng.choice([0.1, 1, 10])}},
                    ),
                )
            )
        elif page == "/ops":
            col = self.rng.choice(["time_us", "efficiency", "name", "gflop"])
            q = {
                **v,
                "ops-table.page_current": self.rng.randrange(3),
                "ops-table.page_size": 25,
                "ops-table.sort_by": [{"column_id": col, "direction": self.rng.choice(["asc", "desc"])}],
                "ops-table.filter_query": self.rng.choice(["", "{name} contains mm", "{time_us} > 10"]),
            }
            out += [
                ("ops table", "", self.callback("ops-table.data", q)),
                ("ops details", "", self.callback("ops-details.children", v)),
            ]
        elif page == "/compare":
            out.append(
                (
                    "compare",
                    "",
                    self.callback(
                        "compare-body.children", {**v, "compare-a.value": self.tid, "compare-b.value": self.tid}
                    ),
                )
            )
        elif page == "/memory":
            out.append(("memory", "", self.callback("memory-body.children", v)))
        elif page == "/llm":
            out.append(("llm", "", self.callback("llm-body.children", v)))
        elif page == "/compiler":
            out.append(("compiler", "", self.callback("compiler-body.children", v)))
        return [(label, path or "/_dash-update-component", body) for label, path, body in out]


def discover(port: int) -> dict:
    """The callbacks the server exposes and the id of its first trace (what a browser learns)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("GET", "/_dash-dependencies")
    deps = json.loads(conn.getresponse().read())
    conn.request("GET", "/_dash-layout")
    layout = conn.getresponse().read().decode()
    tid = _first_value(json.loads(layout))
    callbacks = {}
    for d in deps:
        if d.get("clientside_function"):
            continue
        callbacks[d["output"]] = {"inputs": d["inputs"], "state": d["state"]}
    return {"tid": tid, "callbacks": callbacks}


def _first_value(node: object) -> str | None:
    """The trace picker's value in the layout JSON."""
    if isinstance(node, dict):
        props = node.get("props", {})
        if props.get("id") == "trace-select":
            return props.get("value")
        for v in props.values() if isinstance(props, dict) else ():
            found = _first_value(v)
            if found:
                return found
    elif isinstance(node, list):
        for v in node:
            found = _first_value(v)
            if found:
                return found
    return None


def run(args: argparse.Namespace) -> int:
    port = args.port or free_port()
    cmd = [sys.executable, "-m", "profiler", "dashboard", str(args.trace), "--port", str(port)]
    log = tempfile.TemporaryFile(mode="w+")  # the server logs each request: a pipe nobody reads would fill and stall it
    server = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log, text=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                layout = discover(port)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    print(log.read()[-3000:], file=sys.stderr)
                    return 2
                time.sleep(0.3)
        # warm: the first visit of every page once (what `perf dashboard` warms, plus the rest)
        warm = Session(port, layout, random.Random(0))
        for page in PAGES:
            for _, path, body in warm.actions(page, ""):
                warm.request("POST", path, body)
        samples: dict[str, list[float]] = defaultdict(list)
        errors: dict[str, int] = defaultdict(int)
        examples: list[str] = []
        lock = threading.Lock()
        stop = time.monotonic() + args.duration

        def user(i: int) -> None:
            rng = random.Random(i)
            s = Session(port, layout, rng)
            t = time.perf_counter()
            try:
                status, _ = s.request("GET", "/")
                ok = status == 200
            except OSError as e:
                ok, status = False, str(e)
            with lock:
                samples["GET /"].append(time.perf_counter() - t)
                if not ok:
                    errors["GET /"] += 1
            while time.monotonic() < stop:
                page, hw = rng.choice(PAGES), rng.choice(WHATIF)
                for label, path, body in s.actions(page, hw):
                    t = time.perf_counter()
                    try:
                        status, data = s.request("POST", path, body)
                        bad = status not in (200, 204) or b'"role":"alert"' in data
                        why = f"{label}: HTTP {status} {data[:200]!r}" if bad else ""
                    except OSError as e:
                        bad, why = True, f"{label}: {e}"
                    dt = time.perf_counter() - t
                    with lock:
                        samples[label].append(dt)
                        if bad:
                            errors[label] += 1
                            if len(examples) < 5:
                                examples.append(why)
                time.sleep(args.think * rng.uniform(0.5, 1.5))

        threads = [threading.Thread(target=user, args=(i,), daemon=True) for i in range(args.sessions)]
        t0 = time.monotonic()
        for th in threads:
            th.start()
            time.sleep(0.02)  # users arrive over a second, not in one instant
        for th in threads:
            th.join()
        wall = time.monotonic() - t0
    finally:
        server.terminate()
        server.wait(timeout=30)
    return report(args, samples, errors, examples, wall)


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))] if v else float("nan")


def report(
    args: argparse.Namespace, samples: dict[str, list[float]], errors: dict[str, int], examples: list[str], wall: float
) -> int:
    every = [x for v in samples.values() for x in v]
    n_err = sum(errors.values())
    print(f"trace {args.trace.name}: {args.sessions} sessions for {wall:.0f} s, think time {args.think:g} s")
    print(f"{'request':22} {'count':>7} {'errors':>7} {'p50 (s)':>9} {'p99 (s)':>9} {'max (s)':>9}")
    for label in sorted(samples, key=lambda k: -pct(samples[k], 0.99)):
        v = samples[label]
        print(
            f"{label:22} {len(v):>7} {errors.get(label, 0):>7} "
            f"{statistics.median(v):>9.3f} {pct(v, 0.99):>9.3f} {max(v):>9.3f}"
        )
    p50, p99 = statistics.median(every), pct(every, 0.99)
    print(f"{'all':22} {len(every):>7} {n_err:>7} {p50:>9.3f} {p99:>9.3f} {max(every):>9.3f}")
    print(f"throughput {len(every) / wall:.1f} requests/s")
    for e in examples:
        print("  error:", e)
    ok = n_err == 0 and p99 < GOAL_P99_S
    print(f"goal: 0 errors and p99 < {GOAL_P99_S:g} s -> {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--duration", type=float, default=180.0, help="seconds of load (default 3 minutes)")
    ap.add_argument("--think", type=float, default=1.0, help="mean pause between a session's actions, seconds")
    ap.add_argument("--port", type=int, default=0)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
