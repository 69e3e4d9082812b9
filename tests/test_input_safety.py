"""Bad input is bounded and one line (issue 11, section 2): only regular files are read (a FIFO,
a device, a socket are refused at once), decompression stops at --max-bytes, running out of
memory says so, deep nesting, control characters in names, unreadable files and bad arguments
are one escaped line, exit 2. Chunked reading of blank-padded traces is linear and exact."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.cli import app
from profiler.model import files
from tests.conftest import TRACES

REPO = Path(__file__).resolve().parents[1]
SEED = TRACES / "sglang_qwen3_decode_mi300x" / "sglang_Qwen3-8B_decode.json.gz"
runner = CliRunner()
MiB = 2**20


def perf(*args: object, timeout: float = 90) -> subprocess.CompletedProcess:
    """`python -m profiler ARGS` as a real process (a blocking read would hang the test runner)."""
    env = {k: v for k, v in os.environ.items() if k != "PERF_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "profiler", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
        check=False,
    )


def one_line(stderr: str, *words: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"want one line on stderr, got {stderr!r}"
    line = lines[0]
    assert line.startswith("perf: ") and "Traceback" not in line and "internal error" not in line, line
    assert "\x1b" not in line, line
    for w in words:
        assert w.lower() in line.lower(), (w, line)
    return line


# --------------------------------------------------------------------------------------------
# Only regular files: a FIFO would block the open forever, /dev/zero never ends.
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe.json"
    os.mkfifo(p)
    return p


def commands(path: Path, out: Path) -> dict[str, list[object]]:
    """Every command that reads a trace, a log or a spec, reading `path`."""
    return {
        "analyze": ["analyze", path],
        "analyze --hardware": ["analyze", SEED, "--hardware", path, "--section", "roofline"],
        "diff": ["diff", SEED, path],
        "gate": ["gate", "--base", path, "--new", SEED],
        "export": ["export", path, "-o", out],
        "compile-report": ["compile-report", path],
        "hardware show": ["hardware", "show", path],
        "dashboard": ["dashboard", path, "--port", "1"],
    }


@pytest.mark.parametrize("command", list(commands(Path("x"), Path("y"))))
def test_a_fifo_is_refused_at_once(fifo: Path, tmp_path: Path, command: str):
    r = perf(*commands(fifo, tmp_path / "out.pftrace")[command], timeout=60)  # before: blocked forever
    assert r.returncode == 2, r
    one_line(r.stderr, str(fifo), "FIFO", "not a regular file")


@pytest.mark.parametrize("command", ["analyze", "compile-report", "hardware show", "analyze --hardware"])
def test_a_device_is_refused_at_once(tmp_path: Path, command: str):
    r = perf(*commands(Path("/dev/zero"), tmp_path / "out.json")[command], timeout=60)  # before: read until killed
    assert r.returncode == 2, r
    one_line(r.stderr, "/dev/zero", "character device")


def test_a_socket_is_refused(tmp_path: Path):
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        r = runner.invoke(app, ["analyze", str(path)])
    assert r.exit_code == 2
    one_line(r.stderr, str(path), "socket")


def test_a_fifo_inside_a_directory_is_skipped(tmp_path: Path):
    """A directory's trace files are its regular files: a FIFO named like a trace is not opened."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "rank0.json.gz").write_bytes(SEED.read_bytes())
    os.mkfifo(d / "rank1.json")
    r = perf("analyze", d, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["trace"]["files"] == [str(d / "rank0.json.gz")]


# --------------------------------------------------------------------------------------------
# Bounded decompression
# --------------------------------------------------------------------------------------------


def bomb(path: Path, gib: int = 1) -> Path:
    """`gib` GiB of blanks from about 1 MB: one 64 MiB gzip member, repeated (members concatenate)."""
    member = gzip.compress(b" " * (64 * MiB), compresslevel=9)
    path.write_bytes(member * (16 * gib))
    return path


def test_a_gzip_bomb_stops_at_max_bytes(tmp_path: Path):
    """Refused while reading: the process never holds much more than the limit (peak RSS of the
    child stays under 1 GiB while the file holds 4 GiB). The peak is VmHWM, the high-water mark
    of the child's own address space: getrusage's ru_maxrss carries over exec the RSS of the
    (v)forked pytest worker, a gigabyte late in the suite, not the child's."""
    path = bomb(tmp_path / "bomb.json.gz", gib=4)
    code = (
        "import re, sys; from profiler.cli import main\n"
        "try: main(sys.argv[1:])\n"
        "finally: print('hwm_kib', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1],"
        " file=sys.stderr)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "analyze", str(path), "--max-bytes", "64M"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    lines = r.stderr.splitlines()
    rss_kib = int(lines.pop().split()[1])
    assert r.returncode == 2, r.stderr
    one_line("\n".join(lines), str(path), "more than the reading limit of 64.0 MiB", "--max-bytes")
    assert rss_kib < 1024 * 1024, f"peak RSS {rss_kib / 1024:.0f} MiB for a 64 MiB limit"


def test_the_default_limit_is_half_the_memory_available(monkeypatch, tmp_path: Path):
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo")
    kib = next(int(line.split()[1]) for line in meminfo.read_text().splitlines() if line.startswith("MemAvailable:"))
    # MemAvailable moves while we read it; the default is taken at another instant
    assert abs(files.default_max_bytes() - kib * 1024 // 2) < 256 * MiB
    # and it is what a read without --max-bytes obeys
    monkeypatch.setattr(files, "default_max_bytes", lambda: 8 * MiB)
    path = bomb(tmp_path / "bomb.json.gz", gib=1)
    r = runner.invoke(app, ["analyze", str(path)])
    assert r.exit_code == 2
    one_line(r.stderr, "more than the reading limit of 8.0 MiB")


def test_a_file_over_the_limit_is_refused_before_reading(tmp_path: Path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (3 * MiB))
    r = runner.invoke(app, ["analyze", str(path), "--max-bytes", "1M"])
    assert r.exit_code == 2
    one_line(r.stderr, str(path), "the file is 3.0 MiB, over the reading limit of 1.0 MiB")


def test_max_bytes_reaches_every_reader(tmp_path: Path):
    """diff, gate, export, compile-report take --max-bytes too (the seed is 594,892 bytes unpacked)."""
    for args in (
        ["diff", SEED, SEED],
        ["gate", "--base", SEED, "--new", SEED],
        ["export", SEED, "-o", tmp_path / "o.json"],
        ["compile-report", SEED],
    ):
        r = runner.invoke(app, [*map(str, args), "--max-bytes", "500K"])
        assert r.exit_code == 2, (args, r.output)
        one_line(r.stderr, "reading limit of 512,000 bytes")


def test_max_bytes_takes_sizes():
    assert files.parse_size("4096") == 4096
    assert files.parse_size("512M") == 512 * 2**20
    assert files.parse_size("1.5GiB") == 3 * 2**29
    assert files.parse_size("2g") == 2 * 2**30
    for bad in ("", "10x", "-1M", "0", "M"):
        with pytest.raises(ValueError):
            files.parse_size(bad)
    r = runner.invoke(app, ["analyze", str(SEED), "--max-bytes", "10x"])
    assert r.exit_code == 2
    one_line(r.stderr, "--max-bytes", "not a size")


def test_running_out_of_memory_says_so(monkeypatch, tmp_path: Path):
    """Before: 'corrupt gzip data ()' (the MemoryError's empty message)."""
    from isal import isal_zlib

    class NoMemory:
        def __init__(self, **kw):
            pass

        def decompress(self, data, max_length=0):
            raise MemoryError

    monkeypatch.setattr(isal_zlib, "decompressobj", NoMemory)
    r = runner.invoke(app, ["analyze", str(SEED)])
    assert r.exit_code == 2
    line = one_line(r.stderr, str(SEED), "out of memory while decompressing")
    assert "corrupt" not in line


# --------------------------------------------------------------------------------------------
# Deep nesting, names with control characters, unreadable files, bad arguments
# --------------------------------------------------------------------------------------------


def test_deep_json_nesting_is_one_line(tmp_path: Path):
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    r = runner.invoke(app, ["analyze", str(path)])  # before: "internal error (RecursionError ...)"
    assert r.exit_code == 2
    one_line(r.stderr, str(path), "nested deeper than")


def test_deep_yaml_nesting_is_one_line(tmp_path: Path):
    path = tmp_path / "deep.yaml"
    path.write_text("name: x\npeak_flops: " + "[" * 50_000 + "]" * 50_000 + "\n")
    r = runner.invoke(app, ["hardware", "show", str(path)])
    assert r.exit_code == 2
    one_line(r.stderr, str(path), "nested too deeply")


@pytest.mark.parametrize("name", ["new\nline.json", "red\x1b[31malert.json", "bell\x07.json"])
def test_control_characters_in_a_name_are_escaped(tmp_path: Path, name: str):
    r = perf("analyze", tmp_path / name)  # before: two lines, or the escape sent raw to the terminal
    assert r.returncode == 2
    line = one_line(r.stderr, "no such file or directory")
    assert name.encode("unicode_escape").decode() in line


def test_control_characters_in_an_existing_bad_file(tmp_path: Path):
    path = tmp_path / "two\nlines\x1b[2J.json"
    path.write_bytes(b"not json")
    r = perf("analyze", path)
    assert r.returncode == 2
    one_line(r.stderr, "two\\nlines\\x1b[2J.json", "not valid json")


def test_an_unreadable_file_is_one_line(tmp_path: Path, monkeypatch):
    path = tmp_path / "locked.json"
    path.write_bytes(gzip.decompress(SEED.read_bytes()))
    if os.geteuid() != 0:
        path.chmod(0)
    else:  # root reads anything: refuse the open as the kernel would
        real_open = os.open

        def no_access(p, *a, **kw):
            if str(p) == str(path):
                raise PermissionError(13, "Permission denied", str(p))
            return real_open(p, *a, **kw)

        monkeypatch.setattr(os, "open", no_access)
    r = runner.invoke(app, ["analyze", str(path)])
    assert r.exit_code == 2
    one_line(r.stderr, str(path), "cannot read: permission denied")


def test_an_unreadable_directory_is_one_line(tmp_path: Path, monkeypatch):
    d = tmp_path / "locked"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o300)  # can enter, cannot list
    else:
        real = Path.iterdir
        monkeypatch.setattr(
            Path,
            "iterdir",
            lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied")) if self == d else real(self),
        )
    r = runner.invoke(app, ["analyze", str(d)])  # before: "internal error (PermissionError ...)"
    assert r.exit_code == 2
    one_line(r.stderr, str(d), "cannot read the directory: permission denied")


@pytest.mark.parametrize(
    "args",
    [["analyze", "x.json", "--top", "abc"], ["analyze", "x.json", "--bogus"], ["analyze"], ["analyse\n\x1b[31m", "x"]],
)
def test_bad_arguments_are_one_line(args: list[str]):
    r = perf(*args)  # before: a usage line, a hint, and a three-line box
    assert r.returncode == 2
    line = one_line(r.stderr)
    assert "--help" in line and r.stdout == ""


def test_help_and_version_still_work():
    r = perf("--version")
    assert r.returncode == 0 and r.stdout.strip() == "0.1.0"
    r = perf("analyze", "--help")
    assert r.returncode == 0 and "--max-bytes" in r.stdout


# --------------------------------------------------------------------------------------------
# Blank-padded traces: the chunk reader trims in C, not a byte at a time
# --------------------------------------------------------------------------------------------


def test_a_blank_padded_trace_reads_as_the_compact_one(tmp_path: Path, monkeypatch):
    """The seed's events written one per line with runs of blanks (spaces, tabs, CR, blank lines)
    between and around them, read in many small chunks: the same events as the compact file."""
    from collectors.kineto import chunks, parallel
    from profiler.api import load_trace

    doc = json.loads(gzip.decompress(SEED.read_bytes()))
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(doc))
    pads = [" " * 5000, "\n" * 3000, "\t \r\n" * 700, "\n" + " " * 9000, ""]
    lines = [json.dumps(e) for e in doc["traceEvents"]]
    body = "".join(f"\n{pads[i % len(pads)]}{line}{pads[(i + 2) % len(pads)]}," for i, line in enumerate(lines)).rstrip(
        ","
    )
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    padded = tmp_path / "padded.json"
    padded.write_text(
        "  \n" * 1000 + '{"traceEvents": [' + body + "\n" * 5000 + "]," + json.dumps(top)[1:] + " " * 100_000
    )
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 64 * 1024)  # hundreds of chunks, boundaries in the blanks
    monkeypatch.setattr(parallel, "MIN_CHUNKS", 10**9)  # in this process
    assert len(chunks.spans(_events_raw(padded))) > 100
    a, b = load_trace(compact), load_trace(padded)
    assert len(b.events) == len(a.events) > 1000
    cols = ["ts", "dur", "name", "kind", "track", "parent_id", "op_id"]
    assert b.events[cols].astype(str).equals(a.events[cols].astype(str))
    assert b.problems.counts == a.problems.counts


def _events_raw(path: Path):
    from collectors.kineto.decode import split_top
    from profiler.model.trace import Problems

    return split_top(path, path.read_bytes(), Problems())["traceEvents"]
