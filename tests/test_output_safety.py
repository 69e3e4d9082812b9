"""Nothing the user gave is lost (issue 11, section 3): `perf export` never writes over its input,
replaces an existing file only with --force, and writes whole or not at all (a temporary file
beside the target, fsynced, renamed); calibrate and profile refuse an existing output before
their work; the dashboard's upload folder is removed on SIGTERM and SIGINT."""

from __future__ import annotations

import base64
import errno
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.cli import app
from profiler.model import files
from tests.conftest import TRACES
from tests.test_dashboard_cli import _free_port, _listening

REPO = Path(__file__).resolve().parents[1]
SEED = TRACES / "sglang_qwen3_decode_mi300x" / "sglang_Qwen3-8B_decode.json.gz"
runner = CliRunner()


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def one_line(r, *words: str) -> str:
    lines = r.stderr.splitlines()
    assert r.exit_code == 2 and len(lines) == 1, (r.exit_code, r.output)
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "in.json"
    p.write_bytes(gzip.decompress(SEED.read_bytes()))
    return p


@pytest.mark.parametrize("same", ["same path", "other spelling", "hard link"])
def test_export_never_writes_over_its_input(trace: Path, same: str):
    """Before: -o equal to the input rewrote it (losing the argument keys the export does not keep)."""
    before = sha(trace)
    out = {
        "same path": trace,
        "other spelling": trace.parent / "." / trace.name,
        "hard link": trace.parent / "link.json",
    }[same]
    if same == "hard link":
        os.link(trace, out)
    for force in ([], ["--force"]):
        r = runner.invoke(app, ["export", str(trace), "-o", str(out), *force])
        one_line(r, "is an input of this command")
    assert sha(trace) == before


def test_export_does_not_write_into_an_input_directory(tmp_path: Path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "rank0.json.gz").write_bytes(SEED.read_bytes())
    r = runner.invoke(app, ["export", str(d), "-o", str(d / "out.json"), "--force"])
    one_line(r, "inside the input directory")
    assert [p.name for p in d.iterdir()] == ["rank0.json.gz"]


def test_export_replaces_an_existing_file_only_with_force(trace: Path, tmp_path: Path):
    out = tmp_path / "out.pftrace"
    out.write_bytes(b"keep me")
    r = runner.invoke(app, ["export", str(trace), "-o", str(out)])
    one_line(r, "already exists; pass --force")
    assert out.read_bytes() == b"keep me"
    r = runner.invoke(app, ["export", str(trace), "-o", str(out), "--force"])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:1] == b"\x0a" and out.stat().st_size > 1000  # a Perfetto trace now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json", "out.pftrace"]  # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(trace: Path, tmp_path: Path, monkeypatch):
    """A full disk at the last moment (fsync fails with ENOSPC): the old file is whole, nothing else remains."""
    out = tmp_path / "out.json"
    out.write_bytes(b"old export")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    r = runner.invoke(app, ["export", str(trace), "-o", str(out), "--force"])
    one_line(r, str(out), "cannot write: No space left on device")
    assert out.read_bytes() == b"old export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json", "out.json"]


def test_a_killed_write_leaves_the_old_file(tmp_path: Path):
    """A process killed while writing: the target is the old file, whole (the partial data went to
    a temporary name)."""
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    code = (
        "import os, sys; from profiler.model.files import atomic_path\n"
        "with atomic_path(sys.argv[1], force=True) as tmp:\n"
        "    with open(tmp, 'wb') as f:\n"
        "        f.write(b'x' * 1000); f.flush(); print('writing', flush=True); os.kill(os.getpid(), 9)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(out)], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert p.returncode == -9 and "writing" in p.stdout
    assert out.read_bytes() == b"old"


def test_write_atomic_keeps_the_mode_and_refuses_a_race(tmp_path: Path):
    out = tmp_path / "spec.yaml"
    files.write_atomic(out, b"a")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() would have made it, not mkstemp's 0600
    out.chmod(0o640)
    files.write_atomic(out, b"b", force=True)
    assert out.read_bytes() == b"b" and out.stat().st_mode & 0o777 == 0o640
    # the file appears between the check and the rename: not replaced without force
    with pytest.raises(files.InputError, match="already exists"), files.atomic_path(tmp_path / "late.yaml") as tmp:
        tmp.write_bytes(b"mine")
        (tmp_path / "late.yaml").write_bytes(b"theirs")
    assert (tmp_path / "late.yaml").read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late.yaml", "spec.yaml"]


def test_multi_rank_chrome_export_checks_every_file_first(tmp_path: Path):
    d = tmp_path / "ranks"
    d.mkdir()
    for i, f in enumerate(sorted((TRACES / "dlrm_8rank_v100").glob("*.json.gz"))[:2]):
        (d / f"w{i}.json.gz").write_bytes(f.read_bytes())
    out = tmp_path / "out.json"
    (tmp_path / "out.rank1.json").write_bytes(b"rank 1 of an older export")
    r = runner.invoke(app, ["export", str(d), "-o", str(out), "--no-analysis"])
    one_line(r, "out.rank1.json", "already exists")
    assert not (tmp_path / "out.rank0.json").exists()  # nothing written when one target is refused
    assert (tmp_path / "out.rank1.json").read_bytes() == b"rank 1 of an older export"


def test_calibrate_refuses_an_existing_output_before_measuring(tmp_path: Path):
    out = tmp_path / "calibrated.yaml"
    out.write_text("mine\n")
    t0 = time.monotonic()
    r = runner.invoke(app, ["calibrate", "-o", str(out), "--quick", "--no-links"])
    one_line(r, "already exists; pass --force")
    assert time.monotonic() - t0 < 30 and out.read_text() == "mine\n"


def test_profile_refuses_an_existing_output_before_running(tmp_path: Path):
    script = tmp_path / "train.py"
    marker = tmp_path / "ran"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    out = tmp_path / "t.json.gz"
    out.write_bytes(b"an earlier trace")
    r = runner.invoke(app, ["profile", "-o", str(out), str(script)])
    one_line(r, "already exists; pass --force")
    assert not marker.exists() and out.read_bytes() == b"an earlier trace"
    r = runner.invoke(app, ["profile", "-o", str(script), str(script)])
    one_line(r, "is an input of this command")


# --------------------------------------------------------------------------------------------
# The dashboard's upload folder on SIGTERM / SIGINT
# --------------------------------------------------------------------------------------------


def _upload(port: int) -> str:
    """Upload the seed through the page's upload callback, as the browser does; the message."""
    deps = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-dependencies", timeout=60).read())
    cb = next(d for d in deps if any(i["id"] == "upload-payload" and i["property"] == "data" for i in d["inputs"]))
    outputs = [
        dict(zip(("id", "property"), o.split("@")[0].rsplit(".", 1))) for o in cb["output"].strip(".").split("...")
    ]
    contents = "data:application/gzip;base64," + base64.b64encode(SEED.read_bytes()).decode()
    body = {
        "output": cb["output"],
        "outputs": outputs,
        "changedPropIds": ["upload-payload.data"],
        "state": cb["state"],
        "inputs": [
            {"id": "upload-payload", "property": "data", "value": {"filename": "t.json.gz", "contents": contents}}
        ],
    }
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/_dash-update-component",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    return urllib.request.urlopen(req, timeout=120).read().decode()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_dashboard_upload_folder_is_removed_on_signal(tmp_path: Path, sig: int):
    port = _free_port()
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the store's folder goes under tmp_path
    proc = subprocess.Popen(
        [sys.executable, "-m", "profiler", "dashboard", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _listening(port):
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        assert "loaded t.json.gz" in _upload(port)
        folders = list(tmp_path.glob("perf-dashboard-*"))
        assert len(folders) == 1 and any(folders[0].iterdir()), "the upload is in the store's folder"
        proc.send_signal(sig)
        assert proc.wait(timeout=60) != -signal.SIGKILL
        assert not folders[0].exists(), f"{folders[0]} left behind after {signal.Signals(sig).name}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in proc.stderr.read()


def test_tempfile_dir_follows_tmpdir(tmp_path: Path):
    """The dashboard test above relies on TMPDIR steering tempfile.mkdtemp (as it does on POSIX)."""
    code = "import tempfile; print(tempfile.gettempdir())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout.strip()
    assert out == str(tmp_path) != tempfile.gettempdir()
