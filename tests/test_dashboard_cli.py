"""`perf dashboard`: serves on 127.0.0.1 by default; bad paths are one-line errors (exit 2)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.conftest import real_trace

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """Local addresses listening on `port` (from /proc/net/tcp: hex IPv4, little-endian)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if int(p, 16) == port and state == "0A":  # 0A: LISTEN
            out.add(".".join(str(int(addr[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return out


def test_serves_the_given_trace_on_localhost_only():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "profiler", "dashboard", str(real_trace("b200_eager")), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _listening(port):
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        assert _listening(port) == {"127.0.0.1"}
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read().decode()
        assert "<title>perf dashboard</title>" in page and "_dash-config" in page
        layout = urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-layout", timeout=30).read().decode()
        assert "eager_trace.json.gz" in layout  # the trace is offered in the picker
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_missing_trace_is_a_one_line_error():
    r = subprocess.run(
        [sys.executable, "-m", "profiler", "dashboard", "/no/such/trace.json"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == "perf: /no/such/trace.json: no such file or directory"
