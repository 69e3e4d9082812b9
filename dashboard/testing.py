"""Run the dashboard in a thread and drive it with headless Chromium: for the browser tests and
the benchmark (not for the app itself; selenium is a test dependency, imported here lazily)."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


@contextmanager
def serving(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve a Dash app on a free port of `host` in a thread; yields its URL; stops it after."""
    from werkzeug.serving import make_server

    server = make_server(host, 0, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="perf-dashboard-test")
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@contextmanager
def chromium(download_dir: Path | None = None) -> Iterator[Any]:
    """A headless Chromium WebDriver with a fresh profile (and downloads allowed into `download_dir`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="perf-chromium-") as profile:
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in (*CHROME_FLAGS, f"--user-data-dir={profile}"):
            opts.add_argument(flag)
        driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
        try:
            if download_dir is not None:
                download_dir.mkdir(parents=True, exist_ok=True)
                driver.execute_cdp_cmd(
                    "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(download_dir)}
                )
            yield driver
        finally:
            driver.quit()


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, every: float = 0.05, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy (returned), or raise TimeoutError."""
    end = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < end:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - the page is still rendering
            last = e
        time.sleep(every)
    raise TimeoutError(
        f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last error: {last})" if last else "")
    )


def graph_data(driver: Any, graph_id: str) -> list[dict]:
    """The plotly traces a dcc.Graph currently shows: name, meta, number of points, y (roofs)."""
    return driver.execute_script(
        "const gd = document.querySelector('#' + arguments[0] + ' .js-plotly-plot');"
        "if (!gd || !gd._fullData) return null;"  # _fullData: arrays decoded (plotly ships typed arrays as base64)
        "return gd._fullData.map(t => ({name: t.name, type: t.type, meta: t.meta || null,"
        " n: (t.x && t.x.length) || (t.z && t.z.length) || 0,"
        " y: t.type === 'heatmap' ? null : Array.from(t.y || []).slice(0, 4)}));",
        graph_id,
    )


def update_sizes(driver: Any) -> list[int]:
    """Body sizes (bytes, as received) of the Dash callback responses this page has fetched."""
    return (
        driver.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter(e => e.name.includes('_dash-update-component')).map(e => e.encodedBodySize);"
        )
        or []
    )


def find_option(driver: Any, dropdown_id: str, label: str) -> Any:
    """Open a dcc.Dropdown, search for `label`, and return the first option whose text holds it."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f"#{dropdown_id}").click()
    search = wait_for(
        lambda: driver.find_elements(By.CSS_SELECTOR, "input.dash-dropdown-search"), 10, what="the search box"
    )
    search[0].send_keys(label)
    return wait_for(
        lambda: [o for o in driver.find_elements(By.CSS_SELECTOR, "[role=option]") if label in o.text],
        10,
        what=f"option {label!r} in #{dropdown_id}",
    )[0]


def pick(driver: Any, dropdown_id: str, label: str) -> None:
    """Choose the option whose text contains `label` in a dcc.Dropdown."""
    driver.execute_script(
        "arguments[0].click();", find_option(driver, dropdown_id, label)
    )  # a script click: no overlay intercepts it


def callback_keys(app: Any) -> list[str]:
    """The keys of the app's server-side callbacks (clientside ones run in the browser)."""
    return [k for k, v in app.callback_map.items() if "callback" in v]


def callback_body(app: Any, key: str, values: dict[str, Any] | None = None, default: Any = None) -> dict:
    """The JSON body dash-renderer posts to /_dash-update-component for callback `key`, with each
    input and state 'id.property' set from `values` (else `default`): every input changed."""
    spec = app.callback_map[key]
    values = values or {}

    def item(d: dict) -> dict:
        name = f"{d['id']}.{d['property']}"
        return {"id": d["id"], "property": d["property"], "value": values.get(name, default)}

    parts = key[2:-2].split("...") if key.startswith("..") else [key]
    outputs = [dict(zip(("id", "property"), p.split(".", 1))) for p in parts]
    return {
        "output": key,
        "outputs": outputs if key.startswith("..") else outputs[0],
        "inputs": [item(d) for d in spec["inputs"]],
        "state": [item(d) for d in spec["state"]],
        "changedPropIds": [f"{d['id']}.{d['property']}" for d in spec["inputs"]],
    }
